"""Allocate binds a batch of one pod without a topology domain to choose where the node index's greedy choice puts
it, without a gang plan (``allocate._place_one``): the same decisions as the general path (``_plan``, ``_commit``), on
random clusters with whole-GPU, shared, gpu-memory and cpu-only pods, queue limits, topology constraints, pinned and
releasing pods, over cycles."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kaid.actions import allocate
from kaid.api import constants as c
from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.sim.apply import apply
from tests.equivalence import assert_same_decisions
from tests.objects import Obj, node, pod, podgroup, queue

_TOPOLOGY = {"apiVersion": f"{c.TOPOLOGY_GROUP}/{c.TOPOLOGY_VERSION}", "kind": "Topology",
             "metadata": {"name": "racks"}, "spec": {"levels": [{"nodeLabel": "rack"}]}}


def _cluster(rng: random.Random) -> list[Obj]:
    objs: list[Obj] = [_TOPOLOGY, queue("org", gpu=(-1, -1, 1))]
    for i in range(rng.randint(2, 6)):
        objs.append(node(f"n{i}", gpus=rng.choice([0, 2, 4, 8]), cpu=rng.choice(["8", "64"]),
                         labels={"rack": f"r{i % 2}", "pool": "ab"[i % 3 == 0]},
                         gpu_memory=rng.choice([40960, 81920, None])))
    leaves = []
    for q in range(3):
        limit = rng.choice([-1, -1, 1, 2, 3.5])
        objs.append(queue(f"q{q}", "org", gpu=(rng.choice([0, 1, 2]), limit, 1), memory=(-1, -1, 1)))
        leaves.append(f"q{q}")
    for j in range(rng.randint(3, 14)):
        name = f"j{j}"
        size = rng.choice([1, 1, 1, 2, 3])
        spec: dict[str, Any] = {}
        if rng.random() < 0.2:
            spec["topologyConstraint"] = {"topology": "racks",
                                          rng.choice(["requiredTopologyLevel", "preferredTopologyLevel"]): "rack"}
        objs.append(podgroup(name, rng.choice(leaves), rng.randint(1, size), **spec))
        kind = rng.random()
        gpus, ann = 0, {}
        if kind < 0.45:
            gpus = rng.choice([1, 1, 2, 4])
        elif kind < 0.6:
            ann = {c.GPU_FRACTION_ANNOTATION: rng.choice(["0.25", "0.5"])}
        elif kind < 0.8:
            ann = {c.GPU_MEMORY_ANNOTATION: rng.choice(["10000", "20000", "40000"])}
        pinned: dict[str, Any] = {"nodeSelector": {"pool": rng.choice("ab")}} if rng.random() < 0.15 else {}
        running = rng.random() < 0.25
        for k in range(size):
            obj = pod(f"{name}-{k}", gpus=gpus, group=name, annotations=dict(ann), cpu=rng.choice(["1", "4"]),
                      node_name=f"n{rng.randint(0, 1)}" if running and not ann and not gpus else None, **pinned)
            if running and rng.random() < 0.5:
                obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:30Z"  # releasing: something to pipeline on
            objs.append(obj)
    return objs


def _over(objs: list[Obj], cycles: int) -> list[Decisions]:
    cfg = SchedulerConfig()
    out = []
    for n in range(cycles):
        t = 1_767_225_600.0 + 60 * n
        d = run_cycle(build_snapshot(objs, cfg, t), cfg)
        out.append(d)
        apply(objs, d, t)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_one_pod_bound_without_a_plan_decides_as_the_plan(seed: int) -> None:
    rng = random.Random(seed)
    objs = _cluster(rng)
    lanes: list[bool | None] = []
    short = allocate._place_one

    def counted(*args: object) -> bool | None:
        out = short(*args)  # type: ignore[arg-type]
        lanes.append(out)
        return out

    def plain(*args: object) -> None:
        return None

    import copy
    assert_same_decisions(lambda: _over(copy.deepcopy(objs), 3), [(allocate, "_place_one", counted)],
                          [(allocate, "_place_one", plain)])
    assert lanes or seed % 7  # (most seeds bind something through it)


def test_a_gpu_memory_pod_over_its_limit_on_a_smaller_gpu_waits() -> None:
    """A gpu-memory pod fits the queue's limit on the reference (largest) GPU but not on the smaller GPU the greedy
    choice puts it on: not bound, the limit says why (the check on the node)."""
    objs = [queue("org"), queue("q", "org", gpu=(0, 0.3, 1)), node("a-small", gpus=1, gpu_memory=40960),
            node("b-big", gpus=1, gpu_memory=81920), podgroup("j", "q"),
            pod("j-0", group="j", annotations={c.GPU_MEMORY_ANNOTATION: "20000"})]
    d = _over(objs, 1)[0]
    assert not d.binds
    assert d.pending["default/j"][0].code == "QueueLimit"


def test_a_gpu_memory_pod_is_checked_against_its_limit_on_the_largest_gpu() -> None:
    """The limit check before placing sizes a gpu-memory request on the largest GPU (the reference), not on the
    smallest one the order sizes it on: a pod that fits its queue's limit there is bound on a GPU that large."""
    objs = [queue("org"), queue("q", "org", gpu=(0, 0.3, 1)), queue("other", "org"),
            node("a-small", gpus=1, gpu_memory=40960), node("b-big", gpus=1, gpu_memory=81920),
            podgroup("busy", "other"), pod("busy-0", gpus=1, group="busy", node_name="a-small"),
            podgroup("j", "q"), pod("j-0", group="j", annotations={c.GPU_MEMORY_ANNOTATION: "20000"})]
    d = _over(objs, 1)[0]
    assert [(b.pod, b.node) for b in d.binds] == [("default/j-0", "b-big")]
