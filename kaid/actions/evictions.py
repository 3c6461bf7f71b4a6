"""The victim search that reclaim, preempt and consolidate share: for each pending job in allocate's order,
the candidate victims its action allows, taken in KAI's victim order until a scenario works (``scenario``);
then, where the solver can model the job, the cheapest set of victims that works too (``victims.solve``).
The actions differ only in their ``Rules``: who may evict, whom, and what must hold afterwards."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from itertools import count
from operator import itemgetter
from typing import ClassVar, Protocol

from kaid.actions import by_node, gangs
from kaid.actions.carried import Roll
from kaid.actions.memory import Miss
from kaid.actions.order import ByQueue, JobKey, QueueRules, VictimTree, job_key, scanned
from kaid.actions.scenario import (
    Attempt,
    Outcome,
    attempt_for,
    evict,
    held_by,
    job_order,
    request_of,
    run,
    settle,
    skip_alike,
)
from kaid.actions.session import Session, Vec, VictimStats
from kaid.actions.victim_solver import solve
from kaid.actions.victims import Search, Unit, add_budgets, budget_ok, count_units, link, part_of, takes, units_of
from kaid.api.config import Action
from kaid.api.meta import format_time
from kaid.model.jobs import delay_end
from kaid.model.objects import Job, Node, Pod, Queue, Reason
from kaid.model.queues import preempt_min_runtime, reclaim_min_runtime
from kaid.model.vocabulary import EVICTABLE, PodStatus, ReasonCode
from kaid.placement import gang
from kaid.placement.index import NodeIndex
from kaid.placement.predicates import room_for


class Rules(Protocol):
    """What one eviction action allows."""

    action: str
    solver: bool  # CP-SAT may look for cheaper victims (it models evictions, not moved pods)
    split_by_node: bool  # a victim job may lose only its pods on the nodes the job lands on (they all move)
    moves: bool  # every victim must be placed again (consolidation): no scenario evicts anything for good
    by_node: bool  # KAI's task-by-task, node-by-node search (``by_node``); else victims accumulate, then are pruned
    # ``candidate`` reads the victim's queue alone (``candidate_queue``): in the lines of the queues that may hold
    # candidates (``Pool.lines_of``) every job is one, but the attempt's own
    queue_only: ClassVar[bool]

    def serves(self, job: Job) -> bool:
        """Whether the action tries for this pending job at all."""

    def blocked(self, session: Session, att: Attempt) -> Reason | None:
        """Why this job may not evict anything now, or None."""

    def candidate(self, session: Session, att: Attempt, victim: Job) -> bool:
        """Whether the job's pods may be taken for ``att``."""

    def candidate_queue(self, session: Session, att: Attempt, queue: str) -> bool:
        """False where ``candidate`` is False for every job of ``queue``: a search reads only the jobs of the other
        queues (it read every running job of the cluster, per search)."""

    def candidate_queues(self, session: Session, att: Attempt, queues: Collection[str]) -> list[str]:
        """Those of ``queues`` (in their order) for which ``candidate_queue`` is True, named at once where the
        action knows them without asking each (every search asked it of every queue holding a running job)."""

    def valid(self, session: Session, att: Attempt, out: Outcome) -> bool:
        """Whether a scenario that placed the job keeps the action's rules."""

    def message(self, session: Session, att: Attempt, unit: Unit) -> str:
        """What the victims of ``unit`` are told, with the numbers as the attempt found them (it is asked when a
        scenario evicts them, after other victims of the attempt)."""

    def limit(self, session: Session, att: Attempt, search: Search) -> None:
        """Linear bounds for the solver (a relaxation: every solution is checked by ``valid`` too)."""

    def explain(self, session: Session, att: Attempt, search: Search, protected: int) -> Reason | None:
        """Why nothing was found: no candidates (``search.units`` empty), or no scenario that works."""


# ``Rules.blocked`` returns this when the job may not evict and there is nothing to tell its owner
SILENT = Reason(ReasonCode.NOT_PLACED_THIS_CYCLE, "")


