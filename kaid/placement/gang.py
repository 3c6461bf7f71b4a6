"""Placing a gang: every pod at once or none, greedy first and CP-SAT where the greedy plan fails or
spreads the gang over more nodes or topology domains than it needs.

Cheap bounds keep the solver for the cases where it pays: per-node capacity for the gang's pod shape
(one pass over the nodes) gives a feasibility check and a lower bound on the nodes needed, and a
preferred topology level is tried domain by domain (best fit first) before the whole region.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kaid.model.objects import Node, Pod
from kaid.model.vocabulary import PodStatus
from kaid.placement.cpsat import solve_gang
from kaid.placement.fewest import fewest_domains
from kaid.placement.index import Devices, NodeIndex
from kaid.placement.predicates import extended_room, room_for
from kaid.placement.rooms import fewest_nodes
from kaid.placement.tiers import preferred_tiers

Placements = list[tuple[Pod, Node, Devices]]


@dataclass(slots=True)
class Topo:
    """A job's topology constraint resolved to node label keys (the domain label of each level)."""

    required: str | None = None
    preferred: str | None = None
    levels: tuple[str, ...] = ()  # the topology's level labels, top first (``tiers.preferred_tiers`` sorts its tree)


@dataclass(slots=True)
class GangPlan:
    """Where a gang's pods would go (empty when nowhere), how the plan was found, and how far it got."""

    placements: Placements = field(default_factory=list)
    # greedy | single-node (the bound says one node, the tightest is taken) | cpsat | knapsack (``fewest``)
    method: str = "greedy"
    placed_max: int = 0  # the most pods any attempt placed (for "gang: needs N, placeable M")
    solver_s: float = 0.0
    solves: int = 0
    topology_failed: bool = False
    greedy_nodes: int | None = None  # nodes the greedy plan used in the same cluster state, if it had one

    @property
    def nodes_used(self) -> int:
        return len({n.name for _, n, _ in self.placements})


def _order(pods: list[Pod]) -> list[Pod]:
    return sorted(pods, key=lambda p: (-p.gpu_whole, -p.gpu_milli_on(None), -p.cpu, -p.mem, p.name))


def greedy(pods: list[Pod], index: NodeIndex, spread: bool, allowed: bytearray | None) -> tuple[
        Placements | None, int]:
    """Place pods one by one with the strategy; undo the tentative changes and return the plan. The last pod is
    not accounted: no choice after it would see it (a single pod's plan changes nothing in the index)."""
    if not spread and len(pods) > 1 and pods[0].gpu_whole and _homogeneous(pods) and not linked(pods, index):
        held = _held_for(pods, index)
        if held is not False:
            return _fill(pods, index, allowed, held)
    return _one_by_one(pods, index, spread, allowed)


_PENDING: str = PodStatus.PENDING


def _held_for(pods: list[Pod], index: NodeIndex) -> bool | None:
    """How ``best_node`` places these pods while the index holds devices freed this cycle (``NodeIndex.held``):
    True, pending pods, idle devices first (``_fill_held``); None, as if none were held (no pod pending, or nothing
    held); False, some pods pending and some not (``_one_by_one``)."""
    if not index.held:
        return None
    pending = sum(1 for p in pods if p.status == _PENDING)
    return True if pending == len(pods) else None if pending == 0 else False


def _one_by_one(pods: list[Pod], index: NodeIndex, spread: bool, allowed: bytearray | None) -> tuple[
        Placements | None, int]:
    """``greedy``, one ``best_node`` choice per pod, each accounted in the index before the next and all undone."""
    return _in_tiers(pods, index, spread, [allowed], tied=True)


def _fill(pods: list[Pod], index: NodeIndex, allowed: bytearray | None,
          held: bool | None = None) -> tuple[Placements | None, int]:
    """``_fill_part`` (``_fill_held`` where ``held``): the plan if it places every pod, else None; and how many it
    placed."""
    plan = _fill_held(pods, index, allowed) if held else _fill_part(pods, index, allowed)
    return (plan if len(plan) == len(pods) else None), len(plan)


