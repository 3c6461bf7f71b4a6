"""A shared-GPU pod holds at least 1 milli-GPU of each device it is on (``Pod.device_share``), so the GPUs a node
counts idle are always its devices with nothing on them, whatever the pods are: a gpu-memory pod on a node that does
not publish its GPU memory (its share reads 0), a tiny one, a fraction. Checked through a cold snapshot's
``occupy`` and the node index's ``assign``/``release`` in any order; the engine once released such a pod's device
twice (a releasing gpu-memory pod lent to a consolidation scenario: idle 9 of 8 GPUs)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.nodes import occupy
from kaid.model.objects import Node, Pod
from kaid.placement.index import NodeIndex

GPUS = 4


def _node(publishes_memory: bool) -> Node:
    node = Node("n", {}, [], False, True, 64_000, 10**12, 110, GPUS, 81_920 if publishes_memory else 0)
    node.index = 0
    return node


def _pod(i: int, kind: str, device: int) -> Pod:
    pod = Pod("ns", f"p{i}", f"u{i}")
    pod.cpu, pod.mem, pod.node, pod.devices = 100, 1, "n", (device,)
    if kind == "whole":
        pod.gpu_whole = 1
    elif kind == "fraction":
        pod.gpu_frac, pod.frac_devices = 250, 1
    else:  # gpu memory: a tiny request, or one of a quarter of a device
        pod.gpu_mem_mib, pod.frac_devices = (1 if kind == "tiny" else 20_480), 1
    return pod


def _idle_is_the_empty_devices(node: Node) -> bool:
    """(More pods than the node holds go on devices beyond its own, ``nodes.beyond``: never idle GPUs.)"""
    return node.idle == sum(1 for u in node.dev_used[:node.gpus] if u == 0) and 0 <= node.idle <= node.gpus


KINDS = st.sampled_from(["whole", "fraction", "memory", "tiny"])


@settings(max_examples=300, deadline=None)
@given(st.booleans(), st.lists(st.tuples(KINDS, st.integers(0, GPUS - 1)), min_size=1, max_size=10),
       st.randoms(use_true_random=False))
def test_a_device_is_idle_exactly_when_nothing_is_on_it(publishes_memory: bool,
                                                       pods: list[tuple[str, int]], rnd: object) -> None:
    node = _node(publishes_memory)
    on = [_pod(i, kind, device) for i, (kind, device) in enumerate(pods)]
    for pod in on:  # a cold snapshot reads the running pods
        occupy(node, pod)
        assert _idle_is_the_empty_devices(node)
    index = NodeIndex([node])
    order = list(on)
    rnd.shuffle(order)  # type: ignore[attr-defined]
    for pod in order:  # a scenario lends each pod's devices and gives them back, in any order
        index.release(node, pod, pod.devices, planning=True)
        assert _idle_is_the_empty_devices(node)
    for pod in order:
        index.assign(node, pod, pod.devices)
        assert _idle_is_the_empty_devices(node)
    for pod in order:
        index.release(node, pod, pod.devices)
    assert node.idle == node.gpus and node.dev_used[:GPUS] == [0] * GPUS and not any(node.dev_used[GPUS:])


def test_a_gpu_memory_pod_on_a_node_without_published_memory_keeps_its_device() -> None:
    node = _node(publishes_memory=False)
    pod = _pod(0, "memory", 2)
    occupy(node, pod)
    assert pod.device_share(node) == 1 and node.dev_used[2] == 1 and node.idle == GPUS - 1
    index = NodeIndex([node])
    index.release(node, pod, pod.devices, planning=True)
    assert node.idle == GPUS
