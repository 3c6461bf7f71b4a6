"""The incremental decoder of list responses: whatever the chunking, the same items and fields as json.loads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.kube.cache import API_RESOURCES, ApiResource
from kaid.kube.client import ListDecoder, loads, without_managed_fields

INT64 = st.integers(-(2**63), 2**63 - 1)  # what the API server writes (Go decodes JSON integers into int64)
JSON = st.recursive(
    st.none() | st.booleans() | INT64 | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
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
    """Items come out while the response is still arriving, gathered into batches of about GATHER bytes (the API
    server's HTTP chunks hold about one item each)."""
    pods = [{"metadata": {"name": f"p{i}", "namespace": "ns"}, "spec": {"nodeName": ""}} for i in range(5000)]
    raw = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "42"},
                      "items": pods}).encode()
    assert len(raw) > 4 * ListDecoder.GATHER
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
    assert seen_at[0] <= ListDecoder.GATHER + 100, "the first items come out once a batch is gathered"
    assert len(set(seen_at)) >= 4, "and the rest batch by batch, not all at the end"


@pytest.mark.parametrize("raw", [b'{"items": [{"a": 1}', b'{"kind": "PodList", "items": [', b'{"kind"', b"[1, 2]",
                                 b'{"kind" 1}', b""])
def test_a_broken_or_cut_response_is_an_error(raw: bytes) -> None:
    dec = ListDecoder(lambda o: None)
    with pytest.raises(ValueError):
        dec.feed(raw)
        dec.close()


# managedFields as the API server writes them: entries of plain fields and nested objects (no arrays), with
# any text in their strings (brackets, quotes and "spec" included: the cut must not be fooled by them)
MANAGED_TEXT = st.text(alphabet=st.sampled_from(list('ab]}[{",:\\ spec')), max_size=12)
FIELDS_V1: st.SearchStrategy[dict[str, Any]] = st.recursive(
    st.just({}), lambda inner: st.dictionaries(MANAGED_TEXT, inner, max_size=3), max_leaves=6)
MANAGED = st.lists(st.fixed_dictionaries({"manager": MANAGED_TEXT, "operation": st.sampled_from(["Update", "Apply"]),
                                          "fieldsV1": FIELDS_V1}), min_size=1, max_size=3)


def _compact(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()  # as the API server writes JSON


@settings(max_examples=300, deadline=None)
@given(managed=st.lists(MANAGED, min_size=1, max_size=6), last=st.booleans(), spec=ITEM, data=st.data())
def test_managed_fields_are_dropped_whatever_the_chunking(managed: list[list[Any]], last: bool, spec: dict[str, Any],
                                                          data: st.DataObject) -> None:
    """Written last in metadata with spec next (built-in kinds) they are cut before decoding; anywhere else
    (custom resources: keys sorted) they are removed after; every other byte stays."""
    def item(i: int, mf: list[Any]) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": f"p{i}", "labels": {"app": "x]},\"spec\":"}}
        if last:
            meta["managedFields"] = mf
        else:
            meta = {"managedFields": mf, **meta}
        return {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}}

    items = [item(i, mf) for i, mf in enumerate(managed)]
    raw = _compact({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": items})
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(raw)), max_size=30))
    head, got = decode(raw, cuts)
    for it in items:
        del it["metadata"]["managedFields"]
    assert got == items
    assert head == {"kind": "PodList", "metadata": {"resourceVersion": "7"}}


@settings(max_examples=200, deadline=None)
@given(templates=st.lists(st.lists(ITEM, max_size=3), min_size=1, max_size=8), data=st.data())
def test_items_in_batches_despite_look_alikes(templates: list[list[Any]], data: st.DataObject) -> None:
    """Items are decoded in batches cut where an item seems to start: a StatefulSet's claim templates
    (objects that start with metadata, inside a list) look like one, and must not cut a batch there."""
    items = [{"metadata": {"name": f"s{i}"},
              "spec": {"volumeClaimTemplates": [{"metadata": {"name": f"t{j}"}, "spec": t} for j, t in
                                                enumerate(ts)]}} for i, ts in enumerate(templates)]
    raw = _compact({"kind": "StatefulSetList", "items": items})
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(raw)), max_size=20))
    head, got = decode(raw, cuts)
    assert got == items
    assert head == {"kind": "StatefulSetList"}


def test_a_list_in_one_chunk_is_decoded_in_one_batch() -> None:
    items = [{"metadata": {"name": f"p{i}"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
             for i in range(100)]
    raw = _compact({"kind": "PodList", "metadata": {}, "items": items})
    dec = ListDecoder(lambda o: None)
    calls = 0
    value = dec._value

    def counted(final: bool) -> tuple[bool, Any]:
        nonlocal calls
        calls += 1
        return value(final)

    dec._value = counted  # type: ignore[method-assign]
    dec.feed(raw)
    dec.close()
    assert calls <= 6, "items were decoded one by one"  # 2 head fields, the "items" key, the last item


def test_managed_fields_of_a_pod_are_cut_before_decoding() -> None:
    pod = {"metadata": {"name": "p", "labels": {"a": "b"},
                        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
           "spec": {"containers": [{"name": "main"}]}, "status": {}}
    text = _compact(pod).decode()
    cut = without_managed_fields(text)
    assert "managedFields" not in cut
    assert json.loads(cut) == {**pod, "metadata": {"name": "p", "labels": {"a": "b"}}}
    # not all in yet, an array inside, or another key after them: left for after decoding
    for partial in (text[: text.index('"spec"')], text.replace('"f:containers":{}', '"v:x":[1]')):
        assert without_managed_fields(partial) == partial


def test_group_versions_of_the_watched_resources() -> None:
    versions = {r.kind: r.group_version for r in API_RESOURCES}
    assert versions["Pod"] == "v1"
    assert versions["PodGroup"] == "scheduling.run.ai/v2alpha2"
    assert versions["PyTorchJob"] == "kubeflow.org/v1"
    assert ApiResource("X", "/apis/example.com/v1beta1/xs").group_version == "example.com/v1beta1"


@pytest.mark.parametrize("text", ['{"n": 9223372036854775807, "m": -9223372036854775808, "u": 18446744073709551615}',
                                  '{"s": "\\ud800"}', '[1.5e300, -0]'])
def test_loads_takes_what_json_takes(text: str) -> None:
    """orjson refuses lone surrogates; the client's ``loads`` still reads them. (Integers beyond 64 bits, which
    the API server never writes, would come back as floats.)"""
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


def test_loads_still_refuses_what_is_not_json() -> None:
    with pytest.raises(ValueError):
        loads('{"a": ')
