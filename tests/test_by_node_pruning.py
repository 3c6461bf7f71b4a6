"""Short cuts of KAI's victim search (``kaid.actions.by_node``) against the plain search they skip work of: on random
clusters over several cycles, every simulation a short cut skips, run anyway, places nothing (or breaks the rules),
and the decisions are the plain search's.

- ``first_time``: the nodes of a scenario's newest unit that hold the same victim jobs ask for the same simulation
  from the same session; only the first is run (bench_victims: 172 of 475 simulations).
- ``Search.draw_rest``: a search that found nothing draws its units left in no set order for its explanation, the
  units KAI's victim order would draw (where a PodDisruptionBudget needs their pods; else it counts them without
  drawing, ``evictions._countable``, tests/test_unit_count.py: these tests draw them all the same).
- ``_same``: where the probe of the whole batch is solved and every unit of its solution stays a victim, the last
  probe (KAI's ``probeAtK(n)`` with those victims as the recorded ones) would simulate the same scenario from the
  same session; the probe's outcome is kept as the answer (bench_victims: 32 of a first-fit cycle's 108
  simulations).
- ``vain``: a search whose every candidate unit, gone, leaves too few GPUs for the batch (node by node) is answered
  without its partial jobs; solved in full (no scenario budget) it finds nothing, and the decisions are the full
  search's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from benchmarks import bench_victims
from kaid.actions import by_node, evictions, victims
from kaid.actions.scenario import Attempt, Outcome
from kaid.actions.session import Session
from kaid.actions.victims import Search, Unit
from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from tests.equivalence import assert_same_decisions
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, cases, decisions_over
from tests.test_search_memory import _digest

first_time = by_node.first_time


def _always(tried: set[tuple[int, ...]], these: list[int]) -> bool:
    return True


@contextmanager
def plain_node_loop() -> Iterator[list[int]]:
    """The plain search's node loop: every node simulated, and each simulation ``first_time`` would have skipped
    asserted to place nothing. Yields the count of those simulations (one item), filled as the search runs."""
    skipped = [0]
    real = by_node._simulate
    repeat: list[bool] = []

    def told(tried: set[tuple[int, ...]], these: list[int]) -> bool:
        repeat.append(not first_time(tried, these))
        return True

    def checked(session: Session, att: Attempt, search: Search, victims: list[Unit],
                feasible: bytearray | None) -> Outcome | None:
        out = real(session, att, search, victims, feasible)
        if repeat and repeat.pop():
            skipped[0] += 1
            assert out is None, [p.key for u in victims for p in u.pods]
        repeat.clear()
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "first_time", told)
        mp.setattr(by_node, "_simulate", checked)
        yield skipped


@SETTINGS
@given(case=cases())
def test_a_repeated_simulation_is_skipped_and_would_place_nothing(case: Case) -> None:
    """Each simulation ``first_time`` skips is run anyway (by the plain search's node loop) and places nothing; the
    decisions are those of the plain search."""
    with plain_node_loop() as skipped:
        decisions_over(case, 3)
    event(f"simulations first_time skips: {'some' if skipped[0] else 'none'}")
    assert_same_decisions(lambda: decisions_over(case, 3), [], [(by_node, "first_time", _always)])


def _gang_victims(nodes: int) -> list[dict[str, object]]:
    """Queue a (far above its share) runs a gang whose 2-GPU pods fill the GPUs of 2-GPU nodes, each node's cpu
    mostly held by a non-preemptible pod; queue b's 2-GPU pod needs more cpu than a node has left with the gang gone:
    every node of the gang's unit asks for the simulation of that gang alone, and none places the job."""
    objs: list[dict[str, object]] = [queue("a", gpu=(0, -1, 1)), queue("b", gpu=(-1, -1, 1)),
                                     podgroup("hold", "a", 1, priority_class="build"),
                                     podgroup("g", "a", nodes, priority_class="train"),
                                     podgroup("want", "b", 1, priority_class="train")]
    for i in range(nodes):
        objs += [node(f"n{i:02}", gpus=2, cpu="8"), pod(f"hold-{i}", cpu="6", group="hold", node_name=f"n{i:02}"),
                 pod(f"g-{i}", gpus=2, cpu="1", group="g", node_name=f"n{i:02}")]
    objs.append(pod("want-0", gpus=2, cpu="4", group="want"))
    return objs


def test_the_nodes_of_one_gang_are_simulated_once() -> None:
    """The gang's victims are simulated once, not once per node of the gang: by the short cut (``first_time``), and
    without it by the failed-scenario fingerprints (KAI d5bc503a's ``failedScenarios``), which the short cut
    answers first."""
    runs: list[int] = []
    real = by_node._simulate

    def counted(session: Session, att: Attempt, search: Search, victims: list[Unit],
                feasible: bytearray | None) -> Outcome | None:
        runs[-1] += 1
        return real(session, att, search, victims, feasible)

    cfg = SchedulerConfig.model_validate({"actions": ["allocate", "reclaim"]})
    digests = []
    for short in (True, False):
        runs.append(0)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(by_node, "_simulate", counted)
            if not short:
                mp.setattr(by_node, "first_time", _always)
            d = run_cycle(build_snapshot(_gang_victims(6), cfg, NOW), cfg)
        digests.append((d.evictions, d.pipelined, sorted(d.pending)))
    assert runs == [1, 1], runs
    assert digests[0] == digests[1]


CROWDED = SchedulerConfig.model_validate({"actions": ["allocate", "reclaim", "preempt"]})


@st.composite
def crowded(draw: st.DrawFn) -> list[dict[str, object]]:
    """A full cluster of 2-GPU nodes, each with some of its cpu held by a non-preemptible pod, running victims of
    queue a (far above its share): single pods and gangs of 1- and 2-GPU pods packed node after node, so that a gang
    spans nodes and shares them with other jobs; queue b (below its share) and queue a wait for jobs whose pods need
    1 or 2 GPUs and some cpu, so that many scenarios have the GPUs but not the cpu."""
    nodes = draw(st.integers(3, 7))
    objs: list[dict[str, object]] = [queue("a", gpu=(0, -1, 1)), queue("b", gpu=(-1, -1, 1)),
                                     podgroup("hold", "a", 1, priority_class="build")]
    free = []
    for i in range(nodes):
        objs += [node(f"n{i}", gpus=2, cpu="8"),
                 pod(f"hold-{i}", cpu=str(draw(st.integers(0, 6))), group="hold", node_name=f"n{i}")]
        free.append(2)
    at, j = 0, 0
    while at < nodes:
        size, gpus = draw(st.integers(1, 4)), draw(st.sampled_from([1, 1, 2]))
        name, created = f"v{j}", f"2025-12-31T{10 + j % 10}:{draw(st.integers(0, 59)):02}:00Z"
        members = draw(st.integers(1, size))
        objs.append(podgroup(name, "a", members, priority_class="train", created=created))
        for k in range(size):
            while at < nodes and free[at] < gpus:
                at += 1
            if at == nodes:
                break
            free[at] -= gpus
            objs.append(pod(f"{name}-{k}", gpus=gpus, cpu="1", group=name, node_name=f"n{at}", created=created))
        j += 1
    for w in range(draw(st.integers(1, 3))):
        q, cls = draw(st.sampled_from([("b", "train"), ("b", "train"), ("a", "build-preemptible")]))
        size = draw(st.integers(1, 3))
        objs.append(podgroup(f"w{w}", q, size, priority_class=cls))
        gpus, cpu = draw(st.integers(1, 2)), draw(st.integers(1, 5))
        objs += [pod(f"w{w}-{k}", gpus=gpus, cpu=str(cpu), group=f"w{w}") for k in range(size)]
    return objs


def assert_plain_decisions(objs: list[dict[str, object]]) -> None:
    """One cycle of ``objs``: each simulation ``first_time`` skips, run by the plain search, places nothing; the
    decisions are the plain search's."""
    with plain_node_loop() as skipped:
        plain = run_cycle(build_snapshot(objs, CROWDED, NOW), CROWDED)
    short = run_cycle(build_snapshot(objs, CROWDED, NOW), CROWDED)
    event(f"simulations first_time skips: {'some' if skipped[0] else 'none'}")
    event(f"evictions: {'some' if plain.evictions else 'none'}")
    assert _digest(short) == _digest(plain)


@SETTINGS
@given(objs=crowded())
def test_crowded_clusters_decide_as_the_plain_search(objs: list[dict[str, object]]) -> None:
    """Full clusters whose victim gangs span nodes."""
    assert_plain_decisions(objs)


def _two_nodes(busy: int) -> list[dict[str, object]]:
    """Gang g's two 1-GPU pods on n0 and n1, beside the single pods x (n0) and y (n1), all queue a's; node ``busy``'s
    cpu is mostly held. Queue b's 2-GPU pod fits on a node once both its victims are gone: the gang's scenario asks
    for {x, g} on n0 and {y, g} on n1, victim sets of one size, and only the other node places the job."""
    objs: list[dict[str, object]] = [queue("a", gpu=(0, -1, 1)), queue("b", gpu=(-1, -1, 1)),
                                     podgroup("hold", "a", 1, priority_class="build"),
                                     podgroup("g", "a", 2, priority_class="train", created="2025-12-31T10:00:00Z"),
                                     podgroup("want", "b", 1, priority_class="train")]
    for i, single in enumerate(("x", "y")):
        objs += [node(f"n{i}", gpus=2, cpu="8"), pod(f"hold-{i}", cpu="6" if i == busy else "0", group="hold",
                                                    node_name=f"n{i}"),
                 podgroup(single, "a", 1, priority_class="train", created="2025-12-31T11:00:00Z"),
                 pod(f"{single}-0", gpus=1, cpu="1", group=single, node_name=f"n{i}", created="2025-12-31T11:00:00Z"),
                 pod(f"g-{i}", gpus=1, cpu="1", group="g", node_name=f"n{i}", created="2025-12-31T10:00:00Z")]
    objs.append(pod("want-0", gpus=2, cpu="4", group="want"))
    return objs


@pytest.mark.parametrize("busy", [0, 1])
def test_victim_sets_of_one_size_are_both_simulated(busy: int) -> None:
    """The job lands on the node whose cpu is free, the other single victim moved onto the node it leaves."""
    cfg = SchedulerConfig.model_validate({"actions": ["allocate", "reclaim"]})
    d = run_cycle(build_snapshot(_two_nodes(busy), cfg, NOW), cfg)
    moved = "xy"[1 - busy]
    assert [(p.pod, p.node) for p in d.pipelined] == [("default/want-0", f"n{1 - busy}"),
                                                      (f"default/{moved}-0", f"n{busy}")]
    assert sorted(e.pod for e in d.evictions) == ["default/g-0", "default/g-1", f"default/{moved}-0"]


@st.composite
def spans(draw: st.DrawFn) -> list[dict[str, object]]:
    """Gang g spans 2 to 4 full 2-GPU nodes: one 1-GPU pod on each beside a single pod of its own (victim sets of one
    size that differ from node to node), or two (every node of the gang asks for the same simulation); each node's
    cpu held or not, one or two 2-GPU jobs of queue b waiting."""
    nodes, singles = draw(st.integers(2, 4)), draw(st.booleans())
    objs: list[dict[str, object]] = [queue("a", gpu=(0, -1, 1)), queue("b", gpu=(-1, -1, 1)),
                                     podgroup("hold", "a", 1, priority_class="build"),
                                     podgroup("g", "a", nodes * (1 if singles else 2), priority_class="train",
                                              created="2025-12-31T10:00:00Z")]
    for i in range(nodes):
        objs += [node(f"n{i}", gpus=2, cpu="8"),
                 pod(f"hold-{i}", cpu=draw(st.sampled_from(["0", "6"])), group="hold", node_name=f"n{i}"),
                 pod(f"g-{i}", gpus=1, cpu="1", group="g", node_name=f"n{i}", created="2025-12-31T10:00:00Z")]
        created = f"2025-12-31T{draw(st.sampled_from([9, 11]))}:{i:02}:00Z"
        if singles:
            objs += [podgroup(f"s{i}", "a", 1, priority_class="train", created=created),
                     pod(f"s{i}-0", gpus=1, cpu="1", group=f"s{i}", node_name=f"n{i}", created=created)]
        else:
            objs.append(pod(f"g-{i}b", gpus=1, cpu="1", group="g", node_name=f"n{i}",
                            created="2025-12-31T10:00:00Z"))
    for w in range(draw(st.integers(1, 2))):
        objs += [podgroup(f"w{w}", "b", 1, priority_class="train"), pod(f"w{w}-0", gpus=2, cpu="4", group=f"w{w}")]
    return objs


@SETTINGS
@given(objs=spans())
def test_gangs_across_nodes_decide_as_the_plain_search(objs: list[dict[str, object]]) -> None:
    """Victim sets of one size that differ from node to node, and nodes that ask for the same simulation."""
    assert_plain_decisions(objs)


def _drawn(search: Search) -> list[tuple[str, tuple[str, ...], bool]]:
    return sorted((u.job.key, tuple(p.key for p in u.pods), u.elastic) for u in search.units)


def _counted_as_plain(run: Callable[[], list[Decisions]]) -> int:
    """``run`` with each ``Search.draw_rest`` checked against the plain search's draw (``_search`` again, every unit in
    KAI's order), with the session as the search found it; returns how many drew units left."""
    drew = [0]
    real = victims.Search.draw_rest
    context: list[tuple[Session, evictions.Rules, Attempt, evictions.Pool]] = []
    search_of = evictions._search

    def remembered(session: Session, rules: evictions.Rules, att: Attempt,
                   pool: evictions.Pool) -> tuple[Search, int]:
        context.append((session, rules, att, pool))
        return search_of(session, rules, att, pool)

    def checked(search: Search) -> None:
        before = len(search.units)
        real(search)
        drew[0] += len(search.units) > before
        plain, _ = search_of(*context[-1])
        plain.draw_all()
        assert _drawn(search) == _drawn(plain)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evictions, "_search", remembered)
        mp.setattr(victims.Search, "draw_rest", checked)
        mp.setattr(evictions, "_countable", _never)
        run()
    return drew[0]


