"""The node index's accounting (``NodeIndex.assign`` / ``release``) against the plain reading, kept here: a whole-GPU
pod's devices are counted into the node's idle GPUs at once, and after a whole-GPU pod is put on its devices none of
them is looked at again for a partly used device (each is used 1000 or more). Twin indexes over the same nodes take
the same random assignments and releases, whole and shared GPUs, on free devices or not (an overcommitted device can
be left partly used by a whole-GPU pod's release): every node's accounting, the buckets, the partly used devices and
the list of nodes changed stay the same."""

from __future__ import annotations

from bisect import bisect_left, insort

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.objects import Node, Pod
from kaid.model.pods import new_gpu_group
from kaid.placement.index import Devices, NodeIndex


# ------------------------------------------------------------------------------------------ the plain reading
def plain_moved(self: NodeIndex, node: Node, old_idle: int, devices: Devices) -> None:
    i = node.index
    self.changed.append(i)
    if old_idle != node.idle:
        if old_idle > 0:
            was = self.buckets[old_idle]
            at = bisect_left(was, i)
            if at < len(was) and was[at] == i:
                del was[at]
        if node.idle > 0:
            insort(self.buckets[node.idle], i)
    used = node.dev_used
    if i in self.shared:
        if not any(0 < u < 1000 for u in used):
            del self.shared[i]
        self.partial.update(node)
    else:
        for d in devices:
            if 0 < used[d] < 1000:
                self.shared[i] = None
                self.partial.update(node)
                return


def plain_assign(self: NodeIndex, node: Node, pod: Pod, devices: Devices) -> None:
    old = node.idle
    node.used_cpu += pod.cpu
    node.used_mem += pod.mem
    node.used_pods += 1
    if pod.gpu_whole:
        for d in devices:
            if node.dev_used[d] == 0:
                node.idle -= 1
            node.dev_used[d] += 1000
    elif pod.frac_devices:
        share = pod.gpu_milli_on(node) // pod.frac_devices
        for k, d in enumerate(devices):
            if node.dev_used[d] == 0:
                node.idle -= 1
                if node.dev_group[d] is None:
                    node.dev_group[d] = new_gpu_group(node, pod, d, k)
            node.dev_used[d] += share
    plain_moved(self, node, old, devices if pod.gpu_whole or pod.frac_devices else ())


def plain_release(self: NodeIndex, node: Node, pod: Pod, devices: Devices, planning: bool = False) -> None:
    old = node.idle
    node.used_cpu -= pod.cpu
    node.used_mem -= pod.mem
    node.used_pods -= 1
    if pod.gpu_whole:
        for d in devices:
            node.dev_used[d] = max(0, node.dev_used[d] - 1000)
            if node.dev_used[d] == 0:
                node.idle += 1
    elif pod.frac_devices:
        share = pod.gpu_milli_on(node) // pod.frac_devices
        for d in devices:
            node.dev_used[d] -= share
            if node.dev_used[d] <= 0:
                node.dev_used[d] = 0
                node.dev_group[d] = None
                node.idle += 1
    if not planning:
        self.epoch += 1
    plain_moved(self, node, old, devices if pod.gpu_whole or pod.frac_devices else ())


# ------------------------------------------------------------------------------------------ twin indexes
def _node(i: int, gpus: int) -> Node:
    n = Node(f"n{i}", {}, [], False, True, 64_000, 10**12, 110, gpus, 81920)
    n.index = i
    return n


def _pod(name: str, whole: int, share: int, devices: int) -> Pod:
    pod = Pod("ns", name, name)
    pod.cpu, pod.mem = 1000, 1 << 30
    if whole:
        pod.gpu_whole = whole
    elif share:
        pod.gpu_frac, pod.frac_devices = share, devices
    return pod


def _state(index: NodeIndex) -> object:
    return ([(n.used_cpu, n.used_mem, n.used_pods, n.idle, list(n.dev_used), list(n.dev_group)) for n in index.nodes],
            [list(b) for b in index.buckets], list(index.shared), index.partial.levels, index.partial._at,
            list(index.changed), index.epoch)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_twin_indexes_account_alike(data: st.DataObject) -> None:
    sizes = data.draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4))
    fast = NodeIndex([_node(i, g) for i, g in enumerate(sizes)])
    plain = NodeIndex([_node(i, g) for i, g in enumerate(sizes)])
    held: list[tuple[int, Pod, Devices]] = []  # (node index, pod, devices) assigned and not released yet
    for step in range(data.draw(st.integers(1, 30))):
        release: bool = data.draw(st.booleans()) if held else False
        if release:
            i, pod, devs = held.pop(data.draw(st.integers(0, len(held) - 1)))
            planning = data.draw(st.booleans())
            fast.release(fast.nodes[i], pod, devs, planning)
            plain_release(plain, plain.nodes[i], pod, devs, planning)
        else:
            i = data.draw(st.integers(0, len(sizes) - 1))
            gpus = sizes[i]
            kind = data.draw(st.sampled_from(["whole", "share", "none"]))
            if kind == "whole":
                devs = tuple(data.draw(st.lists(st.integers(0, gpus - 1), min_size=1, max_size=gpus, unique=True)))
                pod = _pod(f"p{step}", len(devs), 0, 0)
            elif kind == "share":
                devs = tuple(data.draw(st.lists(st.integers(0, gpus - 1), min_size=1, max_size=2, unique=True)))
                pod = _pod(f"p{step}", 0, data.draw(st.sampled_from([250, 500, 700])), len(devs))
            else:
                devs, pod = (), _pod(f"p{step}", 0, 0, 0)
            fast.assign(fast.nodes[i], pod, devs)
            plain_assign(plain, plain.nodes[i], pod, devs)
            held.append((i, pod, devs))
        assert _state(fast) == _state(plain)
