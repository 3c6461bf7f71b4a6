"""Consolidate: when a pending job does not fit only because free GPUs are scattered, move running
preemptible pods to other nodes so that it fits. A plan counts only if every moved pod is placed again
in the same plan (pipelined onto its new node); moves are bounded per cycle and PodDisruptionBudgets
hold."""

from __future__ import annotations

from kaid.actions.allocate import domain_of_running, topo_of
from kaid.actions.evictions import EvictionStats, VictimStats, min_runtime, needed, pending_jobs
from kaid.actions.limits import charged_violation, limit_violation
from kaid.actions.session import Session, job_request, ref_node
from kaid.actions.victims import _matches
from kaid.api.config import SchedulerConfig
from kaid.model.objects import Budget, Node, Pod, Reason
from kaid.placement import gang


def _movable(session: Session, node: Node, job_key: str) -> list[Pod]:
    snap = session.snap
    out = []
    for p in snap.pods:
        if p.node != node.name or p.status not in ("Running", "Bound") or p.releasing or p.job is None:
            continue
        if not p.job.preemptible or p.job.key == job_key or not (p.gpu_whole or p.frac_devices):
            continue
        q = snap.queues.get(p.job.queue)
        protect = min_runtime(q, "preempt") if q else 0.0
        if protect > 0 and snap.now - p.started < protect:
            continue
        out.append(p)
    out.sort(key=lambda p: (p.gpu_milli_on(node), p.job.priority if p.job else 0, -p.started, p.name))
    return out


def _budget_left(budgets: list[Budget], used: dict[str, int], pod: Pod) -> bool:
    return all(used.get(b.name, 0) < b.disruptions_allowed for b in budgets if _matches(b, pod))


def consolidate(session: Session, cfg: SchedulerConfig, reasons: dict[str, list[Reason]],
                stats: EvictionStats) -> None:
    snap = session.snap
    index = session.index
    ref = ref_node(snap)
    moves_left = cfg.maxConsolidationMoves
    disrupted: dict[str, int] = {}
    if not any(u < 1000 for n in index.nodes for u in n.dev_used):
        return  # no GPU has any room anywhere: nothing to gather
    for job, q in pending_jobs(session):
        if moves_left <= 0:
            break
        batch = needed(job)
        if not batch or not all(p.gpu_whole or p.frac_devices for p in batch):
            continue
        shape = max(batch, key=lambda p: (p.gpu_whole, p.gpu_milli_on(ref)))
        mask = index.static_mask(shape)
        free = sum(1000 - min(1000, u) for n in index.nodes if mask[n.index] for u in n.dev_used)
        if free < job_request(batch, ref)[0] or limit_violation(q, job_request(batch, ref), job) is not None:
            continue  # not a fragmentation problem: consolidation cannot help
        cp = session.checkpoint()
        moved = 0
        used_budget = dict(disrupted)
        emptied: set[str] = set()
        plan = None
        while True:
            plan = gang.place(batch, index, cfg.placement.gpu == "spread", topo_of(job, session), "greedy",
                              cfg.placement.solverTimeLimitSeconds,
                              within=domain_of_running(job, session)).placements or None
            if plan is not None:
                break
            step = _make_room(session, shape, mask, emptied, job.key, moves_left - moved, used_budget)
            if step == 0:
                break
            moved += step
        if plan is None or charged_violation(q, job, plan) is not None:
            session.rollback(cp)
            continue
        for pod, node, devs in plan:
            session.pipeline(pod, node, devs, "consolidate", job.key)
        moves_left -= moved
        disrupted = used_budget
        stats.decisions.append(VictimStats(job.key, "consolidate", "greedy", 0.0,
                                           sum(p.gpu_milli_on(n) for p, n, _ in plan) / 1000, moved, moved))
        reasons.pop(job.key, None)


def _room(node: Node, pod: Pod) -> int:
    """How close a node is to taking the pod: idle GPUs, or the most free share on one GPU."""
    if pod.gpu_whole:
        return node.idle * 1000
    return max((1000 - u for u in node.dev_used), default=0)


def _make_room(session: Session, shape: Pod, mask: bytearray, emptied: set[str], job_key: str, budget: int,
               used_budget: dict[str, int]) -> int:
    """Move pods off the node closest to taking ``shape`` until it does; return the pods moved (0: none)."""
    snap = session.snap
    index = session.index
    candidates = [n for n in index.nodes if mask[n.index] and n.name not in emptied and n.gpus
                  and index.devices_for(n, shape) is None]
    candidates.sort(key=lambda n: (-_room(n, shape), n.name))
    for node in candidates:
        movable = [p for p in _movable(session, node, job_key) if _budget_left(snap.budgets, used_budget, p)]
        if not movable:
            continue
        allowed = bytearray(1 for _ in index.nodes)
        allowed[node.index] = 0
        for name in emptied:
            allowed[snap.node_by_name[name].index] = 0
        step_cp = session.checkpoint()
        moved: list[Pod] = []
        for p in movable:
            if len(moved) >= budget:
                break
            before = session.checkpoint()
            session.evict(p, "consolidate", job_key, f"moved by consolidation from {node.name} to make room for "
                          f"{job_key}; it is placed again at once")
            dest = index.best_node(p, False, allowed)
            if dest is None:
                session.rollback(before)
                continue
            session.pipeline(p, dest[0], dest[1], "consolidate", job_key)
            moved.append(p)
            if index.devices_for(node, shape) is not None:
                break
        if index.devices_for(node, shape) is None:
            session.rollback(step_cp)
            continue
        for p in moved:
            for b in snap.budgets:
                if _matches(b, p):
                    used_budget[b.name] = used_budget.get(b.name, 0) + 1
        emptied.add(node.name)
        return len(moved)
    return 0
