"""The Helm chart (manifests/helm/kai) with the real helm: lint, templates for the default and the
GPU-sharing values, the values schema, KAI's value names, and the kustomize manifests rendered from it.

helm is built from its Go module by .ci/helm/build.sh the first time (a few minutes; cached afterwards).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaid.api.config import SchedulerConfig

from .chart import (
    CHART,
    HEADER,
    MANIFESTS,
    SCHEMA,
    Helm,
    HelmError,
    kustomize_files,
    stale_generated_files,
    values_schema,
)

Obj = dict[str, Any]
GPU_SHARING = {"global": {"gpuSharing": True}}


def objects(rendered: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def kinds(objs: list[Obj]) -> Counter[str]:
    return Counter(o["kind"] for o in objs)


def find(objs: list[Obj], kind: str, name: str) -> Obj:
    matches = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} rendered"
    return matches[0]


def kaid_config(objs: list[Obj], config_map: str = "kai-scheduler-config") -> SchedulerConfig:
    """A scheduler's config file as rendered, validated by kaid's own model."""
    data = yaml.safe_load(find(objs, "ConfigMap", config_map)["data"]["config.yaml"])
    return SchedulerConfig.model_validate(data)


def containers(objs: list[Obj]) -> Iterator[Obj]:
    for o in objs:
        spec = o.get("spec", {}).get("template", {}).get("spec", {})
        yield from spec.get("containers", [])


# --------------------------------------------------------------------------------------------------
# One source of truth


def test_kustomize_manifests_are_rendered_from_the_chart(helm: Helm) -> None:
    expected = kustomize_files(helm)
    for path, text in expected.items():
        assert path.exists(), f"{path} is missing: run `python -m tests.chart`"
        assert path.read_text() == text, f"{path} is stale: edit the chart, then run `python -m tests.chart`"
    assert stale_generated_files(expected) == [], "generated files the chart no longer renders: python -m tests.chart"
    # every kustomize file of the install is either rendered or listed as kept by hand
    assert MANIFESTS / "kustomization.yaml" in expected and (MANIFESTS / "namespace.yaml").exists()


def test_values_schema_config_part_is_kaids_config_model() -> None:
    assert SCHEMA.read_text() == values_schema(), f"{SCHEMA} is stale: run `python -m tests.chart`"


def test_every_chart_value_is_documented_in_values_yaml_and_the_schema() -> None:
    schema = json.loads(SCHEMA.read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    text = (CHART / "values.yaml").read_text()

    def walk(node: Obj, props: Obj, path: str) -> None:
        for key, value in node.items():
            where = f"{path}{key}"
            assert key in props, f"{where} in values.yaml is not in values.schema.json"
            prop = props[key]
            if path.startswith("config"):
                continue  # kaid's own settings: described by kaid/api/config.py
            assert prop.get("description"), f"{where} has no description in values.schema.json"
            if isinstance(value, dict) and "properties" in prop:
                walk(value, prop["properties"], where + ".")

    walk(values, schema["properties"], "")
    # each top-level section carries a comment in values.yaml
    for key in values:
        line = text.splitlines().index(f"{key}:")
        assert text.splitlines()[line - 1].startswith("#"), f"{key} in values.yaml has no comment above it"


# --------------------------------------------------------------------------------------------------
# helm lint and template


@pytest.mark.parametrize("values", [{}, GPU_SHARING], ids=["default", "gpu-sharing"])
def test_helm_lint(helm: Helm, values: Obj, tmp_path: Path) -> None:
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values))
    out = helm.run("lint", "--strict", str(CHART), "--namespace", "kai-scheduler", "--values", str(path))
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout


def test_template_default(helm: Helm) -> None:
    objs = objects(helm.template())
    assert kinds(objs) == {
        "PriorityClass": 4, "PodDisruptionBudget": 1, "ServiceAccount": 1, "ConfigMap": 1, "ClusterRole": 1,
        "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1, "Service": 1, "Deployment": 1, "Queue": 2,
    }  # fmt: skip
    deploy = find(objs, "Deployment", "kai-scheduler")
    assert deploy["spec"]["replicas"] == 2
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (kaid,) = pod["containers"]
    assert kaid["image"] == "ghcr.io/kai-scheduler/kaid:0.1.0"
    assert kaid["securityContext"]["readOnlyRootFilesystem"] is True
    assert kaid["args"][:3] == ["run", "--config", "/etc/kai/config.yaml"]
    config = kaid_config(objs)
    assert config.leaderElection.enabled and config.leaderElection.namespace == "kai-scheduler"
    assert config.defaultQueue == "default-queue"
    queue = find(objs, "Queue", "default-queue")
    assert queue["spec"]["parentQueue"] == "default-parent-queue"
    assert queue["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_template_follows_the_release_namespace(helm: Helm) -> None:
    objs = objects(helm.template(namespace="kai-system"))
    namespaced = [o for o in objs if "namespace" in o["metadata"]]
    assert namespaced and {o["metadata"]["namespace"] for o in namespaced} == {"kai-system"}
    assert find(objs, "ClusterRoleBinding", "kai-scheduler")["subjects"][0]["namespace"] == "kai-system"
    assert kaid_config(objs).leaderElection.namespace == "kai-system"


def test_kai_named_values_mean_what_they_mean_in_kai(helm: Helm) -> None:
    objs = objects(helm.template({
        "global": {"registry": "registry.local/kai/", "tag": "v9", "leaderElection": False,
                   "imagePullSecrets": [{"name": "pull"}]},
        "scheduler": {"placementStrategy": "spread", "replicas": 1},
        "defaultQueue": {"childName": "team-default", "parentName": "org"},
        "defaultPriorityClasses": {"enabled": False},
    }))  # fmt: skip
    assert {c["image"] for c in containers(objs)} == {"registry.local/kai/kaid:v9"}
    config = kaid_config(objs)
    assert config.placement.gpu == config.placement.cpu == "spread"
    assert config.defaultQueue == "team-default" and not config.leaderElection.enabled
    assert find(objs, "Queue", "team-default")["spec"]["parentQueue"] == "org"
    assert "PriorityClass" not in kinds(objs) and "PodDisruptionBudget" not in kinds(objs)
    pod = find(objs, "Deployment", "kai-scheduler")["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "pull"}]


def test_config_value_wins_over_the_values_it_overlaps(helm: Helm) -> None:
    objs = objects(helm.template({"config": {"placement": {"gpu": "spread"}, "cyclePeriodSeconds": 2}}))
    config = kaid_config(objs)
    assert config.placement.gpu == "spread" and config.placement.cpu == "binpack"
    assert config.cyclePeriodSeconds == 2


def test_optional_parts(helm: Helm) -> None:
    objs = objects(helm.template({
        "defaultQueue": {"createDefaultQueue": False},
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
    }))  # fmt: skip
    assert "Queue" not in kinds(objs)
    monitor = find(objs, "ServiceMonitor", "kai-scheduler")
    assert monitor["metadata"]["labels"]["release"] == "prom"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"global": {"gpuSharng": True}}, "gpuSharng"),
        ({"scheduler": {"replicas": "two"}}, "replicas"),
        ({"scheduler": {"placementStrategy": "pack"}}, "placementStrategy"),
        ({"config": {"cyclePeriodSecond": 1}}, "cyclePeriodSecond"),
        ({"config": {"placement": {"gangSolver": "magic"}}}, "gangSolver"),
        ({"defaultQueue": {"childResources": {"gpu": {"quota": -2}}}}, "quota"),
    ],
    ids=["misspelt-key", "wrong-type", "bad-enum", "config-misspelt", "config-bad-enum", "queue-quota"],
)
def test_schema_rejects_bad_values_naming_them(helm: Helm, values: Obj, message: str) -> None:
    with pytest.raises(HelmError, match=message):
        helm.template(values)


def test_generated_files_carry_the_header() -> None:
    for path in (MANIFESTS / "deployment.yaml", MANIFESTS / "rbac.yaml", MANIFESTS / "default-queues" / "queues.yaml"):
        assert path.read_text().startswith(HEADER)


def test_template_gpu_sharing_brings_the_webhook_the_reservation_namespace_and_the_node_agent(helm: Helm) -> None:
    objs = objects(helm.template({
        **GPU_SHARING, "admission": {"gpuFractionRuntimeClassName": "", "cdi": True},
        "global": {"gpuSharing": True, "resourceReservation": {"namespace": "kai-hold", "runtimeClassName": "nvidia"}},
        "config": {"schedulerName": "my-kai", "gpuSharing": {"reservationTimeoutSeconds": 20}},
    }))  # fmt: skip
    gpu = kaid_config(objs).gpuSharing
    assert gpu.enabled and gpu.reservationNamespace == "kai-hold" and gpu.reservationRuntimeClassName == "nvidia"
    assert gpu.cdi and gpu.runtimeClassName == "" and gpu.reservationTimeoutSeconds == 20
    assert gpu.reservationImage == "ghcr.io/kai-scheduler/kaid:0.1.0"
    assert find(objs, "Namespace", "kai-hold")
    assert find(objs, "RoleBinding", "kai-scheduler-reservations")["metadata"]["namespace"] == "kai-hold"
    hook = find(objs, "Deployment", "kai-webhook")
    assert hook["spec"]["replicas"] == 2 and hook["spec"]["template"]["spec"]["containers"][0]["args"][0] == "webhook"
    assert find(objs, "PodDisruptionBudget", "kai-webhook")
    mutating = find(objs, "MutatingWebhookConfiguration", "kai-webhook")["webhooks"][0]
    assert mutating["failurePolicy"] == "Fail" and mutating["clientConfig"]["service"]["path"] == "/mutate-pod"
    assert mutating["matchConditions"][0]["expression"] == "object.spec.schedulerName == 'my-kai'"
    validating = find(objs, "ValidatingWebhookConfiguration", "kai-webhook")["webhooks"]
    assert {w["clientConfig"]["service"]["path"]: w["failurePolicy"] for w in validating} == {
        "/validate-pod": "Fail", "/validate-queue": "Ignore", "/validate-podgroup": "Ignore"}
    agent = find(objs, "DaemonSet", "kai-node-agent")["spec"]["template"]["spec"]
    assert agent["nodeSelector"] == {"nvidia.com/gpu.present": "true"} and agent["runtimeClassName"] == "nvidia"
    rules = find(objs, "ClusterRole", "kai-scheduler")["rules"]
    assert any(r["resources"] == ["configmaps"] for r in rules)
    assert not any(r["resources"] == ["configmaps"] for r in find(objects(helm.template()), "ClusterRole",
                                                                   "kai-scheduler")["rules"])


def test_gpu_sharing_runtime_classes_take_kais_names(helm: Helm) -> None:
    objs = objects(helm.template({
        "global": {"gpuSharing": True, "resourceReservation": {"createNamespace": False}},
        "admission": {"gpuPodRuntimeClassName": "old", "gpuFractionRuntimeClassName": "kata"},
        "binder": {"runtimeClassName": "nvidia-legacy"},
    }))  # fmt: skip
    gpu = kaid_config(objs).gpuSharing
    assert gpu.runtimeClassName == "kata"  # KAI's newer name wins over its older one, as in KAI
    assert gpu.reservationRuntimeClassName == "nvidia-legacy"  # KAI's binder.runtimeClassName
    assert "Namespace" not in kinds(objs)
    older = kaid_config(objects(helm.template({"admission": {"gpuPodRuntimeClassName": "old"}}))).gpuSharing
    assert older.runtimeClassName == "old" and not older.enabled  # off by default: bookkeeping only


def test_scheduling_shard_values(helm: Helm) -> None:
    default = kaid_config(objects(helm.template()))
    assert (default.nodePoolLabelKey, default.partitionLabelValue) == ("kai.scheduler/node-pool", "")
    assert default.leaderElection.name == "kai-scheduler"
    shard = kaid_config(objects(helm.template({"global": {"nodePoolLabelKey": "example.com/pool"},
                                               "scheduler": {"partitionLabelValue": "GPU_a.1"}})))
    assert (shard.nodePoolLabelKey, shard.partitionLabelValue) == ("example.com/pool", "GPU_a.1")
    assert shard.leaderElection.name == "kai-scheduler-gpu-a-1"  # a lease of its own: both shards act
    everything = kaid_config(objects(helm.template({"config": {"nodePoolLabelKey": ""}})))
    assert everything.nodePoolLabelKey == ""


def test_one_release_runs_a_scheduler_per_shard(helm: Helm) -> None:
    """scheduler.shards: KAI's SchedulingShards in one release, each its own config, Deployment and lease."""
    objs = objects(helm.template({"scheduler": {"shards": [
        {"partitionLabelValue": "pool-a"}, {"partitionLabelValue": "Pool_B", "placementStrategy": "spread",
                                            "replicas": 1}]}}))
    schedulers = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Deployment"
                  and o["spec"]["template"]["spec"]["containers"][0]["args"][0] == "run"}
    assert set(schedulers) == {"kai-scheduler", "kai-scheduler-pool-a", "kai-scheduler-pool-b"}
    selectors = [tuple(sorted(d["spec"]["selector"]["matchLabels"].items())) for d in schedulers.values()]
    assert len(set(selectors)) == 3  # no Deployment adopts another's pods
    shards = {}
    for name, deployment in schedulers.items():
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        shards[name] = kaid_config(objs, volumes["config"]["configMap"]["name"])
        assert deployment["spec"]["template"]["metadata"]["labels"].items() >= \
            deployment["spec"]["selector"]["matchLabels"].items()
    assert {n: (c.partitionLabelValue, c.leaderElection.name) for n, c in shards.items()} == {
        "kai-scheduler": ("", "kai-scheduler"), "kai-scheduler-pool-a": ("pool-a", "kai-scheduler-pool-a"),
        "kai-scheduler-pool-b": ("Pool_B", "kai-scheduler-pool-b")}
    assert shards["kai-scheduler-pool-b"].placement.gpu == "spread"
    assert shards["kai-scheduler-pool-a"].placement.gpu == "binpack"  # unset: the scheduler's
    assert schedulers["kai-scheduler-pool-b"]["spec"]["replicas"] == 1
    budgets = {o["metadata"]["name"] for o in objs if o["kind"] == "PodDisruptionBudget"}
    assert budgets == {"kai-scheduler", "kai-scheduler-pool-a"}  # pool-b runs one pod
    service = find(objs, "Service", "kai-scheduler-metrics")["spec"]["selector"].items()
    with_pods = [o for o in objects(helm.template({**GPU_SHARING, "scheduler": {"shards": [
        {"partitionLabelValue": "pool-a"}]}})) if "template" in o.get("spec", {})]
    scraped = {o["metadata"]["name"] for o in with_pods
               if o["spec"]["template"]["metadata"]["labels"].items() >= service}
    assert scraped == {"kai-scheduler", "kai-scheduler-pool-a"}  # every scheduler's metrics, no other component's
    assert len(with_pods) > len(scraped)  # the webhook and the node agent are there, not scraped


@pytest.mark.parametrize("shards, message", [
    ([{"partitionLabelValue": "a.b"}, {"partitionLabelValue": "a_b"}], r"shards\[1\].*as scheduler.shards\[0\]"),
    ([{"partitionLabelValue": ""}], "partitionLabelValue"),
    ([{"placementStrategy": "spread"}], "missing property 'partitionLabelValue'"),
], ids=["two-values-one-name", "empty-value", "no-value"])
def test_shards_that_would_share_a_scheduler_are_refused(helm: Helm, shards: list[Obj], message: str) -> None:
    with pytest.raises(HelmError, match=message):
        helm.template({"scheduler": {"shards": shards}})
