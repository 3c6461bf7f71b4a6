"""Prints the conformance figure per category at the end of the run (CI shows it in its log)."""

from __future__ import annotations

import pytest

from tests.conformance.report import summary_lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = summary_lines()
    if lines:
        terminalreporter.section("KAI-Scheduler conformance (passed / failed / deviation / open)")
        for line in lines:
            terminalreporter.write_line(line)
