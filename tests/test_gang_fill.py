"""``gang._fill``, the binpack greedy plan of pods of one shape with whole GPUs worked out without tentative changes
to the node index, against ``gang._one_by_one``, the plain greedy (one ``best_node`` choice per pod, each accounted
before the next): the same pods on the same nodes and devices, or the same count placed where the gang does not fit,
and the index left as it was. Clusters with partly used devices, pods that other nodes' cpu, memory or pod slots
stop, nodes the pods' signature may not use, and a region."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.objects import Node, Pod
from kaid.placement import gang
from kaid.placement.index import NodeIndex


def _node(i: int, gpus: int, cpu: int, pods: int, label: str) -> Node:
    n = Node(f"n{i:02d}", {"pool": label}, [], False, True, cpu, 64 * 10**9, pods, gpus, 81920)
    n.index = i
    return n


def _pod(name: str, gpus: int, cpu: int, mem: int, share: int = 0, selector: dict[str, str] | None = None) -> Pod:
    pod = Pod("ns", name, name)
    pod.gpu_whole, pod.cpu, pod.mem = gpus, cpu, mem
    if share:
        pod.gpu_frac, pod.frac_devices = share, 1
    if selector:
        pod.node_selector = selector
    pod.sig = repr(sorted((selector or {}).items()))
    return pod


def _state(index: NodeIndex) -> object:
    return ([list(b) for b in index.buckets], dict(index.shared),
            [(n.used_cpu, n.used_mem, n.used_pods, n.idle, list(n.dev_used)) for n in index.nodes])


@st.composite
def cases(draw: st.DrawFn) -> tuple[NodeIndex, list[Pod], bytearray | None]:
    count = draw(st.integers(1, 14))
    nodes = [_node(i, draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([4000, 16000, 64000])),
                   draw(st.sampled_from([3, 110])), draw(st.sampled_from(["a", "b"]))) for i in range(count)]
    index = NodeIndex(nodes)
    for k in range(draw(st.integers(0, 25))):  # what runs already: whole GPUs, shares of one, cpu-only pods
        at = nodes[draw(st.integers(0, count - 1))]
        kind = draw(st.sampled_from(["whole", "share", "cpu"]))
        bg = _pod(f"bg{k}", draw(st.integers(1, 3)) if kind == "whole" else 0, draw(st.sampled_from([0, 1000, 6000])),
                  10**9, draw(st.sampled_from([250, 500])) if kind == "share" else 0)
        devs = index.devices_for(at, bg)
        if devs is not None:
            index.assign(at, bg, devs)
    shape = (draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([0, 1000, 4000])),
             draw(st.sampled_from([0, 10**9, 16 * 10**9])))
    selector = draw(st.sampled_from([None, {"pool": "a"}]))
    pods = [_pod(f"p{k:02d}", *shape, selector=selector) for k in range(draw(st.integers(2, 20)))]
    region = None
    if draw(st.booleans()):
        region = bytearray(draw(st.lists(st.sampled_from([0, 1]), min_size=count, max_size=count)))
    return index, pods, region


@settings(max_examples=400, deadline=None)
@given(cases())
def test_fill_is_the_one_by_one_greedy_plan(case: tuple[NodeIndex, list[Pod], bytearray | None]) -> None:
    index, pods, region = case
    before = _state(index)
    want, want_placed = gang._one_by_one(pods, index, False, region)
    assert _state(index) == before
    got, placed = gang._fill(pods, index, region)
    assert _state(index) == before  # no change to the index at all
    assert placed == want_placed
    assert (got is None) == (want is None)
    assert [(p.name, n.name, d) for p, n, d in got or []] == [(p.name, n.name, d) for p, n, d in want or []]


def test_greedy_fills_a_node_before_the_next() -> None:
    nodes = [_node(0, 8, 64000, 110, "a"), _node(1, 4, 64000, 110, "a"), _node(2, 8, 64000, 110, "a")]
    index = NodeIndex(nodes)
    index.assign(nodes[0], _pod("bg", 2, 0, 0), (0, 1))  # n00: 6 idle, n01: 4, n02: 8
    plan, placed = gang.greedy([_pod(f"p{k}", 2, 1000, 0) for k in range(6)], index, False, None)
    assert placed == 6 and plan is not None
    assert [(n.name, d) for _, n, d in plan] == [("n01", (0, 1)), ("n01", (2, 3)), ("n00", (2, 3)), ("n00", (4, 5)),
                                                ("n00", (6, 7)), ("n02", (0, 1))]
    plan, placed = gang.greedy([_pod(f"q{k}", 4, 1000, 0) for k in range(5)], index, False, None)
    assert plan is None and placed == 4  # n01, n00 (one each), n02 (two)
