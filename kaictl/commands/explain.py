"""``kaictl explain``: why a pod, PodGroup or job is pending or was evicted, in one screen, and what
would change the answer, computed by the engine on the live snapshot (or a snapshot file)."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.text import Text

from kaictl.commands.engine_input import (
    ConfigFile,
    Context,
    Kubeconfig,
    Namespace,
    Output,
    Snapshot,
    client,
    current_namespace,
    read_config,
    read_objects,
)
from kaictl.completion import complete_pod
from kaictl.output import check_format, console, emit_data, fail
from kaid.actions.order import over_utilized
from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import Action, SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.grouping import top_owner
from kaid.model.objects import Job, Reason
from kaid.model.objects import Snapshot as Snap
from kaid.model.partition import Partition, last_scheduling_condition, podgroup_key, pool_of, tried_in_its_pool
from kaid.model.vocabulary import GPU, EventReason, PodStatus, ReasonCode

app = typer.Typer(help="Why is it pending, or why was it evicted? One screen, with what would change it.",
                  no_args_is_help=True)
Obj = dict[str, Any]


def _placed(d: Decisions, job_key: str) -> tuple[int, int]:
    binds = sum(1 for b in d.binds if b.job == job_key)
    pipes = sum(1 for b in d.pipelined if b.job == job_key)
    return binds, pipes


def _rerun(objs: list[Obj], cfg: SchedulerConfig, now: float, job_key: str) -> tuple[bool, Decisions]:
    snap = build_snapshot(objs, cfg, now)
    d = run_cycle(snap, cfg, focus=job_key)
    b, p = _placed(d, job_key)
    return (b + p) > 0 and job_key not in d.pending, d


def what_if(objs: list[Obj], cfg: SchedulerConfig, now: float, snap: Snap, job: Job, d: Decisions) -> list[str]:
    """Changes that would let the job start, each checked by running the engine again."""
    never = _never_fits(snap, job)
    if never is not None:
        return [never]
    reasons = d.pending.get(job.key, [])
    out = [_limit_change(objs, cfg, now, job, r) for r in reasons
           if r.code in (ReasonCode.QUEUE_LIMIT, ReasonCode.NON_PREEMPTIBLE_OVER_QUOTA)]
    if any(r.code == ReasonCode.FRAGMENTATION for r in reasons) and \
            (Action.CONSOLIDATE not in cfg.actions or cfg.maxConsolidationMoves == 0):
        on = SchedulerConfig.model_validate({**cfg.model_dump(), "actions": (*cfg.actions, Action.CONSOLIDATE),
                                             "maxConsolidationMoves": max(8, cfg.maxConsolidationMoves)})
        ok, d2 = _rerun(objs, on, now, job.key)
        moved = sum(1 for e in d2.evictions if e.action == Action.CONSOLIDATE and e.by == job.key)
        if ok:
            out.append(f"fits after moving {moved} preemptible pods (consolidation is off)")
    protected = next((r for r in reasons if r.details.get("protectedPods")), None)
    if protected is not None:
        out.extend(_after_min_runtime(objs, cfg, now, snap, job, protected))
    return out


def _never_fits(snap: Snap, job: Job) -> str | None:
    """Why the job can never fit this cluster, if it cannot: a pod larger than any node, a gang larger than all."""
    ready = [n for n in snap.nodes if n.ready and not n.unschedulable]
    for p in job.pods:
        if p.gpu_whole and p.gpu_whole > max((n.gpus for n in ready), default=0):
            return (f"can never fit: pod {p.name} needs {p.gpu_whole} GPUs on one node, the largest node has "
                    f"{max((n.gpus for n in ready), default=0)}")
        if p.cpu > max((n.alloc_cpu for n in ready), default=0):
            return (f"can never fit: pod {p.name} needs {p.cpu / 1000:g} cpu on one node, the largest node has "
                    f"{max((n.alloc_cpu for n in ready), default=0) / 1000:g}")
    total = sum(p.gpu_whole * 1000 for p in job.pods[: max(1, job.min_member)])
    if total > snap.capacity()[GPU]:
        return (f"can never fit: the gang needs {total / 1000:g} GPUs at once, the cluster has "
                f"{snap.capacity()[GPU] / 1000:g}")
    return None


def _limit_change(objs: list[Obj], cfg: SchedulerConfig, now: float, job: Job, r: Reason) -> str:
    """The queue limit (checked by running the engine again) or quota that would lift ``r``."""
    qname, res = r.details["queue"], r.details["resource"]
    if r.code == ReasonCode.NON_PREEMPTIBLE_OVER_QUOTA:
        new = float(r.details["allocatedNonPreemptible"]) + float(r.details["requested"])
        return (f"fits the non-preemptible rule if queue {qname}'s {res} quota were {new:g}, or if the job "
                "were preemptible")
    new = float(r.details["allocated"]) + float(r.details["requested"])
    changed = copy.deepcopy(objs)
    for o in changed:
        if o.get("kind") == "Queue" and o["metadata"]["name"] == qname:
            block = o.setdefault("spec", {}).setdefault("resources", {}).setdefault(res, {})
            block["limit"] = new
            block.setdefault("quota", 0)
    ok, _ = _rerun(changed, cfg, now, job.key)
    return (f"fits now if queue {qname}'s {res} limit were {new:g} (kaictl queue set {qname} "
            f"--{res}-limit {new:g})" if ok else
            f"raising queue {qname}'s {res} limit to {new:g} would lift the limit, but the job would "
            "still wait for resources")


def _after_min_runtime(objs: list[Obj], cfg: SchedulerConfig, now: float, snap: Snap, job: Job,
                       protected: Reason) -> list[str]:
    """What reclaim or preempt would take once the jobs that min runtime protects may go."""
    q = snap.queues.get(job.queue)
    waits = [x for qq in snap.queues.values() for x in (qq.reclaim_min_runtime, qq.preempt_min_runtime) if x]
    later = now + max(waits, default=0.0) + 1
    ok, d3 = _rerun(objs, cfg, later, job.key)
    if not ok:
        return []
    taken: dict[str, float] = {}
    before = build_snapshot(objs, cfg, now)
    for e in d3.evictions:
        if e.by == job.key:
            victim = before.jobs.get(e.job)
            if victim is not None:
                taken[victim.queue] = taken.get(victim.queue, 0.0) + sum(
                    p.gpu_whole for p in victim.pods if p.key == e.pod)
    where = ", ".join(f"{g:g} GPUs from queue {qn}" for qn, g in taken.items()) or "room"
    return [f"would {'reclaim' if 'Reclaim' in protected.code else 'preempt'} {where} when the "
            f"protected jobs pass their min runtime (in about {(later - now) / 60:.0f} min)"
            + (f"; queue {q.name} is below its fair share" if q else "")]


def _position(snap: Snap, job: Job, d: Decisions) -> str:
    q = snap.queues.get(job.queue)
    if q is None:
        return f"queue {job.queue} does not exist"
    waiting = [j for j in q.jobs if j.key in d.pending]
    idx = next((i for i, j in enumerate(waiting) if j.key == job.key), None)
    state = "at or above" if over_utilized(q) else "below"
    pos = f"{idx + 1} of {len(waiting)} waiting" if idx is not None else "not waiting"
    return (f"queue {q.name}: {pos} (by priority, then age); the queue is {state} its fair share "
            f"({q.allocated[GPU] / 1000:g} of {q.fair[GPU] / 1000:g} GPUs)")


def explain_job(objs: list[Obj], cfg: SchedulerConfig, now: float, job_key: str, pod_name: str | None,
                snap: Snap | None = None) -> Obj:
    snap = snap if snap is not None else build_snapshot(objs, cfg, now)
    job = snap.jobs.get(job_key)
    if job is None:
        fail(f"pod group {job_key} not found")
    d = run_cycle(snap, cfg, focus=job.key)
    binds, pipes = _placed(d, job.key)
    kaid_status = last_scheduling_condition(job.raw) if job.explicit else {}
    waiting = any(p.status in (PodStatus.PENDING, PodStatus.PIPELINED) for p in job.pods) or bool(pipes)
    # why allocate cannot place it now, then what reclaim, preempt or consolidation would do about it
    reasons = list(job.errors) + d.allocate_reasons.get(job.key, []) if waiting and not binds else []
    for r in d.pending.get(job.key, []):
        if all(r.message != x.message for x in reasons):
            reasons.append(r)
    state = "Pending" if reasons or pipes else ("Running" if not binds else "Would be placed now")
    return {
        "pod": pod_name, "podGroup": job.key, "queue": job.queue, "priority": job.priority,
        "preemptible": job.preemptible, "minMember": job.min_member, "pods": len(job.pods),
        "running": sum(1 for p in job.pods if p.active), "state": state,
        "position": _position(snap, job, d),
        "reasons": [r.to_dict() for r in reasons],
        "wouldNow": {"bind": binds, "pipeline": pipes,
                     "evict": [{"pod": e.pod, "action": e.action, "message": e.message} for e in d.evictions
                               if e.by == job.key]},
        "kaidStatus": kaid_status or None,
        "whatIf": (_evictions_would(d, job) + what_if(objs, cfg, now, snap, job, d)) if reasons or pipes else [],
    }


def left_alone(objs: list[Obj], cfg: SchedulerConfig, job_key: str) -> str | None:
    """Why this scheduler does not schedule the PodGroup ``job_key`` (another shard's, or tried once in its node pool
    and found unschedulable there: ``Partition.takes_podgroup``), or None (no such PodGroup, or it is taken)."""
    pg = next((o for o in objs if o.get("kind") == "PodGroup" and podgroup_key(o) == job_key), None)
    if pg is None:
        return None
    part = Partition(cfg)
    pool = pool_of(pg, cfg.nodePoolLabelKey)
    if not part.takes(pg):
        return (f"pod group {job_key} is in node pool {pool!r}, another scheduling shard's: this scheduler takes the "
                f"objects whose {cfg.nodePoolLabelKey} label is {cfg.partitionLabelValue!r}"
                f"{'' if cfg.partitionLabelValue else ' (none)'}; ask that pool's scheduler, or relabel it")
    if tried_in_its_pool(pg, cfg.nodePoolLabelKey):
        backoff = meta.mapping(pg.get("spec")).get("schedulingBackoff")
        return (f"pod group {job_key} sets spec.schedulingBackoff: {backoff}, so it is tried once per node pool, and "
                f"its last scheduling condition says it found no place in node pool {pool!r}: kai leaves it alone "
                "until its node-pool label moves it to another pool or that condition is cleared (remove "
                "schedulingBackoff to have it tried every cycle)")
    return None


def _evictions_would(d: Decisions, job: Job) -> list[str]:
    """What reclaim, preempt or consolidation would do for this job now."""
    evicted = [e for e in d.evictions if e.by == job.key]
    pipes = [b for b in d.pipelined if b.job == job.key]
    if not pipes:
        return []
    actions = sorted({b.action for b in pipes})
    return [f"starts after {' and '.join(actions)} evicts {len(evicted)} pods it is waiting for (if no job ahead of "
            "it in the queue order takes them first)"]


def _render(data: Obj) -> None:
    out = console()
    t = Text()
    t.append(f"{data['podGroup']}", style="bold")
    if data.get("pod"):
        t.append(f" (pod {data['pod']})")
    t.append(f"  {data['state']}\n", style="yellow" if data["state"] == "Pending" else "green")
    t.append(f"gang: {data['running']} of minMember {data['minMember']} running, {data['pods']} pods; priority "
             f"{data['priority']}, {'preemptible' if data['preemptible'] else 'non-preemptible'}\n")
    t.append(data["position"] + "\n")
    if data["reasons"]:
        t.append("\nWhy it waits:\n", style="bold")
        for r in data["reasons"]:
            t.append(f"  • {r['reason']}: ", style="yellow")
            t.append(r["message"] + "\n")
    now = data["wouldNow"]
    if now["bind"] or now["pipeline"] or now["evict"]:
        t.append("\nA cycle now would: ", style="bold")
        t.append(f"bind {now['bind']}, pipeline {now['pipeline']}, evict {len(now['evict'])} pods\n")
        for e in now["evict"][:5]:
            t.append(f"  - evict {e['pod']} ({e['action']})\n")
    if data["whatIf"]:
        t.append("\nWhat would change it:\n", style="bold")
        for w in data["whatIf"]:
            t.append(f"  → {w}\n", style="cyan")
    ks = data.get("kaidStatus")
    if ks:
        t.append(f"\nkaid's last status ({ks.get('lastTransitionTime', '?')}): {ks.get('type')}: "
                 f"{ks.get('message', '')}\n", style="dim")
    out.print(Panel(t, title="kaictl explain", title_align="left", expand=False, width=min(out.width, 110)))


def _podgroup_named(objs: list[Obj], ns: str, name: str) -> str | None:
    """The PodGroup the pod object ``ns/name`` names (its annotation), if it is found and names one."""
    obj = next((o for o in objs if o.get("kind") == "Pod" and meta.namespace(o) == ns and meta.name(o) == name), None)
    group = meta.annotation(obj, c.POD_GROUP_ANNOTATION) if obj is not None else None
    return str(group) if group else None


def _say_left_alone(job_key: str, pod_name: str | None, why: str, output: str) -> None:
    """The answer for a PodGroup this scheduler leaves alone (``left_alone``)."""
    if output in ("json", "yaml"):
        emit_data({"pod": pod_name, "podGroup": job_key, "state": "NotScheduledHere", "reasons": [why]}, output)
        return
    t = Text()
    t.append(job_key, style="bold")
    if pod_name:
        t.append(f" (pod {pod_name})")
    t.append("  Not scheduled by this scheduler\n", style="yellow")
    t.append(why)
    out = console()
    out.print(Panel(t, title="kaictl explain", title_align="left", expand=False, width=min(out.width, 110)))


def _evicted_pod(kubeconfig: Path | None, context: str | None, ns: str, name: str) -> Obj | None:
    """What kaid recorded when it evicted a pod that is gone now: its Evicted event."""
    from kaid.kube.client import ApiError

    try:
        events = client(kubeconfig, context).get(f"/api/v1/namespaces/{ns}/events",
                                                 fieldSelector=f"involvedObject.name={name}").get("items") or []
    except ApiError:
        return None
    ev = [e for e in events if e.get("reason") == EventReason.EVICTED]
    if not ev:
        return None
    last = max(ev, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    msg = str(last.get("message", ""))
    action, _, rest = msg.partition(" for ")
    return {"pod": f"{ns}/{name}", "state": PodStatus.EVICTED, "action": action, "by": rest.split(":", 1)[0],
            "when": last.get("lastTimestamp") or last.get("eventTime"), "message": msg}


def _common(kind: str, name: str, namespace: str | None, output: str, snapshot: Path | None,
            kubeconfig: Path | None, context: str | None, config: Path | None) -> None:
    check_format(output)
    cfg = read_config(config)
    ns = namespace or (current_namespace(kubeconfig, context) if snapshot is None else "default")
    objs = read_objects(snapshot, None, kubeconfig, context, live=True)
    now = time.time()
    snap = build_snapshot(objs, cfg, now)
    job_key: str | None = None
    pod_name: str | None = None
    if kind == "pod":
        pod = next((p for p in snap.pods if p.namespace == ns and p.name == name), None)
        group = _podgroup_named(objs, ns, name) if pod is None else None
        why = left_alone(objs, cfg, f"{ns}/{group}") if group else None
        if why is not None:
            _say_left_alone(f"{ns}/{group}", name, why, output)
            return
        if pod is None:
            evicted = _evicted_pod(kubeconfig, context, ns, name) if snapshot is None else None
            if evicted is not None:
                if output in ("json", "yaml"):
                    emit_data(evicted, output)
                else:
                    console().print(Panel(f"[bold]{evicted['pod']}[/bold]  [red]Evicted[/red] at {evicted['when']}\n"
                                          f"action: {evicted['action']}, caused by {evicted['by']}\n"
                                          f"{evicted['message']}", title="kaictl explain", title_align="left"))
                return
            fail(f"pod {ns}/{name} not found among the pods of scheduler {cfg.schedulerName} (try -n NAMESPACE)")
        if pod.job is None:
            fail(f"pod {ns}/{name} belongs to no pod group")
        job_key, pod_name = pod.job.key, pod.name
    elif kind == "podgroup":
        job_key = f"{ns}/{name}"
        why = left_alone(objs, cfg, job_key)
        if why is not None:
            _say_left_alone(job_key, None, why, output)
            return
    else:
        owners = {(ns, str(o.get("kind")), meta.name(o)): o for o in objs if meta.namespace(o) == ns}
        for p in snap.pods:
            if p.namespace != ns or p.raw is None or p.job is None:
                continue
            _, owner_name, _ = top_owner(p.raw, owners)
            if owner_name == name:
                job_key = p.job.key
                break
        if job_key is None:
            fail(f"no pods of a workload named {name} in namespace {ns}")
    data = explain_job(objs, cfg, now, job_key, pod_name, snap)
    if output in ("json", "yaml"):
        emit_data(data, output)
    else:
        _render(data)


NameArg = Annotated[str, typer.Argument(help="Name.")]


PodArg = Annotated[str, typer.Argument(help="Pod name.", autocompletion=complete_pod)]


@app.command("pod")
def pod(name: PodArg, namespace: Namespace = None, output: Output = "table", snapshot: Snapshot = None,
        kubeconfig: Kubeconfig = None, context: Context = None, config: ConfigFile = None) -> None:
    """Why this pod is pending (or was evicted)."""
    _common("pod", name, namespace, output, snapshot, kubeconfig, context, config)


@app.command("podgroup")
def podgroup(name: NameArg, namespace: Namespace = None, output: Output = "table", snapshot: Snapshot = None,
             kubeconfig: Kubeconfig = None, context: Context = None, config: ConfigFile = None) -> None:
    """Why this PodGroup is pending."""
    _common("podgroup", name, namespace, output, snapshot, kubeconfig, context, config)


@app.command("job")
def job(name: NameArg, namespace: Namespace = None, output: Output = "table", snapshot: Snapshot = None,
        kubeconfig: Kubeconfig = None, context: Context = None, config: ConfigFile = None) -> None:
    """Why this workload (a Job, Deployment, PyTorchJob, ... by name) is pending."""
    _common("job", name, namespace, output, snapshot, kubeconfig, context, config)
