"""One eviction scenario, tried in the session: evict a set of victim units, then place the jobs involved in the
order allocate would serve them (KAI's simulation, ``common/action.go`` at the reference commit): a victim job
whose queue comes first takes its place back (it is moved rather than evicted), and the scenario only works if
the pending job is placed. What is left evicted must then pass the action's rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from operator import attrgetter

from kaid.actions import gangs, subtopo
from kaid.actions.limits import PathLimits, charged_violation
from kaid.actions.order import ByQueue, JobKey, job_key
from kaid.actions.session import Session, Vec, job_request
from kaid.actions.victims import Placements, Unit
from kaid.api.config import Action
from kaid.model.objects import UNLIMITED, Job, Pod, Queue
from kaid.model.vocabulary import PodStatus
from kaid.placement import gang

WAITING = frozenset({PodStatus.PENDING, PodStatus.EVICTED})  # in a scenario, an evicted pod waits to be placed again
# (module constants: an enum member read through its class is an attribute lookup through ``EnumType.__getattr__``)
_PENDING, _EVICTED, _PIPELINED = PodStatus.PENDING, PodStatus.EVICTED, PodStatus.PIPELINED
_ACTIVE = gangs.ACTIVE
_STATUS = attrgetter("status")
_FLIP = bytes([1, 0]) + bytes(254)  # a translation of a mask of 0s and 1s to its complement


@dataclass
class Attempt:
    """A pending job's try at evictions: what it needs, and how the session stood when it began."""

    action: str
    job: Job
    queue: Queue
    batch: list[Pod]  # the pods to place: the job's next batch, or (KAI's partial job, ``by_node``) its first few
    request: Vec  # of ``batch``, for fair share and the rules (gpu-memory sized on the smallest GPU)
    message: Callable[[Unit], str] = field(default=lambda u: "")
    # queue -> its jobs with a pending pod when the attempt began: no scenario places one that is not a victim,
    # and each scenario starts from the session as the attempt found it but for evictions (``waiting_in``)
    waiting: dict[str, list[Job]] = field(default_factory=dict)
    # id(job) -> what a waiting job that is no victim asks for next (``request_of``), as the attempt found it: no
    # scenario of the attempt changes such a job's pods (``_replace``)
    requests: dict[int, Vec] = field(default_factory=dict)
    # id(job) -> the ``job_key`` of a waiting job that is no victim, as the attempt found it (``_keys``)
    keys: dict[int, JobKey] = field(default_factory=dict)
    # the job's whole next batch (``gangs.tasks_to_allocate``) where ``batch`` is a partial job of its first pods
    tasks: list[Pod] | None = None
    # the queues a scenario involves -> the order of their waiting jobs but the pending one as the attempt found them
    # (none handed out from it), id(job) of those it holds, and those it does not (``serving_order``)
    orders: dict[frozenset[str], tuple[ByQueue, set[int], list[Job]]] = field(default_factory=dict)
    # id(job) -> the pods of a job of one pod set in task order (``tasks``), for the scenarios' turns: the session's
    # (``Session.task_orders``, shared by every attempt of the cycle) where ``attempt_for`` made the attempt
    task_orders: dict[int, list[Pod]] = field(default_factory=dict)
    # the limits and quotas on the paths of the queues whose jobs the scenarios place (``_place``), each read once: the
    # session's (``Session.path_limits``, shared by every attempt of the cycle) where ``attempt_for`` made the attempt
    limits: PathLimits = field(default_factory=PathLimits)
    # id(the job's whole next batch) -> ``_away_from_rest`` as the attempt found it (the job's pods beyond its whole
    # batch are pending or not as the attempt found them: no scenario places one)
    away: dict[int, bytearray | None] = field(default_factory=dict)
    # the attempt's request -> the limits on its queue's path that it asks for (``above_limit``), read once
    caps: dict[Vec, tuple[tuple[Queue, int, int], ...]] = field(default_factory=dict)


