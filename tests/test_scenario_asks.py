"""A scenario's order keeps what each waiting job that is no victim asks for next (``kaid.actions.scenario._asks``) and
its place in its queue (``_keys``) from one scenario of an attempt to the next, and changes no decision: on random
clusters and several cycles, the decisions are those of the plain reading, which asks every job afresh at every turn
(issue 15: asking the waiting jobs again was a fifth of a reclaim scenario's time)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import event, given

from kaid.actions import scenario
from kaid.actions.order import JobKey, job_key
from kaid.actions.scenario import Attempt, request_of
from kaid.actions.session import Session, Vec
from kaid.model.objects import Job
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def ask_afresh(session: Session, att: Attempt, victims: dict[str, Job]) -> Callable[[Job], Vec]:
    """The plain reading: every job asked as the session stands at each turn."""
    return request_of(session)


@SETTINGS
@given(case=cases())
def test_kept_asks_decide_as_asking_afresh(case: Case) -> None:
    kept = [0]
    short = scenario._asks

    def counted(session: Session, att: Attempt, victims: dict[str, Job]) -> Callable[[Job], Vec]:
        kept[0] += len(att.requests) > 0
        return short(session, att, victims)

    assert_same_decisions(lambda: decisions_over(case, 4), [(scenario, "_asks", counted)],
                          [(scenario, "_asks", ask_afresh)])
    event(f"scenarios that found kept asks: {'some' if kept[0] else 'none'}")


def key_afresh(att: Attempt) -> Callable[[Job], JobKey]:
    """The plain reading: every waiting job's key read as the session stands when the scenario begins."""
    return job_key


@SETTINGS
@given(case=cases())
def test_kept_keys_decide_as_reading_them_afresh(case: Case) -> None:
    """Each kept key is the job's key as it stands when the scenario reads it, and the decisions are the plain
    reading's (the order of waiting jobs rarely decides a turn in these clusters: the first check is the sharp one)."""
    kept = [0]
    short = scenario._keys

    def checked(att: Attempt) -> Callable[[Job], JobKey]:
        keep = short(att)

        def key(job: Job) -> JobKey:
            kept[0] += id(job) in att.keys
            value = keep(job)
            assert value == job_key(job), f"{job.key}: kept {value}, now {job_key(job)}"
            return value

        return key

    assert_same_decisions(lambda: decisions_over(case, 4), [(scenario, "_keys", checked)],
                          [(scenario, "_keys", key_afresh)])
    event(f"keys found kept: {'some' if kept[0] else 'none'}")
