"""KAI-Scheduler's scheduler tests restated as data (``kai/FORMAT.md`` beside this file): the typed model of
one scenario file and its loader. Unknown keys fail loudly, so that a field the translation does not read
cannot be ignored by accident."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

UNLIMITED = -1


class ScenarioFormatError(Exception):
    """A scenario file that does not follow FORMAT.md."""


class Category(StrEnum):
    ALLOCATE = "allocate"
    PREEMPT = "preempt"
    RECLAIM = "reclaim"
    CONSOLIDATION = "consolidation"
    CONSOLIDATION_AND_RECLAIM = "consolidation_and_reclaim"
    STALE_GANG = "stalegangeviction"


class MatchMode(StrEnum):
    PROJECTED = "projected"
    RAW_SESSION = "raw_session"


class TaskState(StrEnum):
    """A task's status, as KAI names it (in inputs and in expectations)."""

    PENDING = "Pending"
    RUNNING = "Running"
    RELEASING = "Releasing"
    STUCK_IN_RELEASING = "StuckInReleasing"
    PIPELINED = "Pipelined"
    BINDING = "Binding"
    FAILED = "Failed"  # a finished pod (kai-actions' stale-gang tests)
    SUCCEEDED = "Succeeded"


@dataclass(frozen=True, slots=True)
class Amount:
    """One resource of a queue: quota, limit and over-quota weight, -1 meaning unlimited."""

    quota: float
    limit: float
    over_quota_weight: float


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    gpus: int
    cpu_millis: int
    memory_mb: float  # an int unless the test asks for less than whole MB (KAI's byte-sized memory tests)
    gpu_memory_mib: int
    labels: dict[str, str]


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    parent: str | None
    priority: int
    created_offset_minutes: int
    gpu: Amount
    cpu: Amount
    memory: Amount
    reclaim_min_runtime_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class TopologyConstraintSpec:
    topology: str
    required_level: str | None
    preferred_level: str | None


@dataclass(frozen=True, slots=True)
class PodSetSpec:
    name: str
    min_available: int
    topology_constraint: TopologyConstraintSpec | None = None  # a sub-group's own (kai-actions' topology tests)


@dataclass(frozen=True, slots=True)
class SubGroupSpec:
    """A sub-group set: pod sets (leaves) and child sets; ``min_subgroup`` None means all members."""

    name: str
    pod_sets: tuple[PodSetSpec, ...]
    children: tuple[SubGroupSpec, ...]
    min_subgroup: int | None
    topology_constraint: TopologyConstraintSpec | None = None


@dataclass(frozen=True, slots=True)
class TaskSpec:
    name: str
    state: TaskState
    node: str | None
    gpu_groups: tuple[str, ...]
    subgroup: str | None
    priority: int | None
    node_affinity: tuple[str, ...] = ()  # required node affinity: the node's kai.scheduler/type label is one of these
    gpus: int | None = None  # this task's own whole-GPU request, replacing the job's gpus_per_task
    pod_labels: dict[str, str] = field(default_factory=dict)  # the pod's own labels (also its affinity terms' selector)
    pod_affinity_topology_key: str | None = None  # required pod affinity to pods with pod_labels, within this domain
    pod_anti_affinity_topology_key: str | None = None  # required pod anti-affinity, likewise


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    queue: str
    priority: int
    preemptible: bool
    gpus_per_task: float
    gpu_memory_mib: int | None
    cpu_millis: int
    memory_mb: float  # an int unless the test asks for less than whole MB (KAI's byte-sized memory tests)
    created_minutes_ago: int
    min_member: int | None
    subgroups: SubGroupSpec | None
    topology_constraint: TopologyConstraintSpec | None
    tasks: tuple[TaskSpec, ...]
    preemption_delay_seconds: float | None = None  # PodGroup spec.preemptionDelay
    stale_for_seconds: float | None = None  # the job has been stale (below its gang minimum) this long already
    staleness_grace_period_seconds: float | None = None  # PodGroup spec.stalenessGracePeriod
    gpu_fraction_devices: int | None = None  # a shared-GPU pod's gpu-fraction-num-devices (devices it spans)


