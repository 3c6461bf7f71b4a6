"""A PodGroup's ``spec.preemptionDelay`` (KAI's ``PreemptionDelayEnd``/``IsWithinPreemptionDelay``, its actions'
``FilterWithinPreemptionDelay``): a pending job may not evict anyone (preempt, reclaim, consolidate) until its delay
has passed since its creation or its last eviction (``kai.scheduler/last-eviction-timestamp``), whichever is later;
it is told so once. The memory of vain searches ends where a delay does (``memory.horizon``): a cycle in the same
world after the delay's end searches again. The PodGroup's reading: a duration, a bad one an invalid PodGroup, none
or a non-positive one no delay."""

from __future__ import annotations

from typing import Any

from kaid.actions.memory import SearchMemory
from kaid.api.config import SchedulerConfig
from kaid.api.meta import format_time, parse_time
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from tests.objects import node, pod, podgroup, queue

T0 = parse_time("2026-01-01T00:00:00Z")
Obj = dict[str, Any]


def world(delay: str | None = "10m", last_eviction: float | None = None) -> list[Obj]:
    """One GPU, held by a low-priority preemptible job; a higher-priority job of the same queue waits for it."""
    high = podgroup("high", "q", priority_class="build", created=format_time(T0))
    if delay is not None:
        high["spec"]["preemptionDelay"] = delay
    if last_eviction is not None:
        high["metadata"]["annotations"] = {"kai.scheduler/last-eviction-timestamp": format_time(last_eviction)}
    return [node("n0", gpus=1), queue("q", gpu=(1, -1, 1)),
            podgroup("low", "q", priority_class="train"), pod("low-0", gpus=1, group="low", node_name="n0"),
            high, pod("high-0", gpus=1, group="high", created=format_time(T0))]


def cycle(objs: list[Obj], at: float, memory: SearchMemory | None = None) -> Decisions:
    cfg = SchedulerConfig.model_validate({})
    return run_cycle(build_snapshot(objs, cfg, at), cfg, memory=memory)


def delay_reasons(d: Decisions) -> list[str]:
    return [r.message for r in d.pending.get("default/high", []) if r.code == "PreemptionDelayNotElapsed"]


def test_no_eviction_within_the_delay_and_one_after_it() -> None:
    within = cycle(world(), T0 + 120)
    assert within.evictions == [] and len(delay_reasons(within)) == 1
    assert "2026-01-01T00:10:00Z" in delay_reasons(within)[0]
    after = cycle(world(), T0 + 600)  # (KAI: within while now is before the end)
    assert [e.pod for e in after.evictions] == ["default/low-0"] and delay_reasons(after) == []
    assert [e.pod for e in cycle(world(delay=None), T0 + 120).evictions] == ["default/low-0"]
    assert [e.pod for e in cycle(world(delay="0s"), T0 + 120).evictions] == ["default/low-0"]
    assert [e.pod for e in cycle(world(delay="-5m"), T0 + 120).evictions] == ["default/low-0"]


def test_the_delay_counts_from_the_last_eviction_when_later() -> None:
    assert cycle(world(last_eviction=T0 + 300), T0 + 601).evictions == []
    assert [e.pod for e in cycle(world(last_eviction=T0 + 300), T0 + 900).evictions] == ["default/low-0"]
    assert [e.pod for e in cycle(world(last_eviction=T0 - 300), T0 + 601).evictions] == ["default/low-0"]


def test_the_memory_of_vain_searches_ends_with_the_delay() -> None:
    first = cycle(world(), T0 + 120, SearchMemory())
    assert first.evictions == [] and first.memory is not None
    same = cycle(world(), T0 + 300, first.memory)  # the same world, still within: the same
    assert same.evictions == [] and delay_reasons(same) == delay_reasons(first)
    assert same.memory is not None
    later = cycle(world(), T0 + 601, same.memory)
    assert [e.pod for e in later.evictions] == ["default/low-0"]


def test_a_bad_delay_makes_the_podgroup_invalid() -> None:
    d = cycle(world(delay="soon"), T0 + 120)
    assert any(r.code == "InvalidPodGroup" for r in d.pending.get("default/high", []))
