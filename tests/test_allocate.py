"""Allocate and placement on small, hand-made clusters."""

from __future__ import annotations

from typing import Any

import pytest

from kaid.actions import allocate as allocate_action
from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]


def cycle(objs: list[Obj], actions: tuple[str, ...] = ("allocate",), **placement: Any) -> Decisions:
    cfg = SchedulerConfig.model_validate({"placement": placement, "actions": actions})
    return run_cycle(build_snapshot(objs, cfg, 0.0), cfg)


def where(d: Decisions) -> dict[str, str]:
    return {b.pod.split("/")[1]: b.node for b in d.binds}


def gang(name: str, q: str, n: int, gpus: int = 1, **spec: Any) -> list[Obj]:
    return [podgroup(name, q, n, **spec), *(pod(f"{name}-{i}", gpus=gpus, group=name) for i in range(n))]


def test_gang_all_or_nothing() -> None:
    objs = [node("a", gpus=2), node("b", gpus=1), queue("q"), *gang("g", "q", 4)]
    d = cycle(objs)
    assert d.binds == []
    codes = [r.code for r in d.pending["default/g"]]
    assert "GangUnschedulable" in codes
    gangr = next(r for r in d.pending["default/g"] if r.code == "GangUnschedulable")
    assert gangr.details == {"needed": 4, "placeable": 3}
    objs.append(node("c", gpus=1))
    assert len(cycle(objs).binds) == 4


def fragmented() -> list[Obj]:
    # 4 nodes with 1 free GPU each (7 used by others), 1 node with 4 free
    objs: list[Obj] = [queue("q"), queue("other")]
    for i in range(4):
        objs.append(node(f"busy{i}"))
        objs.append(pod(f"filler{i}", gpus=7, node_name=f"busy{i}", queue="other"))
    objs.append(node("free", gpus=4))
    return objs


def test_cpsat_packs_gang_on_fewer_nodes_than_greedy() -> None:
    objs = [*fragmented(), *gang("g", "q", 4)]
    greedy = cycle(objs, gangSolver="greedy")
    cpsat = cycle(objs, gangSolver="cpsat")
    assert len(set(where(greedy).values())) == 4  # binpack fills the tightest nodes first
    assert set(where(cpsat).values()) == {"free"}
    assert cpsat.stats.gangs_improved == 1 and greedy.stats.gangs_improved == 0


def test_cpsat_solver_packs_across_nodes() -> None:
    # 6 one-GPU pods; free GPUs: four nodes with 1, two nodes with 3 -> best is the two 3-free nodes
    objs: list[Obj] = [queue("q"), queue("other")]
    for i in range(4):
        objs += [node(f"one{i}", gpus=2), pod(f"f{i}", gpus=1, node_name=f"one{i}", queue="other")]
    for i in range(2):
        objs += [node(f"three{i}", gpus=4), pod(f"t{i}", gpus=1, node_name=f"three{i}", queue="other")]
    objs += gang("g", "q", 6)
    greedy = cycle(objs, gangSolver="greedy")
    cpsat = cycle(objs, gangSolver="cpsat")
    assert len(set(where(greedy).values())) == 5
    assert set(where(cpsat).values()) == {"three0", "three1"}
    # alike pods: the solver's model is answered by the knapsack (placement.fewest), with no solve
    assert cpsat.stats.gangs_improved == 1 and cpsat.stats.gangs_cpsat == 0 and cpsat.stats.solves == 0


def test_cpsat_places_gang_greedy_cannot() -> None:
    # 2-GPU pods: greedy puts the first two on the 3-free node... build a case where order matters
    objs: list[Obj] = [queue("q"), queue("other"), node("x", gpus=4), node("y", gpus=4)]
    objs.append(pod("f", gpus=1, node_name="x", queue="other"))  # x: 3 free, y: 4 free
    objs += [podgroup("g", "q", 3), pod("g-0", gpus=2, group="g"), pod("g-1", gpus=2, group="g"),
             pod("g-2", gpus=3, group="g")]
    d = cycle(objs, gangSolver="cpsat")
    assert len(d.binds) == 3, d.pending
    assert where(d)["g-2"] == "x"


def test_fractions_share_a_device_and_overflow_to_another() -> None:
    objs = [node("n", gpus=2), queue("q"),
            pod("a", queue="q", annotations={"gpu-fraction": "0.7"}, created="2026-01-01T00:00:01Z"),
            pod("b", queue="q", annotations={"gpu-fraction": "0.2"}, created="2026-01-01T00:00:02Z"),
            pod("c", queue="q", annotations={"gpu-fraction": "0.5"}, created="2026-01-01T00:00:03Z")]
    d = cycle(objs)
    dev = {b.pod.split("/")[1]: b.devices for b in d.binds}
    assert dev["a"] == dev["b"] and dev["c"] != dev["a"]
    groups = {b.pod.split("/")[1]: b.gpu_group for b in d.binds}
    assert groups["a"] == groups["b"] and groups["a"] is not None