def _never(session: Session, search: Search) -> None:
    return None


DRAWN = (evictions, "_countable", _never)  # a search that found nothing draws its units left, budgets or not


@SETTINGS
@given(case=cases())
def test_a_vain_search_counts_the_units_of_the_plain_draw(case: Case) -> None:
    """``Search.draw_rest`` (a search that found nothing draws its units left in no set order, for its explanation)
    draws the units the plain search (KAI's victim order, every unit) draws, and the decisions (explanations
    included) are the plain search's."""
    drew = _counted_as_plain(lambda: decisions_over(case, 3))
    event(f"vain searches with units left to count: {'some' if drew else 'none'}")
    assert_same_decisions(lambda: decisions_over(case, 3), [DRAWN],
                          [DRAWN, (victims.Search, "draw_rest", victims.Search.draw_all)])


@pytest.mark.parametrize(("nodes", "reclaimers", "seed"), [(40, 8, 2), (60, 10, 2)])
def test_the_benchmark_vain_searches_count_the_units_of_the_plain_draw(nodes: int, reclaimers: int,
                                                                       seed: int) -> None:
    """bench_victims' workload, small: a reclaimer's partial job whose recorded victims place it but break the
    reclaim rules ends its search before the last unit is drawn; the units counted are the plain draw's, and the
    decisions are the plain search's."""
    wl = bench_victims.build_workload(nodes=nodes, reclaimers=reclaimers, seed=seed)
    cfg = bench_victims.config_for("greedy")

    def run() -> list[Decisions]:
        return [run_cycle(build_snapshot(wl.objects, cfg, bench_victims.NOW), cfg)]

    with pytest.MonkeyPatch.context() as mp:  # (the census's vain check: the one by draws draws such a search's units
        mp.setattr(by_node, "VAIN_BATCH", 0)  # before it ends, ``test_vain_draws``)
        assert _counted_as_plain(run) >= 1
    assert_same_decisions(run, [DRAWN], [DRAWN, (victims.Search, "draw_rest", victims.Search.draw_all)])


