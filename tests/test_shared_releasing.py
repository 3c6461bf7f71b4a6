"""A shared-GPU pod goes into a GPU group that has room for it only counting the share its releasing pods hold, before
an idle GPU, and is pipelined there, with its whole job (KAI's FittingGPUs counts a group's releasing share; gpupack
puts the fullest group first; gpuSharing.go pipelines a pod whose group has no idle room; ShouldPipelineJob, at
d5bc503a)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.placement.index import NodeIndex
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]
_NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC).timestamp()


def _shared(name: str, frac: str, node_name: str | None = None, group: str | None = None,
            releasing: bool = False, job: str | None = None) -> Obj:
    p = pod(name, queue="q", node_name=node_name, group=job, annotations={"gpu-fraction": frac},
            labels={"runai-gpu-group": group} if group else None)
    if releasing:
        p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:30Z"
    return p


def _cycle(objs: list[Obj]) -> Decisions:
    cfg = SchedulerConfig.model_validate({"actions": ["allocate"]})
    return run_cycle(build_snapshot([queue("q"), node("n0", gpus=2), *objs], cfg, _NOW), cfg)


def test_a_group_with_room_only_by_its_releasing_share_comes_first_and_pipelines() -> None:
    # device 0: a running half and a releasing half; device 1 idle: the pending half is pipelined into device 0's
    # group (KAI allocate-20), not bound on device 1
    d = _cycle([_shared("run", "0.5", "n0", "g0"), _shared("rel", "0.5", "n0", "g0", releasing=True),
                _shared("new", "0.5")])
    assert not d.binds
    assert [(p.pod, p.node, p.devices) for p in d.pipelined] == [("default/new", "n0", (0,))]


def test_without_the_releasing_pod_it_binds_on_the_idle_gpu() -> None:
    d = _cycle([_shared("run", "0.5", "n0", "g0"), _shared("run2", "0.5", "n0", "g0"), _shared("new", "0.5")])
    assert not d.pipelined
    assert [(b.pod, b.node) for b in d.binds] == [("default/new", "n0")]


def test_a_group_all_releasing_is_not_shared_into() -> None:
    # every pod of device 0's group is releasing: the group does not fit (IsTaskFitOnGpuGroup), the idle GPU does
    d = _cycle([_shared("rel", "0.5", "n0", "g0", releasing=True), _shared("rel2", "0.5", "n0", "g0", releasing=True),
                _shared("new", "0.5")])
    assert not d.pipelined
    assert [(b.pod, b.node) for b in d.binds] == [("default/new", "n0")]


def test_a_room_it_has_without_the_releasing_share_binds() -> None:
    # device 0: a running quarter and a releasing half: the quarter left is idle room, bound there (the fullest group)
    d = _cycle([_shared("run", "0.25", "n0", "g0"), _shared("rel", "0.5", "n0", "g0", releasing=True),
                _shared("new", "0.25")])
    assert not d.pipelined
    assert [(b.pod, b.node) for b in d.binds] == [("default/new", "n0")]


def test_the_whole_gang_is_pipelined_when_one_pod_is() -> None:
    # a gang of two quarters: the first fits device 0's idle quarter, the second only by the releasing half: both are
    # pipelined (ShouldPipelineJob), none bound
    d = _cycle([_shared("run", "0.25", "n0", "g0"), _shared("rel", "0.5", "n0", "g0", releasing=True),
                _shared("g-0", "0.25", job="g"), _shared("g-1", "0.25", job="g"), podgroup("g", "q", 2)])
    assert not d.binds
    assert sorted(p.pod for p in d.pipelined) == ["default/g-0", "default/g-1"]


def test_a_releasing_pod_lent_to_a_plan_counts_no_more() -> None:
    cfg = SchedulerConfig.model_validate({})
    snap = build_snapshot([queue("q"), node("n0", gpus=2), _shared("run", "0.5", "n0", "g0"),
                           _shared("rel", "0.5", "n0", "g0", releasing=True), _shared("new", "0.5")], cfg, _NOW)
    index = NodeIndex(snap.nodes, pods=snap.pods)
    pods = {p.name: p for p in snap.pods}
    n0 = snap.nodes[0]
    index.note_releasing([pods["rel"]])
    assert index.best_node(pods["new"]) == (n0, (0,))  # into the group, by the releasing half
    assert index.must_pipeline(n0, pods["new"], (0,))
    index.release(n0, pods["rel"], pods["rel"].devices, planning=True)  # lent: its half is free now, no more releasing
    assert index.best_node(pods["new"]) == (n0, (0,)) and not index.must_pipeline(n0, pods["new"], (0,))
    index.assign(n0, pods["rel"], pods["rel"].devices)  # given back
    assert index.must_pipeline(n0, pods["new"], (0,))


def test_a_gpu_memory_pod_too() -> None:
    # the same with gpu-memory requests (40,960 MiB of 81,920: a half): pipelined into device 0's group
    objs = [pod(name, queue="q", node_name="n0" if name != "new" else None, annotations={"gpu-memory": "40960"},
                labels={"runai-gpu-group": "g0"} if name != "new" else None) for name in ("run", "rel", "new")]
    objs[1]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:30Z"
    d = _cycle(objs)
    assert not d.binds
    assert [(p.pod, p.node, p.devices) for p in d.pipelined] == [("default/new", "n0", (0,))]