@dataclass
class Pool:
    """The jobs that may be anyone's victims in this action (``Roles.pool``), their eviction units and keys, and
    each queue's line of them (``lines_of``), kept from one search to the next for the jobs none of whose pods an
    operation touched since: a job's units read only its own pods, a vain search leaves the session as it found it,
    and a search never undoes an operation from before it began, so the operations added since the units were worked
    out name every pod that changed. The keys and lines are the session's (``Roles.keys``, ``Roles.lines``): they
    read nothing of the action, and the next action finds them brought up to date the same way."""

    jobs: list[Job]
    units: dict[int, tuple[list[Unit], int]] = field(default_factory=dict)  # id(job) -> (units_of's answer)
    keys: dict[int, JobKey] = field(default_factory=dict)  # id(job) -> its ``job_key`` (it reads the job's pods)
    by_queue: dict[str, list[Job]] = field(default_factory=dict)  # ``jobs`` per queue, in their order
    # queue -> (key, job) for its jobs, the largest key first (the order its leaf hands victims out in; keys are
    # unique)
    lines: dict[str, list[tuple[JobKey, Job]]] = field(default_factory=dict)
    # queue -> id(job) -> job, for the jobs of its line an operation touched since the line was last brought up to
    # date (the session's: ``Roles.touched``)
    touched: dict[str, dict[int, Job]] = field(default_factory=dict)
    # id(job) -> the key its queue's line holds it with (the session's: ``Roles.placed``; an operation on the job
    # drops its ``keys`` entry, and the line is brought up to date by finding it under the old one)
    placed: dict[int, JobKey] = field(default_factory=dict)
    # id(job) -> what it holds (``scenario.held_by``; it reads the job's pods), as for ``keys`` (the session's:
    # ``Roles.held``)
    held: dict[int, Vec] = field(default_factory=dict)
    ops: int = 0  # len(session.ops) when ``units``, ``keys`` and ``held`` were last brought up to date
    _members: dict[str, set[int]] = field(default_factory=dict)  # queue -> id(job) of its jobs in ``jobs``
    # (queue, action, claimant's queue) -> ``min_runtime``
    _min_runtime: dict[tuple[str, str, str], float] = field(default_factory=dict)
    _least: dict[int, float] = field(default_factory=dict)  # id(job) -> the min runtime its ``units`` were made with

    def units_of(self, session: Session, job: Job, action: str, claimant: Queue) -> tuple[list[Unit], int]:
        self._catch_up(session)
        units, young = self.known_units(session, job, action, claimant)
        return list(units), young

    def _catch_up(self, session: Session) -> None:
        if self.ops != len(session.ops):
            for op in session.ops[self.ops:]:
                if op.pod.job is not None:
                    self.units.pop(id(op.pod.job), None)
                    self.keys.pop(id(op.pod.job), None)
                    self.held.pop(id(op.pod.job), None)
                    self.touched.setdefault(op.pod.job.queue, {})[id(op.pod.job)] = op.pod.job
            self.ops = len(session.ops)

    def lines_of(self, session: Session, rules: Rules, att: Attempt) -> dict[str, list[tuple[JobKey, Job]]]:
        """The lines of the queues that may hold candidates for ``att`` (``Rules.candidate_queue``), each worked out
        once per action and brought up to date once an operation touched one of its jobs: the jobs touched taken out
        and, those still in the pool, put back by their keys as they stand (keys are unique: the line is the one a
        sort of them all makes; each search after a success sorted the lines of the queues it touched again,
        bench_victims: 5,170 keys read by 54 sorts). A line kept from the action before loses, the first time this
        action reads it, the jobs not in this action's pool (they lost their running pods there: no unit of theirs
        was ever handed out, but the line held them)."""
        self._catch_up(session)
        out = {}
        keys, placed = self.keys, self.placed
        for queue in self.queues(session, rules, att):
            line = self.lines.get(queue)
            touched = self.touched.pop(queue, None)
            if line is None:  # (each job's key read and noted as the one the line holds it with, in one pass)
                line = self.lines[queue] = []
                for job in self.by_queue[queue]:
                    key = keys.get(id(job))
                    if key is None:
                        key = keys[id(job)] = job_key(job)
                    placed[id(job)] = key
                    line.append((key, job))
                line.sort(key=itemgetter(0), reverse=True)  # (keys are unique)
            else:
                members = self._members.get(queue)
                if members is None:  # a line kept from the action before: its pool's jobs (a new list)
                    members = self._members[queue] = {id(j) for j in self.by_queue[queue]}
                    line = [item for item in line if id(item[1]) in members and
                            (touched is None or id(item[1]) not in touched)]
                    for job in (touched or {}).values():
                        if id(job) in members:
                            self._put(line, job)
                    # and the pool's jobs the line did not hold: pipelined by the action before (``takes``), where
                    # it holds fewer jobs than the pool has in the queue (it holds only the pool's, each once)
                    if len(line) < len(members):
                        held = {id(j) for _, j in line}
                        for job in self.by_queue[queue]:
                            if id(job) not in held:
                                self._put(line, job)
                    self.lines[queue] = line
                elif touched:  # in place: the jobs touched taken out where they stood (by the key the line holds
                    # them with), those of the pool put back by their keys now (every search before this one is over:
                    # none reads the line any more; it rebuilt the whole line per search after a success)
                    for job in touched.values():
                        old = placed.get(id(job))
                        if old is not None:
                            _remove_descending(line, old, job)
                    for job in touched.values():
                        if id(job) in members:
                            self._put(line, job)
            out[queue] = line
        return out

    def _put(self, line: list[tuple[JobKey, Job]], job: Job) -> None:
        """Put ``job`` into ``line`` by its key as it stands, noting the key it is held with (``placed``)."""
        key = self.placed[id(job)] = self._key(self.keys, job)
        _insert_descending(line, (key, job))

    @staticmethod
    def _key(keys: dict[int, JobKey], job: Job) -> JobKey:
        known = keys.get(id(job))
        if known is None:
            known = keys[id(job)] = job_key(job)
        return known

    def known_units(self, session: Session, job: Job, action: str, claimant: Queue) -> tuple[list[Unit], int]:
        """``units_of`` without bringing the pool up to date: for a job whose pods no operation touched since the
        search began (a search evicts only the victims it handed out, and ``lines_of`` brought the pool up to date
        as it began), without reading the search's own operations."""
        q = session.snap.queues[job.queue]
        return self.known_in(job, q, session.snap.now, self.min_runtime(q, action, claimant))

    def known_in(self, job: Job, q: Queue, now: float, least: float) -> tuple[list[Unit], int]:
        """``known_units`` of a job of ``q`` whose min runtime is ``least`` (``min_runtime``) at ``now``."""
        known = self.units.get(id(job))
        if known is None or self._least[id(job)] != least:
            known = self.units[id(job)] = units_of(job, q, now, least)
            self._least[id(job)] = least
        return known

    def min_runtime(self, q: Queue, action: str, claimant: Queue) -> float:
        """``min_runtime(q, action, claimant)``, worked out once per pair of queues (a search that found nothing
        walked each candidate's queue path to count its units: 5,943 jobs at 4,000 nodes)."""
        known = self._min_runtime.get((q.name, action, claimant.name))
        if known is None:
            known = self._min_runtime[(q.name, action, claimant.name)] = min_runtime(q, action, claimant)
        return known

    def count(self, session: Session, job: Job, action: str, claimant: Queue,
              useful: Callable[[Pod], bool] | None = None) -> int:
        """``len(known_units(...)[0])`` (less the last unit where none of its pods is ``useful``), from the units
        where they are known, else without making them (``victims.count_units``)."""
        q = session.snap.queues[job.queue]
        least = self.min_runtime(q, action, claimant)
        known = self.units.get(id(job))
        if known is None or self._least[id(job)] != least:
            return count_units(job, q, session.snap.now, least, useful)
        units = known[0]
        if units and useful is not None and not any(useful(p) for p in units[-1].pods):
            return len(units) - 1
        return len(units)

    def has_units(self, job: Job, q: Queue, now: float, least: float) -> bool:
        """``count(session, job, ...) > 0`` for a job of ``q`` whose min runtime is ``least`` (``min_runtime``)."""
        known = self.units.get(id(job))
        if known is None or self._least[id(job)] != least:
            return count_units(job, q, now, least) > 0
        return bool(known[0])

    def count_line(self, session: Session, line: list[tuple[JobKey, Job]], candidate: Callable[[Job], bool],
                   action: str, claimant: Queue, useful: Callable[[Pod], bool]) -> int:
        """``sum(count(session, job, action, useful) for _, job in line if candidate(job))`` for jobs of one queue
        (a line's), its queue and min runtime read once (a search that found nothing counts every candidate of the
        cluster: 5,943 jobs at 4,000 nodes)."""
        if not line:
            return 0
        q = session.snap.queues[line[0][1].queue]
        least, now, units, leasts = self.min_runtime(q, action, claimant), session.snap.now, self.units, self._least
        n = 0
        for _, job in line:
            if not candidate(job):
                continue
            known = units.get(id(job))
            if known is None or leasts[id(job)] != least:
                n += count_units(job, q, now, least, useful)
            else:
                n += len(known[0]) - (1 if known[0] and not any(useful(p) for p in known[0][-1].pods) else 0)
        return n

    def queues(self, session: Session, rules: Rules, att: Attempt) -> list[str]:
        """The queues that may hold candidates for ``att`` (``Rules.candidate_queue``), in the order of ``jobs``."""
        if not self.by_queue and self.jobs:
            for job in self.jobs:
                self.by_queue.setdefault(job.queue, []).append(job)
        return rules.candidate_queues(session, att, self.by_queue.keys())

    def of_queues(self, session: Session, rules: Rules, att: Attempt) -> list[Job]:
        """The jobs of the queues that may hold candidates for ``att``."""
        return [j for q in self.queues(session, rules, att) for j in self.by_queue[q]]


def _remove_descending(line: list[tuple[JobKey, Job]], key: JobKey, job: Job) -> None:
    """Take ``job``, held with ``key``, out of ``line`` (largest key first, keys unique), if it holds it."""
    at = _slot_descending(line, key)
    if at < len(line) and line[at][1] is job:
        del line[at]


def _insert_descending(line: list[tuple[JobKey, Job]], item: tuple[JobKey, Job]) -> None:
    """Put ``item`` into ``line`` (largest key first, keys unique) where a sort would."""
    line.insert(_slot_descending(line, item[0]), item)


def _slot_descending(line: list[tuple[JobKey, Job]], key: JobKey) -> int:
    """Where ``key`` goes in ``line`` (largest key first): after every larger key."""
    lo, hi = 0, len(line)
    while lo < hi:
        mid = (lo + hi) // 2
        if line[mid][0] > key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@dataclass(slots=True)
