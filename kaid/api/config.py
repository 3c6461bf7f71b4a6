"""kai's configuration file, validated with pydantic; every bad value gets a message that says the fix."""

from __future__ import annotations

import datetime as dt
import difflib
import re
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kaid.api import constants as c
from kaid.api.crds import is_label_key, validation_message

Strategy = Literal["binpack", "spread"]
# the label that puts a node, a queue or a PodGroup in a scheduling shard's partition (KAI's DefaultNodePoolLabelKey)
NODE_POOL_LABEL = "kai.scheduler/node-pool"
GPU_WORKER_LABEL = "node-role.kubernetes.io/gpu-worker"  # KAI's DefaultGPUWorkerNodeLabelKey (constants.go)
CPU_WORKER_LABEL = "node-role.kubernetes.io/cpu-worker"
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")  # a label value, empty allowed


class Action(StrEnum):
    """The scheduling actions, in the order a cycle runs them (the config's ``actions`` turns each on or off); a
    Bind or an Eviction names the one that caused it."""

    ALLOCATE = "allocate"
    CONSOLIDATE = "consolidate"
    RECLAIM = "reclaim"
    PREEMPT = "preempt"
    STALE_GANG = "stale-gang"


class PlacementConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    gpu: Strategy = "binpack"
    cpu: Strategy = "binpack"
    # "cpsat": greedy first, CP-SAT when greedy fails or spreads a gang wider than needed.
    # "greedy": the greedy path alone (for comparison).
    gangSolver: Literal["cpsat", "greedy"] = "cpsat"
    # Victims of reclaim, preempt and consolidate: "first-fit" takes the first valid set in KAI's victim order
    # (newest job first), as KAI does; "cpsat" then searches for a set that loses less progress (GPU-seconds) and
    # keeps it if it passes the same checks. Off by default: measured on benchmarks.bench_victims it lost no less
    # (docs/compatibility.md, "Least-cost victims").
    victimSolver: Literal["first-fit", "cpsat"] = "first-fit"
    solverTimeLimitSeconds: float = Field(0.5, gt=0, le=60)
    solverWorkers: int = Field(1, ge=1, le=16)


class LeaderElectionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = True
    namespace: str = "kai-scheduler"
    name: str = "kai-scheduler"
    leaseDurationSeconds: float = Field(15.0, gt=1, le=600)
    renewIntervalSeconds: float = Field(2.0, gt=0, le=60)


_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # a Kubernetes object name (DNS-1123 label)


class GpuSharingConfig(BaseModel):
    """The device handoff of shared-GPU pods (``kaid run``'s binder and ``kaid webhook``'s mutation)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = Field(True, description="Give shared-GPU pods their device: a reservation pod per GPU group "
                          "and the pod's ConfigMaps. False: bind with the GPU-group label only (no device "
                          "handoff; for clusters where something else delivers the device).")
    reservationNamespace: str = Field(c.RESERVATION_NAMESPACE, pattern=_NAME)
    reservationAppLabel: str = Field(c.RESERVATION_APP, min_length=1, max_length=63,
                                     description="Value of the app label that marks reservation pods.")
    reservationServiceAccount: str = Field(c.RESERVATION_APP, pattern=_NAME)
    reservationImage: str = Field("ghcr.io/kai-scheduler/kaid:0.1.0", min_length=1,
                                  description="Image of the reservation pods (kai's own: kaid gpu-reservation).")
    reservationRuntimeClassName: str = Field("", description="runtimeClassName of reservation pods (empty: none).")
    reservationTimeoutSeconds: float = Field(40.0, gt=0, le=600, description="How long a bind waits for the "
                                             "GPU's UUID on a new reservation pod before it rolls back.")
    reservationRetrySeconds: float = Field(30.0, ge=0, le=3600, description="How long a job whose shared-GPU bind "
                                           "failed waits before it is placed again (doubling on each failure, "
                                           "up to ten times this).")
    reservationWorkers: int = Field(16, ge=1, le=256, description="Shared-GPU binds in flight at once (they "
                                    "wait for reservations apart from whole-GPU binds).")
    runtimeClassName: str = Field("", description="runtimeClassName the webhook gives shared-GPU pods that set "
                                  "none (empty: leave it), e.g. nvidia.")
    cdi: bool = Field(False, description="Name devices the CDI way (k8s.device-plugin.nvidia.com/gpu=<UUID>) in "
                      "NVIDIA_VISIBLE_DEVICES, for a device plugin that uses CDI.")


class WebhookConfig(BaseModel):
    """``kaid webhook``: where it listens and the certificates it makes and rotates itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    port: int = Field(9443, ge=1, le=65535)
    address: str = "0.0.0.0"
    namespace: str = Field("kai-scheduler", pattern=_NAME)
    serviceName: str = Field("kai-webhook", pattern=_NAME, description="Its Service (names in the certificate).")
    secretName: str = Field("kai-webhook-ca", pattern=_NAME, description="Secret holding kai's webhook CA.")
    configurationName: str = Field("kai-webhook", pattern=_NAME, description="Name of the Mutating- and "
                                   "ValidatingWebhookConfiguration whose caBundle it keeps current.")
    hosts: tuple[str, ...] = Field((), description="More names or IP addresses for the serving certificate.")
    certificateHours: float = Field(168.0, ge=1, le=8760, description="Lifetime of a serving certificate; a new "
                                    "one is made when a third of it is left.")
    caDays: float = Field(3650.0, ge=2, le=36500, description="Lifetime of the CA; a new one is made (and both are "
                          "trusted for a while) when a tenth of it is left.")


