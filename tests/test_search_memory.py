"""The eviction actions' memory of vain searches (``kaid.actions.memory``) changes nothing but the work: on random
clusters and random sequences of cycles (quiet ones, where the memory is used, and ones where pods finish, jobs
arrive, nodes change or hours pass), the decisions with the memory are those without it, cycle by cycle."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from kaid.actions.evictions import min_runtime
from kaid.actions.memory import NEVER, SearchMemory, horizon
from kaid.actions.session import STUCK_RELEASING_SECONDS
from kaid.api.config import Action, SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Queue, Snapshot
from kaid.model.vocabulary import PodStatus
from kaid.sim.apply import apply
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, break_a_gang, cases, start, world_of

Obj = dict[str, Any]
CHANGES = ("quiet", "quiet", "quiet", "finish", "arrive", "relabel", "hours")


@dataclass
class Run:
    decisions: list[Decisions]
    hits: int  # vain searches skipped thanks to the memory


def _change(world: list[Obj], change: str, n: int, t: float) -> float:
    """One change between cycles, the same in both runs; returns the next cycle's clock."""
    if change == "finish":
        running = [o for o in world if o["kind"] == "Pod" and o["spec"].get("nodeName")]
        if running:
            world.remove(running[n % len(running)])
    elif change == "arrive":
        world.append(podgroup(f"late{n}", ("t00", "t01", "t10", "t11")[n % 4], 1, priority_class="inference"))
        world.append(pod(f"late{n}-0", gpus=1 + n % 2, group=f"late{n}"))
    elif change == "relabel":
        nodes = [o for o in world if o["kind"] == "Node"]
        nodes[n % len(nodes)]["metadata"].setdefault("labels", {})["pool"] = "c"
    return t + (3600.0 if change == "hours" else 30.0)


def _run(case: Case, changes: list[tuple[str, int]], remember: bool) -> Run:
    cfg = case.cfg.model_copy(update={"placement": case.cfg.placement.model_copy(update={"gangSolver": "greedy"})})
    world = start(case.objs, cfg, case.spread) + copy.deepcopy(case.late)
    if case.broken:
        world = break_a_gang(world)
    memory: SearchMemory | None = SearchMemory() if remember else None
    out = Run([], 0)
    t = NOW
    for change, n in changes:
        snap = build_snapshot(world, cfg, t)
        before = memory
        d = run_cycle(snap, cfg, memory=memory)
        if remember:
            assert d.memory is not None and before is not None
            out.hits += sum(len(m) for a, m in d.memory.misses.items()
                            if before.worlds.get(a) == d.memory.worlds.get(a) and t < before.until)
            memory = d.memory
        out.decisions.append(d)
        apply(world, d, t)
        t = _change(world, change, n, t)
    return out


def _digest(d: Decisions) -> tuple[object, ...]:
    return (sorted((b.pod, b.node, b.devices, b.action, b.by) for b in d.binds),
            sorted((b.pod, b.node, b.devices, b.action, b.by) for b in d.pipelined),
            sorted((e.pod, e.action, e.by, e.message) for e in d.evictions),
            sorted((k, [(r.code, r.message) for r in v]) for k, v in d.pending.items()),
            sorted((v.job, v.action, v.method, v.gpus_evicted) for v in d.victims.decisions))


@SETTINGS
@given(case=cases(), changes=st.lists(st.tuples(st.sampled_from(CHANGES), st.integers(0, 50)), min_size=4,
                                      max_size=10))
def test_memory_changes_no_decision(case: Case, changes: list[tuple[str, int]]) -> None:
    without = _run(case, changes, remember=False)
    with_memory = _run(case, changes, remember=True)
    event(f"vain searches skipped: {'some' if with_memory.hits else 'none'}")
    for k, (a, b) in enumerate(zip(without.decisions, with_memory.decisions, strict=True)):
        assert _digest(a) == _digest(b), f"cycle {k + 1} ({changes[k - 1][0] if k else 'first'}) differs"


def test_a_quiet_cycle_repeats_no_vain_search() -> None:
    """A full cluster whose pending job no victim search can help: the second, identical cycle skips the search
    and decides the same."""
    objs: list[Obj] = [node("n0", gpus=2), queue("a", gpu=(2, -1, 1)), queue("b", gpu=(0, -1, 1)),
                       podgroup("run", "a", 2, priority_class="build"), podgroup("wait", "b", 1)]
    objs += [pod(f"run-{k}", gpus=1, group="run", node_name="n0") for k in range(2)]
    objs.append(pod("wait-0", gpus=1, group="wait"))
    cfg = SchedulerConfig()
    first = run_cycle(build_snapshot(objs, cfg, NOW), cfg, memory=SearchMemory())
    assert first.memory is not None and any(first.memory.misses.values())
    again = run_cycle(build_snapshot(objs, cfg, NOW + 30), cfg, memory=first.memory)
    assert _digest(first) == _digest(again) and again.memory is not None
    assert again.memory.misses == first.memory.misses and again.memory.worlds == first.memory.worlds


