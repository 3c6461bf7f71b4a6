"""KAI's second scenario generator, sg-multinodegang (d5bc503a: ``plugins/multinodegang/generator.go`` over
``PodAccumulatedScenarioBuilder.GetValidScenario/GetNextScenario``, ``pod_scenario_builder.go``, and the
``subScenarioEmitter``, ``sub_scenario_emitter.go``).

The accumulated scenario (the recorded victims and the potential victims added one victim unit at a time in KAI's
victim order, ``by_node``) is not simulated whole: once it passes the GPU filter, an emitter hands out
sub-scenarios, each the recorded victims and the victim batches on the first k candidate nodes. A batch is what
one step of the accumulation added (KAI's victim job representative, ``BaseScenario.appendTasksAsVictimJob``: the
tasks of one ``AddPotentialVictimsTasks`` call), in kai one eviction unit; a batch with pods on several nodes is
picked whole. The candidates are the nodes that hold a batch and whose capacity (what is idle or
releasing there when the attempt began, plus what the recorded victims and the batches free there) holds the
smallest pending pod, by capacity ascending, the node seen first in the potential victims first on a tie. k starts
at the smallest prefix whose capacity covers the pending GPUs beyond the baseline (what the feasible nodes without a
batch hold idle, releasing or freed by the recorded victims) and grows by 1, 2, 4, ... up to every candidate.

This module holds the emitter's pure part (``sub_scenarios``); ``by_node`` simulates what it emits.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence


def smallest_k_covering(caps: Sequence[int], demand: int) -> int:
    """``smallestKCovering``: the fewest leading capacities whose sum reaches ``demand`` (0 when there is nothing
    to cover; one past the end when all of them do not reach it)."""
    if demand <= 0:
        return 0
    total = 0
    for i, c in enumerate(caps):
        total += c
        if total >= demand:
            return i + 1
    return len(caps) + 1


def k_sequence(first: int, count: int) -> Iterator[int]:
    """``subScenarioEmitter.next/advanceNextK``: ``first``, then growing by 1, 2, 4, ... capped at ``count``, which
    ends it; nothing where ``first`` is past ``count``."""
    k, dk = first, 1
    while 0 <= k <= count:
        yield k
        if k >= count:
            return
        k = min(k + dk, count)
        dk *= 2


def sorted_candidates(node_batches: Mapping[str, list[int]], cap: Mapping[str, int], first_seen: Mapping[str, int],
                      min_task: int) -> list[str]:
    """``sortViableCandidates``: the nodes holding a batch whose capacity holds the smallest pending pod (every one
    where it asks no GPU), by capacity ascending, then by where the node was first seen in the potential victims."""
    out = [n for n in node_batches if not (min_task > 0 and cap[n] < min_task)]
    out.sort(key=lambda n: (cap[n], first_seen[n]))
    return out


def sub_scenarios(potential: Sequence[Sequence[tuple[str, int]]], demand: int, min_task: int,
                  free: Mapping[str, int], recorded_freed: Mapping[str, int],
                  feasible: Sequence[str]) -> Iterator[list[int]]:
    """The batches (indexes, in first-seen order) of each sub-scenario the emitter hands out, in its order.

    ``potential``: the batches (potential victim units) in the order added, each its pods as (node, milli-GPU the
    pod holds there). ``demand``/``min_task``: the pending pods' milli-GPUs, summed
    and the smallest. ``free``: milli-GPUs idle or releasing per node when the attempt began.
    ``recorded_freed``: milli-GPUs the recorded victims hold per node. ``feasible``: the nodes the simulation
    may use before the potential victims' nodes join them (the attempt's feasible nodes and the recorded victims').
    Yields, per sub-scenario, the batch indexes picked (ascending): those with a pod on its first k candidates."""
    node_batches: dict[str, list[int]] = {}
    first_seen: dict[str, int] = {}
    held: dict[tuple[str, int], int] = {}  # (node, batch) -> milli-GPUs the batch's pods hold on the node
    at = 0
    for b, pods in enumerate(potential):
        for node, milli in pods:
            idx, at = at, at + 1
            if not node:
                continue
            first_seen.setdefault(node, idx)
            on = node_batches.setdefault(node, [])
            if b not in on:
                on.append(b)
            held[node, b] = held.get((node, b), 0) + milli
    cap = {n: recorded_freed.get(n, 0) + free.get(n, 0) + sum(held[n, b] for b in bs)
           for n, bs in node_batches.items()}
    cands = sorted_candidates(node_batches, cap, first_seen, min_task)
    baseline = sum(free.get(n, 0) + recorded_freed.get(n, 0) for n in feasible if n not in node_batches)
    first = smallest_k_covering([cap[n] for n in cands], max(0, demand - baseline))
    for k in k_sequence(first, len(cands)):
        picked = {b for n in cands[:k] for b in node_batches[n]}
        yield sorted(picked)
