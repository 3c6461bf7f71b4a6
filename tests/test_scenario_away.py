"""Where a victim whose turn comes after the job's may be moved to (``scenario._away_from_rest``: the nodes none of
the job's waiting pods beyond its whole batch may use) is worked out once per attempt and its partial jobs
(``scenario.away_from_rest``, kept in ``Attempt.away``), where each scenario that placed the job worked it out again
(issue 15: 188 per bench_victims first-fit cycle, each over all the job's pods). On random clusters, each answer is
the plain reading's as the scenario asks it (a copy the caller may change), and the decisions are the plain
reading's over several cycles."""

from __future__ import annotations

from hypothesis import event, given

from kaid.actions import scenario
from kaid.actions.scenario import Attempt
from kaid.actions.session import Session
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def plain_away(session: Session, att: Attempt) -> bytearray | None:
    """The plain reading: worked out again at every scenario."""
    return scenario._away_from_rest(session, att)


@SETTINGS
@given(case=cases())
def test_kept_regions_decide_as_working_them_out_afresh(case: Case) -> None:
    seen = {"kept": 0, "region": 0}
    short = scenario.away_from_rest

    def checked(session: Session, att: Attempt) -> bytearray | None:
        whole = att.batch if att.tasks is None else att.tasks
        seen["kept"] += id(whole) in att.away
        value = short(session, att)
        assert value == plain_away(session, att)
        if value is not None:
            seen["region"] += 1
            value[0] ^= 1  # the caller's to change: the next answer must not see it
            value[0] ^= 1
            assert value is not short(session, att)
        return value

    assert_same_decisions(lambda: decisions_over(case, 4), [(scenario, "away_from_rest", checked)],
                          [(scenario, "away_from_rest", plain_away)])
    event(f"regions kept from an earlier scenario: {'some' if seen['kept'] else 'none'}")
    event(f"jobs with pods beyond their batch: {'some' if seen['region'] else 'none'}")
