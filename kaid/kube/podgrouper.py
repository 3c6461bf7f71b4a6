"""Makes a PodGroup for every workload that names none (DESIGN section 2): for the pod's top owner, with
minMember from the owner (``kai.scheduler/batch-min-member``, replica counts of Kubeflow, Ray, JobSet and
LeaderWorkerSet owners, or the ``kai.nvidia.com/job-size`` label), and queue, priority class,
preemptibility and topology from the owner, then the pod, then the namespace label, then the default."""

from __future__ import annotations

import logging
from concurrent.futures import Executor
from typing import Any
from urllib.parse import quote

from kaid.api import constants as c
from kaid.api.config import SchedulerConfig
from kaid.kube.client import ApiError, KubeClient
from kaid.model.grouping import OWNER_KINDS, WATCHED_OWNER_KINDS, OwnerIndex, group_for_pod, workload_labels

log = logging.getLogger("kaid.podgrouper")
Obj = dict[str, Any]


def podgroups_to_create(objects: list[Obj], cfg: SchedulerConfig) -> list[Obj]:
    """PodGroup objects missing for the pending pods of our scheduler. Pure: objects in, objects out."""
    owners: OwnerIndex = {}
    namespaces: dict[str, Obj] = {}
    existing: set[tuple[str, str]] = set()
    pods: list[Obj] = []
    for o in objects:
        kind = o.get("kind")
        meta = o.get("metadata") or {}
        ns = str(meta.get("namespace") or "default")
        if kind in OWNER_KINDS:
            owners[(ns, str(kind), str(meta.get("name", "")))] = o
        elif kind == "Namespace":
            namespaces[str(meta.get("name", ""))] = o
        elif kind == "PodGroup":
            existing.add((ns, str(meta.get("name", ""))))
        elif kind == "Pod":
            pods.append(o)
    out: dict[tuple[str, str], Obj] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        meta = pod.get("metadata") or {}
        if (spec.get("schedulerName") or "default-scheduler") != cfg.schedulerName:
            continue
        if (meta.get("annotations") or {}).get(c.POD_GROUP_ANNOTATION):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        ns = str(meta.get("namespace") or "default")
        info = group_for_pod(pod, owners)
        if info.owner is None and info.owner_kind in WATCHED_OWNER_KINDS:
            continue  # its owner is not seen yet: it decides the gang, so wait for it
        key = (ns, info.name)
        if key in existing or key in out:
            continue
        owner = info.owner
        wl = workload_labels(pod, owner if owner is not pod else None, namespaces.get(ns), cfg.queueLabelKeys)
        pg_spec: Obj = {"minMember": info.min_member, "queue": wl.queue or cfg.defaultQueue}
        if wl.priority_class:
            pg_spec["priorityClassName"] = wl.priority_class
        if wl.preemptibility:
            pg_spec["preemptibility"] = wl.preemptibility
        if wl.topology:
            tc = {"topology": wl.topology}
            if wl.required_level:
                tc["requiredTopologyLevel"] = wl.required_level
            if wl.preferred_level:
                tc["preferredTopologyLevel"] = wl.preferred_level
            pg_spec["topologyConstraint"] = tc
        pg_meta: Obj = {"name": info.name, "namespace": ns,
                        "labels": {"kai.scheduler/created-by": "kaid", c.QUEUE_LABEL: pg_spec["queue"]}}
        src = owner if owner is not None else pod
        src_meta = src.get("metadata") or {}
        if src_meta.get("uid"):
            pg_meta["ownerReferences"] = [{"apiVersion": src.get("apiVersion") or "v1", "kind": src.get("kind"),
                                           "name": src_meta.get("name"), "uid": src_meta.get("uid")}]
        out[key] = {"apiVersion": f"{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}", "kind": "PodGroup",
                    "metadata": pg_meta, "spec": pg_spec}
    return list(out.values())


def create_podgroups(client: KubeClient, podgroups: list[Obj], pool: Executor | None = None) -> list[Obj]:
    """Create the PodGroups (concurrently when given a pool); those that exist already are fine."""
    def one(pg: Obj) -> Obj | None:
        ns = pg["metadata"]["namespace"]
        try:
            made: Obj = client.create(f"/apis/{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}/namespaces/{quote(ns)}/"
                                      "podgroups", pg)
            return made
        except ApiError as err:
            if err.status != 409:
                log.warning("PodGroup %s/%s not created: %s", ns, pg["metadata"]["name"], err.message)
            return None
    results = pool.map(one, podgroups) if pool is not None else map(one, podgroups)
    return [r for r in results if r is not None]
