"""The eviction actions' memory of vain searches (``kaid.actions.memory``) changes nothing but the work: on random
clusters and random sequences of cycles (quiet ones, where the memory is used, and ones where pods finish, jobs
arrive, nodes change or hours pass), the decisions with the memory are those without it, cycle by cycle."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from kaid.actions.memory import SearchMemory
from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.sim.apply import apply
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, break_a_gang, cases, start

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
