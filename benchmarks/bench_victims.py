"""Reclaim and preempt on a full cluster: CP-SAT victim selection against the first-fit scan.

Run from the repository root::

    python -m benchmarks.bench_victims                      # full size: 1,000 nodes, every GPU in use
    python -m benchmarks.bench_victims --json out.json      # also write the report as JSON
    python -m benchmarks.bench_victims --profile cpsat      # cProfile of one cycle instead of the timings

The cluster and the workload are deterministic for a seed (``--seed``), built once, and fed to the engine
as plain Kubernetes dicts (the simulator's ``gpu_node``, ``queue_obj`` and ``job_objects`` helpers):

- Nodes: ``--nodes`` nodes of 8 GPUs, every GPU held by a running pod (no idle GPU anywhere).
- Queues: 3 departments of leaf queues (``QUEUES``). *Owners* run little and have the pending
  reclaimers; their quota is exactly what they run plus what they wait for, so their fair share is
  what they request. *Borrowers* run far above their quota; their quotas are set so that, in all, they
  are above their fair share by what the owners wait for: half of each owner department's pending
  GPUs inside the department (``a-2``, ``b-2``), the other half in department ``c``, which only borrows.
  So reclaim takes from a sibling queue and across departments.
- Running work: per queue a GPU budget filled with jobs of mixed shapes (``RUNNING_SHAPES``: single
  pods of 1, 2, 4 or 8 GPUs, gangs of 8-, 4- and 1-GPU pods, some with elastic pods beyond
  ``minMember``), priorities ``train`` (50) and ``build-preemptible`` (75) with a share of
  non-preemptible jobs (``build`` (100), or ``train`` with ``spec.preemptibility: non-preemptible``),
  and start times spread over ``START_SPREAD_S`` so that the running time lost differs from victim to
  victim. Pods are packed largest first onto the nodes, each job from a random node onward, so jobs
  of different queues and priorities share nodes.
- Pending reclaimers (``--reclaimers``) in the owner queues: single GPUs and gangs of 2 to 64 pods of 1
  or 8 GPUs. Pending preemptors (``--preemptors``) in the borrower queues: higher-priority jobs
  (``build-preemptible``, ``build``, ``inference``) in the same queues as the running low-priority work.

For each solver (``cpsat``: ``placement.victimSolver`` = ``cpsat``, CP-SAT victims with first-fit as the
fallback; ``greedy``: the default ``first-fit``, KAI's victim order; gang placement is the default in both) and
each of ``--repeat`` repeats, in the same process, alternating which solver goes first: build a snapshot and
time one ``run_cycle`` with every action, and one with only
``allocate`` (on a full cluster it places nothing, so the difference is the cost of the eviction
actions). The report has the GPUs and pods evicted, the GPUs placed onto them (pipelined), the
decisions, and, per job that both solvers served, which evicted fewer GPUs. Then one untimed
*same-state* pass: a cpsat cycle in which, before each victim search, the first-fit search runs on the
same session and is rolled back, so that both are compared on identical inputs job by job. Nothing
here asserts on time.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import inspect
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from benchmarks.common import fmt as _fmt
from benchmarks.common import machine_info, output_args, profile, profile_args, write_report
from benchmarks.common import ratio as _ratio
from benchmarks.common import timing as _timing
from kaid.actions import evictions
from kaid.api import constants as c
from kaid.api.config import PlacementConfig, SchedulerConfig
from kaid.api.meta import format_time
from kaid.cycle import Decisions, Eviction, run_cycle
from kaid.model.build import build_snapshot
from kaid.sim.cluster import EPOCH, NAMESPACE, gpu_node, job_objects, queue_obj
from kaid.sim.workload import JobSpec

Obj = dict[str, Any]

SOLVERS: Final[tuple[str, str]] = ("cpsat", "greedy")
SLOWEST: Final = 5  # slowest victim searches kept per solver in the report
NOW: Final = EPOCH + 7 * 24 * 3600.0  # the snapshot's clock: a week into virtual time
ALL_ACTIONS: Final = ("allocate", "consolidate", "reclaim", "preempt", "stale-gang")
VICTIM_ACTIONS: Final = ("reclaim", "preempt")

# --- cluster ------------------------------------------------------------------------------------------
GPUS_PER_NODE: Final = 8
CPU_MILLI_PER_GPU: Final = 8000
MEMORY_MB_PER_GPU: Final = 64000


# --- queues -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueueSpec:
    dept: str
    name: str
    owner: bool  # owners wait for GPUs (reclaimers); borrowers run above their share (victims, preemptors)
    running: float  # share of the cluster's GPUs its running pods hold
    reclaimers: float = 0.0  # owners: share of the pending reclaimers submitted here
    over: float = 0.0  # borrowers: share of the owners' pending GPUs by which it runs above its fair share
    weight: int = 1


DEPARTMENTS: Final = ("dept-a", "dept-b", "dept-c")
# The running shares add up to 1 (a full cluster). ``over`` is filled in by ``_quotas``: a-2 and b-2 are
# above their share by half of their own department's pending GPUs, c-0 and c-1 by the rest (60/40).
QUEUES: Final[tuple[QueueSpec, ...]] = (
    QueueSpec("dept-a", "a-0", True, 0.08, reclaimers=0.30),
    QueueSpec("dept-a", "a-1", True, 0.06, reclaimers=0.20),
    QueueSpec("dept-a", "a-2", False, 0.22, weight=2),
    QueueSpec("dept-b", "b-0", True, 0.10, reclaimers=0.30),
    QueueSpec("dept-b", "b-1", True, 0.04, reclaimers=0.20),
    QueueSpec("dept-b", "b-2", False, 0.20),
    QueueSpec("dept-c", "c-0", False, 0.16),
    QueueSpec("dept-c", "c-1", False, 0.14, weight=2),
)
INSIDE_DEPT_OVER: Final = 0.5  # share of a department's pending GPUs taken back inside the department
DEPT_C_SPLIT: Final = {"c-0": 0.6, "c-1": 0.4}

# --- running pods -------------------------------------------------------------------------------------
# (shape, weight by job count, pods per job (choices, each 0.6 times as likely as the one before), GPUs
# per pod (choices))
RUNNING_SHAPES: Final = (
    ("single", 0.58, (1,), (1, 1, 1, 2, 4, 8)),
    ("gang-8", 0.14, (2, 4, 8, 16), (8,)),
    ("gang-4", 0.10, (2, 4, 8), (4,)),
    ("gang-1", 0.18, (2, 4, 8, 16), (1,)),
)
SIZE_DECAY: Final = 0.6
ELASTIC_P: Final = 0.3  # a gang has 1 or 2 elastic pods beyond minMember
NON_PREEMPTIBLE_P: Final = 0.10
BUILD_PREEMPTIBLE_P: Final = 0.30  # the rest (0.60) is train
START_SPREAD_S: Final = (10 * 60.0, 72 * 3600.0)  # jobs started between 10 minutes and 3 days ago

# --- pending pods -------------------------------------------------------------------------------------
RECLAIMER_SHAPES: Final = (("single", 0.5, 1), ("gang-1", 0.25, 1), ("gang-8", 0.25, 8))
RECLAIMER_GANG_SIZES: Final = (2, 4, 8, 16, 32, 64)
RECLAIMER_BP_P: Final = 0.25  # reclaimers in build-preemptible (the rest: train)
MAX_JOB_SHARE: Final = 1 / 15  # no pending job asks for more than this share of the cluster's GPUs
MAX_PENDING_SHARE: Final = 0.20  # the reclaimers ask for at most this share of the cluster's GPUs in all
PREEMPTOR_SHAPES: Final = (("single", 0.6, (1, 2, 4, 8)), ("gang-8", 0.2, (8,)), ("gang-1", 0.2, (1,)))
PREEMPTOR_GANG_SIZES: Final = (2, 4, 8, 16)
PREEMPTOR_CLASSES: Final = (("build-preemptible", 0.4), ("build", 0.3), ("inference", 0.3))


# ======================================================================================= the workload
@dataclass
class Workload:
    objects: list[Obj]
    pod_gpus: dict[str, int]  # pod key -> whole GPUs, for every pod
    reclaimers: set[str] = field(default_factory=set)  # job keys
    preemptors: set[str] = field(default_factory=set)
    job_shape: dict[str, str] = field(default_factory=dict)  # pending job key -> "8 pods x 8 GPUs in a-0 (train)"
    running: dict[str, tuple[float, int, int]] = field(default_factory=dict)  # job key -> (started, minMember, pods)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)  # leaf -> quota, running, pending GPUs
    summary: dict[str, Any] = field(default_factory=dict)


def _spec(name: str, queue: str, pods: int, min_member: int, gpus: int, priority_class: str) -> JobSpec:
    return JobSpec(name=name, queue=queue, arrival_s=0.0, duration_s=3600.0, pods=pods, min_member=min_member,
                   gpus_per_pod=float(gpus), cpu_milli_per_pod=CPU_MILLI_PER_GPU * gpus,
                   memory_mb_per_pod=MEMORY_MB_PER_GPU * gpus, priority_class=priority_class, kind="train")


def _decaying(rng: random.Random, sizes: Sequence[int]) -> int:
    return rng.choices(list(sizes), [SIZE_DECAY ** i for i in range(len(sizes))])[0]


def _largest_pow2(n: int) -> int:
    return 1 << (n.bit_length() - 1)


@dataclass
class _RunningJob:
    spec: JobSpec
    non_preemptible: bool
    started: float


def _running_jobs(queue: str, budget: int, rng: random.Random, serial: Iterator[int]) -> list[_RunningJob]:
    """Jobs that hold exactly ``budget`` GPUs in ``queue``."""
    jobs: list[_RunningJob] = []
    names, weights = [s[0] for s in RUNNING_SHAPES], [s[1] for s in RUNNING_SHAPES]
    while budget > 0:
        shape = RUNNING_SHAPES[names.index(rng.choices(names, weights)[0])]
        gpus = rng.choice(shape[3])
        pods = _decaying(rng, shape[2])
        extra = rng.choice((1, 2)) if shape[0] != "single" and rng.random() < ELASTIC_P else 0
        if (pods + extra) * gpus > budget:  # the last jobs: single pods that fill the budget exactly
            gpus, pods, extra = min(_largest_pow2(budget), GPUS_PER_NODE), 1, 0
        roll = rng.random()
        if roll < NON_PREEMPTIBLE_P:
            pclass, non_preemptible = ("build", False) if rng.random() < 0.5 else ("train", True)
        elif roll < NON_PREEMPTIBLE_P + BUILD_PREEMPTIBLE_P:
            pclass, non_preemptible = "build-preemptible", False
        else:
            pclass, non_preemptible = "train", False
        name = f"run-{queue}-{next(serial):05d}"
        spec = _spec(name, queue, pods + extra, pods, gpus, pclass)
        jobs.append(_RunningJob(spec, non_preemptible, NOW - rng.uniform(*START_SPREAD_S)))
        budget -= (pods + extra) * gpus
    return jobs


def _pack(jobs: list[_RunningJob], nodes: int, rng: random.Random) -> list[tuple[_RunningJob, list[tuple[int, int]]]]:
    """Node and first device of every pod: pods largest first, each job from a random node onward.
    GPU counts are powers of two placed in decreasing order, so every node that is not full has room for
    the current size and the cluster ends exactly full when the jobs hold exactly its GPUs."""
    free = [GPUS_PER_NODE] * nodes
    open_nodes = list(range(nodes))  # nodes with free GPUs, in index order
    out: list[tuple[_RunningJob, list[tuple[int, int]]]] = []
    order = list(jobs)
    rng.shuffle(order)
    order.sort(key=lambda j: -int(j.spec.gpus_per_pod))  # stable: shuffled inside each size
    for job in order:
        gpus = int(job.spec.gpus_per_pod)
        at = rng.randrange(len(open_nodes))
        slots: list[tuple[int, int]] = []
        for _ in range(job.spec.pods):
            at %= len(open_nodes)
            n = open_nodes[at]
            slots.append((n, GPUS_PER_NODE - free[n]))
            free[n] -= gpus
            if free[n] == 0:
                open_nodes.pop(at)
            else:
                at += 1  # the next pod of a gang goes to the next node, as a spread gang would
        out.append((job, slots))
    assert not open_nodes, "the running jobs must fill the cluster exactly"
    return out


def _pending_gang_size(rng: random.Random, gpus: int, cap: int) -> int:
    sizes = [s for s in RECLAIMER_GANG_SIZES if s * gpus <= cap]
    return _decaying(rng, sizes) if sizes else 1


def _reclaimers(count: int, capacity: int, rng: random.Random) -> list[tuple[str, int, int, str]]:
    """(owner queue, pods, GPUs per pod, priority class) per reclaimer, at most MAX_PENDING_SHARE in all."""
    owners = [q for q in QUEUES if q.owner]
    cap = max(2 * GPUS_PER_NODE, math.floor(capacity * MAX_JOB_SHARE))
    budget = math.floor(capacity * MAX_PENDING_SHARE)
    out: list[tuple[str, int, int, str]] = []
    names, weights = [s[0] for s in RECLAIMER_SHAPES], [s[1] for s in RECLAIMER_SHAPES]
    for _ in range(count):
        shape = RECLAIMER_SHAPES[names.index(rng.choices(names, weights)[0])]
        gpus = shape[2]
        pods = 1 if shape[0] == "single" else _pending_gang_size(rng, gpus, min(cap, max(budget, 2 * gpus)))
        while pods > 1 and pods * gpus > budget:
            pods //= 2
        if pods * gpus > budget:
            gpus = pods = 1
        if budget < 1:
            break
        queue = rng.choices([q.name for q in owners], [q.reclaimers for q in owners])[0]
        pclass = "build-preemptible" if rng.random() < RECLAIMER_BP_P else "train"
        out.append((queue, pods, gpus, pclass))
        budget -= pods * gpus
    return out


def _preemptors(count: int, capacity: int, rng: random.Random) -> list[tuple[str, int, int, str]]:
    borrowers = [q for q in QUEUES if not q.owner]
    cap = max(2 * GPUS_PER_NODE, math.floor(capacity * MAX_JOB_SHARE))
    names, weights = [s[0] for s in PREEMPTOR_SHAPES], [s[1] for s in PREEMPTOR_SHAPES]
    out: list[tuple[str, int, int, str]] = []
    for _ in range(count):
        shape = PREEMPTOR_SHAPES[names.index(rng.choices(names, weights)[0])]
        gpus = rng.choice(shape[2])
        pods = 1
        if shape[0] != "single":
            sizes = [s for s in PREEMPTOR_GANG_SIZES if s * gpus <= cap] or [1]
            pods = _decaying(rng, sizes)
        queue = rng.choice([q.name for q in borrowers])
        pclass = rng.choices([p[0] for p in PREEMPTOR_CLASSES], [p[1] for p in PREEMPTOR_CLASSES])[0]
        out.append((queue, pods, gpus, pclass))
    return out


def _running_budgets(capacity: int) -> dict[str, int]:
    budgets = {q.name: round(q.running * capacity) for q in QUEUES}
    last = QUEUES[-1].name
    budgets[last] += capacity - sum(budgets.values())
    return budgets


def _quotas(running: dict[str, int], pending: dict[str, int]) -> dict[str, int]:
    """Leaf quotas (GPUs): an owner's is what it runs plus what it waits for; a borrower's is what it runs
    less what it must give back. The quotas add up to the cluster, so no department gets more than its
    quota as fair share, and the borrowers are above theirs by the owners' pending GPUs in all."""
    dept_pending = {d: sum(pending.get(q.name, 0) for q in QUEUES if q.dept == d and q.owner) for d in DEPARTMENTS}
    inside = {d: math.floor(v * INSIDE_DEPT_OVER) for d, v in dept_pending.items()}
    across = sum(dept_pending.values()) - sum(inside.values())
    over: dict[str, int] = {}
    for q in QUEUES:
        if q.owner:
            continue
        if q.name in DEPT_C_SPLIT:
            over[q.name] = math.floor(across * DEPT_C_SPLIT[q.name])
        else:
            over[q.name] = inside[q.dept]
    over[next(n for n in DEPT_C_SPLIT)] += across - sum(over[n] for n in DEPT_C_SPLIT)
    out: dict[str, int] = {}
    for q in QUEUES:
        if q.owner:
            out[q.name] = running[q.name] + pending.get(q.name, 0)
        else:
            out[q.name] = max(0, running[q.name] - over[q.name])
    return out


