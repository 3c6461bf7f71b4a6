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
from kaid.model import pods as model_pods
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


READ_POD = model_pods.read_pod


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the pods ``model_pods.read_pod`` reads from now on (it still reads them)."""
    reads: list[str] = []

    def counting_read(obj: dict[str, Any], problems: list[Any]) -> Pod:
        reads.append(obj["metadata"]["name"])
        return READ_POD(obj, problems)

    monkeypatch.setattr(model_pods, "read_pod", counting_read)
    return reads


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


@pytest.mark.parametrize("path", SCENARIOS[:6], ids=[p.stem for p in SCENARIOS[:6]])
def test_pods_read_ahead_decide_like_reading_fresh(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kaid reads the pods of its first list as they arrive (``preread``): the first snapshot copies them, reads
    none again, and decides as one that reads them itself; a changed object is still read again."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    objects = [d for d in docs[1:] if isinstance(d, dict)]
    cfg = SchedulerConfig.model_validate(docs[0].get("config") or {})
    fresh = run_cycle(build_snapshot(objects, cfg, NOW), cfg)
    memo = PodMemo()
    for obj in objects:
        memo.preread(obj)  # every object of a list goes by; only pods are kept
    pods = [o for o in objects if o.get("kind") == "Pod"]
    assert len(memo.last) == len(pods)
    reads = count_reads(monkeypatch)
    ahead = run_cycle(build_snapshot(objects, cfg, NOW, pod_reader=memo.read), cfg)
    assert reads == [] and outcome(ahead) == outcome(fresh)
    memo.next_cycle()
    if pods:
        changed = copy.deepcopy(pods[0])
        build_snapshot([o for o in objects if o is not pods[0]] + [changed], cfg, NOW, pod_reader=memo.read)
        assert reads == [changed["metadata"]["name"]]


def test_peek_copies_pods_read_ahead_and_remembers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The early first cycle's snapshot (``peek``) copies what the list's thread read ahead, reads the rest, and
    leaves the memo as it was for the first full snapshot."""
    a, b = pod("a", gpus=1), pod("b", gpus=2)
    memo = PodMemo()
    memo.preread(a)
    before = dict(memo.last)
    reads = count_reads(monkeypatch)
    got = memo.peek(a, [])
    assert reads == [] and got is not next(iter(memo.last.values()))[1], "a copy of the pod read ahead"
    assert state(got) == state(READ_POD(a, []))
    assert state(memo.peek(b, [])) == state(READ_POD(b, [])) and reads == ["b"]
    assert memo.last == before and memo.seen == {}, "peek remembers nothing"
    assert state(memo.peek(copy.deepcopy(a), [])) == state(got) and reads == ["b", "a"], "another dict is read"
