"""The ``simulate`` command, shared by ``kaid`` and ``kaictl``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer


def simulate_command(
    snapshot: Annotated[Path | None, typer.Option("--snapshot", "--cluster", help="Start from this snapshot "
                                                   "(Nodes, Queues and the pods already there; `kaictl snapshot "
                                                   "save`). Default: 16 nodes of 8 GPUs and a 4-queue tree.")] = None,
    trace: Annotated[Path | None, typer.Option("--trace", help="Trace file of jobs (YAML/JSON); default: "
                                                "generated from published GPU-cluster statistics.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the generated trace.")] = 0,
    hours: Annotated[float, typer.Option("--hours", min=0.1, max=24 * 30, help="Virtual hours to run.")] = 6.0,
    cycle: Annotated[float, typer.Option("--cycle", min=1, help="Virtual seconds between cycles.")] = 30.0,
    set_queue: Annotated[list[str] | None, typer.Option("--set-queue", help="What-if on a queue, e.g. "
                                                         "research.gpu.quota=16 (repeatable).")] = None,
    add_nodes: Annotated[list[str] | None, typer.Option("--add-nodes", help="What-if: more nodes, e.g. 4x8gpu "
                                                         "(repeatable).")] = None,
    plot_file: Annotated[Path | None, typer.Option("--plot", help="Write charts of GPU allocation and per-queue "
                                                    "use over time to this PNG.")] = None,
    solver: Annotated[str, typer.Option("--solver", help="Gang placement: cpsat or greedy.")] = "cpsat",
    config: Annotated[Path | None, typer.Option("--config", help="kai config file (YAML).")] = None,
    output: Annotated[str, typer.Option("-o", "--output", help="table, json or yaml.")] = "table",
) -> None:
    """Run the engine on a simulated cluster in virtual time and show fair share, use and waits.

    Pods already in a snapshot keep running for the whole simulation (their remaining time is unknown);
    its pending pods are scheduled with the trace's jobs."""
    # imported here, not at the top: ``kaid run`` shares this CLI and must start fast
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from kaid.api.config import SchedulerConfig, load_config
    from kaid.api.serialize import to_yaml
    from kaid.sim.cluster import builtin_cluster, builtin_profile, simulate
    from kaid.sim.files import SnapshotFileError, load_objects
    from kaid.sim.plot import plot
    from kaid.sim.report import render
    from kaid.sim.whatif import add_nodes as more_nodes
    from kaid.sim.whatif import profile_for
    from kaid.sim.whatif import set_queue as set_queue_expr
    from kaid.sim.workload import generate, load_trace

    err = Console(stderr=True, soft_wrap=True)
    if output not in ("table", "json", "yaml"):
        err.print(f"[red]error:[/red] unknown output format {output!r}: use table, json or yaml")
        raise typer.Exit(1)
    if solver not in ("cpsat", "greedy"):
        err.print(f"[red]error:[/red] unknown solver {solver!r}: use cpsat or greedy")
        raise typer.Exit(1)
    try:
        cfg = load_config(config)
        cfg = SchedulerConfig.model_validate({**cfg.model_dump(), "placement": {
            **cfg.placement.model_dump(), "gangSolver": solver}})
        base = load_objects(snapshot) if snapshot else builtin_cluster()
        for expr in set_queue or []:
            set_queue_expr(base, expr)
        for expr in add_nodes or []:
            base = base + more_nodes(base, expr)
        if trace:
            jobs = load_trace(trace)
        elif snapshot:
            jobs = generate(profile_for(base, seed, hours))
        else:
            jobs = generate(builtin_profile(seed, hours))
    except (ValueError, SnapshotFileError) as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1) from None
    if not any(o.get("kind") == "Node" for o in base):
        err.print(f"[red]error:[/red] {snapshot} has no Node objects; a cluster file needs Nodes and Queues")
        raise typer.Exit(1)
    started = time.perf_counter()
    show = output == "table" and err.is_terminal
    with Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=err, disable=not show, transient=True) as bar:
        task = bar.add_task("sim", total=1.0)
        result = simulate(base, jobs, cfg, hours, cycle_s=cycle,
                          progress=lambda f: bar.update(task, completed=f))
    summary = result.summary()
    summary["wallSeconds"] = round(time.perf_counter() - started, 2)
    summary["jobs"] = len(jobs)
    if plot_file is not None:
        try:
            plot(summary, plot_file)
        except OSError as e:
            err.print(f"[red]error:[/red] cannot write {plot_file}: {e.strerror}")
            raise typer.Exit(1) from None
        err.print(f"charts written to {plot_file}")
    if output == "json":
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    elif output == "yaml":
        sys.stdout.write(to_yaml(summary))
    else:
        render(summary, Console(), title=f"kai simulate: {len(jobs)} jobs, seed {seed}, {solver}, "
                                          f"{summary['wallSeconds']:.1f}s")
