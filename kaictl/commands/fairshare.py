"""``kaictl fairshare``: the queue tree with deserved, fair share, allocated and requested."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table
from rich.tree import Tree

from kaictl.commands.engine_input import ConfigFile, Context, Kubeconfig, Snapshot, read_config, read_objects
from kaictl.output import check_format, console, emit_data, fmt_resource
from kaid.fairshare import QueueRow, compute_fair_share, queue_rows
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
    """Draw the queue tree with deserved, fair share, allocated and requested per resource.

    Reads the live cluster through the kubeconfig, or --snapshot FILE offline."""
    check_format(output, ("tree", "table", "wide", "json", "yaml"))
    cfg = read_config(config)
    snap = build_snapshot(read_objects(snapshot, None, kubeconfig, context, live=True), cfg, time.time())
    compute_fair_share(snap, use_usage=cfg.usage.enabled, k_value=cfg.kValue)
    rows = queue_rows(snap)
    if output in ("json", "yaml"):
        emit_data({"queues": [r.to_dict() for r in rows]}, output)
        return
    out = console()
    resources = RESOURCES if output == "wide" else ("gpu",)
    if output == "tree":
        by_parent: dict[str | None, list[QueueRow]] = {}
        for r in rows:
            by_parent.setdefault(r.parent, []).append(r)
        tree = Tree("[bold]queues[/bold] (gpu: deserved / fair share / allocated / requested / limit)")

        def add(node: Tree, parent: str | None) -> None:
            for r in by_parent.get(parent, []):
                word, style = _state(r)
                g = {k: fmt_resource(getattr(r, k)["gpu"], "gpu") for k in _COLUMNS}
                label = (f"[bold]{r.name}[/bold]  {g['deserved']} / {g['fair_share']} / [{style}]{g['allocated']}[/] "
                         f"/ {g['requested']} / {g['limit']}  [{style}]{word} share[/]")
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
    table.add_column("STATE")
    for r in rows:
        word, style = _state(r)
        cells = ["  " * _depth(r, rows) + r.name]
        for res in resources:
            cells += [fmt_resource(getattr(r, k)[res], res) for k in _COLUMNS]
        table.add_row(*cells, f"[{style}]{word}[/]")
    out.print(table)


def _depth(row: QueueRow, rows: list[QueueRow]) -> int:
    parents = {r.name: r.parent for r in rows}
    d, p = 0, row.parent
    while p is not None and d < 64:
        d, p = d + 1, parents.get(p)
    return d
