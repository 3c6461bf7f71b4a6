"""The incremental decoder of list responses: whatever the chunking, the same items and fields as json.loads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.kube.cache import RESOURCES, Resource
from kaid.kube.client import ListDecoder

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
ITEM = st.dictionaries(st.text(), JSON, max_size=5)
HEAD = st.dictionaries(st.text().filter(lambda k: k != "items"), JSON, max_size=4)


def decode(raw: bytes, cuts: list[int]) -> tuple[Any, list[Any]]:
    items: list[Any] = []
    dec = ListDecoder(items.append)
    prev = 0
    for cut in [*sorted(cuts), len(raw)]:
        dec.feed(raw[prev:cut])
        prev = cut
    return dec.close(), items


@settings(max_examples=300, deadline=None)
@given(head=HEAD, items=st.lists(ITEM, max_size=12), indent=st.sampled_from([None, 1]), data=st.data())
def test_any_chunking_gives_what_json_loads_gives(head: dict[str, Any], items: list[Any], indent: int | None,
                                                  data: st.DataObject) -> None:
    doc = {**head, "items": items}
    raw = json.dumps(doc, indent=indent).encode()  # non-ASCII text too: chunks may split a character
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(raw)), max_size=30))
    got_head, got_items = decode(raw, cuts)
    assert got_items == items
    assert got_head == head


def test_a_kubernetes_list_item_by_item() -> None:
    pods = [{"metadata": {"name": f"p{i}", "namespace": "ns"}, "spec": {"nodeName": ""}} for i in range(50)]
    raw = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "42"},
                      "items": pods}).encode()
    seen_at: list[int] = []
    items: list[Any] = []
    fed = 0

    def on_item(obj: Any) -> None:
        items.append(obj)
        seen_at.append(fed)

    dec = ListDecoder(on_item)
    for i in range(0, len(raw), 100):
        fed = i + 100
        dec.feed(raw[i:i + 100])
    head = dec.close()
    assert head == {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "42"}}
    assert items == pods
    assert seen_at[0] < len(raw) // 2, "the first items must come out before the whole response is in"


@pytest.mark.parametrize("raw", [b'{"items": [{"a": 1}', b'{"kind": "PodList", "items": [', b'{"kind"', b"[1, 2]",
                                 b'{"kind" 1}', b""])
def test_a_broken_or_cut_response_is_an_error(raw: bytes) -> None:
    dec = ListDecoder(lambda o: None)
    with pytest.raises(ValueError):
        dec.feed(raw)
        dec.close()


def test_group_versions_of_the_watched_resources() -> None:
    versions = {r.kind: r.group_version for r in RESOURCES}
    assert versions["Pod"] == "v1"
    assert versions["PodGroup"] == "scheduling.run.ai/v2alpha2"
    assert versions["PyTorchJob"] == "kubeflow.org/v1"
    assert Resource("X", "/apis/example.com/v1beta1/xs").group_version == "example.com/v1beta1"
