"""What the eviction actions searched in vain, carried from one cycle to the next as plain data (issue 15).

A victim search that finds nothing (consolidate, reclaim or preempt) is deterministic: given the same cluster, the
same config and the same clock horizon, it finds nothing again, spends the same scenarios and leaves the same
reasons. The daemon runs a cycle every period whether or not anything changed, and on a full cluster whose pods
wait, each of those cycles repeated every vain search. So a cycle's decisions carry a ``SearchMemory``: for each
eviction action, a fingerprint of everything its searches read (the snapshot as the cycle saw it after fair shares,
the config, and the tentative operations before the action began) and the jobs it found nothing for. The next
cycle, given that memory, skips those jobs in an action whose fingerprint is the same (and only until the action's
first success in that cycle, after which the cluster differs): it charges the scenarios the search spent and says
the reasons it said, so the jobs after it see the same budget and the decisions are the same as without the memory
(``tests/test_search_memory.py``).

Conservative by construction: any change to any node, pod, job, queue, budget or the config changes the
fingerprint and every job is searched again. The daemon's live model keeps the fingerprint of its nodes, pods and
jobs up to date as they change (``kaid.model.fingerprint``), so that a cycle hashes only the queues, the policies
and the config (it hashed every object of the cluster: a quarter of a quiet cycle at 4,000 nodes); plain objects (the
simulator, dry-runs) are hashed one by one, as before. In the same world, the last cycle's horizon holds too.

The clock enters only through what it decides, and the memory ends when one of those could turn: a victim's
min-runtime protection running out, a releasing pod becoming stuck. The victims' cost, GPU-seconds of progress lost,
grows with the clock too, but no vain search reads it: first-fit takes victims in KAI's order (queues and job order,
no running time) and only a search that found victims goes on to the cheaper set (``evictions._cheaper``), so the
order of two victims' costs flipping cannot make a vain search succeed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kaid.actions.carried import Facts
from kaid.api.config import SchedulerConfig
from kaid.model.fingerprint import job_fields, labels_of, node_fields, pod_fields
from kaid.model.jobs import delay_end
from kaid.model.objects import Reason, Snapshot
from kaid.model.queues import min_runtimes
from kaid.model.vocabulary import PodStatus

NEVER = float("inf")


@dataclass(frozen=True, slots=True)
class Miss:
    """A job's vain search: the scenarios it simulated and the reasons it left."""

    scenarios: int
    said: tuple[Reason, ...]


@dataclass
class SearchMemory:
    """The eviction actions' vain searches of one cycle (``Decisions.memory``), for the next (``run_cycle``'s
    ``memory``)."""

    worlds: dict[str, int] = field(default_factory=dict)  # action -> fingerprint of what its searches read
    misses: dict[str, dict[str, Miss]] = field(default_factory=dict)  # action -> job key -> its vain search
    until: float = NEVER  # valid while the clock is before this (a protection ends, a releasing pod gets stuck)
    vain: set[str] = field(default_factory=set)  # actions none of whose searches succeeded (each in ``misses``)
    world: int | None = None  # the cycle's fingerprint
    at: float = NEVER  # the cycle's clock (``until`` is the ``horizon`` of that world from then)
    # id(job) -> what the cycle read of the job, for the next cycle where the job did not change (a live model's
    # snapshots only: ``kaid.actions.carried``)
    carried: dict[int, Facts] = field(default_factory=dict)

    def holds(self, action: str, world: int, now: float) -> bool:
        """Whether what ``action`` found in vain holds in a world with this fingerprint at ``now``."""
        return now < self.until and self.worlds.get(action) == world


@dataclass
class Recall:
    """What a cycle's eviction actions read (``before``, the last cycle's memory) and write (``after``), and the
    fingerprint of the cycle's snapshot and config (``fingerprint``)."""

    before: SearchMemory
    after: SearchMemory
    cycle: int


def recall(memory: SearchMemory, snap: Snapshot, cfg: SchedulerConfig, stuck_after: float) -> Recall:
    """A cycle's memory: the last cycle's, and its own, begun with the world's fingerprint and horizon. The horizon
    of the last cycle's world holds as long as the clock has not reached it (no moment the clock would change a
    search at lies between the two cycles' clocks), so a cycle in the same world does not read every pod for it."""
    world = fingerprint(snap, cfg)
    if memory.world == world and memory.at <= snap.now < memory.until:
        until = memory.until
    else:
        until = horizon(snap, stuck_after)
    return Recall(memory, SearchMemory(until=until, world=world, at=snap.now), world)


