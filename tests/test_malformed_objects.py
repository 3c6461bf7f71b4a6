"""One bad object harms nothing else: a snapshot is built and a cycle run whatever an object holds, the object
that cannot be read is left out or refused with a problem that names it, and amounts no node can hold (an API-valid
pod asking for 100,000,000 GPUs, a node reporting 10^9) are bounded instead of being read literally."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kaictl.app import app as kaictl
from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.kube.actuator import ApplyResult
from kaid.kube.status import StatusWriter
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from kaid.model.objects import MAX_NODE_GPUS, MOST_AMOUNT, Snapshot
from kaid.model.vocabulary import ReasonCode
from tests.conformance.scenario import load_scenario
from tests.conformance.translate import T0, harness_config, initial_state, objects
from tests.objects import node, pod, podgroup, queue
from tests.test_status_verdicts import Recorder

Obj = dict[str, Any]
CONFORMANCE = Path(__file__).parent / "conformance" / "kai"

# what a field is replaced with: wrong types, numbers no quantity or count can be, strings that parse as such numbers
ODD: list[Any] = [None, "", "abc", -1, -5.5, 0, 10**30, "1e400", "NaN", "-3", "0.5", [], {}, [1], {"a": 1}, True,
                  "-1Gi", "1e30", 1.5, "\u00e9"]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at] if at else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*at, i))
    return out


def _mutate(obj: Obj, rng: random.Random) -> None:
    """Delete one field of ``obj`` or replace it with one of ``ODD``."""
    path = rng.choice(_paths(obj))
    parent: Any = obj
    for k in path[:-1]:
        parent = parent[k]
    if isinstance(parent, dict) and rng.random() < 0.25:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(rng.choice(ODD))  # (a copy: a later mutation may write inside it)


@pytest.mark.parametrize("name", ["reclaim-05", "allocate-32", "consolidation-01", "preempt-05", "reclaim-21"])
def test_a_snapshot_and_a_cycle_whatever_the_objects_hold(name: str) -> None:
    """KAI scenarios with one to three fields of their objects broken at random, 60 times each: the build and the
    cycle never raise (a fuzzing pass of 1,300 such mutations found 14 places that did: a spec that was a string, a
    quota of inf, a negative GPU request, a node of 10^30 GPUs, ...)."""
    sc = load_scenario(CONFORMANCE / f"{name}.yaml")
    base, cfg = objects(sc, initial_state(sc)), harness_config(sc)
    rng = random.Random(name)
    for _ in range(60):
        objs = copy.deepcopy(base)
        for _ in range(rng.randint(1, 3)):
            _mutate(rng.choice(objs), rng)
        run_cycle(build_snapshot(objs, cfg, T0), cfg)


def _cycle(objs: list[Obj]) -> tuple[Snapshot, Any]:
    cfg = SchedulerConfig()
    snap = build_snapshot(objs, cfg, 0.0)
    return snap, run_cycle(snap, cfg)


def test_a_malformed_pod_is_left_out_with_a_problem_and_the_others_are_scheduled() -> None:
    bad = pod("bad", gpus=1, queue="q")
    bad["spec"] = "not a spec"
    snap, d = _cycle([node("n0"), queue("q"), bad, pod("good", gpus=1, queue="q")])
    assert [p.key for p in snap.pods] == ["default/good"]
    (problem,) = snap.problems
    assert (problem.kind, problem.name, problem.namespace) == ("Pod", "bad", "default")
    assert problem.reason.code == ReasonCode.MALFORMED_OBJECT and "default/bad" in problem.reason.message
    assert [b.pod for b in d.binds] == ["default/good"]


def test_a_queue_of_an_infinite_quota_is_invalid_not_fatal() -> None:
    q = queue("q")
    q["spec"]["resources"]["gpu"]["quota"] = float("inf")
    snap, d = _cycle([node("n0"), q, queue("r"), pod("a", gpus=1, queue="q"), pod("b", gpus=1, queue="r")])
    assert snap.queues["q"].errors and "finite" in snap.queues["q"].errors[0].message
    assert [b.pod for b in d.binds] == ["default/b"]
    assert d.pending["default/pg-pod-a"][0].code == ReasonCode.INVALID_QUEUE


def test_a_bound_pod_of_a_hundred_million_gpus_is_accounted_within_the_bound() -> None:
    """Created with its nodeName set, the API server takes it; read literally its devices made a list of 10^8."""
    snap, d = _cycle([node("n0"), node("n1"), queue("q"), pod("huge", gpus=100_000_000, queue="q", node_name="n0"),
                      pod("next", gpus=1, queue="q")])
    huge = next(p for p in snap.pods if p.name == "huge")
    assert len(huge.devices) == MAX_NODE_GPUS + 1 and huge.gpu_whole == MAX_NODE_GPUS + 1
    assert snap.jobs["default/pg-pod-huge"].errors[0].code == ReasonCode.INVALID_SPEC
    assert [(b.pod, b.node) for b in d.binds] == [("default/next", "n1")]  # n0 is over-committed: nothing fits


@pytest.mark.parametrize("request_", [{"nvidia.com/gpu": "-3"}, {"cpu": "1e30"}, {"memory": "-1Gi"}])
def test_a_pod_asking_for_less_than_nothing_or_more_than_any_node_is_refused(request_: dict[str, str]) -> None:
    p = pod("a", gpus=1, queue="q")
    p["spec"]["containers"][0]["resources"]["requests"].update(request_)
    snap, d = _cycle([node("n0"), queue("q"), p])
    read = snap.pods[0]
    assert 0 <= read.gpu_whole <= MAX_NODE_GPUS + 1 and 0 <= read.cpu <= MOST_AMOUNT + 1
    assert 0 <= read.mem <= MOST_AMOUNT + 1
    assert not d.binds and d.pending["default/pg-pod-a"][0].code == ReasonCode.INVALID_SPEC


@pytest.mark.parametrize(("gpus", "count"), [("1000000000", 10**9), ("1G", 10**9), ("1e30", 10**30)])
def test_a_node_reporting_more_gpus_than_any_node_has_is_read_without_them(gpus: str, count: int) -> None:
    """The problem says the count, not the quantity as written (the API server writes 10^9 as ``1G``)."""
    bad = node("n0")
    bad["status"]["allocatable"]["nvidia.com/gpu"] = gpus
    objs = [bad, node("n1"), queue("q"), pod("a", gpus=1, queue="q"), pod("cpu-only", queue="q")]
    snap, d = _cycle(objs)
    assert snap.node_by_name["n0"].gpus == 0
    (problem,) = snap.problems
    assert (problem.kind, problem.name, problem.reason.code) == ("Node", "n0", ReasonCode.INVALID_NODE)
    assert f"reports {count} GPUs" in problem.reason.message
    assert ("default/pg-pod-a", "n1") in {(b.job, b.node) for b in d.binds}
    model = LiveModel(SchedulerConfig())  # the daemon's model says the same, and forgets it once the node is fixed
    for obj in objs:
        model.upsert(obj)
    assert [p.to_dict() for p in model.snapshot().problems] == [problem.to_dict()]
    model.upsert(node("n0"))
    assert not model.snapshot().problems


def test_a_podgroup_and_a_budget_that_cannot_be_read_are_problems() -> None:
    pg = podgroup("g", "q")
    pg["metadata"] = {"name": "g", "namespace": "default", "labels": ["not", "a", "map"]}
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"}, "spec": "x"}
    snap, _ = _cycle([node("n0"), queue("q"), pg, budget, pod("a", gpus=1, queue="q", group="g")])
    kinds = {(p.kind, p.reason.code) for p in snap.problems}
    assert ("PodDisruptionBudget", ReasonCode.MALFORMED_OBJECT) in kinds


_WORKLOADS: dict[str, tuple[str, Obj]] = {  # kind -> (apiVersion, a well-formed spec): what min_member_of reads
    "PyTorchJob": ("kubeflow.org/v1", {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}}),
    "MPIJob": ("kubeflow.org/v2beta1", {"mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}}}),
    "RayCluster": ("ray.io/v1", {"workerGroupSpecs": [{"minReplicas": 2, "replicas": 3}]}),
    "RayJob": ("ray.io/v1", {"rayClusterSpec": {"workerGroupSpecs": [{"replicas": 2}]}}),
    "JobSet": ("jobset.x-k8s.io/v1alpha2",
               {"replicatedJobs": [{"replicas": 2, "template": {"spec": {"parallelism": 2}}}]}),
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io/v1", {"leaderWorkerTemplate": {"size": 4}}),
}


@pytest.mark.parametrize("kind", sorted(_WORKLOADS))
def test_a_workload_whose_spec_has_fields_of_other_types_groups_its_pods_all_the_same(kind: str) -> None:
    """A third party's workload (a RayCluster, a JobSet) may come through a CRD schema that leaves parts of its spec
    unchecked: each field of its spec replaced by a value of another type, the cold build, kaid's live model and its
    podgrouper read it as absent (a gang of at least one pod). Before, min_member_of raised, and the live model failed
    every cycle after the first such workload it saw (fuzzing: 264 of 600 such workloads)."""
    from kaid.kube.podgrouper import podgroups_to_create

    api, spec = _WORKLOADS[kind]
    cfg = SchedulerConfig()
    for path in _paths(spec):
        for odd in ("x", 7, True, [1], {"a": "b"}, None):
            owner: Obj = {"apiVersion": api, "kind": kind, "spec": copy.deepcopy(spec),
                          "metadata": {"name": "w", "namespace": "default", "uid": "w"}}
            parent: Any = owner["spec"]
            for k in path[:-1]:
                parent = parent[k]
            parent[path[-1]] = odd
            pods = [pod(f"w-{i}", gpus=1, queue="q") for i in range(2)]
            for p in pods:
                p["metadata"]["ownerReferences"] = [{"apiVersion": api, "kind": kind, "name": "w", "uid": "w",
                                                     "controller": True}]
            objs = [node("n0"), queue("q"), owner, *pods]
            cold = build_snapshot(objs, cfg, 0.0)
            model = LiveModel(cfg, wait_for_owners=True)
            for obj in objs:
                model.upsert(obj)
            live = model.snapshot(0.0)
            for snap in (cold, live):
                (job,) = snap.jobs.values()
                assert job.min_member >= 1 and len(job.pods) == 2, (path, odd)
                run_cycle(snap, cfg)
            assert len(podgroups_to_create(objs, cfg)) == 1


def test_a_queue_chain_deeper_than_kai_reads_is_cut_and_said() -> None:
    """600 Queues, each the parent of the next (valid to the API server), failed every cycle in the engine's tree walks
    (RecursionError): the queues below MAX_QUEUE_DEPTH levels are invalid, with their depth, and the rest runs."""
    from kaid.model.queues import MAX_QUEUE_DEPTH

    chain = [queue("q0"), *(queue(f"q{i}", parent=f"q{i - 1}") for i in range(1, 600))]
    shallow, deep = f"q{MAX_QUEUE_DEPTH}", f"q{MAX_QUEUE_DEPTH + 1}"
    snap, d = _cycle([node("n0"), *chain, pod("a", gpus=1, queue=shallow), pod("b", gpus=1, queue="q599")])
    assert not snap.queues[shallow].errors
    assert snap.queues[deep].errors[0].code == ReasonCode.QUEUE_TOO_DEEP
    assert f"{MAX_QUEUE_DEPTH + 1} levels below" in snap.queues[deep].errors[0].message
    assert max(len(q.path()) for q in snap.queues.values()) == MAX_QUEUE_DEPTH + 1
    assert [b.pod for b in d.binds] == ["default/a"]
    assert d.pending["default/pg-pod-b"][0].code == ReasonCode.INVALID_QUEUE


def test_a_podgroup_of_sub_groups_nested_deeper_than_kai_reads_is_invalid() -> None:
    """One PodGroup of 400 sub-groups, each the parent of the next, failed every cycle (RecursionError in the gang's
    tree): it is invalid, with its reason, and the other jobs are scheduled."""
    from kaid.api.crds import MAX_SUBGROUP_DEPTH

    def chain(n: int) -> list[Obj]:
        return [{"name": "s0", "minMember": 1}, *({"name": f"s{i}", "minMember": 1, "parent": f"s{i - 1}"}
                                                  for i in range(1, n))]

    objs = [node("n0"), queue("q"),
            podgroup("deep", "q", subGroups=chain(400)),
            pod("d", gpus=1, group="deep", labels={"kai.scheduler/subgroup-name": "s399"}),
            podgroup("ok", "q", subGroups=chain(MAX_SUBGROUP_DEPTH)),
            pod("o", gpus=1, group="ok", labels={"kai.scheduler/subgroup-name": f"s{MAX_SUBGROUP_DEPTH - 1}"})]
    snap, d = _cycle(objs)
    assert [b.pod for b in d.binds] == ["default/o"]
    (why,) = snap.jobs["default/deep"].errors  # (its queue as written: no second reason about the default queue)
    assert snap.jobs["default/deep"].queue == "q"
    assert why.code == ReasonCode.INVALID_POD_GROUP and f"more than {MAX_SUBGROUP_DEPTH} levels deep" in why.message


def test_the_webhook_refuses_a_queue_too_deep_and_a_podgroup_nested_too_deep() -> None:
    from kaid.api.crds import MAX_SUBGROUP_DEPTH
    from kaid.model.queues import MAX_QUEUE_DEPTH
    from kaid.webhook import admission

    def review(path: str, obj: Obj, existing: list[Obj]) -> Obj:
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": "u", "operation": "CREATE", "object": obj}}
        response: Obj = admission.review(path, body, SchedulerConfig(), lambda: existing)["response"]
        return response

    chain = [queue("q0"), *(queue(f"q{i}", parent=f"q{i - 1}") for i in range(1, MAX_QUEUE_DEPTH + 1))]
    assert review("/validate-queue", queue("ok", parent=f"q{MAX_QUEUE_DEPTH - 1}"), chain)["allowed"]
    deep = review("/validate-queue", queue("deep", parent=f"q{MAX_QUEUE_DEPTH}"), chain)
    assert not deep["allowed"] and "levels below its root queue" in deep["status"]["message"]
    subgroups = [{"name": "s0"}, *({"name": f"s{i}", "parent": f"s{i - 1}"} for i in range(1, MAX_SUBGROUP_DEPTH + 1))]
    nested = review("/validate-podgroup", podgroup("g", "q", subGroups=subgroups), [])
    assert not nested["allowed"] and "levels deep" in nested["status"]["message"]


@pytest.mark.parametrize("status", [
    "written by hand", 5, {"schedulingConditions": "x"}, {"schedulingConditions": {"type": "Unschedulable"}},
    {"schedulingConditions": [None, 3]}, {"schedulingConditions": []},
    {"schedulingConditions": [{"type": ["Unschedulable"], "nodePool": {}, "transitionID": None}]},
])
def test_a_podgroup_status_of_any_shape_is_written_over_and_explained(status: Any, tmp_path: Path) -> None:
    """The PodGroup CRD keeps whatever status it is sent (``x-kubernetes-preserve-unknown-fields``): kai reads a
    status of another shape as no condition (it raised in the status writer, whose every write of the cycle then
    failed, and in ``kaictl explain``), writes its own, and a schedulingBackoff does not leave the PodGroup alone."""
    group = podgroup("g", "q", 1, schedulingBackoff=1)
    group["status"] = status
    objs = [node("n0", gpus=1), queue("q"), group, pod("g-0", gpus=2, group="g")]
    cfg = SchedulerConfig()
    for snap in (build_snapshot(objs, cfg, 0.0), _live(objs, cfg)):
        assert "default/g" in snap.jobs
        client = Recorder()
        writer = StatusWriter(client, cfg.schedulerName)  # type: ignore[arg-type]
        try:
            writer.write(snap, run_cycle(snap, cfg), ApplyResult())
        finally:
            writer.close()
        (written,) = [p["status"] for path, p in client.patches if path.endswith("/podgroups/g/status")]
        assert written["schedulingConditions"][0]["type"] == "UnschedulableOnNodePool"
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    res = CliRunner().invoke(kaictl, ["explain", "podgroup", "g", "--snapshot", str(path), "-o", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["state"] == "Pending"


def _live(objs: list[Obj], cfg: SchedulerConfig) -> Snapshot:
    model = LiveModel(cfg)
    for obj in copy.deepcopy(objs):
        model.upsert(obj)
    return model.snapshot(0.0)


def test_the_daemons_model_leaves_a_pod_or_node_it_cannot_read_out_until_it_changes(tmp_path: Path) -> None:
    """The daemon's model (``LiveModel``) leaves out a pod or a node whose reading raises, as the cold build does,
    with the same problems, and each says it in a Warning event on its object; before, every snapshot raised for as
    long as the object stayed (no pod of the cluster was scheduled). Fixed, each is read again."""
    bad_node, bad_pod = node("n1"), pod("bad", gpus=1, queue="q")
    bad_node["status"]["allocatable"] = True
    bad_pod["spec"] = "not a spec"
    objs = [node("n0"), bad_node, queue("q"), bad_pod, pod("held", gpus=1, queue="q", node_name="n1"),
            pod("good", gpus=1, queue="q")]
    cfg = SchedulerConfig()
    model = LiveModel(cfg)
    for obj in copy.deepcopy(objs):
        model.upsert(obj)
    snap = model.snapshot(0.0)
    cold = build_snapshot(objs, cfg, 0.0)
    assert [(p.kind, p.name, p.reason.code) for p in snap.problems] == \
        [("Node", "n1", ReasonCode.MALFORMED_OBJECT), ("Pod", "bad", ReasonCode.MALFORMED_OBJECT)]
    assert [p.to_dict() for p in snap.problems] == [p.to_dict() for p in cold.problems]
    assert [n.name for n in snap.nodes] == ["n0"] and "default/bad" not in {p.key for p in snap.pods}
    client = Recorder()
    writer = StatusWriter(client, cfg.schedulerName)  # type: ignore[arg-type]
    try:
        d = run_cycle(snap, cfg)
        assert [(b.pod, b.node) for b in d.binds] == [("default/good", "n0")]
        writer.write(snap, d, ApplyResult())
    finally:
        writer.close()
    warned = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for _, e in client.created
              if e.get("type") == "Warning" and "malformed" in e.get("message", "")}
    assert warned == {("Node", "n1"), ("Pod", "bad")}
    model.upsert(node("n1"))
    model.upsert(pod("bad", gpus=1, queue="q"))
    fixed = model.snapshot(0.0)
    assert not fixed.problems and [n.name for n in fixed.nodes] == ["n0", "n1"]
    assert {"default/bad", "default/held"} <= {p.key for p in fixed.pods}


def test_a_podgroup_whose_reading_raises_is_left_out_of_the_daemons_model_as_of_a_cold_build(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that raises on a PodGroup it did not foresee (here made to): the PodGroup is left out with a problem,
    its pods read as naming one that is not there, in both models, and the rest of the cluster is scheduled."""
    from kaid.model import build, jobs, live

    real = jobs.read_podgroup

    def raising(obj: Obj, into: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "g":
            raise ValueError("a reader's bug")
        real(obj, into)

    for module in (build, live):
        monkeypatch.setattr(module, "read_podgroup", raising)
    objs = [node("n0"), queue("q"), podgroup("g", "q"), pod("g-0", gpus=1, queue="q", group="g"),
            podgroup("h", "q"), pod("h-0", gpus=1, queue="q", group="h")]
    cfg = SchedulerConfig()
    cold = build_snapshot(objs, cfg, 0.0)
    model = LiveModel(cfg)
    for obj in copy.deepcopy(objs):
        model.upsert(obj)
    snap = model.snapshot(0.0)
    assert [(p.kind, p.name, p.reason.code) for p in snap.problems] == [("PodGroup", "g", ReasonCode.MALFORMED_OBJECT)]
    assert [p.to_dict() for p in snap.problems] == [p.to_dict() for p in cold.problems]
    assert list(snap.jobs) == list(cold.jobs) == ["default/h", "default/g"]  # (g: by its first pod, after h)
    assert not snap.jobs["default/g"].explicit
    assert "default/h-0" in {b.pod for b in run_cycle(snap, cfg).binds}
    monkeypatch.setattr(live, "read_podgroup", real)
    model.upsert(podgroup("g", "q"))
    again = model.snapshot(0.0)
    assert not again.problems and list(again.jobs) == ["default/g", "default/h"] and again.jobs["default/g"].explicit


def test_garbled_selectors_of_spread_constraints_and_volumes_are_read_not_raised_in_the_cycle() -> None:
    """A topology spread constraint's selector or a PersistentVolume's node affinity of another structure (the API
    server refuses both; a snapshot file may hold them) raised in the middle of the cycle's placement. Now the pod is
    left out as malformed, and a volume whose node affinity cannot be read is reachable from no node."""
    spread = pod("spread", gpus=1, queue="q", topologySpreadConstraints=[{
        "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": 1.5}}])
    stored = pod("stored", gpus=1, queue="q")
    stored["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]
    volume = {"kind": "PersistentVolume", "metadata": {"name": "pv"}, "status": {"phase": "Bound"},
              "spec": {"claimRef": {"namespace": "default", "name": "c"},
                       "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": 2.5}]}}}}
    objs = [node("n0"), queue("q"), spread, stored, volume, pod("plain", gpus=1, queue="q")]
    cfg = SchedulerConfig()
    for snap in (build_snapshot(objs, cfg, 0.0), _live(objs, cfg)):
        d = run_cycle(snap, cfg)
        assert [(p.kind, p.name, p.reason.code) for p in snap.problems] == \
            [("Pod", "spread", ReasonCode.MALFORMED_OBJECT)]
        assert [b.pod for b in d.binds] == ["default/plain"]
        assert "volume node affinity conflict" in d.pending["default/pg-pod-stored"][-1].message
