"""A node whose input is over-committed counts every GPU its pods hold, as KAI's NodeInfo does: a shared GPU group
that no device of the node is left for goes on a device beyond the node's (``nodes.beyond``), which placement never
offers, and, like a whole GPU with no device left, counts against the node's idle GPUs (``nodes.short``). KAI's idle
GPUs of such a node go below 0 (node_info.go addTaskResources, gpu_sharing_node_info.go
addSharedGPUTaskResourcesPerPodGroup at d5bc503a), and a fraction fits only where the idle GPUs and the groups with
room are as many as its devices (``NodeInfo.isTaskAllocatableOnNonAllocatedResources``): no fraction joins a group
with room there until a pod of the node goes. KAI's reclaim_test.go:630 (tests/conformance/kai-actions/reclaim-45: 4
GPUs holding 1 + 2 whole GPUs and two fractions with their own groups) evicts the other queue's fraction for a
pending one; kai pipelined the pending one onto the free half of a group with no victim, whichever pod the snapshot
read last."""

from __future__ import annotations

import pytest

from kaid.api import constants as c
from kaid.model.nodes import occupy, short
from kaid.model.objects import Node, Pod
from kaid.model.vocabulary import PodStatus
from kaid.placement.index import NodeIndex
from kaid.placement.predicates import resource_failure, shared_devices


def _node() -> Node:
    node = Node("n", {}, [], False, True, 64_000, 10**12, 110, 4, 81_920)
    node.index = 0
    return node


def _pod(name: str, whole: int = 0, group: str | None = None) -> Pod:
    pod = Pod("ns", name, name)
    pod.cpu, pod.mem, pod.node = 100, 1, "n"
    if whole:
        pod.gpu_whole = whole
    else:
        pod.gpu_frac, pod.frac_devices = 500, 1
        pod.labels = {c.GPU_GROUP_LABEL: group} if group else {}
    return pod


def _running() -> list[Pod]:
    return [_pod("whole1", whole=1), _pod("a", group="A"), _pod("whole2", whole=2), _pod("b", group="B")]


@pytest.mark.parametrize("reverse", [False, True])
def test_no_fraction_joins_a_group_while_the_node_holds_more_gpus_than_it_has(reverse: bool) -> None:
    node = _node()
    pods = _running()[::-1] if reverse else _running()
    for p in pods:
        occupy(node, p)
    assert node.idle == 0 and short(node) == 1  # 1 + 2 whole GPUs and 2 groups on 4 GPUs: KAI's idle GPUs are -1
    assert 500 in node.dev_used[:4]  # a group has room for another half...
    pending = _pod("pending")
    assert shared_devices(node, pending) is None  # ...which KAI gives nobody while the node is short
    assert resource_failure(node, pending) is not None

    index = NodeIndex([node])
    # the pod the node has no GPU for: the last group (on a device beyond the node's) or whole GPU (on a used one)
    leaving = next(p for p in pods if p.devices[0] >= 4 or (p.gpu_whole and node.dev_used[p.devices[0]] > 1000))
    index.release(node, leaving, leaving.devices)
    assert short(node) == 0 and node.idle == 0
    joined = shared_devices(node, pending)
    assert joined is not None and node.dev_used[joined[0]] == 500  # the group with room, now

    index.assign(node, pending, joined)
    assert not index.fits_exactly(node, leaving, leaving.devices)  # and it cannot come back: no GPU is left for it


def test_a_whole_gpu_with_no_device_left_counts_too() -> None:
    node = _node()
    pods = [_pod("a", group="A"), *[_pod(f"w{i}", whole=1) for i in range(4)]]  # a group and 4 whole GPUs on 4
    for p in pods:
        occupy(node, p)
    assert node.idle == 0 and short(node) == 1 and pods[-1].devices == (4,)
    pending = _pod("pending")
    assert shared_devices(node, pending) is None
    index = NodeIndex([node])
    index.release(node, pods[-1], pods[-1].devices)
    assert short(node) == 0 and node.idle == 0
    joined = shared_devices(node, pending)
    assert joined == (0,) and index.fits_exactly(node, pending, joined)
    assert not index.fits_exactly(node, pods[-1], pods[-1].devices)  # no GPU left to come back to
    index.assign(node, pods[-1], pods[-1].devices)
    assert short(node) == 1 and node.idle == 0 and not index.fits_exactly(node, pending, joined)


def test_a_pipelined_pod_waiting_for_a_releasing_gpu_is_not_counted_twice() -> None:
    """A pipelined pod takes a releasing GPU, not an idle one (KAI: addTaskResources, Pipelined): it goes on the device
    it waits for (above 1000, ``cycle.ready_pipelined`` holds it), and a fraction still joins a group with room."""
    node = Node("n", {}, [], False, True, 64_000, 10**12, 110, 2, 81_920)
    leaving, waiting = _pod("leaving", whole=1), _pod("waiting", whole=1)
    leaving.devices, leaving.status = (0,), PodStatus.RELEASING
    waiting.devices, waiting.status = (0,), PodStatus.PIPELINED
    for p in (leaving, _pod("a", group="A"), waiting):  # (a pipelined pod is read last: ``build``)
        occupy(node, p)
    assert node.dev_used == [2000, 500] and short(node) == 0
    assert shared_devices(node, _pod("pending")) == (1,)
