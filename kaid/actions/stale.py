"""Stale-gang eviction: a running job with fewer than minMember active pods for longer than its grace
period (``spec.stalenessGracePeriod``, else the configured default; negative means never) is evicted
whole, so that half a gang does not hold GPUs it cannot use."""

from __future__ import annotations

from collections.abc import Iterable

from kaid.actions import gangs
from kaid.actions.session import Session
from kaid.api.config import Action
from kaid.model.objects import Job
from kaid.model.vocabulary import BOUND_OR_RUNNING


def _stale(job: Job) -> tuple[bool, int]:
    """(below its gang minimum while some of it runs, pods running: read where it is stale). One pass over
    the pods: a job without sub-groups is one pod set whose minimum is its minMember (``gangs.gang_of``), so its active
    pods decide (none where that minimum is one pod or none: every running pod is active, so where one runs the job is
    not below it; most jobs, read pod by pod every cycle); a job with sub-groups asks its gang tree. A job with a pod
    that has succeeded is never stale (KAI's PodGroupInfo.IsStale, job_info.go:495: the rest of a gang that has done
    part of its work goes on)."""
    if job.succeeded or (not job.subgroups and job.min_member <= 1):
        return False, 0
    running = active = 0
    for p in job.pods:
        if p.releasing:
            continue
        if p.status in BOUND_OR_RUNNING:
            running += 1
        if p.status in gangs.ACTIVE:
            active += 1
    if not running:
        return False, 0
    if not job.subgroups:
        return active < job.min_member, running
    return not gangs.gang_of(job).satisfied(), running


def stale_gangs(session: Session) -> None:
    """Evict stale gangs; ``session.stale`` receives when each job became stale (None: no longer stale), for the
    front end to persist."""
    snap = session.snap
    now = snap.now
    jobs: Iterable[Job] = snap.jobs.values()
    roll = session.roll
    if roll is not None:  # only the jobs stale as the cycle began, or stale since some time, or changed since
        read = {id(j) for j in roll.stale} | roll.moved | {id(op.pod.job) for op in session.ops}
        jobs = [job for job in jobs if id(job) in read]
    for job in jobs:
        stale, running = _stale(job)
        if not stale:
            if job.stale_since is not None:
                session.stale[job.key] = None
            continue
        since = job.stale_since if job.stale_since is not None else now
        session.stale[job.key] = since
        grace = job.stale_grace if job.stale_grace is not None else session.cfg.staleGangGraceSeconds
        if grace < 0 or now - since < grace:
            continue
        message = (f"gang {job.key} has had only {running} of its minMember {job.min_member} pods running "
                   f"for {now - since:.0f}s (grace {grace:.0f}s); evicted whole so its GPUs can be used")
        for p in job.pods:
            if p.status in BOUND_OR_RUNNING and not p.releasing:
                session.evict(p, Action.STALE_GANG, job.key, message)
        session.stale[job.key] = None