class Found:
    units: list[int]
    outcome: Outcome
    method: str


def min_runtime(victim: Queue, action: str, claimant: Queue) -> float:
    """How long a running pod of ``victim``'s jobs is kept from ``action`` for a job of ``claimant``."""
    return reclaim_min_runtime(victim, claimant) if action == Action.RECLAIM else preempt_min_runtime(victim)


def evict_for_pending(session: Session, rules: Rules) -> None:
    """Run one eviction action over the pending jobs, in allocate's order."""
    start = len(session.ops)  # a success adds operations; a vain search leaves none
    known, misses, same = _recall(session, rules.action)
    if misses is not None and same and session.recall is not None and rules.action in session.recall.before.vain:
        _replay(session, rules.action, known, misses)  # the same world, every search in vain: the same again
        return
    roles = Roles.of(session)
    pending = []
    for j in roles.waiting():
        if not rules.serves(j):
            continue
        why = delayed(j, session.snap.now)
        if why is not None:  # (KAI's input_jobs: not an eviction trigger yet; said once, remembered as a miss)
            _say_once(session, j, why)
            if misses is not None:
                misses[j.key] = Miss(0, (why,))
            continue
        pending.append(j)
    order = job_order(session, pending, keys=roles.keys_of(pending), request=roles.asked(session))
    searches = 0
    failed: set[tuple[object, ...]] = set()
    session.scenarios_left = session.cfg.maxVictimScenarios
    pool = Pool(roles.pool(), keys=roles.keys, lines=roles.lines, touched=roles.touched,
                placed=roles.placed, held=roles.held, ops=len(session.ops))
    while (job := order.pop()) is not None:
        if searches >= session.cfg.maxVictimSearches or session.scenarios_left <= 0:
            break
        batch = gangs.tasks_to_allocate(job)
        if batch and any(p.status == PodStatus.EVICTED for p in job.pods):
            continue  # its pods go in this cycle: it is placed whole again once they are pending (next cycle), never
            # one pod of a gang that is being torn down (KAI would pipeline it, its releasing pods counted as running)
        shape = _shape(job, batch) if not (batch and gang.linked(batch, session.index)) else None
        if not batch or shape in failed:  # (``_passed_over``) the session stays as it was, and the turns of the jobs
            # alike after it change nothing either
            skip_alike(order, job, lambda j: _passed_over(j, failed, session.index))
            continue
        searches += 1
        clean = misses is not None and len(session.ops) == start  # the world is still the one the memory names
        miss = known.get(job.key) if clean else None
        if miss is not None:  # searched in vain in this very world last cycle: the same again, without the search
            session.scenarios_left -= miss.scenarios
            for reason in miss.said:
                session.say(job, reason)
        else:
            scenarios, said = session.scenarios_left, len(session.reasons.get(job.key, ()))
            att = attempt_for(session, rules.action, job, batch)
            served = _serve(session, rules, att, pool)
            att.message = _unsaid  # (its message named the attempt: a cycle that kept it, and all its scenarios kept in
            # it, alive until the collector's next pass; the steady cycle at 4,000 nodes then made one more)
            if served:
                continue
            miss = Miss(scenarios - session.scenarios_left, tuple(session.reasons.get(job.key, [])[said:]))
        if shape is not None:  # (a batch inter-pod affinity ties to the pods placed fails by its labels too)
            failed.add(shape)
        if clean and misses is not None:
            misses[job.key] = miss
    if misses is not None and session.recall is not None and len(session.ops) == start:
        session.recall.after.vain.add(rules.action)


def _unsaid(unit: Unit) -> str:
    """An attempt's message once its search is over."""
    return ""


def _replay(session: Session, action: str, known: dict[str, Miss], misses: dict[str, Miss]) -> None:
    """An action whose every search was in vain last cycle, in the same world: its searches' reasons said again in
    the order they were searched, without walking the pending jobs."""
    jobs = session.snap.jobs
    delay = ReasonCode.PREEMPTION_DELAY_NOT_ELAPSED
    for key, miss in known.items():
        for reason in miss.said:
            if reason.code == delay:
                _say_once(session, jobs[key], reason)
            else:
                session.say(jobs[key], reason)
        misses[key] = miss
    assert session.recall is not None
    session.recall.after.vain.add(action)


def delayed(job: Job, now: float) -> Reason | None:
    """Why the job may not evict anyone now (within its preemption delay, KAI's ``IsWithinPreemptionDelay``), or
    None."""
    end = delay_end(job)
    if end is None or now >= end:
        return None
    until = format_time(end)
    return Reason(ReasonCode.PREEMPTION_DELAY_NOT_ELAPSED,
                  f"its PodGroup's preemptionDelay ({job.preemption_delay:g}s, from its creation or its last "
                  f"eviction, whichever is later) has not elapsed: it may not evict other workloads before {until}; "
                  "until then it runs only on free resources",
                  {"preemptionDelaySeconds": job.preemption_delay, "until": until})


def _say_once(session: Session, job: Job, reason: Reason) -> None:
    """``session.say`` unless the job was told a reason of this code already (KAI records the delay's fit error once
    per job, whichever eviction action meets it first)."""
    if all(r.code != reason.code for r in session.reasons.get(job.key, ())):
        session.say(job, reason)


def _recall(session: Session, action: str) -> tuple[dict[str, Miss], dict[str, Miss] | None, bool]:
    """The vain searches of ``action`` last cycle that hold in this world, where to note this cycle's (None: the
    cycle keeps no memory), and whether the world is last cycle's. The world: the cycle's fingerprint and the
    operations before the action began."""
    recall = session.recall
    if recall is None or session.focus is not None:
        return {}, None, False
    world = hash((recall.cycle, tuple((op.kind, op.pod.key, op.node.name, op.devices, op.action, op.by)
                                      for op in session.ops)))
    recall.after.worlds[action] = world
    same = recall.before.holds(action, world, session.snap.now)
    return (recall.before.misses.get(action, {}) if same else {}), recall.after.misses.setdefault(action, {}), same


