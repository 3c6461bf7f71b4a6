"""One cold scheduling cycle on a large, fragmented cluster, at two sizes: CP-SAT gang placement against the greedy
path.

Run from the repository root::

    python -m benchmarks.bench_allocate                      # 1,000 nodes / 10,000 pending, then 4,000 / 40,000
    python -m benchmarks.bench_allocate --json out.json      # also write the report as JSON
    python -m benchmarks.bench_allocate --profile cpsat      # cProfile of one cycle instead of the timings

The cluster and the workload are deterministic for a seed (``--seed``), built once, and fed to the engine
as plain Kubernetes dicts, the way the daemon and the simulator feed it:

- Nodes: ``--nodes`` nodes of 8 GPUs (the ``gpu_node`` helper of the simulator: 128 cores, 2 TiB, 80 GB
  H100s), in racks of ``NODES_PER_RACK`` nodes and zones of ``RACKS_PER_ZONE`` racks; node labels
  ``ZONE_LABEL`` and ``RACK_LABEL``, and a ``Topology`` object with those two levels.
- Queues: ``--queues`` queues (all levels counted) in 3 levels: ``DEPARTMENTS`` departments, each of
  ``TEAMS_PER_DEPARTMENT`` teams, and the rest as projects (the leaves) spread round-robin over the
  teams. The default, 50, is 2 departments + 8 teams + 40 projects.
- Background: running pods that already hold about 40% of the GPUs, drawn per node (``FILL_WEIGHTS``,
  so that about a quarter of the nodes are empty and the rest partly used), as 4-, 2- and 1-GPU pods
  and shared devices holding fractional pods (0.25 / 0.5, with their GPU group and device index).
- Pending: ``--pods`` pods: gangs (``GANG_POD_SHARE`` of the pods; sizes 2 to 256 pods in powers of
  two, each size ``GANG_SIZE_DECAY`` times as likely as the one below; 1 GPU per pod, or 8 with
  probability ``EIGHT_GPU_GANG_P``; ``TOPOLOGY_GANG_P`` of them prefer one rack through
  ``spec.topologyConstraint``), fractional pods (``FRACTIONAL_POD_SHARE``; inference jobs of 1 to 4
  elastic replicas of 0.25 or 0.5 GPU) and single-GPU pods (the rest). Jobs are interleaved in a random
  order (their creation times follow it) and spread over the leaf queues. Gangs and single pods use
  the ``train`` priority class, so that within a queue they go in creation order; fractional pods use
  ``inference`` and go first in their queue. The backlog asks for several times the free GPUs, so
  the cycle also exercises the "does not fit" paths.

For each solver (``placement.gangSolver`` = ``cpsat`` and ``greedy``) and each of ``--repeat`` repeats,
in the same process, alternating which solver goes first: time ``build_snapshot`` and one ``run_cycle``
with the default config (fair share, then every action: allocate, consolidate, reclaim, preempt,
stale-gang; each action timed on its own) with ``time.perf_counter``, under kaid's garbage collector
settings (``--gc kaid``, the default: what ``kaid run`` decides under, cold builds frozen included: each starts
with a full collection, timed with it, ends frozen out of the collector's sight (``kaid.model.build.freeze_builds``)
and is released after its cycle, untimed; before that change the first young collection after a build walked all of
its objects) or CPython's (``--gc default``), then read the placement quality from the decisions. The same at
``--scale`` times the nodes, pods and queues (default 4: 4,000 nodes, 40,000 pending pods, 200 queues) runs in the
same repeats: each repeat runs both sizes, alternating which goes first, so that a drift in the machine's speed lands
on both; the ratio of the two sizes' cycles is reported as the ratio of their medians and, repeat by repeat, with
the median of those. Last, per size, a fresh process measures resident memory: kaid's daemon imported,
the objects held, the peak over a snapshot and a cycle. Report median and p99 (nearest rank: with 5 repeats it is
the slowest run) and the ratios cpsat/greedy. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from benchmarks.common import fmt as _fmt
from benchmarks.common import machine_info, output_args, proc_memory_mb, profile, profile_args, write_report
from benchmarks.common import ratio as _ratio
from benchmarks.common import timing as _timing
from kaid import cycle
from kaid.actions.memory import SearchMemory
from kaid.actions.session import Session
from kaid.api import constants as c
from kaid.api.config import PlacementConfig, SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot, freeze_builds
from kaid.model.live import LiveModel
from kaid.sim.apply import bind_pod, pipeline_pod
from kaid.sim.cluster import EPOCH, NAMESPACE, gpu_node, job_objects, queue_obj
from kaid.sim.workload import JobSpec

Obj = dict[str, Any]

SOLVERS: Final[tuple[str, str]] = ("cpsat", "greedy")
GC_WORDS: Final = {"kaid": "kaid's gc settings (kaid.kube.startup.settle_gc)",
                   "default": "CPython's default gc settings"}

# --- cluster ------------------------------------------------------------------------------------------
GPUS_PER_NODE: Final = 8
NODES_PER_RACK: Final = 25
RACKS_PER_ZONE: Final = 4
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
RACK_LABEL: Final = "topology.kai.scheduler/rack"
TOPOLOGY_NAME: Final = "bench-topology"

# --- queues -------------------------------------------------------------------------------------------
DEPARTMENTS: Final = 2
TEAMS_PER_DEPARTMENT: Final = 4
MIN_QUEUES: Final = DEPARTMENTS + DEPARTMENTS * TEAMS_PER_DEPARTMENT * 2  # every team has a project

# --- background (running) pods ------------------------------------------------------------------------
# Weight of 0, 1, ..., 8 GPUs already used on a node: mean 3.21 of 8 GPUs, about 40% of the cluster.
FILL_WEIGHTS: Final = (0.25, 0.07, 0.10, 0.12, 0.13, 0.11, 0.09, 0.07, 0.06)
SHARED_DEVICE_P: Final = 0.15  # a used device holds fractional pods rather than (part of) a whole-GPU pod
SHARED_PATTERNS: Final = ((0.5, 0.5), (0.5,), (0.25, 0.25, 0.5), (0.25,), (0.5, 0.25), (0.25, 0.25, 0.25, 0.25))
WHOLE_SIZES: Final = (4, 2, 1)

# --- pending pods -------------------------------------------------------------------------------------
GANG_POD_SHARE: Final = 0.50
FRACTIONAL_POD_SHARE: Final = 0.15
GANG_SIZES: Final = (2, 4, 8, 16, 32, 64, 128, 256)
GANG_SIZE_DECAY: Final = 0.7
EIGHT_GPU_GANG_P: Final = 0.25
TOPOLOGY_GANG_P: Final = 0.30
FRACTIONS: Final = (0.25, 0.5)
MAX_REPLICAS: Final = 4
CPU_MILLI_PER_GPU: Final = 8000
MEMORY_MB_PER_GPU: Final = 64000
CPU_ONLY_MILLI: Final = 2000  # cpu and memory of a fractional pod: 1/4 of a GPU's share, at least
MEMORY_ONLY_MB: Final = 16000


# ======================================================================================= the workload
@dataclass
class Workload:
    objects: list[Obj]
    rack_of: dict[str, str]  # node name -> rack
    gangs: set[str] = field(default_factory=set)  # job keys (namespace/name) of gangs (minMember > 1)
    topology_gangs: set[str] = field(default_factory=set)  # gangs with a preferred rack
    summary: dict[str, Any] = field(default_factory=dict)


def _queue_tree(total: int, capacity_gpus: int, rng: random.Random) -> tuple[list[Obj], list[str]]:
    """``total`` queues in 3 levels; returns the Queue objects and the leaf (project) names."""
    if total < MIN_QUEUES:
        raise ValueError(f"--queues {total} is too few for 3 levels: use at least {MIN_QUEUES} "
                         f"({DEPARTMENTS} departments, {DEPARTMENTS * TEAMS_PER_DEPARTMENT} teams, one project each)")
    teams = [(d, t) for d in range(DEPARTMENTS) for t in range(TEAMS_PER_DEPARTMENT)]
    projects: dict[tuple[int, int], int] = dict.fromkeys(teams, 0)
    for i in range(total - DEPARTMENTS - len(teams)):
        projects[teams[i % len(teams)]] += 1
    dept_share = [0.6, 0.4] if DEPARTMENTS == 2 else [1 / DEPARTMENTS] * DEPARTMENTS
    objs: list[Obj] = []
    leaves: list[str] = []
    for d in range(DEPARTMENTS):
        dname = f"dept-{d}"
        dquota = math.floor(capacity_gpus * dept_share[d])
        objs.append(queue_obj(dname, gpu_quota=dquota, weight=1 + d))
        for t in range(TEAMS_PER_DEPARTMENT):
            tname = f"{dname}-team-{t}"
            tquota = dquota // TEAMS_PER_DEPARTMENT
            objs.append(queue_obj(tname, dname, gpu_quota=tquota, weight=rng.choice((1, 1, 2))))
            n = projects[(d, t)]
            for p in range(n):
                pname = f"{tname}-proj-{p}"
                objs.append(queue_obj(pname, tname, gpu_quota=tquota // n, weight=rng.choice((1, 1, 2, 3)),
                                      priority=110 if p == 0 else 100))
                leaves.append(pname)
    return objs, leaves


def _nodes(count: int) -> tuple[list[Obj], dict[str, str]]:
    objs: list[Obj] = []
    rack_of: dict[str, str] = {}
    for i in range(count):
        rack = i // NODES_PER_RACK
        zone = rack // RACKS_PER_ZONE
        name = f"node-{i:04d}"
        rack_name = f"rack-{rack:03d}"
        objs.append(gpu_node(name, GPUS_PER_NODE, labels={ZONE_LABEL: f"zone-{zone:02d}", RACK_LABEL: rack_name}))
        rack_of[name] = rack_name
    return objs, rack_of


def _topology() -> Obj:
    return {"apiVersion": f"{c.TOPOLOGY_GROUP}/{c.TOPOLOGY_VERSION}", "kind": "Topology",
            "metadata": {"name": TOPOLOGY_NAME},
            "spec": {"levels": [{"nodeLabel": ZONE_LABEL}, {"nodeLabel": RACK_LABEL}]}}


def _spec(name: str, queue: str, pods: int, min_member: int, gpus: float, priority_class: str, kind: str) -> JobSpec:
    cpu = round(CPU_MILLI_PER_GPU * gpus) if gpus >= 1 else CPU_ONLY_MILLI
    mem = round(MEMORY_MB_PER_GPU * gpus) if gpus >= 1 else MEMORY_ONLY_MB
    return JobSpec(name=name, queue=queue, arrival_s=0.0, duration_s=3600.0, pods=pods, min_member=min_member,
                   gpus_per_pod=gpus, cpu_milli_per_pod=cpu, memory_mb_per_pod=mem, priority_class=priority_class,
                   kind=kind)


def _background(node_names: list[str], leaves: list[str], rng: random.Random) -> tuple[list[Obj], dict[str, Any]]:
    """Running pods on the nodes, with their devices, holding about 40% of the GPUs."""
    objs: list[Obj] = []
    whole_pods = frac_pods = 0
    used_devices = 0
    created = EPOCH - 3600.0
    for node in node_names:
        used = rng.choices(range(GPUS_PER_NODE + 1), FILL_WEIGHTS)[0]
        used_devices += used
        dev = 0
        while dev < used:
            queue = rng.choice(leaves)
            if rng.random() < SHARED_DEVICE_P:
                group = f"bg-{node}-{dev}"
                for k, frac in enumerate(rng.choice(SHARED_PATTERNS)):
                    spec = _spec(f"{group}-{k}", queue, 1, 1, frac, "inference", "inference")
                    objs += _running(job_objects(spec, created), node, (dev,), group)
                    frac_pods += 1
                dev += 1
                continue
            size = rng.choice([s for s in WHOLE_SIZES if s <= used - dev])
            spec = _spec(f"bg-{node}-{dev}", queue, 1, 1, size, "train", "train")
            objs += _running(job_objects(spec, created), node, tuple(range(dev, dev + size)), None)
            whole_pods += 1
            dev += size
    return objs, {"background_pods": whole_pods + frac_pods, "background_whole_gpu_pods": whole_pods,
                  "background_fractional_pods": frac_pods, "background_devices_used": used_devices}


def _running(objs: list[Obj], node: str, devices: tuple[int, ...], group: str | None) -> list[Obj]:
    for o in objs:
        if o["kind"] != "Pod":
            continue
        o["spec"]["nodeName"] = node
        o["status"] = {"phase": "Running", "startTime": o["metadata"]["creationTimestamp"]}
        o["metadata"]["annotations"][c.GPU_DEVICES_ANNOTATION] = ",".join(str(d) for d in devices)
        if group is not None:
            o["metadata"]["labels"][c.GPU_GROUP_LABEL] = group
    return objs


def _gang_size(rng: random.Random, budget: int, cap: int) -> int:
    sizes = [s for s in GANG_SIZES if s <= min(budget, cap)]
    if not sizes:
        return budget
    return rng.choices(sizes, [GANG_SIZE_DECAY ** i for i in range(len(sizes))])[0]


def _pending(total: int, leaves: list[str], rng: random.Random) -> list[tuple[JobSpec, bool]]:
    """Pending jobs with exactly ``total`` pods, in creation order; the flag says "prefers one rack"."""
    gang_budget = round(total * GANG_POD_SHARE)
    frac_budget = round(total * FRACTIONAL_POD_SHARE)
    cap = max(2, total // 8)
    drafts: list[tuple[str, int, float, bool]] = []  # kind, pods, GPUs per pod, topology
    while gang_budget >= 2:
        size = _gang_size(rng, gang_budget, cap)
        gpus = 8.0 if rng.random() < EIGHT_GPU_GANG_P else 1.0
        drafts.append(("gang", size, gpus, rng.random() < TOPOLOGY_GANG_P))
        gang_budget -= size
    while frac_budget > 0:
        replicas = min(frac_budget, rng.randint(1, MAX_REPLICAS))
        drafts.append(("fractional", replicas, rng.choice(FRACTIONS), False))
        frac_budget -= replicas
    singles = total - sum(d[1] for d in drafts)
    drafts += [("single", 1, 1.0, False)] * singles
    rng.shuffle(drafts)
    jobs: list[tuple[JobSpec, bool]] = []
    for i, (kind, pods, gpus, topo) in enumerate(drafts):
        queue = rng.choice(leaves)
        if kind == "gang":
            spec = _spec(f"gang-{i:05d}", queue, pods, pods, gpus, "train", "train")
        elif kind == "fractional":
            spec = _spec(f"infer-{i:05d}", queue, pods, 1, gpus, "inference", "inference")
        else:
            spec = _spec(f"single-{i:05d}", queue, 1, 1, gpus, "train", "train")
        jobs.append((spec, topo))
    return jobs


def build_workload(nodes: int = 1000, pods: int = 10_000, queues: int = 50, seed: int = 0) -> Workload:
    """The benchmark's cluster and backlog as plain Kubernetes objects; the same arguments give the same
    objects."""
    if nodes < 1 or pods < 1:
        raise ValueError("--nodes and --pods must be at least 1")
    rng = random.Random(f"bench-allocate/{seed}")
    node_objs, rack_of = _nodes(nodes)
    queue_objs, leaves = _queue_tree(queues, nodes * GPUS_PER_NODE, rng)
    background, bg_summary = _background(list(rack_of), leaves, rng)
    objects: list[Obj] = [*node_objs, _topology(), *queue_objs, *background]
    wl = Workload(objects, rack_of)
    counts = {"gangs": 0, "gang_pods": 0, "eight_gpu_gangs": 0, "topology_gangs": 0, "fractional_jobs": 0,
              "fractional_pods": 0, "single_pods": 0}
    pending_gpus = 0.0
    max_gang = 0
    for i, (spec, topo) in enumerate(_pending(pods, leaves, rng)):
        objs = job_objects(spec, EPOCH + i)
        key = f"{NAMESPACE}/{spec.name}"
        pending_gpus += spec.total_gpus
        if spec.min_member > 1:
            wl.gangs.add(key)
            counts["gangs"] += 1
            counts["gang_pods"] += spec.pods
            counts["eight_gpu_gangs"] += spec.gpus_per_pod == 8
            max_gang = max(max_gang, spec.pods)
            if topo:
                objs[0]["spec"]["topologyConstraint"] = {"topology": TOPOLOGY_NAME,
                                                         "preferredTopologyLevel": RACK_LABEL}
                wl.topology_gangs.add(key)
                counts["topology_gangs"] += 1
        elif spec.gpus_per_pod < 1:
            counts["fractional_jobs"] += 1
            counts["fractional_pods"] += spec.pods
        else:
            counts["single_pods"] += 1
        objects += objs
    capacity = nodes * GPUS_PER_NODE
    wl.summary = {
        "nodes": nodes, "gpus": capacity, "racks": len(set(rack_of.values())),
        "zones": math.ceil(nodes / (NODES_PER_RACK * RACKS_PER_ZONE)), "queues": len(queue_objs),
        "leaf_queues": len(leaves), **bg_summary,
        "background_gpu_share": round(bg_summary["background_devices_used"] / capacity, 3),
        "pending_pods": pods, "pending_gpus": round(pending_gpus, 2), **counts, "largest_gang_pods": max_gang,
        "objects": len(objects),
    }
    return wl


# ======================================================================================== measuring
def config_for(solver: str) -> SchedulerConfig:
    """The default config (every action) with this gang solver."""
    return SchedulerConfig(placement=PlacementConfig.model_validate({"gangSolver": solver}))


@dataclass
class RunResult:
    snapshot_s: float
    cycle_s: float  # run_cycle: fair share, every action, the decisions
    cycle_cpu_s: float  # CPU time of this process during the cycle: less sensitive to other load
    actions_s: dict[str, float]  # each action's share of the cycle
    actions_cpu_s: dict[str, float]  # ... in CPU time of this process
    decisions: Decisions
    solver_s: float = 0.0  # CP-SAT's wall time in the cycle
    snapshot_cpu_s: float = 0.0

    @property
    def total_cpu_s(self) -> float:
        return self.snapshot_cpu_s + self.cycle_cpu_s

    @property
    def total_s(self) -> float:
        """A cold cycle: the snapshot built from the objects, then the cycle."""
        return self.snapshot_s + self.cycle_s


@contextmanager
def timed_actions(into: dict[str, float], cpu: dict[str, float]) -> Iterator[None]:
    """Time each action of ``kaid.cycle.ACTIONS`` while the block runs, wall and CPU time of this process (the
    table is put back after)."""
    original = cycle.ACTIONS

    def timed(name: str, action: Callable[[Session], None]) -> Callable[[Session], None]:
        def run(session: Session) -> None:
            t0, c0 = time.perf_counter(), time.process_time()
            action(session)
            into[name] = into.get(name, 0.0) + time.perf_counter() - t0
            cpu[name] = cpu.get(name, 0.0) + time.process_time() - c0
        return run

    cycle.ACTIONS = tuple((name, timed(str(name), action)) for name, action in original)
    try:
        yield
    finally:
        cycle.ACTIONS = original


def run_once(wl: Workload, cfg: SchedulerConfig) -> RunResult:
    """Build a snapshot from the objects and run one cycle, each timed with perf_counter; then let go of the
    snapshot (``Snapshot.release``, untimed: a frozen one is freed no other way)."""
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
    t1 = time.perf_counter()
    c1 = time.process_time()
    actions: dict[str, float] = {}
    actions_cpu: dict[str, float] = {}
    with timed_actions(actions, actions_cpu):
        decisions = run_cycle(snap, cfg)
    t2 = time.perf_counter()
    c2 = time.process_time()
    snap.release()
    return RunResult(t1 - t0, t2 - t1, c2 - c1, actions, actions_cpu, decisions, decisions.stats.solver_s, c1 - c0)


def gang_nodes(decisions: Decisions, wl: Workload) -> dict[str, set[str]]:
    """Nodes used by each gang that was bound in this cycle."""
    out: dict[str, set[str]] = {}
    for b in decisions.binds:
        if b.job in wl.gangs:
            out.setdefault(b.job, set()).add(b.node)
    return out


def quality(decisions: Decisions, wl: Workload) -> dict[str, Any]:
    nodes = gang_nodes(decisions, wl)
    spans = [len(v) for v in nodes.values()]
    racks = [len({wl.rack_of[n] for n in v}) for k, v in nodes.items() if k in wl.topology_gangs]
    stats = decisions.stats
    return {
        "gpus_allocated": round(sum(b.gpu_milli for b in decisions.binds) / 1000, 3),
        "pods_bound": len(decisions.binds),
        "jobs_bound": len({b.job for b in decisions.binds}),
        "jobs_pending": len(decisions.pending),
        "pods_evicted": len(decisions.evictions),
        "pods_pipelined": len(decisions.pipelined),
        "gangs_placed": len(nodes),
        "gang_nodes_mean": round(statistics.fmean(spans), 3) if spans else 0.0,
        "gang_nodes_max": max(spans, default=0),
        "topology_gangs_placed": len(racks),
        "topology_gang_racks_mean": round(statistics.fmean(racks), 3) if racks else 0.0,
        "gangs_cpsat": stats.gangs_cpsat,
        # the same gang in the same cluster state: the greedy plan against the plan taken
        "same_state_fewer": sum(1 for g, n in stats.gang_vs_greedy if g is not None and n < g),
        "same_state_more": sum(1 for g, n in stats.gang_vs_greedy if g is not None and n > g),
        "same_state_greedy_failed": sum(1 for g, _ in stats.gang_vs_greedy if g is None),
    }


def rss_probe(nodes: int, pods: int, queues: int, seed: int) -> dict[str, Any]:
    """In a fresh interpreter: resident memory (MB) with kaid's daemon imported, with the cluster's objects held as
    its watch cache holds them (as they come; the workload's objects carry only what a kwok cluster's do), and at
    the peak of a snapshot and a cpsat cycle over them: what kaid holds at that size, less the client's buffers."""
    code = ("import json, sys; from benchmarks.bench_allocate import _rss_here; "
            f"print(json.dumps(_rss_here({nodes}, {pods}, {queues}, {seed})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          cwd=str(Path(__file__).resolve().parent.parent))
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"rc {done.returncode}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _rss_now() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _rss_here(nodes: int, pods: int, queues: int, seed: int) -> dict[str, float | None]:
    import kaid.kube.daemon  # noqa: F401  (what the daemon imports besides the engine)

    gc.collect()
    imports = _rss_now()
    objects = build_workload(nodes, pods, queues, seed).objects  # the watch cache holds the objects as they come
    gc.collect()
    held = _rss_now()
    cfg = config_for("cpsat")
    run_cycle(build_snapshot(objects, cfg, EPOCH + 3600.0), cfg)
    peak, _ = proc_memory_mb(os.getpid())
    return {"imports_mb": round(imports, 1), "objects_mb": round(held - imports, 1), "peak_mb": peak}


@dataclass
class _Runs:
    """One workload's runs so far, per solver."""

    runs: dict[str, list[RunResult]] = field(default_factory=lambda: {s: [] for s in SOLVERS})
    qualities: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {s: [] for s in SOLVERS})
    spans: dict[str, dict[str, int]] = field(default_factory=dict)


