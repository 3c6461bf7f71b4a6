"""Victims: the pods that are evicted together (eviction units), their cost, and the CP-SAT search for the
cheapest set of units that makes room for a pending job.

A job's running pods leave in KAI's order (``gangs.eviction_batches``): each pod above its pod set's minimum
on its own, then the rest of the gang together; a later unit of a job is only evicted with the ones before
it. Cost, compared lexicographically (issue 3): the highest priority level hit (elastic pods below their
job's core), then GPUs evicted, then running time lost, then pods. KAI's own order of victims (``order``)
finds the first set that works; CP-SAT then looks for a cheaper one, which must pass the same checks.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kaid.actions import gangs
from kaid.actions.session import Session
from kaid.model.objects import Budget, Job, Node, Pod, Queue
from kaid.placement import gang
from kaid.placement.index import Devices

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

Placements = list[tuple[Pod, Node, Devices]]
Cost = tuple[int, int, float, int]


@dataclass(slots=True)
class Unit:
    """Pods that are evicted together: one elastic pod, a surplus sub-group, or the rest of a gang."""

    job: Job
    pods: list[Pod]
    elastic: bool
    queue: Queue
    gpu: int = 0  # milli-GPU
    cpu: int = 0  # millicores
    mem: int = 0  # bytes
    runtime: float = 0.0  # seconds the pods have run, summed
    level: int = 0  # cost rank: (priority, core after elastic) ascending
    prev: int | None = None  # index of the job's unit that must go before this one

    @property
    def vector(self) -> tuple[int, int, int]:
        return (self.gpu, self.cpu, self.mem)


@dataclass(slots=True)
class Constraint:
    """At most ``cap`` of a resource (milli-GPU, or millicores for cpu work) may be freed from these units."""

    units: list[int]
    cap: int
    queue: str
    gpu: bool = True

    def amount(self, u: Unit) -> int:
        return u.gpu if self.gpu else u.cpu


@dataclass
class Search:
    units: list[Unit]
    fair: list[Constraint] = field(default_factory=list)
    budgets: list[tuple[Budget, list[int], int]] = field(default_factory=list)  # (pdb, unit ids, pods each)
    home: dict[int, str] = field(default_factory=dict)  # id(pod) -> the node it runs on before the search

    def __post_init__(self) -> None:
        self.home = {id(p): p.node or "" for u in self.units for p in u.pods}

    def cost(self, chosen: list[int]) -> Cost:
        return cost([self.units[i] for i in chosen])


def cost(units: list[Unit]) -> Cost:
    """The victim order of issue 3: highest cost level, then GPUs, then running time lost, then pods."""
    return (max((u.level for u in units), default=-1), sum(u.gpu for u in units), sum(u.runtime for u in units),
            sum(len(u.pods) for u in units))


def running(job: Job) -> list[Pod]:
    return [p for p in job.pods if p.status in ("Running", "Bound") and not p.releasing]


def units_of(job: Job, queue: Queue, now: float, min_runtime: float) -> tuple[list[Unit], int]:
    """Eviction units of a running job, in the order they go; the second value counts pods protected by min
    runtime (a protected job may only lose its elastic pods)."""
    alive = running(job)
    if not alive:
        return [], 0
    batches = gangs.eviction_batches(job, alive)
    young = [p for p in alive if min_runtime > 0 and now - p.started < min_runtime]
    protected = 0
    if young:
        protected = len(batches[-1])
        batches = batches[:-1]
    out = [_unit(job, pods, k < len(batches) - 1 or bool(young), queue, now) for k, pods in enumerate(batches)]
    return out, protected


def _unit(job: Job, pods: list[Pod], elastic: bool, queue: Queue, now: float) -> Unit:
    u = Unit(job, pods, elastic, queue)
    u.gpu = sum(p.gpu_milli_on(None) if not p.gpu_whole else p.gpu_whole * 1000 for p in pods)
    u.cpu = sum(p.cpu for p in pods)
    u.mem = sum(p.mem for p in pods)
    u.runtime = sum(max(0.0, now - p.started) for p in pods)
    return u


def part_of(unit: Unit, pods: list[Pod]) -> Unit:
    """Some of a unit's pods, as a unit of their own (same cost level)."""
    part = _unit(unit.job, pods, unit.elastic, unit.queue, 0.0)
    part.runtime = unit.runtime * len(pods) / len(unit.pods)
    part.level = unit.level
    return part


def link(units: list[Unit]) -> None:
    """Rank the units by cost level and chain each job's units in their order."""
    levels = sorted({(u.job.priority, 0 if u.elastic else 1) for u in units})
    where = {lv: i for i, lv in enumerate(levels)}
    last: dict[str, int] = {}
    for i, u in enumerate(units):
        u.level = where[(u.job.priority, 0 if u.elastic else 1)]
        u.prev = last.get(u.job.key)
        last[u.job.key] = i


