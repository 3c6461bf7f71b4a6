"""The knapsack for alike pods, with or without a preferred topology level (``placement.fewest``), against the
CP-SAT model it stands in for (``cpsat.solve_gang``): on random racks of partly used nodes, the same cost
(preferred domains used, then nodes used, then GPUs left idle on them) or both find no plan, and the plan fits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.api.config import SchedulerConfig
from kaid.model.build import build_snapshot
from kaid.model.objects import Node, Pod
from kaid.placement.cpsat import solve_gang
from kaid.placement.fewest import fewest_domains
from kaid.placement.gang import realise
from kaid.placement.index import NodeIndex
from kaid.sim.cluster import EPOCH
from tests.objects import node, pod, podgroup, queue


def _cost(plan: list[tuple[Pod, Node]], level: str | None) -> tuple[int, int, int]:
    nodes = {n.name: n for _, n in plan}
    domains = len({n.labels.get(level) for n in nodes.values()}) if level else 0
    return (domains, len(nodes), sum(n.idle for n in nodes.values()))


@given(racks=st.lists(st.lists(st.integers(0, 8), min_size=1, max_size=4), min_size=1, max_size=5),
       unlabeled=st.lists(st.integers(0, 8), max_size=2), need=st.integers(2, 24), gpus=st.sampled_from([1, 2, 3]),
       level=st.sampled_from(["rack", None]))
@settings(max_examples=60, deadline=None)
def test_same_cost_as_the_solver(racks: list[list[int]], unlabeled: list[int], need: int, gpus: int,
                                 level: str | None) -> None:
    objs = [queue("q")]
    used = [(f"r{r}-n{i}", {"rack": f"r{r}"}, u) for r, rack in enumerate(racks) for i, u in enumerate(rack)]
    used += [(f"x-n{i}", {}, u) for i, u in enumerate(unlabeled)]
    for name, labels, u in used:
        objs.append(node(name, labels=labels))
        if u:
            objs.append(pod(f"run-{name}", gpus=u, queue="q", node_name=name, phase="Running"))
    objs.append(podgroup("g", "q", need))
    objs += [pod(f"g-{i}", gpus=gpus, group="g", queue="q") for i in range(need)]
    snap = build_snapshot(objs, SchedulerConfig(), EPOCH)
    index = NodeIndex(snap.nodes)
    pods = [p for p in snap.jobs["default/g"].pods]
    ours = fewest_domains(pods, index, None, level)
    theirs, _ = solve_gang(pods, index, None, None, level, None, 10.0)
    assert (ours is None) == (theirs is None)
    if ours is not None and theirs is not None:
        assert sorted(p.name for p, _ in ours) == sorted(p.name for p in pods)
        assert realise(ours, index) is not None
        assert _cost(ours, level) == _cost(theirs, level)
