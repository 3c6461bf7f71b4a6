"""A gang with a pod that has succeeded is never stale (KAI's PodGroupInfo.IsStale, job_info.go:495): the finished
pod is counted for its job (``Job.succeeded``) by the cold build and the live model alike, and counts for nothing
else (no queue, no node, not placed)."""

from __future__ import annotations

from typing import Any

from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]
CFG = SchedulerConfig.model_validate({"actions": ["stale-gang"], "staleGangGraceSeconds": 0})


def _gang(done: str | None) -> list[Obj]:
    objs = [node("n", gpus=4), queue("q"), podgroup("g", "q", 3)]
    for i in range(3):
        objs.append(pod(f"g-{i}", gpus=1, group="g", node_name="n", phase="Running"))
    if done is not None:
        objs[-1]["status"]["phase"] = done
    return objs


def test_a_gang_with_a_succeeded_pod_is_not_evicted_a_failed_one_is() -> None:
    snap = build_snapshot(_gang("Succeeded"), CFG, 100.0)
    job = snap.jobs["default/g"]
    assert job.succeeded == 1 and [p.name for p in job.pods] == ["g-0", "g-1"]
    assert snap.queues["q"].allocated[0] == 2000  # (the finished pod holds nothing)
    assert run_cycle(snap, CFG).evictions == []
    failed = run_cycle(build_snapshot(_gang("Failed"), CFG, 100.0), CFG)
    assert sorted(e.pod for e in failed.evictions) == ["default/g-0", "default/g-1"]
    assert build_snapshot(_gang(None), CFG, 100.0).jobs["default/g"].succeeded == 0


def test_the_live_model_counts_a_pod_that_succeeds_and_forgets_it_when_deleted() -> None:
    model = LiveModel(CFG)
    objs = _gang(None)
    for o in objs:
        model.upsert(o)
    assert model.snapshot(100.0).jobs["default/g"].succeeded == 0
    finished = {**objs[-1], "status": {"phase": "Succeeded"}}
    model.upsert(finished)
    snap = model.snapshot(100.0)
    assert snap.jobs["default/g"].succeeded == 1
    assert run_cycle(snap, CFG).evictions == []
    model.delete("Pod", "default/g-2")
    snap = model.snapshot(100.0)
    assert snap.jobs["default/g"].succeeded == 0
    assert len(run_cycle(snap, CFG).evictions) == 2
