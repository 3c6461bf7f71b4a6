"""The daemon's pod memo: pods read once, copied into the snapshots of later cycles."""

from __future__ import annotations

from typing import Any

from kaid.api.meta import store_key
from kaid.model import pods
from kaid.model.objects import Pod, Reason

Obj = dict[str, Any]


class PodMemo:
    """Pods read once and copied in later snapshots, for as long as their object is the very same dict (a
    watch cache replaces an object's dict when it changes). ``read`` is a ``pod_reader`` for
    ``build_snapshot``; ``next_cycle`` forgets the pods the last snapshot did not read (gone or changed).

    A pod is kept from the second snapshot that finds its object unchanged: the first snapshot after a
    list (the one a starting scheduler waits for) only reads, as it would without the memo."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[Obj, Pod | None, list[Reason]]] = {}
        self.seen: dict[str, tuple[Obj, Pod | None, list[Reason]]] = {}

    def read(self, obj: Obj, problems: list[Reason]) -> Pod:
        key = store_key(obj)
        hit = self.last.get(key)
        if hit is None or hit[0] is not obj:  # new or changed: read, remember that it was seen
            self.seen[key] = (obj, None, [])
            return pods.read_pod(obj, problems)
        kept, found = hit[1], hit[2]
        if kept is None:  # unchanged since the last snapshot: worth keeping
            found = []
            kept = pods.read_pod(obj, found)
        self.seen[key] = (obj, kept, found)
        problems.extend(found)
        return kept.copy()  # the snapshot changes its pods; the one kept here stays as read

    def next_cycle(self) -> None:
        self.last, self.seen = self.seen, {}