def measure(wls: Sequence[Workload], repeat: int, progress: bool) -> list[dict[str, Any]]:
    """Both solvers ``repeat`` times each on each workload, in one process. Each repeat runs every size, the sizes
    and the solvers alternating which goes first, so that the sizes are measured in the same minutes: a drift in
    the machine's speed lands on both sizes, not on their ratio (measured one size after the other, the 1,000-node
    cycles of one quiet hour ranged 0.21-0.29 s)."""
    done = [_Runs() for _ in wls]
    for r in range(repeat):
        order = SOLVERS if r % 2 == 0 else SOLVERS[::-1]
        sizes = list(range(len(wls))) if r % 2 == 0 else list(reversed(range(len(wls))))
        for i in sizes:
            wl, runs = wls[i], done[i]
            for solver in order:
                res = run_once(wl, config_for(solver))
                runs.runs[solver].append(res)
                runs.qualities[solver].append(quality(res.decisions, wl))
                if r == 0:
                    runs.spans[solver] = {k: len(v) for k, v in gang_nodes(res.decisions, wl).items()}
                if progress:
                    acts = ", ".join(f"{k} {v:.2f}" for k, v in res.actions_s.items())
                    print(f"  {wl.summary['nodes']} nodes repeat {r + 1}/{repeat} {solver:6s}: snapshot "
                          f"{res.snapshot_s:6.2f} s, cycle {res.cycle_s:6.2f} s ({acts}), "
                          f"{len(res.decisions.binds)} pods bound", file=sys.stderr, flush=True)
                res.decisions = Decisions()  # the next run must not share memory with this one's decisions
    return [_summary(wl, runs) for wl, runs in zip(wls, done, strict=True)]


