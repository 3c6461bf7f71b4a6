"""Reclaim (between queues) and preempt (inside a queue): evict the cheapest victims so a pending job
fits, and pipeline the job onto the resources being freed (DESIGN section 3, issue 3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kaid.actions.allocate import domain_of_running, queue_key, topo_of
from kaid.actions.limits import charged_violation, fmt, limit_violation
from kaid.actions.session import Session, job_request, ref_node
from kaid.actions.victims import (
    Constraint,
    Placements,
    Search,
    Unit,
    add_budgets,
    first_fit,
    rank,
    realise,
    solve,
    units_of,
)
from kaid.api.config import SchedulerConfig
from kaid.model.objects import CPU, GPU, Job, Pod, Queue, Reason
from kaid.placement import gang


@dataclass
class VictimStats:
    """One eviction decision, for the benchmark and the explanations."""

    job: str
    action: str
    method: str  # cpsat | first-fit
    gpus_evicted: float
    gpus_placed: float
    pods_evicted: int
    units: int


@dataclass
class EvictionStats:
    decisions: list[VictimStats] = field(default_factory=list)
    solver_s: float = 0.0


def min_runtime(q: Queue, action: str) -> float:
    """The nearest queue on the path that sets the protection for this action."""
    for anc in q.path():
        value = anc.reclaim_min_runtime if action == "reclaim" else anc.preempt_min_runtime
        if value > 0:
            return value
    return 0.0


def lca(a: Queue, b: Queue) -> Queue | None:
    above = {id(x) for x in a.path()}
    return next((x for x in b.path() if id(x) in above), None)


def below(q: Queue, top: Queue | None) -> list[Queue]:
    """q and its ancestors strictly below ``top``."""
    out = []
    for x in q.path():
        if x is top:
            break
        out.append(x)
    return out


def pending_jobs(session: Session) -> list[tuple[Job, Queue]]:
    snap = session.snap
    out = []
    for q in snap.queues.values():
        if q.children or q.errors:
            continue
        for job in q.jobs:
            if job.errors or not any(p.status == "Pending" for p in job.pods):
                continue
            if session.focus is not None and job.key != session.focus:
                continue
            out.append((job, q))
    out.sort(key=lambda jq: (queue_key(jq[1]), -jq[0].priority, jq[0].created, jq[0].key))
    return out


def needed(job: Job) -> list[Pod]:
    """The pods a job waits for: its gang (up to minMember), or one elastic pod once the gang runs."""
    pending = [p for p in job.pods if p.status == "Pending"]
    active = sum(1 for p in job.pods if p.active or p.status == "Allocated")
    need = job.min_member - active
    if need > len(pending) or not pending:
        return []
    return pending[:need] if need > 0 else pending[:1]


def _gpus(milli: int) -> str:
    return f"{milli / 1000:g}"


def run(session: Session, cfg: SchedulerConfig, action: str, reasons: dict[str, list[Reason]],
        stats: EvictionStats) -> None:
    snap = session.snap
    ref = ref_node(snap)
    unit_cache: _UnitCache = {}
    searches = 0
    failed_shapes: set[tuple[object, ...]] = set()
    for job, q in pending_jobs(session):
        batch = needed(job)
        if not batch:
            continue
        shape = (q.name, len(batch), batch[0].gpu_whole, batch[0].gpu_frac, batch[0].cpu, batch[0].mem,
                 batch[0].sig, job.priority, job.preemptible, job.topology)
        if shape in failed_shapes:
            continue  # a job just like it in the same queue found no victims this cycle
        req = job_request(batch, ref)
        r = GPU if req[GPU] else CPU
        if action == "reclaim" and limit_violation(q, req, job) is not None:
            continue  # its own queue's limit blocks it; taking from others cannot help
        if job.preempt_never:
            # Kubernetes' preemptionPolicy: Never means it evicts nobody: not in its queue, not in others
            if action == "preempt" and any(v.preemptible and v.priority < job.priority and v.active_count()
                                           for v in q.jobs):
                reasons.setdefault(job.key, []).append(Reason(
                    "PreemptionNever", f"priority class {job.priority_class} has preemptionPolicy: Never, so this "
                    "job waits for free resources instead of evicting other jobs"))
            continue
        units: list[Unit] = []
        protected = 0
        fair: dict[str, tuple[Queue, list[int]]] = {}
        why_not: list[str] = []
        if action == "reclaim":
            if q.allocated[r] + req[r] > q.fair[r]:
                if not any(o.allocated[r] > 0 for o in snap.queues.values() if not o.children and o is not q):
                    continue  # no other queue holds anything: there is nothing to take back
                reasons.setdefault(job.key, []).append(Reason(
                    "ReclaimNotPossible", f"queue {q.name} would go above its fair share ({fmt(r, q.allocated[r])} "
                    f"allocated + {fmt(r, req[r])} > {fmt(r, q.fair[r])}), so it cannot take resources back from "
                    "other queues; it runs when resources are idle",
                    {"queue": q.name, "allocated": q.allocated[r], "fairShare": q.fair[r], "requested": req[r]}))
                continue
            for victim_job in snap.jobs.values():
                w = snap.queues.get(victim_job.queue)
                if w is None or w is q or not victim_job.preemptible or victim_job is job:
                    continue
                top = lca(q, w)
                if any(x.allocated[r] + req[r] > x.fair[r] for x in below(q, top)):
                    continue
                side = below(w, top)
                if not side or any(y.allocated[r] <= y.fair[r] for y in side):
                    continue
                got, young = _units(victim_job, w, snap.now, "reclaim", unit_cache)
                protected += young
                for u in got:
                    units.append(u)
                    for y in side:
                        fair.setdefault(y.name, (y, []))[1].append(len(units) - 1)
            if not units:
                why_not.append("no preemptible jobs run in queues above their fair share" if not protected else
                               f"{protected} candidate pods are younger than their queue's reclaimMinRuntime")
        else:
            for victim_job in q.jobs:
                if victim_job is job or not victim_job.preemptible or victim_job.priority >= job.priority:
                    continue
                got, young = _units(victim_job, q, snap.now, "preempt", unit_cache)
                protected += young
                units.extend(got)
            if not units:
                why_not.append(f"no lower-priority preemptible jobs run in queue {q.name}" if not protected else
                               f"{protected} lower-priority pods are younger than preemptMinRuntime")
        if not units:
            if protected:
                reasons.setdefault(job.key, []).append(Reason(
                    "ReclaimNotPossible" if action == "reclaim" else "PreemptNotPossible",
                    f"could not {action}: {why_not[0]}", {"protectedPods": protected}))
            continue
        if searches >= cfg.maxVictimSearches:
            break
        searches += 1
        rank(units)
        search = Search(units)
        for y, ids in fair.values():
            search.fair.append(Constraint(ids, y.allocated[r] - y.fair[r], y.name, gpu=r == GPU))
        add_budgets(search, snap.budgets)
        done = _try(session, cfg, job, q, batch, search, action, stats, req, r)
        if not done:
            failed_shapes.add(shape)
        if not done and action == "reclaim":
            reasons.setdefault(job.key, []).append(Reason(
                "ReclaimNotPossible",
                f"could not reclaim: even evicting every allowed candidate ({len(units)} groups of pods in queues "
                "above their fair share) would not make room for the job without pushing one of those queues "
                "below its fair share or breaking a PodDisruptionBudget" + _budget_note(search),
                {"candidates": len(units)}))
        elif not done:
            reasons.setdefault(job.key, []).append(Reason(
                "PreemptNotPossible",
                f"could not preempt: even evicting all {len(units)} lower-priority preemptible pod groups of queue "
                f"{q.name} would not let this job fit (in free resources and within its queue's limits and quota)"
                + _budget_note(search), {"candidates": len(units)}))
        else:
            reasons.pop(job.key, None)


_UnitCache = dict[tuple[str, str], tuple[int, list[Unit], int]]


def _units(job: Job, q: Queue, now: float, action: str, cache: _UnitCache) -> tuple[list[Unit], int]:
    """Victim units of a job, kept for the action until one of its pods changes state."""
    running = sum(1 for p in job.pods if p.status in ("Running", "Bound") and not p.releasing)
    key = (job.key, action)
    hit = cache.get(key)
    if hit is not None and hit[0] == running:
        return hit[1], hit[2]
    units, young = units_of(job, q, now, min_runtime(q, action))
    cache[key] = (running, units, young)
    return units, young


def _message(action: str, job: Job, q: Queue, victim: Unit, r: int) -> str:
    w = victim.queue
    if action == "reclaim":
        return (f"reclaimed for {job.key}: queue {q.name} has {fmt(r, q.allocated[r])} allocated against a fair share "
                f"of {fmt(r, q.fair[r])}, queue {w.name} has {fmt(r, w.allocated[r])} against {fmt(r, w.fair[r])}")
    if action == "preempt":
        return (f"preempted by {job.key} (priority {job.priority}) in queue {q.name}: this job has priority "
                f"{victim.job.priority}")
    return f"evicted by {action} for {job.key}"


def _try(session: Session, cfg: SchedulerConfig, job: Job, q: Queue, batch: list[Pod], search: Search,
         action: str, stats: EvictionStats, req: tuple[int, int, int], r: int) -> bool:
    index = session.index
    spread = cfg.placement.gpu == "spread"
    topo = topo_of(job, session)
    cp = session.checkpoint()
    messages = {i: _message(action, job, q, u, r) for i, u in enumerate(search.units)}

    def evict(i: int) -> None:
        for p in search.units[i].pods:
            if p.status != "Evicted":
                session.evict(p, action, job.key, messages[i])

    def place() -> Placements | None:
        if limit_violation(q, req, job) is not None:
            return None
        plan = gang.place(batch, index, spread, topo, "greedy", cfg.placement.solverTimeLimitSeconds,
                          within=domain_of_running(job, session))
        if not plan.placements or charged_violation(q, job, plan.placements) is not None:
            return None
        return plan.placements

    if not _could_fit(session, batch, search):
        return False
    mask = index.static_mask(batch[0])
    gpus_needed = sum(p.gpu_whole for p in batch)

    def enough() -> bool:
        return sum(n.idle for n in index.nodes if mask[n.index]) >= gpus_needed

    def useful(i: int) -> bool:
        """A victim helps only if one of its pods is on a node the job may use."""
        return any(mask[session.snap.node_by_name[p.node].index] for p in search.units[i].pods
                   if p.node in session.snap.node_by_name)

    def pruned(found: tuple[list[int], Placements] | None) -> tuple[list[int], Placements] | None:
        """Drop victims that share no node with the placement, if the job still fits without them."""
        if found is None:
            return None
        used = {n.name for _, n, _ in found[1]}
        keep = [i for i in found[0] if any(p.node in used for p in search.units[i].pods)]
        if len(keep) == len(found[0]):
            return found
        session.rollback(cp)
        for i in keep:
            evict(i)
        plan = place()
        if plan is not None:
            return keep, plan
        session.rollback(cp)
        for i in found[0]:
            evict(i)
        return found

    homogeneous = all((p.gpu_whole, p.cpu, p.mem, p.sig) == (batch[0].gpu_whole, batch[0].cpu, batch[0].mem,
                                                              batch[0].sig) and not p.frac_devices for p in batch)
    # first-fit first: the answer to beat, the solver's hint, and the fallback
    baseline = pruned(first_fit(session, search, evict, place, enough, useful))
    session.rollback(cp)
    result: tuple[list[int], Placements] | None = None
    method = "first-fit"
    if cfg.placement.gangSolver == "cpsat" and homogeneous and topo is None:
        keep: set[str] = set()
        if baseline is not None:
            keep = {n.name for _, n, _ in baseline[1]}
            keep |= {p.node or "" for i in baseline[0] for p in search.units[i].pods}
        sol = solve(session, batch, search, cfg.placement.solverTimeLimitSeconds, cfg.placement.solverWorkers,
                    hint=baseline[0] if baseline else None, keep_nodes=keep)
        if sol is not None and (baseline is None or cost(search, sol[0]) <= cost(search, baseline[0])):
            chosen, counts = sol
            for i in chosen:
                evict(i)
            plan = realise(session, batch, counts) if limit_violation(q, req, job) is None else None
            if plan is not None:
                result, method = (chosen, plan), "cpsat"
            else:
                session.rollback(cp)
    if result is None and baseline is not None:
        result = pruned(first_fit(session, search, evict, place, enough, useful))
    if result is None:
        session.rollback(cp)
        return False
    chosen, plan = result
    for pod, node, devs in plan:
        session.pipeline(pod, node, devs, action, job.key)
    stats.decisions.append(VictimStats(
        job.key, action, method, sum(search.units[i].gpu for i in chosen) / 1000,
        sum(p.gpu_milli_on(n) for p, n, _ in plan) / 1000, sum(len(search.units[i].pods) for i in chosen),
        len(chosen)))
    return True


def _budget_note(search: Search) -> str:
    """Names the PodDisruptionBudgets that stood in the way, if any did."""
    tight = sorted({f"{b.namespace}/{b.name} (allows {b.disruptions_allowed})" for b, ids, _ in search.budgets
                    if sum(len(search.units[i].pods) for i in ids) > b.disruptions_allowed})
    return f"; PodDisruptionBudget {', '.join(tight)} protects some of them" if tight else ""


def cost(search: Search, chosen: list[int]) -> tuple[int, int, float, int]:
    """The victim order of issue 3: highest cost level, then GPUs, then running time lost, then pods."""
    units = [search.units[i] for i in chosen]
    return (max((u.level for u in units), default=-1), sum(u.gpu for u in units), sum(u.runtime for u in units),
            sum(len(u.pods) for u in units))


def _could_fit(session: Session, batch: list[Pod], search: Search) -> bool:
    """A cheap bound before any search: idle GPUs plus every GPU the fair-share caps allow to be freed."""
    need = sum(p.gpu_whole * 1000 for p in batch)
    if not need:
        return True
    mask = session.index.static_mask(batch[0])
    idle = sum(n.idle * 1000 for n in session.index.nodes if mask[n.index])
    capped: set[int] = set()
    freeable = 0
    for c in sorted(search.fair, key=lambda c: -len(c.units)):  # the widest (root-most) caps first
        ids = [i for i in c.units if i not in capped]
        if not ids:
            continue
        freeable += min(c.cap, sum(search.units[i].gpu for i in ids)) if c.gpu else sum(
            search.units[i].gpu for i in ids)
        capped.update(c.units)
    freeable += sum(u.gpu for i, u in enumerate(search.units) if i not in capped)
    return idle + freeable >= need


Runner = Callable[[Session, SchedulerConfig, dict[str, list[Reason]], EvictionStats], None]


def reclaim(session: Session, cfg: SchedulerConfig, reasons: dict[str, list[Reason]], stats: EvictionStats) -> None:
    run(session, cfg, "reclaim", reasons, stats)


def preempt(session: Session, cfg: SchedulerConfig, reasons: dict[str, list[Reason]], stats: EvictionStats) -> None:
    run(session, cfg, "preempt", reasons, stats)


def describe(stats: EvictionStats) -> list[dict[str, Any]]:
    return [vars(d) for d in stats.decisions]
