"""Applying Decisions to plain Kubernetes objects in memory (for dry-runs and the simulated cluster):
binds become running pods on their node, evictions remove pods."""

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


def bind_pod(obj: Obj, bind: Bind, now: float) -> None:
    """What kaid's binder writes: the node, the GPU group label and the device annotation; here the
    pod also starts running at once, as a kubelet would make it."""
    meta = obj.setdefault("metadata", {})
    spec = obj.setdefault("spec", {})
    status = obj.setdefault("status", {})
    spec["nodeName"] = bind.node
    status["phase"] = "Running"
    status["startTime"] = iso(now)
    if bind.devices:
        meta.setdefault("annotations", {})[c.GPU_DEVICES_ANNOTATION] = ",".join(str(d) for d in bind.devices)
    if bind.gpu_group:
        meta.setdefault("labels", {})[c.GPU_GROUP_LABEL] = bind.gpu_group


def apply(objects: list[Obj], decisions: Decisions, now: float) -> list[str]:
    """Apply binds and evictions in place; return the keys of the evicted pods."""
    pods = {pod_key(o): o for o in objects if o.get("kind") == "Pod"}
    for b in decisions.binds:
        obj = pods.get(b.pod)
        if obj is not None:
            bind_pod(obj, b, now)
    evicted = [e.pod for e in decisions.evictions]
    if evicted:
        gone = set(evicted)
        objects[:] = [o for o in objects if not (o.get("kind") == "Pod" and pod_key(o) in gone)]
    return evicted
