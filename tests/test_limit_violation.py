"""``limits.limit_violation`` answers None without wording anything where no queue on the path would cross a limit
(or, for a non-preemptible job, its quota): ``_crosses``, the same checks alone (issue 15: allocate asks for every
job it serves). On random paths of queues it gives the reason of the plain reading, which words the first
violation it finds (``_first_violation``), and None where that finds none."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.actions.limits import PathLimits, _crosses, _first_violation, limit_violation
from kaid.model.objects import Job, Queue


@st.composite
def paths(draw: st.DrawFn) -> tuple[Queue, tuple[int, int, int], Job]:
    amounts = st.sampled_from([-1, 0, 1000, 2000, 4000])
    held = st.sampled_from([0, 1000, 2000, 3000])
    parent: Queue | None = None
    for depth in range(draw(st.integers(1, 3))):
        q = Queue(f"q{depth}")
        q.parent = parent
        q.limit = [draw(amounts) for _ in range(3)]
        q.quota = [draw(amounts) for _ in range(3)]
        q.allocated = [draw(held) for _ in range(3)]
        q.alloc_np = [min(a, draw(held)) for a in q.allocated]
        parent = q
    assert parent is not None
    job = Job("ns", "j")
    job.preemptible = draw(st.booleans())
    req = (draw(st.sampled_from([0, 500, 1000])), draw(st.sampled_from([0, 1000])), draw(st.sampled_from([0, 2000])))
    return parent, req, job


@settings(max_examples=500, deadline=None)
@given(case=paths())
def test_limit_violation_is_the_plain_readings(case: tuple[Queue, tuple[int, int, int], Job]) -> None:
    queue, req, job = case
    plain = _first_violation(queue, req, job)
    assert limit_violation(queue, req, job) == plain
    assert _crosses(queue, req, job.preemptible) == (plain is not None)  # exact: the words only where needed


@settings(max_examples=300, deadline=None)
@given(case=paths(), data=st.data())
def test_path_limits_read_once_answer_as_the_plain_readings(case: tuple[Queue, tuple[int, int, int], Job],
                                                            data: st.DataObject) -> None:
    """``PathLimits`` keeps each queue's path of limits and quotas from its first question: what the queues hold
    changes between questions (an action places and takes back), the answers are the plain readings'."""
    queue, req, job = case
    limits = PathLimits()
    held = st.sampled_from([0, 1000, 2000, 3000])
    for _ in range(4):
        assert limits.crosses(queue, req, job.preemptible) == _crosses(queue, req, job.preemptible)
        assert limits.violation(queue, req, job) == _first_violation(queue, req, job)
        anc: Queue | None = queue
        while anc is not None:  # what each queue holds moves
            anc.allocated = [data.draw(held) for _ in range(3)]
            anc.alloc_np = [min(a, data.draw(held)) for a in anc.allocated]
            anc = anc.parent
        job.preemptible = data.draw(st.booleans())
        req = (data.draw(st.sampled_from([0, 500, 1000])), req[1], data.draw(st.sampled_from([0, 2000])))
