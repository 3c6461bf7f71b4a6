"""What a cycle reads of each job as it begins, carried to the next cycle for the jobs that did not change (issue 15).

Every cycle read every job of the cluster and its pods several times: the eviction actions' roles (which jobs wait,
which may be victims: a pass over the pods), their job order's keys, the stale-gang check (a pass over each job's
pods), the pipelined pods' check and the decisions' pending jobs (a pass over the pods each). On the daemon's live
model nearly every job is the one the last cycle read. So a cycle reads the jobs once as it begins (``Roll.of``),
each job's ``Facts`` taken from the last cycle's where they hold, and hands them on in its ``SearchMemory``.

When a fact holds. A job's facts are a function of the job's fields and of its pods' fields (statuses, labels,
releasing, creation, names). The live model never writes to a job or a pod it handed out: it reads a changed job
into a new ``Job``, and it gives a job whose pods it read again (or whose node accounted them again) a new pods list
(``LiveModel._read_job``, ``_relink``); and what a cycle writes on them it records first in the snapshot's journal,
undone before the model moves on (``kaid.model.journal``). So where the next cycle finds the same job object with
the same pods list, none of whose pods this cycle wrote (the journal says which), its facts are those this cycle
read. ``Facts`` holds the job and its pods list, so that no other object can take their ``id``s while they are
kept. Snapshots of plain objects (the simulator, dry-runs, tests, whose objects a caller may change in place)
carry nothing: only a snapshot with a journal does.

Within a cycle the facts are those of the snapshot as it was handed out; the actions' operations change pods, and
their users bring them up to date from ``Session.ops`` as before (``evictions.Roles.catch_up``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaid.actions import gangs
from kaid.actions.order import JobKey
from kaid.model.journal import Journal
from kaid.model.objects import Job, Pod, Snapshot
from kaid.model.vocabulary import BOUND_OR_RUNNING, PodStatus

_PENDING, _PIPELINED = PodStatus.PENDING, PodStatus.PIPELINED
_ACTIVE = gangs.ACTIVE
_LIVE = BOUND_OR_RUNNING


class Facts:
    """What the cycles read of one job and its pods (as the snapshot handed them out)."""

    __slots__ = ("job", "key", "pending", "pipelined", "pods", "possible", "running", "stale")

    def __init__(self, job: Job, pods: list[Pod], pending: bool, running: bool, pipelined: bool, possible: bool,
                 stale: bool, key: JobKey | None = None) -> None:
        self.job = job  # (held: no other object takes its id while these facts are kept)
        self.pods = pods  # the job's pods list as read: a live model makes a new one whenever a pod of it changes
        self.pending = pending  # a pod pending
        self.running = running  # a pod running or bound, not on its way out
        self.pipelined = pipelined  # a pod pipelined
        self.possible = possible  # enough pods for its gang (``gangs.gang_possible``)
        self.stale = stale  # some of it runs, below its gang minimum (``stale._stale``)
        self.key = key  # its ``order.job_key``, where a cycle worked it out (never changed once set: see ``handed_on``)


def read(job: Job) -> Facts:
    """A job's facts, read from it and its pods."""
    pods = job.pods
    pending = pipelined = False
    live = active = 0
    for p in pods:
        status = p.status
        if status == _PENDING:
            pending = True
            continue  # (neither running nor active)
        if status == _PIPELINED:
            pipelined = True
        if p.releasing:
            continue
        if status in _LIVE:
            live += 1
        if status in _ACTIVE:
            active += 1
    if not job.subgroups:  # one pod set: ``gangs.gang_possible`` and ``stale._stale`` without the gang tree
        possible = len(pods) >= job.min_member
        stale = live > 0 and active < job.min_member
    else:
        possible = gangs.gang_possible(job)
        stale = live > 0 and not gangs.gang_of(job).satisfied()
    return Facts(job, pods, pending, live > 0, pipelined, possible, stale)