def _summary(wl: Workload, done: _Runs) -> dict[str, Any]:
    runs, qualities, spans = done.runs, done.qualities, done.spans
    results: dict[str, Any] = {}
    for solver in SOLVERS:
        first = qualities[solver][0]
        rs = runs[solver]
        names = list(rs[0].actions_s)
        results[solver] = {
            "snapshot_s": _timing([x.snapshot_s for x in rs]),
            "cycle_s": _timing([x.cycle_s for x in rs]),
            "total_s": _timing([x.total_s for x in rs]),
            "cycle_cpu_s": _timing([x.cycle_cpu_s for x in rs]),
            "total_cpu_s": _timing([x.total_cpu_s for x in rs]),
            "actions_cpu_s": {a: statistics.median(x.actions_cpu_s.get(a, 0.0) for x in rs) for a in names},
            "solver_s": _timing([x.solver_s for x in rs]),
            "actions_s": {a: statistics.median(x.actions_s.get(a, 0.0) for x in rs) for a in names},
            "fair_share_and_decisions_s": statistics.median(x.cycle_s - sum(x.actions_s.values()) for x in rs),
            **first,
            "quality_stable": all(q == first for q in qualities[solver]),
        }
    both = sorted(set(spans["cpsat"]) & set(spans["greedy"]))
    comparison = {
        "gangs_both_placed": len(both),
        "cpsat_fewer_nodes": sum(1 for k in both if spans["cpsat"][k] < spans["greedy"][k]),
        "cpsat_more_nodes": sum(1 for k in both if spans["cpsat"][k] > spans["greedy"][k]),
        "same_nodes": sum(1 for k in both if spans["cpsat"][k] == spans["greedy"][k]),
        "nodes_saved_total": sum(spans["greedy"][k] - spans["cpsat"][k] for k in both),
        "only_cpsat_placed": len(set(spans["cpsat"]) - set(spans["greedy"])),
        "only_greedy_placed": len(set(spans["greedy"]) - set(spans["cpsat"])),
        "per_gang_nodes": {k: {"cpsat": spans["cpsat"].get(k), "greedy": spans["greedy"].get(k)}
                           for k in sorted(set(spans["cpsat"]) | set(spans["greedy"]))},
    }
    cp, gr = results["cpsat"], results["greedy"]
    ratios = {
        "snapshot_median": _ratio(cp["snapshot_s"]["median"], gr["snapshot_s"]["median"]),
        "cycle_median": _ratio(cp["cycle_s"]["median"], gr["cycle_s"]["median"]),
        "cycle_p99": _ratio(cp["cycle_s"]["p99"], gr["cycle_s"]["p99"]),
        "total_median": _ratio(cp["total_s"]["median"], gr["total_s"]["median"]),
        **{k: _ratio(cp[k], gr[k]) for k in ("gpus_allocated", "pods_bound", "gangs_placed", "gang_nodes_mean",
                                             "gang_nodes_max", "topology_gang_racks_mean")},
    }
    return {"workload": wl.summary, "results": results, "ratios": ratios, "comparison": comparison}