def _fill_held(pods: list[Pod], index: NodeIndex, allowed: bytearray | None) -> Placements:
    """``_fill_part`` for pending pods while the index holds devices freed this cycle, as ``best_node`` places them
    one by one: first on idle devices alone (``NodeIndex._idle_first``: a held node counts the devices not held),
    filling each node in the scan as ``_fill_part`` does. Once no node has such room (placing pods only takes room, so
    none has later), the plain choice: only a held node can have room then (any other was filled while it had), so
    the held nodes with room, fewest idle GPUs first, then by index (the buckets' order), each filled in turn."""
    plan = _fill_part(pods, index, allowed, index.held)
    if len(plan) == len(pods):
        return plan
    pod = pods[0]
    want = pod.gpu_whole
    mask, nodes = index.static_mask(pod), index.nodes
    took: dict[int, list[int]] = {}  # node index -> the devices the pods placed above took there
    for _, n, devs in plan:
        took.setdefault(n.index, []).extend(devs)
    rooms: list[tuple[int, int, list[int]]] = []
    for i in index.held:
        n = nodes[i]
        if n.idle >= want and mask[i] and (allowed is None or allowed[i]):
            taken = took.get(i, ())
            if n.idle - len(taken) >= want:
                used = n.dev_used
                free = [d for d in range(n.gpus) if used[d] == 0 and d not in taken]
                rooms.append((len(free), i, free))
    rooms.sort()
    for idle, i, free in rooms:
        n = nodes[i]
        placed = len(took.get(i, ())) // want
        if _fill_node(plan, pods, n, free, idle, placed):
            return plan
    return plan


def _fill_node(plan: Placements, pods: list[Pod], n: Node, free: list[int], idle: int, placed: int = 0) -> bool:
    """Put the next of ``pods`` (one shape, whole GPUs) on ``n`` while it has room, on ``free`` devices in turn
    (``idle`` of them; ``placed``: pods of the plan on it already, not in the index); whether the plan is whole."""
    pod = pods[0]
    want, cpu, mem = pod.gpu_whole, pod.cpu, pod.mem
    used_cpu, used_mem, used_pods = n.used_cpu + placed * cpu, n.used_mem + placed * mem, n.used_pods + placed
    most = n.alloc_pods if not pod.ext else used_pods - placed + extended_room(n, pod)  # (pods of its extended ones)
    at = 0
    while idle >= want and used_cpu + cpu <= n.alloc_cpu and used_mem + mem <= n.alloc_mem and \
            used_pods < n.alloc_pods and used_pods < most:
        plan.append((pods[len(plan)], n, tuple(free[at:at + want])))
        if len(plan) == len(pods):
            return True
        at += want
        idle -= want
        used_cpu += cpu
        used_mem += mem
        used_pods += 1
    return False


def _fill_part(pods: list[Pod], index: NodeIndex, allowed: bytearray | None,
               held: dict[int, set[int]] | None = None) -> Placements:
    """``greedy`` for pods of one shape with whole GPUs, binpack, without a tentative change to the index: each
    ``best_node`` choice fills the node it takes until the node qualifies no more, then goes on with the next node in
    the scan. Why: the first choice is the first node (buckets of fewer idle GPUs first, each by index) that
    qualifies; placing a pod there moves it to a bucket scanned before its old one, where every node before it failed
    already and fails still (only the chosen node changed), so the next choice is the same node while it qualifies,
    and then the node after it in the scan (every node before failed). Its devices: ``whole_devices``, the first idle
    ones, then the next ones (the earlier pods' are used). ``held``: on a node it names, only the devices it does not
    hold (``_fill_held``)."""
    pod = pods[0]
    want, cpu, mem = pod.gpu_whole, pod.cpu, pod.mem
    mask, nodes, buckets = index.static_mask(pod), index.nodes, index.buckets
    plan: Placements = []
    for k in range(want, index.max_gpus + 1):
        for i in buckets[k]:
            if (allowed is None or allowed[i]) and mask[i]:
                n = nodes[i]
                used = n.dev_used
                if held and i in held:  # its idle devices that no pod of the snapshot freed in this cycle
                    h = held[i]
                    free = [d for d in range(n.gpus) if used[d] == 0 and d not in h]
                    idle = len(free)
                elif n.used_cpu + cpu <= n.alloc_cpu and n.used_mem + mem <= n.alloc_mem and \
                        n.used_pods < n.alloc_pods and (not pod.ext or extended_room(n, pod)):
                    # (room for one: its free devices read only then)
                    free, idle = [d for d in range(n.gpus) if used[d] == 0], n.idle
                else:
                    continue
                if _fill_node(plan, pods, n, free, idle):
                    return plan
    return plan


