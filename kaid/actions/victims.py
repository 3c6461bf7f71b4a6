"""Victims: the pods that are evicted together (eviction units) and their cost (``victim_solver`` searches for
the cheapest set of units that makes room for a pending job).

A job's running pods leave in KAI's order (``gangs.eviction_batches``): each pod above its pod set's minimum
on its own, then the rest of the gang together; a later unit of a job is only evicted with the ones before
it. Cost, compared lexicographically: the highest priority level hit (elastic pods below their job's core),
then what the evictions destroy, the GPU-seconds of progress since each victim pod started (issue 15: every
GPU evicted is placed again, so the GPUs evicted say little; a young job costs less than an old one of the same
size, and a gang's core costs its whole job's progress), then GPUs, then pods. KAI's own order of victims (``order``)
finds the first set that works; CP-SAT then looks for a cheaper one, which must pass the same checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kaid.actions import gangs
from kaid.api.constants import PIPELINED_NODE_ANNOTATION
from kaid.model.objects import Budget, Job, Node, Pod, Queue
from kaid.model.vocabulary import EVICTABLE, PodPhase, PodStatus
from kaid.placement.index import Devices

Placements = list[tuple[Pod, Node, Devices]]
Cost = tuple[int, float, int, int]


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
    lost: float = 0.0  # GPU-seconds of progress the pods have made (each pod's GPUs times its running time), summed
    at: float = 0.0  # the clock ``lost`` was measured at
    level: int = 0  # cost rank: (priority, core after elastic) ascending
    prev: int | None = None  # index of the job's unit that must go before this one
    # ``by_node.GpuRoom.of``'s answer for the unit and the node mask it was worked out with (a unit stands while no
    # operation touches its job, so its pods stay on their nodes: the census of every vain check read them again)
    cells: list[tuple[int, int]] | None = None
    cells_mask: object = None


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
    """The candidates' eviction units in KAI's victim order. ``more`` draws the rest one at a time (``unit``):
    first-fit reads them in order and most searches end within their scenario budget long before the last one;
    the solver and the explanations need them all (``whole``)."""

    units: list[Unit]
    fair: list[Constraint] = field(default_factory=list)
    budgets: list[tuple[Budget, list[int], int]] = field(default_factory=list)  # (pdb, unit ids, pods each)
    home: dict[int, str] = field(default_factory=dict)  # id(pod) -> the node it runs on before the search
    more: Iterator[Unit] | None = None  # the units not drawn yet, in order
    guards: list[Budget] = field(default_factory=list)  # the budgets to check while drawing
    # the units ``more`` has not drawn yet, in no set order (``draw_rest``): without the victim order's pops
    rest: Callable[[], Iterator[Unit]] | None = None
    # every unit the search may draw, in no set order, without drawing them (``by_node.vain``)
    census: Callable[[], Iterator[Unit]] | None = None
    whole: bool = False  # every unit drawn, ranked (``link``) and bounded (``evictions._whole``)
    # how many units ``draw_rest`` would draw, without drawing them (``evictions._explain``)
    count_rest: Callable[[], int] | None = None
    counted: int | None = None  # every unit's count, where ``count_rest`` told it instead of a draw (``count``)
    _last: dict[str, int] = field(default_factory=dict)  # job key -> index of its last unit drawn
    job_nodes: dict[str, list[str]] = field(default_factory=dict)  # job key -> ``by_node._job_nodes`` of the job

    def __post_init__(self) -> None:
        self.home = {id(p): p.node or "" for u in self.units for p in u.pods}

    def unit(self, i: int) -> Unit | None:
        """The ``i``-th unit, drawn as far as needed (its ``prev`` and the budgets over it as ``link`` and
        ``add_budgets`` set them); None when there are no more."""
        while i >= len(self.units) and self.more is not None:
            u = next(self.more, None)
            if u is None:
                self.more = None
                break
            at = len(self.units)
            u.prev = self._last.get(u.job.key)
            self._last[u.job.key] = at
            self.units.append(u)
            for p in u.pods:
                self.home[id(p)] = p.node or ""
            for b in self.guards:
                if any(b.covers(p) for p in u.pods):
                    entry = next((e for e in self.budgets if e[0] is b), None)
                    if entry is None:
                        self.budgets.append((b, [at], 0))
                    else:
                        entry[1].append(at)
        return self.units[i] if i < len(self.units) else None

    def draw_all(self) -> None:
        while self.unit(len(self.units)) is not None:
            pass

    def draw_rest(self) -> None:
        """Every unit drawn, those not drawn yet in no set order (each job's own in order): for a search that found
        nothing, whose units its explanation only counts, with the budgets over them (``rest``; KAI's victim order
        popped once per candidate job of the cluster)."""
        if self.more is not None and self.rest is not None:
            self.more = self.rest()
        self.draw_all()

    def count(self) -> int:
        """How many units the search has in all: those drawn, or the count ``count_rest`` told (``counted``)."""
        return len(self.units) if self.counted is None else self.counted

    def cost(self, chosen: list[int]) -> Cost:
        return cost([self.units[i] for i in chosen])


def cost(units: list[Unit]) -> Cost:
    """The victim order: highest cost level, then GPU-seconds of progress lost, then GPUs, then pods."""
    return (max((u.level for u in units), default=-1), sum(u.lost for u in units), sum(u.gpu for u in units),
            sum(len(u.pods) for u in units))


def running(job: Job) -> list[Pod]:
    """The job's pods an eviction can take (``takes``): on a node, or placed earlier in this cycle."""
    return [p for p in job.pods if takes(p)]


def takes(p: Pod) -> bool:
    """Whether an eviction can take the pod: ``EVICTABLE`` and not on its way out, or pipelined in this cycle (KAI
    evicts any active allocated task, Pipelined ones too: ``pod_status.go``'s ``activeAllocatedStatuses``,
    ``podgroup_info/eviction_info.go``): onto resources being freed, or moved there. Not one pipelined before this
    cycle (``persisted``): its mark would stay on the pod."""
    status = p.status
    if status == _PIPELINED:
        return not p.releasing and not persisted(p)
    return status in EVICTABLE and not p.releasing


def persisted(p: Pod) -> bool:
    """Whether a pipelined pod was pipelined before this cycle: its object carries the mark (a pod pipelined in this
    cycle is read from an object without it)."""
    raw = p.raw
    anns = (raw.get("metadata") or {}).get("annotations") if raw is not None else None
    return isinstance(anns, dict) and PIPELINED_NODE_ANNOTATION in anns


def units_of(job: Job, queue: Queue, now: float, min_runtime: float) -> tuple[list[Unit], int]:
    """Eviction units of a running job, in the order they go; the second value counts pods protected by min
    runtime. A protected job, or one with pods pipelined before this cycle (its pods an eviction can take are not
    the whole gang), may only lose its elastic pods."""
    alive, moving = _alive(job)
    if not alive:
        return [], 0
    batches = gangs.eviction_batches(job, alive)
    young = min_runtime > 0 and any(now - p.started < min_runtime for p in alive)
    protected = len(batches[-1]) if young else 0
    if young or moving:
        batches = batches[:-1]
    out = [_unit(job, pods, k < len(batches) - 1 or bool(young) or moving, queue, now)
           for k, pods in enumerate(batches)]
    return out, protected


def _alive(job: Job) -> tuple[list[Pod], bool]:
    """``running(job)``, and whether a pod of the job was pipelined before this cycle (``persisted``), in one pass over
    its pods (a vain search at 4,000 nodes counts 5,943 jobs; bench_victims makes 302 jobs' units a cycle)."""
    alive: list[Pod] = []
    moving = False
    for p in job.pods:
        status = p.status
        if status in EVICTABLE:  # ``takes``
            if not p.releasing:
                alive.append(p)
        elif status == _PIPELINED:
            if persisted(p):
                moving = True
            elif not p.releasing:
                alive.append(p)
    return alive, moving


def count_units(job: Job, queue: Queue, now: float, min_runtime: float,
                useful: Callable[[Pod], bool] | None = None) -> int:
    """``len(units_of(job, ...)[0])`` without making the units (nor sorting the pods where it can), less the last
    one where none of its pods is ``useful`` (the units a search draws of a job: ``evictions._search``); for a job
    with sub-groups, from the units themselves. A search that found nothing counts the units it has not drawn for
    its explanation (``Search.count_rest``): it made every candidate's units to count them."""
    alive, moving = _alive(job)
    if not alive:
        return 0
    if job.subgroups:
        units = units_of(job, queue, now, min_runtime)[0]
        return len(units) - (1 if units and useful is not None and not any(useful(p) for p in units[-1].pods) else 0)
    n, least = len(alive), job.min_member
    # ``gangs.eviction_batches`` of one pod set: ``elastic`` single pods (last in task order first), then the rest
    elastic = 0 if n < least else n - max(least, 0)
    batches = elastic + 1 if elastic < n else elastic
    cut = moving or (min_runtime > 0 and any(now - p.started < min_runtime for p in alive))
    count = batches - 1 if cut else batches  # (a protected or moving job keeps its last batch)
    if not count or useful is None:
        return count
    if n == 1:  # (most: one pod, the last unit's)
        return count if useful(alive[0]) else count - 1
    flags = [useful(p) for p in alive]
    if all(flags) or not any(flags):
        return count if flags[0] else count - 1
    ordered = sorted(alive, key=gangs.task_order_key(alive), reverse=True)
    last = ordered[count - 1:count] if cut or elastic == n else ordered[elastic:]
    return count if any(useful(p) for p in last) else count - 1


# (a member read through its enum class costs ``EnumType.__getattr__``: these are read per pod of each candidate)
_PIPELINED, _ALLOCATED = PodStatus.PIPELINED, PodStatus.ALLOCATED
_RUNNING_PHASE = PodPhase.RUNNING


def _unit(job: Job, pods: list[Pod], elastic: bool, queue: Queue, now: float) -> Unit:
    """The unit of ``pods``: what they hold, and the GPU-seconds of progress they made, summed in pod order: each
    pod's milli-GPUs (a gpu-memory pod's share unknown here: as one whole device's worth of none) times the seconds it
    ran (none for one this cycle placed: allocated, or pipelined from pending, it has not started). One pass over the
    pods (four sums and two calls per pod were half of ``units_of``)."""
    u = Unit(job, pods, elastic, queue)
    gpu = cpu = mem = 0
    made: list[float] = []
    for p in pods:
        g = p.gpu_milli_on(None) if not p.gpu_whole else p.gpu_whole * 1000
        gpu += g
        cpu += p.cpu
        mem += p.mem
        status = p.status
        if status == _ALLOCATED or (status == _PIPELINED and p.phase != _RUNNING_PHASE):
            made.append(g * 0.0)
        else:
            ran = now - p.started
            made.append(g * (ran if ran > 0.0 else 0.0))
    u.gpu, u.cpu, u.mem = gpu, cpu, mem
    u.lost = sum(made) / 1000  # (the sum of the same terms in the same order)
    u.at = now
    return u


def part_of(unit: Unit, pods: list[Pod]) -> Unit:
    """Some of a unit's pods, as a unit of their own (same cost level)."""
    part = _unit(unit.job, pods, unit.elastic, unit.queue, unit.at)
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


def add_budgets(search: Search, budgets: list[Budget]) -> None:
    for b in budgets:
        ids = [i for i, u in enumerate(search.units) if any(b.covers(p) for p in u.pods)]
        if ids:
            search.budgets.append((b, ids, 0))


def budget_ok(search: Search, chosen: set[int]) -> bool:
    for b, ids, _ in search.budgets:
        pods = sum(sum(1 for p in search.units[i].pods if b.covers(p)) for i in ids if i in chosen)
        if pods > b.disruptions_allowed:
            return False
    return True
