"""Outcomes of the conformance tests of this run, per category, for the summary line CI prints."""

from __future__ import annotations

from collections import defaultdict
from enum import StrEnum


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    DEVIATION = "deviation"
    OPEN = "open"


class Group(StrEnum):
    """Which of KAI's tests: the reference set (its integration tests and resource-division cases: the shared half,
    ``kai-more/`` and any ``KAI_CONFORMANCE_DIR``), or its per-action tests (``kai-actions/``)."""

    REFERENCE = "integration tests and fair-share division"
    PER_ACTION = "per-action tests (kai-actions/)"


OUTCOMES: dict[Group, dict[str, dict[str, Outcome]]] = defaultdict(lambda: defaultdict(dict))  # -> category -> id


def record(group: Group, category: str, test_id: str, outcome: Outcome) -> None:
    OUTCOMES[group][category][test_id] = outcome


def summary_lines() -> list[str]:
    """Per group, a line per category and the group's total; then the total of every group, if several ran."""
    lines = []
    total: dict[Outcome, int] = defaultdict(int)
    for group in (g for g in Group if g in OUTCOMES):
        lines.append(f"{group}:")
        in_group: dict[Outcome, int] = defaultdict(int)
        for category in sorted(OUTCOMES[group]):
            counts: dict[Outcome, int] = defaultdict(int)
            for outcome in OUTCOMES[group][category].values():
                counts[outcome] += 1
                in_group[outcome] += 1
                total[outcome] += 1
            lines.append(_line(f"  {category}", counts))
        lines.append(_line("  all", in_group))
    if len(OUTCOMES) > 1:
        lines.append(_line("every group", total))
    return lines


def _line(label: str, counts: dict[Outcome, int]) -> str:
    n = sum(counts.values())
    rate = 100.0 * counts[Outcome.PASSED] / n if n else 0.0
    parts = ", ".join(f"{counts[o]} {o}" for o in Outcome)
    return f"{label:28} {counts[Outcome.PASSED]:3}/{n:<3} ({rate:5.1f}%)  {parts}"
