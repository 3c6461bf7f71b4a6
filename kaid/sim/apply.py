"""Applying Decisions to plain Kubernetes objects in memory (for dry-runs and the simulated cluster),
the way the daemon's writes and the cluster would change them: binds become running pods on their node,
pipelined pods carry their reserved node, evicted pods go away (or, when consolidation moves them, wait
for their new node), and stale-gang marks are recorded on the PodGroup."""

from __future__ import annotations

from typing import Any

from kaid.api import constants as c
from kaid.api.meta import format_time, object_key
from kaid.cycle import Bind, Decisions
from kaid.model.pods import mark_bound, mark_pipelined
from kaid.model.vocabulary import PodPhase

Obj = dict[str, Any]


def bind_pod(obj: Obj, bind: Bind, now: float) -> None:
    """What kaid's binder writes (``mark_bound``); here the pod also starts running at once, as a kubelet
    would make it."""
    mark_bound(obj, bind.node, bind.devices, bind.groups)
    status = obj.setdefault("status", {})
    status["phase"] = PodPhase.RUNNING.value
    status["startTime"] = format_time(now)


def pipeline_pod(obj: Obj, bind: Bind) -> None:
    """A pod reserved on a node whose resources evictions are freeing (moved pods restart there)."""
    obj.setdefault("spec", {}).pop("nodeName", None)
    status = obj.setdefault("status", {})
    status["phase"] = PodPhase.PENDING.value
    status.pop("startTime", None)
    mark_pipelined(obj, bind.node, bind.action, bind.devices, bind.groups)


def reset_pod(obj: Obj) -> None:
    """An evicted pod made again by its controller: pending, on no node."""
    obj.setdefault("spec", {}).pop("nodeName", None)
    status = obj.setdefault("status", {})
    status["phase"] = PodPhase.PENDING.value
    status.pop("startTime", None)
    anns = obj.setdefault("metadata", {}).setdefault("annotations", {})
    for key in (c.PIPELINED_NODE_ANNOTATION, c.PIPELINED_ACTION_ANNOTATION, c.GPU_DEVICES_ANNOTATION):
        anns.pop(key, None)
    (obj["metadata"].get("labels") or {}).pop(c.GPU_GROUP_LABEL, None)


def apply(objects: list[Obj], decisions: Decisions, now: float) -> list[str]:
    """Apply the decisions in place; return the keys of the pods that were evicted and are gone."""
    pods = {object_key(o): o for o in objects if o.get("kind") == "Pod"}
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
        objects[:] = [o for o in objects if not (o.get("kind") == "Pod" and object_key(o) in gone)]
    if decisions.stale:
        mark_stale(objects, decisions.stale, decisions.stale_pods)
    return sorted(gone)


def mark_stale(objects: list[Obj], marks: dict[str, float | None], members: dict[str, list[str]]) -> None:
    groups = {object_key(o): o for o in objects if o.get("kind") == "PodGroup"}
    pods = {object_key(o): o for o in objects if o.get("kind") == "Pod"}
    for job_key, since in marks.items():
        targets = [groups[job_key]] if job_key in groups else [
            pods[k] for k in members.get(job_key, []) if k in pods]
        for obj in targets:
            anns = obj.setdefault("metadata", {}).setdefault("annotations", {})
            if since is None:
                anns.pop(c.STALE_SINCE_ANNOTATION, None)
            else:
                anns[c.STALE_SINCE_ANNOTATION] = format_time(since)

