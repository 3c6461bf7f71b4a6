"""Outcomes of the conformance tests of this run, per category, for the summary line CI prints."""

from __future__ import annotations

from collections import defaultdict
from enum import StrEnum


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    DEVIATION = "deviation"
    OPEN = "open"


OUTCOMES: dict[str, dict[str, Outcome]] = defaultdict(dict)  # category -> test id -> outcome


def record(category: str, test_id: str, outcome: Outcome) -> None:
    OUTCOMES[category][test_id] = outcome


def summary_lines() -> list[str]:
    lines = []
    total: dict[Outcome, int] = defaultdict(int)
    for category in sorted(OUTCOMES):
        counts: dict[Outcome, int] = defaultdict(int)
        for outcome in OUTCOMES[category].values():
            counts[outcome] += 1
            total[outcome] += 1
        lines.append(_line(category, counts))
    if len(OUTCOMES) > 1:
        lines.append(_line("all", total))
    return lines


def _line(label: str, counts: dict[Outcome, int]) -> str:
    n = sum(counts.values())
    rate = 100.0 * counts[Outcome.PASSED] / n if n else 0.0
    parts = ", ".join(f"{counts[o]} {o}" for o in Outcome)
    return f"{label:26} {counts[Outcome.PASSED]:3}/{n:<3} ({rate:5.1f}%)  {parts}"
