"""Reading what the engine needs from files given on the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kaictl.output import fail
from kaid.api.config import SchedulerConfig, load_config
from kaid.sim.files import SnapshotFileError, load_objects


def read_config(path: Path | None, solver: str | None = None) -> SchedulerConfig:
    try:
        cfg = load_config(path)
    except ValueError as e:
        fail(str(e))
    if solver is not None:
        if solver not in ("cpsat", "greedy"):
            fail(f"unknown solver {solver!r}: use cpsat or greedy")
        cfg = SchedulerConfig.model_validate({**cfg.model_dump(), "placement": {
            **cfg.placement.model_dump(), "gangSolver": solver}})
    return cfg


def read_objects(snapshot: Path | None, extra: list[Path] | None) -> list[dict[str, Any]]:
    if snapshot is None:
        fail("no cluster to read: pass --snapshot FILE (save one with `kaictl snapshot save -o FILE`)")
    objs: list[dict[str, Any]] = []
    for path in [snapshot, *(extra or [])]:
        try:
            objs.extend(load_objects(path))
        except SnapshotFileError as e:
            fail(str(e))
    return objs
