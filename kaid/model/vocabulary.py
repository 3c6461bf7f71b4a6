"""The engine's vocabulary: pod statuses and their named groups, operation kinds, resources, reason codes and
node-fit failures. Every layer imports them from here.

The string enums equal the strings they replace (``PodStatus.RUNNING == "Running"``), so JSON, CLI output and
scenario files are unchanged, and code that still compares with a literal keeps working while it adopts them.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Final


class PodStatus(StrEnum):
    """Where a pod stands in a cycle. A snapshot reads one of the first six from the pod's object (and its nodes);
    the cycle's session moves pods to the last two, tentatively (a job's changes are committed or rolled back
    together)."""

    PENDING = "Pending"  # no node yet
    BOUND = "Bound"  # has a node, not running yet
    RUNNING = "Running"
    RELEASING = "Releasing"  # being deleted: it holds its resources until it is gone
    PIPELINED = "Pipelined"  # reserved on a node whose resources evictions are freeing; bound once they are free
    # bound or running on a node that no longer exists (deleted; the pod garbage collector removes the pod soon): it
    # holds nothing on any node, counts for its gang and its queue as running (as KAI counts it), and is never a
    # victim: evicting it frees nothing
    NODE_GONE = "NodeGone"
    ALLOCATED = "Allocated"  # placed by this cycle
    EVICTED = "Evicted"  # evicted by this cycle


# Named groups of statuses (``pod.status in HOLDS_RESOURCES``).
HOLDS_RESOURCES: Final = frozenset({PodStatus.RUNNING, PodStatus.BOUND, PodStatus.RELEASING, PodStatus.PIPELINED,
                                     PodStatus.NODE_GONE})
"""Holds, or is about to hold, resources on its node (or did, on a node gone since): what a queue's allocation counts
(``Pod.active``)."""
BOUND_OR_RUNNING: Final = frozenset({PodStatus.RUNNING, PodStatus.BOUND})
"""On a node and staying there."""
EVICTABLE: Final = BOUND_OR_RUNNING | {PodStatus.ALLOCATED}
"""What an eviction can take (unless it is releasing already): a pod on a node, or one allocate placed earlier in this
cycle (KAI evicts any active allocated task, Allocated and Binding ones too: ``pod_status.go``'s
``activeAllocatedStatuses``, ``podgroup_info/eviction_info.go``); such a pod, once evicted, is not moved in that cycle
(``scenario._take_back``). A pod pipelined in this cycle is taken too (``victims.takes``)."""
PLACED_THIS_CYCLE: Final = frozenset({PodStatus.ALLOCATED, PodStatus.PIPELINED})
"""Given a node by this cycle."""


class PodPhase(StrEnum):
    """A pod's ``status.phase`` as Kubernetes writes it."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


FINISHED_PHASES: Final = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
"""A pod in one of these phases holds nothing and is never scheduled again."""


class OpKind(StrEnum):
    """What a session operation does to a pod (``Op.kind``)."""

    ALLOCATE = "allocate"
    PIPELINE = "pipeline"
    EVICT = "evict"
    RESTORE = "restore"  # an evicted or moved pod put back where it was: that eviction no longer stands


class Resource(IntEnum):
    """The resources fair share and limits work on; a value is the index into a queue's vectors
    (``queue.allocated[GPU]``). Units inside: milli-GPU, millicores, bytes."""

    GPU = 0
    CPU = 1
    MEM = 2

    @property
    def key(self) -> str:
        """The name in Queue specs and every JSON output: ``gpu``, ``cpu``, ``memory``."""
        return RESOURCES[self]


GPU: Final = Resource.GPU
CPU: Final = Resource.CPU
MEM: Final = Resource.MEM
RESOURCES: Final = ("gpu", "cpu", "memory")


