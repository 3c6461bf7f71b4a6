"""``gang._tightest`` stops at the first node of a bucket that qualifies where index order is name order
(``NodeIndex.by_name``): the same node as the plain reading it replaced (every node of the bucket read for the least
name), kept here as the reference, on random indexes (names in index order or not, nodes partly used, regions) and
at every call of a benchmark cycle."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from benchmarks.bench_allocate import build_workload, config_for
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Node, Pod
from kaid.placement import gang
from kaid.placement.index import NodeIndex
from kaid.placement.predicates import room_for
from kaid.sim.cluster import EPOCH


def plain_tightest(pod: Pod, need: int, index: NodeIndex, region: bytearray | None) -> Node:
    if not pod.gpu_whole:
        caps = gang.node_caps(pod, index, region)
        return min((c for c in caps if c[1] >= need), key=lambda c: (c[0].idle, c[0].name))[0]
    mask, nodes = index.static_mask(pod), index.nodes
    for k in range(pod.gpu_whole * need, index.max_gpus + 1):
        best: Node | None = None
        for i in index.buckets[k]:
            n = nodes[i]
            if mask[i] and (region is None or region[i]) and (best is None or n.name < best.name) and \
                    room_for(n, pod) >= need:
                best = n
        if best is not None:
            return best
    raise AssertionError("no node has room")


def _index(rng: random.Random, in_order: bool) -> NodeIndex:
    count = rng.randint(1, 30)
    names = [f"n{i:02d}" for i in range(count)]
    if not in_order:
        rng.shuffle(names)
    nodes = []
    for i, name in enumerate(names):
        n = Node(name, {}, [], False, True, rng.choice([4000, 64000]), 10**12, rng.choice([2, 3, 110]),
                 rng.choice([0, 4, 8, 8]), 81920)
        n.index = i
        nodes.append(n)
    index = NodeIndex(nodes)
    for n in nodes:  # some devices, cpu and pod slots in use, through the index (its buckets kept)
        busy = rng.randint(0, n.gpus)
        if busy or rng.random() < 0.4:
            bg = Pod("ns", f"bg-{n.name}", "")
            bg.gpu_whole, bg.cpu = busy, rng.choice([0, 1000, 3000])
            index.assign(n, bg, tuple(range(busy)))
    return index


def _holds(pod: Pod, need: int, index: NodeIndex, region: bytearray | None) -> bool:
    mask = index.static_mask(pod)
    return any(mask[n.index] and (region is None or region[n.index]) and room_for(n, pod) >= need
               for n in index.nodes)


@pytest.mark.parametrize("seed", range(40))
def test_the_tightest_node_is_the_plain_readings(seed: int) -> None:
    rng = random.Random(seed)
    asked = 0
    for _ in range(20):
        in_order = rng.random() < 0.7
        index = _index(rng, in_order)
        assert index.by_name == (in_order or all(a.name < b.name for a, b in pairwise(index.nodes)))
        for _ in range(6):
            pod = Pod("ns", "g-0", "")
            pod.gpu_whole = rng.choice([0, 1, 1, 2, 4])
            pod.cpu = rng.choice([0, 500, 2000])
            need = rng.randint(1, 4)
            region = bytearray(rng.random() < 0.6 for _ in index.nodes) if rng.random() < 0.3 else None
            if not _holds(pod, need, index, region):
                continue
            asked += 1
            assert gang._tightest(pod, need, index, region).name == plain_tightest(pod, need, index, region).name
    assert asked > 20


def test_every_call_of_a_benchmark_cycle_is_the_plain_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's snapshot sorts its nodes by name (``by_name`` holds) and its gangs take the single-node path:
    each ``_tightest`` of the cycle answers as the plain reading does."""
    wl = build_workload(200, 2000, 18)
    cfg = config_for("cpsat")
    snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
    fast = gang._tightest
    calls: list[bool] = []

    def both(pod: Pod, need: int, index: NodeIndex, region: bytearray | None) -> Node:
        got = fast(pod, need, index, region)
        calls.append(index.by_name)
        assert got is plain_tightest(pod, need, index, region)
        return got

    monkeypatch.setattr(gang, "_tightest", both)
    run_cycle(snap, cfg)
    assert calls and all(calls)
