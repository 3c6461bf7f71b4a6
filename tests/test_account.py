"""``queues.account`` adds up what the jobs of a queue request before adding it up the queue's path, once per queue
(it was once per job): the queues' jobs, requests and allocations, and each job's GPU request, are the plain
reading's (kept here as the reference) on random clusters."""

from __future__ import annotations

import random

import pytest

from kaid.api.config import SchedulerConfig
from kaid.model.build import build_snapshot
from kaid.model.nodes import reference_node
from kaid.model.objects import Queue, Snapshot, zero
from kaid.model.queues import account, charge
from kaid.model.vocabulary import HOLDS_RESOURCES
from tests.test_build_annotations import _cluster


def plain_account(snap: Snapshot) -> None:
    ref = reference_node(snap.nodes)
    for q in snap.queues.values():
        q.jobs = []
        q.allocated, q.alloc_np, q.requested = zero(), zero(), zero()
        q.version += 1
    for job in snap.jobs.values():
        queue = snap.queues.get(job.queue)
        if queue is None:
            continue
        queue.jobs.append(job)
        rg = rc = rm = ag = ac = am = 0
        for pod in job.pods:
            if pod.releasing:
                continue
            g = pod.gpu_milli_on(snap.node_by_name.get(pod.node) if pod.node else ref)
            rg += g
            rc += pod.cpu
            rm += pod.mem
            if pod.status in HOLDS_RESOURCES:
                ag += g
                ac += pod.cpu
                am += pod.mem
        job.request_milli = rg
        if rg or rc or rm:
            anc: Queue | None = queue
            while anc is not None:
                r = anc.requested
                r[0] += rg
                r[1] += rc
                r[2] += rm
                anc = anc.parent
        if ag or ac or am:
            charge(queue, (ag, ac, am), not job.preemptible)
    for q in snap.queues.values():
        q.jobs.sort(key=lambda j: (-j.priority, j.created, j.key))


def _readings(snap: Snapshot) -> list[object]:
    return [[(k, q.requested, q.allocated, q.alloc_np, [j.key for j in q.jobs]) for k, q in snap.queues.items()],
            [(k, j.request_milli) for k, j in snap.jobs.items()]]


@pytest.mark.parametrize("seed", range(25))
def test_queues_accounted_as_the_plain_reading(seed: int) -> None:
    snap = build_snapshot(_cluster(random.Random(seed)), SchedulerConfig(), 5000.0)
    account(snap)
    got = _readings(snap)
    plain_account(snap)
    assert got == _readings(snap)