@dataclass
class Roles:
    """The jobs that wait (a pending pod) and those that may be anyone's victims (a pod running) as an eviction
    action starts, kept in the session from one action to the next (each walked every job of the cluster and its
    pods): the first action of the cycle works them out in full, each next one reads again only the jobs whose pods
    the operations since then moved. Every change of a pod's status is an operation of the session
    (``Session.ops``), and no action takes back one from before it began; what else decides (a job's queue, errors,
    gang, preemptibility, a pod on its way out) stays put in a cycle. (In these actions a job only loses a pending or
    running pod, and a search reads the pods again, so a stale answer would cost a look, not a decision.)"""

    ops: int  # len(session.ops) when ``pending`` and ``running`` were last brought up to date
    # the jobs that may wait at all (in a known leaf queue, no errors, enough pods for their gang; the one in focus
    # only, if any), in the snapshot's order
    waiters: list[Job]
    victims: list[Job]  # the jobs that may be victims at all (preemptible, no errors, in a known leaf queue), as well
    pending: set[int] = field(default_factory=set)  # id(job) of the jobs with a pending pod (others' too)
    running: set[int] = field(default_factory=set)  # id(job) of those with a pod running (not on its way out)
    # id(job) -> its ``job_key`` (it reads the job's pods: every action ordered every waiting job afresh, and read
    # every candidate victim's key again for its lines)
    keys: dict[int, JobKey] = field(default_factory=dict)
    # queue -> the line of its candidate victims (``Pool.lines``), brought up to date from ``touched`` (each action
    # sorted the lines of the queues it searched again)
    lines: dict[str, list[tuple[JobKey, Job]]] = field(default_factory=dict)
    # queue -> the jobs of its line an operation touched since (``Pool.touched``): the line is brought up to date
    # from them
    touched: dict[str, dict[int, Job]] = field(default_factory=dict)
    # id(job) -> the key its queue's line holds it with (``Pool.placed``)
    placed: dict[int, JobKey] = field(default_factory=dict)
    # id(job) -> what the job asks for next (``scenario.request_of``: it works the job's next batch out from its pods;
    # an action's order asked it again of the head of every leaf it read again after a search)
    requests: dict[int, Vec] = field(default_factory=dict)
    # id(job) -> what it holds (``Pool.held``: each search's victim order read it again for every job it reached)
    held: dict[int, Vec] = field(default_factory=dict)
    # what the victim orders' queue rules read of the queues (``ByQueue._caps``, ``_rules``, ``_ties``): fixed in a
    # cycle, worked out once for every search of every action (each search's order worked them out again)
    caps: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    rules: dict[str, QueueRules] = field(default_factory=dict)
    ties: dict[tuple[str, str], int] = field(default_factory=dict)
    scanned: bool | None = None  # ``order.scanned`` of the cycle's queues (None: not read yet)
    _waiting: list[Job] | None = None  # ``waiting()``, while no job's pods moved
    _pool: list[Job] | None = None  # ``pool()``, while no job's pods moved

    @classmethod
    def of(cls, session: Session) -> Roles:
        """The session's roles, brought up to date (worked out the first time)."""
        roles = session.roles
        if not isinstance(roles, Roles):
            return cls._first(session)
        roles.catch_up(session)
        return roles

    def catch_up(self, session: Session) -> None:
        """Read again the jobs whose pods the operations since the last call moved."""
        if self.ops == len(session.ops):
            return
        moved = {id(op.pod.job): op.pod.job for op in session.ops[self.ops:] if op.pod.job is not None}
        self.ops = len(session.ops)
        if moved:
            self._waiting = self._pool = None
        for key, job in moved.items():
            self.keys.pop(key, None)
            self.requests.pop(key, None)
            self.held.pop(key, None)
            self.touched.setdefault(job.queue, {})[key] = job
            if _has_pending(job):
                self.pending.add(key)
            else:
                self.pending.discard(key)
            if _has_running(job):
                self.running.add(key)
            else:
                self.running.discard(key)

    @classmethod
    def _first(cls, session: Session) -> Roles:
        """The roles worked out in one pass over the pods and one over the jobs, each queue read once (every job
        read its queue and walked its pods twice: 27,000 jobs at 4,000 nodes)."""
        roll = session.roll
        if roll is not None:  # the jobs as the cycle began (``carried.Roll``), brought up to date from the operations
            focus = session.focus
            waiters = roll.waiters if focus is None else [j for j in roll.waiters if j.key == focus]
            roles = session.roles = Roles(0, waiters, roll.victims, set(roll.pending), set(roll.running),
                                          dict(roll.keys))
            roles.catch_up(session)
            return roles
        waits, pipelined = PodStatus.PENDING, PodStatus.PIPELINED
        evictable = EVICTABLE - {waits, pipelined}
        pending: set[int] = set()  # (id(None) too: no job's)
        running: set[int] = set()
        for p in session.snap.pods:  # (one pass, ``takes`` read inline but for a pipelined pod)
            status = p.status
            if status == waits:
                pending.add(id(p.job))
            elif status in evictable:
                if not p.releasing:
                    running.add(id(p.job))
            elif status == pipelined and takes(p):
                running.add(id(p.job))
        # (the sets name jobs that neither wait nor are victims too: ``waiting`` and ``pool`` read them for their own)
        # the known leaf queues without errors (a job in a queue the snapshot does not have, or an invalid one,
        # neither waits nor is anyone's victim: kai cannot tell its queue's share)
        known = {name for name, q in session.snap.queues.items() if not q.errors and not q.children}
        focus = session.focus
        fit = [j for j in session.snap.jobs.values() if not j.errors and j.queue in known]
        possible = gangs.gang_possible  # (read inline for a job of one pod set)
        waiters = [j for j in fit if (len(j.pods) >= j.min_member if not j.subgroups else possible(j)) and
                   (focus is None or j.key == focus)]
        victims = [j for j in fit if j.preemptible]
        roles = session.roles = Roles(len(session.ops), waiters, victims, pending, running)
        return roles

    def waiting(self) -> list[Job]:
        """The jobs with a pending pod that an eviction action may try for."""
        if self._waiting is None:
            pending = self.pending
            self._waiting = [j for j in self.waiters if id(j) in pending]
        return list(self._waiting)

    def asked(self, session: Session) -> Callable[[Job], Vec]:
        """``request_of`` for an action's order, each job's answer kept (``requests``) until an operation moves its
        pods: the order asks only between searches, where the session holds the operations that stand (a vain
        search leaves none), so those since the last question name every job whose pods moved."""
        plain = request_of(session)
        requests = self.requests

        def request(job: Job) -> Vec:
            self.catch_up(session)
            known = requests.get(id(job))
            if known is None:
                known = requests[id(job)] = plain(job)
            return known

        return request

    def keys_of(self, jobs: list[Job]) -> dict[int, JobKey]:
        """The ``job_key`` of each of ``jobs`` as it stands (with others')."""
        keys = self.keys
        for job in jobs:
            if id(job) not in keys:
                keys[id(job)] = job_key(job)
        return keys

    def pool(self) -> list[Job]:
        """The jobs that may be anyone's victims in this action: preemptible, in a known leaf queue, with a pod
        running when the action starts (an action evicts and moves pods but never starts one from nothing, so no job
        joins later). Worked out once per action instead of once per search: a search looked at every job of the
        cluster."""
        if self._pool is None:
            running = self.running
            self._pool = [j for j in self.victims if id(j) in running]
        return list(self._pool)


def pending_now(session: Session, roll: Roll) -> set[int]:
    """id(job) of the jobs with a pending pod as the session stands now, from the ``roll`` of the jobs as the cycle
    began and the operations since."""
    roles = session.roles
    if isinstance(roles, Roles):
        roles.catch_up(session)
        return roles.pending
    pending = set(roll.pending)
    for job in {id(op.pod.job): op.pod.job for op in session.ops if op.pod.job is not None}.values():
        (pending.add if _has_pending(job) else pending.discard)(id(job))
    return pending


def known_keys(session: Session) -> dict[int, JobKey]:
    """The ``job_key``s the cycle worked out and that hold as the session stands now (the roles' if an eviction action
    ran, else those the cycle began with)."""
    roles = session.roles
    if isinstance(roles, Roles):
        roles.catch_up(session)
        return roles.keys
    return session.roll.keys if session.roll is not None else {}


def _has_running(job: Job) -> bool:
    return any(takes(p) for p in job.pods)


def _has_pending(job: Job) -> bool:
    return any(p.status == PodStatus.PENDING for p in job.pods)


