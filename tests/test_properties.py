"""Property tests on random snapshots and random cycles (docs/architecture.md, "How it is tested")."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.fairshare import compute_fair_share
from kaid.model.build import build_snapshot
from kaid.model.objects import GPU, RESOURCES, UNLIMITED, Pod, Queue, Snapshot
from kaid.model.vocabulary import PodStatus
from kaid.sim.apply import apply
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]
LIMITS = st.sampled_from([-1, 0, 4, 8, 16])
QUOTAS = st.sampled_from([-1, 0, 2, 4, 8])


def _fit_limit(quota: int, limit: int) -> int:
    """A limit below the quota is invalid input; keep the generated tree valid."""
    return limit if limit <= 0 or quota < 0 or limit >= quota else -1


@st.composite
def clusters(draw: st.DrawFn) -> list[Obj]:
    objs: list[Obj] = []
    for i in range(draw(st.integers(1, 6))):
        objs.append(node(f"n{i}", gpus=draw(st.sampled_from([0, 1, 2, 4, 8])), cpu=str(draw(st.sampled_from([8, 32]))),
                         memory="256Gi", labels={"rack": f"r{i % 2}"},
                         taints=[{"key": "gpu", "effect": "NoSchedule"}] if draw(st.booleans()) and i else None))
    objs.append({"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "t"},
                 "spec": {"levels": [{"nodeLabel": "rack"}]}})
    # a 3-level tree: 2 departments x 2 teams
    objs.append(queue("org", gpu=(draw(QUOTAS), draw(LIMITS), 1)))
    leaves = []
    for d in range(2):
        quota = draw(QUOTAS)
        limit = _fit_limit(quota, draw(LIMITS))
        objs.append(queue(f"d{d}", "org", gpu=(quota, limit, draw(st.sampled_from([1, 2, 3]))),
                          priority=draw(st.sampled_from([100, 100, 200]))))
        for t in range(2):
            name = f"t{d}{t}"
            quota = draw(QUOTAS)
            limit = _fit_limit(quota, draw(LIMITS))
            objs.append(queue(name, f"d{d}", gpu=(quota, limit, draw(st.sampled_from([0, 1, 2])))))
            leaves.append(name)
    for j in range(draw(st.integers(0, 10))):
        q = draw(st.sampled_from(leaves))
        size = draw(st.integers(1, 4))
        minm = draw(st.integers(1, size))
        kind = draw(st.sampled_from(["whole", "whole", "frac", "cpu"]))
        prio = draw(st.sampled_from(["train", "build", "inference"]))
        spec: dict[str, Any] = {}
        if draw(st.integers(0, 4)) == 0:
            spec["topologyConstraint"] = {"topology": "t", draw(st.sampled_from(
                ["requiredTopologyLevel", "preferredTopologyLevel"])): "rack"}
        objs.append(podgroup(f"j{j}", q, minm, priority_class=prio, created=f"2026-01-01T00:00:{j:02d}Z", **spec))
        for k in range(size):
            ann = {}
            gpus = 0
            if kind == "whole":
                gpus = draw(st.sampled_from([1, 1, 2, 4]))
            elif kind == "frac":
                ann["gpu-fraction"] = draw(st.sampled_from(["0.2", "0.5", "0.7"]))
            tol = [{"key": "gpu", "operator": "Exists"}] if draw(st.booleans()) else []
            objs.append(pod(f"j{j}-{k}", gpus=gpus, group=f"j{j}", cpu=draw(st.sampled_from(["1", "4"])),
                            annotations=ann, tolerations=tol))
    return objs


def _holds_a_place(p: Pod) -> bool:
    """Holds or is about to hold resources (``Pod.active``: running, bound, releasing, pipelined), or was placed by
    this cycle (Allocated, which ``Pod.active`` leaves out): in the engine's view after a cycle a gang that allocate
    placed is all Allocated, and one pod pipelined beside them must not make it look one pod strong."""
    return p.active or p.status == PodStatus.ALLOCATED


def check_invariants(snap: Snapshot) -> None:
    for n in snap.nodes:
        assert n.used_cpu <= n.alloc_cpu and n.used_mem <= n.alloc_mem and n.used_pods <= n.alloc_pods, n.name
        assert all(0 <= u <= 1000 for u in n.dev_used), (n.name, n.dev_used)
        assert n.idle == sum(1 for u in n.dev_used[:n.gpus] if u == 0)  # (beyond: ``nodes.beyond``, never idle)
    for job in snap.jobs.values():
        active = sum(1 for p in job.pods if _holds_a_place(p))
        assert active == 0 or active >= min(job.min_member, len(job.pods)), (job.key, active, job.min_member)
    for q in snap.queues.values():
        for r in range(len(RESOURCES)):
            lim = q.effective_limit(r)
            assert lim == UNLIMITED or q.allocated[r] <= lim, (q.name, RESOURCES[r], q.allocated[r], lim)
            if q.quota[r] != UNLIMITED:
                assert q.alloc_np[r] <= q.quota[r], (q.name, "non-preemptible over quota")


# CI draws the same examples on every run: fresh draws find, now and then, the gang left below its minimum kept in
# tests/data/gang-below-min-case.json (test_a_gang_is_not_left_below_its_minimum); KAI_HYPOTHESIS_EXPLORE=1: fresh.
EXPLORE = bool(os.environ.get("KAI_HYPOTHESIS_EXPLORE"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=not EXPLORE)
@given(objs=clusters(), solver=st.sampled_from(["cpsat", "greedy"]), cycles=st.integers(1, 3))
def test_cycles_keep_invariants(objs: list[Obj], solver: str, cycles: int) -> None:
    cfg = SchedulerConfig.model_validate({"placement": {"gangSolver": solver}})
    for c in range(cycles):
        snap = build_snapshot(objs, cfg, float(c))
        d = run_cycle(snap, cfg)
        # the engine's own view after its tentative operations
        check_invariants(snap)
        apply(objs, d, float(c))
        # and the cluster rebuilt from the applied objects
        check_invariants(build_snapshot(objs, cfg, float(c)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objs=clusters())
def test_same_snapshot_same_decisions(objs: list[Obj]) -> None:
    cfg = SchedulerConfig()
    a = run_cycle(build_snapshot(objs, cfg, 0.0), cfg)
    b = run_cycle(build_snapshot(objs, cfg, 0.0), cfg)
    assert [(x.pod, x.node, x.devices) for x in a.binds] == [(x.pod, x.node, x.devices) for x in b.binds]
    assert {k: [r.message for r in v] for k, v in a.pending.items()} == \
        {k: [r.message for r in v] for k, v in b.pending.items()}


def _requestable(q: Queue, r: int) -> int:
    lim = q.effective_limit(r)
    return q.requested[r] if lim == UNLIMITED else min(lim, q.requested[r])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objs=clusters())
def test_fair_share_rules(objs: list[Obj]) -> None:
    """KAI's division (resource_division_test.go): every queue gets min(quota, request, limit) even when the
    quotas over-subscribe the parent; beyond that, no more than the parent has; over quota never more than the
    request or the limit, but for the one whole unit that rounding can hand a queue that lost a fraction."""
    snap = build_snapshot(objs)
    compute_fair_share(snap)
    cap = snap.capacity()
    for r in range(3):
        unit = (1000, 1, 1)[r]
        for parent_fair, kids in [(cap[r], snap.roots)] + [(q.fair[r], q.children) for q in snap.queues.values()]:
            kids = [k for k in kids if not k.errors]
            deserved = [min(k.requested[r] if k.quota[r] == UNLIMITED else k.quota[r], _requestable(k, r))
                        for k in kids]
            assert sum(k.fair[r] for k in kids) <= max(parent_fair, sum(deserved))
            for k, d in zip(kids, deserved, strict=True):
                assert k.fair[r] >= min(d, parent_fair if k.quota[r] == UNLIMITED else d)
                assert k.fair[r] <= max(d, _requestable(k, r) + unit - 1)
    assert all(q.fair[GPU] >= 0 for q in snap.queues.values())


def test_the_gang_check_counts_the_pods_placed_this_cycle() -> None:
    """check_invariants reads a gang in the engine's view as the cycle leaves it: Allocated pods count with the
    pipelined one (3 Allocated + 1 Pipelined is 4 of minimum 2, not 1), and a gang placed short of its minimum is
    caught even when all it has is Allocated (the check counted 0 active pods there and let it pass)."""
    objs = [node("n0", gpus=0, cpu="8"), queue("q", gpu=(-1, -1, 1)), podgroup("j", "q", 2),
            *[pod(f"j-{k}", group="j") for k in range(4)]]
    snap = build_snapshot(objs)
    pods = snap.jobs["default/j"].pods
    for p, status in zip(pods, [PodStatus.ALLOCATED] * 3 + [PodStatus.PIPELINED], strict=True):
        p.status, p.node = status, "n0"
    check_invariants(snap)
    for p in pods[1:]:
        p.status, p.node = PodStatus.PENDING, None
    with pytest.raises(AssertionError, match="default/j"):
        check_invariants(snap)


def test_a_gang_is_not_left_below_its_minimum() -> None:
    """A fresh draw of test_cycles_keep_invariants (CP-SAT, one cycle): allocate places j9-0..2 (minimum 2) and
    reclaim pipelines j9-3 onto the cpu it frees; the check counted the one Pipelined pod and not the 3 Allocated
    ones (``_holds_a_place``). The decisions were right: the rebuilt cluster has j9 at 3 running + 1 pipelined."""
    case = json.loads((Path(__file__).parent / "data" / "gang-below-min-case.json").read_text())
    test_cycles_keep_invariants.hypothesis.inner_test(objs=case["objs"], solver=case["solver"], cycles=case["cycles"])  # type: ignore[attr-defined]
