"""Makes a PodGroup for every workload that names none (the compatibility contract, docs/architecture.md): for
the pod's top owner, with minMember from the owner (``kai.scheduler/batch-min-member``, replica counts of
Kubeflow, Ray, JobSet and LeaderWorkerSet owners, or the ``kai.nvidia.com/job-size`` label), and queue,
priority class, preemptibility and topology from the owner, then the pod, then the namespace label, then the
default."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Executor
from typing import Any
from urllib.parse import quote

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.kube.client import ApiError, KubeClient
from kaid.model.build import sort_inputs
from kaid.model.grouping import (
    WATCHED_OWNER_KINDS,
    GroupInfo,
    OwnerIndex,
    annotated_durations,
    group_for_pod,
    podgrouper_skipped_by,
    workload_labels,
)
from kaid.model.partition import Partition, workload_owner
from kaid.model.pods import is_reservation_pod
from kaid.model.vocabulary import FINISHED_PHASES

log = logging.getLogger("kaid.podgrouper")
Obj = dict[str, Any]


def podgroups_to_create(objects: list[Obj], cfg: SchedulerConfig) -> list[Obj]:
    """PodGroup objects missing for the pending pods of our scheduler. Pure: objects in, objects out."""
    inp = sort_inputs(objects)
    existing = {(meta.namespace(pg), meta.name(pg)) for pg in inp.podgroups}
    out: dict[tuple[str, str], Obj] = {}
    part = Partition(cfg)
    for pod in inp.pods:
        if not _needs_podgroup(pod, cfg) or podgrouper_skipped_by(pod, inp.owners) is not None:
            continue
        info = group_for_pod(pod, inp.owners)
        if info.owner is None and info.owner_kind in WATCHED_OWNER_KINDS:
            continue  # its owner is not seen yet: it decides the gang, so wait for it
        key = (meta.namespace(pod), info.name)
        if key in existing or key in out:
            continue
        labels = podgroup_labels(pod, workload_owner(pod, info, inp.owners), cfg.nodePoolLabelKey)
        if part.takes_labels(labels):  # (else another scheduling shard's workload: its scheduler makes the PodGroup)
            out[key] = _podgroup(pod, info, inp.namespaces.get(key[0]), cfg, labels)
    return list(out.values())


def podgroup_for(pods: list[Obj], owners: OwnerIndex, namespaces: Mapping[str, Obj],
                 cfg: SchedulerConfig) -> Obj | None:
    """The PodGroup missing for one workload's pods (in the watch cache's order), as ``podgroups_to_create`` makes it:
    from the first that needs one and whose owner has been seen; None when none does."""
    part = Partition(cfg)
    for pod in pods:
        if not _needs_podgroup(pod, cfg) or podgrouper_skipped_by(pod, owners) is not None:
            continue
        info = group_for_pod(pod, owners)
        if info.owner is None and info.owner_kind in WATCHED_OWNER_KINDS:
            continue
        labels = podgroup_labels(pod, workload_owner(pod, info, owners), cfg.nodePoolLabelKey)
        if part.takes_labels(labels):
            return _podgroup(pod, info, namespaces.get(meta.namespace(pod)), cfg, labels)
    return None


def _needs_podgroup(pod: Obj, cfg: SchedulerConfig) -> bool:
    """A live pod of this scheduler that names no PodGroup and is one of a workload's: not a reservation pod (kai's
    own, in no job) and not a pending pod being deleted (it will never be placed). The snapshot puts neither in a
    job (``kaid.model.build``), so a PodGroup made for one would be a job without pods."""
    spec = pod.get("spec") or {}
    return (spec.get("schedulerName") or "default-scheduler") == cfg.schedulerName and \
        not meta.annotation(pod, c.POD_GROUP_ANNOTATION) and \
        (pod.get("status") or {}).get("phase") not in FINISHED_PHASES and \
        not (meta.meta(pod).get("deletionTimestamp") and not spec.get("nodeName")) and \
        not is_reservation_pod(pod, cfg.gpuSharing)


def _podgroup(pod: Obj, info: GroupInfo, namespace: Obj | None, cfg: SchedulerConfig, labels: dict[str, str]) -> Obj:
    """The PodGroup of a pod's workload: its gang size, what the workload's labels say, and the labels of its top
    owner (``labels``, ``podgroup_labels``: written here)."""
    owner = info.owner
    wl = workload_labels(pod, owner if owner is not pod else None, namespace, cfg.queueLabelKeys)
    spec: Obj = {"minMember": info.min_member, "queue": wl.queue or cfg.defaultQueue}
    if wl.priority_class:
        spec["priorityClassName"] = wl.priority_class
    if wl.preemptibility:
        spec["preemptibility"] = wl.preemptibility
    if wl.topology:
        tc = {"topology": wl.topology}
        if wl.required_level:
            tc["requiredTopologyLevel"] = wl.required_level
        if wl.preferred_level:
            tc["preferredTopologyLevel"] = wl.preferred_level
        spec["topologyConstraint"] = tc
    spec.update(annotated_durations(pod, owner if owner is not pod else None)[0])
    labels.update({"kai.scheduler/created-by": "kaid", c.QUEUE_LABEL: spec["queue"]})
    pg_meta: Obj = {"name": info.name, "namespace": meta.namespace(pod), "labels": labels}
    src = owner if owner is not None else pod
    src_meta = meta.meta(src)
    if src_meta.get("uid"):
        pg_meta["ownerReferences"] = [{"apiVersion": src.get("apiVersion") or "v1", "kind": src.get("kind"),
                                       "name": src_meta.get("name"), "uid": src_meta.get("uid")}]
    return {"apiVersion": f"{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}", "kind": "PodGroup",
            "metadata": pg_meta, "spec": spec}


def podgroup_labels(pod: Obj, top: Obj | None, pool_key: str) -> dict[str, str]:
    """The labels KAI's podgrouper gives the PodGroup it makes for a pod: every label of the pod's top owner ``top``
    (the pod itself when it has none), then the pod's ``user`` label and its node-pool label where the owner has none
    (defaultgrouper CalcPodGroupLabels, default_grouper.go:119-131; pod_controller.go:215-231 addNodePoolLabel), so a
    workload labelled for a scheduling shard lands in that shard (``Partition.takes_owned`` reads the same)."""
    labels = dict(meta.labels_of(top))
    own = meta.labels_of(pod)
    for key in (_USER_LABEL, pool_key):
        if key and key not in labels and key in own:
            labels[key] = str(own[key])
    return labels


_USER_LABEL = "user"  # (KAI podgrouper constants.UserLabelKey)


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