def _set_running(objs: list[Obj], job: _RunningJob, slots: list[tuple[int, int]]) -> list[Obj]:
    gpus = int(job.spec.gpus_per_pod)
    pods = [o for o in objs if o["kind"] == "Pod"]
    for o, (node, first) in zip(pods, slots, strict=True):
        o["spec"]["nodeName"] = f"node-{node:04d}"
        o["status"] = {"phase": "Running", "startTime": format_time(job.started)}
        o["metadata"]["annotations"][c.GPU_DEVICES_ANNOTATION] = ",".join(str(d) for d in range(first, first + gpus))
    if job.non_preemptible:
        objs[0]["spec"]["preemptibility"] = c.NON_PREEMPTIBLE
    return objs


def _describe(pods: int, gpus: int, queue: str, pclass: str) -> str:
    return f"{pods} pod{'s' if pods > 1 else ''} x {gpus} GPU{'s' if gpus > 1 else ''} in {queue} ({pclass})"


def build_workload(nodes: int = 1000, reclaimers: int = 40, preemptors: int | None = None,
                   seed: int = 0) -> Workload:
    """The benchmark's full cluster and its pending jobs as plain Kubernetes objects; the same arguments give
    the same objects."""
    if nodes < 2:
        raise ValueError("--nodes must be at least 2")
    if reclaimers < 0 or (preemptors is not None and preemptors < 0):
        raise ValueError("--reclaimers and --preemptors must not be negative")
    if preemptors is None:
        preemptors = reclaimers // 2
    rng = random.Random(f"bench-victims/{seed}")
    capacity = nodes * GPUS_PER_NODE
    budgets = _running_budgets(capacity)
    serial = iter(range(10**9))
    running: list[_RunningJob] = []
    for q in QUEUES:
        running += _running_jobs(q.name, budgets[q.name], rng, serial)
    placed = _pack(running, nodes, rng)
    reclaim = _reclaimers(reclaimers, capacity, rng)
    preempt = _preemptors(preemptors, capacity, rng)
    pending_gpus: dict[str, int] = {}
    for queue, pods, gpus, _ in reclaim:
        pending_gpus[queue] = pending_gpus.get(queue, 0) + pods * gpus
    quotas = _quotas(budgets, pending_gpus)

    objects: list[Obj] = [gpu_node(f"node-{i:04d}", GPUS_PER_NODE) for i in range(nodes)]
    for d in DEPARTMENTS:
        objects.append(queue_obj(d, gpu_quota=sum(quotas[q.name] for q in QUEUES if q.dept == d)))
    for q in QUEUES:
        objects.append(queue_obj(q.name, q.dept, gpu_quota=quotas[q.name], weight=q.weight))
    wl = Workload(objects, {})
    counts = {"running_jobs": 0, "running_pods": 0, "running_gangs": 0, "running_elastic_pods": 0,
              "running_non_preemptible_jobs": 0, "running_build_preemptible_jobs": 0, "running_train_jobs": 0}
    by_gpus: dict[int, int] = {}
    placed.sort(key=lambda jp: jp[0].spec.name)
    for job, slots in placed:
        objs = _set_running(job_objects(job.spec, job.started), job, slots)
        objects += objs
        wl.running[f"{NAMESPACE}/{job.spec.name}"] = (job.started, job.spec.min_member, job.spec.pods)
        counts["running_jobs"] += 1
        counts["running_pods"] += job.spec.pods
        counts["running_gangs"] += job.spec.min_member > 1
        counts["running_elastic_pods"] += job.spec.pods - job.spec.min_member
        gpus = int(job.spec.gpus_per_pod)
        by_gpus[gpus] = by_gpus.get(gpus, 0) + job.spec.pods
        pclass = job.spec.priority_class
        if job.non_preemptible or c.DEFAULT_PRIORITY_CLASSES[pclass] >= c.PREEMPTIBLE_BELOW:
            counts["running_non_preemptible_jobs"] += 1
        elif pclass == "build-preemptible":
            counts["running_build_preemptible_jobs"] += 1
        else:
            counts["running_train_jobs"] += 1
    pending_counts = {"reclaimer_pods": 0, "reclaimer_gpus": 0, "reclaimer_gangs": 0, "preemptor_pods": 0,
                      "preemptor_gpus": 0, "preemptor_gangs": 0}
    largest = 0
    for i, (queue, pods, gpus, pclass) in enumerate([*reclaim, *preempt]):
        is_reclaimer = i < len(reclaim)
        name = f"{'reclaim' if is_reclaimer else 'preempt'}-{i:04d}"
        spec = _spec(name, queue, pods, pods, gpus, pclass)
        objects += job_objects(spec, NOW - 600.0 + i)
        key = f"{NAMESPACE}/{name}"
        kind = "reclaimer" if is_reclaimer else "preemptor"
        (wl.reclaimers if is_reclaimer else wl.preemptors).add(key)
        wl.job_shape[key] = _describe(pods, gpus, queue, pclass)
        pending_counts[f"{kind}_pods"] += pods
        pending_counts[f"{kind}_gpus"] += pods * gpus
        pending_counts[f"{kind}_gangs"] += pods > 1
        largest = max(largest, pods * gpus)
    for o in objects:
        if o["kind"] == "Pod":
            req = o["spec"]["containers"][0]["resources"]["requests"]
            wl.pod_gpus[f"{NAMESPACE}/{o['metadata']['name']}"] = int(req.get(c.GPU_RESOURCE, 0))
    wl.queues = {q.name: {"dept": q.dept, "role": "owner" if q.owner else "borrower", "quota": quotas[q.name],
                          "running": budgets[q.name], "reclaimer_gpus": pending_gpus.get(q.name, 0),
                          "above_quota": budgets[q.name] - quotas[q.name]} for q in QUEUES}
    wl.summary = {
        "nodes": nodes, "gpus": capacity, "queues": len(DEPARTMENTS) + len(QUEUES), "leaf_queues": len(QUEUES),
        **counts, "running_pods_by_gpus": {str(k): v for k, v in sorted(by_gpus.items())},
        "reclaimers": len(reclaim), "preemptors": len(preempt), **pending_counts, "largest_pending_job_gpus": largest,
        "objects": len(objects),
    }
    return wl