@dataclass(frozen=True, slots=True)
class Expectation:
    """What KAI asserts about a job (every task of it) or one task."""

    status: TaskState
    node: str | None
    gpus_required: float


@dataclass(frozen=True, slots=True)
class MaxPerRound:
    binds: int
    evictions: int
    pipelines: int


@dataclass(frozen=True, slots=True)
class Scenario:
    path: Path
    name: str
    category: Category
    source: str
    source_line: int
    actions: tuple[str, ...]
    match_mode: MatchMode
    rounds: int
    rounds_after_match: int
    nodes: tuple[NodeSpec, ...]
    topologies: dict[str, tuple[str, ...]]
    queues: tuple[QueueSpec, ...]
    jobs: tuple[JobSpec, ...]
    expected_jobs: dict[str, Expectation]
    expected_tasks: dict[str, Expectation]
    max_per_round: MaxPerRound
    notes: tuple[str, ...] = field(default=())
    stale_gang_grace_seconds: float = 0.0  # the session's default staleness grace period (FORMAT.md: 0)

    @property
    def id(self) -> str:
        return self.path.stem

    def job_of_task(self, task: str) -> JobSpec:
        return next(j for j in self.jobs if any(t.name == task for t in j.tasks))


def _only(data: dict[str, Any], allowed: set[str], where: str) -> dict[str, Any]:
    unknown = set(data) - allowed
    if unknown:
        raise ScenarioFormatError(f"{where}: unknown keys {sorted(unknown)}")
    return data


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


def _mb(value: Any) -> float:
    """Memory in MB: an int when whole (the objects read ``1000M``), else the exact fraction (``0.002M``: 2000 B)."""
    f = float(value)
    return int(f) if f.is_integer() else f


def _amount(data: dict[str, Any]) -> Amount:
    _only(data, {"quota", "limit", "over_quota_weight"}, "queue resource")
    return Amount(float(data["quota"]), float(data["limit"]), float(data["over_quota_weight"]))


def _node(data: dict[str, Any]) -> NodeSpec:
    _only(data, {"name", "gpus", "cpu_millis", "memory_mb", "gpu_memory_mib", "labels"}, "node")
    return NodeSpec(str(data["name"]), int(data.get("gpus", 0)), int(data.get("cpu_millis", 20_000_000)),
                    _mb(data.get("memory_mb", 20_000)), int(data.get("gpu_memory_mib", 100)),
                    {str(k): str(v) for k, v in (data.get("labels") or {}).items()})


def _queue(data: dict[str, Any]) -> QueueSpec:
    _only(data, {"name", "parent", "kind", "priority", "created_offset_minutes", "gpu", "cpu", "memory",
                 "reclaim_min_runtime_seconds"}, "queue")
    rmr = data.get("reclaim_min_runtime_seconds")
    return QueueSpec(str(data["name"]), data.get("parent"), int(data.get("priority", 100)),
                     int(data.get("created_offset_minutes", 0)), _amount(data["gpu"]), _amount(data["cpu"]),
                     _amount(data["memory"]), None if rmr is None else float(rmr))


def _topology(data: dict[str, Any] | None) -> TopologyConstraintSpec | None:
    if not data:
        return None
    _only(data, {"topology", "required_level", "preferred_level"}, "topology_constraint")
    return TopologyConstraintSpec(str(data["topology"]), data.get("required_level"), data.get("preferred_level"))


def _pod_set(data: dict[str, Any]) -> PodSetSpec:
    _only(data, {"name", "min_available", "topology_constraint"}, "pod set")
    return PodSetSpec(str(data["name"]), int(data["min_available"]), _topology(data.get("topology_constraint")))


def _subgroups(data: dict[str, Any]) -> SubGroupSpec:
    _only(data, {"name", "min_subgroup", "pod_sets", "children", "topology_constraint"}, "subgroups")
    return SubGroupSpec(
        str(data["name"]),
        tuple(_pod_set(p) for p in data.get("pod_sets") or []),
        tuple(_subgroups(c) for c in data.get("children") or []),
        None if data.get("min_subgroup") is None else int(data["min_subgroup"]),
        _topology(data.get("topology_constraint")))


