"""What ``simulate`` shows a person: per-queue fair share against use, GPU allocation over time, gang
waits. Shared by ``kaid simulate`` and ``kaictl simulate``."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

BARS = " ▁▂▃▄▅▆▇█"


def sparkline(values: list[float], top: float, width: int = 48) -> str:
    """Resample ``values`` to ``width`` columns (the peak of each column) and draw them as bars."""
    if not values or top <= 0:
        return ""
    n = len(values)
    cols = [max(values[i * n // width:max(i * n // width + 1, (i + 1) * n // width)]) for i in range(min(width, n))]
    return "".join(BARS[min(8, max(1 if v > 0 else 0, round(v / top * 8)))] for v in cols)


def _wait(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


def render(summary: dict[str, Any], console: Console, title: str = "kai simulated cluster") -> None:
    cap = summary["capacityGPUs"]
    timeline = summary["timeline"]
    head = Text.assemble(
        (f"{cap:g} GPUs", "bold"), f", {summary['hours']:g} h of virtual time, {summary['cycles']} scheduling cycles, "
        f"{summary['binds']} pods bound; mean GPU allocation ", (f"{summary['meanAllocation']:.0%}", "bold green"),
        "\nevictions: " + (", ".join(f"{n} by {a}" for a, n in summary.get("evictions", {}).items()) or "none")
        + f"; {summary.get('restarts', 0)} jobs restarted after losing pods")
    queues = Table(title="Queues: fair share against use (GPUs, averaged over time)", title_justify="left",
                   header_style="bold")
    for col in ("queue", "fair", "used", "used/fair", "jobs", "ran", "done", "wait p50", "p90"):
        queues.add_column(col, justify="left" if col == "queue" else "right")
    for name, q in summary["queues"].items():
        ratio = q["avgAllocatedGPUs"] / q["avgFairShareGPUs"] if q["avgFairShareGPUs"] else 0.0
        style = "yellow" if ratio < 0.9 else ("cyan" if ratio > 1.1 else "green")
        queues.add_row(name, f"{q['avgFairShareGPUs']:.1f}", f"{q['avgAllocatedGPUs']:.1f}",
                       Text(f"{ratio:.2f}", style=style), str(q["submitted"]), str(q["started"]),
                       str(q["finished"]), _wait(q["medianWaitS"]), _wait(q["p90WaitS"]))
    alloc = [s["allocatedGPUs"] for s in timeline]
    chart = Table.grid(padding=(0, 1))
    chart.add_column(justify="right")
    chart.add_column()
    chart.add_column(justify="right")
    chart.add_row("all", Text(sparkline(alloc, cap), style="green"), f"peak {max(alloc, default=0):g}")
    for name in summary["queues"]:
        series = [s["queues"].get(name, {}).get("allocated", 0.0) for s in timeline]
        peak = max(series, default=0.0)
        chart.add_row(name, Text(sparkline(series, peak), style="cyan"), f"peak {peak:g}")
    gangs = Table(title="Waits by job size", title_justify="left", header_style="bold")
    for col in ("job size", "jobs", "started", "median wait"):
        gangs.add_column(col, justify="left" if col == "job size" else "right")
    for label, g in summary["gangs"].items():
        gangs.add_row(label, str(g["jobs"]), str(g["started"]), _wait(g["medianWaitS"]))
    parts: list[Any] = [head, queues,
                        Panel(chart, title="GPUs allocated over time (each row scaled to its peak)",
                              title_align="left"), gangs]
    if summary.get("problems"):
        parts.append(Text("Problems in the input:\n" + "\n".join(summary["problems"]), style="red"))
    console.print(Panel(Group(*parts), title=title, title_align="left"))