@dataclass
class Outcome:
    """A scenario that worked: the units evicted for good, the pods moved, where the job went, and the session
    checkpoint it started at (to undo it)."""

    evicted: list[Unit]
    moved: list[Pod]
    placements: Placements
    start: int = 0
    # every unit of the scenario, those put back too, in its order (KAI's victims: reclaim splits a job's by them)
    units: list[Unit] = field(default_factory=list)


def attempt_for(session: Session, action: str, job: Job, batch: list[Pod]) -> Attempt:
    """An eviction action's try for ``batch`` of ``job``'s pods, with what they request."""
    return Attempt(action, job, session.snap.queues[job.queue], batch,
                   job_request(batch, session.small_ref), task_orders=session.task_orders, limits=session.path_limits)


def request_of(session: Session) -> Callable[[Job], Vec]:
    ref = session.small_ref
    return lambda job: job_request(gangs.tasks_to_allocate(job, WAITING), ref)


def tasks(att: Attempt, job: Job) -> list[Pod]:
    """``gangs.tasks_to_allocate(job, WAITING)`` in a scenario of ``att``: for a job of one pod set, its pods in task
    order are sorted once per cycle (``Attempt.task_orders``, the session's: a pod's task key reads its labels, age and
    name, which nothing changes in a cycle, nor a job's list of pods), where each of a victim's turns and asks sorted
    its waiting pods again (bench_victims: 1,223 calls per first-fit cycle; then once per attempt, 3,033 task keys
    read)."""
    if job.subgroups:
        return gangs.tasks_to_allocate(job, WAITING)
    ordered = att.task_orders.get(id(job))
    if ordered is None:
        ordered = att.task_orders[id(job)] = sorted(job.pods, key=gangs.task_key)
    return gangs.from_ordered(ordered, job.min_member, WAITING)


def held_by(job: Job) -> Vec:
    """What the job's active pods hold (``gangs.is_active``), GPUs in milli-GPU sized without a node: one pass over
    its pods (a list of the active ones and three sums over it cost an order of victims and allocate's order 1.6% of
    a bench_victims first-fit cycle's opcodes; ``compress``/``sum(map(...))`` read fewer opcodes but cost 2-3 times the
    CPU on a job's few pods)."""
    g = c = m = 0
    for p in job.pods:
        if p.status in _ACTIVE and not p.releasing:  # (``gangs.is_active``, inline)
            if p.gpu_whole:
                g += p.gpu_whole * 1000
            elif p.frac_devices:
                g += p.gpu_milli_on(None)
            c += p.cpu
            m += p.mem
    return g, c, m


def job_order(session: Session, jobs: list[Job], victims: bool = False, frozen: bool = False,
              request: Callable[[Job], Vec] | None = None, keys: Mapping[int, JobKey] | None = None) -> ByQueue:
    """``jobs`` in KAI's order of queues and jobs (``victims``: the order victims are taken in; ``frozen``: as the
    session stands now, whatever it does later; ``request``: what a job asks for next, if not ``request_of``;
    ``keys``: id(job) -> its ``job_key`` as it stands now, where the caller knows it)."""
    order = ByQueue(session.snap.queues, session.total, request or request_of(session), held_by, victims, frozen)
    order.push_all(jobs, keys)
    return order


def run(session: Session, att: Attempt, units: list[Unit], valid: Callable[[Outcome], bool]) -> Outcome | None:
    """Try the scenario; on success its operations stay in the session, else it is rolled back. One without victims
    that ``no_room`` says cannot place the batch is not tried."""
    if not units and no_room(session, att):
        return None
    return _tried(session, att, units, lambda: settle(session, att, units, valid))


