"""Consolidate's precheck (the GPUs idle or being released in the cluster against what the job asks for) is read
again only once the session has another operation (``ConsolidateRules.free_gpus``): on random clusters over several
cycles, whenever an attempt asks, the kept figure is the one read afresh from the session then."""

from __future__ import annotations

from hypothesis import event, given
from pytest import MonkeyPatch

from kaid.actions import consolidate
from kaid.actions.consolidate import ConsolidateRules
from kaid.actions.session import Session
from kaid.api.config import Action, SchedulerConfig
from kaid.model.build import build_snapshot
from kaid.placement.index import NodeIndex
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, cases, decisions_over


@SETTINGS
@given(case=cases())
def test_kept_free_gpus_are_those_read_again(case: Case) -> None:
    """(A mutant that never reads them again after the first attempt fails the next test.)"""
    asked: list[tuple[int, int]] = []
    kept = ConsolidateRules.free_gpus

    def checked(rules: ConsolidateRules, session: Session) -> int:
        free = kept(rules, session)
        asked.append((free, consolidate._free_gpus(session)))
        return free

    with MonkeyPatch.context() as mp:
        mp.setattr(ConsolidateRules, "free_gpus", checked)
        decisions_over(case, 4)
    moved = len({plain for _, plain in asked}) > 1
    event(f"the figure changed over the run: {'yes' if moved else 'no'}")
    assert all(free == plain for free, plain in asked)


def test_free_gpus_read_again_after_an_operation() -> None:
    """An eviction in the session frees its GPUs: the kept figure follows it, and goes back with a rollback."""
    objs = [node("n0", gpus=4), queue("a"), podgroup("run", "a", 1, priority_class="train"),
            pod("run-0", gpus=2, group="run", node_name="n0")]
    cfg = SchedulerConfig()
    snap = build_snapshot(objs, cfg, NOW)
    session = Session(snap, NodeIndex(snap.nodes), cfg)
    rules = ConsolidateRules(cfg.maxConsolidationMoves)
    figures = [rules.free_gpus(session)]
    start = session.checkpoint()
    session.evict(snap.jobs["default/run"].pods[0], Action.CONSOLIDATE, None, "moved")
    figures.append(rules.free_gpus(session))
    session.rollback(start)
    figures.append(rules.free_gpus(session))
    assert figures == [2000, 4000, 2000]
