"""A scenario's order keeps what each waiting job that is no victim asks for next from one scenario of an attempt
to the next (``kaid.actions.scenario._asks``) and changes no decision: on random clusters and several cycles, the
decisions are those of the plain reading, which asks every job afresh at every turn (issue 15: asking the waiting
jobs again was a fifth of a reclaim scenario's time)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import event, given

from kaid.actions import scenario
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
