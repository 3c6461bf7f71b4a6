"""KAI d5bc503a's job solver in kai (``by_node``: two scenario generators, exponential k; ``multi_node``: the
sub-scenario emitter) against plain readings of the Go source (``job_solver.go``, ``sub_scenario_emitter.go``)."""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from kaid.actions import by_node, multi_node

# ----------------------------------------------------------------------------- plain readings of the Go source


def go_smallest_k_covering(items: list[int], demand: int) -> int:
    if demand <= 0:
        return 0
    cumulative = 0
    for i, item in enumerate(items):
        cumulative += item
        if cumulative >= demand:
            return i + 1
    return len(items) + 1


def go_emitter_ks(first: int, count: int) -> list[int]:
    """``subScenarioEmitter.next`` called until it returns nil: the k of each sub-scenario."""
    next_k, dk = first, 1
    out: list[int] = []
    while True:
        if next_k < 0 or next_k > count:
            return out
        k = next_k
        out.append(k)
        if k >= count:  # advanceNextK
            next_k = count + 1
            continue
        next_k = min(k + dk, count)
        dk *= 2


def go_sub_scenarios(potential: list[list[tuple[str, int]]], demand: int, min_task: int, free: dict[str, int],
                     recorded_freed: dict[str, int], feasible: list[str]) -> list[list[int]]:
    """newSubScenarioEmitter + next, over batches given as lists of (node, milli-GPU) tasks."""
    batches = potential
    node_batches: dict[str, list[int]] = {}
    first_seen: dict[str, int] = {}
    seen: dict[str, set[int]] = {}
    idx = 0
    for bi, tasks in enumerate(batches):
        for node, _ in tasks:
            at, idx = idx, idx + 1
            if node == "":
                continue
            if node not in first_seen:
                first_seen[node] = at
            if bi not in seen.setdefault(node, set()):
                seen[node].add(bi)
                node_batches.setdefault(node, []).append(bi)
    cap: dict[str, int] = {}
    for node, bis in node_batches.items():
        c = recorded_freed.get(node, 0) + free.get(node, 0)
        for bi in bis:
            for n, g in batches[bi]:
                if n == node:
                    c += g
        cap[node] = c
    cands = [n for n in node_batches if not (min_task > 0 and cap[n] < min_task)]
    cands.sort(key=lambda n: (cap[n], first_seen[n]))
    baseline = 0
    for node in feasible:
        if node in node_batches:
            continue
        baseline += free.get(node, 0) + recorded_freed.get(node, 0)
    remaining = max(0, demand - baseline)
    out = []
    for k in go_emitter_ks(go_smallest_k_covering([cap[n] for n in cands], remaining), len(cands)):
        picked = set()
        for i in range(k):
            picked.update(node_batches[cands[i]])
        out.append(sorted(picked))
    return out


def go_search_max_solvable_k(n: int, probe: Callable[[int], bool]) -> int:
    lo, k = 0, 1
    while True:
        if not probe(k):
            hi = k
            break
        lo = k
        if k == n:
            return n
        k *= 2
        if k > n:
            k = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probe(mid):
            lo = mid
        else:
            hi = mid
    return lo


# ----------------------------------------------------------------------------- the emitter


def test_smallest_k_covering_facts() -> None:
    assert multi_node.smallest_k_covering([3, 4, 5], 0) == 0
    assert multi_node.smallest_k_covering([3, 4, 5], 7) == 2
    assert multi_node.smallest_k_covering([3, 4, 5], 13) == 4
    assert multi_node.smallest_k_covering([], 1) == 1


def test_k_sequence_facts() -> None:
    # geometric growth: +1, +2, +4, ... capped at the candidate count, which ends it
    assert list(multi_node.k_sequence(2, 10)) == [2, 3, 5, 9, 10]
    assert list(multi_node.k_sequence(0, 5)) == [0, 1, 3, 5]
    assert list(multi_node.k_sequence(0, 0)) == [0]
    assert list(multi_node.k_sequence(11, 10)) == []  # nothing covers the demand: no sub-scenario


