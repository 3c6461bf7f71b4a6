"""KAI's topology node score for a gang that no one domain of its preferred level holds: the nodes in tiers, highest
score first (plugins/topology node_scoring.go calculateNodeScores, job_filtering.go sortTree at d5bc503a).

The tree of the topology's levels below the lowest domain common to the nodes, down to the preferred level, is
sorted level by level, each domain's children by the gang's dominant demand-to-free ratio (its pods' GPUs, cpu and
memory over the domain's idle ones; a resource none of which is free: 1000), highest first, then by label value. The
preferred-level domain at position i of n in that order scores floor((i + 1) / n * 10): the last scores highest, and
domains whose scores tie share a tier (the other plugins, binpack, order the nodes inside it). A node without every
level's label scores 0 (KAI: not part of the topology).

The free resources per preferred-level domain are kept up to date from the node index's log of changed nodes
(``DomainFree``, as ``Rooms`` keeps rooms): a gang placed everywhere costs the domains, not a pass over every node.
"""

from __future__ import annotations

import math
from collections import defaultdict
from operator import itemgetter
from typing import TYPE_CHECKING

from kaid.model.objects import Node, Pod

if TYPE_CHECKING:
    from kaid.placement.index import NodeIndex

Path = tuple[str, ...]  # a domain: its label values from the topology's top level down


class DomainFree:
    """Per preferred-level domain of a topology (``levels``, top first, the preferred one at ``depth`` - 1), its
    nodes and the idle GPUs (milli), free cpu and free memory they have, kept from the index's log of changed
    nodes. Nodes without every level's label are in none (``unlabeled``)."""

    __slots__ = ("_bits", "_cpu", "_gpu", "_mem", "_seen", "leaf_of", "members", "paths", "sums", "unique",
                 "unlabeled")

    def __init__(self, nodes: list[Node], levels: tuple[str, ...], depth: int, seen: int) -> None:
        get = itemgetter(*levels)
        one = len(levels) == 1
        ids: dict[Path, int] = {}
        seen_values: dict[object, int] = {}  # every level's labels -> the domain (the preferred level's and above)
        self.paths: list[Path] = []
        self.members: list[list[int]] = []  # per domain, its node indexes in order
        self.leaf_of = leaf_of = [-1] * len(nodes)
        self.unlabeled: list[int] = []
        strays: set[str] = set()
        for i, n in enumerate(nodes):
            try:
                values = get(n.labels)
            except KeyError:
                self.unlabeled.append(i)
                stray = n.labels.get(levels[depth - 1])
                if stray is not None:  # (in the index's mask of that value, outside every domain here)
                    strays.add(stray)
                continue
            k = seen_values.get(values)
            if k is None:
                path: Path = (values,) if one else values[:depth]
                k = ids.get(path)
                if k is None:
                    k = ids[path] = len(self.paths)
                    self.paths.append(path)
                    self.members.append([])
                seen_values[values] = k
            leaf_of[i] = k
            self.members[k].append(i)
        # per node, as last read: idle milli-GPU, free cpu, free memory; per domain their sums
        self._gpu = gpu = [n.idle * 1000 for n in nodes]
        self._cpu = cpu = [n.alloc_cpu - n.used_cpu for n in nodes]
        self._mem = mem = [n.alloc_mem - n.used_mem for n in nodes]
        self.sums = [[sum(map(gpu.__getitem__, m)), sum(map(cpu.__getitem__, m)), sum(map(mem.__getitem__, m))]
                     for m in self.members]
        # whether a domain's nodes are all the nodes of its preferred-level label value (``NodeIndex.domains``' mask)
        per_value: dict[str, int] = defaultdict(int)
        for path in self.paths:
            per_value[path[-1]] += 1
        self.unique = [per_value[path[-1]] == 1 and path[-1] not in strays for path in self.paths]
        self._seen = seen
        self._bits: dict[int, int] = {}  # per domain asked for, its nodes as an int, bit i for node i

    def bits(self, k: int, doms: dict[str, bytearray]) -> int:
        """Domain ``k``'s nodes as an int, bit i (byte i of a mask read little-endian) for node i: its label value's
        mask (``doms``, ``NodeIndex.domains``) where its nodes are all that value's."""
        got = self._bits.get(k)
        if got is None:
            if self.unique[k]:
                got = int.from_bytes(doms[self.paths[k][-1]], "little")
            else:
                got = sum(1 << (8 * i) for i in self.members[k])
            self._bits[k] = got
        return got

    def catch_up(self, nodes: list[Node], changed: list[int]) -> None:
        """Read the nodes that changed since the last call (``changed``: the index's log)."""
        if self._seen == len(changed):
            return
        fresh = set(changed[self._seen:])
        self._seen = len(changed)
        leaf_of, sums, gpu, cpu, mem = self.leaf_of, self.sums, self._gpu, self._cpu, self._mem
        for i in fresh:
            k = leaf_of[i]
            if k < 0:
                continue
            n = nodes[i]
            g, c, m = n.idle * 1000, n.alloc_cpu - n.used_cpu, n.alloc_mem - n.used_mem
            acc = sums[k]
            acc[0] += g - gpu[i]
            acc[1] += c - cpu[i]
            acc[2] += m - mem[i]
            gpu[i], cpu[i], mem[i] = g, c, m

    def node_free(self, i: int) -> tuple[int, int, int]:
        """A node's idle milli-GPU, free cpu and free memory as last read (``catch_up``)."""
        return self._gpu[i], self._cpu[i], self._mem[i]


