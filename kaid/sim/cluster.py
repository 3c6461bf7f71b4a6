"""The simulated cluster: kai's embedded default. Jobs arrive by a trace, the engine schedules them in
virtual time, bound pods run for their duration and finish. No Kubernetes needed."""

from __future__ import annotations

import heapq
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kaid.actions.memory import SearchMemory
from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.api.meta import format_time
from kaid.cycle import Decisions, run_cycle
from kaid.fairshare import UsageHistory, UsageParams
from kaid.model.build import build_snapshot
from kaid.model.vocabulary import GPU
from kaid.sim.apply import bind_pod, mark_stale, pipeline_pod, reset_pod
from kaid.sim.workload import JobSpec, QueueLoad, WorkloadProfile

Obj = dict[str, Any]
NAMESPACE = "sim"
EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: virtual time zero


def gpu_node(name: str, gpus: int = 8, cpu: str = "128", memory: str = "2Ti", gpu_memory_mib: int = 81920,
             labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {c.GPU_MEMORY_NODE_LABEL: str(gpu_memory_mib),
                                                   c.GPU_PRODUCT_NODE_LABEL: "NVIDIA-H100-80GB-HBM3",
                                                   "kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110", c.GPU_RESOURCE: str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def queue_obj(name: str, parent: str | None = None, gpu_quota: float = -1, gpu_limit: float = -1,
              weight: float = 1, priority: int = 100) -> Obj:
    spec: Obj = {"priority": priority, "resources": {
        "gpu": {"quota": gpu_quota, "limit": gpu_limit, "overQuotaWeight": weight},
        "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": weight},
        "memory": {"quota": -1, "limit": -1, "overQuotaWeight": weight}}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": f"{c.SCHEDULING_GROUP}/{c.QUEUE_VERSION}", "kind": "Queue", "metadata": {"name": name},
            "spec": spec}


def builtin_cluster(nodes: int = 16, gpus: int = 8) -> list[Obj]:
    """16 nodes of 8 H100s in 2 zones, and a queue tree of two teams, research and inference."""
    objs = [gpu_node(f"gpu-{i:03d}", gpus, labels={"topology.kubernetes.io/zone": f"zone-{i % 2}"})
            for i in range(nodes)]
    total = nodes * gpus
    objs += [
        queue_obj("engineering", gpu_quota=round(total * 0.5625)),
        queue_obj("team-a", "engineering", gpu_quota=round(total * 0.3125)),
        queue_obj("team-b", "engineering", gpu_quota=round(total * 0.25)),
        queue_obj("research", gpu_quota=round(total * 0.1875), weight=2),
        queue_obj("inference", gpu_quota=round(total * 0.25), priority=150),
    ]
    return objs


def builtin_profile(seed: int = 0, hours: float = 6.0) -> WorkloadProfile:
    return WorkloadProfile(queues=(
        QueueLoad("team-a", 40.0, {"train": 0.75, "interactive": 0.20, "inference": 0.05}, 64),
        QueueLoad("team-b", 24.0, {"train": 0.70, "interactive": 0.25, "inference": 0.05}, 32),
        QueueLoad("research", 12.0, {"train": 0.95, "interactive": 0.05}, 64),
        QueueLoad("inference", 10.0, {"inference": 0.85, "train": 0.15}, 8),
    ), hours=hours, seed=seed)


def job_objects(job: JobSpec, now: float) -> list[Obj]:
    created = format_time(now)
    objs: list[Obj] = [{
        "apiVersion": f"{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}", "kind": "PodGroup",
        "metadata": {"name": job.name, "namespace": NAMESPACE, "creationTimestamp": created},
        "spec": {"minMember": job.min_member, "queue": job.queue, "priorityClassName": job.priority_class}}]
    for i in range(job.pods):
        requests: Obj = {"cpu": f"{job.cpu_milli_per_pod}m", "memory": f"{job.memory_mb_per_pod}M"}
        annotations = {c.POD_GROUP_ANNOTATION: job.name}
        if job.gpus_per_pod >= 1:
            requests[c.GPU_RESOURCE] = str(int(job.gpus_per_pod))
        elif job.gpus_per_pod > 0:
            annotations[c.GPU_FRACTION_ANNOTATION] = f"{job.gpus_per_pod:g}"
        objs.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"{job.name}-{i}", "namespace": NAMESPACE, "creationTimestamp": created,
                                  "annotations": annotations, "labels": {c.QUEUE_LABEL: job.queue}},
                     "spec": {"schedulerName": c.DEFAULT_SCHEDULER_NAME,
                              "containers": [{"name": "main", "resources": {"requests": requests}}]},
                     "status": {"phase": "Pending"}})
    return objs


@dataclass
class JobRun:
    spec: JobSpec
    bound: int = 0
    start: float | None = None
    end: float | None = None
    restarts: int = 0


@dataclass
class Sample:
    t: float
    allocated_gpus: float
    pending_jobs: int
    queues: dict[str, tuple[float, float]]  # name -> (allocated GPUs, fair share GPUs)