# ======================================================================================== measuring
def config_for(solver: str, actions: Sequence[str] = ALL_ACTIONS) -> SchedulerConfig:
    """``solver``: ``cpsat`` (CP-SAT victims) or ``greedy`` (first-fit victims, the default)."""
    victims = "cpsat" if solver == "cpsat" else "first-fit"
    return SchedulerConfig.model_validate({"placement": PlacementConfig.model_validate({"victimSolver": victims}),
                                           "actions": tuple(actions)})


class TryTimer:
    """Times each victim search: wraps ``kaid.actions.evictions._serve`` (one call per job that reclaim,
    preempt or consolidate tries, whether or not it finds victims). Not available if the engine renames it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, bool, float]] = []  # job, action, served, seconds
        self.available = callable(getattr(evictions, "_serve", None))

    @contextmanager
    def active(self, shadow: Callable[..., None] | None = None) -> Iterator[None]:
        if not self.available:
            yield
            return
        original: Callable[..., bool] = evictions._serve
        sig = inspect.signature(original)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> bool:
            # (binding the arguments costs some 1% of a first-fit cycle: only the shadow search needs them)
            bound = sig.bind(*args, **kwargs) if shadow is not None else None
            if shadow is not None and bound is not None:
                shadow(original, bound)
            t0 = time.perf_counter()
            ok = original(*args, **kwargs)
            dt = time.perf_counter() - t0
            att = bound.arguments.get("att") if bound is not None else kwargs.get("att", args[2:3] and args[2])
            self.calls.append((getattr(getattr(att, "job", None), "key", "?"), str(getattr(att, "action", "?")),
                               bool(ok), dt))
            return ok

        evictions._serve = timed
        try:
            yield
        finally:
            evictions._serve = original


@dataclass
class RunResult:
    snapshot_s: float
    snapshot_cpu_s: float
    cycle_s: float
    cycle_cpu_s: float  # CPU time of this process during the cycle: less sensitive to other load
    decisions: Decisions
    tries: list[tuple[str, str, bool, float]]

    @property
    def cold_cpu_s(self) -> float:
        """A cold cycle as bench_allocate times it (issue 15): the snapshot built from the objects, then the cycle."""
        return self.snapshot_cpu_s + self.cycle_cpu_s


def run_once(wl: Workload, cfg: SchedulerConfig, time_tries: bool = True) -> RunResult:
    """Build a snapshot from the objects and run one cycle, each timed with perf_counter."""
    gc.collect()
    t0 = time.perf_counter()
    c0 = time.process_time()
    snap = build_snapshot(wl.objects, cfg, NOW)
    t1 = time.perf_counter()
    c1 = time.process_time()
    timer = TryTimer()
    if time_tries:
        with timer.active():
            decisions = run_cycle(snap, cfg)
    else:
        decisions = run_cycle(snap, cfg)
    t2 = time.perf_counter()
    c2 = time.process_time()
    return RunResult(t1 - t0, c1 - c0, t2 - t1, c2 - c1, decisions, timer.calls)


def per_job(decisions: Decisions, wl: Workload) -> dict[str, dict[str, Any]]:
    """Per job served by reclaim or preempt: GPUs and pods evicted, GPU-hours lost, GPUs placed, how."""
    by: dict[str, list[Eviction]] = {}
    for e in decisions.evictions:
        if e.by is not None:
            by.setdefault(e.by, []).append(e)
    out: dict[str, dict[str, Any]] = {}
    for d in decisions.victims.decisions:
        out[d.job] = {"action": d.action, "method": d.method, "gpus_evicted": d.gpus_evicted,
                      "gpu_hours_lost": destroyed(by.get(d.job, []), wl)["gpu_hours_lost"],
                      "gpus_placed": d.gpus_placed, "pods_evicted": d.pods_evicted, "units": d.units}
    return out


def destroyed(evictions: Sequence[Eviction], wl: Workload) -> dict[str, Any]:
    """What the evictions destroy: the GPU-hours of progress since each victim pod started (its GPUs times its
    running time), the gangs broken (a job of several pods left below its minMember: it restarts whole) and the
    jobs restarted (every job left below its minMember, single pods included)."""
    hours = 0.0
    hit: dict[str, int] = {}
    for e in evictions:
        started = wl.running.get(e.job, (NOW, 0, 0))[0]
        hours += wl.pod_gpus.get(e.pod, 0) * (NOW - started) / 3600.0
        hit[e.job] = hit.get(e.job, 0) + 1
    restarted = [k for k, n in hit.items() if k in wl.running and wl.running[k][2] - n < wl.running[k][1]]
    return {"gpu_hours_lost": round(hours, 1), "jobs_restarted": len(restarted),
            "gangs_broken": sum(1 for k in restarted if wl.running[k][1] > 1),
            "elastic_pods_evicted": sum(n for k, n in hit.items() if k not in restarted)}


def quality(decisions: Decisions, wl: Workload) -> dict[str, Any]:
    decs = decisions.victims.decisions
    victim_evictions = [e for e in decisions.evictions if e.action in VICTIM_ACTIONS]
    gpus_evicted = sum(wl.pod_gpus.get(e.pod, 0) for e in victim_evictions)
    lost = destroyed(victim_evictions, wl)
    gpus_placed = sum(b.gpu_milli for b in decisions.pipelined if b.action in VICTIM_ACTIONS) / 1000
    served = {d.job for d in decs}
    evicted_jobs = {e.job for e in victim_evictions}
    return {
        "gpus_evicted": gpus_evicted,
        **lost,
        "gpu_hours_lost_per_decision": round(lost["gpu_hours_lost"] / len(decs), 2) if decs else None,
        "gpus_placed": round(gpus_placed, 3),
        "evicted_per_placed": round(gpus_evicted / gpus_placed, 4) if gpus_placed else None,
        "pods_evicted": len(victim_evictions),
        "jobs_hit": len(evicted_jobs),
        "decisions": len(decs),
        "reclaim_decisions": sum(1 for d in decs if d.action == "reclaim"),
        "preempt_decisions": sum(1 for d in decs if d.action == "preempt"),
        "decisions_by_cpsat": sum(1 for d in decs if d.method == "cpsat"),
        "decisions_by_first_fit": sum(1 for d in decs if d.method != "cpsat"),
        "reclaimers_served": len(served & wl.reclaimers),
        "preemptors_served": len(served & wl.preemptors),
        "gpus_evicted_reclaim": sum(d.gpus_evicted for d in decs if d.action == "reclaim"),
        "gpus_evicted_preempt": sum(d.gpus_evicted for d in decs if d.action == "preempt"),
        "other_evictions": sum(1 for e in decisions.evictions if e.action not in VICTIM_ACTIONS),
        "binds": len(decisions.binds),
    }


def compare(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], wl: Workload) -> dict[str, Any]:
    """Job by job, ``a`` (cpsat) against ``b`` (first-fit): GPUs evicted for the jobs both served."""
    both = sorted(set(a) & set(b))
    fewer = [k for k in both if a[k]["gpus_evicted"] < b[k]["gpus_evicted"]]
    more = [k for k in both if a[k]["gpus_evicted"] > b[k]["gpus_evicted"]]
    return {
        "jobs_both_served": len(both),
        "cpsat_fewer_gpus": len(fewer),
        "cpsat_more_gpus": len(more),
        "cpsat_fewer_gpu_hours": sum(1 for k in both if a[k].get("gpu_hours_lost", 0) < b[k].get("gpu_hours_lost", 0)),
        "cpsat_more_gpu_hours": sum(1 for k in both if a[k].get("gpu_hours_lost", 0) > b[k].get("gpu_hours_lost", 0)),
        "gpu_hours_saved_total": round(sum(b[k].get("gpu_hours_lost", 0) - a[k].get("gpu_hours_lost", 0)
                                           for k in both), 1),
        "same_gpus": len(both) - len(fewer) - len(more),
        "gpus_saved_total": round(sum(b[k]["gpus_evicted"] - a[k]["gpus_evicted"] for k in both), 3),
        "cpsat_fewer_pods": sum(1 for k in both if a[k]["pods_evicted"] < b[k]["pods_evicted"]),
        "cpsat_more_pods": sum(1 for k in both if a[k]["pods_evicted"] > b[k]["pods_evicted"]),
        "only_cpsat_served": sorted(set(a) - set(b)),
        "only_first_fit_served": sorted(set(b) - set(a)),
        "more": [{"job": k, "shape": wl.job_shape.get(k, "?"), "cpsat": a[k], "first_fit": b[k]} for k in more],
        "per_job": {k: {"shape": wl.job_shape.get(k, "?"), "cpsat": a.get(k), "first_fit": b.get(k)}
                    for k in sorted(set(a) | set(b))},
    }


def same_state(wl: Workload, timed_cpsat: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One cpsat cycle in which every victim search is preceded by a first-fit search on the same session
    state (rolled back before the real one), so that the two are compared on identical inputs."""
    timer = TryTimer()
    if not timer.available or not {"session", "rules", "att"} <= set(inspect.signature(evictions._serve).parameters):
        return {"available": False}
    greedy_cfg = config_for("greedy")
    shadow_out: dict[str, dict[str, Any]] = {}
    shadow_s: list[float] = []

    def shadow(original: Callable[..., bool], bound: inspect.BoundArguments) -> None:
        args = dict(bound.arguments)
        session = args["session"]
        mark = session.checkpoint()
        kept = (session.cfg, session.victim_stats, {k: list(v) for k, v in session.reasons.items()})
        budget = getattr(session, "scenarios_left", None)  # the shadow search must not spend the real one's
        scratch = type(session.victim_stats)()
        session.cfg, session.victim_stats = greedy_cfg, scratch
        t0 = time.perf_counter()
        ok = original(**args)
        shadow_s.append(time.perf_counter() - t0)
        mine = {id(op) for op in session.ops[mark:]}
        hours = sum(wl.pod_gpus.get(op.pod.key, 0) * (NOW - op.pod.started) / 3600.0
                    for op in session.evictions() if id(op) in mine)
        session.rollback(mark)
        session.cfg, session.victim_stats, session.reasons = kept
        if budget is not None:
            session.scenarios_left = budget
        if ok and scratch.decisions:
            d = scratch.decisions[-1]
            shadow_out[d.job] = {"action": d.action, "method": d.method, "gpus_evicted": d.gpus_evicted,
                                 "gpu_hours_lost": round(hours, 1), "gpus_placed": d.gpus_placed,
                                 "pods_evicted": d.pods_evicted, "units": d.units}

    cfg = config_for("cpsat")
    snap = build_snapshot(wl.objects, cfg, NOW)
    with timer.active(shadow):
        decisions = run_cycle(snap, cfg)
    cp = per_job(decisions, wl)
    cmp_ = compare(cp, shadow_out, wl)
    cmp_["available"] = True
    # the shadow searches are rolled back: the cpsat decisions must be those of the timed runs
    cmp_["cpsat_matches_timed_run"] = None if timed_cpsat is None else cp == timed_cpsat
    cmp_["first_fit_search_s"] = _timing(shadow_s)
    cmp_["cpsat_search_s"] = _timing([t for _, _, _, t in timer.calls])
    return cmp_


