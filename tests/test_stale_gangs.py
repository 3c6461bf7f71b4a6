"""Stale-gang detection reads a job in one pass (``kaid.actions.stale._stale``): on random jobs, with and without
sub-groups, pods in every status and some of them releasing, it says what the gang tree says (and, for a stale one, how
many of its pods run)."""

from __future__ import annotations

import random

from kaid.actions import gangs
from kaid.actions.stale import _stale
from kaid.api import constants as c
from kaid.model.objects import Job, Pod
from kaid.model.vocabulary import PodStatus


def _plain(job: Job) -> tuple[bool, int]:
    """The reading before the one-pass version: the pods running, then the whole gang tree."""
    running = [p for p in job.pods if p.status in (PodStatus.RUNNING, PodStatus.BOUND) and not p.releasing]
    if not running:
        return False, 0
    return not gangs.gang_of(job).satisfied(), len(running)


def _job(rng: random.Random, n: int) -> Job:
    job = Job("ns", f"job-{n}")
    job.min_member = rng.randint(1, 5)
    if rng.random() < 0.3:
        job.subgroups = [{"name": "a", "minMember": rng.randint(0, 3)}, {"name": "b", "minMember": rng.randint(0, 3)}]
        job.min_subgroup = rng.choice([None, 1, 2])
    for i in range(rng.randint(0, 8)):
        pod = Pod("ns", f"{job.name}-{i}", f"{job.name}-{i}")
        pod.status = rng.choice(list(PodStatus))
        pod.releasing = rng.random() < 0.2
        if job.subgroups:
            pod.labels = {c.SUBGROUP_LABEL: rng.choice(["a", "b", "other"])}
        pod.job = job
        job.pods.append(pod)
    return job


def test_one_pass_says_what_the_gang_tree_says() -> None:
    rng = random.Random(15)
    jobs = [_job(rng, n) for n in range(3000)]
    assert sum(_plain(j)[0] for j in jobs) > 100  # stale ones among them, and jobs that are not
    assert sum(not _plain(j)[0] and _plain(j)[1] > 0 for j in jobs) > 100
    for job in jobs:  # (the pods running are read where the job is stale: a job that never is reads none)
        got, plain = _stale(job), _plain(job)
        assert got[0] == plain[0] and (not plain[0] or got[1] == plain[1]), [(p.status, p.releasing) for p in job.pods]
