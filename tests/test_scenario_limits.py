"""A scenario's placements check the queue limits (and a non-preemptible job's quotas) with the paths of limits read
once per attempt (``Attempt.limits``, a ``limits.PathLimits``: a queue's limits and quotas stay put within an
action), where each placement read the path from the queue to the root again (``limit_violation``; issue 15: 739
placements per bench_victims first-fit cycle). On random clusters whose queues have GPU limits, every answer is the
plain reading's as the scenario asks it, and the decisions are the plain reading's over several cycles."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import ClassVar

from hypothesis import event, given
from hypothesis import strategies as st

from kaid.actions import evictions, scenario
from kaid.actions.limits import PathLimits, above_limit, charged_violation, limit_violation
from kaid.actions.scenario import Attempt
from kaid.actions.session import Session
from kaid.model.objects import Job, Node, Pod, Queue, Reason
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


class Checked(PathLimits):
    """``PathLimits`` whose every answer is checked against the plain reading, and counted."""

    asked: ClassVar[list[int]] = [0, 0]  # answers, of which violations

    def violation(self, queue: Queue, req: tuple[int, int, int], job: Job) -> Reason | None:
        value = super().violation(queue, req, job)
        assert value == limit_violation(queue, req, job), (queue.name, req, job.key)
        Checked.asked[0] += 1
        Checked.asked[1] += value is not None
        return value


class Plain(PathLimits):
    """The plain reading: the path read again at every question."""

    def violation(self, queue: Queue, req: tuple[int, int, int], job: Job) -> Reason | None:
        return limit_violation(queue, req, job)


@st.composite
def limited(draw: st.DrawFn) -> Case:
    """``cases`` with GPU limits on some queues (a limit of 0: the quota, ``Queue.effective_limit``)."""
    case = copy.deepcopy(draw(cases()))
    for o in case.objs:
        if o["kind"] == "Queue" and draw(st.booleans()):
            o["spec"]["resources"]["gpu"]["limit"] = draw(st.sampled_from([0, 1, 2, 3, 4, 6]))
    return case


def attempts_with(kind: type[PathLimits]) -> Callable[[Session, str, Job, list[Pod]], Attempt]:
    def made(session: Session, action: str, job: Job, batch: list[Pod]) -> Attempt:
        att = scenario.attempt_for(session, action, job, batch)
        att.limits = kind()
        return att

    return made


@SETTINGS
@given(case=limited())
def test_limit_paths_read_once_per_attempt_decide_as_reading_them_afresh(case: Case) -> None:
    Checked.asked = [0, 0]
    assert_same_decisions(lambda: decisions_over(case, 4), [(evictions, "attempt_for", attempts_with(Checked))],
                          [(evictions, "attempt_for", attempts_with(Plain))])
    event(f"scenario placements checked: {'some' if Checked.asked[0] else 'none'}")
    event(f"placements refused on a limit: {'some' if Checked.asked[1] else 'none'}")


@SETTINGS
@given(case=limited())
def test_limits_asked_per_request_decide_as_reading_the_path_again(case: Case) -> None:
    """``scenario.above`` (whether a queue on the attempt's path holds more than its limit of what the attempt asks
    for, each victim pod put back) reads the path's limits once per attempt and request: each answer is
    ``above_limit``'s, and the decisions are those with the path read again at each question."""
    seen = [0, 0]
    short = scenario.above

    def checked(att: Attempt) -> bool:
        value = short(att)
        assert value == above_limit(att.queue, att.request), (att.queue.name, att.request)
        seen[0] += 1
        seen[1] += value
        return value

    assert_same_decisions(lambda: decisions_over(case, 4), [(scenario, "above", checked)],
                          [(scenario, "above", lambda att: above_limit(att.queue, att.request))])
    event(f"put-backs checked: {'some' if seen[0] else 'none'}")
    event(f"put-backs above a limit: {'some' if seen[1] else 'none'}")


@SETTINGS
@given(case=limited())
def test_limit_paths_read_once_per_cycle_answer_as_reading_them_afresh(case: Case) -> None:
    """The paths are the session's (``Session.path_limits``), read once per cycle and shared by every attempt of
    every action (a queue's limits and quotas are read from its spec when the snapshot is built): each answer, in
    every attempt of a cycle, is the plain reading's, and the decisions are those of a fresh reading per attempt."""
    Checked.asked = [0, 0]
    made = scenario.attempt_for

    def shared(session: Session, action: str, job: Job, batch: list[Pod]) -> Attempt:
        att = made(session, action, job, batch)
        assert att.limits is session.path_limits
        if not isinstance(session.path_limits, Checked):
            session.path_limits = Checked()
        att.limits = session.path_limits
        return att

    assert_same_decisions(lambda: decisions_over(case, 4), [(evictions, "attempt_for", shared)],
                          [(evictions, "attempt_for", attempts_with(Plain))])
    event(f"scenario placements checked: {'some' if Checked.asked[0] else 'none'}")


def test_a_gpu_memory_placement_is_checked_again_on_its_node() -> None:
    """``charged_violation``: placements with a gpu-memory pod are checked again at what they cost on their nodes;
    others are not."""
    q = Queue("q")
    q.limit, q.quota = [500, -1, -1], [0, -1, -1]
    job = Job("ns", "j")
    job.queue = "q"
    small = Node("small", {}, [], False, True, 8000, 2**35, 110, 1, 10_000)
    whole, memory = Pod("ns", "w", "w"), Pod("ns", "m", "m")
    whole.gpu_whole = 1
    memory.gpu_mem_mib, memory.frac_devices = 8_000, 1
    assert charged_violation(q, job, [(whole, small, (0,))]) is None  # (not read again: no gpu-memory pod)
    assert charged_violation(q, job, [(memory, small, (0,))]) is not None  # 800 milli-GPU of a 10 GB GPU > 500