def test_gpu_memory_and_multi_device_fraction() -> None:
    objs = [node("n", gpus=2, gpu_memory=40000), node("nolabel", gpus=2, gpu_memory=None), queue("q"),
            pod("m", queue="q", annotations={"gpu-memory": "20000", "gpu-fraction-num-devices": "2"})]
    d = cycle(objs)
    assert len(d.binds) == 1 and d.binds[0].node == "n" and len(d.binds[0].devices) == 2
    assert d.binds[0].gpu_milli == 1000  # half of each of two GPUs


def test_limit_reason_names_limit_and_fix() -> None:
    objs = [node("n"), queue("q", gpu=(2, 3, 1)), pod("a", gpus=2, queue="q"), pod("b", gpus=2, queue="q",
                                                                                  created="2026-01-02T00:00:00Z")]
    d = cycle(objs)
    assert where(d) == {"a": "n"}
    (r,) = d.pending["default/pg-pod-b"]
    assert r.code == "QueueLimit"
    assert r.details["limit"] == "3" and r.details["allocated"] == "2" and r.details["requested"] == "2"
    assert "kaictl queue set q --gpu-limit 4" in r.message


def test_limit_unset_trap_is_explained() -> None:
    objs = [node("n"), queue("q", gpu=(-1, -1, 1), cpu=(0, 0, 1)), pod("a", gpus=1, queue="q")]
    (r,) = cycle(objs).pending["default/pg-pod-a"]
    assert r.code == "QueueLimit" and r.details["implicitLimit"] is True
    assert "no cpu limit set" in r.message and "--cpu-limit" in r.message


def test_parent_limit_holds() -> None:
    objs = [node("n"), queue("p", gpu=(0, 3, 1)), queue("c1", "p"), queue("c2", "p"),
            pod("a", gpus=2, queue="c1"), pod("b", gpus=2, queue="c2")]
    d = cycle(objs)
    assert len(d.binds) == 1
    pend = next(iter(d.pending.values()))
    assert pend[0].details["queue"] == "p"


def test_elastic_pods_interleave_across_queues() -> None:
    objs = [node("n", gpus=4), queue("a"), queue("b"), podgroup("ea", "a", 1), podgroup("eb", "b", 1)]
    objs += [pod(f"ea-{i}", gpus=1, group="ea") for i in range(4)]
    objs += [pod(f"eb-{i}", gpus=1, group="eb") for i in range(4)]
    d = cycle(objs)
    per_queue = {"a": 0, "b": 0}
    for b in d.binds:
        per_queue[b.queue] += 1
    assert per_queue == {"a": 2, "b": 2}


def test_fair_share_order_decides_scarce_gpus() -> None:
    objs = [node("n", gpus=4), queue("big", gpu=(3, -1, 1)), queue("small", gpu=(1, -1, 1))]
    objs += [pod(f"big-{i}", gpus=1, queue="big") for i in range(4)]
    objs += [pod(f"small-{i}", gpus=1, queue="small") for i in range(4)]
    d = cycle(objs)
    per_queue = {"big": 0, "small": 0}
    for b in d.binds:
        per_queue[b.queue] += 1
    assert per_queue == {"big": 3, "small": 1}


def test_spread_and_binpack() -> None:
    objs = [node("a", gpus=4), node("b", gpus=4), queue("q"), pod("x", gpus=1, queue="q"),
            pod("y", gpus=1, queue="q", created="2026-01-01T00:00:01Z")]
    assert len(set(where(cycle(objs, gpu="binpack")).values())) == 1
    assert len(set(where(cycle(objs, gpu="spread")).values())) == 2


