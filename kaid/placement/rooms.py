"""How many pods of one shape each node has room for now, and what each node lacks for one, kept up to date from the
node index's log of changed nodes: a gang's bounds (does it fit at all, on how few nodes at best, in which topology
domains) and the fit summary of a job that waits cost the nodes that changed since the shape was last asked about,
not a pass over every node."""

from __future__ import annotations

from bisect import bisect_left, insort
from itertools import compress
from operator import attrgetter

from kaid.model.objects import Node, Pod
from kaid.model.vocabulary import NodeFailure
from kaid.placement.predicates import extended_failure, extended_room, resource_failure, room_for

Groups = dict[tuple[int, int], list[Node]]  # (room, idle GPUs) -> the nodes with that room and idle count, by index
_index_of = attrgetter("index")
_TOO_MANY_PODS, _INSUFFICIENT_CPU = NodeFailure.TOO_MANY_PODS, NodeFailure.INSUFFICIENT_CPU
_INSUFFICIENT_MEMORY, _INSUFFICIENT_GPU = NodeFailure.INSUFFICIENT_MEMORY, NodeFailure.INSUFFICIENT_GPU


class Rooms:
    """Per node, the pods of ``pod``'s shape (whole GPUs, cpu, memory, a pod slot each; shared GPUs aside) it has
    room for now, 0 where the pod's signature may not go (``mask``); the count of nodes per room above 0
    (``nodes_by_room``), their sum (``total``) and, per node label key asked for, the sum per label value and the
    nodes with room grouped by room and idle GPUs per label value (``groups``)."""

    __slots__ = ("_by_label", "_filed_idle", "_groups", "_seen", "mask", "nodes_by_room", "pod", "room", "total")

    def __init__(self, pod: Pod, nodes: list[Node], mask: bytearray, seen: int) -> None:
        self.pod = pod
        self.mask = mask
        # ``room_for`` inlined over the nodes the signature may go to (one pass, no call per node; the same answers:
        # tests/test_rooms.py compares with ``room_for``)
        self.room = room = [0] * len(nodes)
        by_room: dict[int, int] = {}
        self.nodes_by_room = by_room
        total = 0
        whole, cpu, mem, ext = pod.gpu_whole, pod.cpu, pod.mem, pod.ext
        for i in compress(range(len(nodes)), mask):
            node = nodes[i]
            r = node.alloc_pods - node.used_pods
            if whole and node.idle // whole < r:
                r = node.idle // whole
            if cpu and (node.alloc_cpu - node.used_cpu) // cpu < r:
                r = (node.alloc_cpu - node.used_cpu) // cpu
            if mem and (node.alloc_mem - node.used_mem) // mem < r:
                r = (node.alloc_mem - node.used_mem) // mem
            if ext:
                r = min(r, extended_room(node, pod))
            if r > 0:
                room[i] = r
                by_room[r] = by_room.get(r, 0) + 1
                total += r
        self.total = total
        self._seen = seen  # the index's log of changed nodes is read from here on
        self._by_label: dict[str, tuple[list[str | None], dict[str, int]]] = {}  # key -> (value per node, sums)
        # label key (None: one domain) -> (value per node, None for one domain; the groups per value)
        self._groups: dict[str | None, tuple[list[str | None] | None, dict[str | None, Groups]]] = {}
        self._filed_idle: list[int] = []  # per node, the idle GPUs it is filed with in ``_groups`` (where it has room)

    def catch_up(self, nodes: list[Node], changed: list[int]) -> None:
        """Read the nodes that changed since the last call (``changed``: the index's log)."""
        if self._seen == len(changed):
            return
        fresh = set(changed[self._seen:])
        self._seen = len(changed)
        room, mask, pod, by_room = self.room, self.mask, self.pod, self.nodes_by_room
        grouped = bool(self._groups)
        filed_idle = self._filed_idle
        for i in fresh:
            if not mask[i]:
                continue
            node = nodes[i]
            new, old = room_for(node, pod), room[i]
            if new == old:
                # the same room: the groups still file the node by its idle GPUs, which may have moved
                if grouped and new and filed_idle[i] != node.idle:
                    self._refile(node, old, new)
                continue
            if grouped:
                self._refile(node, old, new)
            room[i] = new
            self.total += new - old
            if old:
                left = by_room[old] - 1
                if left:
                    by_room[old] = left
                else:
                    del by_room[old]
            if new:
                by_room[new] = by_room.get(new, 0) + 1
            for values, sums in self._by_label.values():
                value = values[i]
                if value is not None:
                    sums[value] += new - old

    def by_label(self, nodes: list[Node], key: str) -> dict[str, int]:
        """The room summed per value of the node label ``key`` (every value some node has, nodes without it left
        out)."""
        known = self._by_label.get(key)
        if known is None:
            values = [n.labels.get(key) for n in nodes]
            sums: dict[str, int] = {}
            for value, r in zip(values, self.room, strict=True):
                if value is not None:
                    sums[value] = sums.get(value, 0) + r
            known = self._by_label[key] = (values, sums)
        return known[1]

    def groups(self, nodes: list[Node], key: str | None) -> dict[str | None, Groups]:
        """Per value of the node label ``key`` (None: every node in one domain, keyed None; nodes without the label
        are the domain None), the nodes with room above 0 grouped by (room, idle GPUs), each group in the nodes'
        order. Kept up to date from then on: read, never change, what it returns."""
        known = self._groups.get(key)
        if known is None:
            if not self._groups:
                self._filed_idle = [n.idle for n in nodes]
            values = None if key is None else [n.labels.get(key) for n in nodes]
            domains: dict[str | None, Groups] = {}
            filed_idle = self._filed_idle
            for i, r in enumerate(self.room):
                if r:
                    value = None if values is None else values[i]
                    groups = domains.get(value)
                    if groups is None:
                        groups = domains[value] = {}
                    group = groups.get((r, filed_idle[i]))
                    if group is None:
                        groups[(r, filed_idle[i])] = [nodes[i]]
                    else:
                        group.append(nodes[i])
            known = self._groups[key] = (values, domains)
        return known[1]

    def _refile(self, node: Node, old: int, new: int) -> None:
        """Move ``node`` in every kept grouping from (``old`` room, the idle GPUs it was filed with) to (``new`` room,
        its idle GPUs now); a room of 0 is in no group."""
        i = node.index
        was_idle, idle = self._filed_idle[i], node.idle
        self._filed_idle[i] = idle
        for values, domains in self._groups.values():
            value = None if values is None else values[i]
            if old:
                groups = domains[value]
                left = groups[(old, was_idle)]
                del left[bisect_left(left, i, key=_index_of)]
                if not left:
                    del groups[(old, was_idle)]
                    if not groups:
                        del domains[value]
            if new:
                groups = domains.setdefault(value, {})
                group = groups.get((new, idle))
                if group is None:
                    groups[(new, idle)] = [node]
                else:
                    insort(group, node, key=_index_of)