def _task(data: dict[str, Any]) -> TaskSpec:
    _only(data, {"name", "state", "node", "gpu_groups", "subgroup", "priority", "node_affinity", "gpus", "pod_labels",
                 "pod_affinity_topology_key", "pod_anti_affinity_topology_key"}, "task")
    return TaskSpec(str(data["name"]), TaskState(data["state"]), data.get("node"),
                    tuple(str(g) for g in data.get("gpu_groups") or ()), data.get("subgroup"),
                    None if data.get("priority") is None else int(data["priority"]),
                    tuple(str(n) for n in data.get("node_affinity") or ()),
                    None if data.get("gpus") is None else int(data["gpus"]),
                    {str(k): str(v) for k, v in (data.get("pod_labels") or {}).items()},
                    data.get("pod_affinity_topology_key"), data.get("pod_anti_affinity_topology_key"))


def _job(data: dict[str, Any]) -> JobSpec:
    _only(data, {"name", "queue", "priority", "preemptible", "gpus_per_task", "gpu_memory_mib", "cpu_millis",
                 "memory_mb", "created_minutes_ago", "min_member", "subgroups", "topology_constraint", "tasks",
                 "preemption_delay_seconds", "stale_for_seconds", "staleness_grace_period_seconds",
                 "gpu_fraction_devices"}, "job")
    topo = data.get("topology_constraint")
    return JobSpec(
        str(data["name"]), str(data["queue"]), int(data.get("priority", 0)), bool(data["preemptible"]),
        float(data.get("gpus_per_task", 0)), data.get("gpu_memory_mib"), int(data.get("cpu_millis", 1000)),
        _mb(data.get("memory_mb", 1000)), int(data.get("created_minutes_ago", 0)),
        None if data.get("min_member") is None else int(data["min_member"]),
        _subgroups(data["subgroups"]) if data.get("subgroups") else None,
        _topology(topo),
        tuple(_task(t) for t in data["tasks"]),
        _seconds(data.get("preemption_delay_seconds")), _seconds(data.get("stale_for_seconds")),
        _seconds(data.get("staleness_grace_period_seconds")),
        None if data.get("gpu_fraction_devices") is None else int(data["gpu_fraction_devices"]))


def _expectation(data: dict[str, Any]) -> Expectation:
    _only(data, {"status", "node", "gpus_required", "cpu_millis_required", "memory_mb_required", "error_message",
                 "unverified_gpu_groups"}, "expectation")
    return Expectation(TaskState(data["status"]), data.get("node"), float(data.get("gpus_required", 0)))


def load_scenario(path: Path) -> Scenario:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ScenarioFormatError(f"{path.name}: not a mapping")
    _only(data, {"name", "category", "source", "source_line", "actions", "match_mode", "rounds",
                 "rounds_after_match", "nodes", "topologies", "queues", "jobs", "expected", "notes",
                 "stale_gang_grace_seconds"}, path.name)
    expected = _only(data["expected"], {"jobs", "tasks", "max_per_round"}, f"{path.name} expected")
    mpr = expected.get("max_per_round") or {}
    return Scenario(
        path, str(data["name"]), Category(data["category"]), str(data["source"]), int(data["source_line"]),
        tuple(data["actions"]), MatchMode(data.get("match_mode", "projected")), int(data.get("rounds") or 2),
        int(data.get("rounds_after_match", 5)), tuple(_node(n) for n in data["nodes"]),
        {str(t["name"]): tuple(t["levels"]) for t in data.get("topologies") or []},
        tuple(_queue(q) for q in data["queues"]), tuple(_job(j) for j in data["jobs"]),
        {str(k): _expectation(v) for k, v in (expected.get("jobs") or {}).items()},
        {str(k): _expectation(v) for k, v in (expected.get("tasks") or {}).items()},
        MaxPerRound(int(mpr.get("binds", 0)), int(mpr.get("evictions", 0)), int(mpr.get("pipelines", 0))),
        tuple(data.get("notes") or ()), float(data.get("stale_gang_grace_seconds") or 0.0))
