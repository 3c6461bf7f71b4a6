"""A tentative-operations Session on a snapshot of plain objects, for the tests of the actions' bookkeeping."""

from __future__ import annotations

from typing import Any

from kaid.actions.session import Session
from kaid.api.config import SchedulerConfig
from kaid.model.build import build_snapshot
from kaid.model.objects import Pod
from kaid.placement.index import NodeIndex

NOW = 1_800_000_000.0


def session_of(objs: list[dict[str, Any]], now: float = NOW) -> Session:
    """A Session on the snapshot of ``objs`` at ``now``, with the default configuration."""
    cfg = SchedulerConfig()
    snap = build_snapshot(objs, cfg, now)
    return Session(snap, NodeIndex(snap.nodes), cfg)


def pod_named(session: Session, name: str) -> Pod:
    return next(p for p in session.snap.pods if p.name == name)