@dataclass
class SimResult:
    hours: float
    capacity_gpus: float
    samples: list[Sample] = field(default_factory=list)
    runs: dict[str, JobRun] = field(default_factory=dict)
    cycles: int = 0
    binds: int = 0
    evictions: dict[str, int] = field(default_factory=dict)  # action -> pods evicted
    leaves: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        queues: dict[str, Any] = {}
        for q in self.leaves:
            runs = [r for r in self.runs.values() if r.spec.queue == q]
            waits = [r.start - r.spec.arrival_s for r in runs if r.start is not None]
            alloc = [s.queues.get(q, (0.0, 0.0))[0] for s in self.samples]
            fair = [s.queues.get(q, (0.0, 0.0))[1] for s in self.samples]
            queues[q] = {
                "submitted": len(runs), "started": len(waits), "finished": sum(1 for r in runs if r.end is not None
                                                                               and r.end <= self.hours * 3600),
                "avgAllocatedGPUs": round(statistics.fmean(alloc), 2) if alloc else 0.0,
                "avgFairShareGPUs": round(statistics.fmean(fair), 2) if fair else 0.0,
                "medianWaitS": round(statistics.median(waits), 1) if waits else None,
                "p90WaitS": round(_pct(waits, 0.9), 1) if waits else None,
            }
        gangs: dict[str, Any] = {}
        for label, lo, hi in (("1 GPU", 0, 1), ("2-8 GPUs", 2, 8), ("16-64 GPUs", 9, 64), ("128+ GPUs", 65, 10**9)):
            runs = [r for r in self.runs.values() if lo <= r.spec.pods * r.spec.gpus_per_pod <= hi
                    and r.spec.gpus_per_pod >= 1]
            waits = [r.start - r.spec.arrival_s for r in runs if r.start is not None]
            gangs[label] = {"jobs": len(runs), "started": len(waits),
                            "medianWaitS": round(statistics.median(waits), 1) if waits else None}
        util = [s.allocated_gpus / self.capacity_gpus for s in self.samples] if self.capacity_gpus else []
        return {"hours": self.hours, "capacityGPUs": self.capacity_gpus, "cycles": self.cycles, "binds": self.binds,
                "evictions": dict(sorted(self.evictions.items())),
                "restarts": sum(r.restarts for r in self.runs.values()),
                "meanAllocation": round(statistics.fmean(util), 3) if util else 0.0,
                "queues": queues, "gangs": gangs, "problems": self.problems,
                "timeline": [{"t": s.t, "allocatedGPUs": s.allocated_gpus, "pendingJobs": s.pending_jobs,
                              "queues": {k: {"allocated": v[0], "fairShare": v[1]} for k, v in s.queues.items()}}
                             for s in self.samples]}


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def simulate(base: Iterable[Obj], jobs: list[JobSpec], cfg: SchedulerConfig, hours: float,
             cycle_s: float = 30.0, sample_s: float = 300.0,
             progress: Callable[[float], None] | None = None,
             on_cycle: Callable[[float, float, float, list[Obj]], None] | None = None) -> SimResult:
    """Run the engine over the trace in virtual time, ``cycle_s`` between cycles: jobs arrive, finished jobs
    leave, a cycle runs when anything changed or, with usage history on, while jobs wait (their queues' fair
    shares move as use ages); its decisions are applied as the daemon and the kubelet would, and the queues are
    sampled every ``sample_s``. ``on_cycle(t, cpu_s, wall_s, objects)`` is called after each cycle with its
    virtual time, the CPU and wall seconds it took (snapshot, decisions, applying them; the CPU time is the
    process's, unmoved by other processes on the machine) and the objects as the cycle left them."""
    sim = _Simulation(base, jobs, cfg, hours, cycle_s)
    horizon = hours * 3600.0
    t = 0.0
    last_sample = -sample_s
    while t <= horizon:
        arrived = sim.arrive(t)
        finished = sim.finish(t)
        # with usage history, fair shares move as time passes: a cycle while anything waits
        if arrived or finished or sim.dirty or (sim.usage is not None and sim.pending_jobs):
            started, cpu = time.perf_counter(), time.process_time()
            sim.cycle(t)
            if on_cycle is not None:
                on_cycle(t, time.process_time() - cpu, time.perf_counter() - started, sim.objs)
        if t - last_sample >= sample_s:
            sim.sample(t)
            last_sample = t
        if progress is not None:
            progress(min(1.0, t / horizon) if horizon else 1.0)
        t += cycle_s
    return sim.result


