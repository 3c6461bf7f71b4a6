"""The node index's choices read the nodes' state, not their history: after tentative placements that were rolled
back (a gang plan tried, a victim scenario, ``kaictl explain``'s focus), the greedy choices for the pods that come next
are the ones a fresh index over the same nodes makes. Equally scored nodes come lowest index first, whatever order
they were filled and emptied in (``NodeIndex.buckets``)."""

from __future__ import annotations

import copy
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.objects import Node, Pod
from kaid.placement.index import NodeIndex


def _pod(name: str, whole: int, share: int, cpu: int) -> Pod:
    pod = Pod("ns", name, name)
    pod.cpu, pod.mem = cpu, 1
    if whole:
        pod.gpu_whole = whole
    elif share:
        pod.gpu_frac, pod.frac_devices = share, 1
    return pod


_SHAPES = st.tuples(st.sampled_from([0, 1, 1, 2, 4, 8]), st.sampled_from([0, 250, 500]),
                    st.sampled_from([0, 1000, 3000]))


@st.composite
def clusters(draw: st.DrawFn) -> list[Node]:
    nodes = []
    for i in range(draw(st.integers(2, 10))):
        n = Node(f"n{i}", {}, [], False, True, draw(st.sampled_from([8000, 64000])), 10**12, 110,
                 draw(st.sampled_from([4, 8])), 81920)
        n.index = i
        nodes.append(n)
    index = NodeIndex(nodes)  # what runs already
    for k, (at, (whole, share, cpu)) in enumerate(draw(st.lists(st.tuples(st.integers(0, len(nodes) - 1), _SHAPES),
                                                                max_size=20))):
        pod = _pod(f"bg{k}", whole, share, cpu)
        devs = index.devices_for(nodes[at], pod)
        if devs is not None:
            index.assign(nodes[at], pod, devs)
    return nodes


def _choices(index: NodeIndex, pods: list[Pod], spread: bool) -> list[tuple[str, tuple[int, ...]] | None]:
    out: list[tuple[str, tuple[int, ...]] | None] = []
    for pod in pods:
        got = index.best_node(pod, spread)
        out.append(got and (got[0].name, got[1]))
        if got is not None:
            index.assign(got[0], pod, got[1])
    return out


@settings(max_examples=300, deadline=None)
@given(clusters(), st.lists(st.tuples(st.integers(0, 9), _SHAPES), min_size=1, max_size=12),
       st.lists(_SHAPES, min_size=1, max_size=10), st.booleans(), st.randoms(use_true_random=False))
def test_choices_after_a_rolled_back_plan_are_a_fresh_index_choices(
        nodes: list[Node], tried: list[tuple[int, tuple[int, int, int]]], shapes: list[tuple[int, int, int]],
        spread: bool, rng: random.Random) -> None:
    fresh_nodes = copy.deepcopy(nodes)
    index = NodeIndex(nodes)
    plan = []  # a tentative plan: pods assigned, then all of them released, in some order
    for k, (at, (whole, share, cpu)) in enumerate(tried):
        node = nodes[at % len(nodes)]
        pod = _pod(f"t{k}", whole, share, cpu)
        devs = index.devices_for(node, pod)
        if devs is not None:
            index.assign(node, pod, devs)
            plan.append((node, pod, devs))
    rng.shuffle(plan)
    for node, pod, devs in plan:
        index.release(node, pod, devs, planning=True)
    fresh = NodeIndex(fresh_nodes)
    assert index.buckets == fresh.buckets
    pods = [_pod(f"p{k}", whole, share, cpu) for k, (whole, share, cpu) in enumerate(shapes)]
    assert _choices(index, pods, spread) == _choices(fresh, copy.deepcopy(pods), spread)


def test_a_pod_without_gpus_that_names_devices_leaves_the_devices_alone() -> None:
    """A pod without GPUs may still name devices (read from its object); the index looks at none of them, even on
    a node that has no GPUs at all."""
    node = Node("n0", {}, [], False, True, 8000, 10**12, 110, 0, 0)
    index = NodeIndex([node])
    pod = _pod("p", 0, 0, 1000)
    pod.devices = (2,)
    index.assign(node, pod, pod.devices)
    index.release(node, pod, pod.devices)
    assert (node.used_cpu, node.used_pods, index.buckets) == (0, 0, [[]])