class ReasonCode(StrEnum):
    """The stable ``code`` of every Reason kai gives (``kaictl explain``, PodGroup conditions, events)."""

    # a bad object: the model reads it and says what is wrong
    INVALID_SPEC = "InvalidSpec"
    INVALID_QUEUE = "InvalidQueue"
    INVALID_PARENT_QUEUE = "InvalidParentQueue"
    MISSING_PARENT_QUEUE = "MissingParentQueue"
    QUEUE_CYCLE = "QueueCycle"
    QUEUE_TOO_DEEP = "QueueTooDeep"
    DUPLICATE_QUEUE = "DuplicateQueue"
    INVALID_POD_GROUP = "InvalidPodGroup"
    MISSING_POD_GROUP = "MissingPodGroup"
    INVALID_PRIORITY_CLASS = "InvalidPriorityClass"
    UNKNOWN_PRIORITY_CLASS = "UnknownPriorityClass"
    INVALID_PREEMPTIBILITY = "InvalidPreemptibility"
    INVALID_TOPOLOGY = "InvalidTopology"
    INVALID_NODE = "InvalidNode"
    INVALID_ANNOTATION = "InvalidAnnotation"
    INVALID_DISRUPTION_BUDGET = "InvalidDisruptionBudget"
    MALFORMED_OBJECT = "MalformedObject"  # a field of the wrong type: the object is left out (``malformed``)
    UNKNOWN_TOPOLOGY = "UnknownTopology"
    UNKNOWN_TOPOLOGY_LEVEL = "UnknownTopologyLevel"
    UNKNOWN_QUEUE = "UnknownQueue"
    NOT_LEAF_QUEUE = "NotLeafQueue"
    MIN_MEMBER_TOO_LARGE = "MinMemberTooLarge"
    OWNER_NOT_SEEN = "OwnerNotSeen"
    POD_GROUPER_SKIPPED = "PodGrouperSkipped"  # kai.scheduler/skip-podgrouper, and no PodGroup named
    UNKNOWN_SUBGROUP = "UnknownSubGroup"  # a pod names no pod set of its PodGroup's sub-groups
    UNBOUND_IMMEDIATE_CLAIM = "UnboundImmediateClaim"  # a claim its class binds at once is not bound yet
    # why a job waits: the actions and placement
    QUEUE_LIMIT = "QueueLimit"
    NON_PREEMPTIBLE_OVER_QUOTA = "NonPreemptibleOverQuota"
    GANG_UNSCHEDULABLE = "GangUnschedulable"
    GANG_INCOMPLETE = "GangIncomplete"
    TOPOLOGY = "Topology"
    POD_AFFINITY = "PodAffinity"  # the pods' required inter-pod (anti-)affinity, where resources alone would do
    NODE_FIT = "NodeFit"
    FRAGMENTATION = "Fragmentation"
    RECLAIM_NOT_POSSIBLE = "ReclaimNotPossible"
    PREEMPT_NOT_POSSIBLE = "PreemptNotPossible"
    PREEMPTION_NEVER = "PreemptionNever"
    PREEMPTION_DELAY_NOT_ELAPSED = "PreemptionDelayNotElapsed"  # KAI's reason of the same name
    NOT_PLACED_THIS_CYCLE = "NotPlacedThisCycle"
    NOT_EXPLAINED = "NotExplained"
    # why a shared-GPU job waits: its device could not be handed over (kaid.kube.reservations)
    GPU_RESERVATION_FAILED = "GpuReservationFailed"
    GPU_SHARING_NOT_SET_UP = "GpuSharingNotSetUp"
    BINDING_ERROR = "BindingError"
    INVALID = "Invalid"  # an object without a status of its own (a Topology) that kaid cannot use