def no_room(session: Session, att: Attempt) -> bool:
    """Whether the GPU bound (``by_node.GpuRoom``: the whole GPUs idle or releasing on the nodes the batch may use,
    counted by the pods of its shape they hold) says the batch cannot be placed without victims: a scenario without
    any (an eviction action's first, on what this cycle's evictions freed) then places nothing (bench_victims: 43
    of a first-fit cycle's 62 such scenarios)."""
    from kaid.actions.by_node import GpuRoom  # (by_node builds on this module)
    return not GpuRoom(session, att, {}).tally(att, []).enough()


def _tried(session: Session, att: Attempt, units: list[Unit], place: Callable[[], Outcome | None]) -> Outcome | None:
    """Evict ``units``, then ``place``; its outcome starts where the evictions began (``Outcome.start``), and nothing
    of it stays in the session when it places nothing."""
    cp = session.checkpoint()
    evict(session, att, units)
    outcome = place()
    if outcome is None:
        session.rollback(cp)
        return None
    outcome.start = cp
    return outcome


def evict(session: Session, att: Attempt, units: list[Unit]) -> None:
    """Evict the pods of ``units`` not evicted yet, each with its unit's message (worked out only for a unit with
    such a pod: a partial job's simulations begin with its recorded victims, evicted already, ``by_node``)."""
    for u in units:
        pods = [p for p in u.pods if p.status != _EVICTED]
        if pods:
            session.evict_all(u.job, pods, att.action, att.job.key, att.message(u))


def simulate(session: Session, att: Attempt, units: list[Unit], feasible: bytearray | None) -> Outcome | None:
    """Evict ``units`` and place the jobs involved, the pods that use no GPU on the ``feasible`` nodes only (None:
    anywhere; ``_place``); on success its operations stay in the session (from ``Outcome.start``), else it is rolled
    back. The action's rules are the caller's to check."""
    return _tried(session, att, units, lambda: _replace(session, att, units, feasible))


def settle(session: Session, att: Attempt, units: list[Unit], valid: Callable[[Outcome], bool]) -> Outcome | None:
    """With ``units`` evicted: place the jobs involved; keep it if the job was placed and ``valid`` holds."""
    cp = session.checkpoint()
    outcome = _replace(session, att, units)
    if outcome is not None and valid(outcome):
        return outcome
    session.rollback(cp)
    return None


def _replace(session: Session, att: Attempt, units: list[Unit], feasible: bytearray | None = None) -> Outcome | None:
    """Place the victims' jobs and the pending job in the order allocate serves them (on the ``feasible`` nodes, if
    given: ``_place``)."""
    victims = {u.job.key: u.job for u in units}
    involved = [*victims.values(), att.job]
    if _others_matter({j.queue for j in involved}):
        in_turn = turns(serving_order(session, att, victims), involved)
    else:  # (``turns`` of a serving order of one leaf: its line, which needs no order made)
        in_turn = iter(in_one_leaf(session, involved, _own_key(att, victims)))
    lent = session.releasing()
    groups = session.lend(lent)
    placed: Placements | None = None
    moved: list[Pod] = []
    away: bytearray | None = None
    served: set[str] = set()  # the victims whose turn came
    to_place: dict[str, int] = {}  # consolidation: how many pods each victim's turn still places
    room = _room_for_batch(session, att)
    try:
        for job in in_turn:
            if job is att.job:
                placed = _place(session, att, job, att.batch, None, feasible)
                if placed is None:
                    return None
                away = away_from_rest(session, att)
                if att.action == Action.CONSOLIDATE:
                    to_place = _stay(session, att, [u for u in units if u.job.key not in served])
                if all(stuck(session, v) for key, v in victims.items() if key not in served):
                    break  # the turns left change nothing, whatever their order: no more pops (``stuck``)
            else:
                served.add(job.key)
                if stuck(session, job):
                    continue  # its turn changes nothing
                if job.key in to_place:
                    moved += _take_back(session, att, job, [], None, feasible, to_place[job.key])
                else:
                    after = placed is not None
                    back = _take_back(session, att, job, units if after else [], away if after else None, feasible)
                    if back and not after and room is not None and not room():
                        return None  # the job's turn, still to come, would find no room: ``_room_for_batch``
                    moved += back
    finally:
        session.unlend(lent, groups)
    if placed is None:
        return None
    moved = _restore(session, moved)
    for u in units:  # a unit whose place nobody took was not needed: whole, or not at all (gangs stay whole),
        if stuck(session, u.job):  # (and only if the pending job's queues stay within their limits with it back)
            continue  # none of its pods can go back
        cp = session.checkpoint()
        if not all(session.restore(p) for p in u.pods if p.status == _EVICTED) or \
                above(att):
            session.rollback(cp)
    return Outcome([u for u in units if _EVICTED in map(_STATUS, u.pods)], moved, placed, units=list(units))


