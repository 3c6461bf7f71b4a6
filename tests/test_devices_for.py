"""``NodeIndex.devices_for`` asks ``shared_devices`` once for a shared-GPU pod, where it asked ``resource_failure``
first (which asks ``shared_devices`` whether any devices are found) and then for the devices: the same answer as the
plain reading (kept here as the reference) on random nodes and pods, binpack and spread."""

from __future__ import annotations

import random

import pytest

from kaid.model.objects import Node, Pod
from kaid.placement.index import Devices, NodeIndex
from kaid.placement.predicates import resource_failure, shared_devices, whole_devices


def plain_devices_for(node: Node, pod: Pod, spread: bool) -> Devices | None:
    if resource_failure(node, pod) is not None:
        return None
    if pod.gpu_whole:
        return whole_devices(node, pod.gpu_whole)
    if pod.frac_devices:
        return shared_devices(node, pod, spread)
    return ()


def _node(rng: random.Random) -> Node:
    gpus = rng.choice([0, 1, 2, 4, 8])
    n = Node("n", {}, [], False, True, 8000, 64 << 30, 4, gpus, rng.choice([0, 40960, 81920]))
    n.dev_used = [rng.choice([0, 0, 250, 500, 750, 1000]) for _ in range(gpus)]
    n.idle = n.dev_used.count(0)
    n.used_cpu = rng.choice([0, 4000, 7500, 8000])
    n.used_mem = rng.choice([0, 32 << 30, 64 << 30])
    n.used_pods = rng.choice([0, 3, 4])
    return n


def _pod(rng: random.Random) -> Pod:
    p = Pod("ns", "p", "u")
    p.cpu, p.mem = rng.choice([0, 500, 1000]), rng.choice([0, 1 << 30])
    kind = rng.random()
    if kind < 0.25:
        p.gpu_whole = rng.choice([1, 2, 4])
    elif kind < 0.85:
        p.frac_devices = rng.choice([1, 1, 2, 3])
        if rng.random() < 0.6:
            p.gpu_frac = rng.choice([100, 250, 500, 750])
        else:
            p.gpu_mem_mib = rng.choice([10000, 20000, 40000, 90000])
    return p


@pytest.mark.parametrize("seed", range(10))
def test_devices_are_the_plain_readings(seed: int) -> None:
    rng = random.Random(seed)
    index = NodeIndex([])
    for _ in range(2000):
        node, pod, spread = _node(rng), _pod(rng), rng.random() < 0.5
        assert index.devices_for(node, pod, spread) == plain_devices_for(node, pod, spread), (node.dev_used, pod)
