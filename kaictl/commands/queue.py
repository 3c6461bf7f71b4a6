"""``kaictl queue``: create, list, describe, set and delete queues. Every write is validated first and
writes explicit values for every field (an unset limit means "nothing beyond the quota")."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
import yaml
from pydantic import ValidationError
from rich.table import Table
from rich.tree import Tree

from kaictl.commands.engine_input import (
    ConfigFile,
    Context,
    Kubeconfig,
    Output,
    Snapshot,
    client,
    read_config,
    read_objects,
)
from kaictl.completion import complete_queue
from kaictl.output import check_format, console, emit_data, err_console, fail, fmt_resource
from kaid.api import constants as c
from kaid.api.crds import QueueSpec, validation_message
from kaid.cycle import run_cycle
from kaid.fairshare import QueueRow, queue_rows
from kaid.model.build import build_snapshot
from kaid.model.queues import SPEC_SCALE
from kaid.model.vocabulary import RESOURCES, Resource

app = typer.Typer(help="Create, list, describe, change and delete queues.", no_args_is_help=True)
QUEUES = f"/apis/{c.SCHEDULING_GROUP}/{c.QUEUE_VERSION}/queues"
Obj = dict[str, Any]

def _resources(values: dict[str, float | None], defaults: bool) -> Obj:
    out: Obj = {}
    for r in RESOURCES:
        block: Obj = {}
        for field, default in (("quota", 0.0), ("limit", -1.0), ("overQuotaWeight", 1.0)):
            v = values.get(f"{r}_{field}")
            if v is None and defaults:
                v = default
            if v is not None:
                block[field] = v
        if block:
            out[r] = block
    return out


def _flags(*values: float | None) -> dict[str, float | None]:
    """The nine --RESOURCE-quota/limit/weight options, in gpu, cpu, memory order, keyed for _resources."""
    keys = [f"{r}_{f}" for r in RESOURCES for f in ("quota", "limit", "overQuotaWeight")]
    return dict(zip(keys, values, strict=True))


def _check_spec(name: str, spec: Obj) -> None:
    """The queue's spec against the Queue schema; an error ends the command."""
    try:
        QueueSpec.model_validate(spec)
    except ValidationError as err:
        fail(f"queue {name} is invalid: {validation_message(err)}")


def validate(name: str, spec: Obj, existing: dict[str, Obj]) -> list[str]:
    """Errors (raise) and warnings (returned) for a queue about to be written."""
    _check_spec(name, spec)
    parent = spec.get("parentQueue")
    if parent:
        if parent == name:
            fail(f"queue {name} cannot be its own parent")
        if parent not in existing:
            fail(f"parent queue {parent!r} does not exist (existing: {', '.join(sorted(existing)) or 'none'}); "
                 f"create it first: kaictl queue create {parent}")
        seen, cur = {name}, parent
        while cur:
            if cur in seen:
                path = " -> ".join([name, *_chain(parent, existing)])
                fail(f"queue {name} with parent {parent} would make a cycle: {path}")
            seen.add(cur)
            cur = ((existing.get(cur) or {}).get("spec") or {}).get("parentQueue")
    warnings = []
    if parent:
        siblings = {n: q for n, q in existing.items() if ((q.get("spec") or {}).get("parentQueue") == parent
                                                           and n != name)}
        siblings[name] = {"spec": spec}
        pspec = (existing[parent].get("spec") or {}).get("resources") or {}
        for r in RESOURCES:
            pquota = (pspec.get(r) or {}).get("quota", 0)
            total = sum(((q.get("spec") or {}).get("resources") or {}).get(r, {}).get("quota", 0) or 0
                        for q in siblings.values())
            if pquota is not None and pquota >= 0 and total > pquota:
                warnings.append(f"the {r} quotas of {parent}'s children add up to {total:g}, above {parent}'s own "
                                f"quota of {pquota:g}: the children cannot all get their quota at once")
    return warnings