def stuck(session: Session, job: Job) -> bool:
    """Whether a victim job's turn (``_take_back``) can change nothing now: every pod of the job takes whole GPUs, at
    least ``w`` of them, and no node has ``w`` idle GPUs (``NodeIndex.buckets``). A whole-GPU pod goes back onto its
    own devices only where they are all unused (``NodeIndex.fits_exactly``: the node then has that many idle), and a
    placement puts one only on a node of a bucket with that many idle or more (``best_node``, the greedy fills, the
    rooms' counts). Such a turn leaves the session as it was, so the state each later turn sees does not depend on
    it (bench_victims: most victims' turns after the job's, whose place the job took, and whose pods fit nowhere
    else)."""
    known = session.whole_least
    least = known.get(id(job))
    if least is None:
        least = min((p.gpu_whole for p in job.pods), default=0)
        known[id(job)] = least
    if not least:
        return False
    return not any(session.index.buckets[least:])


def _room_for_batch(session: Session, att: Attempt) -> Callable[[], bool] | None:
    """For a batch of pods of one shape with whole GPUs or none (``gang.alike``), more than one: whether the nodes
    its pods may go to have room for all of them now (``NodeIndex.rooms``, the room of every node the pods'
    signature may use: the nodes its placement may use are among them). Before the job's turn a scenario only
    places pods (the victims taking their turns), so once the room is short the job's turn places nothing, and the
    scenario nothing: it ends there, where the turns before the job's were taken and the job's placement tried. None
    where the room does not decide (pods of several shapes, shared GPUs, or one pod, which ``gang.place`` places
    without counting the room)."""
    batch = att.batch
    if len(batch) < 2 or not gang.alike(batch):
        return None
    pod, need, index = batch[0], len(batch), session.index
    return lambda: index.rooms(pod).total >= need


def serving_order(session: Session, att: Attempt, victims: dict[str, Job]) -> ByQueue:
    """The order in which a scenario of ``att`` with ``victims`` (by key) serves its jobs: the victims, the pending
    job and, where their turns matter (``_others_matter``), the other waiting jobs of the queues involved. Those are
    the same in every scenario of the attempt that involves the same queues, with the same keys (``_keys``), but for
    the ones that are victims in it (their pods moved): their order is made once per attempt and set of queues
    (``Attempt.orders``) and copied, where each scenario pushed and sorted them again."""
    involved = {j.queue for j in victims.values()} | {att.job.queue}
    request = _asks(session, att, victims)
    jobs = [*victims.values(), att.job]
    if not _others_matter(involved):
        return job_order(session, jobs, request=request, keys=_own_key(att, victims))
    key = _keys(att)
    queues = frozenset(involved)
    made = att.orders.get(queues)
    if made is None:  # (the victims of this scenario left out: their keys cannot be read as the attempt found them)
        waiting = [job for q in involved for job in waiting_in(session, att, q) if job is not att.job]
        others = [job for job in waiting if job.key not in victims]
        made = att.orders[queues] = (job_order(session, others, keys={id(job): key(job) for job in others}),
                                     {id(job) for job in others}, [job for job in waiting if job.key in victims])
    template, held, absent = made
    order = template.copy(request)
    for job in victims.values():  # (read again below, as the pending job: their pods moved)
        if id(job) in held:
            order.remove(job, key(job))
    for job in absent:
        if job.key not in victims:
            order.push(job, key(job))
    order.push_all(jobs, _own_key(att, victims))
    return order


