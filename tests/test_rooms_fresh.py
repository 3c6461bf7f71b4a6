"""A fresh ``Rooms`` and ``Misfits`` (each node read in one inlined pass) against the plain reading of every node
through ``room_for`` and ``resource_failure``, on random node states (pods, cpu, memory, whole and partly used GPUs,
GPU memory published or not) and random pod shapes (whole GPUs, a GPU fraction or GPU memory on one or more devices,
none), with random masks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.objects import Node, Pod
from kaid.placement.predicates import resource_failure, room_for
from kaid.placement.rooms import Misfits, Rooms

_NODE = st.tuples(st.integers(0, 8), st.sampled_from([0, 40960, 81920]), st.sampled_from([0, 2, 6, 110]),
                  st.integers(0, 6), st.integers(0, 5), st.integers(0, 5),
                  st.lists(st.sampled_from([0, 0, 250, 500, 1000]), max_size=8))
_POD = st.tuples(st.sampled_from([0, 0, 1, 2, 4]), st.sampled_from([0, 0, 250, 600]), st.sampled_from([0, 0, 20000]),
                 st.sampled_from([0, 1, 2]), st.sampled_from([0, 1000, 4000, 9000]),
                 st.sampled_from([0, 10**9, 3 * 10**9]))


def _node(i: int, spec: tuple[int, int, int, int, int, int, list[int]]) -> Node:
    gpus, gpu_mem, pods, used_pods, cpu_k, mem_g, used = spec
    node = Node(f"n{i}", {}, [], False, True, 8000, 16 * 10**9, pods, gpus, gpu_mem)
    node.index = i
    node.used_pods = used_pods
    node.used_cpu = cpu_k * 1000 + 500 * (i % 2)
    node.used_mem = mem_g * 2 * 10**9
    node.dev_used = (used + [0] * gpus)[:gpus]
    node.idle = node.dev_used.count(0)
    return node


def _pod(spec: tuple[int, int, int, int, int, int]) -> Pod:
    whole, frac, mem_mib, devices, cpu, mem = spec
    pod = Pod("ns", "p", "p")
    pod.cpu, pod.mem = cpu, mem
    if frac or mem_mib:
        pod.gpu_frac, pod.gpu_mem_mib, pod.frac_devices = frac, 0 if frac else mem_mib, max(devices, 1)
    else:
        pod.gpu_whole = whole
    return pod


@settings(max_examples=400, deadline=None)
@given(st.lists(_NODE, max_size=12), _POD, st.data())
def test_fresh_rooms_and_misfits_read_every_node_as_the_plain_functions(
        specs: list[tuple[int, int, int, int, int, int, list[int]]], shape: tuple[int, int, int, int, int, int],
        data: st.DataObject) -> None:
    nodes = [_node(i, spec) for i, spec in enumerate(specs)]
    mask = bytearray(data.draw(st.lists(st.integers(0, 1), min_size=len(nodes), max_size=len(nodes))))
    pod = _pod(shape)
    rooms = Rooms(pod, nodes, mask, 0)
    plain = [room_for(n, pod) if mask[i] else 0 for i, n in enumerate(nodes)]
    assert rooms.room == plain
    by_room: dict[int, int] = {}
    for r in plain:
        if r:
            by_room[r] = by_room.get(r, 0) + 1
    assert rooms.nodes_by_room == by_room
    assert rooms.total == sum(plain)
    misfits = Misfits(pod, nodes, mask, 0)
    why = [resource_failure(n, pod) if mask[i] else None for i, n in enumerate(nodes)]
    assert misfits.why == why
    counts: dict[object, int] = {}
    for failure in why:
        if failure is not None:
            counts[failure] = counts.get(failure, 0) + 1
    assert misfits.counts == counts
    assert list(misfits.counts) == list(counts)  # first failure first, as the plain pass counts them