@dataclass
class Roll:
    """The jobs of a cycle's snapshot as it was handed out: each one's facts (by ``id``), and the sets and lists
    its users read, in the snapshot's order of jobs."""

    facts: dict[int, Facts]
    pending: set[int] = field(default_factory=set)  # id(job) of the jobs with a pending pod
    pending_jobs: list[Job] = field(default_factory=list)  # those jobs, as read (``changed`` does not touch it)
    running: set[int] = field(default_factory=set)  # ... with a pod running or bound, not on its way out
    pipelined: list[Job] = field(default_factory=list)  # the jobs with a pipelined pod
    waiters: list[Job] = field(default_factory=list)  # no errors, in a known leaf queue, enough pods for the gang
    victims: list[Job] = field(default_factory=list)  # no errors, in a known leaf queue, preemptible
    # the jobs ``stale_gangs`` reads: stale as read, or stale since some time (it clears those that no longer are)
    stale: list[Job] = field(default_factory=list)
    keys: dict[int, JobKey] = field(default_factory=dict)  # id(job) -> its job_key, where known
    moved: set[int] = field(default_factory=set)  # jobs the cycle changed before its actions (``ready_pipelined``)

    @classmethod
    def of(cls, snap: Snapshot, carried: dict[int, Facts] | None) -> Roll:
        """The roll of ``snap``'s jobs, the facts in ``carried`` (the last cycle's) taken where they hold."""
        known = {name for name, q in snap.queues.items() if not q.errors and not q.children}
        facts: dict[int, Facts] = {}
        roll = cls(facts)
        pending, running, keys, pending_jobs = roll.pending, roll.running, roll.keys, roll.pending_jobs
        carried = carried or {}
        for job in snap.jobs.values():
            jid = id(job)
            f = carried.get(jid)
            if f is None or f.job is not job or f.pods is not job.pods:
                f = read(job)
            facts[jid] = f
            if f.pending:
                pending.add(jid)
                pending_jobs.append(job)
            if f.running:
                running.add(jid)
            if f.pipelined:
                roll.pipelined.append(job)
            if f.stale or job.stale_since is not None:
                roll.stale.append(job)
            if f.key is not None:
                keys[jid] = f.key
            if not job.errors and job.queue in known:
                if f.possible:
                    roll.waiters.append(job)
                if job.preemptible:
                    roll.victims.append(job)
        return roll

    def waiting(self, snap: Snapshot) -> list[Job]:
        """The jobs with a pending pod as the actions begin (``pending`` now), in the snapshot's order of jobs: those
        read so as the cycle began, unless ``changed`` read some again (then from a pass over the snapshot's jobs,
        ``snap`` being the roll's). Allocate's order is made of these (a job with no pending pod does not wait)."""
        if not self.moved:
            return self.pending_jobs
        pending = self.pending
        return [job for job in snap.jobs.values() if id(job) in pending]

    def changed(self, jobs: list[Job]) -> None:
        """``jobs`` were changed before the actions began (``cycle.ready_pipelined``): read them again (their facts
        are not handed on: the journal names their pods)."""
        for job in jobs:
            jid = id(job)
            f = read(job)
            self.moved.add(jid)
            self.keys.pop(jid, None)
            (self.pending.add if f.pending else self.pending.discard)(jid)
            (self.running.add if f.running else self.running.discard)(jid)

    def handed_on(self, journal: Journal, keys: dict[int, JobKey]) -> dict[int, Facts]:
        """The facts for the next cycle: those of the jobs none of whose pods this cycle wrote (``journal``), with
        the ``keys`` worked out for them (``evictions.Roles.keys``)."""
        facts = self.facts
        for pod, *_ in journal.pods.values():
            if pod.job is not None:
                facts.pop(id(pod.job), None)
        for jid in keys.keys() - self.keys.keys():  # (those the roll had are the facts' own)
            f = facts.get(jid)
            if f is not None and f.key is None:
                facts[jid] = Facts(f.job, f.pods, f.pending, f.running, f.pipelined, f.possible, f.stale, keys[jid])
        return facts
