"""A victim's eviction units read its pods in one pass each (``victims._alive``: ``running`` and whether a pod was
pipelined before this cycle; ``victims._unit``: what the unit's pods hold and the GPU-seconds they made), and preempt's
candidate test reads no pods (``PreemptRules.candidate``: a job with no pod an eviction can take passes it now, and has
no unit). Checked at every reading against the plain one, on random clusters over several cycles and on bench_victims
small: the same pods, the same sums (``lost`` to the last bit: the same terms in the same order)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import event, given

from benchmarks import bench_victims
from kaid.actions import victims
from kaid.actions.preempt import PreemptRules
from kaid.actions.scenario import Attempt
from kaid.actions.session import Session
from kaid.actions.victims import Unit, persisted, running, takes
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job, Pod, Queue
from kaid.model.vocabulary import PodPhase, PodStatus
from tests.objects import node, pod, podgroup, queue
from tests.sessions import pod_named, session_of
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def _plain_lost(pods: list[Pod], now: float) -> float:
    """The GPU-seconds of progress of ``pods``, one function per term."""

    def gpus(p: Pod) -> int:
        return p.gpu_milli_on(None) if not p.gpu_whole else p.gpu_whole * 1000

    def ran(p: Pod) -> float:
        if p.status == PodStatus.ALLOCATED or (p.status == PodStatus.PIPELINED and p.phase != PodPhase.RUNNING):
            return 0.0
        return max(0.0, now - p.started)

    return sum(gpus(p) * ran(p) for p in pods) / 1000


def _checked(run: Callable[[], object]) -> Counter[str]:
    """``run`` with every reading checked against the plain one; returns what was checked."""
    seen: Counter[str] = Counter()
    real_alive, real_unit, real_candidate = victims._alive, victims._unit, PreemptRules.candidate

    def alive(job: Job) -> tuple[list[Pod], bool]:
        got = real_alive(job)
        assert got[0] == running(job), job.key
        assert got[1] == any(p.status == PodStatus.PIPELINED and persisted(p) for p in job.pods), job.key
        seen["alive"] += 1
        seen["moving"] += got[1]
        seen["releasing"] += any(p.releasing for p in job.pods)
        return got

    def unit(job: Job, pods: list[Pod], elastic: bool, queue: Queue, now: float) -> Unit:
        got = real_unit(job, pods, elastic, queue, now)
        assert (got.gpu, got.cpu, got.mem) == (sum(p.gpu_milli_on(None) if not p.gpu_whole else p.gpu_whole * 1000
                                                   for p in pods), sum(p.cpu for p in pods), sum(p.mem for p in pods))
        assert got.lost.hex() == _plain_lost(pods, now).hex(), job.key
        seen["units"] += 1
        seen["not started"] += any(p.status == PodStatus.ALLOCATED for p in pods)
        return got

    def candidate(rules: PreemptRules, session: Session, att: Attempt, victim: Job) -> bool:
        got = real_candidate(rules, session, att, victim)
        plain = rules.candidate_queue(session, att, victim.queue) and victim is not att.job and \
            victim.preemptible and victim.priority < att.job.priority and bool(running(victim))
        if got != plain:  # only a job no eviction can take a pod of: it has no unit
            assert got and not any(takes(p) for p in victim.pods), victim.key
            seen["taken already"] += 1
        seen["candidates"] += 1
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(victims, "_alive", alive)
        mp.setattr(victims, "_unit", unit)
        mp.setattr(PreemptRules, "candidate", candidate)
        run()
    return seen


@SETTINGS
@given(case=cases())
def test_units_read_in_one_pass_are_the_plain_ones(case: Case) -> None:
    seen = _checked(lambda: decisions_over(case, 3))
    for kind in ("moving", "releasing", "not started", "taken already"):
        event(f"{kind}: {'some' if seen[kind] else 'none'}")


def test_the_benchmark_units_read_in_one_pass_are_the_plain_ones() -> None:
    wl = bench_victims.build_workload(nodes=60, reclaimers=10, seed=0)
    cfg = bench_victims.config_for("greedy")
    seen = _checked(lambda: run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg))
    assert seen["alive"] >= 20 and seen["units"] >= 20 and seen["candidates"] >= 20


def test_a_releasing_pod_is_in_no_unit() -> None:
    """A job of three running pods, one of them on its way out: its units hold the other two; allocated in this cycle,
    a pod has made no progress."""
    session = session_of([node("n0", gpus=4), queue("q"), podgroup("v", "q", 1, priority_class="train"),
                          *(pod(f"v-{i}", gpus=1, group="v", node_name="n0") for i in range(3))])
    job = session.snap.jobs["default/v"]
    pod_named(session, "v-2").releasing = True
    units, _ = victims.units_of(job, session.snap.queues["q"], session.snap.now, 0.0)
    assert sorted(p.name for u in units for p in u.pods) == ["v-0", "v-1"]
    assert victims.count_units(job, session.snap.queues["q"], session.snap.now, 0.0) == len(units) == 2
    first = pod_named(session, "v-0")
    first.status = PodStatus.ALLOCATED
    [unit] = [u for u in victims.units_of(job, session.snap.queues["q"], session.snap.now, 0.0)[0]
              if first in u.pods]
    assert unit.lost.hex() == _plain_lost(unit.pods, session.snap.now).hex()
    assert unit.lost < sum(p.gpu_whole * 1000 * (session.snap.now - p.started) for p in unit.pods) / 1000
