"""Pods read once and copied per cycle (``PodMemo``, as kaid does) decide exactly as pods read fresh each
cycle; a cycle never changes the pods kept; a changed object is read again."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.kube.podmemo import PodMemo
from kaid.model.build import build_snapshot
from kaid.model.objects import Pod
from tests.objects import pod

SCENARIOS = sorted((Path(__file__).resolve().parent / "scenarios").glob("*.yaml"))
NOW = 1767225600.0


def outcome(d: Decisions) -> Any:
    return ([(b.pod, b.node, b.devices, b.gpu_group) for b in d.binds],
            [(e.pod, e.action) for e in d.evictions],
            [(b.pod, b.node) for b in d.pipelined],
            {k: [r.code for r in v] for k, v in d.pending.items()})


def state(p: Pod) -> tuple[Any, ...]:
    return tuple(getattr(p, name) for name in Pod.__slots__ if name != "job")


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_memo_decides_like_reading_fresh(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    objects = [d for d in docs[1:] if isinstance(d, dict)]
    cfg = SchedulerConfig.model_validate(docs[0].get("config") or {})
    fresh = run_cycle(build_snapshot(objects, cfg, NOW), cfg)
    memo = PodMemo()
    for _ in range(3):  # the first cycle reads, the next ones copy what it read
        again = run_cycle(build_snapshot(objects, cfg, NOW, pod_reader=memo.read), cfg)
        memo.next_cycle()
        assert outcome(again) == outcome(fresh)
    kept = {k: state(p) for k, (_, p, _) in memo.last.items() if p is not None}
    assert len(kept) == len(memo.last), "pods unchanged for two cycles are kept"
    run_cycle(build_snapshot(objects, cfg, NOW, pod_reader=memo.read), cfg)
    after = {k: state(p) for k, (_, p, _) in memo.seen.items() if p is not None}
    assert after == kept, "a cycle changed a pod the memo keeps"


def test_a_changed_or_deleted_pod_is_not_served_from_the_memo() -> None:
    a, b = pod("a", gpus=1), pod("b", gpus=1)
    memo = PodMemo()
    first = memo.read(a, [])
    memo.read(b, [])
    memo.next_cycle()
    assert memo.read(a, []) is not first and state(memo.read(a, [])) == state(first)  # copies, same content
    a2 = copy.deepcopy(a)  # the watch replaced the object: a new dict
    a2["metadata"]["labels"] = {"changed": "yes"}
    assert memo.read(a2, []).labels == {"changed": "yes"}
    memo.next_cycle()
    assert set(memo.last) == {"default/a"}, "b was not read in the last cycle: forgotten"


def test_a_pod_copy_has_every_field() -> None:
    original = Pod("ns", "p", "uid")
    for name in Pod.__slots__:
        setattr(original, name, object())  # a distinct value per field
    clone = original.copy()
    assert clone is not original
    for name in Pod.__slots__:
        assert getattr(clone, name) is getattr(original, name), name