@pytest.mark.parametrize("seed", range(300))
def test_emitter_matches_plain_reading(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [f"n{i}" for i in range(rng.randint(1, 7))]
    potential = [[(rng.choice([*nodes, ""]), rng.choice([0, 500, 1000, 2000, 4000])) for _ in range(rng.randint(1, 4))]
                 for _ in range(rng.randint(0, 6))]
    free = {n: rng.choice([0, 0, 1000, 2500]) for n in nodes}
    recorded = {n: rng.choice([0, 1000]) for n in rng.sample(nodes, rng.randint(0, len(nodes)))}
    feasible = rng.sample(nodes, rng.randint(0, len(nodes)))
    asks = [rng.choice([0, 1000, 2000, 8000]) for _ in range(rng.randint(1, 4))]
    demand, min_task = sum(asks), min(asks)
    assert list(multi_node.sub_scenarios(potential, demand, min_task, free, recorded, feasible)) == \
        go_sub_scenarios(potential, demand, min_task, free, recorded, feasible)
    for first in range(-1, 8):
        assert list(multi_node.k_sequence(first, len(nodes))) == go_emitter_ks(first, len(nodes))
    caps = [rng.randint(0, 4000) for _ in range(rng.randint(0, 6))]
    assert multi_node.smallest_k_covering(caps, demand) == go_smallest_k_covering(caps, demand)


def test_candidates_by_capacity_then_first_seen() -> None:
    # n2 is seen first but holds more; n1 and n3 tie on capacity: n1 was seen first. n4 cannot hold a pending pod.
    potential = [[("n2", 4000)], [("n3", 1000)], [("n1", 1000), ("n3", 0)], [("n4", 500)]]
    got = list(multi_node.sub_scenarios(potential, 9000, 1000, {}, {}, []))
    # candidates n3 (first seen at 1), n1 (at 2), n2; caps 1000, 1000, 4000: nothing covers 9000
    assert got == []
    got = list(multi_node.sub_scenarios(potential, 2000, 1000, {}, {}, []))
    # k = 2 covers 2000: n3's batches {1, 2} then n1's {2}; then k = 3 adds n2's {0}
    assert got == [[1, 2], [0, 1, 2]]


# ----------------------------------------------------------------------------- the k search


@pytest.mark.parametrize("n", range(1, 40))
def test_max_solvable_k_matches_plain_reading(n: int) -> None:
    rng = random.Random(n)
    for _ in range(20):
        answers = {k: rng.random() < 0.6 for k in range(1, n + 1)}
        mine: list[int] = []
        theirs: list[int] = []
        got = by_node.max_solvable_k(n, _recording(answers, mine))
        want = go_search_max_solvable_k(n, _recording(answers, theirs))
        assert (got, mine) == (want, theirs)
    for m in range(n + 1):  # a monotone job: the probes find its largest solvable k
        assert by_node.max_solvable_k(n, _recording({k: k <= m for k in range(1, n + 1)}, [])) == m


def _recording(answers: dict[int, bool], probes: list[int]) -> Callable[[int], bool]:
    def probe(k: int) -> bool:
        probes.append(k)
        return answers[k]
    return probe


def _fake_session() -> object:
    class FakeSession:
        small_ref = None

        def checkpoint(self) -> int:
            return 0

        def rollback(self, at: int) -> None:
            pass
    return FakeSession()


class _Out:
    def __init__(self) -> None:
        self.evicted: list[object] = []
        self.moved: list[object] = []
        self.start = -1


def test_solve_with_probes_then_whole_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each probe gets the recorded victims of the last solved one; the answer is a last probe at the whole batch, or
    the probe of the whole batch itself where the last one would repeat it (``_same``: here every unit stays a
    victim)."""
    monkeypatch.setattr(by_node, "_victims_of", lambda search, units, outcome: list(units))
    monkeypatch.setattr(by_node, "kept_evictions", lambda session, start, recorded: start)
    monkeypatch.setattr(by_node, "replace", lambda att, **kw: att)
    monkeypatch.setattr(by_node, "job_request", lambda batch, ref: None)

    att = SimpleNamespace(batch=list(range(9)))
    search = SimpleNamespace(units=list(range(10)))

    for solvable, want in ((5, [1, 2, 4, 8, 6, 5, 9]), (9, [1, 2, 4, 8, 9]), (0, [1])):
        calls: list[tuple[int, tuple[int, ...]]] = []

        def generator(*args: Any, solvable: int = solvable, calls: list[Any] = calls) -> Any:
            recorded, k = args[3], args[8]
            calls.append((k, tuple(recorded)))
            return ([k], _Out()) if k <= solvable or (k == 9 and recorded) else None

        got = by_node._solve_with(_fake_session(), att, search, None, None, None, set(),  # type: ignore[arg-type]
                                  generator, 0)  # type: ignore[arg-type]
        assert [k for k, _ in calls] == want
        for (_, rec), (k_before, _) in zip(calls[1:], calls, strict=False):
            assert rec == () or rec[0] <= k_before  # the victims of an earlier solved probe
        assert (got is None) == (solvable == 0)


def test_generators_in_order_with_shared_fingerprints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Node-local first; the multi-node generator only where it found nothing; one failed-scenario set for both."""
    monkeypatch.setattr(by_node, "vain", lambda *a: False)
    monkeypatch.setattr(by_node, "feasible_nodes", lambda *a: None)
    monkeypatch.setattr(by_node, "GpuRoom", lambda *a: None)
    monkeypatch.setattr(by_node, "free_gpus", lambda session: {})

    att = SimpleNamespace(batch=[1, 2])
    search = SimpleNamespace(home={})

    for first_solves in (True, False):
        seen: list[tuple[str, int]] = []

        def fake_with(*args: Any, first_solves: bool = first_solves, seen: list[Any] = seen) -> Any:
            failed, generator = args[6], args[7]
            multi = getattr(generator, "func", None) is by_node._solve_multi
            seen.append(("multi" if multi else "local", id(failed)))
            assert multi or generator is by_node._solve_partial
            return ([], _Out()) if (first_solves or multi) else None

        monkeypatch.setattr(by_node, "_solve_with", fake_with)
        by_node.solve(_fake_session(), att, search, lambda a, o: True)  # type: ignore[arg-type]
        assert [g for g, _ in seen] == (["local"] if first_solves else ["local", "multi"])
        assert len({f for _, f in seen}) == 1


def test_node_local_walks_the_newest_victims_job_nodes_by_name() -> None:
    """KAI's nodeNamesOfJob(LatestPotentialVictim()): every pod of the cluster's job with a node, names sorted and
    unique; a victim pod's node as the search began (it may be evicted or moved since)."""
    rng = random.Random(7)
    for _ in range(200):
        pods = [SimpleNamespace(node=rng.choice([None, "", "n3", "n1", "n2", "n10"])) for _ in range(rng.randint(0, 6))]
        home = {id(p): rng.choice(["n0", "n9"]) for p in pods if rng.random() < 0.3}
        plain = set()
        for p in pods:
            node = home.get(id(p), p.node)
            if node:
                plain.add(node)
        assert by_node._job_nodes(SimpleNamespace(pods=pods), home) == sorted(plain)  # type: ignore[arg-type]
