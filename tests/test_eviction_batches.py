"""``gangs.eviction_batches`` of a job without sub-groups (one pod set: ``_one_set_batches``, one sort) gives the
batches the gang tree's walk (``_tree_batches``) gives, pod for pod and in order, over random jobs: any minMember
(0, negative, above the pods), pods with and without a task-priority label (a bad one too), equal creation times,
running pods a subset of the job's in any order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.actions import gangs
from kaid.api import constants as c
from kaid.model.objects import Job, Pod


@st.composite
def jobs(draw: st.DrawFn) -> tuple[Job, list[Pod]]:
    job = Job("default", "j")
    job.min_member = draw(st.integers(-1, 7))
    n = draw(st.integers(0, 8))
    for k in range(n):
        pod = Pod("default", f"p{draw(st.integers(0, 3))}{k}", f"u{k}")
        pod.created = float(draw(st.integers(0, 2)))
        label = draw(st.sampled_from([None, None, "1", "3", "x"]))
        pod.labels = {} if label is None else {c.TASK_PRIORITY_LABEL: label}
        pod.job = job
        job.pods.append(pod)
    alive = draw(st.permutations(job.pods)) if job.pods else []
    alive = alive[: draw(st.integers(0, len(alive)))]
    return job, list(alive)


@settings(max_examples=400, deadline=None)
@given(case=jobs())
def test_one_set_batches_are_the_trees(case: tuple[Job, list[Pod]]) -> None:
    job, alive = case
    fast = gangs.eviction_batches(job, alive)
    tree = gangs._tree_batches(job, alive)
    assert [[p.key for p in b] for b in fast] == [[p.key for p in b] for b in tree]
    assert [b for b in fast] == tree  # the same pod objects


def test_one_set_batches_examples() -> None:
    job = Job("default", "j")
    job.min_member = 2
    for k in range(4):
        pod = Pod("default", f"p{k}", f"u{k}")
        pod.created = float(k)
        pod.labels = {}
        pod.job = job
        job.pods.append(pod)
    names = [[p.name for p in b] for b in gangs.eviction_batches(job, job.pods)]
    assert names == [["p3"], ["p2"], ["p1", "p0"]]  # the newest elastic pod first, then the gang's core
    assert [[p.name for p in b] for b in gangs.eviction_batches(job, job.pods[:1])] == [["p0"]]  # below: whole
    job.min_member = 0
    assert len(gangs.eviction_batches(job, job.pods)) == 4