def node_caps(pod: Pod, index: NodeIndex, allowed: bytearray | None) -> list[tuple[Node, int]]:
    """(node, how many pods of this shape it can take now) for every node that can take one."""
    mask = index.static_mask(pod)
    out = []
    if allowed is not None:  # a region (a topology domain) is a few nodes: only those
        candidates = [index.nodes[i] for i in _members(allowed)]
        allowed = None
    elif pod.gpu_whole:  # only nodes with enough idle GPUs, straight from the index's buckets
        candidates = [index.nodes[i] for k in range(pod.gpu_whole, index.max_gpus + 1) for i in index.buckets[k]]
        candidates.sort(key=lambda n: n.index)
    else:
        candidates = index.nodes
    for n in candidates:
        if not mask[n.index] or (allowed is not None and not allowed[n.index]):
            continue
        cap = room_for(n, pod)
        if cap > 0:
            out.append((n, cap))
    return out


def _room(pod: Pod, index: NodeIndex, region: bytearray | None) -> tuple[dict[int, int], int]:
    """(nodes per room above 0, the room in all) for pods of ``pod``'s shape in the region (None: everywhere, as
    the index keeps it)."""
    if region is None:
        rooms = index.rooms(pod)
        return rooms.nodes_by_room, rooms.total
    nodes_by_room: dict[int, int] = defaultdict(int)
    total = 0
    for _, c in node_caps(pod, index, region):
        nodes_by_room[c] += 1
        total += c
    return nodes_by_room, total


def _domains(index: NodeIndex, key: str, allowed: bytearray | None) -> dict[str, bytearray]:
    """The nodes of each domain of the label ``key`` that ``allowed`` lets in (domains left empty left out), in the
    index's order of domains. Only the nodes ``allowed`` sets are read (a region is a few nodes), where each domain's
    mask of every node was ANDed with it."""
    doms = index.domains(key)
    if allowed is None:
        return doms
    nodes, size = index.nodes, len(index.nodes)
    inside: dict[str, bytearray] = {}
    for i in _members(allowed):
        value = nodes[i].labels.get(key)
        if value is not None:
            mask = inside.get(value)
            if mask is None:
                mask = inside[value] = bytearray(size)
            mask[i] = 1
    return {value: inside[value] for value in doms if value in inside}


def linked(pods: list[Pod], index: NodeIndex) -> bool:
    """Whether where ``pods`` may go depends on the pods placed (inter-pod affinity: ``PodAffinity.concerns``): they
    are placed one at a time, each ``best_node`` choice seeing the ones before, with no count of room per node and no
    solver (which place pods of one shape by their room alone)."""
    return index.pod_affinity is not None and index.pod_affinity.concerns(pods)


def _homogeneous(pods: list[Pod]) -> bool:
    first = pods[0]
    return all((p.gpu_whole, p.cpu, p.mem, p.sig, p.frac_devices) ==
               (first.gpu_whole, first.cpu, first.mem, first.sig, first.frac_devices) for p in pods)


def alike(pods: list[Pod]) -> bool:
    """Pods of one shape with whole GPUs or none: ``fewest_nodes`` over their room decides whether they fit."""
    return _homogeneous(pods) and not pods[0].frac_devices


