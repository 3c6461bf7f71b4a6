"""Allocate's short readings against the long ones they stand for: whether a job just placed has another batch
(``allocate._more``: a waiting pod, read at C speed, for a job of one pod set) against ``gangs.tasks_to_allocate``;
a batch of at most one waiting pod, and what it asks for; whether a batch spreads (``allocate._spread``) with the pods
read or not."""

from __future__ import annotations

import random

import pytest

from kaid.actions import gangs
from kaid.actions.allocate import NextBatches, _more, _spread
from kaid.actions.session import job_request
from kaid.api.config import SchedulerConfig
from kaid.model.objects import Job, Node, Pod
from kaid.model.vocabulary import PodStatus

_STATUSES = [PodStatus.PENDING, PodStatus.PENDING, PodStatus.RUNNING, PodStatus.BOUND, PodStatus.ALLOCATED,
             PodStatus.PIPELINED, PodStatus.RELEASING, PodStatus.EVICTED, PodStatus.NODE_GONE]


def _job(rng: random.Random, i: int) -> Job:
    job = Job("ns", f"j{i}")
    job.min_member = rng.randint(0, 4)
    for k in range(rng.randint(0, 5)):
        p = Pod("ns", f"j{i}-{k}", f"u{i}-{k}")
        p.status = rng.choice(_STATUSES)
        p.releasing = rng.random() < 0.1
        p.created = float(rng.randint(0, 2))
        if rng.random() < 0.2:
            p.labels = {"kai.scheduler/task-priority": str(rng.randint(0, 3))}
        p.job = job
        job.pods.append(p)
    if rng.random() < 0.2 and job.pods:
        job.subgroups = [{"name": "a", "minMember": 1}]
        for p in job.pods:
            p.labels = {**p.labels, "kai.scheduler/subgroup-name": "a"}
    return job


@pytest.mark.parametrize("seed", range(20))
def test_another_batch_is_read_as_tasks_to_allocate_reads_it(seed: int) -> None:
    rng = random.Random(seed)
    for i in range(200):
        job = _job(rng, i)
        assert _more(job, NextBatches(None)) == bool(gangs.tasks_to_allocate(job)), [p.status for p in job.pods]


def _plain_batch(job: Job) -> list[Pod]:
    pending = [p for p in job.pods if p.status == PodStatus.PENDING]
    active = sum(1 for p in job.pods if gangs.is_active(p))
    if active >= job.min_member:
        return [min(pending, key=gangs.task_key)] if pending else []
    return sorted(pending, key=gangs.task_key)[: job.min_member - active]


@pytest.mark.parametrize("seed", range(20))
def test_a_batch_of_one_pod_set_is_the_plain_one(seed: int) -> None:
    rng = random.Random(seed)
    for i in range(200):
        job = _job(rng, i)
        job.subgroups = []
        assert gangs.tasks_to_allocate(job) == _plain_batch(job)
        plain_state = 0 if (a := sum(1 for p in job.pods if gangs.is_active(p))) < job.min_member else (
            1 if a == job.min_member else 2)
        assert int(gangs.elastic_state(job)) == plain_state


@pytest.mark.parametrize(("gpu", "cpu"), [("binpack", "binpack"), ("spread", "spread"), ("binpack", "spread"),
                                          ("spread", "binpack")])
def test_spread_reads_the_pods_only_where_the_strategies_differ(gpu: str, cpu: str) -> None:
    class Held:
        cfg = SchedulerConfig.model_validate({"placement": {"gpu": gpu, "cpu": cpu}})

    with_gpu, without = Pod("ns", "a", "a"), Pod("ns", "b", "b")
    with_gpu.gpu_whole = 1
    for batch, strategy in (([with_gpu], gpu), ([without], cpu), ([without, with_gpu], gpu)):
        assert _spread(Held(), batch) == (strategy == "spread")  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(10))
def test_next_batches_of_one_pod_are_tasks_to_allocate(seed: int) -> None:
    """``NextBatches.batch`` reads a job of one pod (no sub-groups) without ``tasks_to_allocate``: the same batch."""
    rng = random.Random(seed)
    for i in range(300):
        job = _job(rng, i)
        assert NextBatches(None).batch(job) == gangs.tasks_to_allocate(job), [p.status for p in job.pods]


@pytest.mark.parametrize("seed", range(10))
def test_next_batches_request_is_job_request_of_the_batch(seed: int) -> None:
    """``NextBatches.request`` reads a job of one pod (no sub-groups) from the pod, unkept: what ``job_request`` of the
    job's batch asks, on the smallest GPU for a gpu-memory share, before and after the job's pods change."""
    rng = random.Random(seed)
    ref = Node("ref", {}, [], False, True, 64_000, 10**12, 110, 8, 40_000)
    for i in range(300):
        job = _job(rng, i)
        for p in job.pods:
            p.cpu, p.mem = rng.choice([0, 500, 8000]), rng.choice([0, 10**9])
            kind = rng.randrange(4)
            if kind == 1:
                p.gpu_whole = rng.randint(1, 8)
            elif kind == 2:
                p.frac_devices, p.gpu_frac = rng.randint(1, 2), rng.choice([250, 500])
            elif kind == 3:
                p.frac_devices, p.gpu_mem_mib = 1, rng.choice([10_000, 50_000])
        nexts = NextBatches(ref)
        assert nexts.request(job) == job_request(gangs.tasks_to_allocate(job), ref), [p.status for p in job.pods]
        nexts.served(job)
        for p in job.pods:
            p.status = rng.choice(_STATUSES)
        assert nexts.request(job) == job_request(gangs.tasks_to_allocate(job), ref), [p.status for p in job.pods]