def run_benchmark(nodes: int = 1000, pods: int = 10_000, queues: int = 50, repeat: int = 5, seed: int = 0,
                  progress: bool = False, scale: int = 4, rss: bool = True, steady: bool = True,
                  gc_settings: str = "kaid") -> dict[str, Any]:
    """Build the workload, run both solvers ``repeat`` times each, and the same at ``scale`` times the nodes, pods
    and queues (its own workload, same seed); return the report. ``gc_settings``: the cold cycles run under kaid's
    garbage collector settings (``kaid_gc``, as ``kaid run`` decides) or CPython's defaults (``default``, as a
    one-off ``kaictl dry-run`` does)."""
    if repeat < 1:
        raise ValueError("--repeat must be at least 1")
    if scale < 0:
        raise ValueError("--scale must not be negative")
    load_before = machine_info()["loadavg"]
    from ortools.sat.python import cp_model  # noqa: F401  (the engine imports it on first use: not a cycle's cost)

    collector = kaid_gc if gc_settings == "kaid" else nullcontext
    sizes = [(nodes, pods, queues)]
    if scale > 1:
        sizes.append((nodes * scale, pods * scale, queues * scale))
    wls = [build_workload(*size, seed) for size in sizes]
    with collector():
        parts = measure(wls, repeat, progress)
    if steady:
        for wl, part in zip(wls, parts, strict=True):
            part["steady"] = steady_state(wl, seed=seed)
    base = parts[0]
    report: dict[str, Any] = {
        "benchmark": "bench_allocate",
        "args": {"nodes": nodes, "pods": pods, "queues": queues, "repeat": repeat, "seed": seed, "scale": scale,
                 "gc": gc_settings},
        **base,
    }
    if scale > 1:
        larger = report["larger"] = parts[1]
        report["scaling"] = {s: {k: _ratio(larger["results"][s][k]["median"], base["results"][s][k]["median"])
                                 for k in ("total_s", "cycle_s", "snapshot_s", "total_cpu_s", "cycle_cpu_s")}
                             for s in SOLVERS}
        # each repeat's larger cold cycle over its smaller one, measured minutes apart at most (``measure``)
        report["scaling_by_repeat"] = {
            s: {k: _pairs(larger["results"][s][k]["runs"], base["results"][s][k]["runs"])
                for k in ("total_s", "total_cpu_s")} for s in SOLVERS}
    if rss:
        report["rss"] = {f"{n}x{p}x{q}": rss_probe(n, p, q, seed) for n, p, q in sizes}
    report["machine"] = {**machine_info(), "loadavg_before": load_before}
    return report


