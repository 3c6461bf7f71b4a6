"""Scheduling shards (KAI's node pools): which nodes, Queues and PodGroups one scheduler takes.

A cluster may run several schedulers, each over its own partition: the objects whose label ``nodePoolLabelKey``
has the value ``partitionLabelValue``; the default shard (an empty value) takes the objects without that label,
and an empty key takes every object (KAI's ``SchedulingNodePoolParams.GetLabelSelector``,
pkg/scheduler/conf/scheduler_conf.go:99-116 at d5bc503a). Its lister filters nodes, Queues and PodGroups, never pods
(cache/cluster_info/data_lister/kubernetes_lister.go:115-135): a pod on a node of the partition holds resources
there whoever schedules it, and a pod whose PodGroup is out of the partition is no job of this scheduler.

A pod that names no PodGroup is in the partition of the PodGroup KAI's podgrouper would make for it: that has the
labels of the pod's top owner, and the pod's own node-pool label where the owner has none
(pkg/podgrouper/pod_controller.go:215-231, addNodePoolLabel)."""

from __future__ import annotations

from typing import Any

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.model.grouping import GroupInfo, OwnerIndex, top_owner
from kaid.model.objects import ANY_ROLE, CPU_WORKER, GPU_WORKER, NO_BACKOFF, NO_ROLE, Pod
from kaid.model.vocabulary import SchedulingCondition

Obj = dict[str, Any]


class Partition:
    """The one predicate of a scheduler's shard (``takes``), from its config."""

    __slots__ = ("cpu_worker", "gpu_worker", "key", "restrict", "value")

    def __init__(self, cfg: SchedulerConfig) -> None:
        self.key = cfg.nodePoolLabelKey
        self.value = cfg.partitionLabelValue
        self.restrict = cfg.restrictSchedulingNodes
        self.gpu_worker, self.cpu_worker = cfg.gpuWorkerNodeLabelKey, cfg.cpuWorkerNodeLabelKey

    def takes_node(self, obj: Obj) -> bool:
        """Whether a node is in the partition (``takes``) and, with ``restrictSchedulingNodes``, a GPU or CPU worker
        (KAI's ``filterUnmarkedNodes``: another node is left out of the snapshot)."""
        return self.takes(obj) and (not self.restrict or self.node_roles(meta.labels_of(obj)) != NO_ROLE)

    def node_roles(self, labels: Obj) -> int:
        """What a node may run (``Node.roles``): everything, or with ``restrictSchedulingNodes`` what its worker
        labels say."""
        if not self.restrict:
            return ANY_ROLE
        return (GPU_WORKER if self.gpu_worker in labels else NO_ROLE) | \
            (CPU_WORKER if self.cpu_worker in labels else NO_ROLE)

    def pod_role(self, pod: Pod) -> None:
        """With ``restrictSchedulingNodes``, the worker role a pod needs in its signature (the nodes that take it
        depend on it: ``predicates.static_failure``)."""
        if self.restrict:
            pod.sig = repr((pod.sig, "gpu-worker" if pod.gpu_whole or pod.frac_devices else "cpu-worker"))

    def takes_labels(self, labels: Obj) -> bool:
        """Whether an object with these labels is in the partition."""
        key = self.key
        if not key:
            return True
        if not self.value:
            return key not in labels
        found = labels.get(key)
        return found is not None and str(found) == self.value

    def takes(self, obj: Obj) -> bool:
        """Whether a node, a Queue or a PodGroup is in the partition. (Asked of every PodGroup of a cold snapshot:
        ``meta.labels_of`` inlined.)"""
        key = self.key
        if not key:
            return True
        m = obj.get("metadata")
        labels = m.get("labels") if isinstance(m, dict) else None
        if not isinstance(labels, dict):
            return not self.value
        if not self.value:
            return key not in labels
        found = labels.get(key)
        return found is not None and str(found) == self.value

    def takes_podgroup(self, obj: Obj) -> bool:
        """Whether a PodGroup is this scheduler's to schedule now: in the partition (``takes``), and not one tried
        once per node pool that was found unschedulable in its pool (``tried_in_its_pool``)."""
        return self.takes(obj) and not tried_in_its_pool(obj, self.key)

    def takes_owned(self, pod: Obj, owner: Obj | None) -> bool:
        """Whether a pod that names no PodGroup is in the partition: by its top owner's node-pool label (``owner``,
        ``workload_owner``; None: not found), else its own (the labels of the PodGroup made for it)."""
        key = self.key
        if not key:
            return True
        labels = meta.labels_of(owner)
        if key not in labels and owner is not pod:
            labels = meta.labels_of(pod)
        return self.takes_labels(labels)


