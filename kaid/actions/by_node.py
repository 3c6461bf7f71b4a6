"""KAI's victim search for reclaim and preempt (``job_solver.go``, ``pod_scenario_builder.go``, ``by_pod_solver.go``,
the generators ``plugins/nodelocalgreedy`` and ``plugins/multinodegang`` at d5bc503a).

- Generators (``solve``, KAI's ``SolveWithResult``): the node-local one (``_solve_partial``), then, where it found no
  solution, the multi-node one (``_solve_multi``, ``multi_node``), each from a fresh start (no recorded victims).
  A scenario that failed (its pending pods, recorded and potential victims: ``Fingerprint``) is not simulated again
  in the job's search, by either generator. kai's scenario budgets running out end the search (``_Exhausted``).
- Probes (``_solve_with``, ``max_solvable_k``): partial jobs of the job's first k pods (``gangs.tasks_to_allocate``),
  k = 1, 2, 4, ... up to the whole batch, then halving the gap between the last k solved and the first that failed.
  Each probe is solved from the session as the attempt found it, with the victims of the last solved probe (the
  recorded victims) evicted first, and undone; where some k was solved, a last probe of the whole batch is the answer.
- Scenarios: the candidates' eviction units are added one at a time in KAI's victim order (the potential victims);
  the first scenario of a partial job has only the recorded victims. A scenario that the GPUs could not make room in
  is skipped without a simulation (``GpuRoom``, a sound form of KAI's ``AccumulatedIdleGpus`` filter).
- Node-local: a scenario is simulated once per node of its newest victim's job (every pod of it, in name order,
  ``_job_nodes``): the recorded victims and the potential victims of the jobs with a unit on that node (all their
  units) are evicted, and only their jobs and the pending job are placed again, in allocate's order, on the
  feasible nodes: for a job of GPU pods the nodes with an idle or a releasing GPU when the attempt began, plus the
  nodes of the victims evicted (``feasible``). The first simulation
  in which the job is placed and the action's rules hold is the partial job's solution; one whose rules fail ends
  its scenario (kai's pre-April reading; KAI d5bc503a goes on with the next node's).
- Multi-node: sub-scenarios of the recorded victims and the units on the first k candidate nodes
  (``multi_node.sub_scenarios``); one whose rules fail is dropped and the next one tried.

So a simulation re-places the few victims of one node (node-local), where placing every accumulated victim again
in every scenario made a vain search quadratic in the victims it tried (issue 15).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from itertools import count
from typing import Protocol

from kaid.actions import multi_node
from kaid.actions.scenario import Attempt, Outcome, evict, simulate
from kaid.actions.session import Session, job_request
from kaid.actions.victims import Search, Unit, budget_ok
from kaid.model.objects import Job, Pod
from kaid.model.vocabulary import OpKind, PodStatus


class _Exhausted(Exception):
    """The scenario budget ran out: the search ends, no further generator (KAI's ``shouldStopSearch``)."""


Fingerprint = tuple[int, frozenset[int], frozenset[int]]


def solve(session: Session, att: Attempt, search: Search,
          valid: Callable[[Attempt, Outcome], bool]) -> tuple[list[int], Outcome] | None:
    """The units evicted for ``att``'s whole batch and the scenario that placed it (its operations in the session,
    started at ``Outcome.start``), or None with the session as it was. ``valid``: the action's rules for a scenario
    of a (partial) attempt. KAI's ``JobSolver.SolveWithResult``: each scenario generator in turn (node-local, then
    multi-node), each from a fresh state (no recorded victims); the failed scenarios are shared by both."""
    if len(att.batch) > 1 and vain(session, att, search):
        return None
    start = session.checkpoint()
    feasible = feasible_nodes(session, att)
    room = GpuRoom(session, att, search.home)
    failed: set[Fingerprint] = set()
    try:
        solved = _solve_with(session, att, search, valid, feasible, room, failed, _solve_partial, start)
        if solved is None:
            free = free_gpus(session)
            multi = partial(_solve_multi, free=free)
            solved = _solve_with(session, att, search, valid, feasible, room, failed, multi, start)
    except _Exhausted:
        session.rollback(start)
        return None
    return solved


class _Generator(Protocol):
    def __call__(self, session: Session, att: Attempt, search: Search, recorded: list[int],
                 feasible: bytearray | None, room: GpuRoom, valid: Callable[[Attempt, Outcome], bool],
                 failed: set[Fingerprint], k: int) -> tuple[list[int], Outcome] | None: ...


def _solve_with(session: Session, att: Attempt, search: Search, valid: Callable[[Attempt, Outcome], bool],
                feasible: bytearray | None, room: GpuRoom, failed: set[Fingerprint], generator: _Generator,
                start: int) -> tuple[list[int], Outcome] | None:
    """One generator's probes (``solvePendingJobWithGenerator``): the largest k whose first k pods it solves
    (``max_solvable_k``: each probe rolled back, a solved probe's victims the recorded victims of the probes after
    it), then, where some k was solved, the probe at the whole batch, which is the answer; None with the session at
    ``start`` otherwise."""
    recorded: list[int] = []
    last = len(att.batch)
    kept: tuple[list[int], Outcome] | None = None  # the probe of the whole batch, where it is the answer (``_same``)

    def partial_job(k: int) -> Attempt:
        return att if k == last else replace(att, batch=att.batch[:k], tasks=att.batch,
                                             request=job_request(att.batch[:k], session.small_ref))

    def probe(k: int) -> bool:
        nonlocal recorded, kept
        solved = generator(session, partial_job(k), search, recorded, feasible, room, valid, failed, k)
        if solved is None:
            session.rollback(start)
            return False
        units, outcome = solved
        recorded = _victims_of(search, units, outcome)
        if k == last and _same(recorded, units, failed, k):
            kept = solved
            return True
        session.rollback(kept_evictions(session, start, [search.units[i] for i in recorded]))
        return True

    if max_solvable_k(last, probe) == 0:
        return None
    solved = kept or generator(session, att, search, recorded, feasible, room, valid, failed, last)
    if solved is None:
        session.rollback(start)
        return None
    units, outcome = solved
    outcome.start = start
    evicted = {id(u) for u in outcome.evicted}
    return [i for i in units if id(search.units[i]) in evicted], outcome


def _same(victims: list[int], units: list[int], failed: set[Fingerprint], k: int) -> bool:
    """Whether the last probe (``probeAtK(n)``) would repeat the solved probe of the whole batch: every unit of its
    solution stayed a victim (``victims == units``, in order) and the scenario of those victims as the recorded ones
    did not fail before. The last probe then evicts them first and simulates them alone as its first scenario (both
    generators: past the GPU filter, which the same victims passed), from the same session (the probe's evictions
    in the same order: its recorded victims', then the rest's), so the same operations, and the action's rules hold
    for them as they did (``valid`` reads the outcome and the session only): kept, not undone and done again
    (bench_victims: 32 of a first-fit cycle's 108 simulations)."""
    return victims == units and (k, frozenset(victims), frozenset()) not in failed


def max_solvable_k(n: int, probe: Callable[[int], bool]) -> int:
    """KAI's ``searchMaxSolvableK``: probe k = 1, 2, 4, ... (the last one n) until one fails, then search between
    the last solved and the first failed k by halves; the largest k solved (0 if none)."""
    lo, hi, k = 0, 0, 1
    while True:
        if not probe(k):
            hi = k
            break
        lo = k
        if k == n:
            return n
        k = min(2 * k, n)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probe(mid):
            lo = mid
        else:
            hi = mid
    return lo


VAIN_DRAWS = 32  # units ``vain`` draws in the victim order before it counts the census, for a batch of
VAIN_BATCH = 16  # at most these many pods


def vain(session: Session, att: Attempt, search: Search) -> bool:
    """Whether the whole batch cannot be placed whatever the victims: the GPU bound (``GpuRoom``) with every unit of
    the search gone says no. Every scenario of the last partial job evicts some of them, so none gets past the bound
    and the search ends without a solution; answered before its partial jobs, it charges no scenario (the scenario
    budget is kai's own: docs/compatibility.md). bench_victims: reclaim-0000 (64 pods of 8 GPUs) in preempt, 33
    partial jobs.

    A tally only grows with the victims added (``Tally.add``), in any order, and the units drawn are some of the
    census's (those ``draw`` hands out: the same units, in KAI's victim order), so where the units drawn first make
    room the census does too. A batch of a few pods (``VAIN_BATCH``) asks the victim order first (``VAIN_DRAWS``
    units at most, then the census): a search that goes on to its probe of the whole batch draws those units anyway
    (that probe's tally of its recorded and potential victims, all drawn, makes room before any of its scenarios),
    where the census made every unit of the candidates it walked (bench_victims: each search of a batch of 2-8 pods
    got its answer within the first 27 units drawn, and drew at least as many; the census of those searches read
    115k opcodes of a first-fit cycle). A big batch needs many units: the census, cheaper per unit, answers it."""
    if search.census is None:
        return False
    if len(att.batch) <= VAIN_BATCH:
        room = GpuRoom(session, att, search.home)
        tally = room.tally(att, [])
        need = tally.need
        if tally.total >= need:
            return False
        units = search.units
        for i in range(len(units) + VAIN_DRAWS):
            unit = units[i] if i < len(units) else search.unit(i)
            if unit is None:  # every unit drawn: the census's
                return True
            tally.add(unit)
            if tally.total >= need:
                return False
    home: dict[int, str] = {}
    room = GpuRoom(session, att, home)
    tally = room.tally(att, [])
    need, kind, add = tally.need, room.kind, tally.add
    if tally.total >= need:
        return False
    for unit in search.census():
        if unit.cells_mask is not kind:  # (its cells not kept for this room: ``GpuRoom.of`` reads its pods' nodes)
            for p in unit.pods:
                home[id(p)] = p.node or ""
        add(unit)
        if tally.total >= need:
            return False
    return True


def evict_first(session: Session, att: Attempt, recorded: list[Unit]) -> None:
    """Evict the recorded victims before the partial job's simulations, once: each of them evicts them first
    (``scenario.evict`` skips a pod evicted already), and nothing between them reads their pods (drawing a unit
    reads the pods of the jobs it hands out, and theirs are handed out already), so they make the same operations in
    the same order as when each simulation evicted them and was rolled back (``kept_evictions``)."""
    evict(session, att, recorded)


def kept_evictions(session: Session, start: int, recorded: list[Unit]) -> int:
    """Where to roll the session back to after a partial job's solution: past the evictions it began with that the
    next partial job begins with too (``evict_first``: its recorded victims' pods, in their order), not before them;
    kept, they are the same operations in the same order, where they were undone and done again (bench_victims: the
    simulations evicted 2,626 pods, 1,870 of them those of the previous simulation's first evictions)."""
    ops = session.ops
    at = start
    for u in recorded:
        for p in u.pods:
            if at < len(ops) and ops[at].kind == OpKind.EVICT and ops[at].pod is p:
                at += 1
            else:
                return at
    return at


def _victims_of(search: Search, units: list[int], outcome: Outcome) -> list[int]:
    """The units of a partial job's solution that stay victims: evicted, or moved (KAI records its pipelined
    victims too)."""
    moved = {id(p) for p in outcome.moved}
    return [i for i in units if any(p.status == PodStatus.EVICTED or id(p) in moved for p in search.units[i].pods)]


def _solve_partial(session: Session, att: Attempt, search: Search, recorded: list[int], feasible: bytearray | None,
                   room: GpuRoom, valid: Callable[[Attempt, Outcome], bool], failed: set[Fingerprint],
                   k: int) -> tuple[list[int], Outcome] | None:
    """The node-local generator's probe at ``k`` (sg-nodelocalgreedy, ``plugins/nodelocalgreedy/generator.go``)."""
    units = search.units
    evict_first(session, att, [units[i] for i in recorded])
    base = room.tally(att, [units[i] for i in recorded])
    held = base.copy()  # the recorded victims' tally, which every simulation of the partial job begins with
    rec = frozenset(recorded)
    if recorded and base.enough() and (k, rec, frozenset()) not in failed:
        out = _simulate(session, att, search, [units[i] for i in recorded], feasible)
        if out is not None:
            return (recorded, out) if valid(att, out) else None
        failed.add((k, rec, frozenset()))
    chosen = set(recorded)
    potential: list[int] = []
    by_job: dict[str, list[int]] = {}  # job key -> its potential units
    on_node: dict[str, dict[str, None]] = {}  # node -> the jobs with a potential unit there, in the order added
    home, need, budgets = search.home, base.need, search.budgets
    for i in count():
        unit = units[i] if i < len(units) else search.unit(i)  # (those drawn: the list itself)
        if unit is None:
            return None
        if i in chosen or (unit.prev is not None and unit.prev not in chosen) or \
                (budgets and not budget_ok(search, {*chosen, i})):  # (the set made only where a budget reads it)
            continue
        chosen.add(i)
        potential.append(i)
        key = unit.job.key
        mine = by_job.get(key)
        if mine is None:
            by_job[key] = [i]
        else:
            mine.append(i)
        for p in unit.pods:
            on_node.setdefault(home[id(p)], {})[key] = None
        base.add(unit)
        if base.total < need:  # (``enough``)
            continue
        _charge_scenario(session)
        tried: set[tuple[int, ...]] = set()
        nodes = search.job_nodes.get(key)
        if nodes is None:  # (once per job and search: its pods not handed out stay where they are, and ``home`` holds
            # where those handed out were; a gang's nodes were read again for each of its units, in each probe)
            nodes = search.job_nodes[key] = _job_nodes(unit.job, home)
        for node in nodes:
            here = on_node.get(node)
            if not here:  # (no potential unit there)
                continue
            if len(here) == 1:  # (one job's units: ascending as added)
                (job,) = here
                these = by_job[job]
            else:
                these = sorted(i for job in here for i in by_job[job])
            if not first_time(tried, these):
                continue
            tally = held.copy()
            for j in these:
                tally.add(units[j])
            if tally.total < need:
                continue
            mark = (k, rec, frozenset(these))
            if mark in failed:
                continue
            victims = [units[j] for j in (*recorded, *these)]
            out = _simulate(session, att, search, victims, feasible)
            if out is None:
                failed.add(mark)
                continue
            if valid(att, out):
                return [*recorded, *these], out
            failed.add(mark)
            session.rollback(out.start)
            # KAI (d5bc503a): the job solver goes on with the next node's scenario (its fingerprint recorded)
    return None


def _job_nodes(job: Job, home: dict[int, str]) -> list[str]:
    """KAI's ``nodeNamesOfJob(LatestPotentialVictim())``: the nodes of every pod of the newest victim's job (the
    cluster's job, not only the unit added), in name order; a victim pod's node as the search began (``home``)."""
    return sorted({n for p in job.pods if (n := home.get(id(p), p.node or ""))})


def _charge_scenario(session: Session) -> None:
    """One accumulated scenario off kai's scenario budgets; none left ends the job's search (``_Exhausted``)."""
    if session.scenarios_left <= 0 or session.search_left <= 0:
        raise _Exhausted
    session.scenarios_left -= 1
    session.search_left -= 1


def _solve_multi(session: Session, att: Attempt, search: Search, recorded: list[int], feasible: bytearray | None,
                 room: GpuRoom, valid: Callable[[Attempt, Outcome], bool], failed: set[Fingerprint], k: int,
                 free: dict[str, int]) -> tuple[list[int], Outcome] | None:
    """The multi-node generator's probe at ``k`` (sg-multinodegang: ``GetValidScenario`` then ``GetNextScenario``,
    ``multi_node.sub_scenarios``): the recorded victims alone first, then for each accumulated scenario that passes
    the GPU filter the sub-scenarios over its first k candidate nodes. A sub-scenario the action's rules reject is
    dropped and the next one tried (KAI's portfolio goes on past a rejected scenario)."""
    units = search.units
    evict_first(session, att, [units[i] for i in recorded])
    base = room.tally(att, [units[i] for i in recorded])
    held = base.copy()
    rec = frozenset(recorded)
    home = search.home
    nodes = session.snap.node_by_name
    recorded_freed: dict[str, int] = {}
    for i in recorded:
        for p in units[i].pods:
            node = home[id(p)]
            if node:
                recorded_freed[node] = recorded_freed.get(node, 0) + p.gpu_milli_on(nodes.get(node))
    if feasible is None:
        region = list(nodes)
    else:
        all_nodes = session.index.nodes
        region = [all_nodes[i].name for i, on in enumerate(feasible) if on]
    region.extend(n for n in recorded_freed if n not in region)
    asks = [p.gpu_milli_on(None) for p in att.batch]
    demand, min_task = sum(asks), min(asks)

    def attempt(these: list[int]) -> tuple[list[int], Outcome] | None:
        mark = (k, rec, frozenset(these))
        if mark in failed or not (recorded or these):
            return None
        tally = held.copy()
        for j in these:
            tally.add(units[j])
        if not tally.enough():
            return None
        out = _simulate(session, att, search, [units[j] for j in (*recorded, *these)], feasible)
        if out is not None:
            if valid(att, out):
                return [*recorded, *these], out
            session.rollback(out.start)
        failed.add(mark)
        return None

    if base.enough():  # GetValidScenario: the recorded victims alone, where they pass the filter
        got = attempt([])
        if got is not None:
            return got
    chosen = set(recorded)
    potential: list[int] = []
    for i in count():
        unit = search.unit(i)
        if unit is None:
            return None
        if i in chosen or (unit.prev is not None and unit.prev not in chosen) or \
                (search.budgets and not budget_ok(search, {*chosen, i})):
            continue
        chosen.add(i)
        potential.append(i)
        base.add(unit)
        if not base.enough():
            continue
        _charge_scenario(session)
        shape = [[(home[id(p)], p.gpu_milli_on(nodes.get(home[id(p)]))) for p in units[j].pods] for j in potential]
        for picked in multi_node.sub_scenarios(shape, demand, min_task, free, recorded_freed, region):
            got = attempt(sorted(potential[b] for b in picked))
            if got is not None:
                return got
    return None


def free_gpus(session: Session) -> dict[str, int]:
    """Milli-GPUs idle or releasing per node, as the session holds them now (KAI's ``nodeIdleOrReleasingGpus``,
    read by the emitter from the session each probe starts from: the attempt's start)."""
    free: dict[str, int] = {}
    for node in session.index.nodes:
        idle = sum(1000 - used for used in node.dev_used)
        if idle:
            free[node.name] = idle
    for p in session.releasing():
        on = session.snap.node_by_name.get(p.node or "")
        if on is not None:
            free[on.name] = free.get(on.name, 0) + p.gpu_milli_on(on)
    return free


def first_time(tried: set[tuple[int, ...]], these: list[int]) -> bool:
    """Whether a scenario's simulation of these victims (with the recorded ones) is its first: the nodes of its newest
    unit that hold the same victim jobs (a gang whose pods fill their nodes: every node) ask for the same simulation,
    from the same session (a simulation that places nothing is rolled back; one that does ends the scenario), and it
    would place nothing again (bench_victims: 172 of 475 simulations)."""
    key = tuple(these)
    if key in tried:
        return False
    tried.add(key)
    return True


def _simulate(session: Session, att: Attempt, search: Search, victims: list[Unit],
              feasible: bytearray | None) -> Outcome | None:
    """Evict ``victims`` and place their jobs and the pending one on the feasible nodes and the victims' nodes."""
    region = None
    if feasible is not None:
        region = bytearray(feasible)
        nodes = session.snap.node_by_name
        for u in victims:
            for p in u.pods:
                n = nodes.get(search.home[id(p)])
                if n is not None:
                    region[n.index] = 1
    return simulate(session, att, victims, region)


def _needs_gpu(pod: Pod) -> bool:
    return bool(pod.gpu_whole or pod.frac_devices)


def feasible_nodes(session: Session, att: Attempt) -> bytearray | None:
    """KAI's ``FeasibleNodesForJob``: for a job all of whose pods use GPUs, the nodes with an idle GPU (whole or a
    share) or a releasing one when the attempt begins; None (every node) for a job with a pod that uses none."""
    if not all(_needs_gpu(p) for p in att.job.pods):
        return None
    index = session.index
    mask = bytearray(len(index.nodes))
    for k in range(1, index.max_gpus + 1):
        for i in index.buckets[k]:
            mask[i] = 1
    for i in index.shared:
        mask[i] = 1
    nodes = session.snap.node_by_name
    for p in session.releasing():
        n = nodes.get(p.node or "")
        if n is not None and _needs_gpu(p):
            mask[n.index] = 1
    return mask


_EVERY_NODE = object()  # ``GpuRoom.kind`` where the room reads every node (no mask)


class GpuRoom:
    """Whole GPUs a scenario could make room with, by node: the idle ones and those the releasing pods hold on the
    nodes the job may use, plus what the victims hold there (a shared device counted as if its other pods went too).
    A bound: where it says no, no simulation can place the job (the victims that take their places back only take
    some of it again). KAI's ``AccumulatedIdleGpus`` reads the same numbers over every node and matches the pods'
    GPUs greedily to the nodes with the most."""

    def __init__(self, session: Session, att: Attempt, home: dict[int, str]) -> None:
        first = att.batch[0]
        self.nodes = session.snap.node_by_name
        self.home = home  # id(pod) -> the node a victim runs on (``Search.home``)
        self.per_pod = first.gpu_whole if all(
            (p.gpu_whole, p.sig, p.frac_devices) == (first.gpu_whole, first.sig, 0) for p in att.batch) else 0
        self.mask = session.index.static_mask(first) if self.per_pod else None
        self.base: dict[int, int] = {}  # node index -> whole GPUs idle or releasing there
        index = session.index
        for k in range(1, index.max_gpus + 1):
            for i in index.buckets[k]:
                if self.mask is None or self.mask[i]:
                    self.base[i] = k
        for p in session.releasing():
            n = self.nodes.get(p.node or "")
            if n is not None and (self.mask is None or self.mask[n.index]):
                self.base[n.index] = self.base.get(n.index, 0) + p.gpu_whole + p.frac_devices
        self.total = sum(self._pods(g) for g in self.base.values())
        self.kind: object = _EVERY_NODE if self.mask is None else self.mask  # (what ``of``'s answers are kept under)

    def of(self, unit: Unit) -> list[tuple[int, int]]:
        """The whole GPUs (a shared device's share counted whole) each pod of ``unit`` holds on a node the job may
        use, by node index, in pod order: worked out once per unit and node mask (kept in the unit: a unit is tallied
        once per partial job and per simulation it is a victim in, and by every vain check's census; the unit stands
        while no operation touches its job, so its pods' nodes are those every search found: ``home``)."""
        cells = unit.cells
        if cells is None or unit.cells_mask is not self.kind:
            cells = unit.cells = []
            unit.cells_mask = self.kind
            nodes, home, mask = self.nodes, self.home, self.mask
            for p in unit.pods:
                gpus = p.gpu_whole + p.frac_devices
                n = nodes.get(home[id(p)])
                if gpus and n is not None and (mask is None or mask[n.index]):
                    cells.append((n.index, gpus))
        return cells

    def _pods(self, gpus: int) -> int:
        return gpus // self.per_pod if self.per_pod else gpus

    def tally(self, att: Attempt, victims: list[Unit]) -> Tally:
        need = len(att.batch) if self.per_pod else sum(p.gpu_whole for p in att.batch)
        tally = Tally(self, need)
        for u in victims:
            tally.add(u)
        return tally


class Tally:
    """``GpuRoom`` with some victims gone."""

    __slots__ = ("have", "need", "room", "total")

    def __init__(self, room: GpuRoom, need: int) -> None:
        self.room = room
        self.need = need
        self.have: dict[int, int] = {}  # node index -> GPUs idle, releasing and the victims' there (``per_pod``)
        self.total = room.total

    def add(self, unit: Unit) -> None:
        """Count ``unit``'s GPUs in: by pod of the batch's shape where the room counts so (``per_pod``: each node's
        level is the base and what the victims added there, kept per node touched), else the GPUs alone."""
        if not self.need:
            return
        room = self.room
        cells = unit.cells
        if cells is None or unit.cells_mask is not room.kind:
            cells = room.of(unit)
        per_pod = room.per_pod
        if not per_pod:
            for _, gpus in cells:
                self.total += gpus
            return
        have, base, total = self.have, room.base, self.total
        for i, gpus in cells:
            before = have.get(i)
            if before is None:
                before = base.get(i, 0)
            after = have[i] = before + gpus
            total += after // per_pod - before // per_pod
        self.total = total

    def enough(self) -> bool:
        return self.total >= self.need

    def copy(self) -> Tally:
        """The same tally, to add other victims to (``room.tally(att, victims)`` with victims that begin with this
        one's, in the same order, adds the same: each simulation of a partial job tallied its recorded victims
        again)."""
        other = Tally(self.room, self.need)
        other.have = self.have.copy()
        other.total = self.total
        return other
