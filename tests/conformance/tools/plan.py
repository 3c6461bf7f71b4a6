"""The numbering of ``../kai-actions/`` files: per category, KAI's per-action test cases in source order.

A category's entries run over its test files in byte order of their names (as ``git ls-tree`` lists them), the cases
of each file in the order they appear. A table case is an element of a ``[]test_utils.TestTopologyBasic{``,
``[]integration_tests_utils.TestTopologyMetadata{`` or ``[]testMetadata{`` literal (``cases``); a builder test (one
case built in code) has a fixed entry here and is restated by ``builders``. MIG, DRA and NUMA files and the tests that
assert solver internals are left out (see ``../kai-actions/README.md``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from tests.conformance.tools.go2yaml import read_go

ACTIONS = "pkg/scheduler/actions/"
TABLE_START = re.compile(
    r"\[\](?:integration_tests_utils\.TestTopologyMetadata|test_utils\.TestTopologyBasic|testMetadata)\{")
CASE_NAME = re.compile(r'\b[Nn]ame:\s*("(?:[^"\\]|\\.)*"|\w+)')

# per category: (file, None) for a table file, (file, [(line, name), ...]) for builder tests (file#builder).
PLAN: dict[str, list[tuple[str, list[tuple[int, str]] | None]]] = {
    "preempt": [
        ("preempt/preemptGang_test.go", None), ("preempt/preemptGang_test.go#builder", [(276, "flaky scenario")]),
        ("preempt/preemptGpuMemory_test.go", None), ("preempt/preempt_elastic_test.go", None),
        ("preempt/preempt_gang_full_drain_test.go#builder", [(56, "issue-1591 reproducer")]),
        ("preempt/preempt_subgroups_test.go", None), ("preempt/preempt_test.go", None),
    ],
    "reclaim": [
        ("reclaim/reclaimDepartments_test.go", None), ("reclaim/reclaimGang_test.go", None),
        ("reclaim/reclaimGpuMemory_test.go", None),
        ("reclaim/reclaim_anchor_victim_test.go#builder", [(46, "anchor victim"), (133, "anchor victim control")]),
        ("reclaim/reclaim_elastic_test.go", None), ("reclaim/reclaim_sub_group_test.go", None),
        ("reclaim/reclaim_test.go", None),
    ],
    "consolidation": [
        ("consolidation/consolidationGpuMemory_test.go", None), ("consolidation/consolidation_subgroups_test.go", None),
        ("consolidation/consolidation_test.go", None),
    ],
    "stalegangeviction": [("stalegangeviction/stalegangeviction_test.go", None)],
    "allocate": [
        ("allocate/allocateElastic_test.go", None), ("allocate/allocateFractionalGpu_test.go", None),
        ("allocate/allocateGang_test.go", None), ("allocate/allocateGpuMemory_test.go", None),
        ("allocate/allocateTopology_test.go", None), ("allocate/allocate_stuck_in_releasing_test.go", None),
        ("allocate/allocate_subgroups_test.go", None), ("allocate/allocate_test.go", None),
        ("allocate/interpod_affinity_test.go", None),
    ],
}


class Entry(NamedTuple):
    number: int
    path: str  # relative to the KAI checkout
    line: int  # the case's opening '{' (a table case) or its func (a builder test)
    kind: str  # 'table' or 'builder'
    name: str

    def file_name(self, category: str) -> str:
        return f"{category}-{self.number:02d}.yaml"


def cases(src: str) -> list[tuple[int, str]]:
    """(line of the opening '{', name) of every element of every test table in the Go file text ``src``."""
    out = []
    for m in TABLE_START.finditer(src):
        depth = 1
        elem_start = None
        i = m.end()
        while depth > 0:
            c = src[i]
            if src.startswith("//", i):
                i = src.index("\n", i)
                continue
            if c == '"':
                j = i + 1
                while src[j] != '"':
                    j += 2 if src[j] == "\\" else 1
                i = j + 1
                continue
            if c == "`":
                i = src.index("`", i + 1) + 1
                continue
            if c == "{":
                depth += 1
                if depth == 2:
                    elem_start = i
            elif c == "}":
                depth -= 1
                if depth == 1 and elem_start is not None:
                    nm = CASE_NAME.search(src[elem_start:i])
                    out.append((src.count("\n", 0, elem_start) + 1, nm.group(1) if nm else "?"))
                    elem_start = None
            i += 1
    return out


def entries(kai_source: Path, category: str) -> list[Entry]:
    out: list[Entry] = []
    for f, fixed in PLAN[category]:
        path, _, kind = f.partition("#")
        for line, name in fixed if fixed is not None else cases(read_go(kai_source, ACTIONS + path)):
            out.append(Entry(len(out) + 1, ACTIONS + path, line, kind or "table", name))
    return out
