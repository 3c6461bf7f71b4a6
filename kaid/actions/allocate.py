"""Allocate: place pending jobs queue by queue in fair-share order, gangs all-or-nothing, elastic pods
one at a time and interleaved across queues (DESIGN section 3)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kaid.actions.limits import charged_violation, limit_violation
from kaid.actions.session import Session, job_request, ref_node
from kaid.api.config import SchedulerConfig
from kaid.model.objects import CPU, GPU, MEM, Job, Pod, Queue, Reason
from kaid.placement import gang
from kaid.placement.explain import fit_summary, fragmentation
from kaid.placement.index import NodeIndex


@dataclass
class AllocateStats:
    jobs_placed: int = 0
    pods_placed: int = 0
    gangs_cpsat: int = 0  # gangs placed by the solver
    gangs_improved: int = 0  # gangs placed better than the greedy plan (solver or single-node bound)
    solves: int = 0
    solver_s: float = 0.0
    gang_nodes: list[int] = field(default_factory=list)  # nodes each placed gang spans
    # for each placed gang: (nodes the greedy plan would have used in the same state or None, nodes used)
    gang_vs_greedy: list[tuple[int | None, int]] = field(default_factory=list)
    gang_domains: list[int] = field(default_factory=list)


def dominant_share(q: Queue) -> float:
    """The largest allocated / fair-share ratio over the resources; a resource with no fair share counts
    only when the queue holds some of it anyway (then it is infinitely over)."""
    share = 0.0
    for r in (GPU, CPU, MEM):
        if q.fair[r] > 0:
            share = max(share, q.allocated[r] / q.fair[r])
        elif q.allocated[r] > 0:
            return float("inf")
    return share


def queue_key(q: Queue) -> tuple[int, int, float, str]:
    ds = dominant_share(q)
    return (0 if ds < 1 else 1, -q.priority, ds, q.name)


class QueueOrder:
    """Picks the next leaf queue by walking down the tree, choosing the best child at each level."""

    def __init__(self, leaves: dict[str, deque[Job]], roots: list[Queue]) -> None:
        self.leaves = leaves
        self.roots = roots
        self.count: dict[str, int] = {}
        for name, jobs in leaves.items():
            if not jobs:
                continue
            q: Queue | None = None
            for root in roots:
                q = _find(root, name)
                if q:
                    break
            if q is None:
                continue
            for anc in q.path():
                self.count[anc.name] = self.count.get(anc.name, 0) + len(jobs)

    def pick(self) -> Queue | None:
        level = [q for q in self.roots if self.count.get(q.name)]
        while level:
            best = min(level, key=queue_key)
            if not best.children:
                return best
            level = [q for q in best.children if self.count.get(q.name)]
        return None

    def done(self, q: Queue) -> None:
        for anc in q.path():
            self.count[anc.name] -= 1


def _find(root: Queue, name: str) -> Queue | None:
    if root.name == name:
        return root
    for ch in root.children:
        found = _find(ch, name)
        if found:
            return found
    return None


def topo_of(job: Job, session: Session) -> gang.Topo | None:
    if job.topology is None:
        return None
    return gang.Topo(job.required_level, job.preferred_level)


def allocate(session: Session, cfg: SchedulerConfig, reasons: dict[str, list[Reason]]) -> AllocateStats:
    snap = session.snap
    stats = AllocateStats()
    ref = ref_node(snap)
    leaves: dict[str, deque[Job]] = {}
    for leaf in snap.queues.values():
        if leaf.children or leaf.errors:
            continue
        waiting = [j for j in leaf.jobs if not j.errors and any(p.status == "Pending" for p in j.pods)]
        if waiting:
            leaves[leaf.name] = deque(waiting)
    order = QueueOrder(leaves, sorted(snap.roots, key=lambda q: q.name))
    failed: dict[tuple[object, ...], tuple[int, list[Reason]]] = {}
    spread_gpu = cfg.placement.gpu == "spread"
    spread_cpu = cfg.placement.cpu == "spread"
    while True:
        q = order.pick()
        if q is None:
            break
        jobs = leaves[q.name]
        job = jobs.popleft()
        pending = [p for p in job.pods if p.status == "Pending"]
        active = sum(1 for p in job.pods if p.active or p.status == "Allocated")
        need = max(0, job.min_member - active)
        if need > len(pending):
            reasons[job.key] = [Reason(
                "GangIncomplete", f"the gang needs {job.min_member} pods at once but only {len(job.pods)} exist "
                f"({active} running); it waits for the rest to be created",
                {"minMember": job.min_member, "exist": len(job.pods), "running": active})]
            order.done(q)
            continue
        batch = pending[:need] if need > 0 else pending[:1]
        req = job_request(batch, ref)
        why = limit_violation(q, req, job)
        if why is not None:
            reasons[job.key] = [why]
            order.done(q)
            continue
        spread = spread_gpu if any(p.gpu_whole or p.frac_devices for p in batch) else spread_cpu
        ok = _place(session, job, q, batch, spread, cfg, reasons, failed, stats)
        if ok and len(pending) > len(batch):
            jobs.appendleft(job)  # elastic pods: one at a time, the queue re-enters the order
        else:
            order.done(q)
            if ok:
                reasons.pop(job.key, None)
            if job.key == session.focus:
                break
    return stats


def _shape_key(p: Pod, n: int) -> tuple[object, ...]:
    return (p.sig, p.gpu_whole, p.gpu_frac, p.gpu_mem_mib, p.frac_devices, p.cpu, p.mem, n)


def domain_of_running(job: Job, session: Session) -> bytearray | None:
    """For a job with a required topology level that already runs: the nodes of its domain."""
    if not job.required_level:
        return None
    running = [p for p in job.pods if (p.active or p.status == "Allocated") and p.node]
    if not running:
        return None
    node = session.snap.node_by_name.get(running[0].node or "")
    value = node.labels.get(job.required_level) if node else None
    return bytearray(1 if value is not None and n.labels.get(job.required_level) == value else 0
                     for n in session.index.nodes)


def _place(session: Session, job: Job, queue: Queue, batch: list[Pod], spread: bool, cfg: SchedulerConfig,
           reasons: dict[str, list[Reason]], failed: dict[tuple[object, ...], tuple[int, list[Reason]]],
           stats: AllocateStats) -> bool:
    index = session.index
    homogeneous = all(_shape_key(p, 0) == _shape_key(batch[0], 0) for p in batch)
    key = _shape_key(batch[0], len(batch)) if homogeneous and job.topology is None else None
    if key is not None and job.key != session.focus:
        hit = failed.get(key)
        if hit is not None and hit[0] == index.epoch:
            reasons[job.key] = list(hit[1])
            return False
    if len(batch) == 1 and job.topology is None:
        pod = batch[0]
        choice = index.best_node(pod, spread)
        over = charged_violation(queue, job, [(pod, choice[0], choice[1])]) if choice is not None else None
        if over is not None:
            reasons[job.key] = [over]
            return False
        if choice is not None:
            cp = session.checkpoint()
            session.allocate(pod, choice[0], choice[1])
            session.committed(cp)
            stats.pods_placed += 1
            stats.jobs_placed += 1
            return True
        why = _explain(job, batch, 0, index, False) if session.focus in (None, job.key) else _UNEXPLAINED
    else:
        topo = topo_of(job, session)
        plan = gang.place(batch, index, spread, topo, cfg.placement.gangSolver,
                          cfg.placement.solverTimeLimitSeconds, cfg.placement.solverWorkers,
                          within=domain_of_running(job, session))
        stats.solver_s += plan.solver_s
        stats.solves += plan.solves
        over = charged_violation(queue, job, plan.placements) if plan.placements else None
        if over is not None:
            reasons[job.key] = [over]
            return False
        if plan.placements:
            cp = session.checkpoint()
            try:
                for pod, node, devs in plan.placements:
                    session.allocate(pod, node, devs)
            except Exception:
                session.rollback(cp)
                raise
            session.committed(cp)
            stats.pods_placed += len(plan.placements)
            stats.jobs_placed += 1
            if plan.method == "cpsat":
                stats.gangs_cpsat += 1
            if plan.method != "greedy":
                stats.gangs_improved += 1
            if len(batch) > 1:
                stats.gang_nodes.append(plan.nodes_used)
                stats.gang_vs_greedy.append((plan.greedy_nodes, plan.nodes_used))
                if topo and (topo.preferred or topo.required):
                    label = topo.preferred or topo.required or ""
                    stats.gang_domains.append(len({n.labels.get(label) for _, n, _ in plan.placements}))
            return True
        why = (_explain(job, batch, plan.placed_max, index, plan.topology_failed)
               if session.focus in (None, job.key) else _UNEXPLAINED)
    reasons[job.key] = why
    if key is not None:
        failed[key] = (index.epoch, why)
    return False


# with a focus job, the others' reasons are not worked out (kaictl explain asks about one job only)
_UNEXPLAINED = [Reason("NotExplained", "not worked out: this cycle was run to explain another job")]


def _explain(job: Job, batch: list[Pod], placeable: int, index: NodeIndex, topo_failed: bool) -> list[Reason]:
    out: list[Reason] = []
    if len(batch) > 1:
        out.append(Reason(
            "GangUnschedulable", f"the gang needs {len(batch)} pods placed at once; only {placeable} can be placed "
            "now", {"needed": len(batch), "placeable": placeable}))
    if topo_failed:
        out.append(Reason(
            "Topology", f"the pods fit in the cluster but not inside one {job.required_level} domain of topology "
            f"{job.topology}, as required", {"topology": job.topology, "requiredLevel": job.required_level}))
    frag = fragmentation(batch, index)
    if frag is not None:
        out.append(frag)
    first = batch[min(placeable, len(batch) - 1)] if len(batch) > 1 else batch[0]
    out.append(fit_summary(first, index))
    return out
