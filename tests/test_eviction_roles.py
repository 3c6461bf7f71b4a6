"""The eviction actions' waiting jobs and candidate victims are worked out once per cycle and brought up to date
from the operations between actions (``kaid.actions.evictions.Roles``), and no decision changes: on random
clusters and several cycles, the decisions are those of the plain reading, which walks every job of the cluster
and its pods at the start of each action (issue 15: three walks of 27,000 jobs per cycle at 4,000 nodes)."""

from __future__ import annotations

from hypothesis import event, given

from kaid.actions.evictions import Roles
from kaid.actions.session import Session
from tests.equivalence import assert_same_decisions
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over

kept = Roles.of


def afresh(session: Session) -> Roles:
    """The plain reading: every job and its pods read again as each action starts."""
    session.roles = None
    return kept(session)


@SETTINGS
@given(case=cases())
def test_roles_decide_as_every_job_read_again(case: Case) -> None:
    moved = [0]

    def counted(session: Session) -> Roles:
        before = session.roles
        ops = before.ops if isinstance(before, Roles) else len(session.ops)
        roles = kept(session)
        moved[0] += roles.ops > ops
        return roles

    assert_same_decisions(lambda: decisions_over(case, 4), [(Roles, "of", staticmethod(counted))],
                          [(Roles, "of", staticmethod(afresh))])
    event(f"actions that read jobs moved by an earlier one: {'some' if moved[0] else 'none'}")
