"""The job order's key (``order.job_key``) reads a job of one pod set inline, where it asked ``gangs.elastic_state``:
the same key on random jobs (pods of every status, releasing or not, minimums below, at and above them), with and
without sub-groups."""

from __future__ import annotations

import random

import pytest

from kaid.actions import gangs
from kaid.actions.order import job_key
from kaid.model.objects import Job
from tests.test_allocate_reads import _job


def _plain(job: Job) -> tuple[int, int, float, str]:
    return (-job.priority, int(gangs.elastic_state(job)), job.created, job.key)


@pytest.mark.parametrize("seed", range(10))
def test_job_key_is_the_plain_reading(seed: int) -> None:
    rng = random.Random(seed)
    for i in range(300):
        job = _job(rng, i)
        job.priority, job.created = rng.choice([50, 100, 125]), float(rng.randint(0, 3))
        key = job_key(job)
        assert key == _plain(job), [(p.status, p.releasing) for p in job.pods]
        assert [type(x) for x in key] == [type(x) for x in _plain(job)]
