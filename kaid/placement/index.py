"""A node index for the greedy path: nodes bucketed by idle GPUs, static feasibility cached per pod
signature, and the only two functions that change a node's accounting (``assign`` / ``release``)."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Sequence
from itertools import pairwise

from kaid.model.journal import Journal
from kaid.model.nodes import hold_extended, short
from kaid.model.objects import Node, Pod
from kaid.model.pods import new_gpu_group
from kaid.model.vocabulary import NodeFailure, PodStatus
from kaid.placement.podaffinity import PodAffinity, has_terms
from kaid.placement.predicates import (
    extended_room,
    one_device,
    resource_failure,
    shared_devices,
    static_failure,
    whole_devices,
)
from kaid.placement.rooms import Misfits, Rooms
from kaid.placement.tiers import DomainFree

Devices = tuple[int, ...]


class Partial:
    """Nodes with a partly used device, by how much of such a device is used (each level a node has) and then by
    the node's idle GPUs, node indexes sorted: a shared-GPU pod's greedy choice without looking at every node."""

    __slots__ = ("_at", "levels")

    def __init__(self) -> None:
        self.levels: dict[int, dict[int, list[int]]] = {}  # used milli-GPU -> idle GPUs -> node indexes, sorted
        self._at: dict[int, tuple[frozenset[int], int]] = {}  # node index -> (its levels, its idle GPUs) as filed

    def update(self, node: Node) -> None:
        levels = frozenset(u for u in node.dev_used if 0 < u < 1000)
        was = self._at.get(node.index)
        now = (levels, node.idle)
        if was == now:
            return
        if was is not None:
            for u in was[0]:
                ids = self.levels[u][was[1]]
                del ids[bisect_left(ids, node.index)]
        if levels:
            self._at[node.index] = now
            for u in levels:
                insort(self.levels.setdefault(u, {}).setdefault(node.idle, []), node.index)
        else:
            self._at.pop(node.index, None)

    def candidates(self, share: int, spread: bool) -> Iterator[int]:
        """Nodes with a partly used device that has room for ``share``, in the order of the greedy choice: binpack,
        the fullest such device first, then fewer idle GPUs, then the node's index; spread, the emptiest such
        device first, then more idle GPUs. A node comes once per level it has: the first time is its best."""
        levels = sorted((u for u in self.levels if u + share <= 1000), reverse=not spread)
        for u in levels:
            by_idle = self.levels[u]
            for idle in sorted(by_idle, reverse=spread):
                yield from by_idle[idle]


class NodeIndex:
    """The nodes of a cycle, bucketed by idle GPUs; the only code that changes a node's accounting.

    ``buckets[k]`` lists the nodes with k idle GPUs (k >= 1) by index, whatever order they came in: equally scored
    nodes are chosen lowest index first, so a choice reads only the nodes' state, never the history of how they got
    there (a tentative placement rolled back, a victim scenario tried or skipped, leave the choices after it as they
    were). Nodes without an idle GPU are in no bucket (``buckets[0]`` stays empty): no choice looks for them, and
    most moves of a busy cluster go to or from there.

    ``by_name``: whether index order is name order (every Snapshot kaid makes sorts its nodes by name), so that the
    first node of a bucket that qualifies is also the first by name."""

    __slots__ = ("_domains", "_free", "_misfits", "_rooms", "_static", "_static_failures", "buckets", "by_name",
                 "changed", "epoch", "held", "homes", "journal", "max_gpus", "nodes", "partial", "pod_affinity",
                 "shared", "soft", "soft_at", "soft_away", "waiting")

    def __init__(self, nodes: list[Node], journal: Journal | None = None, pods: Sequence[Pod] = ()) -> None:
        self.nodes = nodes
        self.journal = journal  # where nodes shared with a live model are recorded before they change
        self.max_gpus = max((n.gpus for n in nodes), default=0)
        self.buckets: list[list[int]] = [[] for _ in range(self.max_gpus + 1)]  # idle GPUs -> node indexes, sorted
        self.shared: dict[int, None] = {}  # nodes with a partly used device
        self._static: dict[str, bytearray] = {}
        self._static_failures: dict[str, dict[NodeFailure, tuple[int, int]]] = {}
        self.partial = Partial()
        self.epoch = 0  # bumped whenever resources are released, so cached failures expire
        self.changed: list[int] = []  # the index of each node whose accounting changed, in order (``Rooms``)
        # node index -> its devices freed in this cycle by the pod that holds them in the snapshot (a victim evicted,
        # a releasing pod lent): free to place on, but not idle (KAI: releasing); given back when that pod is put
        # back on them (a rollback, an unlend, a restore)
        self.held: dict[int, set[int]] = {}
        # pod key -> (node index, devices) where the pod holds GPU devices in the snapshot, or None for a pod that
        # holds none (placed this cycle, pipelined), for each pod released so far: written at its first release,
        # which for a pod of the snapshot is from that place (the index accounts it there until then). Only these
        # devices, released by that pod, are ``held`` (not a pod placed this cycle, not a victim on another node or
        # other devices than its own), so that what is held reads the pods' moves, not the path that made them
        self.homes: dict[str, tuple[int, frozenset[int]] | None] = {}
        # the shared GPUs' releasing share (KAI's ReleasingSharedGPUsMemory, node_info/gpu_sharing_node_info.go at
        # d5bc503a): node index -> (pod key, devices, share of each) of each releasing shared-GPU pod there that a
        # pipelined pod may count on (``note_releasing``); ``soft_at``: their node and devices; ``soft_away``: those
        # of them released from there now (lent to a plan, evicted)
        self.soft: dict[int, list[tuple[str, frozenset[int], int]]] = {}
        self.soft_at: dict[str, tuple[int, frozenset[int]]] = {}
        self.soft_away: set[str] = set()
        # the shared-GPU pods pipelined in an earlier cycle that the cycle did not bind as it began (they wait):
        # node index -> (pod key, devices, share of each). Their share of a GPU group is not allocated (KAI:
        # addSharedGPUTaskResourcesPerPodGroup leaves a Pipelined pod out of AllocatedSharedGPUsMemory), so a group
        # held by them alone has no idle room (``must_pipeline``); a key in ``soft_away`` is released from there now
        self.waiting: dict[int, list[tuple[str, frozenset[int], int]]] = {}
        self._rooms: dict[tuple[int, int, int, str], Rooms] = {}
        self._misfits: dict[tuple[str, int, int, int, int, int, int], Misfits] = {}
        self._domains: dict[str, dict[str, bytearray]] = {}
        self._free: dict[tuple[tuple[str, ...], int], DomainFree] = {}
        self.by_name = all(a.name < b.name for a, b in pairwise(nodes))
        for n in nodes:
            if n.idle > 0:
                self.buckets[n.idle].append(n.index)  # nodes come by index: each bucket starts sorted
            if any(0 < u < 1000 for u in n.dev_used):
                self.shared[n.index] = None
                self.partial.update(n)
        # inter-pod affinity, where some pod of ``pods`` (the snapshot's) has a term: the pods placed, per domain
        self.pod_affinity: PodAffinity | None = PodAffinity(nodes, pods, self.domains) if has_terms(pods) else None

    # ----------------------------------------------------------------------------- static feasibility
    def static_mask(self, pod: Pod) -> bytearray:
        """1 for each node the pod's signature may go to this cycle (``static_failure``), else 0."""
        mask = self._static.get(pod.sig)
        if mask is None:
            failures: dict[NodeFailure, tuple[int, int]] = {}
            mask = bytearray(len(self.nodes))
            for i, n in enumerate(self.nodes):
                why = static_failure(n, pod)
                if why is None:
                    mask[i] = 1
                else:
                    first, count = failures.get(why, (i, 0))
                    failures[why] = (first, count + 1)
            self._static[pod.sig] = mask
            self._static_failures[pod.sig] = failures
        return mask

    def static_failures(self, pod: Pod) -> dict[NodeFailure, tuple[int, int]]:
        """Why the nodes that ``static_mask`` leaves out cannot take the pod: per first failure, the first node
        index that has it and how many nodes do."""
        self.static_mask(pod)
        return self._static_failures[pod.sig]

    def domains(self, key: str) -> dict[str, bytearray]:
        """The nodes of each value of the node label ``key`` (a topology domain), as masks; nodes without the label
        are in none. Node labels do not change in a cycle: worked out once per key."""
        doms = self._domains.get(key)
        if doms is None:
            doms = {}
            for n in self.nodes:
                value = n.labels.get(key)
                if value is not None:
                    mask = doms.get(value)
                    if mask is None:
                        mask = doms[value] = bytearray(len(self.nodes))
                    mask[n.index] = 1
            self._domains[key] = doms
        return doms

    def domain_free(self, levels: tuple[str, ...], depth: int) -> DomainFree:
        """The free resources per topology domain of ``levels`` down to ``depth`` (``tiers.DomainFree``), up to date."""
        free = self._free.get((levels, depth))
        if free is None:
            free = self._free[(levels, depth)] = DomainFree(self.nodes, levels, depth, len(self.changed))
        else:
            free.catch_up(self.nodes, self.changed)
        return free

    def rooms(self, pod: Pod) -> Rooms:
        """How many pods of ``pod``'s shape each node has room for now (whole GPUs or none, no shared GPUs)."""
        key = (pod.gpu_whole, pod.cpu, pod.mem, pod.sig)
        rooms = self._rooms.get(key)
        if rooms is None:
            rooms = self._rooms[key] = Rooms(pod, self.nodes, self.static_mask(pod), len(self.changed))
        else:
            rooms.catch_up(self.nodes, self.changed)
        return rooms

    def misfits(self, pod: Pod) -> Misfits:
        """What each node the pod's signature may go to lacks now for a pod of ``pod``'s shape, shared GPUs included
        (``Misfits``: why a pod that waits fits nowhere)."""
        key = (pod.sig, pod.gpu_whole, pod.gpu_frac, pod.gpu_mem_mib, pod.frac_devices, pod.cpu, pod.mem)
        misfits = self._misfits.get(key)
        if misfits is None:
            misfits = self._misfits[key] = Misfits(pod, self.nodes, self.static_mask(pod), len(self.changed))
        else:
            misfits.catch_up(self.nodes, self.changed)
        return misfits

    # ----------------------------------------------------------------------------- accounting
    def _moved(self, node: Node, old_idle: int, devices: Devices) -> None:
        """File the node again after the use of its ``devices`` changed (``assign``, ``release``; none for a pod
        without GPUs, whatever devices it names)."""
        i = node.index
        self.changed.append(i)
        idle = node.idle
        if old_idle != idle:
            if old_idle > 0:
                was = self.buckets[old_idle]
                at = bisect_left(was, i)
                if at < len(was) and was[at] == i:
                    del was[at]
            if idle > 0:
                insort(self.buckets[idle], i)
        used = node.dev_used
        if i in self.shared:
            if not any(0 < u < 1000 for u in used):  # its last partly used device is full or idle now
                del self.shared[i]
            self.partial.update(node)  # ``partial`` files the same nodes, with their idle GPUs
        else:  # only a device that changed can have become partly used
            for d in devices:
                if 0 < used[d] < 1000:
                    self.shared[i] = None
                    self.partial.update(node)
                    return

    def assign(self, node: Node, pod: Pod, devices: Devices) -> None:
        """Account ``pod`` on ``node`` and ``devices`` (whole GPUs, or a share of each for a shared-GPU pod)."""
        if self.journal is not None:
            self.journal.node(node)
        if self.pod_affinity is not None:
            self.pod_affinity.add(node, pod)
        old = node.idle
        node.used_cpu += pod.cpu
        node.used_mem += pod.mem
        node.used_pods += 1
        if pod.ext:
            hold_extended(node, pod)
        if self.soft_away and pod.key in self.soft_away and self.soft_at[pod.key][0] == node.index:
            self.soft_away.discard(pod.key)  # back where it is releasing
        if self.held and node.index in self.held and devices:
            home = self.homes.get(pod.key)
            if home is not None and home[0] == node.index:  # back where it was: its own devices are no longer held
                self._unhold(node.index, home[1].intersection(devices))
        if pod.gpu_whole:
            used, taken = node.dev_used, 0
            for d in devices:
                if used[d] == 0:
                    taken += 1
                used[d] += 1000
            if len(used) > node.gpus:  # (over-committed input: a device beyond the node's is no idle GPU)
                taken -= sum(1 for d in devices if d >= node.gpus and used[d] == 1000)
            node.idle = old - taken
            # (a device a whole GPU was put on is used 1000 or more: none of them became partly used)
            self._moved(node, old, ())
            return
        if pod.frac_devices:
            share = pod.device_share(node)
            for k, d in enumerate(devices):
                if node.dev_used[d] == 0:
                    if d < node.gpus:  # (a device beyond the node's, over-committed input, is no idle GPU)
                        node.idle -= 1
                    if node.dev_group[d] is None:
                        node.dev_group[d] = new_gpu_group(node, pod, d, k)
                node.dev_used[d] += share
        self._moved(node, old, devices if pod.gpu_whole or pod.frac_devices else ())

    def release(self, node: Node, pod: Pod, devices: Devices, planning: bool = False) -> None:
        """Give back what ``assign`` took; ``planning`` undoes a tentative plan without expiring caches."""
        if self.journal is not None:
            self.journal.node(node)
        if self.pod_affinity is not None:
            self.pod_affinity.remove(node, pod)
        old = node.idle
        node.used_cpu -= pod.cpu
        node.used_mem -= pod.mem
        node.used_pods -= 1
        if pod.ext:
            hold_extended(node, pod, -1)
        if self.soft_at and pod.key in self.soft_at and self.soft_at[pod.key][0] == node.index:
            self.soft_away.add(pod.key)  # a releasing pod lent to a plan (or a waiting one moved): not there now
        if devices:
            home = self.homes.get(pod.key, _UNSEEN)
            if home is _UNSEEN:  # its first release in the cycle: from its place in the snapshot, if it has one
                home = self.homes[pod.key] = (node.index, frozenset(devices)) \
                    if pod.status not in _NEW and pod.node == node.name else None
            if home is not None and home[0] == node.index:
                # a pod of the snapshot leaving its own devices: what it frees there is not idle (a shared one: once
                # free)
                own = home[1].intersection(devices)
                if own:
                    self.held.setdefault(node.index, set()).update(own)
        if pod.gpu_whole:
            used, freed = node.dev_used, 0
            for d in devices:
                left = used[d] - 1000
                if left > 0:
                    used[d] = left
                else:
                    used[d] = 0
                    if d < node.gpus:  # (a device beyond the node's, over-committed input, is no idle GPU)
                        freed += 1
            node.idle = old + freed
        elif pod.frac_devices:
            share = pod.device_share(node)
            for d in devices:
                node.dev_used[d] -= share
                if node.dev_used[d] <= 0:
                    node.dev_used[d] = 0
                    node.dev_group[d] = None
                    if d < node.gpus:
                        node.idle += 1
        if not planning:
            self.epoch += 1
        self._moved(node, old, devices if pod.gpu_whole or pod.frac_devices else ())

    # ----------------------------------------------------------------------------- choosing
    def fits_exactly(self, node: Node, pod: Pod, devices: Devices) -> bool:
        """Whether the pod fits on exactly these devices of the node now (its pod slot, cpu and memory: the first
        checks of ``resource_failure``, whose GPU checks ask for any devices, not these)."""
        if node.used_pods + 1 > node.alloc_pods or node.used_cpu + pod.cpu > node.alloc_cpu or \
                node.used_mem + pod.mem > node.alloc_mem or (pod.ext and not extended_room(node, pod)):
            return False
        if pod.gpu_whole:
            used = node.dev_used
            return len(devices) == pod.gpu_whole and all(used[d] == 0 for d in devices) and \
                (len(used) == node.gpus or node.idle - short(node) >= pod.gpu_whole)
        if pod.frac_devices:
            share, used = pod.device_share(node), node.dev_used
            # each device taken fresh is an idle GPU, which a node holding GPUs beyond its devices (over-committed
            # input) has fewer of than free devices (``predicates.shared_devices``)
            if not all(used[d] + share <= 1000 for d in devices):
                return False
            return len(used) == node.gpus or node.idle - short(node) >= sum(1 for d in devices if used[d] == 0)
        return True

    def devices_for(self, node: Node, pod: Pod, spread: bool = False) -> Devices | None:
        """The devices the pod would get on the node now (``()`` for a pod without GPUs), or None if it does not fit."""
        if pod.frac_devices and not pod.gpu_whole:
            # ``resource_failure`` but for its last check, whether ``shared_devices`` finds devices: the devices
            # chosen here answer it (whether they are found does not depend on ``spread``, only their order)
            if node.used_pods + 1 > node.alloc_pods or node.used_cpu + pod.cpu > node.alloc_cpu or \
                    node.used_mem + pod.mem > node.alloc_mem or (pod.ext and not extended_room(node, pod)):
                return None
            return shared_devices(node, pod, spread)
        if resource_failure(node, pod) is not None:
            return None
        if pod.gpu_whole:
            return whole_devices(node, pod.gpu_whole)
        return ()

    def _by_idle(self, low: int, spread: bool) -> Iterator[int]:
        rng = range(self.max_gpus, low - 1, -1) if spread else range(low, self.max_gpus + 1)
        for k in rng:  # the callers stop before they change a bucket: no copy needed
            yield from self.buckets[k]

    def _idle_device(self, pod: Pod, spread: bool, mask: bytearray,
                     allowed: bytearray | None) -> tuple[Node, Devices] | None:
        """A shared-GPU pod that no partly used device takes: the first node with an idle device that fits it."""
        for i in self._by_idle(1, spread):
            if mask[i] and (allowed is None or allowed[i]):
                n = self.nodes[i]
                devs = self.devices_for(n, pod, spread)
                if devs is not None:
                    return n, devs
        return None

    # ----------------------------------------------------------------------------- shared GPUs releasing
    def note_releasing(self, pods: Sequence[Pod]) -> None:
        """Record the share of their devices that the shared-GPU pods of ``pods`` (releasing pods that a pipelined
        pod may count on) are releasing."""
        self._note_shares(pods, self.soft)

    def note_waiting(self, pods: Sequence[Pod]) -> None:
        """Record the shared-GPU pods of ``pods`` (pipelined in an earlier cycle, not bound as this one began) as
        waiting on their node's devices: a GPU group that only they hold is not allocated (``must_pipeline``)."""
        self._note_shares(pods, self.waiting)

    def _note_shares(self, pods: Sequence[Pod], into: dict[int, list[tuple[str, frozenset[int], int]]]) -> None:
        """Each shared-GPU pod of ``pods`` not noted yet, as (key, devices, share of a device) under its node's
        index in ``into``; ``soft_at`` says where (``soft_away`` then says when it is not there)."""
        at: dict[str, int] | None = None
        for p in pods:
            if p.frac_devices and p.devices and p.node is not None and p.key not in self.soft_at:
                if at is None:
                    at = {n.name: n.index for n in self.nodes}
                i = at.get(p.node)
                if i is not None:
                    devs = frozenset(p.devices)
                    into.setdefault(i, []).append((p.key, devs, p.device_share(self.nodes[i])))
                    self.soft_at[p.key] = (i, devs)

    def _releasing(self, i: int, d: int) -> int:
        """What the releasing shared pods of node ``i`` hold of its device ``d`` now."""
        away = self.soft_away
        return sum(share for key, devs, share in self.soft[i] if d in devs and key not in away)

    def must_pipeline(self, node: Node, pod: Pod, devices: Devices) -> bool:
        """Whether a shared-GPU pod placed on these devices of the node is pipelined, not bound: a device has room
        for it only counting the share its releasing pods hold (KAI: gpu_sharing/gpuSharing.go
        GetNodePreferableGpuForSharing, NodeInfo.EnoughIdleResourcesOnGpu; ``_soft_best`` chose it)."""
        if not pod.frac_devices:
            return False
        i, used = node.index, node.dev_used
        if i in self.soft:
            share = pod.device_share(node)
            if any(used[d] + share > 1000 for d in devices):
                return True
        if i in self.waiting:
            # a GPU group that only waiting pipelined pods hold is not allocated: no idle room in it (KAI:
            # NodeInfo.EnoughIdleResourcesOnGpu, a group missing from AllocatedSharedGPUsMemory)
            away, waiting = self.soft_away, self.waiting[i]
            for d in devices:
                if used[d] > 0 and used[d] <= sum(s for key, devs, s in waiting if d in devs and key not in away):
                    return True
        return False

    def _soft_best(self, pod: Pod, spread: bool, mask: bytearray,
                   allowed: bytearray | None) -> tuple[tuple[int, int, int], Node, Devices] | None:
        """A one-device shared-GPU pod's choice among the devices where it fits only by the share releasing pods
        hold there (KAI's FittingGPUs: a GPU group fits counting its releasing share, unless all of it is releasing,
        node_info IsTaskFitOnGpuGroup), by ``best_node``'s key: (the device's use, fullest first when binpacking;
        the node's idle GPUs; its index)."""
        best: tuple[tuple[int, int, int], Node, Devices] | None = None
        nodes = self.nodes
        for i in self.soft:
            if not mask[i] or (allowed is not None and not allowed[i]):
                continue
            n = nodes[i]
            if n.used_pods + 1 > n.alloc_pods or n.used_cpu + pod.cpu > n.alloc_cpu or \
                    n.used_mem + pod.mem > n.alloc_mem or (pod.ext and not extended_room(n, pod)):
                continue
            share, used = pod.device_share(n), n.dev_used
            for d in range(n.gpus):
                u = used[d]
                if u + share > 1000:
                    rel = self._releasing(i, d)
                    if rel and u > rel and u - rel + share <= 1000:
                        key = (u, -n.idle, i) if spread else (-u, n.idle, i)
                        if best is None or key < best[0]:
                            best = (key, n, one_device(d))
        return best

    def _unhold(self, i: int, devices: frozenset[int]) -> None:
        held = self.held[i]
        held.difference_update(devices)
        if not held:
            del self.held[i]

    def _true_idle(self, n: Node) -> list[int]:
        """The node's idle devices that no pod of the snapshot freed in this cycle."""
        held = self.held.get(n.index, ())
        used = n.dev_used
        return [d for d in range(n.gpus) if used[d] == 0 and d not in held]

    def _idle_first(self, pod: Pod, spread: bool, mask: bytearray,
                    allowed: bytearray | None) -> tuple[Node, Devices] | None:
        """``best_node`` for a whole-GPU pod among the nodes where it fits on devices that are idle, not freed by a
        pod leaving them in this cycle (KAI's nodeavailability plugin: +1000 where the task fits on the node's idle
        resources, NodeInfo.IsTaskAllocatable, at d5bc503a), on those devices; when no node has such room, the plain
        choice (the first node of the scan with room: a held one, as the first other one would have been returned),
        or None: one scan for both."""
        want, cpu, mem, buckets, nodes, held = pod.gpu_whole, pod.cpu, pod.mem, self.buckets, self.nodes, self.held
        plain: tuple[Node, Devices] | None = None
        for k in range(self.max_gpus, want - 1, -1) if spread else range(want, self.max_gpus + 1):
            for i in buckets[k]:
                if (allowed is None or allowed[i]) and mask[i]:
                    n = nodes[i]
                    if n.used_cpu + cpu <= n.alloc_cpu and n.used_mem + mem <= n.alloc_mem and \
                            n.used_pods < n.alloc_pods and (not pod.ext or extended_room(n, pod)):
                        if i not in held:
                            return n, whole_devices(n, want)
                        idle = self._true_idle(n)
                        if len(idle) >= want:
                            return n, tuple(idle[:want])
                        if plain is None:
                            plain = n, whole_devices(n, want)
        return plain

    def best_node(self, pod: Pod, spread: bool = False,
                  allowed: bytearray | None = None) -> tuple[Node, Devices] | None:
        """The greedy choice for one pod: binpack (fewest idle GPUs that fit) or spread (most); a whole-GPU pod
        where it fits on idle devices first, before devices a pod leaving them freed in this cycle (``held``)."""
        mask = self.static_mask(pod)
        if self.pod_affinity is not None:
            mask = self.pod_affinity.mask(pod, mask)
        nodes = self.nodes
        if pod.gpu_whole and self.held and pod.status == _PENDING:  # (a victim placed again: kai's rule, below)
            return self._idle_first(pod, spread, mask, allowed)
        if pod.gpu_whole:
            # the buckets read in place (no generator between): in a region (a rack) most nodes of a bucket are
            # outside it, and more of them the larger the cluster
            want, cpu, mem, buckets = pod.gpu_whole, pod.cpu, pod.mem, self.buckets
            for k in range(self.max_gpus, want - 1, -1) if spread else range(want, self.max_gpus + 1):
                for i in buckets[k]:  # returns before a bucket changes: no copy needed
                    if (allowed is None or allowed[i]) and mask[i]:
                        n = nodes[i]
                        if n.used_cpu + cpu <= n.alloc_cpu and n.used_mem + mem <= n.alloc_mem and \
                                n.used_pods < n.alloc_pods and (not pod.ext or extended_room(n, pod)):
                            return n, whole_devices(n, want)
            return None
        soft = self._soft_best(pod, spread, mask, allowed) \
            if self.soft and pod.frac_devices == 1 and pod.status == _PENDING else None
        if soft is not None:  # (a device that fits only by a releasing share, against the first one below)
            found = self._shared_best(pod, spread, mask, allowed)
            if found is not None:
                n, devs = found
                u = n.dev_used[devs[0]]
                if ((u, -n.idle, n.index) if spread else (-u, n.idle, n.index)) < soft[0]:
                    return found
            return soft[1], soft[2]
        if pod.frac_devices:
            return self._shared_best(pod, spread, mask, allowed) or self._idle_device(pod, spread, mask, allowed)
        # cpu-only pods: score every feasible node by free cpu
        chosen: Node | None = None
        for i, n in enumerate(nodes):
            if not mask[i] or (allowed is not None and not allowed[i]) or resource_failure(n, pod) is not None:
                continue
            if chosen is None or (n.free_cpu > chosen.free_cpu if spread else n.free_cpu < chosen.free_cpu):
                chosen = n
        return (chosen, ()) if chosen is not None else None

    def _shared_best(self, pod: Pod, spread: bool, mask: bytearray,
                     allowed: bytearray | None) -> tuple[Node, Devices] | None:
        """A shared-GPU pod's choice among the partly used devices with room for it, None when there is none."""
        nodes = self.nodes
        if pod.frac_devices == 1 and pod.gpu_frac:  # one device, the same share on every node: the index decides
            seen: set[int] = set()
            for i in self.partial.candidates(pod.gpu_frac, spread):
                if i in seen:
                    continue
                seen.add(i)
                if mask[i] and (allowed is None or allowed[i]):
                    n = nodes[i]
                    devs = self.devices_for(n, pod, spread)
                    if devs is not None and all(n.dev_used[d] > 0 for d in devs):
                        return n, devs
            return None
        best: tuple[tuple[int, int, int], Node, Devices] | None = None
        for i in list(self.shared):
            if mask[i] and (allowed is None or allowed[i]):
                n = nodes[i]
                devs = self.devices_for(n, pod, spread)
                if devs is not None and all(n.dev_used[d] > 0 for d in devs):
                    fill = sum(n.dev_used[d] for d in devs)
                    key = (fill if spread else -fill, n.idle if not spread else -n.idle, i)
                    if best is None or key < best[0]:
                        best = (key, n, devs)
        return (best[1], best[2]) if best is not None else None

_PENDING: str = PodStatus.PENDING
_NEW = frozenset({PodStatus.PENDING, PodStatus.PIPELINED, PodStatus.ALLOCATED})


_UNSEEN = (-1, frozenset[int]())  # (``NodeIndex.homes``: a pod not released yet in the cycle)
