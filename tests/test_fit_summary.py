"""Why a waiting pod fits nowhere (``fit_summary``, ``fragmentation``), as the node index keeps it per pod shape and
brings it up to date from its log of changed nodes, against the plain reading: one pass over every node, the first
failure of each (static, then resources), counted in the order each failure first occurs. The nodes are filled and
emptied through the index between the questions, so what the index kept is also checked after it was brought up to
date."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.objects import Node, Pod, Reason
from kaid.model.vocabulary import NodeFailure, ReasonCode
from kaid.placement.explain import describe_request, fit_summary, fragmentation
from kaid.placement.index import NodeIndex
from kaid.placement.predicates import resource_failure, static_failure


def _plain_fit_summary(pod: Pod, index: NodeIndex) -> Reason:
    counts: Counter[NodeFailure] = Counter()
    for n in index.nodes:
        why = static_failure(n, pod) or resource_failure(n, pod)
        if why is not None:
            counts[why] += 1
    total = len(index.nodes)
    fit = total - sum(counts.values())
    parts = ", ".join(f"{k} {code.words}" for code, k in counts.most_common())
    msg = f"{fit}/{total} nodes can take a pod of {describe_request(pod)}" + (f": {parts}" if parts else "")
    return Reason(ReasonCode.NODE_FIT, msg, {"nodes": total, "fit": fit,
                                             "failures": {str(code): k for code, k in counts.items()}})


def _plain_fragmentation(pods: list[Pod], index: NodeIndex) -> Reason | None:
    pod = max(pods, key=lambda p: p.gpu_whole)
    nodes = [n for n in index.nodes if static_failure(n, pod) is None]
    if pod.gpu_whole:
        need = sum(p.gpu_whole for p in pods)
        free = sum(max(0, n.idle) for n in nodes)
        largest = max((n.idle for n in nodes), default=0)
        blocks = sum(max(0, n.idle) // pod.gpu_whole for n in nodes)
        if free >= need and largest < pod.gpu_whole:
            return Reason(ReasonCode.FRAGMENTATION, "", {"freeGPUs": free, "largestBlock": largest,
                                                         "neededPerPod": pod.gpu_whole})
        if free >= need and len(pods) > 1 and blocks < len(pods):
            return Reason(ReasonCode.FRAGMENTATION, "", {"freeGPUs": free, "largestBlock": largest,
                                                         "neededPerPod": pod.gpu_whole, "podsThatFit": blocks})
    elif pod.frac_devices and pod.gpu_frac:
        free_milli = sum(1000 - u for n in nodes for u in n.dev_used)
        best = max((1000 - u for n in nodes for u in n.dev_used), default=0)
        if free_milli >= pod.gpu_frac and best < pod.gpu_frac:
            return Reason(ReasonCode.FRAGMENTATION, "", {"freeGPUs": free_milli / 1000, "largestBlock": best / 1000})
    return None


def _pod(name: str, shape: tuple[int, int, int, int, bool]) -> Pod:
    whole, share, mem_mib, cpu, selective = shape
    pod = Pod("ns", name, name)
    pod.cpu, pod.mem = cpu, 10**9
    if whole:
        pod.gpu_whole = whole
    elif share or mem_mib:
        pod.gpu_frac, pod.gpu_mem_mib, pod.frac_devices = share, mem_mib, 1
    if selective:
        pod.node_selector = {"pool": "a"}
        pod.sig = "pool=a"
    return pod


_SHAPES = st.tuples(st.sampled_from([0, 1, 2, 4, 8]), st.sampled_from([0, 250, 500]),
                    st.sampled_from([0, 0, 40000]), st.sampled_from([0, 1000, 16000]), st.booleans())


@st.composite
def clusters(draw: st.DrawFn) -> list[Node]:
    nodes = []
    for i in range(draw(st.integers(1, 12))):
        n = Node(f"n{i}", {"pool": draw(st.sampled_from(["a", "b"]))}, [], draw(st.booleans()) and i % 4 == 3,
                 not (i % 5 == 4 and draw(st.booleans())), draw(st.sampled_from([8000, 64000])), 64 * 10**9,
                 draw(st.sampled_from([3, 110])), draw(st.sampled_from([0, 2, 4, 8])),
                 draw(st.sampled_from([0, 81920])))
        n.index = i
        nodes.append(n)
    return nodes


@settings(max_examples=300, deadline=None)
@given(clusters(), st.lists(st.tuples(st.integers(0, 11), _SHAPES, st.booleans()), max_size=40),
       st.lists(st.tuples(_SHAPES, st.integers(1, 4)), min_size=1, max_size=8), st.integers(0, 7),
       st.lists(st.integers(0, 3), max_size=12))
def test_fit_summary_and_fragmentation_match_the_plain_reading(
        nodes: list[Node], moves: list[tuple[int, tuple[int, int, int, int, bool], bool]],
        asked: list[tuple[tuple[int, int, int, int, bool], int]], every: int, lefts: list[int]) -> None:
    index = NodeIndex(nodes)
    for node, left in zip(nodes, lefts, strict=False):  # most GPUs in use: free GPUs are few, in small blocks
        while node.idle > left:
            pod = _pod(f"bg-{node.name}-{node.idle}", (1, 0, 0, 0, False))
            devs = index.devices_for(node, pod)
            if devs is None:
                break
            index.assign(node, pod, devs)
    placed: list[tuple[Node, Pod, tuple[int, ...]]] = []
    questions = iter(asked)
    for k, (at, shape, back) in enumerate(moves):
        if back and placed:  # now and then one goes again
            node, pod, devs = placed.pop(at % len(placed))
            index.release(node, pod, devs, planning=k % 2 == 0)
        else:
            node, pod = nodes[at % len(nodes)], _pod(f"p{k}", shape)
            devs = index.devices_for(node, pod)
            if devs is not None and static_failure(node, pod) is None:
                index.assign(node, pod, devs)
                placed.append((node, pod, devs))
        if k % (every + 1) == every or k == len(moves) - 1:
            question = next(questions, None)
            if question is None:
                continue
            shape, count = question
            pods = [_pod(f"q{k}-{j}", shape) for j in range(count)]
            assert fit_summary(pods[0], index) == _plain_fit_summary(pods[0], index)
            frag, plain = fragmentation(pods, index), _plain_fragmentation(pods, index)
            assert (frag and frag.details) == (plain and plain.details)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([2, 4, 8]), st.integers(0, 3), st.booleans()), min_size=1, max_size=6),
       st.sampled_from([1, 2, 4]), st.integers(1, 6))
def test_fragmentation_of_a_nearly_full_cluster_matches_the_plain_reading(
        shapes: list[tuple[int, int, bool]], per_pod: int, count: int) -> None:
    nodes = []
    for i, (gpus, _, ready) in enumerate(shapes):
        n = Node(f"n{i}", {}, [], False, ready, 64000, 64 * 10**9, 110, gpus, 81920)
        n.index = i
        nodes.append(n)
    index = NodeIndex(nodes)
    for node, (_, left, _) in zip(nodes, shapes, strict=True):  # a few GPUs left idle on each node
        while node.idle > left:
            pod = _pod(f"bg-{node.name}-{node.idle}", (1, 0, 0, 0, False))
            index.assign(node, pod, index.devices_for(node, pod) or ())
    pods = [_pod(f"q{j}", (per_pod, 0, 0, 0, False)) for j in range(count)]
    frag, plain = fragmentation(pods, index), _plain_fragmentation(pods, index)
    assert (frag and frag.details) == (plain and plain.details)