UNSCHEDULABLE_CONDITIONS = frozenset({SchedulingCondition.UNSCHEDULABLE_ON_NODE_POOL,
                                      SchedulingCondition.UNSCHEDULABLE})


def pool_of(obj: Obj | None, key: str) -> str:
    """The node pool an object is in: its ``key`` label, ``default`` without one (KAI's GetNodePoolNameFromLabels)."""
    named = meta.labels_of(obj).get(key) if key else None
    return str(named) if named else c.DEFAULT_NODE_POOL


def tried_in_its_pool(obj: Obj, key: str) -> bool:
    """Whether a PodGroup tried once per node pool (``spec.schedulingBackoff`` other than -1) was found unschedulable
    in the pool it is in now: its last scheduling condition, by transition ID (KAI's GetLastSchedulingCondition), is
    an unschedulable one that names that pool. KAI's scheduler then leaves it alone until its node-pool label changes
    (``isPodGroupUpForScheduler``, cluster_info.go at d5bc503a): an outside controller moves it to another pool."""
    backoff = meta.mapping(obj.get("spec")).get("schedulingBackoff")
    if not isinstance(backoff, int) or isinstance(backoff, bool) or backoff == NO_BACKOFF:
        return False
    last = last_scheduling_condition(obj)
    return str(last.get("type")) in UNSCHEDULABLE_CONDITIONS and last.get("nodePool") == pool_of(obj, key)


def scheduling_conditions(obj: Obj | None) -> list[Obj]:
    """A PodGroup's scheduling conditions, in their order. The CRD keeps any status it is sent, so entries that are
    not mappings, or a list that is not one, read as none."""
    conditions = meta.mapping(meta.mapping(obj).get("status")).get("schedulingConditions")
    return [cond for cond in conditions if isinstance(cond, dict)] if isinstance(conditions, list) else []


def last_scheduling_condition(obj: Obj | None) -> Obj:
    """A PodGroup's last scheduling condition: the first of ``status.schedulingConditions`` unless a later one has a
    greater transition ID (KAI's GetLastSchedulingCondition); {} where there is none."""
    last: Obj = {}
    for cond in scheduling_conditions(obj):
        if not last or transition_id(cond) > transition_id(last):
            last = cond
    return last


def transition_id(cond: Obj) -> int:
    """A scheduling condition's transition ID as a number (-1 where it is none)."""
    try:
        return int(str(cond.get("transitionID")))
    except ValueError:
        return -1


def workload_owner(pod: Obj, info: GroupInfo, owners: OwnerIndex) -> Obj | None:
    """The pod's top owner object (``grouping.top_owner``; None: not found), which ``info`` (``group_for_pod``) holds
    unless the pod is grouped by its job id."""
    return info.owner if info.owner_kind != "JobId" else top_owner(pod, owners)[2]


def podgroup_key(obj: Obj) -> str:
    """A PodGroup object's key, as its job's (``namespace/name``, ``jobs.read_podgroup``)."""
    m = meta.meta(obj)
    return f"{m.get('namespace') or meta.DEFAULT_NAMESPACE}/{m.get('name', '')}"
