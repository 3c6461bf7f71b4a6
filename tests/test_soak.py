"""The soak (benchmarks/soak.py), short: one virtual day on 50 nodes with the default trace, every cycle's
invariants checked (no node overcommitted counting GPU fractions, gangs all or nothing, no queue above its
limit). Timings are reported by the full run, never asserted here. And the checker itself: each invariant,
broken on purpose, is found."""

from __future__ import annotations

import copy
from typing import Any

from benchmarks.soak import run, slope, soak_cluster
from kaid.api import constants as c
from kaid.sim.cluster import EPOCH, job_objects
from kaid.sim.invariants import GangWatch, violations
from kaid.sim.workload import JobSpec

Obj = dict[str, Any]


def test_one_virtual_day_on_50_nodes_keeps_every_invariant() -> None:
    """Allocation and stale gangs only: with the victim searches a busy cycle takes seconds here, and preempt
    breaks a limit (docs/reliability.md, "Credentials, usage history and soak")."""
    lines: list[str] = []
    report = run(days=1, nodes=50, seed=3, cycle_s=300, sample_s=3600, load=None, log=lines.append,
                 overrides={"actions": ["allocate", "stale-gang"]})
    assert report["invariantsBroken"] == 0, report["brokenCycles"][:3]
    assert report["cycles"] >= 200 and report["binds"] > 1000  # it did schedule, a busy day
    assert report["meanAllocation"] > 0.6
    assert len(report["samples"]) == 24 + 1
    assert all(s["cycleMedianMs"] is not None and s["rssMB"] > 0 for s in report["samples"][1:])
    assert all(s["pyBlocks"] > 0 and s["gcObjects"] > 0 and isinstance(s["ortools"], bool) for s in report["samples"])
    assert set(report["fits"]) == {"cycleMedianMs", "rssMB", "podsBound", "pyBlocks"}


def test_slope_is_least_squares() -> None:
    assert slope([0, 1, 2, 3], [1, 3, 5, 7]) == 2
    assert slope([0, 1, 2], [5, 5, 5]) == 0
    assert slope([1], [1]) is None


def _bound_pod(obj: Obj, node: str, group: str | None = None) -> Obj:
    obj = copy.deepcopy(obj)
    obj["spec"]["nodeName"] = node
    obj["status"]["phase"] = "Running"
    if group:
        obj["metadata"]["labels"][c.GPU_GROUP_LABEL] = group
    return obj


def test_each_invariant_broken_on_purpose_is_found() -> None:
    cluster = soak_cluster(2)  # gpu-000 and gpu-001, 8 GPUs each; research's limit 1.5 x its quota
    research = next(o for o in cluster if o["kind"] == "Queue" and o["metadata"]["name"] == "research")
    limit = research["spec"]["resources"]["gpu"]["limit"]
    assert limit == 4  # round(3 * 1.5): 2 nodes, 16 GPUs, quota round(16 * 0.1875)
    now = EPOCH + 100

    def job(name: str, queue: str, pods: int, gpus: float, min_member: int) -> list[Obj]:
        spec = JobSpec(name=name, queue=queue, kind="train", arrival_s=0, duration_s=60, pods=pods,
                       gpus_per_pod=gpus, min_member=min_member, priority_class="train",
                       cpu_milli_per_pod=1000, memory_mb_per_pod=1000)
        return job_objects(spec, EPOCH)

    # a sound state: 8 whole GPUs on gpu-000, two halves sharing one GPU of gpu-001, a whole gang of 2
    big = job("big", "team-a", 1, 8, 1)
    halves = job("halves", "team-b", 2, 0.5, 1)
    gang = job("gang", "team-a", 2, 1, 2)
    sound = [*cluster, big[0], _bound_pod(big[1], "gpu-000"), halves[0], _bound_pod(halves[1], "gpu-001", "g1"),
             _bound_pod(halves[2], "gpu-001", "g1"), gang[0], _bound_pod(gang[1], "gpu-001"),
             _bound_pod(gang[2], "gpu-001")]
    assert violations(sound, now, 60) == []

    over = [*sound, *(lambda j: [j[0], _bound_pod(j[1], "gpu-000")])(job("extra", "team-a", 1, 1, 1))]
    assert any("gpu-000: 9 whole GPUs" in v for v in violations(over, now, 60))
    third = job("third", "team-b", 1, 0.5, 1)
    shared = [*sound, third[0], _bound_pod(third[1], "gpu-001", "g1")]
    assert any("shared GPU g1 holds 1.5" in v for v in violations(shared, now, 60))

    partial = [o for o in sound if o["metadata"]["name"] != "gang-1"]
    assert violations(partial, now, 60) == []  # just fell below minMember: not marked stale yet
    watch = GangWatch(allowed_s=120)
    assert watch.check(partial, now) == [] and watch.check(partial, now + 120) == []
    assert watch.check(partial, now + 121) == ["gang sim/gang: 1 of minMember 2 pods placed, partly placed for 121 s"]
    assert watch.check(sound, now + 122) == [] and watch.check(partial, now + 300) == []  # whole again: anew
    marked = copy.deepcopy(partial)
    pg = next(o for o in marked if o["kind"] == "PodGroup" and o["metadata"]["name"] == "gang")
    pg["metadata"].setdefault("annotations", {})[c.STALE_SINCE_ANNOTATION] = "2026-01-01T00:00:00Z"
    assert violations(marked, now, 600) == []  # stale, within its grace
    assert violations(marked, now, 60) == ["gang sim/gang: 1 of minMember 2 pods placed, stale since "
                                           "2026-01-01T00:00:00Z"]
    moved = copy.deepcopy(partial)  # its other pod pipelined onto a node its victims are leaving: placed
    moving = next(o for o in gang[1:] if o["metadata"]["name"] == "gang-1")
    moved.append({**moving, "metadata": {**moving["metadata"], "annotations": {
        **moving["metadata"]["annotations"], c.PIPELINED_NODE_ANNOTATION: "gpu-000"}}})
    assert GangWatch(0).check(moved, now + 1000) == []

    wide = job("wide", "research", 5, 1, 5)
    above = [*cluster, wide[0], *(_bound_pod(p, "gpu-001") for p in wide[1:])]
    assert violations(above, now, 60) == ["queue research: gpu 5 bound above its limit 4"]