def run_benchmark(nodes: int = 1000, reclaimers: int = 40, preemptors: int | None = None, repeat: int = 5,
                  seed: int = 0, progress: bool = False, same_state_pass: bool = True) -> dict[str, Any]:
    """Build the workload once, run both solvers ``repeat`` times each, and return the report."""
    if repeat < 1:
        raise ValueError("--repeat must be at least 1")
    load_before = machine_info()["loadavg"]
    wl = build_workload(nodes, reclaimers, preemptors, seed)
    snaps: dict[str, list[float]] = {s: [] for s in SOLVERS}
    cycles: dict[str, list[float]] = {s: [] for s in SOLVERS}
    cycles_cpu: dict[str, list[float]] = {s: [] for s in SOLVERS}
    cold_cpu: dict[str, list[float]] = {s: [] for s in SOLVERS}
    alloc_only_cold_cpu: dict[str, list[float]] = {s: [] for s in SOLVERS}
    alloc_only: dict[str, list[float]] = {s: [] for s in SOLVERS}
    tries: dict[str, list[float]] = {s: [] for s in SOLVERS}
    tries_served: dict[str, list[float]] = {s: [] for s in SOLVERS}
    tries_count: dict[str, list[int]] = {s: [] for s in SOLVERS}
    qualities: dict[str, list[dict[str, Any]]] = {s: [] for s in SOLVERS}
    jobs: dict[str, dict[str, dict[str, Any]]] = {}
    slowest: dict[str, list[dict[str, Any]]] = {}
    unserved: dict[str, dict[str, Any]] = {}
    victims: dict[str, set[str]] = {}  # solver -> the pods its first cycle evicted
    skipped: dict[str, int] = {}  # solver -> searches where no cheaper set could exist (no solver run)
    freed_wl: dict[str, Workload] = {}  # solver -> the workload with those pods gone (``freed_workload``)
    freed_cpu: dict[str, list[float]] = {s: [] for s in SOLVERS}
    freed_cold: dict[str, list[float]] = {s: [] for s in SOLVERS}
    freed_served: dict[str, int] = {}
    for r in range(repeat):
        order = SOLVERS if r % 2 == 0 else SOLVERS[::-1]
        for solver in order:
            # the eviction cycle and its baseline side by side, alternating which goes first (the first repeat's
            # eviction cycle first: it names the pods the baseline's workload lacks)
            baseline_cfg = config_for(solver, ("allocate",))
            if r % 2 == 1:
                free = run_once(freed_wl[solver], baseline_cfg, time_tries=False)
                res = run_once(wl, config_for(solver))
            else:
                res = run_once(wl, config_for(solver))
                if r == 0:
                    victims[solver] = {e.pod for e in res.decisions.evictions}
                    freed_wl[solver] = freed_workload(wl, victims[solver])
                free = run_once(freed_wl[solver], baseline_cfg, time_tries=False)
            freed_cpu[solver].append(free.cycle_cpu_s)
            freed_cold[solver].append(free.cold_cpu_s)
            freed_served[solver] = len({b.job for b in free.decisions.binds} & (wl.reclaimers | wl.preemptors))
            alloc = run_once(wl, config_for(solver, ("allocate",)), time_tries=False)
            snaps[solver].append(res.snapshot_s)
            cycles[solver].append(res.cycle_s)
            cycles_cpu[solver].append(res.cycle_cpu_s)
            cold_cpu[solver].append(res.cold_cpu_s)
            alloc_only_cold_cpu[solver].append(alloc.cold_cpu_s)
            alloc_only[solver].append(alloc.cycle_s)
            tries[solver] += [t for _, _, _, t in res.tries]
            tries_served[solver] += [t for _, _, ok, t in res.tries if ok]
            tries_count[solver].append(len(res.tries))
            qualities[solver].append(quality(res.decisions, wl))
            if r == 0:
                skipped[solver] = res.decisions.victims.solver_skipped
                jobs[solver] = per_job(res.decisions, wl)
                slowest[solver] = [{"job": j, "action": a, "served": ok, "s": round(t, 4),
                                    "shape": wl.job_shape.get(j, "?")}
                                   for j, a, ok, t in sorted(res.tries, key=lambda x: -x[3])[:SLOWEST]]
                unserved[solver] = {k: {"shape": wl.job_shape[k],
                                        "reasons": [x.message for x in res.decisions.pending.get(k, [])]}
                                    for k in sorted(wl.reclaimers | wl.preemptors) if k not in jobs[solver]}
            if progress:
                done = qualities[solver][-1]
                print(f"  repeat {r + 1}/{repeat} {solver:6s}: snapshot {res.snapshot_s:6.3f} s, "
                      f"cycle {res.cycle_s:7.3f} s (allocate only {alloc.cycle_s:6.3f} s), "
                      f"{done['decisions']} decisions, {done['gpus_evicted']} GPUs evicted, "
                      f"{done['gpus_placed']:g} placed", file=sys.stderr)
    freed = {solver: {"cycle_cpu_s": _timing(freed_cpu[solver]), "cold_cycle_cpu_s": _timing(freed_cold[solver]),
                      "pods_removed": len(wl.objects) - len(freed_wl[solver].objects),
                      "jobs_served": freed_served[solver],
                      "cycle_cpu_ratio": statistics.median(_pairwise(cycles_cpu[solver], freed_cpu[solver])),
                      "cold_cycle_cpu_ratio": statistics.median(_pairwise(cold_cpu[solver], freed_cold[solver]))}
             for solver in SOLVERS}
    results: dict[str, Any] = {}
    for solver in SOLVERS:
        first = qualities[solver][0]
        cyc, base = _timing(cycles[solver]), _timing(alloc_only[solver])
        decisions = first["decisions"]
        extra = [a - b for a, b in zip(cycles[solver], alloc_only[solver], strict=True)]
        results[solver] = {
            "snapshot_s": _timing(snaps[solver]),
            "cycle_s": cyc,
            "cycle_cpu_s": _timing(cycles_cpu[solver]),
            "cold_cycle_cpu_s": _timing(cold_cpu[solver]),
            "allocate_only_cold_cycle_cpu_s": _timing(alloc_only_cold_cpu[solver]),
            "allocate_only_cycle_s": base,
            "freed_allocate": freed[solver],
            "solver_skipped": skipped[solver],
            "eviction_actions_s": _timing(extra),
            "per_decision_s": (statistics.median(extra) / decisions) if decisions else None,
            "victim_search_s": _timing(tries[solver]),
            "victim_search_served_s": _timing(tries_served[solver]),
            "victim_searches": tries_count[solver][0] if tries_count[solver] else None,
            **first,
            "quality_stable": all(q == first for q in qualities[solver]),
            "slowest_searches": slowest[solver],
            "unserved": unserved[solver],
        }
    comparison = compare(jobs["cpsat"], jobs["greedy"], wl)
    cp, gr = results["cpsat"], results["greedy"]
    ratios = {
        "cycle_median": _ratio(cp["cycle_s"]["median"], gr["cycle_s"]["median"]),
        "cycle_p99": _ratio(cp["cycle_s"]["p99"], gr["cycle_s"]["p99"]),
        "per_decision": _ratio(cp["per_decision_s"], gr["per_decision_s"]),
        "victim_search_median": _ratio(cp["victim_search_s"]["median"], gr["victim_search_s"]["median"]),
        **{k: _ratio(cp[k], gr[k]) for k in ("gpus_evicted", "gpus_placed", "evicted_per_placed", "pods_evicted",
                                             "jobs_hit", "decisions", "gpu_hours_lost", "gpu_hours_lost_per_decision",
                                             "jobs_restarted", "gangs_broken")},
        "cycle_vs_allocate_cycle": _ratio(cp["cycle_s"]["median"], cp["allocate_only_cycle_s"]["median"]),
        "first_fit_cycle_vs_allocate_cycle": _ratio(gr["cycle_s"]["median"], gr["allocate_only_cycle_s"]["median"]),
        # (medians of the ratios of the runs side by side: the machine's speed drifts between repeats)
        "cycle_cpu_vs_freed_allocate_cpu": cp["freed_allocate"]["cycle_cpu_ratio"],
        "first_fit_cycle_cpu_vs_freed_allocate_cpu": gr["freed_allocate"]["cycle_cpu_ratio"],
        "cold_cycle_cpu_vs_freed_cold_allocate_cpu": cp["freed_allocate"]["cold_cycle_cpu_ratio"],
        "first_fit_cold_cycle_cpu_vs_freed_cold_allocate_cpu": gr["freed_allocate"]["cold_cycle_cpu_ratio"],
        "first_fit_cold_cycle_cpu_vs_cold_allocate_only_cpu": _ratio(
            gr["cold_cycle_cpu_s"]["median"], gr["allocate_only_cold_cycle_cpu_s"]["median"]),
    }
    if progress and same_state_pass:
        print("  same-state pass (cpsat cycle, first-fit searched and rolled back before each search) ...",
              file=sys.stderr)
    state = same_state(wl, jobs["cpsat"]) if same_state_pass else {"available": False, "skipped": True}
    return {
        "benchmark": "bench_victims",
        "args": {"nodes": nodes, "reclaimers": reclaimers, "preemptors": preemptors, "repeat": repeat, "seed": seed},
        "machine": {**machine_info(), "loadavg_before": load_before},
        "workload": wl.summary,
        "queues": wl.queues,
        "results": results,
        "ratios": ratios,
        "comparison": comparison,
        "same_state": state,
    }


