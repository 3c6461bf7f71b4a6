"""What every benchmark does the same way: its output options, the machine and engine revision, percentiles,
ratios, formatting, profiles, and the JSON it writes (``--json FILE``, and ``--record``: the history in
``benchmarks/results/<name>.json``)."""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import importlib.metadata
import io
import json
import math
import os
import platform
import pstats
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


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


def median(values: Sequence[float | None]) -> float | None:
    """The median of the values that are there (None when none is)."""
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def proc_memory_mb(pid: int | None) -> tuple[float | None, float | None]:
    """(peak RSS, RSS) of a live process in MB (10^6 bytes), from /proc (VmHWM, VmRSS); None where unknown. For a
    process's own peak, not ``getrusage``'s ``ru_maxrss``: Linux carries a parent's peak into a child it starts (kept
    across the exec), so a small probe started by a large benchmark would read the benchmark's peak."""
    if pid is None:
        return None, None
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":" in line)
    except OSError:
        return None, None

    def mb(key: str) -> float | None:
        parts = fields.get(key, "").split()
        return round(int(parts[0]) * 1024 / 1e6, 1) if parts else None

    return mb("VmHWM"), mb("VmRSS")


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def fmt(value: Any) -> str:
    """A figure for a report's table: three significant digits below 10, one decimal below 1,000."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def output_args(p: argparse.ArgumentParser) -> None:
    """The options every benchmark takes for its output."""
    p.add_argument("--json", metavar="FILE", help="also write the full report as JSON to FILE")
    p.add_argument("--record", action="store_true",
                   help="append the report (without its per-run detail) to benchmarks/results/NAME.json")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def profile_args(p: argparse.ArgumentParser, solvers: Sequence[str]) -> None:
    """``--profile SOLVER`` (a cProfile of one cycle instead of the timings), ``--profile-top``, ``--profile-out``."""
    p.add_argument("--profile", choices=solvers,
                   help="instead of timing, profile one cycle of this solver with cProfile and print the top functions")
    p.add_argument("--profile-top", type=int, default=15, help="functions to list per ordering (default 15)")
    p.add_argument("--profile-out", metavar="FILE", help="with --profile: also dump the pstats data to FILE")


def write_report(name: str, report: dict[str, Any], args: argparse.Namespace, bulky: Sequence[str] = ()) -> None:
    """``--json``: the whole report; ``--record``: the report less its ``bulky`` keys, appended to the history."""
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.record:
        path = RESULTS / f"{name}.json"
        data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"benchmark": name, "history": []}
        entry = {"date": dt.date.today().isoformat(), "command": " ".join(["python -m", f"benchmarks.{name}",
                                                                           *sys.argv[1:]]),
                 **{k: v for k, v in report.items() if k not in bulky}}
        data["history"].append(entry)
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def progress(quiet: bool, name: str) -> Callable[[str], None]:
    """A progress line on stderr (nothing with ``--quiet``)."""
    def log(msg: str) -> None:
        if not quiet:
            print(f"{name}: {msg}", file=sys.stderr, flush=True)
    return log


def profile(run: Callable[[], object], label: str, top: int, out: str | None = None) -> str:
    """cProfile of ``run()``: the top functions by cumulative and by own time (``out``: the pstats data too)."""
    prof = cProfile.Profile()
    prof.enable()
    run()
    prof.disable()
    if out:
        prof.dump_stats(out)
    return profile_text(prof, label, top)


def profile_text(stats: cProfile.Profile | str, label: str, top: int) -> str:
    buf = io.StringIO()
    for key in ("cumulative", "tottime"):
        buf.write(f"--- {label}, top {top} by {key} ---\n")
        pstats.Stats(stats, stream=buf).strip_dirs().sort_stats(key).print_stats(top)
    return buf.getvalue()
