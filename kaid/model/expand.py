"""Pods that a workload would create, for dry-runs of workload files: a Job makes ``parallelism`` pods,
a Deployment or StatefulSet ``replicas`` pods, a PyTorchJob or MPIJob one pod per replica of each
replica spec, a RayCluster a head and its workers, a JobSet and a LeaderWorkerSet their groups. Each pod
points at its workload with an owner reference, so it is grouped as the real pods would be."""

from __future__ import annotations

import copy
from typing import Any

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.meta import as_int

Obj = dict[str, Any]


def _pod(owner: Obj, template: Obj, name: str, scheduler: str) -> Obj:
    m = meta.meta(owner)
    tmeta = copy.deepcopy(template.get("metadata") or {})
    spec = copy.deepcopy(template.get("spec") or {})
    spec.setdefault("schedulerName", scheduler)
    labels = {**(tmeta.get("labels") or {})}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": meta.namespace(owner), "labels": labels,
                         "annotations": {**(tmeta.get("annotations") or {})},
                         "creationTimestamp": m.get("creationTimestamp"),
                         "ownerReferences": [{"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"),
                                              "name": m.get("name"), "uid": m.get("uid") or
                                              f"dry-run-{m.get('name')}", "controller": True}]},
            "spec": spec, "status": {"phase": "Pending"}}


def expand(obj: Obj, scheduler: str = c.DEFAULT_SCHEDULER_NAME) -> list[Obj]:
    """The workload itself (kept as the pods' owner) followed by the pods it would make."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    name = str(meta.meta(obj).get("name", "workload"))
    out: list[Obj] = [obj]
    if kind == "Pod":
        pod = copy.deepcopy(obj)
        pod.setdefault("spec", {}).setdefault("schedulerName", scheduler)
        pod.setdefault("status", {}).setdefault("phase", "Pending")
        return [pod]
    if kind == "Job":
        out += [_pod(obj, spec.get("template") or {}, f"{name}-{i}", scheduler)
                for i in range(as_int(spec.get("parallelism"), 1))]
    elif kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        out += [_pod(obj, spec.get("template") or {}, f"{name}-{i}", scheduler)
                for i in range(as_int(spec.get("replicas"), 1))]
    elif kind in ("PyTorchJob", "MPIJob", "TFJob", "XGBoostJob"):
        field = {"PyTorchJob": "pytorchReplicaSpecs", "MPIJob": "mpiReplicaSpecs", "TFJob": "tfReplicaSpecs",
                 "XGBoostJob": "xgbReplicaSpecs"}[str(kind)]
        for role, rs in (spec.get(field) or {}).items():
            for i in range(as_int((rs or {}).get("replicas"), 1)):
                out.append(_pod(obj, (rs or {}).get("template") or {}, f"{name}-{role.lower()}-{i}", scheduler))
    elif kind == "RayCluster" or kind == "RayJob":
        rc = spec.get("rayClusterSpec") if kind == "RayJob" else spec
        rc = rc or {}
        out.append(_pod(obj, (rc.get("headGroupSpec") or {}).get("template") or {}, f"{name}-head", scheduler))
        for group in rc.get("workerGroupSpecs") or []:
            count = as_int(group.get("minReplicas"), as_int(group.get("replicas"), 1))
            gname = group.get("groupName", "workers")
            out += [_pod(obj, group.get("template") or {}, f"{name}-{gname}-{i}", scheduler) for i in range(count)]
    elif kind == "JobSet":
        for rj in spec.get("replicatedJobs") or []:
            tmpl = (rj.get("template") or {}).get("spec") or {}
            for r in range(as_int(rj.get("replicas"), 1)):
                for i in range(as_int(tmpl.get("parallelism"), 1)):
                    out.append(_pod(obj, tmpl.get("template") or {}, f"{name}-{rj.get('name', 'job')}-{r}-{i}",
                                    scheduler))
    elif kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = as_int(lwt.get("size"), 1)
        for r in range(as_int(spec.get("replicas"), 1)):
            leader = lwt.get("leaderTemplate") or lwt.get("workerTemplate") or {}
            out.append(_pod(obj, leader, f"{name}-{r}", scheduler))
            out += [_pod(obj, lwt.get("workerTemplate") or {}, f"{name}-{r}-{i}", scheduler) for i in range(1, size)]
    return out