def _own_key(att: Attempt, victims: dict[str, Job]) -> dict[int, JobKey]:
    """id(job) -> ``job_key`` of the pending job, kept in the attempt (``_keys``): no scenario changes its pods before
    its order is made (its batch is placed in its turn; and it is never its own victim here: else it is read
    afresh)."""
    job = att.job
    return {} if job.key in victims else {id(job): _keys(att)(job)}


def in_one_leaf(session: Session, jobs: list[Job], keys: Mapping[int, JobKey] | None = None) -> list[Job]:
    """The turns of ``jobs``, all of one queue, where no other job's turn matters (``_others_matter``): the queue's
    line of them (``ByQueue.push_all``: by ``job_key``; none where the queue is unknown or not a leaf), as ``turns``
    hands them out of a serving order of them alone, without making the order (bench_victims: 96 of a first-fit
    cycle's 333 scenarios); ``keys``: id(job) -> its key where the caller knows it."""
    queue = session.snap.queues.get(jobs[0].queue)
    if queue is None or queue.children:
        return []
    if not keys:
        return sorted(jobs, key=job_key)
    return sorted(jobs, key=lambda job: keys.get(id(job)) or job_key(job))


def _others_matter(involved: set[str]) -> bool:
    """Whether the turns of the waiting jobs that a scenario does not involve can decide which of its jobs comes
    next: only where its jobs wait in more than one leaf queue. In one leaf, ``turns`` hands them out in the leaf's
    order, which is theirs among themselves whatever else waits there (a preemptor's scenarios, and the first of
    every search, with no victims, pushed every waiting job of the queue for nothing)."""
    return len(involved) > 1


def _asks(session: Session, att: Attempt, victims: dict[str, Job]) -> Callable[[Job], Vec]:
    """``request_of`` for one scenario of ``att``, with the waiting jobs' answers kept in the attempt: a scenario
    changes the pods of its victims and of the pending job only, and each starts from the session as the attempt
    found it but for the victims' evictions, so a job that is neither asks the same in every scenario (an elastic
    job can be a victim in one scenario and only waiting in another: it is asked afresh where it is a victim)."""
    ref = session.small_ref
    known = att.requests

    partial = att.tasks is not None and len(att.batch) < len(att.tasks)

    def request(job: Job) -> Vec:
        if job is att.job and partial:
            return att.request  # KAI orders the partial job by what it asks
        if job is att.job or job.key in victims:
            return job_request(tasks(att, job), ref)
        value = known.get(id(job))
        if value is None:
            value = known[id(job)] = job_request(tasks(att, job), ref)
        return value

    return request


def _keys(att: Attempt) -> Callable[[Job], JobKey]:
    """``job_key`` of the waiting jobs that are no victim of a scenario of ``att``, kept in the attempt: the key
    reads a job's priority, age and where it stands against its gang minimum, and no scenario changes such a job's
    pods (``_asks``)."""
    known = att.keys

    def key(job: Job) -> JobKey:
        value = known.get(id(job))
        if value is None:
            value = known[id(job)] = job_key(job)
        return value

    return key


def waiting_in(session: Session, att: Attempt, queue: str) -> list[Job]:
    """The jobs of ``queue`` with a pending pod, as the attempt found them (kept in ``att.waiting``), in the order of
    ``Session.jobs_in``."""
    known = att.waiting.get(queue)
    if known is None:
        known = att.waiting[queue] = _pending_in(session, queue)
    return known


