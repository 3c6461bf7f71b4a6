"""The topology domains a region lets in (``gang._domains``), read from the region's nodes alone, against the plain
reading: each domain's mask of every node ANDed with the region, the empty ones left out, in the index's order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.model.objects import Node
from kaid.placement.gang import _domains
from kaid.placement.index import NodeIndex


def _plain(index: NodeIndex, key: str, allowed: bytearray) -> dict[str, bytearray]:
    out: dict[str, bytearray] = {}
    for value, mask in index.domains(key).items():
        both = bytearray(a & b for a, b in zip(mask, allowed, strict=True))
        if any(both):
            out[value] = both
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([None, "r0", "r1", "r2", "r3"]), st.booleans()), min_size=1, max_size=30))
def test_domains_in_a_region_match_the_plain_reading(nodes: list[tuple[str | None, bool]]) -> None:
    objs = []
    for i, (rack, _) in enumerate(nodes):
        n = Node(f"n{i}", {"rack": rack} if rack is not None else {}, [], False, True, 8000, 10**12, 110, 8, 81920)
        n.index = i
        objs.append(n)
    index = NodeIndex(objs)
    allowed = bytearray(1 if inside else 0 for _, inside in nodes)
    got, want = _domains(index, "rack", allowed), _plain(index, "rack", allowed)
    assert list(got.items()) == list(want.items())
    assert _domains(index, "rack", None) is index.domains("rack")