def place(pods: list[Pod], index: NodeIndex, spread: bool, topo: Topo | None, solver: str,
          time_limit: float, workers: int = 1, within: bytearray | None = None, bound: bool = True) -> GangPlan:
    """Find a placement for all of ``pods`` or report how far it got. ``within``: the nodes the job's
    required domain is already fixed to (its running pods are there). ``bound``: False where the caller reads the
    placements alone (``GangPlan.placed_max`` is then greedy's count only)."""
    if len(pods) == 1 and (topo is None or not (topo.required or topo.preferred)):
        # one pod, no domain to choose: the greedy choice is the plan (no bound, no solver, nothing to improve)
        choice = index.best_node(pods[0], spread, within)
        if choice is None:
            return GangPlan()
        return GangPlan([(pods[0], choice[0], choice[1])], placed_max=1, greedy_nodes=1)
    pods = _order(pods)
    result = GangPlan()
    regions: list[bytearray | None] = [None]
    if within is not None:
        regions = [within]
    elif topo and topo.required:
        doms = _domains(index, topo.required, None)
        if not doms:
            result.topology_failed = True
            return result
        regions = [doms[d] for d in _best_fit(pods, index, doms, spread, topo.required, None)]
    # as KAI tries the domains that could hold the whole job (plugins/topology/job_filtering.go,
    # getJobAllocatableDomains, sortDomainInfos): one of the preferred level in any required domain first
    passes = (True, False) if topo and topo.preferred and len(regions) > 1 else (None,)
    for preferred_only in passes:
        for region in regions:
            plan = _place_in(pods, index, spread, topo, solver, time_limit, workers, region, result, preferred_only,
                             bound)
            if plan is not None:
                result.placements = plan
                return result
    if topo and topo.required and within is None:
        # would it fit ignoring the required domain? then topology is the reason
        plain, _ = greedy(pods, index, spread, None)
        result.topology_failed = plain is not None
    return result


def _best_fit(pods: list[Pod], index: NodeIndex, doms: dict[str, bytearray], spread: bool, key: str,
              allowed: bytearray | None) -> list[str]:
    """Domains (``doms``: of the label ``key``, within ``allowed``) that could hold the whole gang, tightest first
    (most room first when spreading)."""
    need = len(pods)
    if _homogeneous(pods) and not pods[0].frac_devices:
        per: dict[str, int] = defaultdict(int)
        if allowed is None:  # every node of each domain: the sums the index keeps per label value
            per.update(index.rooms(pods[0]).by_label(index.nodes, key))
        else:
            rev = {i: name for name, mask in doms.items() for i in _members(mask)}
            for n, c in node_caps(pods[0], index, allowed):
                d = rev.get(n.index)
                if d is not None:
                    per[d] += c
        fitting = [d for d in doms if per[d] >= need]
        return sorted(fitting, key=lambda d: (-per[d] if spread else per[d], d))
    idle: dict[str, int] = defaultdict(int)
    for name, mask in doms.items():
        idle[name] = sum(index.nodes[i].idle for i in _members(mask))
    return sorted(doms, key=lambda d: (-idle[d] if spread else idle[d], d))


def _members(mask: bytearray) -> Iterator[int]:
    """The node indexes a mask sets, found at C speed (a domain's mask is mostly zeros: one pass per domain over
    every node in Python made ``_best_fit`` cost domains times nodes)."""
    i = mask.find(1)
    while i != -1:
        yield i
        i = mask.find(1, i + 1)


def _place_in(pods: list[Pod], index: NodeIndex, spread: bool, topo: Topo | None, solver: str,
              time_limit: float, workers: int, region: bytearray | None, result: GangPlan,
              preferred_only: bool | None = None, bound: bool = True) -> Placements | None:
    """The gang in ``region``: inside one domain of the preferred level where one can hold it, else anywhere in the
    region. ``preferred_only``: True, the first alone; False, the second alone; None, both."""
    need = len(pods)
    tied = linked(pods, index)
    homogeneous = alike(pods) and not tied
    # one pod: greedy finds a node iff one has room, and no solver runs; the count would only repeat it
    room = _room(pods[0], index, region) if homogeneous and need > 1 and (bound or solver == "cpsat") else None
    if room is not None and fewest_nodes(room[0], need) is None:
        result.placed_max = max(result.placed_max, min(need, room[1]))
        return None  # not even the free capacity of every node together would do
    use_solver = solver == "cpsat" and not spread and all(not p.frac_devices for p in pods) and need > 1 and not tied
    preferred = topo.preferred if topo else None
    if preferred and preferred_only is not False:
        doms = _domains(index, preferred, region)
        for d in _best_fit(pods, index, doms, spread, preferred, region):
            plan = _improve(pods, index, spread, doms[d], use_solver, time_limit, workers, result)
            if plan is not None:
                return plan
    if preferred_only:
        return None
    tiers = preferred_tiers(pods, index, region, preferred, topo.levels) if preferred and topo else None
    return _improve(pods, index, spread, region, use_solver, time_limit, workers, result, preferred, room, tiers)


