"""Dividing one resource among sibling queues, by KAI-Scheduler's rules (its ``resource_division.go`` at
the reference commit; the cases of its ``resource_division_test.go`` run in ``tests/conformance``):

1. Deserved: every queue first gets min(quota, what it may request), ``quota: -1`` meaning the whole
   amount, even when the quotas together exceed the amount (a deserved share is a promise).
2. Over quota, highest ``priority`` first: rounds that offer each unsatisfied queue its weighted part of
   what is left. A queue whose remaining request fits its part gets exactly that; any other gets its part
   rounded down to whole units (whole GPUs), and the fraction it lost is remembered.
3. What rounding held back goes out one unit at a time, largest lost fraction first, then the older
   queue, then the smaller name, priority by priority.

Weights follow usage history when it is on: a queue's weight share ``w`` becomes ``w + k * (w - u)``
(at least 0), where ``u`` is its share of the recent usage and ``k`` the configured kValue.

Amounts are integers in the resource's own unit (milli-GPU, millicores, bytes); ``unit`` is the size
of the whole unit that over-quota parts are rounded to (1000 for GPUs).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction

UNLIMITED = -1


@dataclass(slots=True)
class Share:
    """One queue's side of a division of one resource. ``fair`` starts at what the queue already has and
    ends at its fair share."""

    name: str
    priority: int
    created: float
    quota: int
    limit: int
    weight: float
    request: int
    usage: float = 0.0
    fair: int = 0

    @property
    def requestable(self) -> int:
        return self.request if self.limit == UNLIMITED else min(self.limit, self.request)

    @property
    def remaining_request(self) -> int:
        return max(0, self.requestable - self.fair)

    @property
    def satisfied(self) -> bool:
        return self.request <= self.fair or (self.limit != UNLIMITED and self.limit <= self.fair)


def divide(total: int, shares: list[Share], unit: int, k_value: float = 0.0) -> int:
    """Give each share its deserved part, then the over-quota parts; return what is left undivided."""
    left = give_deserved(total, shares)
    if left <= 0:
        return 0
    return divide_over_quota(left, shares, unit, k_value)


def give_deserved(total: int, shares: list[Share]) -> int:
    left = total
    for s in shares:
        quota = total if s.quota == UNLIMITED else s.quota
        amount = min(quota, s.requestable)
        s.fair += amount
        left -= amount
    return left


Lost = dict[str, tuple[Fraction, Share]]  # queue -> (the fraction of a unit rounding held back, its share)


def divide_over_quota(total: int, shares: list[Share], unit: int, k_value: float = 0.0) -> int:
    """The over-quota phase: whole units by weight, priority by priority, then the rounded-off rest."""
    priorities = sorted({s.priority for s in shares}, reverse=True)
    lost: dict[int, Lost] = {}
    left = total
    for prio in priorities:
        left, lost[prio] = _rounds(left, [s for s in shares if s.priority == prio], unit, k_value)
    for prio in priorities:
        if left <= 0:
            break
        left = _hand_out_rest(left, lost[prio], unit)
    return left


def _rounds(total: int, shares: list[Share], unit: int, k_value: float) -> tuple[int, Lost]:
    """Rounds of weighted parts until nobody can use more of ``total``; the fractions lost to rounding."""
    lost: Lost = {}
    while True:
        weights = _share_weights(shares, k_value)
        weight_sum = sum(weights.values())
        if weight_sum == 0:
            break
        offered = Fraction(total)
        again = False
        for s in shares:
            if total == 0:
                break
            if s.satisfied or s.weight == 0:
                continue
            part = offered * weights[s.name] / weight_sum
            wanted = s.remaining_request
            give = _give(part, wanted, unit)
            if give == wanted:
                lost.pop(s.name, None)
            elif part - give > 0:
                lost[s.name] = (part - give, s)
            if give == 0:
                continue
            s.fair += give
            total -= give
            again = again or wanted < part
        if not again or total == 0:
            break
    return total, lost


def _give(part: Fraction, wanted: int, unit: int) -> int:
    """All of the remaining request if it fits the part, else the part rounded down to whole units."""
    if wanted <= part:
        return wanted
    return (int(part) // unit) * unit


def _share_weights(shares: list[Share], k_value: float) -> dict[str, Fraction]:
    """Each unsatisfied share's weight: its weight share, moved by k times its distance from its usage (without
    usage history, k is 0: the weight share itself)."""
    total_weight = sum(_exact(s.weight) for s in shares if s.remaining_request > 0)
    if total_weight == 0:
        return {}
    out = {}
    k = _exact(k_value)
    for s in shares:
        if s.satisfied:
            continue
        w = _exact(s.weight) / total_weight
        moved = w + k * (w - _exact(s.usage)) if k else w
        out[s.name] = moved if moved > 0 else _ZERO
    return out


_ZERO = Fraction(0)


@functools.lru_cache(maxsize=1024)
def _exact(x: float) -> Fraction:
    """A float as the fraction it is exactly (``Fraction(x)``), remembered: a division reads the same few weights
    round after round, and a float's conversion costs more than the arithmetic on it."""
    return Fraction(x)


def _hand_out_rest(total: int, lost: Lost, unit: int) -> int:
    """One whole unit (or what is left, if less) to each share that lost a fraction to rounding, largest
    fraction first, then the older queue, then the smaller name."""
    for _, s in sorted(lost.values(), key=lambda fs: (-fs[0], fs[1].created, fs[1].name)):
        if total <= 0:
            break
        give = min(unit, total)
        s.fair += give
        total -= give
    return total
