"""The conformance summary counts every test once, in its group: a per-action test and an integration test of the
same category and file name are two tests (the report once keyed them by file name alone, so one hid the other)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import pytest

from tests.conformance import report
from tests.conformance.report import Group, Outcome, record, summary_lines


@pytest.fixture
def empty_report(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    fresh: dict[Group, dict[str, dict[str, Outcome]]] = defaultdict(lambda: defaultdict(dict))
    monkeypatch.setattr(report, "OUTCOMES", fresh)
    yield


def test_same_names_in_two_groups_are_two_tests(empty_report: None) -> None:
    record(Group.REFERENCE, "preempt", "kai/preempt-01", Outcome.PASSED)
    record(Group.REFERENCE, "preempt", "kai-more/preempt-01", Outcome.PASSED)
    record(Group.PER_ACTION, "preempt", "kai-actions/preempt-01", Outcome.OPEN)
    lines = summary_lines()
    assert lines[0] == f"{Group.REFERENCE}:"
    assert lines[1].split()[:2] == ["preempt", "2/2"]
    assert f"{Group.PER_ACTION}:" in lines
    assert lines[-1].split()[2] == "2/3" and "1 open" in lines[-1]


def test_one_group_has_no_grand_total(empty_report: None) -> None:
    record(Group.REFERENCE, "fairshare", "fairshare-50", Outcome.FAILED)
    assert summary_lines()[-1].split()[:2] == ["all", "0/1"]
