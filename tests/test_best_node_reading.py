"""The node index's greedy choice for a whole-GPU pod and for a shared-GPU pod that takes an idle device
(``NodeIndex.best_node``, which reads the buckets in place, skipping the nodes outside the region and the static
mask) against the plain reading of every node: of the nodes the pod's signature may go to, in the region, with
enough idle GPUs and room for the pod, the fewest idle GPUs (the most when spreading), then the lowest index; for a
shared-GPU pod, the first such node in that order with an idle device that takes it. Regions are rack domains and
random masks; nodes are filled and emptied through the index between the choices."""

from __future__ import annotations

import random

import pytest

from kaid.model.objects import Node, Pod
from kaid.placement.index import Devices, NodeIndex


def plain_best_node(index: NodeIndex, pod: Pod, spread: bool, allowed: bytearray | None) -> tuple[Node, Devices] | None:
    mask = index.static_mask(pod)
    inside = [n for n in index.nodes if mask[n.index] and (allowed is None or allowed[n.index])]
    order = sorted(inside, key=lambda n: (-n.idle if spread else n.idle, n.index))
    for n in order:
        if pod.gpu_whole:
            if n.idle >= pod.gpu_whole and n.used_cpu + pod.cpu <= n.alloc_cpu and \
                    n.used_mem + pod.mem <= n.alloc_mem and n.used_pods < n.alloc_pods:
                return n, index.devices_for(n, pod) or ()
        elif n.idle >= 1:
            devs = index.devices_for(n, pod, spread)
            if devs is not None:
                return n, devs
    return None


def _index(rng: random.Random) -> NodeIndex:
    nodes = []
    for i in range(rng.randint(1, 40)):
        labels = {"pool": rng.choice("ab"), "rack": f"r{rng.randint(0, 5)}"}
        n = Node(f"n{i:02d}", labels, [], False, True, rng.choice([4000, 64000]), 10**12, rng.choice([2, 110]),
                 rng.choice([0, 4, 8, 8]), 81920)
        n.index = i
        nodes.append(n)
    return NodeIndex(nodes)


def _pod(rng: random.Random, name: str) -> Pod:
    pod = Pod("ns", name, name)
    if rng.random() < 0.75:
        pod.gpu_whole = rng.choice([1, 1, 2, 4, 8])
    else:  # a share of one device: the partly used devices are all full or idle here, so an idle device takes it
        pod.gpu_frac, pod.frac_devices = 1000, 1
    pod.cpu = rng.choice([0, 1000, 3000])
    if rng.random() < 0.3:
        pod.node_selector, pod.sig = {"pool": "a"}, "pool=a"
    return pod


@pytest.mark.parametrize("seed", range(40))
def test_the_choice_is_the_plain_readings(seed: int) -> None:
    rng = random.Random(seed)
    index = _index(rng)
    racks = list(index.domains("rack").values())
    placed: list[tuple[Node, Pod, Devices]] = []
    for turn in range(60):
        pod = _pod(rng, f"p{turn}")
        spread = rng.random() < 0.3
        draw = rng.random()
        allowed = rng.choice(racks) if draw < 0.4 else \
            bytearray(rng.random() < 0.5 for _ in index.nodes) if draw < 0.55 else None
        got = index.best_node(pod, spread, allowed)
        want = plain_best_node(index, pod, spread, allowed)
        assert (None if got is None else (got[0].name, got[1])) == (None if want is None else (want[0].name, want[1]))
        if got is not None and rng.random() < 0.7:
            index.assign(got[0], pod, got[1])
            placed.append((got[0], pod, got[1]))
        if placed and rng.random() < 0.25:
            node, gone, devs = placed.pop(rng.randrange(len(placed)))
            index.release(node, gone, devs)