class NodeFailure(StrEnum):
    """Why one node cannot take a pod, in the order the predicates check (the counts of a ``NodeFit`` reason)."""

    NOT_READY = "NotReady"
    UNSCHEDULABLE = "Unschedulable"
    NODE_SELECTOR = "NodeSelector"
    AFFINITY = "Affinity"
    TAINT = "Taint"
    NODE_ROLE = "NodeRole"  # restrictSchedulingNodes: not a GPU worker (a GPU pod), not a CPU worker (another)
    VOLUME_NODE_AFFINITY = "VolumeNodeAffinity"  # a volume bound to one of its claims cannot be reached from the node
    TOO_MANY_PODS = "TooManyPods"
    INSUFFICIENT_CPU = "InsufficientCPU"
    INSUFFICIENT_MEMORY = "InsufficientMemory"
    INSUFFICIENT_EXTENDED = "InsufficientExtendedResource"  # an extended resource (rdma/ib, hugepages-2Mi, ...)
    HOST_PORT = "HostPortInUse"  # a host port the pod takes is a pod's of the node already
    INSUFFICIENT_GPU = "InsufficientGPU"
    NO_GPU_MEMORY_LABEL = "NoGPUMemoryLabel"
    INSUFFICIENT_GPU_SHARE = "InsufficientGPUShare"
    POD_AFFINITY = "PodAffinity"  # inter-pod affinity: no pod it must be with in the node's domain
    POD_ANTI_AFFINITY = "PodAntiAffinity"  # a pod it must not be with (or that must not be with it) in the domain
    POD_TOPOLOGY_SPREAD = "PodTopologySpread"  # the node's domain holds too many of the pods it spreads with

    @property
    def words(self) -> str:
        """What a person reads in a fit summary ("3 untolerated taint")."""
        return _FAILURE_WORDS[self]


_FAILURE_WORDS: Final = {
    NodeFailure.NOT_READY: "not ready",
    NodeFailure.UNSCHEDULABLE: "cordoned",
    NodeFailure.NODE_SELECTOR: "node selector mismatch",
    NodeFailure.AFFINITY: "node affinity mismatch",
    NodeFailure.TAINT: "untolerated taint",
    NodeFailure.NODE_ROLE: "not a worker of the pod's kind",
    NodeFailure.VOLUME_NODE_AFFINITY: "volume node affinity conflict",
    NodeFailure.TOO_MANY_PODS: "too many pods",
    NodeFailure.INSUFFICIENT_CPU: "insufficient cpu",
    NodeFailure.INSUFFICIENT_MEMORY: "insufficient memory",
    NodeFailure.INSUFFICIENT_EXTENDED: "insufficient extended resource",
    NodeFailure.HOST_PORT: "host port in use",
    NodeFailure.INSUFFICIENT_GPU: "insufficient GPU",
    NodeFailure.NO_GPU_MEMORY_LABEL: "no GPU memory label",
    NodeFailure.INSUFFICIENT_GPU_SHARE: "no GPU with enough free share",
    NodeFailure.POD_AFFINITY: "pod affinity not met",
    NodeFailure.POD_ANTI_AFFINITY: "pod anti-affinity conflict",
    NodeFailure.POD_TOPOLOGY_SPREAD: "pod topology spread: max skew reached",
}


class SchedulingCondition(StrEnum):
    """The ``type`` of a PodGroup's scheduling condition (``status.schedulingConditions[]``)."""

    UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"  # KAI's: the PodGroup cannot be placed in its node pool
    SCHEDULED = "Scheduled"  # kai's: its pods are placed (KAI removes its conditions instead)
    UNSCHEDULABLE = "Unschedulable"  # what kai wrote before 2026-11-29 for KAI's type: read as it


class EventReason(StrEnum):
    """The ``reason`` of the events kaid writes (``kaictl top`` and ``explain`` read them back)."""

    SCHEDULED = "Scheduled"
    UNSCHEDULABLE = "Unschedulable"
    EVICTED = "Evicted"
    BINDING_ERROR = "BindingError"
    INVALID = "Invalid"  # an object without a status of its own (a Topology) that kaid cannot use
    GPU_MEMORY_OVER_SHARE = "GpuMemoryOverShare"  # kaid node-agent: a shared-GPU pod over its share of GPU memory
    EVICTED_OVER_SHARE = "EvictedOverShare"