def _pairs(larger: list[float], smaller: list[float]) -> dict[str, Any]:
    """Each repeat's ratio of the two sizes, and their median."""
    each = [_ratio(a, b) for a, b in zip(larger, smaller, strict=True)]
    known = [x for x in each if x is not None]
    return {"runs": each, "median": statistics.median(known) if known else None}


# ============================================================================ the steady state (issue 15)
STEADY_CHANGED: Final = 0.01  # share of the cluster's pods that change between the cold cycle and the steady one
STEADY_FINISHED: Final = 0.4  # of those: bound pods that finish (half deleted, half Succeeded first)
STEADY_NEW: Final = 0.5  # new pending single-GPU jobs; the rest are pending pods relabelled
STEADY_NODES: Final = 0.0025  # share of the nodes whose labels change (10 of 4,000)


def _outcome_events(model: LiveModel, decisions: Decisions, now: float) -> list[Obj]:
    """The cold cycle's decisions as a watch reports them: each bound or pipelined pod a new object; an evicted pod
    gone (a deletion, ``{"delete": key}``)."""
    events: list[Obj] = []
    for b in decisions.binds:
        obj = copy.deepcopy(model.pods[b.pod].obj)
        bind_pod(obj, b, now)
        events.append(obj)
    for b in decisions.pipelined:
        obj = copy.deepcopy(model.pods[b.pod].obj)
        pipeline_pod(obj, b)
        events.append(obj)
    events += [{"delete": e.pod} for e in decisions.evictions]
    return events


def _steady_changes(model: LiveModel, rng: random.Random, leaves: list[str],
                    now: float) -> tuple[list[Obj], dict[str, int]]:
    """``STEADY_CHANGED`` of the pods changed: bound pods finish, new jobs come, pending pods get a label; and a few
    nodes relabelled. Events in a random order."""
    keys = list(model.pods)
    bound = [k for k in keys if (model.pods[k].obj.get("spec") or {}).get("nodeName")]
    pending = [k for k in keys if not (model.pods[k].obj.get("spec") or {}).get("nodeName")]
    n = max(1, round(len(keys) * STEADY_CHANGED))
    finished = rng.sample(bound, min(len(bound), round(n * STEADY_FINISHED)))
    new = round(n * STEADY_NEW)
    relabelled = rng.sample(pending, min(len(pending), n - len(finished) - new))
    events: list[Obj] = []
    for i, key in enumerate(finished):
        if i % 2:
            events.append({"delete": key})
        else:
            obj = copy.deepcopy(model.pods[key].obj)
            obj["status"]["phase"] = "Succeeded"
            events.append(obj)
    for i in range(new):
        spec = _spec(f"steady-{i:05d}", rng.choice(leaves), 1, 1, 1.0, "train", "train")
        events += job_objects(spec, now + i)
    for key in relabelled:
        obj = copy.deepcopy(model.pods[key].obj)
        obj["metadata"].setdefault("labels", {})["bench/touched"] = "yes"
        events.append(obj)
    nodes = rng.sample(sorted(model.nodes), max(1, round(len(model.nodes) * STEADY_NODES)))
    for name in nodes:
        obj = copy.deepcopy(model.nodes[name])
        obj["metadata"]["labels"]["bench/maintenance"] = "soon"
        events.append(obj)
    rng.shuffle(events)
    return events, {"pods_changed": len(finished) + new + len(relabelled), "pods": len(keys),
                    "pods_finished": len(finished), "pods_new": new, "pods_relabelled": len(relabelled),
                    "nodes_relabelled": len(nodes)}


def _apply(model: LiveModel, events: list[Obj]) -> None:
    for ev in events:
        if "delete" in ev:
            model.delete("Pod", ev["delete"])
        else:
            model.upsert(ev)