def _chain(start: str, existing: dict[str, Obj]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    cur: str | None = start
    while cur and cur not in seen:
        out.append(cur)
        seen.add(cur)
        cur = ((existing.get(cur) or {}).get("spec") or {}).get("parentQueue")
    if cur:
        out.append(cur)
    return out


def _existing(cl: Any) -> dict[str, Obj]:
    from kaid.kube.client import ApiError

    try:
        data = cl.get(QUEUES)
    except ApiError as err:
        if err.status == 404:
            fail("the cluster has no Queue resource: install kai's CRDs (kubectl apply -k manifests/)")
        fail(f"cannot list queues: {err.message}")
    return {q["metadata"]["name"]: q for q in data.get("items") or []}


@app.command("create")
def create(
    name: Annotated[str | None, typer.Argument(help="Queue name.")] = None,
    filename: Annotated[Path | None, typer.Option("-f", "--filename", help="Create the Queues in this file.")] = None,
    parent: Annotated[str | None, typer.Option("--parent", help="Parent queue.")] = None,
    priority: Annotated[int, typer.Option("--priority", help="Siblings with higher priority get over-quota "
                                          "resources first.")] = 100,
    display_name: Annotated[str | None, typer.Option("--display-name")] = None,
    gpu_quota: Annotated[float | None, typer.Option("--gpu-quota", help="GPUs deserved (-1: unlimited).")] = None,
    gpu_limit: Annotated[float | None, typer.Option("--gpu-limit", help="GPU cap (-1: none).")] = None,
    gpu_weight: Annotated[float | None, typer.Option("--gpu-weight", help="Over-quota weight.")] = None,
    cpu_quota: Annotated[float | None, typer.Option("--cpu-quota", help="Millicores deserved.")] = None,
    cpu_limit: Annotated[float | None, typer.Option("--cpu-limit", help="Millicores cap (-1: none).")] = None,
    cpu_weight: Annotated[float | None, typer.Option("--cpu-weight")] = None,
    memory_quota: Annotated[float | None, typer.Option("--memory-quota", help="Megabytes deserved.")] = None,
    memory_limit: Annotated[float | None, typer.Option("--memory-limit", help="Megabytes cap (-1: none).")] = None,
    memory_weight: Annotated[float | None, typer.Option("--memory-weight")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and print; write nothing.")] = False,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Create a queue (or the queues of a file), writing explicit values for every field.

    Unset quotas are 0, unset limits -1 (no limit) and weights 1."""
    from kaid.kube.client import ApiError

    objs: list[Obj] = []
    if filename is not None:
        objs = _queues_in_file(filename)
    elif name:
        values = _flags(gpu_quota, gpu_limit, gpu_weight, cpu_quota, cpu_limit, cpu_weight, memory_quota,
                        memory_limit, memory_weight)
        spec = {"priority": priority, "resources": _resources(values, defaults=True)}
        if parent:
            spec["parentQueue"] = parent
        if display_name:
            spec["displayName"] = display_name
        objs = [{"apiVersion": f"{c.SCHEDULING_GROUP}/{c.QUEUE_VERSION}", "kind": "Queue",
                 "metadata": {"name": name}, "spec": spec}]
    else:
        fail("name a queue (kaictl queue create NAME --gpu-quota 8) or pass -f FILE")
    for o in objs:  # what the queues say is checked before the cluster is asked what exists
        _check_spec(str(o["metadata"]["name"]), o["spec"])
    cl = client(kubeconfig, context, offline=False)
    _check_new(objs, _existing(cl))
    if dry_run:
        emit_data(objs if len(objs) > 1 else objs[0], "yaml")
        return
    for o in objs:
        try:
            cl.create(QUEUES, o)
        except ApiError as err:
            fail(f"queue {o['metadata']['name']} not created: {err.message}")
        console().print(f"queue/{o['metadata']['name']} created")


def _queues_in_file(filename: Path) -> list[Obj]:
    """The Queues of a file, with explicit values for every field (quota 0, limit -1, weight 1 where unset)."""
    try:
        docs = [d for d in yaml.safe_load_all(filename.read_text()) if d]
    except (OSError, yaml.YAMLError) as err:
        fail(f"cannot read {filename}: {err}")
    objs = [d for d in docs if d.get("kind") == "Queue"]
    if not objs:
        fail(f"{filename} has no Queue objects")
    for o in objs:
        spec = o.setdefault("spec", {})
        spec.setdefault("priority", 100)
        given = spec.get("resources") or {}
        spec["resources"] = {r: {"quota": (given.get(r) or {}).get("quota", 0),
                                 "limit": (given.get(r) or {}).get("limit", -1),
                                 "overQuotaWeight": (given.get(r) or {}).get("overQuotaWeight", 1)}
                             for r in RESOURCES}
    return objs


def _check_new(objs: list[Obj], existing: dict[str, Obj]) -> None:
    """New queues only, each valid (warnings printed); in order, so that a file may create a parent before its
    children."""
    pending = dict(existing)
    for o in objs:
        qname = str(o["metadata"]["name"])
        if qname in existing:
            fail(f"queue {qname} already exists: change it with kaictl queue set {qname} ...")
        for w in validate(qname, o["spec"], pending):
            err_console().print(f"[yellow]warning:[/yellow] {w}")
        pending[qname] = o


@app.command("set")
def set_(
    name: Annotated[str, typer.Argument(help="Queue name.", autocompletion=complete_queue)],
    parent: Annotated[str | None, typer.Option("--parent")] = None,
    priority: Annotated[int | None, typer.Option("--priority")] = None,
    gpu_quota: Annotated[float | None, typer.Option("--gpu-quota")] = None,
    gpu_limit: Annotated[float | None, typer.Option("--gpu-limit")] = None,
    gpu_weight: Annotated[float | None, typer.Option("--gpu-weight")] = None,
    cpu_quota: Annotated[float | None, typer.Option("--cpu-quota")] = None,
    cpu_limit: Annotated[float | None, typer.Option("--cpu-limit")] = None,
    cpu_weight: Annotated[float | None, typer.Option("--cpu-weight")] = None,
    memory_quota: Annotated[float | None, typer.Option("--memory-quota")] = None,
    memory_limit: Annotated[float | None, typer.Option("--memory-limit")] = None,
    memory_weight: Annotated[float | None, typer.Option("--memory-weight")] = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Change a queue's parent, priority, quotas, limits or weights (validated before writing)."""
    from kaid.kube.client import ApiError

    cl = client(kubeconfig, context, offline=False)
    existing = _existing(cl)
    if name not in existing:
        fail(f"queue {name} does not exist (existing: {', '.join(sorted(existing)) or 'none'})")
    spec = dict(existing[name].get("spec") or {})
    values = _flags(gpu_quota, gpu_limit, gpu_weight, cpu_quota, cpu_limit, cpu_weight, memory_quota,
                    memory_limit, memory_weight)
    changes = _resources(values, defaults=False)
    if not changes and parent is None and priority is None:
        fail("nothing to change: pass for example --gpu-limit 16")
    resources = {r: dict(v) for r, v in (spec.get("resources") or {}).items()}
    for r, block in changes.items():
        resources.setdefault(r, {}).update(block)
    spec["resources"] = resources
    if parent is not None:
        spec["parentQueue"] = parent or None
    if priority is not None:
        spec["priority"] = priority
    others = {k: v for k, v in existing.items() if k != name}
    for w in validate(name, spec, others):
        err_console().print(f"[yellow]warning:[/yellow] {w}")
    try:
        cl.merge_patch(f"{QUEUES}/{quote(name)}", {"spec": spec})
    except ApiError as err:
        fail(f"queue {name} not changed: {err.message}")
    console().print(f"queue/{name} changed")


@app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="Queue name.", autocompletion=complete_queue)],
    force: Annotated[bool, typer.Option("--force", help="Delete even if it has child queues or jobs.")] = False,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Delete a queue; refused while it has child queues or jobs, unless --force."""
    from kaid.kube.client import ApiError

    cl = client(kubeconfig, context, offline=False)
    existing = _existing(cl)
    if name not in existing:
        fail(f"queue {name} does not exist")
    children = [n for n, q in existing.items() if (q.get("spec") or {}).get("parentQueue") == name]
    try:
        groups = cl.get(f"/apis/{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}/podgroups").get("items") or []
    except ApiError:
        groups = []
    jobs = [f"{g['metadata'].get('namespace')}/{g['metadata']['name']}" for g in groups
            if (g.get("spec") or {}).get("queue") == name]
    if (children or jobs) and not force:
        what = []
        if children:
            what.append(f"child queues {', '.join(children)}")
        if jobs:
            what.append(f"{len(jobs)} jobs ({', '.join(jobs[:3])}{'...' if len(jobs) > 3 else ''})")
        fail(f"queue {name} still has {' and '.join(what)}: move or delete them first, or pass --force")
    try:
        cl.request("DELETE", f"{QUEUES}/{quote(name)}")
    except ApiError as err:
        fail(f"queue {name} not deleted: {err.message}")
    console().print(f"queue/{name} deleted")


def _rows(snapshot: Path | None, kubeconfig: Path | None, context: str | None,
          config: Path | None) -> tuple[list[QueueRow], Any, Any]:
    cfg = read_config(config)
    objs = read_objects(snapshot, None, kubeconfig, context, live=True)
    snap = build_snapshot(objs, cfg, time.time())
    decisions = run_cycle(snap, cfg)
    rows = queue_rows(snap) if not decisions.queues else decisions.queues
    return rows, snap, decisions


@app.command("list")
def list_(
    output: Output = "table",
    snapshot: Snapshot = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    config: ConfigFile = None,
) -> None:
    """The queue tree with quota, limit, weight, fair share, allocated and requested per resource."""
    check_format(output)
    rows, snap, _ = _rows(snapshot, kubeconfig, context, config)
    weights = {q.name: q.weight for q in snap.queues.values()}
    if output in ("json", "yaml"):
        emit_data({"queues": [{**r.to_dict(), "overQuotaWeight": dict(zip(RESOURCES, weights[r.name], strict=True))}
                              for r in rows]}, output)
        return
    resources = RESOURCES if output == "wide" else ("gpu",)
    table = Table(header_style="bold")
    table.add_column("QUEUE")
    table.add_column("PRIO", justify="right")
    for r in resources:
        for col in ("QUOTA", "LIMIT", "WEIGHT", "FAIR", "ALLOC", "REQ"):
            table.add_column(f"{r.upper()} {col}", justify="right")
    depth = {q.name: q.depth for q in snap.queues.values()}
    order = _tree_order(rows)
    for row in order:
        q = snap.queues[row.name]
        cells = ["  " * depth[row.name] + row.name + (" [red](invalid)[/red]" if q.errors else ""),
                 str(q.priority)]
        for r in resources:
            ri = RESOURCES.index(r)
            cells += [fmt_resource(_spec_quota(q, r), r), fmt_resource(row.limit[r], r), f"{weights[row.name][ri]:g}"]
            cells += [fmt_resource(amounts[r], r) for amounts in (row.fair_share, row.allocated, row.requested)]
        table.add_row(*cells)
    console().print(table)


def _spec_quota(q: Any, r: str) -> float:
    """The quota in user units (gpu devices, cpu millicores, memory megabytes; -1 unlimited)."""
    res = Resource(RESOURCES.index(r))
    v = int(q.quota[res])
    return -1.0 if v == -1 else v / SPEC_SCALE[res]


def _tree_order(rows: list[QueueRow]) -> list[QueueRow]:
    by_parent: dict[str | None, list[QueueRow]] = {}
    for r in rows:
        by_parent.setdefault(r.parent, []).append(r)
    out: list[QueueRow] = []

    def walk(parent: str | None) -> None:
        for r in sorted(by_parent.get(parent, []), key=lambda x: x.name):
            out.append(r)
            walk(r.name)

    walk(None)
    names = {r.name for r in out}
    out += [r for r in rows if r.name not in names]
    return out


@app.command("describe")
def describe(
    name: Annotated[str, typer.Argument(help="Queue name.", autocompletion=complete_queue)],
    output: Output = "table",
    snapshot: Snapshot = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    config: ConfigFile = None,
) -> None:
    """A queue's settings and shares, and its jobs, running and pending, with the pending ones' reasons."""
    check_format(output)
    rows, snap, decisions = _rows(snapshot, kubeconfig, context, config)
    row = next((r for r in rows if r.name == name), None)
    q = snap.queues.get(name)
    if row is None or q is None:
        fail(f"queue {name} does not exist (existing: {', '.join(sorted(snap.queues)) or 'none'})")
    jobs = []
    for job in q.jobs if not q.children else []:
        running = sum(1 for p in job.pods if p.active)
        pending = decisions.pending.get(job.key, [])
        jobs.append({"podGroup": job.key, "priority": job.priority, "pods": len(job.pods), "running": running,
                     "state": "Pending" if pending else "Running",
                     "reasons": [{"reason": str(r.code), "message": r.message} for r in pending]})
    data = {**row.to_dict(), "children": [ch.name for ch in q.children], "errors": [e.message for e in q.errors],
            "jobs": jobs}
    if output in ("json", "yaml"):
        emit_data(data, output)
        return
    out = console()
    out.print(f"[bold]Queue {name}[/bold]" + (f" (parent {row.parent})" if row.parent else "")
              + f", priority {q.priority}")
    for e in q.errors:
        out.print(f"[red]invalid:[/red] {e.message}")
    t = Table(header_style="bold")
    t.add_column("")
    for r in RESOURCES:
        t.add_column(r.upper(), justify="right")
    for label, amounts in (("deserved", row.deserved), ("fair share", row.fair_share), ("allocated", row.allocated),
                           ("requested", row.requested), ("limit", row.limit)):
        t.add_row(label, *[fmt_resource(amounts[r], r) for r in RESOURCES])
    out.print(t)
    if q.children:
        tree = Tree("child queues")
        for ch in q.children:
            tree.add(ch.name)
        out.print(tree)
    if jobs:
        jt = Table(title="Jobs", title_justify="left", header_style="bold")
        for col in ("POD GROUP", "PRIORITY", "PODS", "RUNNING", "STATE", "WHY PENDING"):
            jt.add_column(col)
        for j in jobs:
            why = "\n".join(f"{r['reason']}: {r['message']}" for r in j["reasons"])
            jt.add_row(j["podGroup"], str(j["priority"]), str(j["pods"]), str(j["running"]),
                       f"[yellow]{j['state']}[/]" if j["state"] == "Pending" else f"[green]{j['state']}[/]", why)
        out.print(jt)
    elif not q.children:
        out.print("no jobs")
