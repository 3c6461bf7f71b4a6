"""``kaictl fairshare``: the queue tree with deserved, fair share, allocated and requested, and each queue's
usage share as the leader last kept it in the Queue's ``status.usage`` (time-based fair share)."""

from __future__ import annotations

import datetime as dt
import time
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.tree import Tree

from kaictl.commands.engine_input import ConfigFile, Context, Kubeconfig, Snapshot, read_config, read_objects
from kaictl.output import check_format, console, emit_data, fmt_resource
from kaid.fairshare import QueueRow, compute_fair_share, queue_rows
from kaid.fairshare.usage import persisted
from kaid.model.build import build_snapshot
from kaid.model.vocabulary import RESOURCES

# the columns, in order: the row's amounts shown per resource
_COLUMNS = ("deserved", "fair_share", "allocated", "requested", "limit")


def _state(row: QueueRow) -> tuple[str, str]:
    alloc, fair = row.allocated["gpu"], row.fair_share["gpu"]
    if alloc > fair + 1e-9:
        return "over", "cyan"
    if alloc + 1e-9 < fair:
        return "under", "yellow"
    return "at", "green"


def fairshare_command(
    snapshot: Snapshot = None,
    output: Annotated[str, typer.Option("-o", "--output", help="tree, table, wide, json or yaml.")] = "tree",
    config: ConfigFile = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Draw the queue tree with deserved, fair share, allocated and requested per resource, and each queue's
    usage share (its use of the cluster over the usage window, as kaid last wrote it to the Queue's status).

    Reads the live cluster through the kubeconfig, or --snapshot FILE offline."""
    check_format(output, ("tree", "table", "wide", "json", "yaml"))
    cfg = read_config(config)
    objects = read_objects(snapshot, None, kubeconfig, context, live=True)
    snap = build_snapshot(objects, cfg, time.time())
    usage, computed_at = persisted(objects, cfg.usage)
    for q in snap.queues.values():  # the fair share weighs the usage kaid weighs (as of its last write)
        q.usage = list(usage.get(q.name, [0.0, 0.0, 0.0]))
    compute_fair_share(snap, use_usage=cfg.usage.enabled, k_value=cfg.kValue)
    rows = queue_rows(snap)
    if output in ("json", "yaml"):
        data: dict[str, Any] = {"queues": [_with_usage(r.to_dict(), usage) for r in rows]}
        if computed_at is not None:
            data["usageComputedAt"] = _iso(computed_at)
        emit_data(data, output)
        return
    out = console()
    resources = RESOURCES if output == "wide" else ("gpu",)
    if output == "tree":
        by_parent: dict[str | None, list[QueueRow]] = {}
        for r in rows:
            by_parent.setdefault(r.parent, []).append(r)
        title = "[bold]queues[/bold] (gpu: deserved / fair share / allocated / requested / limit)"
        if computed_at is not None:
            title += f"; gpu usage share over the window as of {_iso(computed_at)}"
        tree = Tree(title)

        def add(node: Tree, parent: str | None) -> None:
            for r in by_parent.get(parent, []):
                word, style = _state(r)
                g = {k: fmt_resource(getattr(r, k)["gpu"], "gpu") for k in _COLUMNS}
                label = (f"[bold]{r.name}[/bold]  {g['deserved']} / {g['fair_share']} / [{style}]{g['allocated']}[/] "
                         f"/ {g['requested']} / {g['limit']}  [{style}]{word} share[/]")
                if r.name in usage:
                    label += f"  usage {_pct(usage[r.name][0])}"
                if r.errors:
                    label += f"  [red]{r.errors[0]}[/red]"
                add(node.add(label), r.name)

        add(tree, None)
        for r in rows:  # queues whose parent is missing hang off the root with their error
            if r.parent is not None and r.parent not in {x.name for x in rows}:
                tree.add(f"[red]{r.name}[/red] (parent {r.parent} missing)")
        out.print(tree)
        return
    table = Table(header_style="bold")
    table.add_column("QUEUE")
    for res in resources:
        for col in ("DESERVED", "FAIR", "ALLOC", "REQ", "LIMIT"):
            table.add_column(f"{res.upper()} {col}", justify="right")
        if usage:
            table.add_column(f"{res.upper()} USAGE", justify="right")
    table.add_column("STATE")
    for r in rows:
        word, style = _state(r)
        cells = ["  " * _depth(r, rows) + r.name]
        for res in resources:
            cells += [fmt_resource(getattr(r, k)[res], res) for k in _COLUMNS]
            if usage:
                cells.append(_pct(usage[r.name][RESOURCES.index(res)]) if r.name in usage else "-")
        table.add_row(*cells, f"[{style}]{word}[/]")
    out.print(table)
    if computed_at is not None:
        out.print(f"usage: each queue's share of the cluster over the usage window, as of {_iso(computed_at)}")


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%"


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _with_usage(row: dict[str, Any], usage: dict[str, list[float]]) -> dict[str, Any]:
    """The row's JSON with its usage share per resource (0 to 1), where the Queue's status has one."""
    if row["name"] in usage:
        row["usage"] = {res: round(v, 6) for res, v in zip(RESOURCES, usage[row["name"]], strict=True)}
    return row


def _depth(row: QueueRow, rows: list[QueueRow]) -> int:
    parents = {r.name: r.parent for r in rows}
    d, p = 0, row.parent
    while p is not None and d < 64:
        d, p = d + 1, parents.get(p)
    return d
