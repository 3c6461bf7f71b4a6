"""``gang._fill`` while the index holds devices that pods of the snapshot freed this cycle (``NodeIndex.held``):
pending pods of one shape with whole GPUs go on idle devices first, then on held ones, as ``gang._one_by_one`` (one
``best_node`` choice per pod, each accounted before the next) places them: the same pods on the same nodes and
devices, or the same count placed where the gang does not fit, and the index left as it was. Also tier by tier
(``gang.tiered``)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.objects import Node, Pod
from kaid.placement import gang
from kaid.placement.index import NodeIndex
from tests.test_gang_fill import _node, _pod


def _state(index: NodeIndex) -> object:
    return ([list(b) for b in index.buckets], dict(index.shared), {i: set(h) for i, h in index.held.items()},
            [(n.used_cpu, n.used_mem, n.used_pods, n.idle, list(n.dev_used)) for n in index.nodes])


@st.composite
def cases(draw: st.DrawFn) -> tuple[NodeIndex, list[Pod], bytearray | None]:
    count = draw(st.integers(1, 12))
    nodes = [_node(i, draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([4000, 16000, 64000])),
                   draw(st.sampled_from([3, 110])), draw(st.sampled_from(["a", "b"]))) for i in range(count)]
    index = NodeIndex(nodes)
    running: list[tuple[Pod, Node, tuple[int, ...]]] = []
    for k in range(draw(st.integers(0, 25))):  # what runs already: whole GPUs, cpu-only pods
        at = nodes[draw(st.integers(0, count - 1))]
        bg = _pod(f"bg{k}", draw(st.integers(0, 3)), draw(st.sampled_from([0, 1000, 6000])), 10**9)
        bg.status, bg.node = "Running", at.name
        devs = index.devices_for(at, bg)
        if devs is not None:
            index.assign(at, bg, devs)
            bg.devices = devs
            running.append((bg, at, devs))
    for bg, at, devs in running:  # victims evicted in this cycle: their devices are held
        if draw(st.booleans()):
            index.release(at, bg, devs, planning=True)
    shape = (draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([0, 1000, 4000])),
             draw(st.sampled_from([0, 10**9, 16 * 10**9])))
    selector = draw(st.sampled_from([None, {"pool": "a"}]))
    pods = [_pod(f"p{k:02d}", *shape, selector=selector) for k in range(draw(st.integers(2, 16)))]
    region = None
    if draw(st.booleans()):
        region = bytearray(draw(st.lists(st.sampled_from([0, 1]), min_size=count, max_size=count)))
    return index, pods, region


def _plan(plan: list[tuple[Pod, Node, tuple[int, ...]]] | None) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(p.name, n.name, d) for p, n, d in plan or []]


@settings(max_examples=400, deadline=None)
@given(cases())
def test_fill_is_the_one_by_one_greedy_plan_with_devices_held(
        case: tuple[NodeIndex, list[Pod], bytearray | None]) -> None:
    index, pods, region = case
    before = _state(index)
    want, want_placed = gang._one_by_one(pods, index, False, region)
    assert _state(index) == before
    got, placed = gang.greedy(pods, index, False, region)
    assert _state(index) == before
    assert placed == want_placed
    assert (got is None) == (want is None)
    assert _plan(got) == _plan(want)


@settings(max_examples=200, deadline=None)
@given(cases(), st.lists(st.integers(0, 11), min_size=1, max_size=12))
def test_tiered_fill_is_the_tiered_one_by_one_with_devices_held(
        case: tuple[NodeIndex, list[Pod], bytearray | None], tier_of: list[int]) -> None:
    index, pods, _ = case
    n = len(index.nodes)
    tiers = [bytearray(1 if tier_of[i % len(tier_of)] % 3 == t else 0 for i in range(n)) for t in range(3)]
    before = _state(index)
    got, placed = gang.tiered(pods, index, False, tiers)
    assert _state(index) == before
    held_for = gang._held_for
    gang._held_for = lambda pods, index: False  # (the reference: tiered's one-by-one path)
    try:
        want, want_placed = gang.tiered(pods, index, False, tiers)
    finally:
        gang._held_for = held_for
    assert _state(index) == before
    assert placed == want_placed
    assert _plan(got) == _plan(want)
