"""``predicates.shared_devices`` finds the device of a pod that shares one GPU in one pass (the fullest partly used
device with room, the emptiest when spreading, else the first idle one), ``whole_devices`` finds one GPU without a
list, both hand out one kept tuple per device number for one device (``one_device``), and ``room_for`` compares where
it called ``min``: the answers of the plain readings (kept here as the reference) on random nodes and pods."""

from __future__ import annotations

import random

import pytest

from kaid.model.objects import Node, Pod
from kaid.placement.predicates import one_device, room_for, shared_devices, whole_devices


def plain_shared_devices(node: Node, pod: Pod, spread: bool = False) -> tuple[int, ...] | None:
    share = pod.gpu_frac if pod.gpu_frac else node.mem_to_milli(pod.gpu_mem_mib)
    if share > 1000:
        return None
    chosen: list[int] = []
    used = node.dev_used
    partial = [d for d in range(node.gpus) if used[d] > 0 and used[d] + share <= 1000]
    partial.sort(key=lambda d: (used[d], d) if spread else (-used[d], d))
    idle = [d for d in range(node.gpus) if used[d] == 0]
    for d in partial + idle:
        if len(chosen) == pod.frac_devices:
            break
        chosen.append(d)
    return tuple(chosen) if len(chosen) == pod.frac_devices else None


def plain_room_for(node: Node, pod: Pod) -> int:
    room = node.alloc_pods - node.used_pods
    if pod.gpu_whole:
        room = min(room, node.idle // pod.gpu_whole)
    if pod.cpu:
        room = min(room, (node.alloc_cpu - node.used_cpu) // pod.cpu)
    if pod.mem:
        room = min(room, (node.alloc_mem - node.used_mem) // pod.mem)
    return max(0, room)


def plain_whole_devices(node: Node, count: int) -> tuple[int, ...]:
    idle = tuple(d for d in range(node.gpus) if node.dev_used[d] == 0)
    return idle if count <= 0 else idle[:count]


def _node(rng: random.Random) -> Node:
    gpus = rng.choice([0, 1, 2, 4, 8, 8, 70])
    n = Node("n", {}, [], False, True, 8000, 64 << 30, rng.choice([3, 110]), gpus, rng.choice([0, 40960, 81920]))
    n.dev_used = [rng.choice([0, 0, 100, 250, 500, 500, 750, 900, 1000]) for _ in range(gpus)]
    n.idle = n.dev_used.count(0)
    n.used_cpu = rng.choice([0, 4000, 7500, 8000, 9000])
    n.used_mem = rng.choice([0, 32 << 30, 64 << 30])
    n.used_pods = rng.choice([0, 3, 4])
    return n


@pytest.mark.parametrize("seed", range(10))
def test_shared_devices_are_the_plain_readings(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(3000):
        node = _node(rng)
        pod = Pod("ns", "p", "u")
        pod.frac_devices = rng.choice([1, 1, 1, 2, 3])
        if rng.random() < 0.7:
            pod.gpu_frac = rng.choice([100, 250, 500, 750, 1000])
        else:
            pod.gpu_mem_mib = rng.choice([0, 10000, 20000, 40000, 90000])
        spread = rng.random() < 0.5
        got = shared_devices(node, pod, spread)
        assert got == plain_shared_devices(node, pod, spread), (node.dev_used, spread)
        if got is not None and len(got) == 1 and got[0] < 64:
            assert got is one_device(got[0])


@pytest.mark.parametrize("seed", range(5))
def test_whole_devices_are_the_plain_reading(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(3000):
        node = _node(rng)
        count = rng.choice([0, 1, 1, 1, 2, 3, 8])
        got = whole_devices(node, count)
        assert got == plain_whole_devices(node, count), (node.dev_used, count)
        if count == 1 and got and got[0] < 64:
            assert got is one_device(got[0])
    assert [one_device(d) for d in (0, 7, 63, 64, 100)] == [(0,), (7,), (63,), (64,), (100,)]


@pytest.mark.parametrize("seed", range(5))
def test_room_is_the_plain_reading(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(3000):
        node = _node(rng)
        pod = Pod("ns", "p", "u")
        pod.gpu_whole, pod.cpu, pod.mem = rng.choice([0, 1, 2, 8]), rng.choice([0, 500, 3000]), rng.choice([0, 8 << 30])
        assert room_for(node, pod) == plain_room_for(node, pod)
