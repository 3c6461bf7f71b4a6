"""A PodGroup's sub-groups placed by their own topology constraints (KAI v2alpha2 SubGroup.topologyConstraint;
actions/common/allocate.go allocateSubGroupSet, plugins/topology subSetNodesFn at d5bc503a): each sub-group's pods
inside the domain the job's are placed in, in one domain of the sub-group's required level."""

from __future__ import annotations

from typing import Any

from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]
SUBGROUP = "kai.scheduler/subgroup-name"
TOPO = {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "dc"},
        "spec": {"levels": [{"nodeLabel": "spine"}, {"nodeLabel": "rack"}]}}


def cycle(objs: list[Obj]) -> Decisions:
    cfg = SchedulerConfig.model_validate({"actions": ["allocate"]})
    return run_cycle(build_snapshot(objs, cfg, 0.0), cfg)


def cluster() -> list[Obj]:
    """Spine s1: racks r1 (3 GPUs free: one used), r2 (4); spine s2: rack r3 (4); two 2-GPU nodes a rack."""
    objs: list[Obj] = [TOPO, queue("q")]
    for spine, racks in (("s1", ("r1", "r2")), ("s2", ("r3",))):
        for rack in racks:
            for i in range(2):
                objs.append(node(f"{rack}n{i}", gpus=2, labels={"spine": spine, "rack": rack}))
    objs.append(pod("other", gpus=1, queue="q", node_name="r1n0"))
    return objs


def job(sub_tc: Obj | None, job_tc: Obj | None = None, per: int = 4, running: dict[str, str] | None = None,
        least: int | None = None) -> list[Obj]:
    """Sub-groups a and b of ``per`` 1-GPU pods each (``least`` of them their minMember, all when None), each with
    ``sub_tc``; ``running``: pod name -> node."""
    tc = {"topologyConstraint": sub_tc} if sub_tc else {}
    subs = [{"name": s, "minMember": per if least is None else least, **tc} for s in "ab"]
    spec: Obj = {"subGroups": subs, **({"topologyConstraint": job_tc} if job_tc else {})}
    out: list[Obj] = [podgroup("g", "q", 2 * per, **spec)]
    for s in "ab":
        for i in range(per):
            name = f"{s}-{i}"
            at = (running or {}).get(name)
            out.append(pod(name, gpus=1, group="g", labels={SUBGROUP: s}, node_name=at,
                           phase="Running" if at else None))
    return out


def racks(d: Decisions) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for b in d.binds:
        name = b.pod.split("/")[1]
        out.setdefault(name[0], set()).add(b.node[:2])
    return out


def test_each_subgroup_in_one_domain_of_its_required_level() -> None:
    # placed as one set, a's four pods would start in r1 (3 free, the tightest) and spill into r2
    flat = cycle([*cluster(), *job(None, {"topology": "dc", "preferredTopologyLevel": "spine"})])
    assert len(flat.binds) == 8 and any(len(r) > 1 for r in racks(flat).values())
    d = cycle([*cluster(), *job({"topology": "dc", "requiredTopologyLevel": "rack"},
                                {"topology": "dc", "preferredTopologyLevel": "spine"})])
    assert len(d.binds) == 8
    assert all(len(r) == 1 for r in racks(d).values()) and racks(d)["a"] != racks(d)["b"]


def test_subgroups_stay_inside_the_jobs_required_domain() -> None:
    # the job requires one spine: s1 (7 free) holds the 6 pods, but only if each sub-group of 3 takes a rack of its own
    d = cycle([*cluster(), *job({"topology": "dc", "requiredTopologyLevel": "rack"},
                                {"topology": "dc", "requiredTopologyLevel": "spine"}, per=3)])
    assert len(d.binds) == 6
    assert {b.node[:2] for b in d.binds} == {"r1", "r2"}
    assert all(len(r) == 1 for r in racks(d).values())


def test_a_subgroup_that_fits_no_domain_of_its_required_level_waits() -> None:
    d = cycle([*cluster(), *job({"topology": "dc", "requiredTopologyLevel": "rack"}, per=5)])
    assert d.binds == []
    assert "Topology" in [r.code for r in d.pending["default/g"]]


def test_a_subgroup_without_a_topology_name_has_no_constraint() -> None:
    # (KAI's getJobTopology: a constraint without a topology is none)
    d = cycle([*cluster(), *job({"requiredTopologyLevel": "rack"}, per=5)])
    assert len(d.binds) == 10  # 11 GPUs free: placed as one set, over racks


