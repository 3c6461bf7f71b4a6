"""What every benchmark reports the same way: the machine and engine revision, percentiles, ratios."""

from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import statistics
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def machine_info() -> dict[str, Any]:
    try:
        ortools_version = importlib.metadata.version("ortools")
    except importlib.metadata.PackageNotFoundError:
        ortools_version = "unknown"
    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(), "cpus": os.cpu_count(), "loadavg": load, "ortools": ortools_version,
            **engine_revision()}


def engine_revision() -> dict[str, Any]:
    """The commit the engine was measured at, and whether kaid/ had uncommitted changes (read-only git)."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                                  check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    status = git("status", "--porcelain", "--", "kaid")
    return {"commit": commit, "kaid_uncommitted_changes": bool(status) if status is not None else None}


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def timing(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"median": None, "p99": None, "runs": []}
    return {"median": statistics.median(values), "p99": percentile(values, 0.99), "runs": values}


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)