UNBOUNDED = {"maxVictimScenarios": 10**6, "maxVictimSearches": 10**6}


def _plain_vain(session: Session, att: Attempt, search: Search) -> bool:
    return False


def assert_vain_is_sound(objs: list[dict[str, object]], actions: tuple[str, ...]) -> int:
    """One cycle of ``objs`` without the scenario budget: each search ``vain`` answers is solved in full too and
    finds nothing (with the session as it found it); the decisions are the full search's. Returns how many searches
    it answered."""
    cfg = SchedulerConfig.model_validate({**UNBOUNDED, "actions": list(actions)})
    answered = [0]
    real, solve = by_node.vain, by_node.solve

    def checked(session: Session, att: Attempt, search: Search) -> bool:
        said = real(session, att, search)
        if said:
            answered[0] += 1
            start = session.checkpoint()
            with pytest.MonkeyPatch.context() as inner:
                inner.setattr(by_node, "vain", _plain_vain)
                assert solve(session, att, search, lambda part, out: True) is None, att.job.key
            assert session.checkpoint() == start
        return said

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "vain", checked)
        short = run_cycle(build_snapshot(objs, cfg, NOW), cfg)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "vain", _plain_vain)
        plain = run_cycle(build_snapshot(objs, cfg, NOW), cfg)
    assert _digest(short) == _digest(plain)
    return answered[0]


