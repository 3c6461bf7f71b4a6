"""``kaictl dry-run``: where pods would go, what would be evicted and why, what stays pending and why."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from kaictl.commands.engine_input import (
    ConfigFile,
    Context,
    Kubeconfig,
    Namespace,
    Output,
    Snapshot,
    current_namespace,
    read_config,
    read_objects,
)
from kaictl.output import check_format, console, emit_data, fail
from kaid.model.expand import expand
from kaid.model.vocabulary import PodStatus
from kaid.sim.dryrun import DryRun, dry_run
from kaid.sim.files import SnapshotFileError, load_objects

STATUS_STYLE = {PodStatus.RUNNING: "green", PodStatus.PENDING: "yellow", PodStatus.EVICTED: "red",
                PodStatus.PIPELINED: "cyan", PodStatus.RELEASING: "magenta"}


def dry_run_command(
    snapshot: Snapshot = None,
    files: Annotated[list[Path] | None, typer.Option("-f", "--filename", help="Workloads to add (Pod, Job, "
                                                      "Deployment, PyTorchJob, ... in any mix). Repeatable.")] = None,
    cycles: Annotated[int, typer.Option("--cycles", min=1, max=1000, help="Scheduling cycles to run.")] = 1,
    output: Output = "table",
    now: Annotated[float | None, typer.Option("--now", help="Unix time of the first cycle (default: now).")] = None,
    solver: Annotated[str | None, typer.Option("--solver", help="Gang placement: cpsat or greedy.")] = None,
    config: ConfigFile = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = None,
) -> None:
    """Where pods would go, what would be evicted and why, what stays pending and why; writes nothing.

    Reads the live cluster through the kubeconfig, or --snapshot FILE offline."""
    check_format(output)
    cfg = read_config(config, solver)
    objs = read_objects(snapshot, None, kubeconfig, context, live=True)
    default_ns = namespace or (current_namespace(kubeconfig, context) if files and snapshot is None else "default")
    added = [pod for path in files or [] for pod in _workloads(path, default_ns, cfg.schedulerName)]
    result = dry_run(objs + added, cfg, cycles, time.time() if now is None else now)
    if output in ("json", "yaml"):
        emit_data(result.to_json(), output)
    else:
        _render(result, cycles, wide=output == "wide")


def _workloads(path: Path, namespace: str, scheduler: str) -> list[dict[str, Any]]:
    """The objects of a workload file with the pods they would make, namespaced objects in ``namespace`` when
    they name none."""
    try:
        docs = load_objects(path)
    except SnapshotFileError as e:
        fail(str(e))
    out: list[dict[str, Any]] = []
    for doc in docs:
        m = doc.setdefault("metadata", {})
        if not m.get("namespace") and doc.get("kind") not in ("Queue", "Node", "Topology", "PriorityClass"):
            m["namespace"] = namespace
        out.extend(expand(doc, scheduler))
    return out


def _render(result: DryRun, cycles: int, wide: bool) -> None:
    out = console()
    pods = Table(title=f"Pods after {cycles} cycle{'s' if cycles > 1 else ''}", title_justify="left",
                 header_style="bold")
    cols = ["NAMESPACE", "POD", "POD GROUP", "QUEUE", "STATUS", "NODE", "GPUS"]
    for col in cols:
        pods.add_column(col, justify="right" if col == "GPUS" else "left")
    for p in result.pods:
        st = p["status"]
        pods.add_row(p["namespace"], p["name"], p["podGroup"] or "-", p["queue"] or "-",
                     f"[{STATUS_STYLE.get(st, 'white')}]{st}[/]", p["node"] or "-", f"{p['gpus']:g}")
    out.print(pods)
    if result.actions and wide:
        acts = Table(title="Actions", title_justify="left", header_style="bold")
        for col in ("CYCLE", "TYPE", "POD", "NODE", "REASON", "BY"):
            acts.add_column(col)
        for a in result.actions:
            acts.add_row(str(a["cycle"]), a["type"], a["pod"], a["node"] or "-", a["reason"], a["by"] or "-")
        out.print(acts)
    evictions = [a for a in result.actions if a["type"] == "evict"]
    for a in evictions:
        out.print(f"[red]evict[/red] {a['pod']} from {a['node']} ({a['reason']}, for {a['by']}): "
                  f"{a.get('message', '')}")
    if result.pending:
        out.print("[bold]Pending[/bold]")
        for job in result.pending:
            out.print(f"  [yellow]{job['namespace']}/{job['podGroup']}[/yellow] (queue {job['queue']})")
            for r in job["reasons"]:
                out.print(f"    - {r['reason']}: {r['message']}")
    for prob in result.problems:
        out.print(f"[red]problem[/red] {prob['kind']} {prob['name']}: {prob['message']}")
    binds = sum(1 for a in result.actions if a["type"] == "bind")
    out.print(f"{binds} bound, {len(evictions)} evicted, {len(result.pending)} pod groups pending")
