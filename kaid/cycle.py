"""One scheduling cycle: a Snapshot in, Decisions out. Pure: no client calls, no clock reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kaid.actions.allocate import AllocateStats, allocate
from kaid.actions.session import Session
from kaid.api.config import SchedulerConfig
from kaid.fairshare import compute_fair_share, queue_rows
from kaid.model.objects import ObjectProblem, Reason, Snapshot
from kaid.placement.index import NodeIndex


@dataclass(slots=True)
class Bind:
    pod: str  # namespace/name
    node: str
    job: str
    queue: str
    devices: tuple[int, ...]
    gpu_group: str | None
    gpu_milli: int
    action: str = "allocate"


@dataclass(slots=True)
class Eviction:
    pod: str
    node: str
    job: str
    action: str  # reclaim | preempt | consolidate | stale-gang
    by: str | None
    message: str


@dataclass
class Decisions:
    binds: list[Bind] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    pipelined: list[Bind] = field(default_factory=list)
    pending: dict[str, list[Reason]] = field(default_factory=dict)  # job key -> why it waits
    warnings: dict[str, list[Reason]] = field(default_factory=dict)
    queues: list[dict[str, Any]] = field(default_factory=list)
    problems: list[ObjectProblem] = field(default_factory=list)
    stats: AllocateStats = field(default_factory=AllocateStats)


def run_cycle(snap: Snapshot, cfg: SchedulerConfig) -> Decisions:
    compute_fair_share(snap, use_usage=cfg.usageHalfLifeSeconds > 0)
    fair_rows = queue_rows(snap)  # fair shares as computed at the start of the cycle
    index = NodeIndex(snap.nodes)
    session = Session(snap, index)
    reasons: dict[str, list[Reason]] = {}
    stats = AllocateStats()
    if "allocate" in cfg.actions:
        stats = allocate(session, cfg, reasons)
    out = Decisions(stats=stats, problems=list(snap.problems))
    for op in session.allocations():
        pod, job = op.pod, op.pod.job
        assert job is not None
        out.binds.append(Bind(pod.key, op.node.name, job.key, job.queue, op.devices,
                              pod.gpu_group if pod.frac_devices else None, pod.gpu_milli_on(op.node), op.action))
    for job in snap.jobs.values():
        if job.warnings:
            out.warnings[job.key] = list(job.warnings)
        if not any(p.status == "Pending" for p in job.pods):
            continue
        why = list(job.errors) + reasons.get(job.key, [])
        if not why:
            placed = sum(1 for p in job.pods if p.status == "Allocated")
            why = [Reason("NotPlacedThisCycle",
                          f"{placed} of {len(job.pods)} pods were placed this cycle; the rest wait for the next")]
        out.pending[job.key] = why + list(job.warnings)
    # queue rows with allocations after this cycle's decisions
    after = {row["name"]: row for row in queue_rows(snap)}
    for row in fair_rows:
        row["allocatedAfter"] = after[row["name"]]["allocated"]
    out.queues = fair_rows
    return out
