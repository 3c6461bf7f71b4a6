"""A scenario asks a job of one pod set for its next pods (``gangs.tasks_to_allocate``) from its pods sorted in task
order once per attempt (``kaid.actions.scenario.tasks``, ``gangs.from_ordered``), where each turn and ask sorted its
waiting pods again (issue 15: 1,223 sorts per bench_victims first-fit cycle). The pick from the kept order is the
plain reading's for every mix of statuses, task priorities, ages and minimums, and the decisions are the plain
reading's on random clusters over several cycles."""

from __future__ import annotations

from hypothesis import event, given
from hypothesis import strategies as st

from kaid.actions import gangs, scenario
from kaid.actions.scenario import WAITING, Attempt
from kaid.api import constants as c
from kaid.model.objects import Job, Pod
from kaid.model.vocabulary import PodStatus
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over

STATUSES = [PodStatus.PENDING, PodStatus.EVICTED, PodStatus.RUNNING, PodStatus.PIPELINED, PodStatus.ALLOCATED,
            PodStatus.BOUND, PodStatus.NODE_GONE, PodStatus.RELEASING]


@st.composite
def pod_sets(draw: st.DrawFn) -> tuple[list[Pod], int]:
    pods = []
    for i in draw(st.permutations(range(draw(st.integers(0, 9))))):
        p = Pod("ns", f"p{i}", f"u{i}")
        p.status = draw(st.sampled_from(STATUSES))
        p.releasing = draw(st.booleans())
        p.created = float(draw(st.integers(0, 3)))
        label = draw(st.sampled_from([None, "0", "5", "-2", "x"]))
        if label is not None:
            p.labels = {c.TASK_PRIORITY_LABEL: label}
        pods.append(p)
    return pods, draw(st.integers(-1, 10))


@given(pod_sets(), st.sampled_from([WAITING, gangs.PENDING]))
def test_the_pick_from_the_kept_order_is_the_plain_one(case: tuple[list[Pod], int], waiting: frozenset[str]) -> None:
    pods, least = case
    ordered = sorted(pods, key=gangs.task_key)
    assert gangs.from_ordered(ordered, least, waiting) == gangs._from_pods(pods, least, waiting)


@given(pod_sets(), st.integers(1, 3), st.booleans())
def test_a_job_asked_again_gets_the_plain_pick(case: tuple[list[Pod], int], asks: int, subgroups: bool) -> None:
    """A job's pods in any order, asked as their statuses change (the kept order is the job's, not its list's); a
    job with sub-groups is asked its gang tree."""
    pods, least = case
    job = Job("ns", "j")
    job.pods, job.min_member = pods, least
    if subgroups:
        job.subgroups = [{"name": "a", "minMember": 2}, {"name": "b", "minMember": 1}]
        for i, p in enumerate(pods):
            p.labels = {**p.labels, c.SUBGROUP_LABEL: "ab"[i % 2]}
    for p in pods:
        p.job = job
    att = Attempt("reclaim", job, None, [], (0, 0, 0))  # type: ignore[arg-type]
    for k in range(asks):
        assert scenario.tasks(att, job) == gangs.tasks_to_allocate(job, WAITING)
        for i, p in enumerate(pods):
            if (i + k) % 3 == 0:
                p.status = PodStatus.EVICTED if p.status == PodStatus.RUNNING else PodStatus.RUNNING
    assert list(att.task_orders) == ([] if subgroups else [id(job)])  # sorted once


def plain_tasks(att: Attempt, job: Job) -> list[Pod]:
    """The plain reading: the job's waiting pods sorted again at every call."""
    return gangs.tasks_to_allocate(job, WAITING)


@SETTINGS
@given(case=cases())
def test_kept_task_orders_decide_as_sorting_afresh(case: Case) -> None:
    kept = [0]
    short = scenario.tasks

    def checked(att: Attempt, job: Job) -> list[Pod]:
        kept[0] += id(job) in att.task_orders
        value = short(att, job)
        assert value == gangs.tasks_to_allocate(job, WAITING), job.key
        return value

    assert_same_decisions(lambda: decisions_over(case, 4), [(scenario, "tasks", checked)],
                          [(scenario, "tasks", plain_tasks)])
    event(f"task orders found kept: {'some' if kept[0] else 'none'}")