def freed_workload(wl: Workload, evicted: set[str]) -> Workload:
    """The workload of the allocate cycle the eviction cycle is compared with (issue 15: "at most 1.5 times the
    allocate cycle on the same cluster"): the same cluster and pending jobs with the pods that ``evicted`` names
    already gone, so that allocate alone places the reclaimers and preemptors where the eviction cycle made room for
    them. The allocate-only cycle on the full cluster places nothing and costs almost nothing: no measure of the
    work."""
    objects = [o for o in wl.objects
               if not (o.get("kind") == "Pod" and f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}"
                       in evicted)]
    return dataclasses.replace(wl, objects=objects)


def _pairwise(a: list[float], b: list[float]) -> list[float]:
    """a[i] / b[i] for the runs made side by side."""
    return [x / y if y else math.inf for x, y in zip(a, b, strict=True)]


# ========================================================================================= reporting


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000


def format_report(report: dict[str, Any]) -> str:
    res, ratios, cmp_, state = report["results"], report["ratios"], report["comparison"], report["same_state"]
    cp, gr = res["cpsat"], res["greedy"]
    wl, args, m = report["workload"], report["args"], report["machine"]
    rows: list[tuple[str, Any, Any, Any]] = [
        ("GPUs evicted (reclaim + preempt)", cp["gpus_evicted"], gr["gpus_evicted"], ratios["gpus_evicted"]),
        ("  by reclaim", cp["gpus_evicted_reclaim"], gr["gpus_evicted_reclaim"],
         _ratio(cp["gpus_evicted_reclaim"], gr["gpus_evicted_reclaim"])),
        ("  by preempt", cp["gpus_evicted_preempt"], gr["gpus_evicted_preempt"],
         _ratio(cp["gpus_evicted_preempt"], gr["gpus_evicted_preempt"])),
        ("GPU-hours of progress lost (victims' GPUs x running time)", cp["gpu_hours_lost"], gr["gpu_hours_lost"],
         ratios["gpu_hours_lost"]),
        ("  per decision", cp["gpu_hours_lost_per_decision"], gr["gpu_hours_lost_per_decision"],
         ratios["gpu_hours_lost_per_decision"]),
        ("jobs restarted (left below minMember)", cp["jobs_restarted"], gr["jobs_restarted"],
         ratios["jobs_restarted"]),
        ("  of which gangs broken", cp["gangs_broken"], gr["gangs_broken"], ratios["gangs_broken"]),
        ("elastic pods evicted (their jobs run on)", cp["elastic_pods_evicted"], gr["elastic_pods_evicted"], None),
        ("GPUs placed (pipelined)", cp["gpus_placed"], gr["gpus_placed"], ratios["gpus_placed"]),
        ("GPUs evicted per GPU placed", cp["evicted_per_placed"], gr["evicted_per_placed"],
         ratios["evicted_per_placed"]),
        ("pods evicted", cp["pods_evicted"], gr["pods_evicted"], ratios["pods_evicted"]),
        ("running jobs hit", cp["jobs_hit"], gr["jobs_hit"], ratios["jobs_hit"]),
        ("decisions (jobs served)", cp["decisions"], gr["decisions"], ratios["decisions"]),
        ("  reclaim", cp["reclaim_decisions"], gr["reclaim_decisions"],
         _ratio(cp["reclaim_decisions"], gr["reclaim_decisions"])),
        ("  preempt", cp["preempt_decisions"], gr["preempt_decisions"],
         _ratio(cp["preempt_decisions"], gr["preempt_decisions"])),
        ("  victims chosen by CP-SAT", cp["decisions_by_cpsat"], gr["decisions_by_cpsat"], None),
        ("  victims chosen by first-fit", cp["decisions_by_first_fit"], gr["decisions_by_first_fit"], None),
        ("  solver not run: no cheaper set could make room", cp["solver_skipped"], gr["solver_skipped"], None),
        ("victim searches (jobs tried)", cp["victim_searches"], gr["victim_searches"], None),
        ("cycle, all actions, median (s)", cp["cycle_s"]["median"], gr["cycle_s"]["median"], ratios["cycle_median"]),
        ("cycle, all actions, p99 (s)", cp["cycle_s"]["p99"], gr["cycle_s"]["p99"], ratios["cycle_p99"]),
        ("cycle CPU time, median (s)", cp["cycle_cpu_s"]["median"], gr["cycle_cpu_s"]["median"],
         _ratio(cp["cycle_cpu_s"]["median"], gr["cycle_cpu_s"]["median"])),
        ("cycle, allocate only, median (s)", cp["allocate_only_cycle_s"]["median"],
         gr["allocate_only_cycle_s"]["median"],
         _ratio(cp["allocate_only_cycle_s"]["median"], gr["allocate_only_cycle_s"]["median"])),
        ("eviction actions, median (s)", cp["eviction_actions_s"]["median"], gr["eviction_actions_s"]["median"],
         _ratio(cp["eviction_actions_s"]["median"], gr["eviction_actions_s"]["median"])),
        ("  per decision (ms)", _ms(cp["per_decision_s"]), _ms(gr["per_decision_s"]), ratios["per_decision"]),
        ("victim search, median (ms)", _ms(cp["victim_search_s"]["median"]), _ms(gr["victim_search_s"]["median"]),
         ratios["victim_search_median"]),
        ("victim search, p99 (ms)", _ms(cp["victim_search_s"]["p99"]), _ms(gr["victim_search_s"]["p99"]),
         _ratio(cp["victim_search_s"]["p99"], gr["victim_search_s"]["p99"])),
        ("  served searches, median (ms)", _ms(cp["victim_search_served_s"]["median"]),
         _ms(gr["victim_search_served_s"]["median"]),
         _ratio(cp["victim_search_served_s"]["median"], gr["victim_search_served_s"]["median"])),
        ("snapshot build, median (s)", cp["snapshot_s"]["median"], gr["snapshot_s"]["median"],
         _ratio(cp["snapshot_s"]["median"], gr["snapshot_s"]["median"])),
        ("same result every repeat", cp["quality_stable"], gr["quality_stable"], None),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [
        f"bench_victims: {wl['nodes']} nodes x {GPUS_PER_NODE} GPUs, all in use; {wl['leaf_queues']} leaf queues in "
        f"{len(DEPARTMENTS)} departments; {args['repeat']} repeats, seed {args['seed']}",
        f"running: {wl['running_jobs']} jobs, {wl['running_pods']} pods (by GPUs per pod: "
        f"{', '.join(f'{k}: {v}' for k, v in wl['running_pods_by_gpus'].items())}), {wl['running_gangs']} gangs, "
        f"{wl['running_elastic_pods']} elastic pods; {wl['running_train_jobs']} train, "
        f"{wl['running_build_preemptible_jobs']} build-preemptible, "
        f"{wl['running_non_preemptible_jobs']} non-preemptible",
        f"pending: {wl['reclaimers']} reclaimers ({wl['reclaimer_gpus']} GPUs, {wl['reclaimer_gangs']} gangs), "
        f"{wl['preemptors']} preemptors ({wl['preemptor_gpus']} GPUs, {wl['preemptor_gangs']} gangs); largest "
        f"{wl['largest_pending_job_gpus']} GPUs",
        f"machine: {m['cpus']} CPUs, load average (1, 5, 15 min) {m['loadavg_before']} before, {m['loadavg']} after, "
        f"Python {m['python']}, OR-Tools {m['ortools']}, engine at commit {m['commit']}"
        f"{' with uncommitted changes in kaid/' if m['kaid_uncommitted_changes'] else ''}",
        "",
        f"{'metric':<{width}}  {'cpsat':>10}  {'greedy':>10}  {'cpsat/greedy':>12}",
        f"{'-' * width}  {'-' * 10}  {'-' * 10}  {'-' * 12}",
    ]
    lines += [f"{name:<{width}}  {_fmt(a):>10}  {_fmt(b):>10}  {_fmt(r):>12}" for name, a, b, r in rows]
    lines += [
        "",
        f"cycle with every action against the allocate-only cycle on the same cluster: cpsat x"
        f"{_fmt(ratios['cycle_vs_allocate_cycle'])}, first-fit x{_fmt(ratios['first_fit_cycle_vs_allocate_cycle'])}",
        f"cycle CPU against the allocate cycle on the same cluster with the victims already gone (it places "
        f"{cp['freed_allocate']['jobs_served']} / {gr['freed_allocate']['jobs_served']} of the jobs served; CPU "
        f"{_fmt(cp['freed_allocate']['cycle_cpu_s']['median'])} / "
        f"{_fmt(gr['freed_allocate']['cycle_cpu_s']['median'])} s): "
        f"cpsat x{_fmt(ratios['cycle_cpu_vs_freed_allocate_cpu'])}, "
        f"first-fit x{_fmt(ratios['first_fit_cycle_cpu_vs_freed_allocate_cpu'])}",
        f"cold cycles (snapshot built from the objects + the cycle, as bench_allocate's), CPU: every action "
        f"{_fmt(cp['cold_cycle_cpu_s']['median'])} / {_fmt(gr['cold_cycle_cpu_s']['median'])} s against allocate "
        f"with the victims already gone {_fmt(cp['freed_allocate']['cold_cycle_cpu_s']['median'])} / "
        f"{_fmt(gr['freed_allocate']['cold_cycle_cpu_s']['median'])} s: cpsat "
        f"x{_fmt(ratios['cold_cycle_cpu_vs_freed_cold_allocate_cpu'])}, first-fit "
        f"x{_fmt(ratios['first_fit_cold_cycle_cpu_vs_freed_cold_allocate_cpu'])}; first-fit against allocate only on "
        f"the full cluster ({_fmt(gr['allocate_only_cold_cycle_cpu_s']['median'])} s): "
        f"x{_fmt(ratios['first_fit_cold_cycle_cpu_vs_cold_allocate_only_cpu'])}",
        f"whole cycles, jobs served by both: CP-SAT lost fewer GPU-hours for {cmp_['cpsat_fewer_gpu_hours']}, more "
        f"for {cmp_['cpsat_more_gpu_hours']} (GPU-hours saved: {cmp_['gpu_hours_saved_total']:+g})",
        f"whole cycles, jobs served by both: {cmp_['jobs_both_served']}; CP-SAT evicted fewer GPUs for "
        f"{cmp_['cpsat_fewer_gpus']}, more for {cmp_['cpsat_more_gpus']}, as many for {cmp_['same_gpus']} "
        f"(GPUs saved: {cmp_['gpus_saved_total']:+g}); served by cpsat only: {len(cmp_['only_cpsat_served'])}, "
        f"by greedy only: {len(cmp_['only_first_fit_served'])}",
    ]
    if state.get("available"):
        lines.append(
            f"same state, job by job (cpsat cycle, first-fit tried first and rolled back): both served "
            f"{state['jobs_both_served']}; CP-SAT evicted fewer GPUs for {state['cpsat_fewer_gpus']}, more for "
            f"{state['cpsat_more_gpus']}, as many for {state['same_gpus']} (GPUs saved: "
            f"{state['gpus_saved_total']:+g}); first-fit only: {len(state['only_first_fit_served'])}, CP-SAT only: "
            f"{len(state['only_cpsat_served'])}; CP-SAT lost fewer GPU-hours for {state['cpsat_fewer_gpu_hours']}, "
            f"more for {state['cpsat_more_gpu_hours']} (GPU-hours saved: {state['gpu_hours_saved_total']:+g})")
        for row in state["more"]:
            lines.append(f"  CP-SAT evicted more for {row['job']} ({row['shape']}): {row['cpsat']['gpus_evicted']:g} "
                         f"GPUs ({row['cpsat']['method']}, {row['cpsat']['action']}) against "
                         f"{row['first_fit']['gpus_evicted']:g}")
    elif not state.get("skipped"):
        lines.append("same state comparison: not available (kaid.actions.evictions._serve is gone or changed)")
    if cmp_["more"]:
        lines.append("  whole cycles differ after the first decision that differs: a job that first-fit serves later "
                     "in its cycle can land on GPUs an earlier first-fit decision evicted and did not use, so these "
                     "are not like-for-like (the same-state line above is):")
    for row in cmp_["more"]:
        lines.append(f"  whole cycle: CP-SAT evicted more for {row['job']} ({row['shape']}): "
                     f"{row['cpsat']['gpus_evicted']:g} GPUs against {row['first_fit']['gpus_evicted']:g}")
    if state.get("cpsat_matches_timed_run") is False:
        lines.append("  WARNING: the same-state pass's CP-SAT decisions differ from the timed cpsat runs")
    for solver in SOLVERS:
        for key, row in res[solver]["unserved"].items():
            lines.append(f"not served by {solver}: {key} ({row['shape']})")
        top = ", ".join(f"{x['job']} ({x['action']}, {'served' if x['served'] else 'not served'}) "
                        f"{x['s'] * 1000:.0f} ms" for x in res[solver]["slowest_searches"][:3])
        lines.append(f"slowest {solver} victim searches (first repeat): {top}")
    lines.append("(times are medians and nearest-rank p99 over the repeats, measured with time.perf_counter; the two "
                 "solvers run in the same process, alternating which goes first; a victim search is one call of the "
                 "engine's per-job search, served or not)")
    return "\n".join(lines)


def profile_cycle(wl: Workload, solver: str, top: int, out: str | None) -> str:
    """cProfile of one cycle (the snapshot is built outside the profile)."""
    cfg = config_for(solver)
    gc.collect()
    snap = build_snapshot(wl.objects, cfg, NOW)
    return profile(lambda: run_cycle(snap, cfg), f"one {solver} cycle", top, out)


# ============================================================================================== main
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_victims",
                                description="Reclaim and preempt on a full cluster: CP-SAT against first-fit "
                                            "victims, side by side.")
    p.add_argument("--nodes", type=int, default=1000, help="GPU nodes of 8 GPUs, all in use (default 1000)")
    p.add_argument("--reclaimers", type=int, default=40, help="pending jobs in queues below their share (default 40)")
    p.add_argument("--preemptors", type=int, default=None,
                   help="pending higher-priority jobs in the borrowing queues (default: half of --reclaimers)")
    p.add_argument("--repeat", type=int, default=5, help="measured runs per solver (default 5)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--no-same-state", action="store_true", help="skip the untimed same-state comparison pass")
    profile_args(p, SOLVERS)
    output_args(p)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.profile:
            wl = build_workload(args.nodes, args.reclaimers, args.preemptors, args.seed)
            print(profile_cycle(wl, args.profile, args.profile_top, args.profile_out))
            return 0
        report = run_benchmark(args.nodes, args.reclaimers, args.preemptors, args.repeat, args.seed,
                               progress=not args.quiet, same_state_pass=not args.no_same_state)
    except ValueError as err:
        print(f"bench_victims: {err}", file=sys.stderr)
        return 2
    print(format_report(report))
    write_report("bench_victims", report, args, bulky=("queues", "comparison", "same_state"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
