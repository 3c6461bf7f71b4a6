"""``build.sort_inputs`` finds each kind's list once per call: the objects by kind as the plain reading sorts them
(kept here as the reference), on random lists of objects of every kind, nested ``List``s, unknown kinds and
things that are not objects."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kaid.api import meta
from kaid.model.build import _LISTS, Inputs, sort_inputs
from kaid.model.grouping import OWNER_KINDS

Obj = dict[str, Any]


def plain_sort_inputs(objects: Any, into: Inputs | None = None) -> Inputs:
    inp = into or Inputs()
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        kind = obj.get("kind")
        if kind == "List":
            plain_sort_inputs(obj.get("items") or [], inp)
        elif kind in _LISTS:
            getattr(inp, _LISTS[kind]).append(obj)
        elif kind == "Namespace":
            inp.namespaces[meta.name(obj)] = obj
        elif kind in OWNER_KINDS:
            inp.owners[(meta.namespace(obj), str(kind), meta.name(obj))] = obj
    return inp


_KINDS = [*_LISTS, "Namespace", *sorted(OWNER_KINDS), "ConfigMap", None, 3, ""]


def _objects(rng: random.Random, depth: int = 0) -> list[Any]:
    out: list[Any] = []
    for i in range(rng.randint(0, 12)):
        r = rng.random()
        if r < 0.05:
            out.append(rng.choice(["text", 7, None, ["x"]]))
        elif r < 0.12 and depth < 2:
            out.append({"kind": "List", "items": _objects(rng, depth + 1) if rng.random() < 0.9 else None})
        else:
            obj: Obj = {"metadata": {"name": f"o{depth}-{i}", "namespace": rng.choice(["a", "b"])}}
            if rng.random() < 0.95:
                obj["kind"] = rng.choice(_KINDS)
            out.append(obj)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_objects_sorted_by_kind_as_the_plain_reading(seed: int) -> None:
    rng = random.Random(seed)
    objects = _objects(rng)
    got, want = sort_inputs(objects), plain_sort_inputs(objects)
    for name in (*_LISTS.values(), "namespaces", "owners"):
        a, b = getattr(got, name), getattr(want, name)
        assert (list(a.items()) if isinstance(a, dict) else a) == (list(b.items()) if isinstance(b, dict) else b)
