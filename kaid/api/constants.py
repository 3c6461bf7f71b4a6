"""Names fixed by the KAI-Scheduler compatibility contract (docs/architecture.md).

One place for every label, annotation, API group and default, so that the engine, the daemon and the
CLI all read the same keys.
"""

from __future__ import annotations

from typing import Final

SCHEDULING_GROUP: Final = "scheduling.run.ai"
QUEUE_VERSION: Final = "v2"
PODGROUP_VERSION: Final = "v2alpha2"
TOPOLOGY_GROUP: Final = "kai.scheduler"
TOPOLOGY_VERSION: Final = "v1alpha1"

DEFAULT_SCHEDULER_NAME: Final = "kai-scheduler"
DEFAULT_QUEUE: Final = "default-queue"

# Queue of a pod.
QUEUE_LABEL: Final = "kai.scheduler/queue"
LEGACY_QUEUE_LABEL: Final = "runai/queue"

# PodGroup membership and gangs.
POD_GROUP_ANNOTATION: Final = "pod-group-name"
BATCH_MIN_MEMBER_ANNOTATION: Final = "kai.scheduler/batch-min-member"
# "true" on a pod or an owner up its chain: no PodGroup is made for it; it joins the one it names (KAI podgrouper)
SKIP_PODGROUPER_ANNOTATION: Final = "kai.scheduler/skip-podgrouper"
SUBGROUP_LABEL: Final = "kai.scheduler/subgroup-name"  # the PodGroup sub-group a pod belongs to
DEFAULT_NODE_POOL: Final = "default"  # the pool of an object without the node-pool label (KAI's DefaultNodePoolName)
DEFAULT_SUBGROUP: Final = "default"  # the sub-group a pod without that label names (KAI's DefaultSubGroup)
TASK_PRIORITY_LABEL: Final = "kai.scheduler/task-priority"  # order of a job's pods: higher is placed first
JOB_ID_LABEL: Final = "kai.nvidia.com/job-id"
JOB_SIZE_LABEL: Final = "kai.nvidia.com/job-size"

# Priority and preemptibility.
PRIORITY_CLASS_LABEL: Final = "priorityClassName"
PREEMPTIBILITY_LABEL: Final = "kai.scheduler/preemptibility"
PREEMPTIBLE: Final = "preemptible"
NON_PREEMPTIBLE: Final = "non-preemptible"
PREEMPTIBLE_BELOW: Final = 100
DEFAULT_PRIORITY_CLASSES: Final[dict[str, int]] = {
    "train": 50,
    "build-preemptible": 75,
    "build": 100,
    "inference": 125,
}

# GPU sharing.
GPU_RESOURCE: Final = "nvidia.com/gpu"
GPU_FRACTION_ANNOTATION: Final = "gpu-fraction"
GPU_MEMORY_ANNOTATION: Final = "gpu-memory"
GPU_FRACTION_NUM_DEVICES_ANNOTATION: Final = "gpu-fraction-num-devices"
GPU_GROUP_LABEL: Final = "runai-gpu-group"
GPU_MEMORY_NODE_LABEL: Final = "nvidia.com/gpu.memory"
GPU_PRODUCT_NODE_LABEL: Final = "nvidia.com/gpu.product"
# Written by kai when it binds a shared-GPU pod: the device indexes it got on its node.
GPU_DEVICES_ANNOTATION: Final = "kai.scheduler/gpu-devices"
# A pod spanning several shared GPUs (gpu-fraction-num-devices > 1) carries one label per group instead:
# ``runai-gpu-group/<group>: <group>``.
GPU_GROUP_MULTI_LABEL_PREFIX: Final = "runai-gpu-group/"
GPU_FRACTION_CONTAINER_NAME_ANNOTATION: Final = "gpu-fraction-container-name"

# Device handoff to a shared-GPU pod (KAI's names, so that its tooling keeps working): one reservation pod
# per GPU group holds the device and reports its UUID; the pod's ConfigMaps carry it to the container.
RESERVATION_NAMESPACE: Final = "kai-resource-reservation"
RESERVATION_APP_LABEL: Final = "app"
RESERVATION_APP: Final = "kai-resource-reservation"
RESERVATION_POD_PREFIX: Final = "gpu-reservation"
RESERVATION_CONTAINER: Final = "resource-reservation"
RESERVED_GPU_ANNOTATION: Final = "run.ai/reserve_for_gpu_index"  # its value is the GPU's UUID, not an index
DO_NOT_DISRUPT_ANNOTATION: Final = "karpenter.sh/do-not-disrupt"
SHARED_GPU_CONFIGMAP_ANNOTATION: Final = "runai/shared-gpu-configmap"  # the prefix of the pod's ConfigMap names
RECEIVED_RESOURCE_TYPE_ANNOTATION: Final = "received-resource-type"
RECEIVED_FRACTION: Final = "Fraction"
# Written by kai on a shared-GPU pod it binds: the PodGroup it was scheduled in (the node agent reports there).
POD_GROUP_OF_POD_ANNOTATION: Final = "kai.scheduler/pod-group"
NVIDIA_VISIBLE_DEVICES: Final = "NVIDIA_VISIBLE_DEVICES"
GPU_PORTION: Final = "GPU_PORTION"
RUNAI_NUM_OF_GPUS: Final = "RUNAI_NUM_OF_GPUS"
LEGACY_VISIBLE_DEVICES: Final = "RUNAI-VISIBLE-DEVICES"  # updated only where a ConfigMap has it already
CDI_DEVICE_PREFIX: Final = "k8s.device-plugin.nvidia.com/gpu="

# Written by kai on a pending pod placed onto resources that evictions are freeing (status Pipelined):
# the node it is reserved on. It is bound there once the victims are gone.
PIPELINED_NODE_ANNOTATION: Final = "kai.scheduler/pipelined-node"
# ... and the action that pipelined it (reclaim, preempt, consolidate), reported when it is bound.
PIPELINED_ACTION_ANNOTATION: Final = "kai.scheduler/pipelined-action"
# Written by kai (as by KAI, under KAI's name) on a PodGroup when its running pods fall below minMember (RFC 3339
# time); removed when the job is whole again. A job without a PodGroup object keeps it on its pods.
STALE_SINCE_ANNOTATION: Final = "kai.scheduler/stale-podgroup-timestamp"
# Written by kai (as by KAI) on a PodGroup some of whose pods it evicted (RFC 3339 time): the job's preemptionDelay
# counts from then, if later than its creation.
LAST_EVICTION_ANNOTATION: Final = "kai.scheduler/last-eviction-timestamp"
# On a workload (its top owner, else the pod) without a PodGroup of its own: the PodGroup's preemptionDelay and
# stalenessGracePeriod (Go durations), as KAI's pod grouper reads them.
PREEMPTION_DELAY_ANNOTATION: Final = "kai.scheduler/preemption-delay"
STALENESS_GRACE_ANNOTATION: Final = "kai.scheduler/staleness-grace-period"

# Topology.
TOPOLOGY_ANNOTATION: Final = "kai.scheduler/topology"
TOPOLOGY_REQUIRED_ANNOTATION: Final = "kai.scheduler/topology-required-placement"
TOPOLOGY_PREFERRED_ANNOTATION: Final = "kai.scheduler/topology-preferred-placement"

# Units: 1 GPU = 1000 milli-GPU; cpu in millicores; memory in bytes inside, megabytes (10^6) on Queues.
MILLI: Final = 1000
MEGABYTE: Final = 1_000_000