class Misfits:
    """Per node the pod's signature may go to (``mask``), the first resource it lacks now for a pod of ``pod``'s shape
    (``resource_failure``: shared GPUs included), None where the pod fits, and the count of nodes per failure."""

    __slots__ = ("_seen", "counts", "mask", "pod", "why")

    def __init__(self, pod: Pod, nodes: list[Node], mask: bytearray, seen: int) -> None:
        self.pod = pod
        self.mask = mask
        self.why: list[NodeFailure | None] = [None] * len(nodes)
        self.counts: dict[NodeFailure, int] = {}
        why, counts = self.why, self.counts
        # ``resource_failure``'s checks inlined, in its order (no call per node; shared GPUs, the last checks, through
        # it: the same answers, tests/test_rooms.py compares with it)
        cpu, mem, whole, shared, ext = pod.cpu, pod.mem, pod.gpu_whole, pod.frac_devices, pod.ext
        failure: NodeFailure | None
        for i in compress(range(len(nodes)), mask):
            node = nodes[i]
            if node.used_pods + 1 > node.alloc_pods:
                failure = _TOO_MANY_PODS
            elif node.used_cpu + cpu > node.alloc_cpu:
                failure = _INSUFFICIENT_CPU
            elif node.used_mem + mem > node.alloc_mem:
                failure = _INSUFFICIENT_MEMORY
            elif ext and (lacks := extended_failure(node, pod)) is not None:
                failure = lacks
            elif whole and node.idle < whole:
                failure = _INSUFFICIENT_GPU
            elif shared:
                failure = resource_failure(node, pod)
                if failure is None:
                    continue
            else:
                continue
            why[i] = failure
            counts[failure] = counts.get(failure, 0) + 1
        self._seen = seen  # the index's log of changed nodes is read from here on

    def catch_up(self, nodes: list[Node], changed: list[int]) -> None:
        """Read the nodes that changed since the last call (``changed``: the index's log)."""
        if self._seen == len(changed):
            return
        fresh = set(changed[self._seen:])
        self._seen = len(changed)
        why, counts, mask, pod = self.why, self.counts, self.mask, self.pod
        for i in fresh:
            if not mask[i]:
                continue
            new, old = resource_failure(nodes[i], pod), why[i]
            if new == old:
                continue
            why[i] = new
            if old is not None:
                left = counts[old] - 1
                if left:
                    counts[old] = left
                else:
                    del counts[old]
            if new is not None:
                counts[new] = counts.get(new, 0) + 1

    def first(self, failure: NodeFailure) -> int:
        """The lowest node index that lacks ``failure`` (one does: it is counted)."""
        return self.why.index(failure)


def fewest_nodes(nodes_by_room: dict[int, int], need: int) -> int | None:
    """The fewest nodes that could hold ``need`` pods (the roomiest first), or None when all of them cannot."""
    count = 0
    for room in sorted(nodes_by_room, reverse=True):
        nodes = nodes_by_room[room]
        if room * nodes >= need:
            return count + -(-need // room)
        need -= room * nodes
        count += nodes
    return None
