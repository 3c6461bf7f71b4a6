"""An eviction action's scenario without victims (``scenario.run`` with none: the job on what this cycle's
evictions freed) is not tried where the GPU bound says the batch cannot fit (``scenario.no_room``): on random
clusters over several cycles, each such scenario, tried anyway, places nothing, and the decisions are the plain
ones."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import event, given

from kaid.actions import scenario
from kaid.actions.scenario import Attempt, Outcome
from kaid.actions.session import Session
from kaid.actions.victims import Unit
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def _never(session: Session, att: Attempt) -> bool:
    return False


@SETTINGS
@given(case=cases())
def test_a_scenario_without_victims_the_bound_skips_places_nothing(case: Case) -> None:
    no_room = scenario.no_room
    real = scenario._tried
    said: list[bool] = []
    told = {"skipped": 0, "placed": 0}

    def asked(session: Session, att: Attempt) -> bool:
        said.append(no_room(session, att))
        return False  # tried anyway

    def checked(session: Session, att: Attempt, units: list[Unit],
                place: Callable[[], Outcome | None]) -> Outcome | None:
        out = real(session, att, units, place)
        if not units and said:
            skip = said.pop()
            told["skipped"] += skip
            told["placed"] += out is not None
            assert not (skip and out is not None), att.job.key
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scenario, "no_room", asked)
        mp.setattr(scenario, "_tried", checked)
        decisions_over(case, 3)
    event(f"scenarios without victims the bound skips: {'some' if told['skipped'] else 'none'}")
    event(f"scenarios without victims that placed the job: {'some' if told['placed'] else 'none'}")
    assert_same_decisions(lambda: decisions_over(case, 3), [], [(scenario, "no_room", _never)])