@contextmanager
def kaid_gc() -> Iterator[None]:
    """The garbage collector as ``kaid run`` sets it once it has listed the cluster (``kaid.kube.startup.settle_gc``):
    what is held so far (here the workload's objects, as the watch cache holds them) frozen out of the collector's
    sight, young collections every ``GC_THRESHOLDS[0]`` allocations, and each cold snapshot frozen once built
    (``kaid.model.build.freeze_builds``: its build starts with a full collection, timed with it; ``run_once``
    releases it, as the daemon's cold path does); as it was afterwards."""
    from kaid.kube.startup import GC_THRESHOLDS

    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    was_freezing = freeze_builds(True)
    try:
        yield
    finally:
        freeze_builds(was_freezing)
        gc.set_threshold(*before)
        if not frozen:  # (unfreeze thaws every frozen object: leave them be when others froze some before)
            gc.unfreeze()


def steady_state(wl: Workload, solver: str = "cpsat", seed: int = 0) -> dict[str, Any]:
    """The daemon's incremental model (``kaid.model.live``) over the workload, under kaid's garbage collector settings
    (``kaid_gc``): a cold cycle (every object upserted, the snapshot, every action), its decisions applied as watch
    events and read in and one cycle run on them (untimed: a backlog being bound is no steady state), then
    ``STEADY_CHANGED`` of the pods changed and one more cycle timed, with the memory the cycle before it handed on:
    the events applied and the snapshot taken, then every action. CPU time of this process. The cold
    ``build_snapshot`` of the same objects is timed beside it."""
    with kaid_gc():
        return _steady_state(wl, solver, seed)


def _steady_state(wl: Workload, solver: str, seed: int) -> dict[str, Any]:
    cfg = config_for(solver)
    now = EPOCH + 3600.0
    rng = random.Random(f"bench-allocate/steady/{seed}")
    leaves = sorted({str(o["spec"]["queue"]) for o in wl.objects if o.get("kind") == "PodGroup"})
    model = LiveModel(cfg)
    gc.collect()
    c0 = time.process_time()
    for obj in wl.objects:
        model.upsert(obj)
    snap = model.snapshot(now)
    c1 = time.process_time()
    decisions = run_cycle(snap, cfg, memory=SearchMemory())
    c2 = time.process_time()
    del snap
    _apply(model, _outcome_events(model, decisions, now))
    c3 = time.process_time()
    model.refresh()
    c4 = time.process_time()
    # the daemon's next cycle on the settled model (untimed, its decisions not applied): the steady cycle gets its
    # memory, as it would get the memory of the cycle before it (the cold cycle's names the jobs before the binds)
    settled = run_cycle(model.snapshot(now + 30.0), cfg, memory=decisions.memory)
    events, counts = _steady_changes(model, rng, leaves, now + 60.0)
    gc.collect()
    c5 = time.process_time()
    _apply(model, events)
    snap = model.snapshot(now + 60.0)
    c6 = time.process_time()
    actions: dict[str, float] = {}
    actions_cpu: dict[str, float] = {}
    with timed_actions(actions, actions_cpu):
        steady = run_cycle(snap, cfg, memory=settled.memory)
    c7 = time.process_time()
    del snap
    gc.collect()
    objects = model.objects()
    # (not frozen: its collection first would walk the live model, which nothing froze, and the freeze would take
    # the live model out of sight for the quiet cycles below)
    was_freezing = freeze_builds(False)
    c8 = time.process_time()
    cold = build_snapshot(objects, cfg, now + 60.0)
    c9 = time.process_time()
    freeze_builds(was_freezing)
    cold.release()
    quiet = _quiet(model, cfg, steady, now + 60.0)
    return {**quiet,
        "solver": solver, **counts,
        "cold_snapshot_cpu_s": c1 - c0, "cold_cycle_cpu_s": c2 - c1, "cold_pods_bound": len(decisions.binds),
        "settle_cpu_s": c4 - c3,
        "steady_snapshot_cpu_s": c6 - c5, "steady_cycle_cpu_s": c7 - c6, "steady_total_cpu_s": c7 - c5,
        "steady_actions_cpu_s": actions_cpu, "steady_pods_bound": len(steady.binds),
        "steady_pods_evicted": len(steady.evictions),
        "cold_build_snapshot_cpu_s": c9 - c8,
        "steady_vs_cold": _ratio(c7 - c5, c2 - c0),
    }


QUIET_SETTLE: Final = 6  # cycles run after the steady one, at most, until one decides nothing


def _quiet(model: LiveModel, cfg: SchedulerConfig, last: Decisions, now: float) -> dict[str, Any]:
    """The daemon's most common cycle on a full cluster: nothing changed since the last one (it runs every
    ``cyclePeriodSeconds`` all the same). The steady cycle's decisions are applied, and those of the cycles after it
    until one decides nothing (at most ``QUIET_SETTLE``), then a cycle with the last one's memory of vain victim
    searches (``kaid.actions.memory``) and one without it, on the same objects, CPU time of each (snapshot
    included)."""
    prior = last
    settle = 0
    while settle < QUIET_SETTLE and (settle == 0 or prior.binds or prior.evictions or prior.pipelined):
        _apply(model, _outcome_events(model, prior, now))
        model.refresh()
        now += 60.0
        prior = run_cycle(model.snapshot(now), cfg, memory=prior.memory)
        settle += 1
    out: dict[str, Any] = {"quiet_settle_cycles": settle,
                           "quiet_settled": not (prior.binds or prior.evictions or prior.pipelined)}
    for name, memory in (("quiet_memory", prior.memory), ("quiet_no_memory", None)):
        gc.collect()
        c0 = time.process_time()
        snap = model.snapshot(now + 60.0)
        c1 = time.process_time()
        cpu: dict[str, float] = {}
        with timed_actions({}, cpu):
            d = run_cycle(snap, cfg, memory=memory)
        out[name] = {"snapshot_cpu_s": c1 - c0, "cycle_cpu_s": time.process_time() - c1, "actions_cpu_s": cpu,
                     "pods_bound": len(d.binds), "pods_evicted": len(d.evictions),
                     "searches_skipped": sum(len(m) for m in (d.memory.misses.values() if d.memory else ()))}
        del snap
    return out


def steady_only(nodes: int, pods: int, queues: int, seed: int, scale: int) -> dict[str, Any]:
    """The steady-state report alone, at both sizes (``--steady-only``; ``_steady_lines`` prints it)."""
    load_before = machine_info()["loadavg"]
    from ortools.sat.python import cp_model  # noqa: F401  (kaid loads it before its first cycle)

    sizes = [(nodes, pods, queues)] + ([(nodes * scale, pods * scale, queues * scale)] if scale > 1 else [])
    parts = []
    for n, p, q in sizes:
        wl = build_workload(n, p, q, seed)
        parts.append({"workload": wl.summary, "steady": steady_state(wl, seed=seed)})
    return {"benchmark": "bench_allocate", "steady_only": True,
            "args": {"nodes": nodes, "pods": pods, "queues": queues, "seed": seed, "scale": scale},
            **parts[0], "larger": parts[1] if len(parts) > 1 else None,
            "machine": {**machine_info(), "loadavg_before": load_before}}