def test_topology_required_and_reason() -> None:
    topo = {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": "rack"}]}}
    objs: list[Obj] = [topo, queue("q"), node("a1", gpus=2, labels={"rack": "a"}),
                       node("a2", gpus=2, labels={"rack": "a"}), node("b1", gpus=2, labels={"rack": "b"})]
    tc = {"topology": "dc", "requiredTopologyLevel": "rack"}
    d = cycle([*objs, *gang("g", "q", 4, topologyConstraint=tc)])
    assert set(where(d).values()) == {"a1", "a2"}
    d = cycle([*objs, *gang("g", "q", 5, topologyConstraint=tc), node("c1", gpus=1, labels={"rack": "c"})])
    assert d.binds == []
    assert "Topology" in [r.code for r in d.pending["default/g"]]


def test_topology_preferred_packs_one_rack() -> None:
    topo = {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": "rack"}]}}
    objs: list[Obj] = [topo, queue("q")]
    for r in "ab":
        for i in range(2):
            objs.append(node(f"{r}{i}", gpus=4, labels={"rack": r}))
    objs.append(pod("f", gpus=3, node_name="a0", queue="q"))  # rack a: 5 free, rack b: 8 free
    d = cycle([*objs, *gang("g", "q", 6, topologyConstraint={"topology": "dc", "preferredTopologyLevel": "rack"})])
    assert {n[0] for n in where(d).values()} == {"b"}


def test_fragmentation_and_fit_summary_words() -> None:
    objs = [node("a", gpus=2), node("b", gpus=2), queue("q"), pod("x", gpus=1, queue="q", node_name="a"),
            pod("y", gpus=1, queue="q", node_name="b"), pod("big", gpus=2, queue="q")]
    reasons = cycle(objs).pending["default/pg-pod-big"]
    codes = [r.code for r in reasons]
    assert codes == ["Fragmentation", "NodeFit"]
    assert "2 GPUs are free in total" in reasons[0].message and "largest free block is 1" in reasons[0].message
    assert reasons[1].message.startswith("0/2 nodes can take a pod of 2 GPUs")
    assert "2 insufficient GPU" in reasons[1].message


def test_taints_selectors_affinity_cordon() -> None:
    objs: list[Obj] = [queue("q"),
                       node("tainted", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
                       node("cordoned", unschedulable=True), node("down", ready=False),
                       node("labelled", labels={"pool": "a100"}), node("plain")]
    sel = pod("sel", gpus=1, queue="q", nodeSelector={"pool": "a100"})
    aff = pod("aff", gpus=1, queue="q", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                  {"nodeSelectorTerms": [{"matchExpressions": [
                                                      {"key": "pool", "operator": "NotIn", "values": ["a100"]}]}]}}})
    tol = pod("tol", gpus=8, queue="q", nodeSelector={}, tolerations=[{"key": "dedicated", "operator": "Exists"}],
              created="2026-01-01T00:00:05Z")
    d = cycle([*objs, sel, aff, tol])
    w = where(d)
    assert w["sel"] == "labelled"
    assert w["aff"] in ("plain", "tainted") and w["aff"] != "labelled"
    assert w["tol"] == "tainted" or w["tol"] == "plain"
    lone = pod("lone", gpus=1, queue="q", nodeSelector={"pool": "none"})
    (r,) = cycle([*objs, lone]).pending["default/pg-pod-lone"]
    assert r.message.startswith("0/5 nodes can take a pod of 1 GPU")
    assert "3 node selector mismatch" in r.message and "1 cordoned" in r.message and "1 not ready" in r.message
    tainted_only = pod("t", gpus=1, queue="q", nodeSelector={"kubernetes.io/os": "linux"})
    objs[1]["metadata"]["labels"]["kubernetes.io/os"] = "linux"
    (r,) = cycle([*objs, tainted_only]).pending["default/pg-pod-t"]
    assert "1 untolerated taint" in r.message


def test_bad_objects_do_not_stop_others() -> None:
    objs = [node("n"), queue("q"), queue("orphan", parent="ghost"),
            pod("ok", gpus=1, queue="q"), pod("bad", queue="q", annotations={"gpu-fraction": "1.5"}),
            pod("lost", gpus=1, queue="nowhere"), pod("o", gpus=1, queue="orphan"),
            pod("nopg", gpus=1, group="missing")]
    d = cycle(objs)
    assert where(d) == {"ok": "n"}
    codes = {k: v[0].code for k, v in d.pending.items()}
    assert codes == {"default/pg-pod-bad": "InvalidSpec", "default/pg-pod-lost": "UnknownQueue",
                     "default/pg-pod-o": "InvalidQueue", "default/missing": "MissingPodGroup"}


@pytest.mark.parametrize("cpu_job", [False, True])
def test_no_gpu_left_the_rest_fail_as_in_their_turn(monkeypatch: pytest.MonkeyPatch, cpu_job: bool) -> None:
    """Once no GPU is idle, the jobs still waiting that need one are served without the order: their reasons are
    the ones they get in their turn (the short cut off); with a job without GPUs waiting, the order goes on."""
    objs: list[Obj] = [node("a", gpus=2), node("b", gpus=1, cpu="4"), queue("q1"), queue("q2"),
                       pod("shared", queue="q2", node_name="b", annotations={"gpu-fraction": "0.5"}, gpus=0),
                       *gang("g1", "q1", 2), pod("one", gpus=1, queue="q2", created="2026-01-01T00:00:01Z")]
    objs += [pod(f"late{i}", gpus=1, queue=f"q{1 + i % 2}", created=f"2026-01-01T00:01:{i:02d}Z") for i in range(6)]
    objs += [*gang("big", "q1", 3, created="2026-01-01T00:02:00Z"),
             pod("quarter", queue="q2", annotations={"gpu-fraction": "0.75"}, created="2026-01-01T00:03:00Z")]
    if cpu_job:
        objs.append(pod("cpu-only", queue="q1", created="2026-01-01T00:04:00Z"))
    asked: list[int] = []
    cannot_fit = allocate_action._cannot_fit

    def counted(*args: Any) -> bool:
        asked.append(1)
        return cannot_fit(*args)

    monkeypatch.setattr(allocate_action, "_cannot_fit", counted)
    with_short_cut = cycle(objs)
    assert asked  # the short cut was considered (and taken unless a job without GPUs waits)
    monkeypatch.setattr(allocate_action, "_no_gpu_left", lambda session: False)
    plain = cycle(objs)
    assert where(with_short_cut) == where(plain)
    assert {k: [r.message for r in v] for k, v in with_short_cut.pending.items()} == \
        {k: [r.message for r in v] for k, v in plain.pending.items()}
    assert len(plain.pending) >= 7 and ("cpu-only" in where(plain)) == cpu_job