def _passed_over(job: Job, failed: set[tuple[object, ...]], index: NodeIndex) -> bool:
    """Whether an action passes ``job`` over without a search: nothing of it to place, or a job alike (``_shape``)
    found nothing in this action, and inter-pod affinity does not tie its batch to the pods placed."""
    batch = gangs.tasks_to_allocate(job)
    return not batch or (_shape(job, batch) in failed and not gang.linked(batch, index))


def _shape(job: Job, batch: list[Pod]) -> tuple[object, ...]:
    """Jobs alike enough that one failing means the next one fails too, in the same cycle."""
    pods = [(p.gpu_whole, p.gpu_frac, p.gpu_mem_mib, p.cpu, p.mem, p.sig) for p in job.pods if p in batch]
    return (job.queue, job.priority, job.preemptible, job.topology, tuple(pods))


def _serve(session: Session, rules: Rules, att: Attempt, pool: Pool) -> bool:
    why = rules.blocked(session, att)
    if why is not None:
        if why is not SILENT:
            session.say(att.job, why)
        return False
    session.scenarios_left -= 1
    # one job may use a quarter of the action's scenarios: a search that cannot succeed (a huge gang whose victims
    # keep their places) must not starve the jobs after it
    session.search_left = max(1, session.cfg.maxVictimScenarios // 4)
    free = run(session, att, [], _validator(session, rules, att))
    if free is not None:  # it fits on what this cycle's evictions freed: no victim of its own needed
        _record(session, att, Found([], free, "none"))
        return True
    search, protected = _search(session, rules, att, pool)
    if search.unit(0) is None:
        _explain(session, rules, att, search, protected)
        return False
    att.message = lambda u: rules.message(session, att, u)  # the numbers before any eviction (``Rules.message``)
    cheaper = rules.solver and _solver_applies(session, att)
    found = (_by_node_found if rules.by_node else _first_found)(session, rules, att, search, cheaper)
    if found is not None and cheaper:
        found = _cheaper(session, rules, att, search, found)
    if found is None and (session.scenarios_left <= 0 or session.search_left <= 0):
        _cut_short(session, rules.action, att.job)
        return False
    if found is None:
        _explain(session, rules, att, search, protected)
        return False
    _record(session, att, found)
    session.reasons.pop(att.job.key, None)
    return True


def _cut_short(session: Session, action: str, job: Job) -> None:
    """Tell a job that its search ran out of scenarios, its own (a quarter of the action's) or the action's."""
    total = session.cfg.maxVictimScenarios
    if session.search_left <= 0:  # (a search is deterministic: in the same cluster it stops at the same scenario)
        whose = f"as one job may this cycle (a quarter of maxVictimScenarios, {total})"
        after = ("it searches again from the start next cycle, and stops at the same point while the cluster stays "
                 "as it is: a larger maxVictimScenarios in the scheduler config lets it search further")
    else:
        whose = f"as it may this cycle for all jobs (maxVictimScenarios, {total})"
        after = "it searches again next cycle"
    session.say(job, Reason(
        ReasonCode.NOT_PLACED_THIS_CYCLE, f"{action} simulated as many victim scenarios {whose} before it found "
        f"victims for this job; {after}", {"action": action, "maxVictimScenarios": total}))


def _explain(session: Session, rules: Rules, att: Attempt, search: Search, protected: int) -> None:
    """A search that found nothing: its units are counted (``Rules.explain``), without making those not drawn yet
    where no PodDisruptionBudget needs their pods (``budget_note``; bench_victims: reclaim-0000 made 543 candidates'
    units to count 792), else drawn in no order."""
    count_rest = _countable(session, search)
    if count_rest is not None:
        search.counted = len(search.units) + (count_rest() if search.more is not None else 0)
    else:
        search.draw_rest()
        _whole(session, rules, att, search)
    why = rules.explain(session, att, search, protected)
    if why is not None:
        session.say(att.job, why)


def _countable(session: Session, search: Search) -> Callable[[], int] | None:
    """How a search that found nothing counts its units left without drawing them (``_explain``), if it may."""
    return None if session.snap.budgets else search.count_rest


def _search(session: Session, rules: Rules, att: Attempt, pool: Pool) -> tuple[Search, int]:
    """The candidates' eviction units, in KAI's victim order (``pool``: ``Roles.pool``), drawn as they are read:
    the order is the one of the cluster as the search found it (``ByQueue.frozen``), however many victims were
    evicted before the next one is drawn; ``_whole`` draws the rest and adds what needs them all. A search reads
    only the candidates it hands out (each queue's line is kept in ``pool``); the pods protected by a min runtime are
    counted only where no unit is drawn at all, the only search that tells them (``Rules.explain``)."""

    if rules.queue_only:  # (``candidate`` reads only what the lines are made of: asked per job, 13,010 times at 4,000
        # nodes, mostly by a vain search's count)

        def candidate(job: Job) -> bool:
            return job is not att.job
    else:

        def candidate(job: Job) -> bool:
            return job is not att.job and rules.candidate(session, att, job)

    def candidates(queue: str, line: list[tuple[JobKey, Job]]) -> Iterator[tuple[JobKey, Job]]:
        # (``pool.count`` of each job with a unit, the queue and its min runtime read once per line: its jobs are the
        # queue's; units are made once handed out)
        q = session.snap.queues[queue]
        least, now, has_units = pool.min_runtime(q, rules.action, claimant), session.snap.now, pool.has_units
        for at, (key, job) in enumerate(line):
            read[queue] = at + 1
            if candidate(job) and has_units(job, q, now, least):
                yield key, job

    claimant = session.snap.queues[att.job.queue]  # (whose min runtime protects a victim, ``min_runtime``)
    lines = pool.lines_of(session, rules, att)
    read = dict.fromkeys(lines, 0)  # queue -> how far its stream has read its line
    streams = {q: candidates(q, line) for q, line in lines.items()}
    order, handed = _victim_order(session, streams)
    useful_pod = _useful_pod(session, att)

    def useful(unit: Unit) -> bool:
        """A victim helps only if one of its pods is on a node the job may use (selectors, affinity, taints)."""
        return any(useful_pod(p) for p in unit.pods)

    per_job: dict[str, list[Unit]] = {}

    def next_of(victim: Job) -> tuple[Unit | None, bool]:
        """The victim's next unit (None where it is its last and helps nothing), and whether it has more."""
        units = per_job.get(victim.key)
        if units is None:
            units = per_job[victim.key] = list(pool.known_units(session, victim, rules.action, claimant)[0])
        unit = units.pop(0)
        return (unit if units or useful(unit) else None), bool(units)  # (only a job's last unit is asked for use)

    gone: dict[int, set[int]] = {}  # id(victim) -> id(pod) of the units of it handed out so far (sub-groups)
    left: dict[int, list[int]] = {}  # id(victim) -> ``rest_after``'s count and sums of what is left of it

    def draw() -> Iterator[Unit]:
        while (victim := order.pop()) is not None:
            handed(victim)
            unit, more = next_of(victim)
            if more:  # (then ``unit`` is the one handed out) what is left of the victim, before the unit is handed
                # out (and perhaps evicted)
                assert unit is not None
                order.push_rest(victim, *rest_after(victim, unit, gone, left))
            if unit is not None:
                yield unit

    def rest() -> Iterator[Unit]:
        """The units ``draw`` has not handed out, in no set order: those of the jobs in the order (what is left of
        one handed out already), then those of the jobs each queue has not handed to the order yet."""
        for victim in [*order.remaining(), *(job for stream in streams.values() for _, job in stream)]:
            more = True
            while more:
                unit, more = next_of(victim)
                if unit is not None:
                    yield unit

    def count_rest() -> int:
        """How many units ``rest`` would hand out, without making those not made yet."""
        n = 0
        for victim in order.remaining():
            units = per_job.get(victim.key)
            if units is None:
                n += pool.count(session, victim, rules.action, claimant, useful_pod)
            else:  # (a job in the order has a unit left)
                n += len(units) if useful(units[-1]) else len(units) - 1
        for queue, line in lines.items():  # (a job with units, none of them useful, counts none)
            n += pool.count_line(session, line[read[queue]:], candidate, rules.action, claimant, useful_pod)
        return n

    def census() -> Iterator[Unit]:
        """Every unit ``draw`` may hand out, in no set order, without drawing (``Search.census``)."""
        now, known_in = session.snap.now, pool.known_in
        for queue, line in lines.items():  # (``known_units`` of each job, its queue and min runtime read once per line)
            q = session.snap.queues[queue]
            least = pool.min_runtime(q, rules.action, claimant)
            for _, job in line:
                if not candidate(job):  # (the streams' test: the lines hold only candidates' queues)
                    continue
                units = known_in(job, q, now, least)[0]
                last = len(units) - 1
                for k, unit in enumerate(units):
                    if k < last or useful(unit):
                        yield unit

    search = Search([], more=draw(), guards=list(session.snap.budgets), rest=rest, census=census,
                    count_rest=count_rest)
    protected = 0
    if search.unit(0) is None:
        protected = sum(pool.units_of(session, j, rules.action, claimant)[1]
                        for j in pool.of_queues(session, rules, att)
                        if j is not att.job and rules.candidate(session, att, j))
    return search, protected


def rest_after(job: Job, unit: Unit, gone: dict[int, set[int]], left: dict[int, list[int]]) -> tuple[JobKey, Vec]:
    """``rest_of`` the victim once ``unit`` is handed out too (``gone``: id(job) -> the pods of its units handed out
    before, for a job with sub-groups). For a job of one pod set, from the count and sums of the pods left the last
    time (``left``), less the unit's (its pods were among them: active, on their way nowhere, not handed out; and no
    pod of the job not handed out changes between two draws of a search, which read the session as the search found
    it but for the evictions of units handed out), where each unit walked the job's pods again (bench_victims: 224
    calls for 67 victims, 1.5% of a first-fit cycle's opcodes)."""
    if job.subgroups:
        out = gone.setdefault(id(job), set())
        out.update(id(p) for p in unit.pods)
        return rest_of(job, out)
    now = left.get(id(job))
    if now is None:
        out = {id(p) for p in unit.pods}
        n = gpu = cpu = mem = 0
        for p in job.pods:  # (``rest_of``'s pass)
            if p.status in _ACTIVE and not p.releasing and id(p) not in out:
                n += 1
                gpu += p.gpu_milli_on(None) if not p.gpu_whole else p.gpu_whole * 1000
                cpu += p.cpu
                mem += p.mem
        now = left[id(job)] = [n, gpu, cpu, mem]
    else:  # (a unit's sums are its pods', each pod's GPUs read as ``rest_of`` reads them: ``victims._unit``)
        now[0] -= len(unit.pods)
        now[1] -= unit.gpu
        now[2] -= unit.cpu
        now[3] -= unit.mem
    n, least = now[0], job.min_member
    return (-job.priority, _BELOW if n < least else (_EXACT if n == least else _ABOVE), job.created,
            job.key), (now[1], now[2], now[3])


def rest_of(job: Job, gone: set[int]) -> tuple[JobKey, Vec]:
    """``job_key`` and ``held_by`` of the job without the pods of ``gone`` (its units handed out): those of KAI's clone
    of the job with its other tasks (its elastic state counts the active pods left)."""
    if not job.subgroups:  # one pod set: the pods left counted and summed in one pass (``gangs.is_active`` inline)
        n = gpu = cpu = mem = 0
        for p in job.pods:
            if p.status in _ACTIVE and not p.releasing and id(p) not in gone:
                n += 1
                gpu += p.gpu_milli_on(None) if not p.gpu_whole else p.gpu_whole * 1000
                cpu += p.cpu
                mem += p.mem
        least = job.min_member
        return (-job.priority, _BELOW if n < least else (_EXACT if n == least else _ABOVE), job.created,
                job.key), (gpu, cpu, mem)
    left = [p for p in job.pods if id(p) not in gone and gangs.is_active(p)]
    state = gangs.ElasticState.EXACT
    for ps in gangs.gang_of(job).all_pod_sets():
        n = sum(1 for p in ps.pods if id(p) not in gone and gangs.is_active(p))
        if n < ps.min_available:
            state = gangs.ElasticState.BELOW
            break
        if n > ps.min_available:
            state = gangs.ElasticState.ABOVE
    held = (sum(p.gpu_milli_on(None) if not p.gpu_whole else p.gpu_whole * 1000 for p in left),
            sum(p.cpu for p in left), sum(p.mem for p in left))
    return (-job.priority, int(state), job.created, job.key), held


# ``rest_of`` reads these per pod, and ``gangs.ElasticState``'s values as ints
_ACTIVE = gangs.ACTIVE
_BELOW, _EXACT, _ABOVE = int(gangs.ElasticState.BELOW), int(gangs.ElasticState.EXACT), int(gangs.ElasticState.ABOVE)


class _VictimOrder(Protocol):
    """What a search reads of its victim order (``ByQueue`` frozen, or ``_OneLine``)."""

    def pop(self) -> Job | None: ...

    def push(self, job: Job, key: JobKey | None = None) -> None: ...

    def push_rest(self, job: Job, key: JobKey, held: Vec) -> None: ...

    def remaining(self) -> list[Job]: ...


class _OneLine:
    """KAI's victim order (``ByQueue``, frozen, victims) where one leaf queue holds every victim: the queues'
    shares then choose nothing (a level hands out its one child with a job below it), and the order is the leaf's,
    the largest job key first, each job under the key it was first pushed with (what is left of a victim under the
    rest's key, ``push_rest``). Most searches of preempt read one queue: the tree's entries were worked out again
    at every pop to hand out the head of that one leaf."""

    __slots__ = ("jobs", "keys", "known")

    def __init__(self) -> None:
        self.jobs: list[Job] = []  # the largest key first
        self.keys: list[JobKey] = []  # ascending
        self.known: dict[int, JobKey] = {}  # id(job) -> the key it is handed out under

    def pop(self) -> Job | None:
        if not self.jobs:
            return None
        self.keys.pop()
        return self.jobs.pop(0)

    def push(self, job: Job, key: JobKey | None = None) -> None:
        known = self.known.get(id(job))
        if known is None:
            assert key is not None
            known = self.known[id(job)] = key
        at = bisect_right(self.keys, known)
        self.keys.insert(at, known)
        self.jobs.insert(len(self.jobs) - at, job)

    def push_rest(self, job: Job, key: JobKey, held: Vec) -> None:
        self.known[id(job)] = key
        self.push(job)

    def remaining(self) -> list[Job]:
        return list(self.jobs)


def _victim_order(session: Session,
                  lines: dict[str, Iterator[tuple[JobKey, Job]]]) -> tuple[_VictimOrder, Callable[[Job], None]]:
    """KAI's victim order (``job_order``, frozen) over the victims of ``lines`` (each queue's, with their
    ``job_key``s, in the order its leaf hands them out: the largest key first), and what to call as each is handed
    out. The order holds only the next victim of each queue, the one after it pushed as it is handed out: a leaf's
    place in the order reads its head alone, so the order hands out what it would with every victim pushed at once,
    without pushing the many that a search never reaches (it pushed every candidate of the cluster, per search).
    Where one queue's line holds victims at all, that leaf's order alone (``_OneLine``)."""
    firsts = [first for line in lines.values() if (first := next(line, None)) is not None]
    queues = session.snap.queues
    order: _VictimOrder
    if len(firsts) == 1 and (leaf := queues.get(firsts[0][1].queue)) is not None and not leaf.children:
        order = _OneLine()
    else:  # (``job_order``'s, frozen, with what the session's orders read of the queues and the victims kept)
        roles = session.roles
        assert isinstance(roles, Roles)
        known = roles.held

        def held(job: Job) -> Vec:
            value = known.get(id(job))
            if value is None:
                value = known[id(job)] = held_by(job)
            return value

        if roles.scanned is None:
            roles.scanned = scanned(queues)
        if roles.scanned:  # (what ``ByQueue`` hands out, without its upkeep for queues whose allocations change)
            order = VictimTree(queues, session.total, held, roles.caps, roles.rules, roles.ties)
        else:
            order = ByQueue(queues, session.total, _asks_nothing, held, victims=True, frozen=True, _caps=roles.caps,
                            _rules=roles.rules, _ties=roles.ties)
    for key, job in firsts:
        order.push(job, key)  # (the order keeps it: frozen)

    def handed(victim: Job) -> None:
        following = next(lines[victim.queue], None)
        if following is not None:
            order.push(following[1], following[0])

    return order, handed


def _asks_nothing(job: Job) -> Vec:
    """What a victim order asks of a job's request: nothing (it reads what the victims hold)."""
    raise AssertionError("a victim order reads what its jobs hold, not what they ask for")


def _whole(session: Session, rules: Rules, att: Attempt, search: Search) -> None:
    """Draw every unit of the search, then rank them (``link``), list the budgets over them and add the action's
    bounds (``Rules.limit``), as the solver and the explanations need; with the session as the search found it."""
    if search.whole:
        return
    search.draw_all()
    search.whole = True
    link(search.units)
    search.budgets = []
    add_budgets(search, session.snap.budgets)
    rules.limit(session, att, search)


def _useful_pod(session: Session, att: Attempt) -> Callable[[Pod], bool]:
    """Whether a victim pod is on a node the job may use (selectors, affinity, taints)."""
    masks = list({id(m): m for m in (session.index.static_mask(p) for p in att.batch)}.values())
    nodes = session.snap.node_by_name
    if len(masks) == 1:  # (the masks are the index's, one per pod signature: a batch's pods mostly share one)
        mask = masks[0]
        if 0 not in mask:  # every node: a pod is useful where it is on one

            def anywhere(p: Pod) -> bool:
                return p.node in nodes

            return anywhere

        def on_mask(p: Pod) -> bool:
            node = nodes.get(p.node) if p.node else None
            return node is not None and bool(mask[node.index])

        return on_mask

    def useful(p: Pod) -> bool:
        return p.node in nodes and any(m[nodes[p.node].index] for m in masks)

    return useful


def _first_found(session: Session, rules: Rules, att: Attempt, search: Search, whole: bool) -> Found | None:
    """Take units in KAI's order until a scenario works (KAI's own answer); then drop the units that share no
    node with the job and were not needed (``whole``: with every unit drawn first, for the solver after)."""
    start = session.checkpoint()
    chosen: list[int] = []
    valid = _validator(session, rules, att)
    room = Room(session, att, rules.moves)
    for i in count():
        unit = search.unit(i)
        if unit is None:
            break
        if (unit.prev is not None and unit.prev not in chosen) or not budget_ok(search, {*chosen, i}):
            continue
        chosen.append(i)
        evict(session, att, [unit])
        if not room.could_fit(unit):
            continue
        if session.scenarios_left <= 0 or session.search_left <= 0:
            break
        session.scenarios_left -= 1
        session.search_left -= 1
        out = settle(session, att, [search.units[j] for j in chosen], valid)
        if out is not None:
            out.start = start
            if whole:
                done = session.undo(start)
                _whole(session, rules, att, search)
                session.redo(done)
            return _pruned(session, rules, att, search, Found(chosen, out, "first-fit"), valid)
    session.rollback(start)
    return None


def _by_node_found(session: Session, rules: Rules, att: Attempt, search: Search, whole: bool) -> Found | None:
    """KAI's own answer: its job solver's probes of partial jobs over its two scenario generators (``by_node``;
    ``whole``: with every unit drawn, for the solver after)."""
    solved = by_node.solve(session, att, search, lambda part, out: rules.valid(session, part, out))
    if solved is None:
        return None
    units, outcome = solved
    if whole:
        done = session.undo(outcome.start)
        _whole(session, rules, att, search)
        session.redo(done)
    return Found(units, outcome, "first-fit")


def _validator(session: Session, rules: Rules, att: Attempt) -> Callable[[Outcome], bool]:
    return lambda out: rules.valid(session, att, out)


def _pruned(session: Session, rules: Rules, att: Attempt, search: Search, found: Found,
            valid: Callable[[Outcome], bool]) -> Found:
    """Without the victims that share no node with where the job landed, if it still works (for an action whose
    victims all move, without any victim pod elsewhere: KAI's node-local sub-scenarios)."""
    used = {n.name for _, n, _ in found.outcome.placements}
    if rules.split_by_node:
        keep = _split(search, found.units, used)
    else:
        keep = [i for i in found.units if any(search.home[id(p)] in used for p in search.units[i].pods)]
        keep = [i for i in keep if all(j in keep for j in _before(search, i))]
    if keep == found.units or not keep:
        return found
    return _retry(session, att, search, found, keep, valid) or found


def _split(search: Search, chosen: list[int], used: set[str]) -> list[int]:
    """The chosen units cut down to their pods on ``used`` nodes, as new units of the search."""
    out = []
    for i in chosen:
        unit = search.units[i]
        pods = [p for p in unit.pods if search.home[id(p)] in used]
        if len(pods) == len(unit.pods):
            out.append(i)
        elif pods:
            search.units.append(part_of(unit, pods))
            out.append(len(search.units) - 1)
    return out


def _retry(session: Session, att: Attempt, search: Search, found: Found, units: list[int],
           valid: Callable[[Outcome], bool], method: str | None = None) -> Found | None:
    """Undo ``found`` and try ``units`` instead; if that fails, ``found`` is applied again and None returned."""
    done = session.undo(found.outcome.start)
    out = run(session, att, [search.units[i] for i in units], valid)
    if out is not None:
        return Found(units, out, method or found.method)
    session.redo(done)
    return None


def _before(search: Search, i: int) -> list[int]:
    out = []
    j = search.units[i].prev
    while j is not None:
        out.append(j)
        j = search.units[j].prev
    return out


class Room:
    """Cheap bounds before a scenario, kept up to date as the victims are evicted one unit at a time (each unit
    changes only the nodes its pods are on). A scenario places the job after the victims that take their places
    back, on what the evictions freed and the releasing pods hold: it cannot fit where a bound says no.

    - the idle and releasing GPUs on the nodes the job may use, against the whole GPUs it needs;
    - for a batch of pods alike (whole GPUs or none): the pods of that shape the nodes it may use could take with
      the releasing pods gone, against the batch; gang placement finds no plan below it (``gang.lower_bound``);
    - where every victim must be placed again (``moves``: consolidation), whole devices are conserved: the idle
      devices of the whole cluster and those the releasing pods hold, against the job's whole GPUs plus the whole
      GPUs of the pods moved so far (each needs idle devices again). Moving whole-GPU pods never makes a device
      idle; only emptying a shared device does. A full cluster with no idle device is where this bound saves a
      quarter of the scenario budget per job, every cycle (issue 15).
    """

    def __init__(self, session: Session, att: Attempt, moves: bool = False) -> None:
        self.session = session
        first = att.batch[0]
        self.pod = first
        self.mask = session.index.static_mask(first)
        self.whole = sum(p.gpu_whole for p in att.batch)
        self.need = len(att.batch)
        self.alike = gang.alike(att.batch)
        nodes = session.snap.node_by_name
        self.releasing = sum(p.gpu_whole for p in session.releasing() if self.mask[nodes[p.node or ""].index])
        self.idle = [n.idle if self.mask[n.index] else 0 for n in session.index.nodes] if self.whole else []
        self.idle_sum = sum(self.idle)
        self.room: dict[int, int] = {}
        if self.alike:
            self.room = self._rooms(None)
        self.room_sum = sum(self.room.values())
        self.moves = moves and bool(self.whole)
        self.every: list[int] = [n.idle for n in session.index.nodes] if self.moves else []
        self.every_sum = sum(self.every) + sum(p.gpu_whole + p.frac_devices for p in session.releasing())
        self.moved_whole = 0

    def _rooms(self, nodes: list[Node] | None) -> dict[int, int]:
        """Room for the shape on ``nodes`` (None: every node the job may use), the releasing pods lent."""
        lent = self.session.releasing()
        groups = self.session.lend(lent)
        try:
            caps = gang.node_caps(self.pod, self.session.index, None) if nodes is None else \
                [(n, room_for(n, self.pod)) for n in nodes if self.mask[n.index]]
        finally:
            self.session.unlend(lent, groups)
        return {n.index: c for n, c in caps}

    def could_fit(self, unit: Unit) -> bool:
        """After ``unit`` was evicted: whether the job may fit."""
        nodes = {id(n): n for n in (self.session.snap.node_by_name.get(p.node or "") for p in unit.pods)
                 if n is not None}.values()
        if self.whole:
            for n in nodes:
                if self.mask[n.index]:
                    self.idle_sum += n.idle - self.idle[n.index]
                    self.idle[n.index] = n.idle
        if self.moves:
            for n in nodes:
                self.every_sum += n.idle - self.every[n.index]
                self.every[n.index] = n.idle
            self.moved_whole += sum(p.gpu_whole for p in unit.pods)
        if self.alike:  # the bounds are kept up to date whatever the answer: the next unit builds on them
            for i, c in self._rooms(list(nodes)).items():
                self.room_sum += c - self.room.get(i, 0)
                self.room[i] = c
        return not ((self.whole and self.idle_sum + self.releasing < self.whole)
                    or (self.alike and self.room_sum < self.need)
                    or (self.moves and self.every_sum < self.whole + self.moved_whole))


def _solver_applies(session: Session, att: Attempt) -> bool:
    first = att.batch[0]
    same = all((p.gpu_whole, p.cpu, p.mem, p.sig) == (first.gpu_whole, first.cpu, first.mem, first.sig)
               and not p.frac_devices for p in att.batch)
    return session.cfg.placement.victimSolver == "cpsat" and same and att.job.topology is None


def _cheaper(session: Session, rules: Rules, att: Attempt, search: Search, found: Found) -> Found:
    """CP-SAT's cheapest set of units, if it is cheaper than ``found`` and works as a scenario too."""
    keep = {n.name for _, n, _ in found.outcome.placements} | {search.home[id(p)] for i in found.units
                                                                 for p in search.units[i].pods}
    done = session.undo(found.outcome.start)
    if not _cheaper_possible(session, att, search, found):
        session.redo(done)
        session.victim_stats.solver_skipped += 1
        return found
    sol = solve(session, att.batch, search, session.cfg.placement.solverTimeLimitSeconds,
                session.cfg.placement.solverWorkers, hint=found.units, keep_nodes=keep)
    session.redo(done)
    if sol is None or search.cost(sol[0]) >= search.cost(found.units):
        return found
    return _retry(session, att, search, found, sol[0], _validator(session, rules, att), "cpsat") or found


def _cheaper_possible(session: Session, att: Attempt, search: Search, found: Found) -> bool:
    """Whether a set of units cheaper than ``found`` by the first three keys of ``victims.cost`` (cost level,
    GPU-seconds of progress lost, GPUs) could make room, by a bound cheaper than the solver. Adding a unit never
    lowers a set's level, loss or GPUs, so such a set holds only units each below ``found`` on its own (a lower
    level, or the same level and less lost, or as much lost and fewer GPUs), and the units of their jobs that go
    before them; if those, with the idle and releasing GPUs, cannot make room for the
    job's pods node by node (whole GPUs per pod), no solver runs and first-fit's set stays. Called with the session
    as it was before ``found``; the solver's pods are alike (``_solver_applies``)."""
    per_pod = att.batch[0].gpu_whole
    if not per_pod:
        return True  # cpu pods: no bound here
    level, lost, evicted, _ = search.cost(found.units)
    units = search.units
    inside: set[int] = set()
    for i, u in enumerate(units):  # in order: a unit's predecessors come before it
        below = u.level < level or (u.level == level and (u.lost, u.gpu) < (lost, evicted))
        if below and (u.prev is None or u.prev in inside):
            inside.add(i)
    mask = session.index.static_mask(att.batch[0])
    nodes = session.snap.node_by_name
    index = session.index
    gpus: dict[int, int] = {i: index.nodes[i].idle for k in range(1, index.max_gpus + 1) for i in index.buckets[k]
                            if mask[i]}
    held = [p for p in session.releasing()] + [p for i in inside for p in units[i].pods]
    for p in held:  # what each could free on its node, at most (a shared device counted as if all its pods went)
        n = nodes.get(p.node or "")
        if n is not None and mask[n.index]:
            gpus[n.index] = gpus.get(n.index, 0) + p.gpu_whole + p.frac_devices
    return sum(min(n, index.nodes[i].gpus) // per_pod for i, n in gpus.items()) >= len(att.batch)


def budget_note(search: Search) -> str:
    """Names the PodDisruptionBudgets that stood in the way, if any did."""
    tight = sorted({f"{b.namespace}/{b.name} (allows {b.disruptions_allowed})" for b, ids, _ in search.budgets
                    if sum(len(search.units[i].pods) for i in ids) > b.disruptions_allowed})
    return f"; PodDisruptionBudget {', '.join(tight)} protects some of them" if tight else ""


def _record(session: Session, att: Attempt, found: Found) -> None:
    evicted = found.outcome.evicted
    session.victim_stats.decisions.append(VictimStats(
        att.job.key, att.action, found.method, sum(u.gpu for u in evicted) / 1000,
        sum(p.gpu_milli_on(n) for p, n, _ in found.outcome.placements) / 1000,
        sum(len(u.pods) for u in evicted), len(evicted)))