class NodeAgentConfig(BaseModel):
    """``kaid node-agent``: GPU memory per pod on one node, through NVML."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    periodSeconds: float = Field(10.0, ge=1, le=3600)
    metricsPort: int = Field(8081, ge=0, le=65535, description="0 turns its metrics server off.")
    metricsAddress: str = "0.0.0.0"
    procRoot: str = Field("/host/proc", min_length=1, description="The host's /proc, to map GPU processes to pods.")
    toleranceMiB: int = Field(256, ge=0, description="GPU memory a shared-GPU pod may use above its share before "
                              "it counts as over it.")
    evictOverShare: bool = Field(False, description="Evict a shared-GPU pod that stays over its share of GPU "
                                 "memory for evictGraceSeconds (off: an event and a PodGroup condition only).")
    evictGraceSeconds: float = Field(300.0, ge=0)
    labelGpuMemory: bool = Field(True, description=f"Label the node {c.GPU_MEMORY_NODE_LABEL} (MiB) when GPU "
                                 "Feature Discovery has not.")


class UsageConfig(BaseModel):
    """Usage history for time-based fair share (KAI's usageDBConfig.usageParams, kept in each Queue's status
    instead of Prometheus; kaid.fairshare.usage)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = Field(False, description="Weigh each queue's recent use in the division of over-quota "
                          "resources (kValue says how strongly).")
    halfLifeSeconds: float = Field(0.0, ge=0, description="Use this long ago counts half (KAI's halfLifePeriod); "
                                   "0: no decay.")
    windowSeconds: float = Field(604800.0, gt=0, description="How far back use counts (KAI's windowSize; one week).")
    windowType: Literal["sliding", "tumbling", "cumulative"] = Field(
        "sliding", description="sliding: the last windowSeconds; tumbling: since the last window boundary (every "
        "windowSeconds from tumblingWindowStart); cumulative: all use since the history began (decay alone "
        "forgets it).")
    tumblingWindowStart: str = Field("1970-01-01T00:00:00Z", description="A boundary of tumbling windows "
                                     "(RFC 3339; KAI's tumblingWindowStartTime).")
    writeIntervalSeconds: float = Field(60.0, gt=0, le=3600, description="How often the leader writes the history "
                                        "to each Queue's status.usage (a new leader continues from there).")

    @field_validator("tumblingWindowStart")
    @classmethod
    def _rfc3339(cls, v: str) -> str:
        try:
            when = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{v!r} is not an RFC 3339 time, e.g. 2026-01-05T00:00:00Z") from None
        if when.tzinfo is None:
            raise ValueError(f"{v!r} needs its zone, e.g. 2026-01-05T00:00:00Z")
        return v


