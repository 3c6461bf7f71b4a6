"""A pod set's next batch (``gangs._from_pod_set``: the first waiting pods in task order, as many as bring the set to
its minimum, or one once it is there) counts its pods in one pass and takes the least pod without sorting them all
(issue 15: it sorted every waiting pod of a gang for each elastic pod placed); on random pod sets, with ties in
the task order, it gives the pods of the plain reading, in the same order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.actions import gangs
from kaid.actions.gangs import PENDING, PodSet, is_active, task_key
from kaid.actions.scenario import WAITING
from kaid.api import constants as c
from kaid.model.objects import Pod
from kaid.model.vocabulary import PodStatus


def plain(ps: PodSet, waiting: frozenset[str] | set[str]) -> list[Pod]:
    """The plain reading: every waiting pod sorted, then the prefix."""
    pending = sorted((p for p in ps.pods if p.status in waiting), key=task_key)
    active = sum(1 for p in ps.pods if is_active(p))
    return pending[: 1 if active >= ps.min_available else ps.min_available - active]


@st.composite
def pod_sets(draw: st.DrawFn) -> PodSet:
    pods = []
    for i in range(draw(st.integers(0, 12))):
        pod = Pod("ns", draw(st.sampled_from([f"p{i}", "twin"])), f"u{i}")  # a name twice: equal task keys
        pod.status = draw(st.sampled_from(list(PodStatus)))
        pod.releasing = draw(st.booleans())
        pod.created = float(draw(st.integers(0, 2)))
        label = draw(st.sampled_from([None, "1", "5", "x"]))
        if label is not None:
            pod.labels[c.TASK_PRIORITY_LABEL] = label
        pods.append(pod)
    return PodSet("default", draw(st.integers(0, 8)), pods)


@settings(max_examples=400, deadline=None)
@given(ps=pod_sets(), waiting=st.sampled_from([PENDING, WAITING]))
def test_pod_set_batch_is_the_plain_readings(ps: PodSet, waiting: frozenset[str]) -> None:
    got, want = gangs._from_pod_set(ps, waiting), plain(ps, waiting)
    assert [id(p) for p in got] == [id(p) for p in want]