def _pending_in(session: Session, queue: str) -> list[Job]:
    """The jobs of ``queue`` (no errors) with a pending pod as the session stands, read from the eviction actions'
    roles where they know (``evictions.Roles.pending``: exact as the session stood after its first ``Roles.ops``
    operations, which no search takes back) and from the job's pods only for the jobs of the operations since. The
    queue's jobs are not walked: its pending ones are found by their place in it (``Session.places``) among the
    roles' (bench_victims: an attempt of reclaim walked 42-195 jobs of a queue for 2-14 pending ones; 2.2% of a
    first-fit cycle's opcodes)."""
    jobs = session.jobs_in(queue)
    roles = session.roles
    if roles is None or roles.ops > len(session.ops):
        return [j for j in jobs if not j.errors and _has_pending(j)]
    at = session.places(queue)
    moved = {id(job): job for op in session.ops[roles.ops:] if (job := op.pod.job) is not None}
    found = [at[i] for i in at.keys() & roles.pending if i not in moved]
    found += [at[i] for i, job in moved.items() if i in at and _has_pending(job)]
    found.sort()
    return [job for i in found if not (job := jobs[i]).errors]


def _has_pending(job: Job) -> bool:
    return any(p.status == _PENDING for p in job.pods)


def turns(order: ByQueue, involved: list[Job]) -> Iterator[Job]:
    """The ``involved`` jobs of a scenario (the victims' and the pending one) as their turns come in ``order``,
    each handed out once the session shows what the turns before it did. The other jobs' turns change nothing (a
    scenario places no one else): they are popped only while their place in the order can decide which of the
    involved jobs comes next; once those left all wait in one leaf queue, they come in that queue's order (a leaf
    hands out its jobs in the order they were pushed) without the pops before them."""
    left = {id(j) for j in involved}
    leaves: dict[str, int] = {}  # queue -> its involved jobs not handed out yet (a Counter cost more to make)
    for j in involved:
        leaves[j.queue] = leaves.get(j.queue, 0) + 1
    while left:
        if len(leaves) == 1:
            (queue,) = leaves
            yield from [j for j in order.leaves.get(queue, []) if id(j) in left]
            return
        job = order.pop()
        if job is None:
            return
        if id(job) in left:
            left.discard(id(job))
            leaves[job.queue] -= 1
            if not leaves[job.queue]:
                del leaves[job.queue]
            yield job
        else:
            skip_alike(order, job, lambda j: id(j) not in left)


def skip_alike(order: ByQueue, job: Job, passed: Callable[[Job], bool]) -> None:
    """After ``job`` was popped and its turn changed nothing: hand out the jobs after it in its leaf whose turns
    change nothing either (``passed``) and that ask no more than it asked of any resource, without the pops. A pop
    that changes nothing but its leaf's head picks its leaf by that head's request alone (at every level of the tree:
    the key of each rule, and the tie rules read the queues only), and each element of a key grows with the request
    or reads none of it (``order._key``: within the deserved share with it, asking what the queue has no share of,
    the dominant share with it), so a head that asks no more keys its leaf, and each queue above it, no later than
    the popped job did, with the other queues' keys as they were: each of those pops would pick the same leaf
    again."""
    asked = order.request(job)
    a0, a1, a2 = asked
    line = order.leaves[job.queue]
    while line and passed(line[0]):
        r0, r1, r2 = order.request(line[0])
        if r0 > a0 or r1 > a1 or r2 > a2:
            return
        order.skip(job.queue)


def _restore(session: Session, moved: list[Pod]) -> list[Pod]:
    """Moved pods go back where they were where that is free now (they were never victims); returns the
    others. Each one put back can free the place of another, so until none can."""
    left = list(moved)
    while True:
        back = [p for p in left if session.restore(p)]
        if not back:
            return left
        left = [p for p in left if p not in back]


