"""``kaictl top``: nodes and GPUs in use (whole and shared), queues against their fair share, pending
jobs with their waits, recent evictions; ``--watch`` refreshes it in place."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kaictl.commands.engine_input import ConfigFile, Context, Kubeconfig, Output, Snapshot, read_config, read_objects
from kaictl.output import check_format, console, emit_data
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.vocabulary import EventReason

Obj = dict[str, Any]


def gather(objs: list[Obj], config: Path | None, now: float) -> Obj:
    cfg = read_config(config)
    snap = build_snapshot(objs, cfg, now)
    d = run_cycle(snap, cfg)
    nodes: list[Obj] = []
    for n in snap.nodes:
        shared = sum(1 for u in n.dev_used if 0 < u < 1000)
        nodes.append({"name": n.name, "ready": n.ready and not n.unschedulable, "gpus": n.gpus,
                      "gpusUsed": round(sum(min(1000, u) for u in n.dev_used) / 1000, 3),
                      "wholeUsed": sum(1 for u in n.dev_used if u >= 1000), "sharedDevices": shared,
                      "cpuUsed": n.used_cpu, "cpu": n.alloc_cpu})
    pending: list[Obj] = []
    for key in sorted(d.pending):
        job = snap.jobs[key]
        pending.append({"podGroup": key, "queue": job.queue, "waitSeconds": round(max(0.0, now - job.created), 1)
                        if job.created else None, "reason": str(d.pending[key][0].code),
                        "message": d.pending[key][0].message})
    pending.sort(key=lambda j: -(j["waitSeconds"] or 0))
    evictions = []
    for o in objs:
        if o.get("kind") == "Event" and o.get("reason") == EventReason.EVICTED:
            evictions.append({"pod": f"{(o.get('involvedObject') or {}).get('namespace')}/"
                                     f"{(o.get('involvedObject') or {}).get('name')}",
                              "when": o.get("lastTimestamp"), "message": o.get("message")})
    total = sum(int(n["gpus"]) for n in nodes)
    used = sum(float(n["gpusUsed"]) for n in nodes)
    return {"time": now, "gpus": total, "gpusUsed": round(used, 3), "nodes": nodes,
            "queues": [{"name": r.name, "parent": r.parent, "fairShare": r.fair_share["gpu"],
                        "allocated": r.allocated["gpu"], "requested": r.requested["gpu"]}
                       for r in d.queues],
            "pending": pending, "evictions": evictions[-10:]}


def render(data: Obj, wide: bool) -> Group:
    head = Text.assemble(("GPUs ", "bold"), f"{data['gpusUsed']:g}/{data['gpus']} in use "
                         f"({(data['gpusUsed'] / data['gpus'] if data['gpus'] else 0):.0%}), "
                         f"{len(data['nodes'])} nodes, {len(data['pending'])} pod groups pending")
    nodes = Table(title="Nodes", title_justify="left", header_style="bold")
    for col in ("NODE", "GPU USE", "WHOLE", "SHARED", "CPU"):
        nodes.add_column(col)
    shown = data["nodes"] if wide else sorted(data["nodes"], key=lambda n: -n["gpusUsed"])[:15]
    for n in shown:
        bar = "█" * int(n["gpusUsed"]) + ("▌" if n["gpusUsed"] % 1 >= 0.5 else "")
        nodes.add_row(n["name"] + ("" if n["ready"] else " [red](not ready)[/]"),
                      f"{bar:<8} {n['gpusUsed']:g}/{n['gpus']}", str(n["wholeUsed"]), str(n["sharedDevices"]),
                      f"{n['cpuUsed'] / 1000:g}/{n['cpu'] / 1000:g}")
    queues = Table(title="Queues (GPUs)", title_justify="left", header_style="bold")
    for col in ("QUEUE", "FAIR SHARE", "ALLOCATED", "REQUESTED", ""):
        queues.add_column(col)
    for q in data["queues"]:
        state = "[cyan]over[/]" if q["allocated"] > q["fairShare"] else (
            "[yellow]under[/]" if q["allocated"] < q["fairShare"] else "[green]at[/]")
        queues.add_row(q["name"], f"{q['fairShare']:g}", f"{q['allocated']:g}", f"{q['requested']:g}", state)
    pend = Table(title="Pending", title_justify="left", header_style="bold")
    for col in ("POD GROUP", "QUEUE", "WAITING", "WHY"):
        pend.add_column(col)
    for j in data["pending"][:15]:
        w = j["waitSeconds"]
        pend.add_row(j["podGroup"], j["queue"], "-" if w is None else f"{w / 60:.0f}m" if w >= 60 else f"{w:.0f}s",
                     f"{j['reason']}: {j['message'][:80]}")
    parts: list[Any] = [head, nodes, queues, pend]
    if data["evictions"]:
        ev = Table(title="Recent evictions", title_justify="left", header_style="bold")
        for col in ("POD", "WHEN", "WHY"):
            ev.add_column(col)
        for e in data["evictions"]:
            ev.add_row(e["pod"], str(e["when"]), str(e["message"])[:100])
        parts.append(ev)
    return Group(*parts)


def top_command(
    watch: Annotated[bool, typer.Option("-w", "--watch", help="Refresh in place until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.5, help="Seconds between refreshes.")] = 2.0,
    output: Output = "table",
    snapshot: Snapshot = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    config: ConfigFile = None,
) -> None:
    """Nodes and GPUs in use, queues against their fair share, pending jobs and recent evictions."""
    check_format(output)

    def fetch() -> Obj:
        objs = read_objects(snapshot, None, kubeconfig, context, live=True)
        if snapshot is None:
            objs += _events(kubeconfig, context)
        return gather(objs, config, time.time())

    if output in ("json", "yaml"):
        emit_data(fetch(), output)
        return
    out = console()
    if not watch:
        out.print(render(fetch(), output == "wide"))
        return
    try:
        with Live(render(fetch(), output == "wide"), console=out, refresh_per_second=4, screen=False) as live:
            while True:
                time.sleep(interval)
                live.update(render(fetch(), output == "wide"))
    except KeyboardInterrupt:
        return


def _events(kubeconfig: Path | None, context: str | None) -> list[Obj]:
    from kaictl.commands.engine_input import client
    from kaid.kube.client import ApiError

    try:
        items = client(kubeconfig, context).get("/api/v1/events", fieldSelector="reason=Evicted").get("items") or []
    except ApiError:
        return []
    for e in items:
        e.setdefault("kind", "Event")
    return list(items)
