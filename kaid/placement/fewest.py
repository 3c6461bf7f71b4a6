"""The solver's answer for a gang of alike pods (one shape, whole GPUs or none), without the solver.

The CP-SAT model of such a gang (``cpsat._count_vars``) minimises, in this order, the preferred-level domains used
(if the gang prefers a level), the nodes used and the GPUs left idle on the nodes used. Each term adds up node by
node and domain by domain, so the optimum is a knapsack: per domain, the cheapest nodes for ``k`` pods
(``_cheapest``, over nodes grouped by room and idle GPUs), then the cheapest split of the gang over the domains
(``_split``), both exact. It answers in milliseconds where the largest rack-preferring gangs (128 pods over ~80
node classes) took the solver a second or more to prove; the plan has the solver's optimal cost, though not always
its nodes where several plans tie (and it is the same plan on a busy machine, where the solver could stop early).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from heapq import merge
from operator import attrgetter
from typing import TYPE_CHECKING

from kaid.model.objects import Node, Pod
from kaid.placement.index import NodeIndex

if TYPE_CHECKING:
    from typing import TypeAlias

    import numpy as np
    from numpy.typing import NDArray

    Costs: TypeAlias = list[int] | NDArray[np.int64]  # per number of pods k = 0..need
    Takes: TypeAlias = list[bool] | NDArray[np.bool_]  # per k, whether the cheapest set for k takes an item
    Picks: TypeAlias = list[int] | NDArray[np.int64]  # per k, how many of them a domain takes

Plan = list[tuple[Pod, Node]]
_NONE = 1 << 60  # no way to place that many pods
SMALL = 20_000  # table cells up to which plain Python beats importing numpy (not numpy once imported)
_index_of = attrgetter("index")


def fewest_domains(pods: list[Pod], index: NodeIndex, region: bytearray | None,
                   preferred: str | None) -> Plan | None:
    """Place ``pods`` (alike: one shape, whole GPUs or none) in ``region`` (None: everywhere) on the fewest
    ``preferred``-level domains (None: no level, one domain), then the fewest nodes, then the fewest GPUs left idle
    on the nodes used; None when they do not fit. Nodes without the label are one domain, as in the solver's
    model."""
    need = len(pods)
    if region is None:
        by_domain, total, count = _kept(pods, index, preferred or None)
    else:
        by_domain, total, count = _read(pods, index, region, preferred)
    if total < need:
        return None
    max_nodes = min(need, count)
    w_nodes = max(1, index.max_gpus * max_nodes) + 1  # the weights of the solver's objective
    w_dom = w_nodes * (max_nodes + 1)
    domains = sorted(by_domain, key=str)
    if len(domains) == 1:
        split: list[int] | None = [need]
    else:
        split = _split([_cheapest(_items(by_domain[d]), need, w_nodes)[0] for d in domains], need, w_dom)
    if split is None:
        return None
    plan: Plan = []
    rest = list(pods)
    for d, k in zip(domains, split, strict=True):
        if k:
            for node, j in _nodes_for(by_domain[d], k, w_nodes):
                plan.extend((rest.pop(0), node) for _ in range(j))
    return plan


Domains = dict[str | None, dict[tuple[int, int], list[Node]]]  # per domain, the nodes by (room, idle GPUs)


def _kept(pods: list[Pod], index: NodeIndex, preferred: str | None) -> tuple[Domains, int, int]:
    """Every node's groups for the gang, as the index keeps them per domain (``Rooms.groups``), with rooms above the
    gang's size counted as its size (the groups that become alike merged in the nodes' order); the room in all and
    the nodes counted."""
    need = len(pods)
    by_domain: Domains = {}
    total = count = 0
    for domain, kept in index.rooms(pods[0]).groups(index.nodes, preferred).items():
        groups: dict[tuple[int, int], list[Node]] = {}
        for (room, idle), nodes in kept.items():
            if room > need:
                room = need
            total += room * len(nodes)
            count += len(nodes)
            group = groups.get((room, idle))
            groups[(room, idle)] = nodes if group is None else list(merge(group, nodes, key=_index_of))
        by_domain[domain] = groups
    return by_domain, total, count


def _read(pods: list[Pod], index: NodeIndex, region: bytearray, preferred: str | None) -> tuple[Domains, int, int]:
    """``_kept``'s answer for the nodes of ``region``, read node by node."""
    pod, need = pods[0], len(pods)
    rooms = index.rooms(pod).room  # per node, its room for the shape where the pod's signature may go (else 0)
    nodes = index.nodes
    # per domain, the nodes by (room, idle GPUs), each group in the order of the nodes: nodes alike cost alike
    by_domain: Domains = {}
    least = pod.gpu_whole
    # whole GPUs: only the nodes with enough idle GPUs, straight from the index's buckets (each in the nodes' order,
    # and a group of nodes of one idle count comes from one bucket)
    runs = [index.buckets[k] for k in range(least, index.max_gpus + 1)] if least else [range(len(nodes))]
    total = count = 0
    for ids in runs:
        for i in ids:
            room = rooms[i]
            if room <= 0 or not region[i]:
                continue
            n = nodes[i]
            if room > need:
                room = need
            domain = n.labels.get(preferred) if preferred else None
            groups = by_domain.get(domain)
            if groups is None:
                groups = by_domain[domain] = {}
            key = (room, n.idle)
            group = groups.get(key)
            if group is None:
                groups[key] = [n]
            else:
                group.append(n)
            total += room
            count += 1
    return by_domain, total, count


