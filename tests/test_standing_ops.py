"""``Session._standing`` (the binds, pipelines and evictions that stand, read by ``run_cycle`` and consolidation):
where no restore is among the operations, each pod's last operation of the kinds asked, found without a list per pod;
the answer is the plain walk's (kept here as the reference), on random clusters over several cycles (consolidation's
moves put pods back, so restores come too)."""

from __future__ import annotations

from hypothesis import event, given

from kaid.actions.session import Op, Session
from kaid.model.vocabulary import OpKind
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


def plain_standing(session: Session, kinds: tuple[OpKind, ...], since: int = 0) -> list[Op]:
    """Every operation walked, a restore undoing the pod's latest eviction and what came after it."""
    done: dict[int, list[Op]] = {}
    ops = session.ops[since:] if since else session.ops
    for op in ops:
        mine = done.setdefault(id(op.pod), [])
        if op.kind == OpKind.RESTORE:
            while mine and mine.pop().kind != OpKind.EVICT:
                pass
        else:
            mine.append(op)
    last: set[int] = set()
    for mine in done.values():
        found = next((op for op in reversed(mine) if op.kind in kinds), None)
        if found is not None:
            last.add(id(found))
    return [op for op in ops if id(op) in last]


@SETTINGS
@given(case=cases())
def test_the_operations_that_stand_are_the_plain_walks(case: Case) -> None:
    standing = Session._standing
    seen = {"restore": 0, "none": 0}

    def checked(self: Session, kinds: tuple[OpKind, ...], since: int = 0) -> list[Op]:
        got = standing(self, kinds, since)
        assert got == plain_standing(self, kinds, since), (kinds, since)
        ops = self.ops[since:] if since else self.ops
        seen["restore" if any(op.kind == OpKind.RESTORE for op in ops) else "none"] += 1
        return got

    Session._standing = checked  # type: ignore[method-assign]
    try:
        decisions_over(case, 3)
    finally:
        Session._standing = standing  # type: ignore[method-assign]
    event(f"asked with a restore: {'some' if seen['restore'] else 'none'}")
    event(f"asked without: {'some' if seen['none'] else 'none'}")