class _Simulation:
    """The simulated cluster's state between cycles: its objects, the jobs' progress, what to sample."""

    def __init__(self, base: Iterable[Obj], jobs: list[JobSpec], cfg: SchedulerConfig, hours: float,
                 cycle_s: float) -> None:
        self.cfg = cfg
        self.cycle_s = cycle_s
        self.objs: list[Obj] = [dict(o) for o in base]
        self.arrivals = sorted(jobs, key=lambda j: (j.arrival_s, j.name))
        self.next_arrival = 0
        self.runs = {j.name: JobRun(j) for j in self.arrivals}
        self.pods_by_key: dict[str, Obj] = {}
        self.ends: list[tuple[float, str]] = []  # (end, job name), a heap
        self.result = SimResult(hours, 0.0, runs=self.runs)
        self.usage = UsageHistory(UsageParams.of(cfg.usage)) if cfg.usage.enabled else None
        self.dirty = True  # the last cycle changed something: the next one may decide more
        self.last_q: dict[str, tuple[float, float]] = {}
        self.last_alloc = 0.0
        self.pending_jobs = 0
        self.memory = SearchMemory()  # the vain victim searches of the last cycle, as the daemon keeps them

    def arrive(self, t: float) -> bool:
        """The jobs that arrive by ``t`` are created; whether any did."""
        first = self.next_arrival
        while self.next_arrival < len(self.arrivals) and self.arrivals[self.next_arrival].arrival_s <= t:
            job = self.arrivals[self.next_arrival]
            for o in job_objects(job, EPOCH + job.arrival_s):
                self.objs.append(o)
                if o["kind"] == "Pod":
                    self.pods_by_key[meta.object_key(o)] = o
            self.next_arrival += 1
        return self.next_arrival > first

    def finish(self, t: float) -> bool:
        """The jobs that end by ``t`` leave with their pods; whether any did."""
        finished: set[str] = set()
        while self.ends and self.ends[0][0] <= t:
            end, name = heapq.heappop(self.ends)
            if self.runs[name].end == end:  # an evicted job restarted: its old end is void
                finished.add(name)
        if finished:
            self.objs = [o for o in self.objs if not _belongs(o, finished)]
            for k in [k for k, o in self.pods_by_key.items() if _belongs(o, finished)]:
                del self.pods_by_key[k]
        return bool(finished)

    def cycle(self, t: float) -> None:
        cfg = self.cfg
        snap = build_snapshot(self.objs, cfg, EPOCH + t)
        if self.usage is not None:  # the same history the daemon keeps, in virtual time
            self.usage.observe(snap)
        if not self.result.capacity_gpus:
            self.result.capacity_gpus = snap.capacity()[GPU] / 1000
            self.result.leaves = sorted(q.name for q in snap.queues.values() if not q.children)
            self.result.problems = [p.reason.message for p in snap.problems]
        decisions = run_cycle(snap, cfg, memory=self.memory)
        self.memory = decisions.memory or SearchMemory()
        self.result.cycles += 1
        self._bind(decisions, t)
        moved = {b.pod for b in decisions.pipelined}
        for b in decisions.pipelined:
            obj = self.pods_by_key.get(b.pod)
            if obj is not None:
                pipeline_pod(obj, b)
        self._evict(decisions, moved)
        if decisions.stale:
            mark_stale(self.objs, decisions.stale, decisions.stale_pods)
        self.result.binds += len(decisions.binds)
        self.dirty = bool(decisions.binds or decisions.evictions or decisions.pipelined)
        self.last_q = {row.name: (float(row.allocated_final["gpu"]), float(row.fair_share["gpu"]))
                       for row in decisions.queues}
        self.last_alloc = sum(v[0] for k, v in self.last_q.items() if k in self.result.leaves)
        self.pending_jobs = len(decisions.pending)
        snap.release()  # done with: freed now, not left to the garbage collector (``Snapshot.release``)

    def _bind(self, decisions: Decisions, t: float) -> None:
        """Bound pods run at once; a job runs once minMember of its pods do, and ends after its duration."""
        for b in decisions.binds:
            obj = self.pods_by_key.get(b.pod)
            if obj is None:
                continue
            bind_pod(obj, b, EPOCH + t)
            run = self.runs[b.job.split("/", 1)[1]]
            run.bound += 1
            if run.start is None and run.bound >= run.spec.min_member:
                run.start = t
                run.end = t + run.spec.duration_s
                heapq.heappush(self.ends, (run.end, run.spec.name))

    def _evict(self, decisions: Decisions, moved: set[str]) -> None:
        """Evicted pods are made again by their controller (moved ones wait for their new node); a job that
        falls below minMember loses its progress."""
        for e in decisions.evictions:
            obj = self.pods_by_key.get(e.pod)
            if obj is None:
                continue
            run = self.runs[e.job.split("/", 1)[1]]
            run.bound = max(0, run.bound - 1)
            self.result.evictions[e.action] = self.result.evictions.get(e.action, 0) + 1
            if e.pod in moved:
                continue
            reset_pod(obj)  # its controller makes it again: it waits to be scheduled anew
            if run.start is not None and run.bound < run.spec.min_member:
                run.start = run.end = None  # the job lost its progress and starts over
                run.restarts += 1

    def sample(self, t: float) -> None:
        self.result.samples.append(Sample(t, self.last_alloc, self.pending_jobs, dict(self.last_q)))


def _belongs(obj: Obj, jobs: set[str]) -> bool:
    if meta.meta(obj).get("namespace") != NAMESPACE:
        return False
    if obj.get("kind") == "PodGroup":
        return meta.name(obj) in jobs
    if obj.get("kind") == "Pod":
        return meta.annotations_of(obj).get(c.POD_GROUP_ANNOTATION) in jobs
    return False
