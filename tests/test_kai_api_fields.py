"""Every field of KAI's PodGroup, Queue and Topology specs is one of kai's (docs/compatibility.md): a manifest written
for KAI applies unchanged. The API server drops a field its CRD's schema lacks, and ``kubectl apply`` (strict field
validation by default) refuses the manifest. And what kai makes of the fields it added for that: topology level
aliases (``spec.levels[].alias``) and ``spec.markUnschedulable``."""

from __future__ import annotations

from typing import Any

import pytest

from kaid.api.config import NODE_POOL_LABEL, SchedulerConfig
from kaid.api.crdgen import crd_documents
from kaid.cycle import run_cycle
from kaid.kube.actuator import ApplyResult
from kaid.kube.status import StatusWriter
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from kaid.model.objects import Snapshot
from kaid.model.partition import tried_in_its_pool
from kaid.model.vocabulary import ReasonCode
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW
from tests.test_status_verdicts import Recorder

Obj = dict[str, Any]
CFG = SchedulerConfig()

# The spec fields of KAI's CRDs at its reference commit d5bc503a (deployments/kai-scheduler/crds/
# scheduling.run.ai_podgroups.yaml, scheduling.run.ai_queues.yaml, kai.scheduler_topologies.yaml), as paths.
KAI_SPEC_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("PodGroup", "v2alpha2"): (
        "markUnschedulable", "minMember", "minSubGroup", "preemptibility", "preemptionDelay", "priorityClassName",
        "queue", "schedulingBackoff", "stalenessGracePeriod", "subGroups", "subGroups[].minMember",
        "subGroups[].minSubGroup", "subGroups[].name", "subGroups[].parent", "subGroups[].topologyConstraint",
        "subGroups[].topologyConstraint.preferredTopologyLevel", "subGroups[].topologyConstraint.requiredTopologyLevel",
        "subGroups[].topologyConstraint.topology", "topologyConstraint", "topologyConstraint.preferredTopologyLevel",
        "topologyConstraint.requiredTopologyLevel", "topologyConstraint.topology"),
    ("Queue", "v2"): (
        "displayName", "parentQueue", "preemptMinRuntime", "priority", "reclaimMinRuntime", "resources",
        "resources.cpu", "resources.cpu.limit", "resources.cpu.overQuotaWeight", "resources.cpu.quota",
        "resources.gpu", "resources.gpu.limit", "resources.gpu.overQuotaWeight", "resources.gpu.quota",
        "resources.memory", "resources.memory.limit", "resources.memory.overQuotaWeight", "resources.memory.quota"),
    ("Topology", "v1alpha1"): ("levels", "levels[].alias", "levels[].nodeLabel"),
}


