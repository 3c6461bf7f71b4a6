"""A victim's turn that can change nothing is not taken (``scenario.stuck``: every pod of the job takes whole GPUs,
at least ``w``, and no node has ``w`` idle), and once the pending job is placed and every victim whose turn is still
to come is stuck, a scenario takes no more turns (no more pops of its serving order). With every turn taken, each
turn the check skips leaves the session as it found it and moves no pod; and the decisions are the same as with the
check off, on random clusters over several cycles and on bench_victims' workload, small (bench_victims itself: 91
of a first-fit cycle's 109 victims' turns after the job's placement are skipped)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import event, given

from benchmarks import bench_victims
from kaid.actions import scenario
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job, Node, Pod
from kaid.placement.index import NodeIndex
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over

PLAIN = [(scenario, "stuck", lambda session, job: False)]


@contextmanager
def every_turn_checked() -> Iterator[list[int]]:
    """Every turn taken (the check skips none), and each turn it would have skipped asserted to change nothing. Yields
    the count of those turns (one item), filled as the cycles run."""
    skipped = [0]
    stuck, take_back = scenario.stuck, scenario._take_back

    def checked(session: Any, att: Any, job: Any, *args: Any, **kwargs: Any) -> Any:
        would = stuck(session, job)
        before = len(session.ops), list(session.ops)
        out = take_back(session, att, job, *args, **kwargs)
        if would:
            skipped[0] += 1
            assert out == []
            assert (len(session.ops), list(session.ops)) == before
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scenario, "stuck", lambda session, job: False)
        mp.setattr(scenario, "_take_back", checked)
        yield skipped


@SETTINGS
@given(case=cases())
def test_a_stuck_turn_changes_nothing(case: Case) -> None:
    with every_turn_checked() as skipped:
        decisions_over(case, 4)
    event(f"turns the check skips: {'some' if skipped[0] else 'none'}")
    assert_same_decisions(lambda: decisions_over(case, 4), [], PLAIN)


@pytest.mark.parametrize(("nodes", "reclaimers", "seed"), [(60, 12, 0), (100, 10, 1)])
def test_the_benchmark_stuck_turns_change_nothing(nodes: int, reclaimers: int, seed: int) -> None:
    wl = bench_victims.build_workload(nodes=nodes, reclaimers=reclaimers, seed=seed)
    cfg = bench_victims.config_for("greedy")

    def run() -> list[Decisions]:
        return [run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg)]

    with every_turn_checked() as skipped:
        run()
    assert skipped[0] >= 1
    assert_same_decisions(run, [], PLAIN)


class _Session:
    def __init__(self, index: NodeIndex) -> None:
        self.index = index
        self.whole_least: dict[int, int] = {}


def _node(i: int, gpus: int, idle: int) -> Node:
    n = Node(f"n{i}", {}, [], False, True, 64000, 10**12, 110, gpus, 0)
    n.index, n.dev_used, n.idle = i, [1000] * (gpus - idle) + [0] * idle, idle
    return n


def _job(*wholes: int) -> Job:
    job = Job("ns", "j")
    job.pods = [Pod("ns", f"p{k}", f"u{k}") for k in range(len(wholes))]
    for p, w in zip(job.pods, wholes, strict=True):
        p.gpu_whole = w
    return job


@pytest.mark.parametrize(("idle", "wholes", "expected"), [
    ((0, 1), (2, 2), True),  # no node has 2 idle
    ((0, 3), (2, 2), False),  # one node has 3 idle: a bucket above the least
    ((2, 0), (2, 4), False),  # the least is what counts: a pod of 2 fits
    ((1, 1), (2, 0), False),  # a pod that takes no whole GPU can go anywhere
    ((3, 3), (8,), True),  # more than any node has
])
def test_stuck_reads_every_bucket_from_the_least(idle: tuple[int, ...], wholes: tuple[int, ...],
                                                  expected: bool) -> None:
    index = NodeIndex([_node(i, 4, k) for i, k in enumerate(idle)])
    assert scenario.stuck(_Session(index), _job(*wholes)) is expected  # type: ignore[arg-type]


def _claim_checked(session: Any, job: Any) -> bool:
    """``stuck``, with what it claims checked where it says so: none of the job's evicted pods fits back on its own
    devices (``NodeIndex.fits_exactly``), and no node has room for any of its pods (``best_node``)."""
    said = _stuck(session, job)
    if said:
        index = session.index
        for p in job.pods:
            stack = session._evicts.get(id(p))
            if p.status == scenario._EVICTED and stack:
                assert not index.fits_exactly(stack[-1].node, p, stack[-1].devices)
            assert index.best_node(p) is None
    return said


_stuck = scenario.stuck


@SETTINGS
@given(case=cases())
def test_what_stuck_says_holds(case: Case) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scenario, "stuck", _claim_checked)
        decisions_over(case, 4)


def test_what_stuck_says_holds_on_the_benchmark() -> None:
    wl = bench_victims.build_workload(nodes=100, reclaimers=10, seed=1)
    cfg = bench_victims.config_for("greedy")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scenario, "stuck", _claim_checked)
        run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg)