def _improve(pods: list[Pod], index: NodeIndex, spread: bool, region: bytearray | None, use_solver: bool,
             time_limit: float, workers: int, result: GangPlan, preferred: str | None = None,
             room: tuple[dict[int, int], int] | None = None,
             tiers: list[bytearray] | None = None) -> Placements | None:
    """Greedy in the region (``tiers``: tier by tier, ``tiered``); CP-SAT when greedy fails or uses more nodes (or
    domains) than needed."""
    plan, placed = tiered(pods, index, spread, tiers) if tiers else greedy(pods, index, spread, region)
    result.placed_max = max(result.placed_max, placed)
    if plan is not None:
        result.greedy_nodes = len({n.name for _, n, _ in plan})
    if not use_solver:
        return plan
    homogeneous = _homogeneous(pods)
    if room is None and homogeneous:
        room = _room(pods[0], index, region)
    if plan is not None:
        used = len({n.name for _, n, _ in plan})
        bound = fewest_nodes(room[0], len(pods)) if room is not None else _gpu_bound(pods, index, region)
        poor = bound is not None and used > bound
        if preferred and not poor:
            poor = len({n.labels.get(preferred) for _, n, _ in plan}) > 1
        if not poor:
            return plan
        if room is not None and bound == 1:
            # one node holds the whole gang: the tightest such node is optimal, no search needed
            tightest = _tightest(pods[0], len(pods), index, region)
            single = realise([(p, tightest) for p in pods], index)
            if single is not None:
                result.method = "single-node"
                return single
            return plan
    if room is not None:
        # alike pods: the solver's optimum, worked out as a knapsack (``fewest``)
        sol = fewest_domains(pods, index, region, preferred)
        method = "knapsack"
    else:
        hint = [(p, n) for p, n, _ in plan] if plan else None
        sol, stats = solve_gang(pods, index, region, None, preferred, hint, time_limit, workers)
        result.solver_s += stats.wall_s
        result.solves += 1
        method = "cpsat"
    if sol is None:
        return plan
    if plan is not None:
        old_nodes = len({n.name for _, n, _ in plan})
        new_nodes = len({n.name for _, n in sol})
        better = new_nodes < old_nodes or (preferred is not None and len({n.labels.get(preferred) for _, n in sol})
                                           < len({n.labels.get(preferred) for _, n, _ in plan}))
        if not better:
            return plan
    out = realise(sol, index)
    if out is None:
        return plan
    result.method = method
    return out


def tiered(pods: list[Pod], index: NodeIndex, spread: bool, tiers: list[bytearray]) -> tuple[
        Placements | None, int]:
    """``_one_by_one`` with each pod's ``best_node`` taken in the first tier (``preferred_tiers``) where one fits:
    KAI's topology score above the other plugins' (scores.Topology). A tier where a pod found no node has none for
    the later pods of its shape (each placed pod only takes room), which skip it, unless inter-pod affinity ties
    them to the pods placed: tiers are scanned about once per pod, not per pod and tier."""
    tied = linked(pods, index)
    held = _held_for(pods, index) if not spread and pods[0].gpu_whole and _homogeneous(pods) and not tied else False
    if held is not False:
        # (``greedy``'s ``_fill``, tier by tier: the tiers hold other nodes, so what one took leaves the next as is)
        filled: Placements = []
        for tier in tiers:
            rest = pods[len(filled):]
            filled += _fill_held(rest, index, tier) if held else _fill_part(rest, index, tier)
            if len(filled) == len(pods):
                return filled, len(filled)
        return None, len(filled)
    return _in_tiers(pods, index, spread, tiers, tied)


