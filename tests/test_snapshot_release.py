"""``Snapshot.release``: a cold snapshot its caller is done with is freed by reference counting, with no cycle left
for the garbage collector, even after a cycle ran on it and its decisions are kept; a released snapshot is empty
(a use after it finds no cluster); a live model's snapshot is never released; and the simulator and dry-runs,
which release each cycle's snapshot, decide as before (tests/test_soak.py and the dry-run tests hold the rest)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from benchmarks.bench_allocate import build_workload, config_for
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from kaid.model.objects import Job, Node, Pod, Queue, Snapshot
from kaid.sim.cluster import EPOCH
from kaid.sim.dryrun import dry_run

_KINDS = (Pod, Job, Queue, Node, Snapshot)


@contextmanager
def _no_collector() -> Iterator[None]:
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _left(ids: set[int]) -> int:
    """How many of the objects ``ids`` names are still tracked (alive, or cyclic garbage the collector has not
    freed: it is off)."""
    return sum(1 for o in gc.get_objects() if type(o) in _KINDS and id(o) in ids)


def _ids(snap: Snapshot) -> set[int]:
    return {id(snap), *map(id, snap.pods), *map(id, snap.jobs.values()), *map(id, snap.queues.values()),
            *map(id, snap.nodes)}


@pytest.mark.parametrize("cycle", [False, True])
def test_a_released_snapshot_is_freed_by_reference_counting(cycle: bool) -> None:
    wl = build_workload(40, 400, 18, 0)
    cfg = config_for("greedy")
    with _no_collector():
        snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
        decisions = run_cycle(snap, cfg) if cycle else None
        ids = _ids(snap)
        assert len(ids) > 500
        snap.release()
        del snap
        assert _left(ids) == 0
        assert decisions is None or decisions.binds  # (the decisions outlive it)


def test_an_unreleased_snapshot_waits_for_the_collector() -> None:
    """The check above can fail: without ``release`` the pods and jobs outlive the snapshot's last reference."""
    wl = build_workload(40, 400, 18, 0)
    cfg = config_for("greedy")
    with _no_collector():
        snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
        ids = _ids(snap)
        del snap
        assert _left(ids) > 500


def test_a_released_snapshot_is_empty() -> None:
    wl = build_workload(40, 400, 18, 0)
    cfg = config_for("greedy")
    snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
    pods, queues = list(snap.pods), list(snap.queues.values())
    snap.release()
    assert not (snap.nodes or snap.pods or snap.jobs or snap.queues or snap.node_by_name)
    assert all(p.job is None for p in pods)
    assert all(q.parent is None and not q.children and not q.jobs for q in queues)
    assert not run_cycle(snap, cfg).binds  # a use after release finds no cluster


def test_a_live_models_snapshot_is_never_released() -> None:
    wl = build_workload(40, 400, 18, 0)
    cfg = config_for("greedy")
    model = LiveModel(cfg)
    for obj in wl.objects:
        model.upsert(obj)
    snap = model.snapshot(EPOCH + 3600.0)
    if snap.journal is None:
        pytest.skip("this live model hands out copies")
    with pytest.raises(ValueError, match="never released"):
        snap.release()
    assert snap.pods and all(p.job is not None for p in snap.pods)


def test_a_dry_run_releases_its_cycles_and_decides_as_before() -> None:
    wl = build_workload(40, 400, 18, 0)
    cfg = config_for("greedy")
    released: list[Snapshot] = []
    real = Snapshot.release

    def spy(self: Snapshot) -> None:
        released.append(self)
        real(self)

    Snapshot.release = spy  # type: ignore[method-assign]
    try:
        result = dry_run(wl.objects, cfg, cycles=3, now=EPOCH + 3600.0)
    finally:
        Snapshot.release = real  # type: ignore[method-assign]
    assert len(released) == 3 and all(not s.pods for s in released)
    assert result.snapshot is not None and result.snapshot.pods  # the final snapshot is handed out whole
    assert any(a["type"] == "bind" for a in result.actions)