def _steady_lines(report: dict[str, Any]) -> list[str]:
    """The steady-state rows, one per size."""
    lines: list[str] = []
    for part in (report, report.get("larger")):
        st = (part or {}).get("steady")
        if not st:
            continue
        acts = ", ".join(f"{a} {v:.2f}" for a, v in st["steady_actions_cpu_s"].items())
        wl = part["workload"]  # type: ignore[index]
        lines.append(
            f"steady state at {wl['nodes']} nodes ({st['solver']}, CPU time, kaid's gc settings): "
            f"{st['pods_changed']} of {st['pods']} "
            f"pods changed ({st['pods_finished']} finished, {st['pods_new']} new, {st['pods_relabelled']} relabelled) "
            f"and "
            f"{st['nodes_relabelled']} nodes relabelled -> events + snapshot {st['steady_snapshot_cpu_s']:.3f} s "
            f"(a cold build_snapshot of the same objects {st['cold_build_snapshot_cpu_s']:.3f} s), cycle "
            f"{st['steady_cycle_cpu_s']:.3f} s ({acts}), total {st['steady_total_cpu_s']:.3f} s = "
            f"x{_fmt(st['steady_vs_cold'])} of the cold cycle ({st['cold_snapshot_cpu_s']:.2f} s snapshot + "
            f"{st['cold_cycle_cpu_s']:.2f} s cycle; {st['cold_pods_bound']} pods bound then, "
            f"{st['steady_pods_bound']} now)")
        if "quiet_memory" in st:
            qm, qn = st["quiet_memory"], st["quiet_no_memory"]
            lines.append(
                f"quiet cycle at {wl['nodes']} nodes (nothing changed since the last, CPU time; "
                f"{st['quiet_settle_cycles']} cycles after the steady one until "
                f"{'one decided nothing' if st['quiet_settled'] else 'the cap, the last still deciding'}): "
                f"with the memory of vain victim searches {qm['snapshot_cpu_s'] + qm['cycle_cpu_s']:.3f} s (snapshot "
                f"{qm['snapshot_cpu_s']:.3f} s, cycle {qm['cycle_cpu_s']:.3f} s: "
                + ", ".join(f"{a} {v:.2f}" for a, v in qm["actions_cpu_s"].items())
                + f"; {qm['searches_skipped']} vain searches remembered), without it "
                f"{qn['snapshot_cpu_s'] + qn['cycle_cpu_s']:.3f} s (cycle {qn['cycle_cpu_s']:.3f} s: "
                + ", ".join(f"{a} {v:.2f}" for a, v in qn["actions_cpu_s"].items())
                + f"); {qm['pods_bound']} and {qn['pods_bound']} pods bound, {qm['pods_evicted']} and "
                f"{qn['pods_evicted']} evicted")
    return lines


# ========================================================================================= reporting


def _table(part: dict[str, Any]) -> list[str]:
    res, ratios = part["results"], part["ratios"]
    cp, gr = res["cpsat"], res["greedy"]
    rows: list[tuple[str, Any, Any, Any]] = [
        ("cold cycle (snapshot + cycle), median (s)", cp["total_s"]["median"], gr["total_s"]["median"],
         ratios["total_median"]),
        ("  snapshot build, median (s)", cp["snapshot_s"]["median"], gr["snapshot_s"]["median"],
         ratios["snapshot_median"]),
        ("  cycle, every action, median (s)", cp["cycle_s"]["median"], gr["cycle_s"]["median"],
         ratios["cycle_median"]),
        ("  cycle, p99 (s)", cp["cycle_s"]["p99"], gr["cycle_s"]["p99"], ratios["cycle_p99"]),
        ("cold cycle CPU time, median (s)", cp["total_cpu_s"]["median"], gr["total_cpu_s"]["median"],
         _ratio(cp["total_cpu_s"]["median"], gr["total_cpu_s"]["median"])),
        ("  cycle CPU time, median (s)", cp["cycle_cpu_s"]["median"], gr["cycle_cpu_s"]["median"],
         _ratio(cp["cycle_cpu_s"]["median"], gr["cycle_cpu_s"]["median"])),
        ("    fair share and decisions (s)", cp["fair_share_and_decisions_s"], gr["fair_share_and_decisions_s"],
         None),
    ]
    rows += [(f"    {a}, wall; CPU (s)", f"{_fmt(cp['actions_s'].get(a))}; {_fmt(cp['actions_cpu_s'].get(a))}",
              f"{_fmt(gr['actions_s'].get(a))}; {_fmt(gr['actions_cpu_s'].get(a))}", None) for a in cp["actions_s"]]
    rows += [
        ("    of which CP-SAT wall (s)", cp["solver_s"]["median"], gr["solver_s"]["median"], None),
        ("GPUs allocated", cp["gpus_allocated"], gr["gpus_allocated"], ratios["gpus_allocated"]),
        ("pods bound", cp["pods_bound"], gr["pods_bound"], ratios["pods_bound"]),
        ("pods evicted; pipelined", f"{cp['pods_evicted']}; {cp['pods_pipelined']}",
         f"{gr['pods_evicted']}; {gr['pods_pipelined']}", None),
        ("jobs still pending", cp["jobs_pending"], gr["jobs_pending"], _ratio(cp["jobs_pending"], gr["jobs_pending"])),
        ("gangs placed", cp["gangs_placed"], gr["gangs_placed"], ratios["gangs_placed"]),
        ("  placed by CP-SAT", cp["gangs_cpsat"], gr["gangs_cpsat"], None),
        ("nodes per placed gang, mean", cp["gang_nodes_mean"], gr["gang_nodes_mean"], ratios["gang_nodes_mean"]),
        ("nodes per placed gang, max", cp["gang_nodes_max"], gr["gang_nodes_max"], ratios["gang_nodes_max"]),
        ("rack-preferring gangs placed", cp["topology_gangs_placed"], gr["topology_gangs_placed"],
         _ratio(cp["topology_gangs_placed"], gr["topology_gangs_placed"])),
        ("racks per rack-preferring gang, mean", cp["topology_gang_racks_mean"], gr["topology_gang_racks_mean"],
         ratios["topology_gang_racks_mean"]),
        ("same result every repeat", cp["quality_stable"], gr["quality_stable"], None),
    ]
    width = max(len(r[0]) for r in rows)
    wl, cmp_ = part["workload"], part["comparison"]
    lines = [
        f"{wl['nodes']} nodes x {GPUS_PER_NODE} GPUs ({wl['racks']} racks, {wl['zones']} zones), {wl['queues']} queues "
        f"({wl['leaf_queues']} leaves); background: {wl['background_pods']} running pods on "
        f"{wl['background_devices_used']} GPUs ({wl['background_gpu_share']:.0%}); pending: {wl['pending_pods']} pods, "
        f"{wl['pending_gpus']:g} GPUs ({wl['single_pods']} single-GPU, {wl['fractional_pods']} fractional in "
        f"{wl['fractional_jobs']} jobs, {wl['gang_pods']} in {wl['gangs']} gangs, {wl['topology_gangs']} of them "
        f"rack-preferring, largest {wl['largest_gang_pods']} pods)",
        "",
        f"{'metric':<{width}}  {'cpsat':>10}  {'greedy':>10}  {'cpsat/greedy':>12}",
        f"{'-' * width}  {'-' * 10}  {'-' * 10}  {'-' * 12}",
    ]
    lines += [f"{name:<{width}}  {_fmt(a):>10}  {_fmt(b):>10}  {_fmt(r):>12}" for name, a, b, r in rows]
    lines += [
        f"gangs placed by both: {cmp_['gangs_both_placed']}; CP-SAT used fewer nodes for {cmp_['cpsat_fewer_nodes']}, "
        f"more for {cmp_['cpsat_more_nodes']}, as many for {cmp_['same_nodes']} "
        f"(nodes saved by CP-SAT over those gangs: {cmp_['nodes_saved_total']:+d}); "
        f"placed by CP-SAT only: {cmp_['only_cpsat_placed']}, by greedy only: {cmp_['only_greedy_placed']}",
        f"same cluster state, gang by gang (cpsat run): the plan taken used fewer nodes than the greedy plan for "
        f"{res['cpsat']['same_state_fewer']} gangs, more for {res['cpsat']['same_state_more']}; greedy found no plan "
        f"for {res['cpsat']['same_state_greedy_failed']} of the gangs CP-SAT placed",
    ]
    return lines