class SchedulerConfig(BaseModel):
    """Everything the engine and the daemon read from the config file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    schedulerName: str = c.DEFAULT_SCHEDULER_NAME
    queueLabelKeys: tuple[str, ...] = (c.QUEUE_LABEL, c.LEGACY_QUEUE_LABEL)
    defaultQueue: str = c.DEFAULT_QUEUE
    placement: PlacementConfig = PlacementConfig()
    actions: tuple[Action, ...] = tuple(Action)
    cyclePeriodSeconds: float = Field(1.0, gt=0, le=600)
    clientQPS: float = Field(50.0, gt=0)
    clientBurst: int = Field(100, ge=1)
    usage: UsageConfig = UsageConfig()
    unmentionedQueueResources: Literal["unmanaged", "kai"] = Field(
        "unmanaged", description="A resource a Queue's spec.resources does not mention: 'unmanaged' (no guarantee, "
        "no limit, weight 1) or 'kai' (KAI's reading: quota 0 and limit 0, so its pods that ask for it never run).")
    kValue: float = Field(1.0, ge=0, description="How strongly usage history moves over-quota weights (KAI's "
                          "proportion kValue): a queue's weight share w becomes max(0, w + kValue * (w - u)), u its "
                          "use over the window as a share of the cluster's capacity. Used only with usage on.")
    staleGangGraceSeconds: float = Field(60.0, description="Negative means never evict stale gangs.")
    maxConsolidationMoves: int = Field(8, ge=0)
    maxVictimSearches: int = Field(64, ge=0, description="Pending jobs each of reclaim and preempt may try per "
                                   "cycle; the rest wait for the next cycle (bounds the cycle on deep backlogs).")
    maxVictimScenarios: int = Field(256, ge=0, description="Victim scenarios (a set of victims evicted and the jobs "
                                    "involved placed again) each of reclaim, preempt and consolidate may simulate per "
                                    "cycle, one job a quarter of them; the job being searched when they run out and "
                                    "the rest wait for the next cycle (bounds the cycle on large clusters, where a "
                                    "search can walk thousands of victims).")
    leaderElection: LeaderElectionConfig = LeaderElectionConfig()
    metricsPort: int = Field(8080, ge=0, le=65535, description="0 turns the metrics and health server off.")
    metricsAddress: str = Field("0.0.0.0", description="Address the metrics and health server listens on.")
    createPodGroups: bool = Field(True, description="Make a PodGroup for every workload that names none.")
    earlyFirstCycle: bool = Field(True, description="At start, bind pending pods while the pod list still arrives "
                                  "(allocate only, on the pods on nodes listed apart); see kaid.kube.startup.")
    gpuSharing: GpuSharingConfig = GpuSharingConfig()
    webhook: WebhookConfig = WebhookConfig()
    nodeAgent: NodeAgentConfig = NodeAgentConfig()
    nodePoolLabelKey: str = Field(NODE_POOL_LABEL, description="The label whose value puts a node, a Queue or a "
                                  "PodGroup in a scheduling shard (KAI's --nodepool-label-key); empty: this scheduler "
                                  "takes every one, labelled or not.")
    partitionLabelValue: str = Field("", description="The shard this scheduler serves "
                                     "(KAI's --partition-label-value): it takes only the nodes, Queues and PodGroups "
                                     "whose nodePoolLabelKey label has this value; empty: only those without the "
                                     "label (the default shard).")

    restrictSchedulingNodes: bool = Field(False, description="KAI's restrictSchedulingNodes: only nodes labelled "
                                          "gpuWorkerNodeLabelKey or cpuWorkerNodeLabelKey are scheduled to (the "
                                          "others are left out, their GPUs outside every queue's share), pods asking "
                                          "for GPUs only to GPU workers, the others only to CPU workers.")
    gpuWorkerNodeLabelKey: str = Field(GPU_WORKER_LABEL, description="The label (any value) of a GPU worker node "
                                       "(KAI's --gpu-worker-node-label-key); read with restrictSchedulingNodes.")
    cpuWorkerNodeLabelKey: str = Field(CPU_WORKER_LABEL, description="The label (any value) of a CPU worker node "
                                       "(KAI's --cpu-worker-node-label-key); read with restrictSchedulingNodes.")

    @field_validator("nodePoolLabelKey")
    @classmethod
    def _label_key(cls, v: str) -> str:
        if v and not is_label_key(v):
            raise ValueError(f"{v!r} is not a label key (such as {NODE_POOL_LABEL}); empty takes every object")
        return v

    @field_validator("gpuWorkerNodeLabelKey", "cpuWorkerNodeLabelKey")
    @classmethod
    def _worker_key(cls, v: str) -> str:
        if not is_label_key(v):
            raise ValueError(f"{v!r} is not a label key (such as {GPU_WORKER_LABEL})")
        return v

    @field_validator("partitionLabelValue")
    @classmethod
    def _label_value(cls, v: str) -> str:
        if not _LABEL_VALUE.fullmatch(v):
            raise ValueError(f"{v!r} is not a label value: at most 63 letters, digits, '-', '_' or '.', beginning "
                             "and ending with a letter or digit (empty: the default shard)")
        return v

    @model_validator(mode="after")
    def _value_needs_key(self) -> SchedulerConfig:
        if self.partitionLabelValue and not self.nodePoolLabelKey:
            raise ValueError(f"partitionLabelValue {self.partitionLabelValue!r} needs a nodePoolLabelKey (such as "
                             f"{NODE_POOL_LABEL}) to be read from; without one this scheduler takes every object")
        return self


def load_config(path: str | Path | None) -> SchedulerConfig:
    """Read and validate a YAML config; raise ValueError naming the file, field and fix."""
    if path is None:
        return SchedulerConfig()
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except OSError as err:
        raise ValueError(f"cannot read config file {p}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"config file {p} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"config file {p} must be a mapping of settings, got {type(data).__name__}")
    try:
        return SchedulerConfig.model_validate(data)
    except ValidationError as err:
        hints = []
        for item in err.errors():
            if item.get("type") == "extra_forbidden" and item.get("loc"):
                *parent, key = [str(x) for x in item["loc"]]
                model: Any = SchedulerConfig
                for part in parent:
                    model = getattr(model.model_fields.get(part), "annotation", None)
                fields = list(getattr(model, "model_fields", {}))
                close = difflib.get_close_matches(key, fields, n=1)
                if close:
                    hints.append(f"did you mean {'.'.join([*parent, close[0]])}?")
        raise ValueError(f"config file {p}: {validation_message(err)}" + (f" ({'; '.join(hints)})" if hints else "")
                         ) from None
