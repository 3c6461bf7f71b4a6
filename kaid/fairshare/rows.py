"""The fair-share contract as the front ends read it: one ``QueueRow`` per queue, in user units (gpu devices,
cpu millicores, memory megabytes; -1 unlimited)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kaid.model.objects import CPU, GPU, MEM, UNLIMITED, Snapshot

Amounts = dict[str, float | int]
"""An amount per resource in user units: ``{"gpu": 1.5, "cpu": 4000, "memory": 16000}``."""


def _units(v: Iterable[int]) -> Amounts:
    g, c, m = v
    return {"gpu": -1 if g == UNLIMITED else round(g / 1000, 3), "cpu": c,
            "memory": -1 if m == UNLIMITED else m // 1_000_000}


@dataclass(slots=True)
class QueueRow:
    """One queue's shares and accounting. ``allocated`` is what it held when the cycle began; the cycle sets
    ``allocated_after`` (what it holds once the decisions are applied). ``to_dict`` is the JSON every front end
    writes."""

    name: str
    parent: str | None
    priority: int
    deserved: Amounts
    fair_share: Amounts
    allocated: Amounts
    allocated_non_preemptible: Amounts
    requested: Amounts
    limit: Amounts
    errors: tuple[str, ...] = ()
    allocated_after: Amounts | None = None

    @property
    def allocated_final(self) -> Amounts:
        """What the queue holds once the cycle's decisions are applied (``allocated`` where no cycle ran)."""
        return self.allocated if self.allocated_after is None else self.allocated_after

    def to_dict(self) -> dict[str, Any]:
        """The row's JSON (``kaictl queue list -o json``, ``kaictl fairshare``, dry-run results)."""
        out: dict[str, Any] = {
            "name": self.name, "parent": self.parent, "priority": self.priority, "deserved": self.deserved,
            "fairShare": self.fair_share, "allocated": self.allocated,
            "allocatedNonPreemptible": self.allocated_non_preemptible, "requested": self.requested,
            "limit": self.limit}
        if self.errors:
            out["errors"] = list(self.errors)
        if self.allocated_after is not None:
            out["allocatedAfter"] = self.allocated_after
        return out


def queue_rows(snap: Snapshot) -> list[QueueRow]:
    """A row per queue as the snapshot's queues stand now, parents before children."""
    return [QueueRow(q.name, q.parent.name if q.parent else None, q.priority, _units(q.deserved), _units(q.fair),
                     _units(q.allocated), _units(q.alloc_np), _units(q.requested),
                     _units(q.effective_limit(r) for r in (GPU, CPU, MEM)), tuple(e.message for e in q.errors))
            for q in sorted(snap.queues.values(), key=lambda q: (q.depth, q.name))]