def format_report(report: dict[str, Any]) -> str:
    args, m = report["args"], report["machine"]
    lines = [
        f"bench_allocate: one cold cycle (snapshot, fair share, every action), CP-SAT against greedy gang placement; "
        f"{args['repeat']} repeats, seed {args['seed']}, "
        f"{GC_WORDS[args.get('gc', 'default')]}",
        f"machine: {m['cpus']} CPUs, load average (1, 5, 15 min) {m['loadavg_before']} before, {m['loadavg']} after, "
        f"Python {m['python']}, OR-Tools {m['ortools']}, engine at commit {m['commit']}"
        f"{' with uncommitted changes in kaid/' if m['kaid_uncommitted_changes'] else ''}",
        "",
        *_table(report),
    ]
    if "larger" in report:
        lines += ["", *_table(report["larger"]), ""]
        for solver, row in report["scaling"].items():
            lines.append(f"{args['scale']} times the cluster, {solver}: cold cycle x{_fmt(row['total_s'])}, "
                         f"cycle x{_fmt(row['cycle_s'])}, snapshot x{_fmt(row['snapshot_s'])}; in CPU time: cold "
                         f"cycle x{_fmt(row['total_cpu_s'])}, cycle x{_fmt(row['cycle_cpu_s'])} (medians)")
            pairs = report.get("scaling_by_repeat", {}).get(solver)
            if pairs:
                cpu = pairs["total_cpu_s"]
                lines.append(f"  by repeat (each repeat's sizes measured together), cold cycle in CPU time: "
                             f"{', '.join('x' + _fmt(x) for x in cpu['runs'])}; median x{_fmt(cpu['median'])}")
    lines += _steady_lines(report)
    for size, row in report.get("rss", {}).items():
        if "error" in row:
            lines.append(f"resident memory at {size}: not measured ({row['error']})")
        else:
            lines.append(f"resident memory at {size} (nodes x pending pods x queues), a fresh process: "
                         f"{row['imports_mb']:g} MB with kaid imported, +{row['objects_mb']:g} MB for the objects "
                         f"as the watch cache holds them, peak {row['peak_mb']:g} MB over a snapshot and a cpsat cycle")
    lines.append("(times are medians and nearest-rank p99 over the repeats, measured with time.perf_counter; the two "
                 "solvers and the two sizes run in the same process, each repeat every size, alternating which goes "
                 "first)")
    return "\n".join(lines)


def profile_cycle(wl: Workload, solver: str, top: int, out: str | None) -> str:
    """cProfile of one cycle (the snapshot is built outside the profile)."""
    cfg = config_for(solver)
    gc.collect()
    snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
    return profile(lambda: run_cycle(snap, cfg), f"one {solver} cycle", top, out)


# ============================================================================================== main
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_allocate",
                                description="One allocate cycle, CP-SAT against greedy gang placement, side by side.")
    p.add_argument("--nodes", type=int, default=1000, help="GPU nodes of 8 GPUs (default 1000)")
    p.add_argument("--pods", type=int, default=10_000, help="pending pods (default 10000)")
    p.add_argument("--queues", type=int, default=50,
                   help=f"queues in all, in 3 levels (default 50: 2 departments, 8 teams, 40 projects; "
                        f"at least {MIN_QUEUES})")
    p.add_argument("--repeat", type=int, default=5, help="measured runs per solver (default 5)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--scale", type=int, default=4,
                   help="also measure a cluster this many times larger in nodes, pods and queues (default 4: "
                        "4,000 nodes, 40,000 pending pods, 200 queues; 0 or 1: only the first size)")
    p.add_argument("--gc", choices=sorted(GC_WORDS), default="kaid",
                   help="garbage collector settings for the cold cycles: kaid's (default; what `kaid run` decides "
                        "under) or CPython's defaults (a one-off kaictl dry-run)")
    p.add_argument("--no-rss", action="store_true", help="skip the resident-memory probes (a fresh process per size)")
    p.add_argument("--no-steady", action="store_true",
                   help="skip the steady-state cycle (kaid's incremental model, 1%% of the pods changed)")
    p.add_argument("--steady-only", action="store_true",
                   help="only the steady-state cycle (and its cold cycle) at each size, no solver comparison")
    profile_args(p, SOLVERS)
    output_args(p)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.profile:
            wl = build_workload(args.nodes, args.pods, args.queues, args.seed)
            print(profile_cycle(wl, args.profile, args.profile_top, args.profile_out))
            return 0
        if args.steady_only:
            steady = steady_only(args.nodes, args.pods, args.queues, args.seed, args.scale)
            print("\n".join(_steady_lines(steady)))
            write_report("bench_allocate", steady, args)
            return 0
        report = run_benchmark(args.nodes, args.pods, args.queues, args.repeat, args.seed, progress=not args.quiet,
                               scale=args.scale, rss=not args.no_rss, steady=not args.no_steady,
                               gc_settings=args.gc)
    except ValueError as err:
        print(f"bench_allocate: {err}", file=sys.stderr)
        return 2
    print(format_report(report))
    if "larger" in report:
        report["larger"]["comparison"].pop("per_gang_nodes", None)  # the first size's is enough for the JSON
    write_report("bench_allocate", report, args, bulky=("comparison", "larger"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