def _in_tiers(pods: list[Pod], index: NodeIndex, spread: bool, tiers: Sequence[bytearray | None],
              tied: bool) -> tuple[Placements | None, int]:
    """One ``best_node`` choice per pod, in the first of ``tiers`` where one fits (``tiered``), each accounted in the
    index before the next and all undone; unless ``tied``, a pod skips the tiers where one of its shape found none."""
    plan: Placements = []
    ok = True
    last = len(pods) - 1
    start: dict[tuple[object, ...], int] = {}
    for k, pod in enumerate(pods):
        shape = None if tied else (pod.sig, pod.gpu_whole, pod.gpu_frac, pod.gpu_mem_mib, pod.frac_devices, pod.cpu,
                                   pod.mem)
        t = 0 if shape is None else start.get(shape, 0)
        choice = None
        while t < len(tiers):
            choice = index.best_node(pod, spread, tiers[t])
            if choice is not None:
                break
            t += 1
        if shape is not None:
            start[shape] = t
        if choice is None:
            ok = False
            break
        node, devs = choice
        plan.append((pod, node, devs))
        if k < last:
            index.assign(node, pod, devs)
    placed = len(plan)
    for pod, node, devs in reversed(plan[:last]):
        index.release(node, pod, devs, planning=True)
    return (plan if ok else None), placed


def _tightest(pod: Pod, need: int, index: NodeIndex, region: bytearray | None) -> Node:
    """The node with the fewest idle GPUs, then the first by name, that has room for ``need`` pods of ``pod``'s
    shape (one exists): whole-GPU pods look only at the nodes with at least ``need`` times their GPUs idle, fewest
    first, straight from the index's buckets, and stop at the first that qualifies where index order is name order
    (``NodeIndex.by_name``)."""
    if not pod.gpu_whole:
        caps = node_caps(pod, index, region)
        return min((c for c in caps if c[1] >= need), key=lambda c: (c[0].idle, c[0].name))[0]
    mask, nodes = index.static_mask(pod), index.nodes
    for k in range(pod.gpu_whole * need, index.max_gpus + 1):
        if index.by_name:  # a bucket lists its nodes by index, which is name order: the first that qualifies
            for i in index.buckets[k]:
                if mask[i] and (region is None or region[i]) and room_for(nodes[i], pod) >= need:
                    return nodes[i]
            continue
        best: Node | None = None
        for i in index.buckets[k]:
            n = nodes[i]
            if mask[i] and (region is None or region[i]) and (best is None or n.name < best.name) and \
                    room_for(n, pod) >= need:
                best = n
        if best is not None:
            return best
    raise AssertionError(f"no node has room for {need} pods the bound said one node holds")


def realise(sol: list[tuple[Pod, Node]], index: NodeIndex) -> Placements | None:
    """Choose devices for a node-level solution; None if a pod does not fit after all."""
    out: Placements = []
    ok = True
    for pod, node in sol:
        devs = index.devices_for(node, pod)
        if devs is None:
            ok = False
            break
        index.assign(node, pod, devs)
        out.append((pod, node, devs))
    for pod, node, devs in reversed(out):
        index.release(node, pod, devs, planning=True)
    return out if ok else None


def _gpu_bound(pods: list[Pod], index: NodeIndex, region: bytearray | None) -> int | None:
    gpus = sum(p.gpu_whole for p in pods)
    if not gpus:
        return 1
    mask = index.static_mask(pods[0])
    free = sorted((n.idle for n in index.nodes if mask[n.index] and (region is None or region[n.index])),
                  reverse=True)
    count = 0
    for f in free:
        if gpus <= 0:
            break
        gpus -= f
        count += 1
    return count if gpus <= 0 else None


@dataclass(slots=True)
class Nest:
    """A sub-group with a topology constraint of its own, for placement (KAI's hierarchical topology,
    actions/common/allocate.go allocateSubGroupSet at d5bc503a): its pods go inside the domain its parent's are placed
    in, by its own constraint. ``children``: the constrained sub-groups below it (nearest first), placed first, one
    after the other; ``pods``: the batch's pods whose nearest constrained sub-group it is; ``fixed``: the domain of its
    required level its running pods already hold (the nodes of that domain), if any."""

    topo: Topo | None
    children: list[Nest] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    fixed: bytearray | None = None
    above: tuple[str, ...] = ()  # the levels above the preferred one, up to the required one, nearest first

    def all_pods(self) -> list[Pod]:
        return [*(p for ch in self.children for p in ch.all_pods()), *self.pods]


