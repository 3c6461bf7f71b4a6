"""KAI's fair-share division cases (``kai/fairshare.yaml``, from its ``resource_division_test.go``), run
through kai's division function with each case's total."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from kaid.fairshare.division import UNLIMITED, Share, divide, divide_over_quota

# amounts in a case are in KAI's units (GPU devices, millicores, bytes); kai divides milli-GPUs
SCALE = {"gpu": 1000, "cpu": 1, "memory": 1}
UNIT = {"gpu": 1000, "cpu": 1, "memory": 1}


class Function(StrEnum):
    SET_RESOURCE_SHARE = "set_resource_share"
    DIVIDE_OVER_QUOTA = "divide_over_quota"
    SET_RESOURCES_SHARE = "set_resources_share"


@dataclass(frozen=True, slots=True)
class DivisionCase:
    name: str
    source: str
    source_line: int
    function: Function
    resources: tuple[str, ...]
    k_value: float
    total: dict[str, float]
    queues: tuple[dict[str, Any], ...]
    expected_remaining: float | None
    expected: dict[str, dict[str, float]]

    @property
    def id(self) -> str:
        return f"fairshare-{self.source_line}"


def load_cases(path: Path) -> list[DivisionCase]:
    out = []
    for c in yaml.safe_load(path.read_text()):
        function = Function(c["function"])
        resources = ("cpu", "memory", "gpu") if function == Function.SET_RESOURCES_SHARE else (c["resource"],)
        out.append(DivisionCase(c["name"], c["source"], int(c["source_line"]), function, resources,
                                float(c.get("k_value", 0)), dict(c["total"]), tuple(c["queues"]),
                                c.get("expected_remaining"), dict(c["expected_fair_share"])))
    return out


def _amount(value: float, resource: str) -> int:
    return UNLIMITED if value == -1 else round(value * SCALE[resource])


def _share(q: dict[str, Any], resource: str) -> Share:
    r = q.get(resource) or {}  # a resource the test leaves out is KAI's EmptyResource(): all zeros
    return Share(str(q.get("uid") or q["name"]), int(q.get("priority", 0)), float(q.get("created_rank", 0)),
                 _amount(r.get("quota", 0), resource), _amount(r.get("limit", 0), resource),
                 float(r.get("over_quota_weight", 0)), _amount(r.get("request", 0), resource),
                 fair=_amount(r.get("fair_share", 0), resource))


def run_case(case: DivisionCase) -> list[str]:
    """Every difference from KAI's expectation (empty: the case passes)."""
    problems = []
    for resource in case.resources:
        shares = {str(q["name"]): _share(q, resource) for q in case.queues}
        total = _amount(case.total[resource], resource)
        if case.function == Function.DIVIDE_OVER_QUOTA:
            left = divide_over_quota(total, list(shares.values()), UNIT[resource], case.k_value)
        else:
            left = divide(total, list(shares.values()), UNIT[resource], case.k_value)
        if case.expected_remaining is not None and left != _amount(case.expected_remaining, resource):
            problems.append(f"{resource}: {left / SCALE[resource]:g} left, expected {case.expected_remaining:g}")
        for name, want in case.expected.items():
            if resource in want and shares[name].fair != _amount(want[resource], resource):
                problems.append(f"queue {name} {resource}: fair share {shares[name].fair / SCALE[resource]:g}, "
                                f"expected {want[resource]:g}")
    return problems