def _paths(schema: Obj, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        out |= {path, *_paths(sub, path)}
    if "items" in schema:
        out |= _paths(schema["items"], prefix + "[]")
    return out


@pytest.mark.parametrize("kind,version", sorted(KAI_SPEC_FIELDS))
def test_every_spec_field_of_kais_crd_is_in_kais_schema(kind: str, version: str) -> None:
    schemas = {(d["spec"]["names"]["kind"], v["name"]): v["schema"]["openAPIV3Schema"]
               for d in crd_documents().values() for v in d["spec"]["versions"]}
    spec = schemas[(kind, version)]["properties"]["spec"]
    missing = sorted(set(KAI_SPEC_FIELDS[(kind, version)]) - _paths(spec))
    assert not missing, f"{kind} {version}: KAI's spec has {missing}, kai's CRD does not"


# ----------------------------------------------------------------------------------------------- aliases
def _topology(levels: list[Obj], name: str = "dc") -> Obj:
    return {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": levels}}


LEVELS = [{"nodeLabel": "example.com/zone", "alias": "zone"}, {"nodeLabel": "example.com/rack", "alias": "rack"}]


def _rack_cluster(constraint: Obj, subgroups: list[Obj] | None = None) -> list[Obj]:
    """Two racks of two 4-GPU nodes, and a gang of four 2-GPU pods (8 GPUs: one rack's worth), with ``constraint``."""
    objs: list[Obj] = [_topology(LEVELS), queue("q")]
    for rack in ("r1", "r2"):
        for i in range(2):
            objs.append(node(f"{rack}-{i}", gpus=4, labels={"example.com/zone": "z", "example.com/rack": rack}))
    spec: Obj = {"topologyConstraint": {"topology": "dc", **constraint}}
    if subgroups:
        spec["subGroups"] = subgroups
    objs.append(podgroup("g", "q", 4, **spec))
    objs += [pod(f"g-{i}", gpus=2, group="g", labels={"kai.scheduler/subgroup-name": "w"} if subgroups else None)
             for i in range(4)]
    return objs


def _snapshots(objs: list[Obj]) -> list[Snapshot]:
    """The cold build's snapshot and the daemon's live model's, of the same objects."""
    model = LiveModel(CFG)
    for obj in objs:
        model.upsert(obj)
    return [build_snapshot(objs, CFG, NOW), model.snapshot(NOW)]


@pytest.mark.parametrize("field", ["requiredTopologyLevel", "preferredTopologyLevel"])
def test_a_level_named_by_its_alias_reads_as_its_node_label(field: str) -> None:
    for snap in _snapshots(_rack_cluster({field: "rack"})):
        job = snap.jobs["default/g"]
        assert not job.errors, job.errors
        level = job.required_level if field == "requiredTopologyLevel" else job.preferred_level
        assert level == "example.com/rack"
        d = run_cycle(snap, CFG)
        racks = {b.node.split("-")[0] for b in d.binds}
        assert len(d.binds) == 4 and len(racks) == 1, d.binds


def test_a_sub_groups_level_named_by_its_alias_reads_as_its_node_label() -> None:
    sub = [{"name": "w", "minMember": 4, "topologyConstraint": {"topology": "dc", "requiredTopologyLevel": "rack"}}]
    for snap in _snapshots(_rack_cluster({"requiredTopologyLevel": "zone"}, sub)):
        job = snap.jobs["default/g"]
        assert not job.errors, job.errors
        assert job.required_level == "example.com/zone"
        (w,) = job.subgroups
        assert w["topologyConstraint"]["requiredTopologyLevel"] == "example.com/rack"
        d = run_cycle(snap, CFG)
        assert len(d.binds) == 4 and len({b.node.split("-")[0] for b in d.binds}) == 1, d.binds


def test_a_name_that_is_no_level_nor_alias_is_still_refused() -> None:
    for snap in _snapshots(_rack_cluster({"requiredTopologyLevel": "row"})):
        codes = [r.code for r in snap.jobs["default/g"].errors]
        assert codes == [ReasonCode.UNKNOWN_TOPOLOGY_LEVEL], codes


@pytest.mark.parametrize("levels,says", [
    ([{"nodeLabel": "example.com/zone", "alias": "a"}, {"nodeLabel": "example.com/rack", "alias": "a"}],
     "an alias may name one level only: a repeated"),
    ([{"nodeLabel": "example.com/zone", "alias": "example.com/rack"}, {"nodeLabel": "example.com/rack"}],
     "an alias may not be a level's node label: example.com/rack"),
    ([{"nodeLabel": "example.com/zone", "alias": "not a key"}], "alias 'not a key' is not a label key"),
])
def test_a_topology_whose_aliases_clash_is_invalid_and_says_why(levels: list[Obj], says: str) -> None:
    snap = build_snapshot([_topology(levels)], now=NOW)
    (problem,) = [p for p in snap.problems if p.kind == "Topology"]
    assert problem.reason.code == ReasonCode.INVALID_TOPOLOGY
    assert says in problem.reason.message, problem.reason.message
    assert "dc" not in snap.topologies


# ------------------------------------------------------------------------------------------ markUnschedulable
@pytest.mark.parametrize("value,marked", [(None, True), (True, True), (False, False)])
def test_mark_unschedulable_is_read(value: bool | None, marked: bool) -> None:
    spec: Obj = {} if value is None else {"markUnschedulable": value}
    objs = [queue("q"), podgroup("g", "q", 1, **spec), pod("g-0", gpus=1, group="g")]
    for snap in _snapshots(objs):
        assert snap.jobs["default/g"].mark_unschedulable is marked


# ------------------------------------------------------------------------- what the status writer says of them
def _written(spec: Obj, pool: str | None = None) -> Recorder:
    """The status writes of one cycle over a PodGroup with ``spec`` whose pod asks for more GPUs than any node has
    (``pool``: all of it in that node pool, scheduled by that pool's shard)."""
    objs = [node("n0", gpus=1), queue("q"), podgroup("g", "q", 1, **spec), pod("g-0", gpus=2, group="g")]
    return _status_writes(objs, _pooled(objs, pool))


def _pooled(objs: list[Obj], pool: str | None) -> SchedulerConfig:
    """The config of the scheduler of node pool ``pool`` (None: the default shard), with the node, the Queue and the
    PodGroup that begin ``objs`` put in it."""
    if pool is None:
        return CFG
    for obj in objs[:3]:
        obj["metadata"].setdefault("labels", {})[NODE_POOL_LABEL] = pool
    return SchedulerConfig(partitionLabelValue=pool)


def _status_writes(objs: list[Obj], cfg: SchedulerConfig) -> Recorder:
    """What the status writer sends after one cycle over ``objs`` whose binds all went through."""
    snap = build_snapshot(objs, cfg, NOW)
    client = Recorder()
    writer = StatusWriter(client, cfg.schedulerName)  # type: ignore[arg-type]
    try:
        d = run_cycle(snap, cfg)
        writer.write(snap, d, ApplyResult(bound=list(d.binds)))
    finally:
        writer.close()
    return client


def _condition(client: Recorder) -> Obj:
    (status,) = [p["status"] for path, p in client.patches if path.endswith("/podgroups/g/status")]
    cond: Obj = status["schedulingConditions"][-1]
    return cond


def _pod_messages(client: Recorder) -> list[str]:
    return [c["message"] for path, p in client.patches if path.endswith("/pods/g-0/status")
            for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]


def test_mark_unschedulable_false_leaves_the_pods_condition_to_the_podgroup() -> None:
    marked, unmarked = _written({}), _written({"markUnschedulable": False})
    assert len(_pod_messages(marked)) == 1
    assert _pod_messages(unmarked) == []
    assert _condition(unmarked)["message"] == _condition(marked)["message"]


def test_an_unschedulable_condition_names_the_node_pool() -> None:
    assert _condition(_written({}))["nodePool"] == "default"
    assert _condition(_written({}, "a"))["nodePool"] == "a"


# ------------------------------------------------------------------ the scheduling condition, as KAI writes it
def _status_of(status: Obj | None, gpus: int = 2, pool: str | None = None, **spec: Any) -> Obj:
    """The status the writer sends for PodGroup ``g`` whose status was ``status`` and whose pod asks for ``gpus`` (2:
    more than the node has; 1: it is placed)."""
    group = podgroup("g", "q", 1, **spec)
    if status is not None:
        group["status"] = status
    objs = [node("n0", gpus=1), queue("q"), group, pod("g-0", gpus=gpus, group="g")]
    (written,) = [p["status"] for path, p in _status_writes(objs, _pooled(objs, pool)).patches
                  if path.endswith("/podgroups/g/status")]
    out: Obj = written
    return out


def test_a_waiting_podgroup_gets_kais_unschedulable_condition() -> None:
    (cond,) = _status_of(None)["schedulingConditions"]
    assert (cond["type"], cond["reason"], cond["status"], cond["nodePool"], cond["transitionID"]) == (
        "UnschedulableOnNodePool", "Unschedulable", "True", "default", "1")
    assert cond["reasons"][0]["reason"] == "NodeFit" and cond["message"].startswith(cond["reasons"][0]["message"])


def test_a_condition_that_says_the_same_keeps_its_transition_and_one_that_says_else_gets_the_next() -> None:
    first = _status_of(None)
    assert _status_of(first) == first
    (cond,) = first["schedulingConditions"]
    older = {**cond, "message": "no room", "transitionID": "7", "lastTransitionTime": "2020-01-01T00:00:00Z"}
    (new,) = _status_of({"schedulingConditions": [older]})["schedulingConditions"]
    assert new["transitionID"] == "8" and new["lastTransitionTime"] != older["lastTransitionTime"]
    assert new["message"] == cond["message"]


def test_the_other_pools_conditions_stay_and_a_placed_podgroup_has_one_condition() -> None:
    # KAI keeps each other pool's condition and puts its own last (squashAndAppendConditionsForNodepool); placed,
    # it removes them all, where kai says Scheduled
    other, mine = _unschedulable("a", "4"), _unschedulable("default", "3")
    conds = _status_of({"schedulingConditions": [other, mine]})["schedulingConditions"]
    assert conds[0] == other and [c["nodePool"] for c in conds] == ["a", "default"]
    assert conds[1]["transitionID"] == "5" and conds[1]["type"] == "UnschedulableOnNodePool"
    (placed,) = _status_of({"schedulingConditions": [other, mine]}, gpus=1)["schedulingConditions"]
    assert (placed["type"], placed["transitionID"], placed["message"]) == ("Scheduled", "5", "1 pods placed")


@pytest.mark.parametrize("pool", [None, "a"])
def test_the_condition_kai_writes_leaves_a_podgroup_tried_once_per_pool_alone_as_kai_reads_it(pool: str | None) -> None:
    group = _tried(1, None, {NODE_POOL_LABEL: pool} if pool else None)
    assert not tried_in_its_pool(group, NODE_POOL_LABEL)
    group["status"] = _status_of(None, pool=pool, schedulingBackoff=1)
    assert tried_in_its_pool(group, NODE_POOL_LABEL)


@pytest.mark.parametrize("pool", [None, "a"])
def test_a_podgroup_tried_once_per_node_pool_says_which_pool_its_messages_are_of(pool: str | None) -> None:
    plain, once = _written({}, pool), _written({"schedulingBackoff": 1}, pool)
    prefix = f"Node-Pool '{pool or 'default'}': "
    assert not _condition(plain)["message"].startswith("Node-Pool")
    assert _condition(once)["message"] == prefix + _condition(plain)["message"]
    assert _pod_messages(once) == [prefix + m for m in _pod_messages(plain)]


# ------------------------------------------------------------------------------ schedulingBackoff: once per pool
def _tried(backoff: Any, conditions: list[Obj] | None, labels: dict[str, str] | None = None) -> Obj:
    group = podgroup("g", "q", 1, **({} if backoff is None else {"schedulingBackoff": backoff}))
    if labels:
        group["metadata"]["labels"] = labels
    if conditions is not None:
        group["status"] = {"schedulingConditions": conditions}
    return group


def _unschedulable(pool: str, transition: str | None = None, kind: str = "Unschedulable") -> Obj:
    cond = {"type": kind, "status": "True", "nodePool": pool, "message": "no room"}
    if transition is not None:
        cond["transitionID"] = transition
    return cond


@pytest.mark.parametrize("group,left", [
    (_tried(None, [_unschedulable("default")]), False),  # no backoff: every cycle
    (_tried(-1, [_unschedulable("default")]), False),
    (_tried(1, None), False),  # not tried yet
    (_tried(1, [_unschedulable("default")]), True),
    (_tried(2, [_unschedulable("default", kind="UnschedulableOnNodePool")]), True),  # KAI's type; any value but -1
    (_tried(1, [_unschedulable("a")]), False),  # tried in another pool: up again here
    (_tried(1, [_unschedulable("a")], {NODE_POOL_LABEL: "a"}), True),
    (_tried(1, [{"type": "Scheduled", "status": "True", "nodePool": "default"}]), False),
    # the last condition by transition ID, as KAI reads it (the first of equal IDs)
    (_tried(1, [_unschedulable("default", "2"), _unschedulable("a", "1")]), True),
    (_tried(1, [_unschedulable("a", "1"), _unschedulable("default", "2")]), True),
    (_tried(1, [_unschedulable("default", "1"), _unschedulable("a", "2")]), False),
    (_tried(1, [_unschedulable("default"), _unschedulable("a")]), True),
])
def test_a_podgroup_tried_once_per_pool_is_left_alone_where_it_was_found_unschedulable(group: Obj, left: bool) -> None:
    assert tried_in_its_pool(group, NODE_POOL_LABEL) is left


def _backoff_cluster(conditions: list[Obj] | None) -> list[Obj]:
    """Room for both pods of the PodGroup tried once per pool: one runs on n0, one waits."""
    group = _tried(1, conditions)
    running = pod("g-0", gpus=1, group="g", node_name="n0")
    return [node("n0", gpus=4), queue("q"), group, running, pod("g-1", gpus=1, group="g")]


def test_one_left_alone_is_not_scheduled_and_what_it_runs_still_holds_its_node() -> None:
    for snap in _snapshots(_backoff_cluster([_unschedulable("default")])):
        assert "default/g" not in snap.jobs
        (n0,) = snap.nodes
        assert n0.idle == 3  # its running pod holds a GPU there, whoever schedules it
        assert not run_cycle(snap, CFG).binds
    for snap in _snapshots(_backoff_cluster([_unschedulable("a")])):
        assert "default/g" in snap.jobs
        assert [b.pod for b in run_cycle(snap, CFG).binds] == ["default/g-1"]


def test_the_live_model_leaves_it_alone_once_its_condition_names_its_pool_and_takes_it_back_after() -> None:
    objs = _backoff_cluster(None)
    model = LiveModel(CFG)
    for obj in objs:
        model.upsert(obj)
    assert "default/g" in model.snapshot(NOW).jobs
    group = objs[2]
    for conditions, taken in (([_unschedulable("default")], False), ([_unschedulable("a")], True)):
        group = {**group, "status": {"schedulingConditions": conditions}}
        model.upsert(group)
        snap = model.snapshot(NOW)
        assert ("default/g" in snap.jobs) is taken
        assert [b.pod for b in run_cycle(snap, CFG).binds] == (["default/g-1"] if taken else [])


def test_a_podgroup_tried_once_per_pool_that_runs_pods_is_never_left_alone() -> None:
    # KAI writes no condition for a PodGroup with pods running: kai's names no pool for it
    objs = [node("n0", gpus=1), queue("q"), _tried(1, None), pod("g-0", gpus=1, group="g", node_name="n0"),
            pod("g-1", gpus=1, group="g")]
    cond = _condition(_status_writes(objs, CFG))
    assert cond["type"] == "UnschedulableOnNodePool" and "nodePool" not in cond
    # its pool's condition from before its pods ran is replaced, another pool's kept
    objs[2]["status"] = {"schedulingConditions": [_unschedulable("default", "1"), _unschedulable("a", "2")]}
    written = [p["status"] for path, p in _status_writes(objs, CFG).patches if path.endswith("/podgroups/g/status")]
    assert [c.get("nodePool") for c in written[0]["schedulingConditions"]] == ["a", None]


@pytest.mark.parametrize("pool", [None, "a"])
def test_the_scheduled_event_names_the_node_pool(pool: str | None) -> None:
    objs = [node("n0", gpus=2), queue("q"), podgroup("g", "q", 2), pod("g-0", gpus=1, group="g"),
            pod("g-1", gpus=1, group="g")]
    (event,) = [e for _, e in _status_writes(objs, _pooled(objs, pool)).created if e["reason"] == "Scheduled"]
    assert event["message"] == f"bound 2 pods to 1 nodes at node-pool {pool or 'default'}: n0"