def place_nested(nest: Nest, index: NodeIndex, spread: bool, solver: str, time_limit: float, workers: int = 1,
                 within: bytearray | None = None) -> GangPlan:
    """``place`` for a job whose sub-groups carry their own topology constraints (``nest``: the job's, its root).
    Each group is tried in its candidate domains in turn (``_candidates``: those of its required level, and inside
    each first those of its preferred level); inside one, its constrained sub-groups are placed first, each in its
    own candidates inside it, then its other pods, each step accounted in the index before the next and all undone
    at the end. ``within``: the job's required domain where its running pods fix it."""
    result = GangPlan()
    plan = _nest_in(nest, index, spread, solver, time_limit, workers, within, result, root=True)
    if plan is not None:
        result.placements = plan
        return result
    if _any_required(nest):
        plain, _ = greedy(_order(nest.all_pods()), index, spread, None)
        result.topology_failed = plain is not None
    return result


def _any_required(nest: Nest) -> bool:
    return bool(nest.topo and nest.topo.required) or any(_any_required(ch) for ch in nest.children)


def _candidates(nest: Nest, index: NodeIndex, spread: bool, region: bytearray | None,
                root: bool) -> list[bytearray | None]:
    """Where a group may go inside ``region``: each domain of its required level there (its running pods' one
    where they fix it; best fit first), and inside each first every domain of its preferred level (best fit), then
    those of each level above it (``above``, as KAI's getJobAllocatableDomains walks from the preferred level up),
    then the domain itself; without a required level the region itself, after those."""
    topo = nest.topo
    pods = _order(nest.all_pods())
    outer: list[bytearray | None] = [region]
    if topo and topo.required and not (root and region is not None):
        doms = _domains(index, topo.required, region)
        fixed = nest.fixed
        if fixed is not None:  # (its running pods' domain: the one that holds them)
            doms = {d: m for d, m in doms.items() if any(m[i] for i in _members(fixed))}
        outer = [doms[d] for d in _best_fit(pods, index, doms, spread, topo.required, region)]
    out: list[bytearray | None] = []
    for r in outer:
        if topo and topo.preferred:
            for key in (topo.preferred, *nest.above):
                doms = _domains(index, key, r)
                out.extend(doms[d] for d in _best_fit(pods, index, doms, spread, key, r))
        out.append(r)
    return out


def _nest_in(nest: Nest, index: NodeIndex, spread: bool, solver: str, time_limit: float, workers: int,
             region: bytearray | None, result: GangPlan, root: bool = False) -> Placements | None:
    """The group's pods in one of its candidate domains inside ``region``, or None."""
    preferred = nest.topo.preferred if nest.topo else None
    for cand in _candidates(nest, index, spread, region, root):
        plan: Placements = []
        ok = True
        for child in nest.children:
            if not child.all_pods():
                continue  # (none of its pods waits)
            part = _nest_in(child, index, spread, solver, time_limit, workers, cand, result)
            if part is None:
                result.placed_max = max(result.placed_max, len(plan))
                ok = False
                break
            for pod, node, devs in part:
                index.assign(node, pod, devs)
            plan.extend(part)
        if ok and nest.pods:
            own = place(nest.pods, index, spread, Topo(None, preferred, nest.topo.levels if nest.topo else ()), solver,
                        time_limit, workers, within=cand)
            result.solver_s += own.solver_s
            result.solves += own.solves
            result.placed_max = max(result.placed_max, len(plan) + own.placed_max)
            ok = bool(own.placements)
            plan.extend(own.placements)
            own_done = own.placements
        else:
            own_done = []
        for pod, node, devs in reversed(plan[:len(plan) - len(own_done)]):
            index.release(node, pod, devs, planning=True)
        if ok:
            return plan
    return None
