"""Pods read ahead (as kaid's watch does) and copied per cycle decide exactly as pods read fresh each cycle,
and a cycle never changes the pods read ahead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot, read_pod
from kaid.model.objects import Pod, Reason

SCENARIOS = sorted((Path(__file__).resolve().parent / "scenarios").glob("*.yaml"))
NOW = 1767225600.0


def outcome(d: Decisions) -> Any:
    return ([(b.pod, b.node, b.devices, b.gpu_group) for b in d.binds],
            [(e.pod, e.action) for e in d.evictions],
            [(b.pod, b.node) for b in d.pipelined],
            {k: [r.code for r in v] for k, v in d.pending.items()})


def state(pod: Pod) -> tuple[Any, ...]:
    return tuple(getattr(pod, name) for name in Pod.__slots__ if name != "job")


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_read_ahead_decides_like_reading_fresh(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    objects = [d for d in docs[1:] if isinstance(d, dict)]
    cfg = SchedulerConfig.model_validate(docs[0].get("config") or {})
    ahead: dict[int, tuple[Pod, list[Reason]]] = {}
    for obj in objects:
        if obj.get("kind") == "Pod":
            problems: list[Reason] = []
            ahead[id(obj)] = (read_pod(obj, problems), problems)
    before = {k: state(p) for k, (p, _) in ahead.items()}

    def reader(obj: dict[str, Any], problems: list[Reason]) -> Pod:
        pod, found = ahead[id(obj)]
        problems.extend(found)
        return pod.copy()

    fresh = run_cycle(build_snapshot(objects, cfg, NOW), cfg)
    for _ in range(2):  # the same pods read ahead serve every cycle
        again = run_cycle(build_snapshot(objects, cfg, NOW, pod_reader=reader), cfg)
        assert outcome(again) == outcome(fresh)
    assert {k: state(p) for k, (p, _) in ahead.items()} == before, "a cycle changed a pod read ahead"
