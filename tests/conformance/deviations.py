"""The KAI tests kai does not follow on purpose, read from the data file that ``docs/compatibility.md``
points to. A KAI test is named by its source file and line (its name alone is not unique)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import yaml

DEVIATIONS_FILE = Path(__file__).resolve().parents[2] / "docs" / "compatibility-deviations.yaml"


class Kind(StrEnum):
    DEVIATION = "deviation"  # kai does better on purpose; argued in docs/compatibility.md
    OPEN = "open"  # not conformant yet: work left, not a choice


@dataclass(frozen=True, slots=True)
class Deviation:
    rule: str
    kind: Kind
    source: str
    source_line: int
    kai_test: str

    @property
    def key(self) -> tuple[str, int]:
        return (self.source, self.source_line)


def load_deviations(path: Path = DEVIATIONS_FILE) -> dict[tuple[str, int], Deviation]:
    data = yaml.safe_load(path.read_text()) or {}
    out: dict[tuple[str, int], Deviation] = {}
    for rule in data.get("rules") or []:
        for test in rule.get("kai_tests") or []:
            source, _, line = str(test["source"]).rpartition(":")
            dev = Deviation(str(rule["rule"]), Kind(rule.get("kind", "deviation")), source, int(line),
                            str(test["name"]))
            out[dev.key] = dev
    return out