def test_running_pods_of_a_subgroup_fix_its_required_domain() -> None:
    # a-0 runs in r3; a-1 joins it there though r1 is as tight and first by name (b runs in r2)
    running = {"a-0": "r3n0", "b-0": "r2n0", "b-1": "r2n0"}
    d = cycle([*cluster(), *job({"topology": "dc", "requiredTopologyLevel": "rack"}, per=2, running=running, least=1)])
    assert [(b.pod, b.node[:2]) for b in d.binds] == [("default/a-1", "r3")]


def test_a_preferred_level_no_domain_holds_falls_back_to_the_level_above() -> None:
    # no rack (two 1-GPU nodes) holds a sub-group of 3: each stays inside one spine, the second one's too (KAI walks
    # from the preferred level up: getJobAllocatableDomains), not the spine the first one left a node free in
    objs: list[Obj] = [TOPO, queue("q")]
    for spine, rs in (("s1", ("r1", "r2")), ("s2", ("r3", "r4"))):
        for rack in rs:
            objs += [node(f"{rack}n{i}", gpus=1, labels={"spine": spine, "rack": rack}) for i in range(2)]
    d = cycle([*objs, *job({"topology": "dc", "preferredTopologyLevel": "rack"}, per=3)])
    assert len(d.binds) == 6
    spines = {s: {"s1" if n in ("r1", "r2") else "s2" for n in r} for s, r in racks(d).items()}
    assert all(len(v) == 1 for v in spines.values()), racks(d)


def test_a_subgroups_unknown_topology_or_level_is_the_jobs_error() -> None:
    cfg = SchedulerConfig.model_validate({"actions": ["allocate"]})

    def read(tc: Obj) -> tuple[list[str], list[str]]:
        snap = build_snapshot([*cluster(), *job(tc)], cfg, 0.0)
        g = snap.jobs["default/g"]
        return [r.code for r in g.errors], [r.code for r in g.warnings]

    assert read({"topology": "nope", "requiredTopologyLevel": "rack"}) == (["UnknownTopology"] * 2, [])
    assert read({"topology": "dc", "preferredTopologyLevel": "row"}) == (["UnknownTopologyLevel"] * 2, [])
    assert read({"requiredTopologyLevel": "rack"}) == ([], ["InvalidTopology"] * 2)
    assert read({"topology": "dc", "requiredTopologyLevel": "rack"}) == ([], [])
    d = cycle([*cluster(), *job({"topology": "dc", "requiredTopologyLevel": "row"})])
    assert d.binds == [] and "UnknownTopologyLevel" in [r.code for r in d.pending["default/g"]]


def test_reclaim_places_each_subgroup_by_its_own_constraint() -> None:
    # queue "old" runs one 1-GPU pod on every GPU, over its quota of 0; "new" (quota 4) reclaims 4 GPUs for a job of
    # two sub-groups of 2 pods, each required inside one rack (2 nodes of 2 GPUs a rack)
    objs: list[Obj] = [TOPO, queue("old", gpu=(0, -1, 1)), queue("new", gpu=(4, -1, 1))]
    for rack in ("r1", "r2"):
        objs += [node(f"{rack}n{i}", gpus=2, labels={"spine": "s1", "rack": rack}) for i in range(2)]
    for k, n in enumerate(["r1n0", "r1n1", "r2n0", "r2n1"] * 2):
        objs.append(pod(f"old{k}", gpus=1, queue="old", node_name=n, phase="Running", priorityClassName="train",
                        created=f"2026-01-01T00:00:{k:02d}Z"))
    subs = [{"name": s, "minMember": 2, "topologyConstraint": {"topology": "dc", "requiredTopologyLevel": "rack"}}
            for s in "ab"]
    objs.append(podgroup("g", "new", 4, subGroups=subs))
    objs += [pod(f"p{k}", gpus=1, group="g", labels={SUBGROUP: "ab"[k % 2]}) for k in range(4)]  # a, b, a, b
    cfg = SchedulerConfig.model_validate({"actions": ["reclaim"]})
    d = run_cycle(build_snapshot(objs, cfg, 0.0), cfg)
    placed = {p.pod.split("/")[1]: p.node for p in d.pipelined}
    assert len(placed) == 4, d
    assert all(len({placed[f"p{k}"][:2] for k in range(s, 4, 2)}) == 1 for s in range(2)), placed