@st.composite
def big_jobs(draw: st.DrawFn) -> list[dict[str, object]]:
    """``crowded``'s full clusters, with jobs of up to as many 2-GPU pods as the cluster has nodes waiting in queue b
    (reclaim) and in queue a at a higher priority (preempt): some need every GPU the candidates hold, some more."""
    objs = draw(crowded())
    nodes = sum(1 for o in objs if o.get("kind") == "Node")
    for w in range(draw(st.integers(1, 2))):
        q, cls = draw(st.sampled_from([("b", "train"), ("a", "build-preemptible")]))
        size = draw(st.integers(2, nodes + 1))
        objs.append(podgroup(f"big{w}", q, size, priority_class=cls))
        objs += [pod(f"big{w}-{k}", gpus=2, cpu="1", group=f"big{w}") for k in range(size)]
    return objs


@SETTINGS
@given(objs=big_jobs())
def test_a_search_answered_vain_finds_nothing_in_full(objs: list[dict[str, object]]) -> None:
    """Each search the bound answers (every candidate unit gone, the GPUs do not suffice), solved in full without
    the budget, finds nothing; decisions are the full unbounded search's."""
    answered = assert_vain_is_sound(objs, ("allocate", "reclaim", "preempt"))
    event(f"searches answered vain: {'some' if answered else 'none'}")