def _take_back(session: Session, att: Attempt, job: Job, units: list[Unit], region: bytearray | None,
               feasible: bytearray | None = None, turn: int | None = None) -> list[Pod]:
    """A victim job's turn: its evicted pods go back where they were if that is still free (they were never
    victims), the next ones it needs wherever they fit (moved) within ``region`` (None: anywhere), at most
    ``turn`` of them (None: as many as ``gangs.tasks_to_allocate`` gives); returns the moved pods. Its pods among
    ``units`` (given once the job is placed, in reclaim and preempt) that can go back do so first, so that a gang
    moved because it lost a pod where the job lands keeps its other pods in their places (placed as one batch, a
    gang mate could take such a place and move the pod that held it; issue 15); if the rest cannot be placed,
    none goes back here. A job whose evicted pods include one allocate placed in this cycle is not moved: they wait
    for the next cycle's allocate (they never ran, and moving them would undo allocate's placement in its own cycle;
    a gang moved so could be moved again for the same beneficiary a cycle later, as tests/test_eviction_properties'
    test_no_oscillation found)."""
    cp = session.checkpoint()
    for u in units:
        if u.job is job:
            for p in u.pods:
                _back(session, att, p)
    batch = tasks(att, job)
    if turn is not None:
        batch = batch[:turn]
    if not batch:
        return []
    if any(p.status == _EVICTED and session.placed_this_cycle(p) for p in batch):
        if gangs.elastic_state(job) == gangs.ElasticState.BELOW:
            session.rollback(cp)  # none back: the pods put back would run below the gang's minimum
        return []
    back = _place(session, att, job, batch, region, feasible)
    if back is None:
        session.rollback(cp)
    return [p for p, _, _ in back or [] if p.status == _PIPELINED]  # (not one put back on its node: ``Session._home``)


def _stay(session: Session, att: Attempt, units: list[Unit]) -> dict[str, int]:
    """Consolidation, once the job is placed: before any victim still waiting for its turn is placed anew, each
    keeps in their places the pods of ``units`` that can stay, as many as its turn would place (KAI's turn,
    ``gangs.tasks_to_allocate``); returns per victim job how many pods its turn still places. A gang evicted whole
    and placed again as one batch moved a pod onto its mate's place (issue 15), and a victim placed anew before
    another's turn could take the place that victim's pod could have stayed in. No more than KAI's turn: an
    elastic victim's second pod, which KAI leaves evicted, must not make a plan possible that KAI's does not."""
    turns: dict[str, int] = {}
    for u in units:
        key = u.job.key
        if key not in turns:  # before any of its pods is back
            turns[key] = len(tasks(att, u.job))
        for p in u.pods:
            if turns[key] > 0 and _back(session, att, p):
                turns[key] -= 1
    return turns


def _back(session: Session, att: Attempt, pod: Pod) -> bool:
    """An evicted victim pod back in its place, if that is free and the job's queues stay within their limits with
    it (as in ``_replace``)."""
    one = session.checkpoint()
    if pod.status != _EVICTED or not session.restore(pod):
        return False
    if above(att):
        session.rollback(one)
        return False
    return True


def above(att: Attempt) -> bool:
    """``above_limit(att.queue, att.request)`` with the limits on the queue's path that the request asks for read
    once per attempt and request (``Attempt.caps``; a queue's limits stay put within an action): most queues have
    none, and a scenario asks after every victim pod it puts back."""
    caps = att.caps.get(att.request)
    if caps is None:
        req = att.request
        caps = att.caps[req] = tuple((anc, r, lim) for anc in att.queue.path() for r in range(3)
                                     if req[r] and (lim := anc.effective_limit(r)) != UNLIMITED)
    return bool(caps) and any(anc.allocated[r] > lim for anc, r, lim in caps)


def away_from_rest(session: Session, att: Attempt) -> bytearray | None:
    """``_away_from_rest``, worked out once per attempt and its partial jobs (they share the whole batch, and which
    of the job's other pods wait does not change in their scenarios); a fresh copy each time (the caller's to
    intersect)."""
    whole = att.batch if att.tasks is None else att.tasks
    known = att.away.get(id(whole), _UNKNOWN)
    if known is _UNKNOWN:
        known = att.away[id(whole)] = _away_from_rest(session, att)
    return None if known is None else bytearray(known)


