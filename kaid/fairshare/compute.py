"""Fair share per resource (gpu, cpu, memory), top-down through the queue tree (docs/architecture.md, "The cycle").

At the root the amount is the cluster's schedulable capacity; below, a queue's fair share is divided
among its children by KAI-Scheduler's rules (``kaid.fairshare.division``): deserved first, even when the
quotas over-subscribe the parent; then over quota by priority and weight in whole GPUs, with KAI's
tie-breaks for the GPUs that rounding held back. With usage history on, each queue's over-quota weight
moves away from its recent usage (its share of the cluster's capacity over the window) by ``kValue``.
"""

from __future__ import annotations

from kaid.fairshare.division import Share, divide
from kaid.model.objects import CPU, GPU, MEM, UNLIMITED, Queue, Snapshot

# over-quota parts are handed out in whole units: GPUs (1000 milli-GPU), millicores, bytes
WHOLE_UNIT = (1000, 1, 1)


def divide_level(amount: int, children: list[Queue], r: int, k_value: float, use_usage: bool) -> None:
    """Divide ``amount`` of resource ``r`` among ``children`` and, recursively, below them."""
    kids = [q for q in children if not q.errors]
    if not kids:
        return
    # each queue's use over the window as a share of the cluster's capacity over it (KAI's normalisation;
    # kaid.fairshare.usage), not of its siblings' use: using idle resources costs little
    usage = [q.usage[r] for q in kids] if use_usage else [0.0] * len(kids)
    shares = [Share(q.name, q.priority, q.created, q.quota[r], q.effective_limit(r), q.weight[r], q.requested[r], u)
              for q, u in zip(kids, usage, strict=True)]
    divide(amount, shares, WHOLE_UNIT[r], k_value if use_usage else 0.0)
    for q, s in zip(kids, shares, strict=True):
        q.fair[r] = s.fair
        divide_level(s.fair, q.children, r, k_value, use_usage)


def _deserved(q: Queue, r: int, cap: int) -> int:
    parent_amount = q.parent.deserved[r] if q.parent is not None else cap
    return parent_amount if q.quota[r] == UNLIMITED else q.quota[r]


def compute_fair_share(snap: Snapshot, use_usage: bool = False, k_value: float = 1.0) -> None:
    """Fill ``deserved`` and ``fair`` on every queue of the snapshot (``allocated``/``requested`` are
    filled by the snapshot builder)."""
    cap = snap.capacity()
    order = sorted(snap.queues.values(), key=lambda q: (q.depth, q.name))
    for q in order:
        q.fair = [0, 0, 0]
        q.deserved = [_deserved(q, r, cap[r]) for r in (GPU, CPU, MEM)]
    roots = sorted((q for q in snap.roots), key=lambda q: q.name)
    for r in (GPU, CPU, MEM):
        divide_level(cap[r], roots, r, k_value, use_usage)
