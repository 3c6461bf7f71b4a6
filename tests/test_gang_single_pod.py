"""A batch of one pod without a topology domain to choose is placed by the node index's greedy choice alone
(``gang.place``'s short cut), as the general path places it: regions, bounds, greedy, nothing to improve."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.objects import Node, Pod
from kaid.placement import gang
from kaid.placement.index import NodeIndex


def _general(pod: Pod, index: NodeIndex, spread: bool, topo: gang.Topo | None,
             within: bytearray | None) -> gang.GangPlan:
    result = gang.GangPlan()
    plan = gang._place_in([pod], index, spread, topo, "cpsat", 1.0, 1, within, result)
    if plan is not None:
        result.placements = plan
    return result


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([2, 4, 8]), st.integers(0, 8), st.booleans()), min_size=1, max_size=10),
       st.lists(st.tuples(st.sampled_from([0, 1, 2, 8]), st.sampled_from([0, 250, 500]),
                          st.sampled_from([0, 4000, 32000])), min_size=1, max_size=8),
       st.booleans(), st.booleans(), st.booleans())
def test_one_pod_is_placed_as_the_general_path_places_it(
        nodes: list[tuple[int, int, bool]], pods: list[tuple[int, int, int]], spread: bool, topology: bool,
        fixed: bool) -> None:
    objs = []
    for i, (gpus, _, _) in enumerate(nodes):
        n = Node(f"n{i}", {}, [], False, True, 64000, 10**12, 110, gpus, 81920)
        n.index = i
        objs.append(n)
    index = NodeIndex(objs)
    for node, (_, busy, _) in zip(objs, nodes, strict=True):
        for d in range(min(busy, node.gpus)):
            bg = Pod("ns", f"bg-{node.name}-{d}", "")
            bg.gpu_whole = 1
            index.assign(node, bg, (d,))
    within = bytearray(1 if inside else 0 for _, _, inside in nodes) if fixed else None
    topo = gang.Topo() if topology else None
    for k, (whole, share, cpu) in enumerate(pods):
        pod = Pod("ns", f"p{k}", "")
        pod.cpu = cpu
        if whole:
            pod.gpu_whole = whole
        elif share:
            pod.gpu_frac, pod.frac_devices = share, 1
        got = gang.place([pod], index, spread, topo, "cpsat", 1.0, 1, within)
        assert got == _general(pod, index, spread, topo, within)
        for p, node, devs in got.placements:
            index.assign(node, p, devs)