Item = tuple[int, int, int]  # (room, idle GPUs, how many such nodes): taken all or none


def _items(groups: dict[tuple[int, int], list[Node]]) -> list[Item]:
    """The nodes of one domain as knapsack items: each (room, idle) group split in 1, 2, 4, ... nodes and the rest,
    so any number of a group's nodes is some set of its items."""
    out: list[Item] = []
    for (room, idle), nodes in sorted(groups.items()):
        left, size = len(nodes), 1
        while left > 0:
            take = min(size, left)
            out.append((room, idle, take))
            left -= take
            size *= 2
    return out


def _cheapest(items: list[Item], need: int, w_nodes: int) -> tuple[Costs, list[Takes]]:
    """cost[k]: the least ``w_nodes`` per node plus its idle GPUs over nodes with room for at least ``k`` pods
    (k = 0..need), and per item whether the best set for each k takes it (for ``_nodes_for``). Small tables are
    worked out in plain Python until numpy is imported: its import alone (~60 ms, inside the daemon's first binds)
    is more than a daemon's first gangs cost."""
    if len(items) * (need + 1) <= SMALL and "numpy" not in sys.modules:
        return _cheapest_small(items, need, w_nodes)
    import numpy as np  # imported on first use, as OR-Tools is (which brings it)

    cost = np.full(need + 1, _NONE, dtype=np.int64)
    cost[0] = 0
    takes: list[Takes] = []
    ks = np.arange(need + 1)
    for room, idle, nodes in items:
        with_it = cost[np.maximum(ks - room * nodes, 0)] + nodes * (w_nodes + idle)
        take = with_it < cost
        cost = np.where(take, with_it, cost)
        takes.append(take)
    return cost, takes


def _cheapest_small(items: list[Item], need: int, w_nodes: int) -> tuple[Costs, list[Takes]]:
    """``_cheapest`` without numpy: each item is taken or not against the table as it was before it."""
    cost = [0] + [_NONE] * need
    takes: list[Takes] = []
    for room, idle, nodes in items:
        step, add = room * nodes, nodes * (w_nodes + idle)
        with_it = [cost[max(k - step, 0)] + add for k in range(need + 1)]
        take = [w < c for w, c in zip(with_it, cost, strict=True)]
        cost = [w if t else c for w, t, c in zip(with_it, take, cost, strict=True)]
        takes.append(take)
    return cost, takes


