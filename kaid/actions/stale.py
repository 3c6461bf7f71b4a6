"""Stale-gang eviction: a running job with fewer than minMember active pods for longer than its grace
period (``spec.stalenessGracePeriod``, else the configured default; negative means never) is evicted
whole, so that half a gang does not hold GPUs it cannot use."""

from __future__ import annotations

from kaid.actions.session import Session
from kaid.api.config import SchedulerConfig


def stale_gangs(session: Session, cfg: SchedulerConfig, marks: dict[str, float | None]) -> None:
    """Evict stale gangs; ``marks`` receives when each job became stale (None: no longer stale), for the
    front end to persist."""
    snap = session.snap
    now = snap.now
    for job in snap.jobs.values():
        running = [p for p in job.pods if p.status in ("Running", "Bound") and not p.releasing]
        coming = sum(1 for p in job.pods if p.status in ("Allocated", "Pipelined"))
        stale = len(running) > 0 and len(running) + coming < job.min_member
        if not stale:
            if job.stale_since is not None:
                marks[job.key] = None
            continue
        since = job.stale_since if job.stale_since is not None else now
        marks[job.key] = since
        grace = job.stale_grace if job.stale_grace is not None else cfg.staleGangGraceSeconds
        if grace < 0 or now - since < grace:
            continue
        message = (f"gang {job.key} has had only {len(running)} of its minMember {job.min_member} pods running "
                   f"for {now - since:.0f}s (grace {grace:.0f}s); evicted whole so its GPUs can be used")
        for p in running:
            session.evict(p, "stale-gang", job.key, message)
        marks[job.key] = None
