"""The ``simulate`` command, shared by ``kaid`` and ``kaictl``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

Obj = dict[str, Any]


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
    # the engine and rich are imported when the command runs, not when the CLI is built (``kaid --help``)
    from rich.console import Console

    err = Console(stderr=True, soft_wrap=True)
    if output not in ("table", "json", "yaml"):
        _fail(err, f"unknown output format {output!r}: use table, json or yaml")
    if solver not in ("cpsat", "greedy"):
        _fail(err, f"unknown solver {solver!r}: use cpsat or greedy")
    cfg, base, jobs = _inputs(err, snapshot, trace, seed, hours, set_queue or [], add_nodes or [], solver, config)
    summary = _run(err, base, jobs, cfg, hours, cycle, show_progress=output == "table" and err.is_terminal)
    if plot_file is not None:
        from kaid.sim.plot import plot

        try:
            plot(summary, plot_file)
        except OSError as e:
            _fail(err, f"cannot write {plot_file}: {e.strerror}")
        err.print(f"charts written to {plot_file}")
    if output == "json":
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    elif output == "yaml":
        from kaid.api.serialize import to_yaml

        sys.stdout.write(to_yaml(summary))
    else:
        from kaid.sim.report import render

        render(summary, Console(), title=f"kai simulate: {len(jobs)} jobs, seed {seed}, {solver}, "
                                          f"{summary['wallSeconds']:.1f}s")


def _fail(err: Any, message: str) -> NoReturn:
    err.print(f"[red]error:[/red] {message}")
    raise typer.Exit(1)


def _inputs(err: Any, snapshot: Path | None, trace: Path | None, seed: int, hours: float, set_queue: list[str],
            add_nodes: list[str], solver: str, config: Path | None) -> tuple[Any, list[Obj], list[Any]]:
    """The config (with the solver asked for), the cluster (what-ifs applied) and the trace's jobs."""
    from kaid.api.config import SchedulerConfig, load_config
    from kaid.sim.cluster import builtin_cluster, builtin_profile
    from kaid.sim.files import SnapshotFileError, load_objects
    from kaid.sim.whatif import add_nodes as more_nodes
    from kaid.sim.whatif import profile_for
    from kaid.sim.whatif import set_queue as set_queue_expr
    from kaid.sim.workload import generate, load_trace

    try:
        cfg = load_config(config)
        cfg = SchedulerConfig.model_validate({**cfg.model_dump(), "placement": {
            **cfg.placement.model_dump(), "gangSolver": solver}})
        base = load_objects(snapshot) if snapshot else builtin_cluster()
        for expr in set_queue:
            set_queue_expr(base, expr)
        for expr in add_nodes:
            base = base + more_nodes(base, expr)
        if trace:
            jobs = load_trace(trace)
        elif snapshot:
            jobs = generate(profile_for(base, seed, hours))
        else:
            jobs = generate(builtin_profile(seed, hours))
    except (ValueError, SnapshotFileError) as e:
        _fail(err, str(e))
    if not any(o.get("kind") == "Node" for o in base):
        _fail(err, f"{snapshot} has no Node objects; a cluster file needs Nodes and Queues")
    return cfg, base, jobs


def _run(err: Any, base: list[Obj], jobs: list[Any], cfg: Any, hours: float, cycle: float,
         show_progress: bool) -> dict[str, Any]:
    """The simulation's summary, with a progress bar on a terminal."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from kaid.sim.cluster import simulate

    started = time.perf_counter()
    with Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=err, disable=not show_progress, transient=True) as bar:
        task = bar.add_task("sim", total=1.0)
        result = simulate(base, jobs, cfg, hours, cycle_s=cycle, progress=lambda f: bar.update(task, completed=f))
    summary = result.summary()
    summary["wallSeconds"] = round(time.perf_counter() - started, 2)
    summary["jobs"] = len(jobs)
    return summary