def _matches(budget: Budget, pod: Pod) -> bool:
    if budget.namespace != pod.namespace:
        return False
    labels = budget.selector.get("matchLabels") or {}
    if any(pod.labels.get(k) != v for k, v in labels.items()):
        return False
    for expr in budget.selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in pod.labels
        if (op == "In" and (not present or pod.labels[key] not in values)) or \
                (op == "NotIn" and present and pod.labels[key] in values) or \
                (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return bool(labels or budget.selector.get("matchExpressions"))


def add_budgets(search: Search, budgets: list[Budget]) -> None:
    for b in budgets:
        ids = [i for i, u in enumerate(search.units) if any(_matches(b, p) for p in u.pods)]
        if ids:
            search.budgets.append((b, ids, 0))


def budget_ok(search: Search, chosen: set[int]) -> bool:
    for b, ids, _ in search.budgets:
        pods = sum(sum(1 for p in search.units[i].pods if _matches(b, p)) for i in ids if i in chosen)
        if pods > b.disruptions_allowed:
            return False
    return True


def fair_ok(search: Search, chosen: set[int]) -> bool:
    return all(sum(c.amount(search.units[i]) for i in c.units if i in chosen) <= c.cap for c in search.fair)


# ----------------------------------------------------------------------------------------- CP-SAT
def solve(session: Session, pods: list[Pod], search: Search, time_limit: float, workers: int = 1,
          hint: list[int] | None = None, keep_nodes: set[str] | None = None) -> tuple[list[int], dict[str, int]] | None:
    """Victim units and pods per node for a job of identical whole-GPU or cpu pods, or None."""
    from ortools.sat.python import cp_model  # imported on first use: it takes a while
    index = session.index
    rep = pods[0]
    need = len(pods)
    mask = index.static_mask(rep)
    units = search.units
    # what each unit frees on each node
    per_node: dict[int, list[int]] = defaultdict(list)
    pods_at: dict[tuple[int, int], list[Pod]] = defaultdict(list)  # (unit, node) -> its pods there
    for i, u in enumerate(units):
        for p in u.pods:
            n = session.snap.node_by_name.get(p.node or "")
            if n is not None and mask[n.index]:
                if not pods_at[(i, n.index)]:
                    per_node[n.index].append(i)
                pods_at[(i, n.index)].append(p)
    candidates: list[Node] = []
    for n in index.nodes:
        if not mask[n.index]:
            continue
        if _cap_now(n, rep) > 0 or (n.index in per_node and _cap_freed(n, rep, [
                q for i in per_node[n.index] for q in pods_at[(i, n.index)]]) > 0):
            candidates.append(n)
    if not candidates:
        return None
    full = {n.index: _cap_freed(n, rep, [q for i in per_node.get(n.index, []) for q in pods_at[(i, n.index)]])
            for n in candidates}
    if sum(full.values()) < need:
        return None  # even every candidate evicted would not make room: no search
    # keep the model small: the nodes where room is cheapest, enough of them to leave the solver a choice
    def cheapness(n: Node) -> tuple[int, int, str]:
        """What making room for one pod on this node costs: the cost level and GPUs of the cheapest victims."""
        if _cap_now(n, rep) > 0:
            return (-1, 0, n.name)
        victims = sorted(per_node.get(n.index, []), key=lambda i: (units[i].level, units[i].gpu))
        taken: list[Pod] = []
        for k, i in enumerate(victims):
            taken += pods_at[(i, n.index)]
            if _cap_freed(n, rep, taken) > 0:
                return (max(units[j].level for j in victims[: k + 1]), sum(units[j].gpu for j in victims[: k + 1]),
                        n.name)
        return (1 << 30, 0, n.name)

    must = keep_nodes or set()
    candidates.sort(key=cheapness)
    kept: list[Node] = [n for n in candidates if n.name in must]
    room = sum(full[n.index] for n in kept)
    for n in candidates:
        if room >= 20 * need + 16 and len(kept) >= 400:
            break
        if n.name in must:
            continue
        kept.append(n)
        room += full[n.index]
    candidates = kept
    on_kept = {i for n in candidates for i in per_node.get(n.index, [])}
    for i in sorted(on_kept, reverse=True):  # a unit is only evicted after the job's units before it
        j = units[i].prev
        while j is not None:
            on_kept.add(j)
            j = units[j].prev
    shared_on: dict[tuple[str, int], int] = defaultdict(int)
    if rep.gpu_whole:
        victim_nodes = {index.nodes[i].name for i in per_node}
        for p in session.snap.pods:
            if p.frac_devices and p.node in victim_nodes and p.active and p.status != "Evicted":
                for d in p.devices:
                    shared_on[(p.node, d)] += 1
    model = cp_model.CpModel()
    e = [model.new_bool_var(f"e{i}") if i in on_kept else model.new_constant(0) for i in range(len(units))]
    for i, u in enumerate(units):
        if u.prev is not None:
            model.add_implication(e[i], e[u.prev])
    x: dict[str, cp_model.IntVar] = {}
    for n in candidates:
        victims = per_node.get(n.index, [])
        here = {i: pods_at[(i, n.index)] for i in victims}
        freed_cpu = {i: sum(p.cpu for p in here[i]) for i in victims}
        freed_mem = {i: sum(p.mem for p in here[i]) for i in victims}
        freed_pods = {i: len(here[i]) for i in victims}
        whole = {i: sum(p.gpu_whole for p in here[i]) for i in victims}
        # shared devices: free only when every pod on the device is a victim
        shared_terms = []
        if rep.gpu_whole:
            holders: dict[int, list[int]] = defaultdict(list)
            for i in victims:
                for p in here[i]:
                    if p.frac_devices:
                        for d in p.devices:
                            holders[d].append(i)
            for d, ids in holders.items():
                if shared_on[(n.name, d)] != sum(1 for i in set(ids) for p in here[i] if d in p.devices):
                    continue
                s = model.new_bool_var(f"s{n.index}_{d}")
                for i in set(ids):
                    model.add_implication(s, e[i])
                shared_terms.append(s)
        top = max(0, n.alloc_pods - n.used_pods + sum(freed_pods.values()))
        xn = model.new_int_var(0, min(need, top), f"x{n.index}")
        x[n.name] = xn
        if rep.gpu_whole:
            model.add(xn * rep.gpu_whole <= n.idle + sum(whole[i] * e[i] for i in victims) + sum(shared_terms))
        if rep.cpu:
            model.add(xn * rep.cpu <= n.free_cpu + sum(freed_cpu[i] * e[i] for i in victims))
        if rep.mem:
            model.add(xn * rep.mem <= n.free_mem + sum(freed_mem[i] * e[i] for i in victims))
        model.add(xn <= n.free_pods + sum(freed_pods[i] * e[i] for i in victims))
    model.add(sum(x.values()) == need)
    for i in hint or []:
        if i in on_kept:
            model.add_hint(e[i], 1)
    for c in search.fair:
        model.add(sum(c.amount(units[i]) * e[i] for i in c.units) <= c.cap)
    for b, ids, _ in search.budgets:
        model.add(sum(sum(1 for p in units[i].pods if _matches(b, p)) * e[i] for i in ids) <= b.disruptions_allowed)
    solver = cp_model.CpSolver()
    solver.parameters.max_deterministic_time = time_limit
    solver.parameters.max_time_in_seconds = time_limit * 4
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 7
    levels = {u.level for u in units}
    if len(levels) > 1:
        # stage 1: the highest cost level evicted, as low as possible
        top_level = model.new_int_var(0, max(levels), "top")
        for i, u in enumerate(units):
            model.add(top_level >= u.level * e[i])
        model.minimize(top_level)
        status = solver.solve(model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        model.add(top_level <= int(solver.value(top_level)))
        model.clear_hints()  # type: ignore[no-untyped-call]
        for i in range(len(units)):
            model.add_hint(e[i], int(solver.value(e[i])))
        for xn in x.values():
            model.add_hint(xn, int(solver.value(xn)))
    # stage 2: then fewer low levels, GPUs, runtime, pods (weights keep the order lexicographic)
    w_pods = 1
    w_run = w_pods * (sum(len(u.pods) for u in units) + 1)
    runtime_min = [min(10**6, int(u.runtime // 60)) for u in units]
    w_gpu = w_run * (sum(runtime_min) + 1)
    gpu_tenths = [u.gpu // 100 for u in units]
    w_level = w_gpu * (sum(gpu_tenths) + 1)
    model.minimize(sum(e[i] * (u.level * w_level + gpu_tenths[i] * w_gpu + runtime_min[i] * w_run + len(u.pods))
                       for i, u in enumerate(units)))
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    chosen = [i for i in range(len(units)) if solver.value(e[i])]
    counts = {name: int(solver.value(xn)) for name, xn in x.items() if solver.value(xn)}
    return chosen, counts


def _cap_freed(n: Node, pod: Pod, victims: list[Pod]) -> int:
    """Pods of this shape the node could take if all these victims left (shared GPUs counted whole)."""
    cap = n.alloc_pods - n.used_pods + len(victims)
    if pod.gpu_whole:
        freed = sum(p.gpu_whole for p in victims) + len({d for p in victims if p.frac_devices for d in p.devices})
        cap = min(cap, (n.idle + freed) // pod.gpu_whole)
    if pod.cpu:
        cap = min(cap, (n.free_cpu + sum(p.cpu for p in victims)) // pod.cpu)
    if pod.mem:
        cap = min(cap, (n.free_mem + sum(p.mem for p in victims)) // pod.mem)
    return max(0, cap)


def _cap_now(n: Node, pod: Pod) -> int:
    cap = n.alloc_pods - n.used_pods
    if pod.gpu_whole:
        cap = min(cap, n.idle // pod.gpu_whole)
    if pod.cpu:
        cap = min(cap, n.free_cpu // pod.cpu)
    if pod.mem:
        cap = min(cap, n.free_mem // pod.mem)
    return cap


def realise(session: Session, pods: list[Pod], counts: dict[str, int]) -> Placements | None:
    """Devices for the pending pods on the nodes the solver chose, after the evictions."""
    if sum(counts.values()) != len(pods):
        return None
    queue = iter(pods)
    wanted = [(next(queue), session.snap.node_by_name[name]) for name in sorted(counts) for _ in range(counts[name])]
    return gang.realise(wanted, session.index)