def fingerprint(snap: Snapshot, cfg: SchedulerConfig) -> int:
    """A hash of everything an eviction search reads but the clock: nodes, pods, jobs, queues (with their fair
    shares), budgets, topologies, priority classes and the config. Equal fingerprints: the same searches.

    A live model's snapshot carries the fingerprint of its nodes, pods and jobs, kept up to date as they change
    (``Snapshot.parts``), and what was written on them since it was handed out is in its journal (the daemon holds
    some jobs back with an error); plain objects are hashed one by one (``kaid.model.fingerprint``)."""
    guarded = tuple(sorted({b.namespace for b in snap.budgets}))  # pod labels matter where a budget may select them
    parts: list[object] = [cfg.model_dump_json(), repr(sorted(snap.topologies.items())),
                           repr(sorted((k, v.value, v.preempt_never) for k, v in snap.priority_classes.items())),
                           tuple((b.namespace, b.name, repr(b.selector), b.disruptions_allowed) for b in snap.budgets)]
    if snap.parts is not None:
        parts.append(snap.parts.key(guarded))
        if snap.journal is not None and len(snap.journal):
            parts.append(_written(snap, set(guarded)))
    else:
        parts.append(_objects(snap, set(guarded)))
    for q in snap.queues.values():
        parts.append((q.name, q.parent_name, q.priority, q.created, len(q.errors), tuple(q.quota), tuple(q.limit),
                      tuple(q.weight), tuple(q.requested), tuple(q.allocated), tuple(q.alloc_np), tuple(q.deserved),
                      tuple(q.fair), q.preempt_min_runtime, q.reclaim_min_runtime))
    return hash(tuple(parts))


def _objects(snap: Snapshot, guarded: set[str]) -> tuple[object, ...]:
    """Every node, pod and job of a snapshot of plain objects, as a search reads them."""
    parts: list[object] = [node_fields(n) for n in snap.nodes]
    parts += [(pod_fields(p), labels_of(p) if p.namespace in guarded else None) for p in snap.pods]
    parts += [job_fields(j, tuple(p.key for p in j.pods)) for j in snap.jobs.values()]
    return tuple(parts)


def _written(snap: Snapshot, guarded: set[str]) -> tuple[object, ...]:
    """The objects of a live model's snapshot written on since it was handed out (its journal), as they are now."""
    journal = snap.journal
    assert journal is not None
    parts: list[object] = [node_fields(n) for n, *_ in journal.nodes.values()]
    parts += [(pod_fields(p), labels_of(p) if p.namespace in guarded else None) for p, *_ in journal.pods.values()]
    parts += [job_fields(j, tuple(p.key for p in j.pods)) for j, _ in journal.jobs.values()]
    return tuple(parts)


def horizon(snap: Snapshot, stuck_after: float) -> float:
    """The first moment after ``snap.now`` at which the clock changes what a search reads: a running pod's
    min-runtime protection (any its queue's path sets: which applies depends on the claimant) running out, a
    releasing pod becoming stuck (``stuck_after`` seconds after its deletion), or a job's preemption delay ending
    (``delay_end``: from then on it may evict)."""
    now = snap.now
    until = NEVER
    for job in snap.jobs.values():
        if job.preemption_delay is not None:
            end = delay_end(job)
            if end is not None and end > now:
                until = min(until, end)
    protect: dict[str, tuple[float, ...]] = {}  # queue -> the protections its running pods have (none: not kept)
    for q in snap.queues.values():
        runtimes = min_runtimes(q)
        if runtimes:
            protect[q.name] = tuple(sorted(runtimes))
    live = (PodStatus.RUNNING, PodStatus.BOUND)
    for p in snap.pods:  # (where no queue protects its pods, the releasing ones alone are read)
        if p.releasing:
            t = p.deleted + stuck_after
            if t >= now:
                until = min(until, t)
        elif protect and p.job is not None and p.status in live:
            for runtime in protect.get(p.job.queue, ()):
                t = p.started + runtime
                if t > now:
                    until = min(until, t)
    return until
