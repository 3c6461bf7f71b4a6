"""``occupy``'s short cut for a whole-GPU pod that recorded as many devices as it holds, each a device of its node, free
and named once (most running pods, read one after another into a cold snapshot): it takes the devices the general rule
(``_occupy_whole``) takes, on nodes of random use and pods that record any devices at all (too few, too many,
repeated, out of range, busy ones)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kaid.model import nodes
from kaid.model.nodes import occupy
from kaid.model.objects import Node, Pod


def _node(gpus: int, used: list[int]) -> Node:
    node = Node("n", {}, [], False, True, 128_000, 10**12, 110, gpus, 80_000)
    node.dev_used = [used[d] if d < len(used) else 0 for d in range(gpus)]
    node.idle = sum(1 for u in node.dev_used if u == 0)
    return node


def _pod(whole: int, devices: list[int]) -> Pod:
    pod = Pod("ns", "p", "uid")
    pod.gpu_whole, pod.cpu, pod.mem, pod.devices = whole, 1000, 10**9, tuple(devices)
    return pod


def _state(node: Node, pod: Pod) -> tuple[object, ...]:
    return (node.dev_used, node.idle, node.used_cpu, node.used_mem, node.used_pods, pod.devices)


_USE = st.sampled_from([0, 0, 0, 250, 500, 1000, 2000])


@given(st.integers(1, 8), st.lists(_USE, max_size=8), st.lists(st.integers(-1, 8), max_size=5), st.integers(0, 4))
def test_the_short_cut_takes_what_the_general_rule_takes(gpus: int, used: list[int], devices: list[int],
                                                         whole: int) -> None:
    whole = whole or max(1, len(devices))  # (0: as many as it recorded, the short cut's case)
    quick_node, quick_pod = _node(gpus, used), _pod(whole, devices)
    occupy(quick_node, quick_pod)
    plain_node, plain_pod = _node(gpus, used), _pod(whole, devices)
    plain_node.used_cpu, plain_node.used_mem, plain_node.used_pods = 1000, 10**9, 1
    nodes._occupy_whole(plain_node, plain_pod)
    assert _state(quick_node, quick_pod) == _state(plain_node, plain_pod)


def test_recorded_devices_that_are_free_are_taken_as_recorded() -> None:
    node, pod = _node(8, [1000, 0, 0, 1000]), _pod(2, [2, 1])
    occupy(node, pod)
    assert pod.devices == (2, 1)
    assert node.dev_used == [1000, 1000, 1000, 1000, 0, 0, 0, 0] and node.idle == 4


def test_a_busy_repeated_or_foreign_device_goes_the_general_way() -> None:
    for recorded, taken in (([0, 1], (1, 2)), ([1, 1], (1, 2)), ([1, 8], (1, 2)), ([-1, 2], (2, 1))):
        node, pod = _node(8, [1000]), _pod(2, recorded)
        occupy(node, pod)
        assert pod.devices == taken, recorded
        assert node.idle == 5