def _split(costs: list[Costs], need: int, w_dom: int) -> list[int] | None:
    """How many pods each domain takes, the cheapest way (each domain used costs ``w_dom`` more); None when no
    split places them all."""
    if len(costs) * (need + 1) * (need + 1) <= SMALL and "numpy" not in sys.modules:  # (as ``_cheapest``)
        return _split_small([list(map(int, cost)) for cost in costs], need, w_dom)
    import numpy as np  # imported on first use, as OR-Tools is (which brings it)

    best = np.full(need + 1, _NONE, dtype=np.int64)
    best[0] = 0
    ks = np.arange(need + 1)
    behind_all = ks[:, None] - ks[None, :]  # k - j: pods left for the domains before
    valid_all = behind_all >= 0
    behind_all = np.where(valid_all, behind_all, 0)
    picks: list[Picks] = []
    for cost in map(np.asarray, costs):
        # a domain takes at most as many pods as it has room for: the columns j beyond (cost NONE) are never picked
        # before a column that is not, and a row of NONE picks its first column either way
        top = int(np.flatnonzero(cost < _NONE)[-1]) + 1
        behind, valid = behind_all[:, :top], valid_all[:, :top]
        here = np.where(cost[None, :top] >= _NONE, _NONE, cost[None, :top] + w_dom)
        here[:, 0] = 0  # the domain not used
        cand = np.where(valid, best[behind] + here, _NONE)
        cand = np.minimum(cand, _NONE)
        pick = cand.argmin(axis=1)  # the first of equals: the fewest pods here
        best = cand[ks, pick]
        picks.append(pick)
    return _walk_back(picks, int(best[need]), need)


def _split_small(costs: list[list[int]], need: int, w_dom: int) -> list[int] | None:
    """``_split`` without numpy, the same table: for each k, the first j (fewest pods in this domain) of the least
    cost, a cost at or above ``_NONE`` counting as ``_NONE``."""
    best = [0] + [_NONE] * need
    picks: list[Picks] = []
    for cost in costs:
        here = [0] + [_NONE if c >= _NONE else c + w_dom for c in cost[1:]]
        top = max(j for j, c in enumerate(cost) if c < _NONE) + 1
        pick, new = [], []
        for k in range(need + 1):
            best_j, best_c = 0, min(best[k] + here[0], _NONE)
            for j in range(1, min(k, top - 1) + 1):
                c = min(best[k - j] + here[j], _NONE)
                if c < best_c:
                    best_j, best_c = j, c
            pick.append(best_j)
            new.append(best_c)
        best = new
        picks.append(pick)
    return _walk_back(picks, best[need], need)


def _walk_back(picks: list[Picks], total: int, need: int) -> list[int] | None:
    """The split the per-domain picks make, from the last domain back; None when ``total`` is no way."""
    if total >= _NONE:
        return None
    split = [0] * len(picks)
    k = need
    for i in range(len(picks) - 1, -1, -1):
        j = int(picks[i][k])
        split[i] = j
        k -= j
    return split


def _nodes_for(groups: dict[tuple[int, int], list[Node]], k: int, w_nodes: int) -> list[tuple[Node, int]]:
    """The cheapest nodes of one domain for ``k`` pods, with how many pods each takes (every node one at least)."""
    items = _items(groups)
    _, takes = _cheapest(items, k, w_nodes)
    wanted: dict[tuple[int, int], int] = defaultdict(int)
    left = k
    for i in range(len(items) - 1, -1, -1):
        if left > 0 and takes[i][left]:
            room, idle, nodes = items[i]
            wanted[(room, idle)] += nodes
            left = max(0, left - room * nodes)
    chosen = sorted(((n, room) for (room, idle), c in wanted.items() for n in groups[(room, idle)][:c]),
                    key=lambda c: c[0].index)
    out, rest = [], k - len(chosen)
    for node, room in chosen:
        extra = min(room - 1, rest)
        rest -= extra
        out.append((node, 1 + extra))
    return out
