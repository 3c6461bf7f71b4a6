"""Applying Decisions to plain Kubernetes objects in memory (for dry-runs and the simulated cluster),
the way the daemon's writes and the cluster would change them: binds become running pods on their node,
pipelined pods carry their reserved node, evicted pods go away (or, when consolidation moves them, wait
for their new node), and stale-gang marks are recorded on the PodGroup."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kaid.api import constants as c
from kaid.cycle import Bind, Decisions

Obj = dict[str, Any]


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def _devices(obj: Obj, bind: Bind) -> None:
    meta = obj.setdefault("metadata", {})
    anns = meta.setdefault("annotations", {})
    if bind.devices:
        anns[c.GPU_DEVICES_ANNOTATION] = ",".join(str(d) for d in bind.devices)
    else:
        anns.pop(c.GPU_DEVICES_ANNOTATION, None)
    if bind.gpu_group:
        meta.setdefault("labels", {})[c.GPU_GROUP_LABEL] = bind.gpu_group


def bind_pod(obj: Obj, bind: Bind, now: float) -> None:
    """What kaid's binder writes: the node, the GPU group label and the device annotation; here the
    pod also starts running at once, as a kubelet would make it."""
    spec = obj.setdefault("spec", {})
    status = obj.setdefault("status", {})
    spec["nodeName"] = bind.node
    status["phase"] = "Running"
    status["startTime"] = iso(now)
    anns = obj.setdefault("metadata", {}).setdefault("annotations", {})
    anns.pop(c.PIPELINED_NODE_ANNOTATION, None)
    anns.pop(c.PIPELINED_ACTION_ANNOTATION, None)
    _devices(obj, bind)


def pipeline_pod(obj: Obj, bind: Bind) -> None:
    """A pod reserved on a node whose resources evictions are freeing (moved pods restart there)."""
    spec = obj.setdefault("spec", {})
    status = obj.setdefault("status", {})
    spec.pop("nodeName", None)
    status["phase"] = "Pending"
    status.pop("startTime", None)
    anns = obj.setdefault("metadata", {}).setdefault("annotations", {})
    anns[c.PIPELINED_NODE_ANNOTATION] = bind.node
    anns[c.PIPELINED_ACTION_ANNOTATION] = bind.action
    _devices(obj, bind)


def reset_pod(obj: Obj) -> None:
    """An evicted pod made again by its controller: pending, on no node."""
    obj.setdefault("spec", {}).pop("nodeName", None)
    status = obj.setdefault("status", {})
    status["phase"] = "Pending"
    status.pop("startTime", None)
    anns = obj.setdefault("metadata", {}).setdefault("annotations", {})
    for key in (c.PIPELINED_NODE_ANNOTATION, c.PIPELINED_ACTION_ANNOTATION, c.GPU_DEVICES_ANNOTATION):
        anns.pop(key, None)
    (obj["metadata"].get("labels") or {}).pop(c.GPU_GROUP_LABEL, None)


def apply(objects: list[Obj], decisions: Decisions, now: float) -> list[str]:
    """Apply the decisions in place; return the keys of the pods that were evicted and are gone."""
    pods = {pod_key(o): o for o in objects if o.get("kind") == "Pod"}
    for b in decisions.binds:
        obj = pods.get(b.pod)
        if obj is not None:
            bind_pod(obj, b, now)
    for b in decisions.pipelined:
        obj = pods.get(b.pod)
        if obj is not None:
            pipeline_pod(obj, b)
    moved = {b.pod for b in decisions.pipelined}
    gone = {e.pod for e in decisions.evictions if e.pod not in moved}
    if gone:
        objects[:] = [o for o in objects if not (o.get("kind") == "Pod" and pod_key(o) in gone)]
    if decisions.stale:
        mark_stale(objects, decisions.stale, decisions.stale_pods)
    return sorted(gone)


def mark_stale(objects: list[Obj], marks: dict[str, float | None], members: dict[str, list[str]]) -> None:
    groups = {pod_key(o): o for o in objects if o.get("kind") == "PodGroup"}
    pods = {pod_key(o): o for o in objects if o.get("kind") == "Pod"}
    for job_key, since in marks.items():
        targets = [groups[job_key]] if job_key in groups else [
            pods[k] for k in members.get(job_key, []) if k in pods]
        for obj in targets:
            anns = obj.setdefault("metadata", {}).setdefault("annotations", {})
            if since is None:
                anns.pop(c.STALE_SINCE_ANNOTATION, None)
            else:
                anns[c.STALE_SINCE_ANNOTATION] = iso(since)

