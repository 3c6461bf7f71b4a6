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
fingerprint and every job is searched again. The clock enters only through what it decides, and the memory ends
when one of those could turn: a victim's min-runtime protection running out, a releasing pod becoming stuck. The
victims' cost, GPU-seconds of progress lost, grows with the clock too, but no vain search reads it: first-fit takes
victims in KAI's order (queues and job order, no running time) and only a search that found victims goes on to the
cheaper set (``evictions._cheaper``), so the order of two victims' costs flipping cannot make a vain search succeed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kaid.api.config import Action, SchedulerConfig
from kaid.model.objects import Reason, Snapshot
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


def fingerprint(snap: Snapshot, cfg: SchedulerConfig) -> int:
    """A hash of everything an eviction search reads but the clock: nodes, pods, jobs, queues (with their fair
    shares), budgets, topologies, priority classes and the config. Equal fingerprints: the same searches."""
    parts: list[object] = [cfg.model_dump_json(), repr(sorted(snap.topologies.items())),
                           repr(sorted((k, v.value, v.preempt_never) for k, v in snap.priority_classes.items())),
                           tuple((b.namespace, b.name, repr(b.selector), b.disruptions_allowed) for b in snap.budgets)]
    guarded = {b.namespace for b in snap.budgets}  # pod labels matter where a budget may select them
    for n in snap.nodes:
        parts.append((n.name, n.ready, n.unschedulable, n.alloc_cpu, n.alloc_mem, n.alloc_pods, n.gpus, n.gpu_mem_mib,
                      n.used_cpu, n.used_mem, n.used_pods, tuple(n.dev_used), tuple(n.dev_group),
                      repr(sorted(n.labels.items())), repr(n.taints)))
    for p in snap.pods:
        parts.append((p.key, p.uid, p.job.key if p.job is not None else None, p.status, p.phase, p.node, p.devices,
                      p.gpu_group, p.releasing, p.deleted, p.started, p.created, p.cpu, p.mem, p.gpu_whole, p.gpu_frac,
                      p.gpu_mem_mib, p.frac_devices, p.sig, p.pipeline_action,
                      repr(sorted(p.labels.items())) if p.namespace in guarded else None))
    for j in snap.jobs.values():
        parts.append((j.key, j.queue, j.min_member, j.min_subgroup, j.priority, j.priority_class, j.preemptible,
                      j.preempt_never, j.preemptibility, j.created, len(j.errors), j.topology, j.required_level,
                      j.preferred_level, j.stale_grace, j.stale_since, repr(j.subgroups), j.request_milli,
                      tuple(p.key for p in j.pods)))
    for q in snap.queues.values():
        parts.append((q.name, q.parent_name, q.priority, q.created, len(q.errors), tuple(q.quota), tuple(q.limit),
                      tuple(q.weight), tuple(q.requested), tuple(q.allocated), tuple(q.alloc_np), tuple(q.deserved),
                      tuple(q.fair), q.preempt_min_runtime, q.reclaim_min_runtime))
    return hash(tuple(parts))


def horizon(snap: Snapshot, stuck_after: float) -> float:
    """The first moment after ``snap.now`` at which the clock changes what a search reads: a running pod's
    min-runtime protection (reclaim's or preempt's, the nearest queue on its path that sets one) running out, or a
    releasing pod becoming stuck (``stuck_after`` seconds after its deletion)."""
    now = snap.now
    until = NEVER
    protect: dict[str, tuple[float, float]] = {}
    for q in snap.queues.values():
        runtimes = []
        for action in (Action.RECLAIM, Action.PREEMPT):
            value = 0.0
            for anc in q.path():
                value = anc.reclaim_min_runtime if action == Action.RECLAIM else anc.preempt_min_runtime
                if value > 0:
                    break
            runtimes.append(value)
        protect[q.name] = (runtimes[0], runtimes[1])
    live = (PodStatus.RUNNING, PodStatus.BOUND)
    for p in snap.pods:
        if p.releasing:
            t = p.deleted + stuck_after
            if t >= now:
                until = min(until, t)
        elif p.status in live and p.job is not None:
            for runtime in protect.get(p.job.queue, (0.0, 0.0)):
                t = p.started + runtime
                if runtime > 0 and t > now:
                    until = min(until, t)
    return until
