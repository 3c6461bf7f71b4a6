"""Cold builds frozen under kaid's collector settings (``kaid.model.build.freeze_builds``, turned on by
``kaid.kube.startup.settle_gc``): the snapshot's objects are out of every collection's sight once built, nothing
unreachable is frozen with them, and a released snapshot leaves nothing frozen behind, cycle after cycle, in a
loop of cold cycles as the benchmark runs them and in the simulator. The daemon's cold path lets go of each
snapshot once the status writer has read it (``release_when_read``)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager

from benchmarks.bench_allocate import build_workload, config_for, kaid_gc
from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.kube.daemon import release_when_read
from kaid.kube.startup import GC_THRESHOLDS, settle_gc
from kaid.model import build
from kaid.model.build import build_snapshot, freeze_builds
from kaid.model.objects import Snapshot
from kaid.sim.cluster import EPOCH, builtin_cluster, builtin_profile, simulate
from kaid.sim.workload import generate


def _ids(snap: Snapshot) -> set[int]:
    return {id(snap), *map(id, snap.pods), *map(id, snap.jobs.values()), *map(id, snap.queues.values()),
            *map(id, snap.nodes)}


def _in_sight(ids: set[int]) -> int:
    """How many of the objects ``ids`` names a collection would walk (tracked in a generation, not frozen)."""
    return sum(1 for o in gc.get_objects() if id(o) in ids)


def test_a_frozen_build_is_out_of_the_collectors_sight() -> None:
    wl = build_workload(40, 400, 18, 0)
    cfg = config_for("greedy")
    with kaid_gc():
        frozen = gc.get_freeze_count()
        snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
        ids = _ids(snap)
        assert len(ids) > 500
        assert _in_sight(ids) == 0
        assert gc.get_freeze_count() >= frozen + len(ids)
        assert run_cycle(snap, cfg).binds
        snap.release()
        del snap
    with kaid_gc():  # (the switch is off again afterwards)
        pass
    assert not build._Builds.frozen
    snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
    assert _in_sight(_ids(snap)) > 500  # the check above can fail: not frozen, a collection walks them


class _Cyclic:
    def __init__(self) -> None:
        self.me = self


def test_nothing_unreachable_is_frozen_with_a_build() -> None:
    """What was garbage before the build is collected, not frozen with it (frozen, it would never be freed)."""
    wl = build_workload(20, 100, 18, 0)
    cfg = config_for("greedy")
    with kaid_gc():
        was = gc.isenabled()
        gc.disable()  # (no collection between the garbage and the build but the build's own)
        try:
            garbage = _Cyclic()
            gone = weakref.ref(garbage)
            del garbage
            snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
        finally:
            if was:
                gc.enable()
        snap.release()
        gc.collect()
        assert gone() is None


@contextmanager
def _frozen_builds_on() -> Iterator[None]:
    """kaid's settings as ``settle_gc`` leaves them, undone afterwards."""
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    was = freeze_builds(False)
    try:
        settle_gc()
        assert build._Builds.frozen and gc.get_threshold() == GC_THRESHOLDS
        yield
    finally:
        freeze_builds(was)
        gc.set_threshold(*before)
        if not frozen:
            gc.unfreeze()


def test_cold_cycles_released_leave_nothing_frozen_behind() -> None:
    """A loop of cold cycles on the same objects, each snapshot released (the benchmark's ``run_once``, the daemon's
    cold path): after the first, the frozen count is the same after every cycle. Unreleased, each cycle would leave
    its whole snapshot frozen for good."""
    wl = build_workload(40, 400, 18, 0)
    cfg = config_for("greedy")
    counts: list[int] = []
    with _frozen_builds_on():
        for _ in range(6):
            snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
            assert run_cycle(snap, cfg).binds
            snap.release()
            del snap
            counts.append(gc.get_freeze_count())
    assert len(set(counts[2:])) == 1, counts


def test_the_simulators_many_cycles_hold_no_more_with_frozen_builds() -> None:
    """Six hours on 32 nodes (hundreds of cycles, each snapshot released): the objects held at the end, frozen or
    not, are no more with frozen builds than without."""
    def held(on: bool) -> tuple[int, int]:
        cycles = [0]

        def count(*_: object) -> None:
            cycles[0] += 1

        was = freeze_builds(on)
        try:
            simulate(builtin_cluster(32), generate(builtin_profile(0, 6.0)), SchedulerConfig(), 6.0, on_cycle=count)
        finally:
            freeze_builds(was)
        gc.collect()
        return len(gc.get_objects()) + gc.get_freeze_count(), cycles[0]

    with _frozen_builds_on():
        off, n = held(False)
        on, n_on = held(True)
    assert n == n_on and n > 200
    assert on <= off + 200, (on, off)


def test_the_daemons_cold_snapshot_is_released_once_the_status_writer_has_read_it() -> None:
    wl = build_workload(20, 100, 18, 0)
    cfg = config_for("greedy")
    snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
    reading: Future[None] = Future()
    release_when_read(snap, reading)
    assert snap.pods  # the writer still reads it
    reading.set_result(None)
    assert not snap.pods and not snap.jobs
    other = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
    release_when_read(other, None)  # no writer on it: at once
    assert not other.pods
