"""The CRD manifests are generated from the pydantic models: one source of truth."""

from pathlib import Path

import yaml

from kaid.api.crdgen import crd_documents, render

CRDS = Path(__file__).resolve().parent.parent / "manifests" / "helm" / "kai" / "crds"


def test_crd_files_match_models() -> None:
    for name, doc in crd_documents().items():
        path = CRDS / name
        assert path.exists(), f"{path} is missing: run `python -m kaid.api.crdgen`"
        assert path.read_text() == render(doc), f"{path} is stale: run `python -m kaid.api.crdgen`"


def test_queue_schema_carries_the_contract_fields() -> None:
    doc = yaml.safe_load((CRDS / "queues.yaml").read_text())
    assert doc["spec"]["group"] == "scheduling.run.ai" and doc["spec"]["scope"] == "Cluster"
    version = doc["spec"]["versions"][0]
    assert version["name"] == "v2"
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(spec) >= {"displayName", "parentQueue", "priority", "preemptMinRuntime", "reclaimMinRuntime",
                         "resources"}
    gpu = spec["resources"]["properties"]["gpu"]["properties"]
    assert set(gpu) == {"quota", "limit", "overQuotaWeight"} and gpu["quota"]["type"] == "number"


def test_podgroup_schema() -> None:
    doc = yaml.safe_load((CRDS / "podgroups.yaml").read_text())
    assert doc["spec"]["versions"][0]["name"] == "v2alpha2"
    assert doc["spec"]["names"]["shortNames"] == ["pg"]
    spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["preemptibility"]["enum"] == ["preemptible", "non-preemptible"]
    assert set(spec["topologyConstraint"]["properties"]) == {"topology", "requiredTopologyLevel",
                                                             "preferredTopologyLevel"}


def test_podgroup_subgroups_carry_their_own_topology_constraint() -> None:
    """KAI's v2alpha2 SubGroup.topologyConstraint (the PodGroup's fields): kept by the API server (a structural
    schema prunes a field it does not list) and read into the job's sub-groups."""
    from kaid.api.crds import PodGroupSpec

    doc = yaml.safe_load((CRDS / "podgroups.yaml").read_text())
    spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    sub = spec["subGroups"]["items"]["properties"]
    assert set(sub["topologyConstraint"]["properties"]) == {"topology", "requiredTopologyLevel",
                                                            "preferredTopologyLevel"}
    read = PodGroupSpec.model_validate({"subGroups": [
        {"name": "a", "minMember": 2, "topologyConstraint": {"topology": "t", "preferredTopologyLevel": "rack"}},
        {"name": "b"}]})
    a, b = (s.model_dump() for s in read.subGroups)
    assert a["topologyConstraint"] == {"topology": "t", "requiredTopologyLevel": None, "preferredTopologyLevel": "rack"}
    assert b["topologyConstraint"] is None