_UNKNOWN = bytearray()  # (no answer kept yet: ``away_from_rest``)


def _away_from_rest(session: Session, att: Attempt) -> bytearray | None:
    """Where a victim whose turn comes after the job was placed may be moved to: the nodes none of the job's
    waiting pods beyond ``att.batch`` may use (selectors, affinity, taints). An elastic job gets one pod per
    cycle: a victim moved onto a node its next pods may use is the victim of their turn and restarts a second
    time for the same job (issue 15); elsewhere it stays evicted and waits like any evicted pod. None (anywhere):
    the job has no such pods, or consolidation moves the victims (there every one must land again)."""
    batch = {id(p) for p in (att.batch if att.tasks is None else att.tasks)}
    rest = [p for p in att.job.pods if p.status == _PENDING and id(p) not in batch]
    if not rest or att.action == Action.CONSOLIDATE:
        return None
    index = session.index
    masks = [index.static_mask(p) for p in {p.sig: p for p in rest}.values()]
    return _none_of(masks, len(index.nodes))


def _none_of(masks: list[bytearray], size: int) -> bytearray:
    """1 for each node that no mask sets (masks of 0s and 1s, ``size`` long), worked out at C speed."""
    union = masks[0]
    if len(masks) > 1:
        bits = 0
        for m in masks:
            bits |= int.from_bytes(m, "big")
        union = bytearray(bits.to_bytes(size, "big"))
    return bytearray(union.translate(_FLIP))


def _place(session: Session, att: Attempt, job: Job, batch: list[Pod], region: bytearray | None = None,
           feasible: bytearray | None = None) -> Placements | None:
    """Pipeline ``batch`` of ``job`` where it fits now (victims gone, releasing pods lent), or None; ``region``:
    only on those nodes; ``feasible``: KAI's feasible nodes of the scenario (``by_node``), which bind only pods that
    use no GPU: a pod that uses one fits only where a device is (partly) free, and during a scenario a device is
    freed only by its victims, whose nodes are feasible, as are the nodes with a device free or releasing when the
    attempt began (the placement reads no mask it need not: ``gang.place`` intersects it with every topology
    domain)."""
    if not batch:
        return None
    if feasible is not None and not all(p.gpu_whole or p.frac_devices for p in batch):
        region = feasible if region is None else bytearray(a & b for a, b in zip(region, feasible, strict=True))
    queue = session.snap.queues[job.queue]
    if att.limits.crosses(queue, job_request(batch, session.ref), job.preemptible):  # (``limit_violation``, without
        return None  # the words of its reason, which a scenario does not read)
    topo = gang.Topo(job.required_level, job.preferred_level) if job.topology is not None else None
    within = gangs.domain_of_running(job, session)
    if region is not None and (within is not None or topo is None or not topo.required):
        # (``gang.place`` reads a region as the job's domain: a required domain not chosen yet is looked for anywhere)
        within = region if within is None else bytearray(a & b for a, b in zip(within, region, strict=True))
    nest = subtopo.nest(session, job, batch) if job.subgroups else None
    if nest is not None:  # sub-groups with their own topology constraints: each inside the job's domain by its own
        plan = gang.place_nested(nest, session.index, session.cfg.placement.gpu == "spread", "greedy",
                                 session.cfg.placement.solverTimeLimitSeconds, within=within)
    else:
        plan = gang.place(batch, session.index, session.cfg.placement.gpu == "spread", topo, "greedy",
                          session.cfg.placement.solverTimeLimitSeconds, within=within, bound=False)
    if not plan.placements or charged_violation(queue, job, plan.placements) is not None:
        return None
    session.pipeline_all(job, plan.placements, att.action, att.job.key)
    return plan.placements