def _protected(min_runtime: str, pending_gpus: int) -> list[Obj]:
    """A node full of a preemptible job of queue a, over its share and started ten minutes before ``NOW``, protected
    from reclaim for ``min_runtime``; a job of queue b, whose share the node is, waiting for ``pending_gpus``."""
    a = queue("a", gpu=(0, -1, 1))
    a["spec"]["reclaimMinRuntime"] = min_runtime
    running = pod("run-0", gpus=2, group="run", node_name="n0")
    running["status"]["startTime"] = "2025-12-31T23:50:00Z"  # NOW - 600
    return [node("n0", gpus=2), a, queue("b", gpu=(2, -1, 1)), podgroup("run", "a", 1, priority_class="train"),
            podgroup("wait", "b", 1), running, pod("wait-0", gpus=pending_gpus, group="wait")]


def test_a_horizon_is_kept_only_in_its_world() -> None:
    """A cycle whose world lowered a victim's protection (it now ends sooner than the last world's horizon) works
    its horizon out again: its vain search is remembered only until the protection ends, and the cycle after that
    reclaims, as a cycle without the memory does."""
    objs = _protected("1h", 2)  # protected until NOW + 3000
    cfg = SchedulerConfig()
    first = run_cycle(build_snapshot(objs, cfg, NOW), cfg, memory=SearchMemory())
    assert first.memory is not None and first.memory.until == NOW + 3000 and not first.evictions
    objs[1]["spec"]["reclaimMinRuntime"] = "20m"  # protected until NOW + 600
    second = run_cycle(build_snapshot(objs, cfg, NOW + 60), cfg, memory=first.memory)
    assert second.memory is not None and second.memory.until == NOW + 600 and not second.evictions
    third = run_cycle(build_snapshot(objs, cfg, NOW + 700), cfg, memory=second.memory)
    plain = run_cycle(build_snapshot(objs, cfg, NOW + 700), cfg)
    assert [e.pod for e in third.evictions] == ["default/run-0"] and _digest(third) == _digest(plain)


def test_a_horizon_passed_is_worked_out_again() -> None:
    """In an unchanged world, once the clock passed the last cycle's horizon, the next is worked out afresh (kept,
    the memory would never hold again in that world)."""
    objs = _protected("20m", 4)  # more than the node has: every search is vain, protected or not
    cfg = SchedulerConfig()
    first = run_cycle(build_snapshot(objs, cfg, NOW), cfg, memory=SearchMemory())
    assert first.memory is not None and first.memory.until == NOW + 600
    later = run_cycle(build_snapshot(objs, cfg, NOW + 700), cfg, memory=first.memory)
    assert later.memory is not None and later.memory.until == NEVER and later.memory.world == first.memory.world


def plain_horizon(snap: Snapshot, stuck_after: float) -> float:
    """``horizon`` read plainly: every running pod's protections (both actions', 0 where none), every releasing
    pod's deletion."""
    until = NEVER
    for p in snap.pods:
        if p.releasing:
            if p.deleted + stuck_after >= snap.now:
                until = min(until, p.deleted + stuck_after)
        elif p.status in (PodStatus.RUNNING, PodStatus.BOUND) and p.job is not None:
            q = snap.queues.get(p.job.queue)
            if q is None:
                continue
            # a claimant under each queue of the victim's path (the lowest common ancestor), and one of another tree
            claimants = [*q.path(), Queue("another-tree")]
            for action in (Action.RECLAIM, Action.PREEMPT):
                for claimant in claimants:
                    runtime = min_runtime(q, action, claimant)
                    if runtime > 0 and p.started + runtime > snap.now:
                        until = min(until, p.started + runtime)
    return until


@SETTINGS
@given(case=cases(), hours=st.lists(st.sampled_from([0.0, 0.1, 0.5, 1.0, 2.0]), min_size=3, max_size=3))
def test_horizon_is_its_plain_reading(case: Case, hours: list[float]) -> None:
    """The horizon (the queues' protections read once, the running pods read only where a queue protects them)
    against the plain reading, on random clusters over cycles and clocks (a mutant reading one action's
    protection only, or no running pod, fails here)."""
    cfg = case.cfg
    world = world_of(case, cfg)
    t = NOW
    ends = 0
    for step in hours:
        snap = build_snapshot(world, cfg, t)
        want = plain_horizon(snap, STUCK_RELEASING_SECONDS)
        assert horizon(snap, STUCK_RELEASING_SECONDS) == want
        ends += want < NEVER
        apply(world, run_cycle(snap, cfg), t)
        t += step * 3600
    event(f"horizons before never: {'some' if ends else 'none'}")