def preferred_tiers(pods: list[Pod], index: NodeIndex, region: bytearray | None, preferred: str,
                    levels: tuple[str, ...]) -> list[bytearray] | None:
    """The nodes of ``region`` (None: every node) in tiers by KAI's topology score for ``pods`` (module doc),
    highest first, as masks; None when every node scores alike (nothing to order). Costs the domains where
    ``region`` is None, else a pass over the region's nodes, and a mask per tier asked for."""
    if preferred not in levels:
        levels = (preferred,)
    depth = levels.index(preferred) + 1
    free = index.domain_free(levels, depth)
    size = len(index.nodes)
    if region is None:
        leaves = [k for k, m in enumerate(free.members) if m]
        sums = free.sums
        unlabeled = free.unlabeled
    else:
        inside: dict[int, list[int]] = {}
        unlabeled = []
        i = region.find(1)
        leaf_of = free.leaf_of
        while i != -1:
            k = leaf_of[i]
            if k < 0:
                unlabeled.append(i)
            else:
                acc = inside.get(k)
                f = free.node_free(i)
                if acc is None:
                    inside[k] = [f[0], f[1], f[2]]
                else:
                    acc[0] += f[0]
                    acc[1] += f[1]
                    acc[2] += f[2]
            i = region.find(1, i + 1)
        leaves = list(inside)
        sums = [inside.get(k) or [0, 0, 0] for k in range(len(free.paths))] if inside else []
    if len(leaves) < 2:
        return None
    paths = free.paths
    totals: dict[Path, list[int]] = {}
    for k in leaves:
        path, acc = paths[k], sums[k]
        for d in range(1, depth + 1):
            up = totals.get(path[:d])
            if up is None:
                totals[path[:d]] = list(acc)
            else:
                up[0] += acc[0]
                up[1] += acc[1]
                up[2] += acc[2]
    want = (sum(p.gpu_milli_on(None) for p in pods), sum(p.cpu for p in pods), sum(p.mem for p in pods))

    def ratio(path: Path) -> float:  # KAI's getJobRatioToFreeResources
        worst = 0.0
        for w, f in zip(want, totals[path], strict=True):
            if w > 0:
                worst = max(worst, w / f if f > 0 else 1000.0)
        return worst

    children: dict[Path, list[Path]] = defaultdict(list)
    for path in totals:
        children[path[:-1]].append(path)
    top: Path = ()
    while len(children[top]) == 1:  # the lowest domain common to the nodes (two leaves at least: above depth)
        top = children[top][0]
    order: list[Path] = []

    def walk(path: Path) -> None:
        if len(path) == depth:
            order.append(path)
            return
        for child in sorted(children[path], key=lambda c: (-ratio(c), c[-1])):
            walk(child)

    walk(top)
    leaf_ids = {paths[k]: k for k in leaves}
    count = len(order)
    by_score: dict[int, list[int]] = defaultdict(list)
    for i, path in enumerate(order):
        by_score[math.floor((i + 1) / count * 10)].append(leaf_ids[path])
    scores = sorted(set(by_score) | ({0} if unlabeled else set()), reverse=True)
    if len(scores) < 2:
        return None
    doms = index.domains(preferred)
    region_bits = int.from_bytes(region, "little") if region is not None else None
    out: list[bytearray] = []
    for score in scores:
        bits = 0
        for k in by_score.get(score, ()):
            bits |= free.bits(k, doms)
        if region_bits is not None:
            bits &= region_bits
        mask = bytearray(bits.to_bytes(size, "little"))
        if score == 0:
            for j in unlabeled:  # (in the region already)
                mask[j] = 1
        out.append(mask)
    return out
