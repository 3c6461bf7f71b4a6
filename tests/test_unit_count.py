"""A search that found nothing counts its candidates' units for its explanation without making those it has not
drawn (``victims.count_units``, ``Search.count_rest``): the count is that of the units a plain draw makes (KAI's
victim order, every unit), and the decisions, explanations included, are those of the draw.

- ``count_units`` against ``units_of`` on jobs of one pod set, above, at and below their minimum, some pods young
  (min runtime) or pipelined, with a random set of useful nodes: the same count, less the last unit where none of its
  pods is useful.
- Whole cycles (random clusters, bench_victims small): each counted search against the plain draw of the same search
  as it found the session.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from benchmarks import bench_victims
from kaid.actions import by_node, evictions, victims
from kaid.actions.scenario import Attempt
from kaid.actions.session import Session
from kaid.actions.victims import Search, count_units, units_of
from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.vocabulary import PodStatus
from tests.equivalence import assert_same_decisions
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, cases, decisions_over


@st.composite
def jobs(draw: st.DrawFn) -> tuple[list[dict[str, object]], int, list[float], set[int], float, int]:
    """A running job of n pods (one per node), its minimum, the pods' ages, the useful nodes, a min runtime and how
    many pods are pipelined."""
    n = draw(st.integers(1, 7))
    least = draw(st.integers(0, 9))
    ages = draw(st.lists(st.sampled_from([5.0, 50.0, 500.0]), min_size=n, max_size=n))
    useful = set(draw(st.lists(st.integers(0, n - 1), max_size=n)))
    runtime = draw(st.sampled_from([0.0, 20.0, 100.0]))
    piped = draw(st.integers(0, 1))
    objs: list[dict[str, object]] = [queue("q"), podgroup("g", "q", least, priority_class="train")]
    for i in range(n):
        created = f"2026-01-01T00:00:{draw(st.integers(0, 3)):02}Z"  # (task order: older first, then the name)
        objs += [node(f"n{i}", gpus=2), pod(f"p{i}", gpus=1, group="g", node_name=f"n{i}", created=created)]
    return objs, n, ages, useful, runtime, piped


@SETTINGS
@given(case=jobs())
def test_count_units_counts_the_units_of_a_job(case: tuple[list[dict[str, object]], int, list[float], set[int],
                                                            float, int]) -> None:
    objs, _, ages, useful_nodes, runtime, piped = case
    cfg = SchedulerConfig.model_validate({})
    snap = build_snapshot(objs, cfg, NOW)
    job = next(iter(snap.jobs.values()))
    pods = sorted(job.pods, key=lambda p: p.name)
    for p, age in zip(pods, ages, strict=True):
        p.started = NOW - age
    for p in pods[:piped]:  # a pod being moved: the job may only lose its elastic pods
        p.status = PodStatus.PIPELINED
    q = snap.queues[job.queue]

    def useful(p: object) -> bool:
        return int(p.node[1:]) in useful_nodes  # type: ignore[attr-defined]

    units = units_of(job, q, NOW, runtime)[0]
    kept = len(units) - (1 if units and not any(useful(p) for p in units[-1].pods) else 0)
    event(f"units {len(units)}, kept {kept}")
    assert count_units(job, q, NOW, runtime) == len(units)
    assert count_units(job, q, NOW, runtime, useful) == kept


def _plain_explain(session: Session, rules: evictions.Rules, att: Attempt, search: Search, protected: int) -> None:
    """``_explain`` as it was: every unit drawn, then counted."""
    search.draw_rest()
    evictions._whole(session, rules, att, search)
    why = rules.explain(session, att, search, protected)
    if why is not None:
        session.say(att.job, why)


def _counted_as_plain(run: Callable[[], list[Decisions]]) -> int:
    """``run`` with each search's count checked against the plain draw of the same search (``_search`` again, with the
    session as the search found it: a search that found nothing leaves it so); returns how many searches counted units
    they had not drawn."""
    counted = [0]
    context: list[tuple[Session, evictions.Rules, Attempt, evictions.Pool]] = []
    search_of, explain = evictions._search, evictions._explain

    def remembered(session: Session, rules: evictions.Rules, att: Attempt,
                   pool: evictions.Pool) -> tuple[Search, int]:
        context.append((session, rules, att, pool))
        return search_of(session, rules, att, pool)

    def checked(session: Session, rules: evictions.Rules, att: Attempt, search: Search, protected: int) -> None:
        drawn = len(search.units)
        explain(session, rules, att, search, protected)
        counted[0] += search.count() > drawn
        plain, _ = search_of(*context[-1])
        plain.draw_all()
        assert search.count() == len(plain.units)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions, "_search", remembered)
        mp.setattr(evictions, "_explain", checked)
        run()
    return counted[0]


@SETTINGS
@given(case=cases())
def test_a_vain_search_counts_the_units_of_the_plain_draw(case: Case) -> None:
    counted = _counted_as_plain(lambda: decisions_over(case, 3))
    event(f"vain searches with units left to count: {'some' if counted else 'none'}")
    assert_same_decisions(lambda: decisions_over(case, 3), [], [(evictions, "_explain", _plain_explain)])


@pytest.mark.parametrize(("nodes", "reclaimers", "seed"), [(40, 8, 2), (60, 10, 2)])
def test_the_benchmark_vain_searches_count_the_units_of_the_plain_draw(nodes: int, reclaimers: int,
                                                                       seed: int) -> None:
    wl = bench_victims.build_workload(nodes=nodes, reclaimers=reclaimers, seed=seed)
    cfg = bench_victims.config_for("greedy")

    def run() -> list[Decisions]:
        return [run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg)]

    with pytest.MonkeyPatch.context() as mp:  # (the census's vain check: the one by draws draws such a search's units
        mp.setattr(by_node, "VAIN_BATCH", 0)  # before it ends, ``test_vain_draws``)
        assert _counted_as_plain(run) >= 1
    assert_same_decisions(run, [], [(evictions, "_explain", _plain_explain)])


def test_a_budget_over_the_candidates_draws_them() -> None:
    """A PodDisruptionBudget over the candidates: the explanation names it, so the units are drawn (not counted)."""
    cfg = SchedulerConfig.model_validate({"actions": ["allocate", "reclaim"]})
    objs: list[dict[str, object]] = [queue("a", gpu=(0, -1, 1)), queue("b", gpu=(4, -1, 1)),
                                     podgroup("big", "b", 4, priority_class="train")]
    for i in range(2):
        objs += [node(f"n{i}", gpus=2), podgroup(f"r{i}", "a", 1, priority_class="train"),
                 pod(f"r{i}-0", gpus=2, group=f"r{i}", node_name=f"n{i}", labels={"app": "r"})]
    objs += [pod(f"big-{i}", gpus=1, group="big") for i in range(4)]
    objs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "keep", "namespace": "default"},
                 "spec": {"selector": {"matchLabels": {"app": "r"}}},
                 "status": {"disruptionsAllowed": 0}})
    snap = build_snapshot(objs, cfg, NOW)
    assert snap.budgets
    drawn: list[int] = []
    real = victims.Search.draw_rest

    def counted(search: Search) -> None:
        drawn.append(1)
        real(search)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(victims.Search, "draw_rest", counted)
        d = run_cycle(snap, cfg)
    assert "PodDisruptionBudget default/keep" in str(d.pending), d.pending
    assert drawn