@SETTINGS
@given(case=cases())
def test_the_property_clusters_decide_as_the_full_search(case: Case) -> None:
    answered = assert_vain_is_sound(case.objs + case.late, ("allocate", "consolidate", "reclaim", "preempt"))
    event(f"searches answered vain: {'some' if answered else 'none'}")


def _exact(nodes: int) -> list[dict[str, object]]:
    """Full 2-GPU nodes, each running one 2-GPU pod of its own job at a low priority; a gang of one 2-GPU pod per
    node waits at a higher priority in the same queue: every GPU the candidates hold, exactly."""
    objs: list[dict[str, object]] = [queue("q"), podgroup("want", "q", nodes, priority_class="build-preemptible")]
    for i in range(nodes):
        objs += [node(f"n{i}", gpus=2), podgroup(f"v{i}", "q", 1, priority_class="train"),
                 pod(f"v{i}-0", gpus=2, group=f"v{i}", node_name=f"n{i}")]
    objs += [pod(f"want-{k}", gpus=2, group="want") for k in range(nodes)]
    return objs


def test_a_job_that_needs_every_candidate_gpu_is_searched() -> None:
    """The bound says no only below the batch: a gang that needs every GPU its candidates hold is served."""
    cfg = SchedulerConfig.model_validate({"actions": ["allocate", "preempt"]})
    d = run_cycle(build_snapshot(_exact(3), cfg, NOW), cfg)
    assert sorted(b.pod for b in d.pipelined) == ["default/want-0", "default/want-1", "default/want-2"]
    more = [*_exact(3), pod("want-3", gpus=2, group="want")]
    more[1]["spec"]["minMember"] = 4
    d = run_cycle(build_snapshot(more, cfg, NOW), cfg)
    assert not d.pipelined and not d.evictions


