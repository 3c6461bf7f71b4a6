"""What kai's admission webhook allows and changes, as functions of an AdmissionReview request (no server here).

- ``/mutate-pod``: a shared-GPU pod of kai's scheduler gets the device handoff's wiring (``handoff.mutate``).
- ``/validate-pod``: its GPU annotations must make sense (the rules the engine reads pods with: ``read_pod``).
- ``/validate-queue``: a Queue's numbers are valid, its limit not below its quota, its parent exists and it is
  in no parent cycle (the engine's own reading of the queue tree: ``read_queues``).
- ``/validate-podgroup``: a PodGroup's spec is valid and its minMember at least 1.

Every refusal says what to change. The webhook configurations send only kai's objects here (pods of kai's
scheduler that ask for a GPU share, kai's CRDs), so an outage never blocks pods of other schedulers.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.api.crds import PodGroupSpec, validation_message
from kaid.model.objects import ObjectProblem, Reason
from kaid.model.pods import read_pod
from kaid.model.queues import read_queues
from kaid.model.vocabulary import ReasonCode
from kaid.sharing.handoff import HandoffError, is_shared_gpu_pod, mutate

Obj = dict[str, Any]
QueueLister = Callable[[], list[Obj]]
# a queue's own problems (not those of its parent), which the webhook refuses
QUEUE_REFUSALS = (ReasonCode.INVALID_QUEUE, ReasonCode.MISSING_PARENT_QUEUE, ReasonCode.QUEUE_CYCLE,
                  ReasonCode.QUEUE_TOO_DEEP)
_PATCHED = (("metadata", "annotations"), ("spec", "containers"), ("spec", "initContainers"), ("spec", "volumes"),
            ("spec", "runtimeClassName"))


def _allowed(uid: str, patch: list[Obj] | None = None) -> Obj:
    out: Obj = {"uid": uid, "allowed": True}
    if patch:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return out


def _denied(uid: str, message: str) -> Obj:
    return {"uid": uid, "allowed": False, "status": {"code": 400, "reason": "BadRequest", "message": message}}


def json_patch(old: Obj, new: Obj) -> list[Obj]:
    """JSON Patch operations taking ``old`` to ``new`` over the fields the pod mutation may change."""
    ops: list[Obj] = []
    for parent, key in _PATCHED:
        before, after = (old.get(parent) or {}), (new.get(parent) or {})
        if after.get(key) != before.get(key) and key in after:
            ops.append({"op": "replace" if key in before else "add", "path": f"/{parent}/{key}", "value": after[key]})
    return ops


def _named(obj: Obj, request: Obj) -> Obj:
    """The object with the namespace and a name to show (one made by generateName has none yet)."""
    out = dict(obj)
    m = dict(meta.meta(obj))
    m.setdefault("namespace", request.get("namespace") or "default")
    if not m.get("name"):
        m["name"] = f"{m.get('generateName') or ''}*"
    out["metadata"] = m
    return out


def mutate_pod(request: Obj, cfg: SchedulerConfig, rng: random.Random | None = None) -> Obj:
    uid, pod = str(request.get("uid", "")), request.get("object") or {}
    try:
        changed = mutate(pod, cfg.gpuSharing, cfg.schedulerName, rng)
    except HandoffError as err:
        return _denied(uid, str(err))
    return _allowed(uid, json_patch(pod, changed) if changed is not None else None)


def validate_pod(request: Obj, cfg: SchedulerConfig) -> Obj:
    uid, pod = str(request.get("uid", "")), request.get("object") or {}
    spec = pod.get("spec") or {}
    if (spec.get("schedulerName") or "default-scheduler") != cfg.schedulerName or not is_shared_gpu_pod(pod):
        return _allowed(uid)
    problems: list[Reason] = []
    read_pod(_named(pod, request), problems)
    if problems:
        return _denied(uid, "; ".join(p.message for p in problems))
    return _allowed(uid)


def validate_queue(request: Obj, queues: QueueLister) -> Obj:
    uid, queue = str(request.get("uid", "")), request.get("object") or {}
    name = meta.name(queue)
    others = [q for q in queues() if meta.name(q) != name]
    problems: list[ObjectProblem] = []
    read = read_queues([*others, queue], problems)[name]
    refused = [r.message for r in read.errors if r.code in QUEUE_REFUSALS]
    return _denied(uid, "; ".join(refused)) if refused else _allowed(uid)


def validate_podgroup(request: Obj) -> Obj:
    uid, group = str(request.get("uid", "")), request.get("object") or {}
    key = meta.object_key(_named(group, request))
    try:
        spec = PodGroupSpec.model_validate(group.get("spec") or {})
    except ValidationError as err:
        return _denied(uid, f"PodGroup {key} is invalid: {validation_message(err)}")
    if spec.minMember < 1:
        return _denied(uid, f"PodGroup {key}: spec.minMember is {spec.minMember}; it must be at least 1 (the number "
                       "of its pods that must start together)")
    return _allowed(uid)


def review(path: str, body: Obj, cfg: SchedulerConfig, queues: QueueLister, rng: random.Random | None = None) -> Obj:
    """The AdmissionReview answering ``body`` (an AdmissionReview) sent to ``path``."""
    request = body.get("request") or {}
    if path == "/mutate-pod":
        response = mutate_pod(request, cfg, rng)
    elif path == "/validate-pod":
        response = validate_pod(request, cfg)
    elif path == "/validate-queue":
        response = validate_queue(request, queues)
    elif path == "/validate-podgroup":
        response = validate_podgroup(request)
    else:
        response = _denied(str(request.get("uid", "")), f"kai's webhook serves no path {path}")
    return {"apiVersion": body.get("apiVersion") or "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": response}
