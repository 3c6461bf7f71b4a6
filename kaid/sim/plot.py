"""Charts of a simulation: GPUs allocated over time, stacked by queue, and each queue's use against its
fair share."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = summary["timeline"]
    hours = [s["t"] / 3600 for s in timeline]
    queues = list(summary["queues"])
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    stacks = [[s["queues"].get(q, {}).get("allocated", 0.0) for s in timeline] for q in queues]
    top.stackplot(hours, stacks, labels=queues, alpha=0.85)
    top.axhline(summary["capacityGPUs"], color="black", linestyle="--", linewidth=1, label="capacity")
    top.set_ylabel("GPUs allocated")
    top.set_title("GPU allocation over time, by queue")
    top.legend(loc="upper left", fontsize=8, ncol=3)
    for i, q in enumerate(queues):
        color = f"C{i}"
        bottom.plot(hours, [s["queues"].get(q, {}).get("allocated", 0.0) for s in timeline], color=color, label=q)
        bottom.plot(hours, [s["queues"].get(q, {}).get("fairShare", 0.0) for s in timeline], color=color,
                    linestyle=":", linewidth=1)
    bottom.set_ylabel("GPUs")
    bottom.set_xlabel("hours")
    bottom.set_title("Use (solid) against fair share (dotted), per queue")
    bottom.legend(loc="upper left", fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