def _no_first(session: Session, att: Attempt, recorded: list[Unit]) -> None:
    return None


def _back_to_start(session: Session, start: int, recorded: list[Unit]) -> int:
    return start


def _operations(objs: list[dict[str, object]], cfg: SchedulerConfig, plain: bool) -> list[list[tuple[object, ...]]]:
    """Each by-node solve's operations (kind, pod, node, devices, message) as it returns, over one cycle."""
    seen: list[list[tuple[object, ...]]] = []
    real = by_node.solve

    def recorded(session: Session, att: Attempt, search: Search,
                 valid: Callable[[Attempt, Outcome], bool]) -> tuple[list[int], Outcome] | None:
        start = session.checkpoint()
        out = real(session, att, search, valid)
        seen.append([(op.kind, op.pod.key, op.node.name, op.devices, op.message) for op in session.ops[start:]])
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "solve", recorded)
        if plain:
            mp.setattr(by_node, "evict_first", _no_first)
            mp.setattr(by_node, "kept_evictions", _back_to_start)
        run_cycle(build_snapshot(objs, cfg, NOW), cfg)
    return seen


def assert_kept_evictions_are_plain(objs: list[dict[str, object]], cfg: SchedulerConfig) -> None:
    """Every by-node solve leaves the operations the plain one does (each simulation evicting its recorded victims
    itself, each partial job rolled back to the attempt's start), and the cycle decides the same."""
    assert _operations(objs, cfg, False) == _operations(objs, cfg, True)
    def cycle() -> list[Decisions]:
        return [run_cycle(build_snapshot(objs, cfg, NOW), cfg)]

    assert_same_decisions(cycle, [], [(by_node, "evict_first", _no_first),
                                      (by_node, "kept_evictions", _back_to_start)])


@SETTINGS
@given(objs=big_jobs())
def test_kept_evictions_make_the_plain_operations(objs: list[dict[str, object]]) -> None:
    assert_kept_evictions_are_plain(objs, CROWDED)


@SETTINGS
@given(case=cases())
def test_kept_evictions_decide_as_the_plain_search(case: Case) -> None:
    assert_kept_evictions_are_plain(case.objs + case.late, case.cfg)


def test_the_benchmark_kept_evictions_are_the_plain_operations() -> None:
    wl = bench_victims.build_workload(nodes=40, reclaimers=8, seed=2)
    assert_kept_evictions_are_plain(wl.objects, bench_victims.config_for("greedy"))


def _never_same(victims: list[int], units: list[int], failed: set[by_node.Fingerprint], k: int) -> bool:
    return False


@SETTINGS
@given(case=cases())
def test_the_whole_batchs_probe_kept_as_the_answer_decides_as_the_last_probe(case: Case) -> None:
    """Keeping the solved probe of the whole batch (``_same``) decides as simulating the last probe again."""
    kept = [0]
    same = by_node._same

    def counted(victims: list[int], units: list[int], failed: set[by_node.Fingerprint], k: int) -> bool:
        ok = same(victims, units, failed, k)
        kept[0] += ok
        return ok

    assert_same_decisions(lambda: decisions_over(case, 3), [(by_node, "_same", counted)],
                          [(by_node, "_same", _never_same)])
    event(f"probes kept: {'some' if kept[0] else 'none'}")


def test_the_whole_batchs_probe_is_kept_only_where_the_last_probe_repeats_it() -> None:
    """Kept only where every unit of the solution stays a victim, in the same order, and the scenario of them alone
    did not fail before (the last probe would then go on to other scenarios)."""
    assert by_node._same([3, 5], [3, 5], set(), 4)
    assert not by_node._same([3], [3, 5], set(), 4)  # unit 5 put back: the last probe simulates 3 alone
    assert not by_node._same([5, 3], [3, 5], set(), 4)
    assert not by_node._same([3, 5], [3, 5], {(4, frozenset({3, 5}), frozenset())}, 4)
    assert by_node._same([3, 5], [3, 5], {(2, frozenset({3, 5}), frozenset())}, 4)
