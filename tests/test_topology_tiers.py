"""KAI's topology node score inside the domain chosen (``tiers.preferred_tiers``, node_scoring.go calculateNodeScores
at d5bc503a): the tiers against a plain reading of KAI's rule, node by node, after pods were placed (the kept
per-domain sums catch up from the index's log), in a region or everywhere, with label values that repeat under
several parents; and a gang that no preferred domain holds placed tier by tier."""

from __future__ import annotations

import math
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.objects import Node, Pod
from kaid.placement.gang import Topo, place
from kaid.placement.index import NodeIndex
from kaid.placement.predicates import whole_devices
from kaid.placement.tiers import preferred_tiers

LEVELS = ("zone", "rack")


def _node(i: int, labels: dict[str, str], gpus: int = 4) -> Node:
    n = Node(f"n{i:02d}", labels, [], False, True, 64000, 10**12, 110, gpus, 81920)
    n.index = i
    return n


def _pod(name: str, whole: int = 1) -> Pod:
    p = Pod("ns", name, name)
    p.gpu_whole, p.cpu, p.mem = whole, 1000, 10**9
    return p


def _plain(pods: list[Pod], index: NodeIndex, region: bytearray | None, preferred: str,
           levels: tuple[str, ...]) -> list[bytearray] | None:
    """KAI's rule read node by node: the tree below the nodes' lowest common domain sorted by the pods' dominant
    demand-to-free ratio (highest first, then label value), position i of n scoring floor((i + 1) / n * 10)."""
    depth = levels.index(preferred) + 1
    nodes = [n for n in index.nodes if region is None or region[n.index]]
    free: dict[tuple[str, ...], list[int]] = defaultdict(lambda: [0, 0, 0])
    leaf_nodes: dict[tuple[str, ...], list[int]] = defaultdict(list)
    unlabeled = []
    for n in nodes:
        if not all(k in n.labels for k in levels):
            unlabeled.append(n.index)
            continue
        path = tuple(n.labels[k] for k in levels[:depth])
        leaf_nodes[path].append(n.index)
        for d in range(1, depth + 1):
            acc = free[path[:d]]
            acc[0] += n.idle * 1000
            acc[1] += n.alloc_cpu - n.used_cpu
            acc[2] += n.alloc_mem - n.used_mem
    if len(leaf_nodes) < 2:
        return None
    want = (sum(p.gpu_milli_on(None) for p in pods), sum(p.cpu for p in pods), sum(p.mem for p in pods))

    def ratio(path: tuple[str, ...]) -> float:
        return max((w / f if f > 0 else 1000.0) for w, f in zip(want, free[path], strict=True) if w > 0)

    top: tuple[str, ...] = ()
    while len({p[:len(top) + 1] for p in leaf_nodes}) == 1:
        top = next(iter(leaf_nodes))[:len(top) + 1]

    def walk(path: tuple[str, ...]) -> list[tuple[str, ...]]:
        if len(path) == depth:
            return [path]
        kids = sorted({p[:len(path) + 1] for p in leaf_nodes if p[:len(path)] == path},
                      key=lambda c: (-ratio(c), c[-1]))
        return [leaf for c in kids for leaf in walk(c)]

    order = walk(top)
    score = {j: 0 for j in unlabeled}
    for i, path in enumerate(order):
        for j in leaf_nodes[path]:
            score[j] = math.floor((i + 1) / len(order) * 10)
    values = sorted(set(score.values()), reverse=True)
    if len(values) < 2:
        return None
    return [bytearray(1 if score.get(j) == v else 0 for j in range(len(index.nodes))) for v in values]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["z0", "z1", None]), st.sampled_from(["r0", "r1", "r2", None]),
                          st.integers(0, 4), st.booleans()), min_size=1, max_size=24),
       st.integers(1, 12), st.booleans(), st.sampled_from(["zone", "rack"]))
def test_tiers_match_the_plain_reading(nodes: list[tuple[str | None, str | None, int, bool]], gang: int,
                                       everywhere: bool, preferred: str) -> None:
    objs = []
    for i, (zone, rack, _, _) in enumerate(nodes):
        labels = {k: v for k, v in (("zone", zone), ("rack", rack)) if v is not None}
        objs.append(_node(i, labels))
    index = NodeIndex(objs)
    pods = [_pod(f"p{k}") for k in range(gang)]
    preferred_tiers(pods, index, None, preferred, LEVELS)  # the kept sums made before the pods below are placed
    for i, (_, _, used, _) in enumerate(nodes):
        n = objs[i]
        if used:
            index.assign(n, _pod(f"run{i}", used), whole_devices(n, used))
    region = None if everywhere else bytearray(1 if inside else 0 for *_, inside in nodes)
    assert preferred_tiers(pods, index, region, preferred, LEVELS) == _plain(pods, index, region, preferred, LEVELS)


def _cluster(free: dict[str, list[int]]) -> tuple[NodeIndex, list[Node]]:
    """Nodes of 4 GPUs in one zone, per rack the idle GPUs of each of its nodes."""
    objs: list[Node] = []
    for rack, idles in free.items():
        objs += [_node(len(objs) + k, {"zone": "z", "rack": rack}) for k in range(len(idles))]
    index = NodeIndex(objs)
    at = 0
    for idles in free.values():
        for idle in idles:
            n = objs[at]
            at += 1
            if idle < n.gpus:
                index.assign(n, _pod(f"run{n.index}", n.gpus - idle), whole_devices(n, n.gpus - idle))
    return index, objs


def test_equal_domains_the_last_by_name_first() -> None:
    """KAI's allocate-52: no rack holds the gang, the racks are alike: the last by name scores highest."""
    index, _ = _cluster({"r1": [1], "r2": [1]})
    pods = [_pod("a"), _pod("b")]
    plan = place(pods, index, False, Topo(None, "rack", LEVELS), "cpsat", 1.0)
    assert [(p.name, n.name) for p, n, _ in plan.placements] == [("a", "n01"), ("b", "n00")]


def test_the_least_packed_domain_first() -> None:
    """The rack with more free GPUs has the lower demand-to-free ratio, last in KAI's sorted tree: its nodes first;
    inside a tier, binpack (the fullest node first)."""
    index, _ = _cluster({"r1": [4, 3, 4], "r2": [1, 1, 4, 4]})
    pods = [_pod(f"p{k:02d}") for k in range(12)]
    tiers = preferred_tiers(pods, index, None, "rack", LEVELS)
    assert tiers is not None and [list(t) for t in tiers] == [[1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1, 1]]
    plan = place(pods, index, False, Topo(None, "rack", LEVELS), "greedy", 1.0)
    assert [n.name for _, n, _ in plan.placements] == ["n01"] * 3 + ["n00"] * 4 + ["n02"] * 4 + ["n03"]
