"""The node index's greedy choice for a shared-GPU pod (``NodeIndex.best_node``, which walks the index of partly
used devices) against the plain reading: every node with a partly used device that takes the pod, the best by
(fullest device, fewest idle GPUs, index) when binpacking, (emptiest device, most idle GPUs, index) when
spreading, else the first node with an idle device. Nodes are filled and emptied through the index between
choices, so the index is also checked after it was kept up to date."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.objects import Node, Pod
from kaid.placement.index import Devices, NodeIndex


def _plain(index: NodeIndex, pod: Pod, spread: bool) -> tuple[Node, Devices] | None:
    best: tuple[tuple[int, int, int], Node, Devices] | None = None
    for i in list(index.shared):
        n = index.nodes[i]
        devs = index.devices_for(n, pod, spread)
        if devs is not None and all(n.dev_used[d] > 0 for d in devs):
            fill = sum(n.dev_used[d] for d in devs)
            key = (fill if spread else -fill, n.idle if not spread else -n.idle, i)
            if best is None or key < best[0]:
                best = (key, n, devs)
    if best is not None:
        return best[1], best[2]
    for k in (range(index.max_gpus, 0, -1) if spread else range(1, index.max_gpus + 1)):
        for i in index.buckets[k]:
            devs = index.devices_for(index.nodes[i], pod, spread)
            if devs is not None:
                return index.nodes[i], devs
    return None


def _pod(name: str, share: int, cpu: int) -> Pod:
    pod = Pod("ns", name, name)
    pod.gpu_frac, pod.frac_devices, pod.cpu, pod.mem = share, 1, cpu, 1
    return pod


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[tuple[int, int, int]], bool]:
    nodes = []
    for i in range(draw(st.integers(1, 12))):
        n = Node(f"n{i}", {}, [], False, True, draw(st.sampled_from([4000, 64000])), 10**12, 110, 4, 81920)
        n.index = i
        nodes.append(n)
    # (node, share, cpu) of the shared-GPU pods placed before the choices, in that order
    placed = draw(st.lists(st.tuples(st.integers(0, len(nodes) - 1), st.sampled_from([100, 250, 500, 750]),
                                     st.sampled_from([0, 1000, 3000])), max_size=30))
    return nodes, placed, draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(clusters(), st.lists(st.tuples(st.sampled_from([100, 250, 300, 500, 750, 900]),
                                      st.sampled_from([0, 1000, 3000])), min_size=1, max_size=12))
def test_shared_gpu_choice_matches_the_plain_reading(cluster: tuple[list[Node], list[tuple[int, int, int]], bool],
                                                     pods: list[tuple[int, int]]) -> None:
    nodes, placed, spread = cluster
    before = NodeIndex(nodes)  # what runs already: the index of the cycle is built over it
    for k, (at, share, cpu) in enumerate(placed):
        pod = _pod(f"bg{k}", share, cpu)
        devs = before.devices_for(nodes[at], pod, spread)
        if devs is not None:
            before.assign(nodes[at], pod, devs)
    index = NodeIndex(nodes)
    for k, (share, cpu) in enumerate(pods):
        pod = _pod(f"p{k}", share, cpu)
        got, want = index.best_node(pod, spread), _plain(index, pod, spread)
        assert (got and (got[0].name, got[1])) == (want and (want[0].name, want[1]))
        if got is not None:
            index.assign(got[0], pod, got[1])
            if k % 3 == 2:  # and now and then one goes again
                index.release(got[0], pod, got[1])
