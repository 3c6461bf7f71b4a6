"""Fair share per resource (gpu, cpu, memory), top-down through the queue tree (DESIGN section 3).

For each parent amount (the cluster's schedulable capacity at the root, a queue's fair share below):

1. Deserved: each child first gets min(quota, requested), never above its limit; ``quota: -1`` means all
   of the parent's amount. If the quotas over-subscribe the parent, higher ``priority`` siblings are
   served first and a bucket of equal priority is scaled down in proportion.
2. Over-quota: what is left goes to the highest-priority siblings first, split by ``overQuotaWeight``
   (water-filling), capped by each child's limit and by what it requested. Integer remainders are handed
   out deterministically (largest fractional part, then name).
3. With usage history on, a queue whose decayed past usage share among its siblings exceeds its weight
   share gets its over-quota weight scaled down by the ratio of the two.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kaid.model.objects import CPU, GPU, MEM, UNLIMITED, Queue, Snapshot

INF = 1 << 62


def _cap(v: int) -> int:
    return INF if v == UNLIMITED else v


def waterfill(amount: int, caps: list[int], weights: list[Fraction], names: list[str]) -> list[int]:
    """Split ``amount`` in proportion to ``weights`` without exceeding ``caps``; integer, deterministic."""
    n = len(caps)
    give = [0] * n
    active = [i for i in range(n) if caps[i] > 0 and weights[i] > 0]
    while amount > 0 and active:
        wsum = sum(weights[i] for i in active)
        shares = {i: Fraction(amount) * weights[i] / wsum for i in active}
        capped = [i for i in active if caps[i] - give[i] <= shares[i]]
        if capped:
            for i in capped:
                amount -= caps[i] - give[i]
                give[i] = caps[i]
            active = [i for i in active if i not in capped]
            continue
        floors = {i: int(shares[i]) for i in active}
        for i in active:
            give[i] += floors[i]
        left = amount - sum(floors.values())
        order = sorted(active, key=lambda i: (-(shares[i] - floors[i]), names[i]))
        for i in order[:left]:
            give[i] += 1
        amount = 0
    return give


def _proportional(amount: int, wants: list[int], names: list[str]) -> list[int]:
    total = sum(wants)
    if total <= amount:
        return list(wants)
    return waterfill(amount, wants, [Fraction(w) for w in wants], names)


def _usage_weights(kids: list[Queue], r: int, enabled: bool) -> list[Fraction]:
    weights = [Fraction(str(q.weight[r])) for q in kids]
    if not enabled:
        return weights
    total_u = sum(q.usage[r] for q in kids)
    total_w = sum(weights)
    if total_u <= 0 or total_w <= 0:
        return weights
    out = []
    for q, w in zip(kids, weights, strict=True):
        u_share = Fraction(q.usage[r] / total_u).limit_denominator(10**6)
        w_share = w / total_w
        out.append(w * w_share / u_share if u_share > w_share else w)
    return out


def divide(amount: int, children: list[Queue], r: int, use_usage: bool) -> None:
    kids = [q for q in children if not q.errors]
    if not kids:
        return
    names = [q.name for q in kids]
    caps = [min(_cap(q.effective_limit(r)), q.requested[r]) for q in kids]
    wants = []
    for q, cap in zip(kids, caps, strict=True):
        quota = amount if q.quota[r] == UNLIMITED else q.quota[r]
        wants.append(min(quota, cap))
    give = [0] * len(kids)
    left = amount
    for prio in sorted({q.priority for q in kids}, reverse=True):
        idx = [i for i, q in enumerate(kids) if q.priority == prio]
        part = _proportional(left, [wants[i] for i in idx], [names[i] for i in idx])
        for i, g in zip(idx, part, strict=True):
            give[i] = g
            left -= g
    weights = _usage_weights(kids, r, use_usage)
    for prio in sorted({q.priority for q in kids}, reverse=True):
        if left <= 0:
            break
        idx = [i for i, q in enumerate(kids) if q.priority == prio]
        extra = waterfill(left, [caps[i] - give[i] for i in idx], [weights[i] for i in idx], [names[i] for i in idx])
        for i, g in zip(idx, extra, strict=True):
            give[i] += g
            left -= g
    for q, g in zip(kids, give, strict=True):
        q.fair[r] = g
        divide(g, q.children, r, use_usage)


def _deserved(q: Queue, r: int, cap: int) -> int:
    parent_amount = q.parent.deserved[r] if q.parent is not None else cap
    return parent_amount if q.quota[r] == UNLIMITED else q.quota[r]


def compute_fair_share(snap: Snapshot, use_usage: bool = False) -> None:
    """Fill ``deserved`` and ``fair`` on every queue of the snapshot (``allocated``/``requested`` are
    filled by the snapshot builder)."""
    cap = snap.capacity()
    order = sorted(snap.queues.values(), key=lambda q: (q.depth, q.name))
    for q in order:
        q.fair = [0, 0, 0]
        q.deserved = [_deserved(q, r, cap[r]) for r in (GPU, CPU, MEM)]
    roots = sorted((q for q in snap.roots), key=lambda q: q.name)
    for r in (GPU, CPU, MEM):
        divide(cap[r], roots, r, use_usage)


def decay_usage(usage: list[float], allocated: list[int], dt: float, half_life: float) -> list[float]:
    """Exponentially decayed usage (resource-seconds) after ``dt`` seconds at ``allocated``."""
    if half_life <= 0:
        return [0.0, 0.0, 0.0]
    f = 0.5 ** (dt / half_life)
    return [u * f + a * dt for u, a in zip(usage, allocated, strict=True)]


def _units(v: list[int]) -> dict[str, Any]:
    def g(x: int) -> float | int:
        return -1 if x == UNLIMITED else round(x / 1000, 3)

    def m(x: int) -> int:
        return -1 if x == UNLIMITED else x // 1_000_000

    return {"gpu": g(v[GPU]), "cpu": v[CPU], "memory": m(v[MEM])}


def queue_rows(snap: Snapshot) -> list[dict[str, Any]]:
    """The fair-share contract: one row per queue in user units (gpu devices, cpu millicores, memory MB)."""
    rows = []
    for q in sorted(snap.queues.values(), key=lambda q: (q.depth, q.name)):
        lim = [q.effective_limit(r) for r in (GPU, CPU, MEM)]
        rows.append({
            "name": q.name,
            "parent": q.parent.name if q.parent else None,
            "priority": q.priority,
            "deserved": _units(q.deserved),
            "fairShare": _units(q.fair),
            "allocated": _units(q.allocated),
            "allocatedNonPreemptible": _units(q.alloc_np),
            "requested": _units(q.requested),
            "limit": _units(lim),
            **({"errors": [e.message for e in q.errors]} if q.errors else {}),
        })
    return rows
