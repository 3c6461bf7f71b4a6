"""Soak: the simulator for days of virtual time on a large cluster, watching for what grows.

The simulator's built-in cluster (``builtin_cluster``: a queue tree of two teams, research and inference,
quotas proportional to the cluster) on ``--nodes`` nodes of 8 GPUs, with one limit added (research may use
at most 1.5 times its GPU quota, so the limit invariant has something to hold), and the default trace
(``builtin_profile``, the simulator's default) with each queue's arrival rate multiplied by ``--load``; by
default so that the trace asks for 90% of the cluster's GPU-hours (the default trace asks for about 4 times
what the built-in 16-node cluster has: a backlog that only grows, no steady state to soak in).

After every cycle the invariants of ``kaid.sim.invariants`` are checked on the cluster's objects (no node
overcommitted counting GPU fractions, gangs all or nothing past their grace, no queue above its limit). Every
virtual hour (``--sample-s``) a sample: the median and largest cycle time of that hour (CPU time of the
process, which other work on the machine does not move; the wall time's median beside it), the process's
resident memory (after a garbage collection), and the pods bound and pending. The slope of cycle time and of
memory against virtual time is fitted by least squares, per virtual day, over the samples after the first
virtual day (the cluster fills up during the first day; the fit over all samples is reported too).
Timings are reported, never asserted; the invariants are (exit code 1 if any broke).

Usage: ``python -m benchmarks.soak [--days 7] [--nodes 1000] [--cycle-s 60] [--json F] [--record]``;
``tests/test_soak.py`` runs a short one (one virtual day on 50 nodes) and asserts only the invariants.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.common import engine_revision, machine_info, output_args, progress, write_report
from kaid.api.config import SchedulerConfig
from kaid.sim.cluster import EPOCH, builtin_cluster, builtin_profile, simulate
from kaid.sim.invariants import GangWatch, violations
from kaid.sim.workload import JobSpec, generate

Obj = dict[str, Any]
DAY = 86400.0
RESEARCH_LIMIT_OVER_QUOTA = 1.5


def soak_cluster(nodes: int) -> list[Obj]:
    objs = builtin_cluster(nodes)
    for o in objs:
        if o["kind"] == "Queue" and o["metadata"]["name"] == "research":
            gpu = o["spec"]["resources"]["gpu"]
            gpu["limit"] = round(gpu["quota"] * RESEARCH_LIMIT_OVER_QUOTA)
    return objs


TARGET_LOAD = 0.9  # GPU-hours offered per GPU-hour of capacity, by default


def offered_gpus(jobs: Sequence[JobSpec], days: float) -> float:
    """GPU-hours per hour that ``jobs`` ask for over ``days`` (each job's GPUs times its duration)."""
    horizon = days * DAY
    return sum(j.pods * j.gpus_per_pod * min(j.duration_s, horizon - j.arrival_s) for j in jobs) / horizon


def rss_mb() -> float:
    """Resident memory of this process in MB (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError, IndexError):
        return 0.0


def slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of ys against xs (None with fewer than two distinct xs)."""
    if len(xs) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


class Soak:
    """What the soak watches, fed by the simulator after each cycle."""

    def __init__(self, cfg: SchedulerConfig, cycle_s: float, sample_s: float, log: Callable[[str], None],
                 checkpoint: Callable[[Soak], None] | None = None, trace_from: float | None = None) -> None:
        self.cfg = cfg
        self.trace_from = trace_from  # virtual day from which tracemalloc follows what is allocated (and kept)
        self.checkpoint = checkpoint
        # a gang that falls below minMember: marked stale by the next cycle, evicted whole once its grace has
        # passed, by the cycle after (cycles run at least every cycle period while anything changes)
        self.gangs = GangWatch(max(0.0, cfg.staleGangGraceSeconds) + 2 * cycle_s)
        self.sample_s = sample_s
        self.log = log
        self.cycles = 0
        self.broken: list[dict[str, Any]] = []
        self.samples: list[dict[str, Any]] = []
        self.window: list[float] = []  # cycles' CPU times since the last sample
        self.wall_window: list[float] = []  # and their wall times (other processes on the machine move them)
        self.next_sample = 0.0
        self.started = time.monotonic()

    def on_cycle(self, t: float, cpu_s: float, wall_s: float, objs: list[Obj]) -> None:
        self.cycles += 1
        self.window.append(cpu_s)
        self.wall_window.append(wall_s)
        found = violations(objs, EPOCH + t, self.cfg.staleGangGraceSeconds) + self.gangs.check(objs, t)
        if found:
            self.broken.append({"t": t, "violations": found[:20], "count": len(found)})
            self.log(f"t={t / 3600:.2f} h: {len(found)} invariants broken: {found[:3]}")
        if t >= self.next_sample:
            self.sample(t, objs)
            self.next_sample = t + self.sample_s

    def sample(self, t: float, objs: list[Obj]) -> None:
        gc.collect()
        if self.trace_from is not None and t / DAY >= self.trace_from and not tracemalloc.is_tracing():
            tracemalloc.start(8)
            self.log(f"day {t / DAY:.2f}: tracemalloc started")
        pods = [o for o in objs if o.get("kind") == "Pod"]
        bound = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
        s: dict[str, Any] = {"t": t, "day": t / DAY, "cycles": len(self.window),
             "cycleMedianMs": round(statistics.median(self.window) * 1000, 2) if self.window else None,
             "cycleMaxMs": round(max(self.window) * 1000, 2) if self.window else None,
             "cycleWallMedianMs": round(statistics.median(self.wall_window) * 1000, 2) if self.wall_window else None,
             "rssMB": round(rss_mb(), 1), "pyBlocks": sys.getallocatedblocks(), "gcObjects": len(gc.get_objects()),
             "ortools": "ortools.sat.python.cp_model" in sys.modules,  # loaded on the first CP-SAT search (~90 MB)
             "podsBound": bound, "podsPending": len(pods) - bound,
             "wallS": round(time.monotonic() - self.started, 1)}
        if tracemalloc.is_tracing():
            s["tracedMB"] = round(tracemalloc.get_traced_memory()[0] / 1e6, 1)
            s["tracedTop"] = [f"{st.size / 1e6:.1f} MB {st.count} blocks: "
                              + " < ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}"
                                           for f in reversed(st.traceback[-4:]))  # the innermost frame first
                              for st in tracemalloc.take_snapshot().statistics("traceback")[:8]]
        self.samples.append(s)
        self.window, self.wall_window = [], []
        self.log(f"day {s['day']:.2f}: cycle {s['cycleMedianMs']} ms CPU (max {s['cycleMaxMs']}; wall "
                 f"{s['cycleWallMedianMs']}), rss {s['rssMB']} MB, "
                 f"{bound} pods bound, {s['podsPending']} pending, {s['wallS']:.0f} s wall; "
                 f"{s['pyBlocks']} Python blocks, {s['gcObjects']} gc objects, ortools loaded: {s['ortools']}"
                 + (f"; traced since day {self.trace_from:g}: {s['tracedMB']} MB, top {s['tracedTop'][:2]}"
                    if "tracedMB" in s else ""))
        if self.checkpoint is not None:
            self.checkpoint(self)

    def fits(self, skip_days: float) -> dict[str, Any]:
        def fit(key: str, after: float) -> dict[str, Any]:
            pts = [(s["day"], s[key]) for s in self.samples if s["day"] >= after and s[key] is not None]
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            k = slope(xs, ys)
            mean = statistics.fmean(ys) if ys else None
            return {"fromDay": after, "samples": len(pts), "slopePerDay": None if k is None else round(k, 4),
                    "mean": None if mean is None else round(mean, 2),
                    "slopePerDayPctOfMean": None if k is None or not mean else round(100 * k / mean, 3)}
        return {key: {"afterWarmUp": fit(key, skip_days), "all": fit(key, 0.0)}
                for key in ("cycleMedianMs", "rssMB", "podsBound", "pyBlocks")}


def run(days: float, nodes: int, seed: int, cycle_s: float, sample_s: float, load: float | None,
        log: Callable[[str], None], checkpoint: Callable[[Soak], None] | None = None,
        overrides: dict[str, Any] | None = None, trace_from: float | None = None) -> dict[str, Any]:
    cfg = SchedulerConfig.model_validate(overrides or {})
    profile = builtin_profile(seed, days * 24)
    scale = load if load is not None else TARGET_LOAD * nodes * 8 / offered_gpus(generate(profile), days)
    profile = replace(profile, queues=tuple(replace(q, jobs_per_hour=q.jobs_per_hour * scale)
                                            for q in profile.queues))
    t0 = time.monotonic()
    jobs = generate(profile)
    log(f"{len(jobs)} jobs generated in {time.monotonic() - t0:.1f} s; rss {rss_mb():.0f} MB")
    soak = Soak(cfg, cycle_s, sample_s, log, checkpoint, trace_from)
    result = simulate(soak_cluster(nodes), jobs, cfg, days * 24, cycle_s=cycle_s, sample_s=sample_s,
                      on_cycle=soak.on_cycle)
    summary = result.summary()
    return {
        "days": days, "nodes": nodes, "gpus": summary["capacityGPUs"], "seed": seed, "cycleS": cycle_s,
        "sampleS": sample_s, "loadScale": round(scale, 3), "offeredGPUs": round(offered_gpus(jobs, days), 1),
        "config": overrides or {}, "jobs": len(jobs), "cycles": soak.cycles, "binds": result.binds,
        "evictions": summary["evictions"], "meanAllocation": summary["meanAllocation"],
        "invariantsBroken": len(soak.broken), "brokenCycles": soak.broken[:50],
        "fits": soak.fits(min(1.0, days / 2)), "wallS": round(time.monotonic() - t0, 1), "samples": soak.samples,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--days", type=float, default=7.0, help="virtual days (default 7)")
    p.add_argument("--nodes", type=int, default=1000, help="nodes of 8 GPUs (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cycle-s", type=float, default=60.0, help="virtual seconds between cycles (default 60)")
    p.add_argument("--sample-s", type=float, default=3600.0, help="virtual seconds between samples (default 3600)")
    p.add_argument("--load", type=float, default=None,
                   help="arrival-rate multiplier (default: the trace asks for 90%% of the GPU-hours)")
    p.add_argument("--actions", default=None,
                   help="the config's actions, comma-separated (default: all; 'allocate,stale-gang' leaves out "
                   "the victim searches)")
    p.add_argument("--max-victim-searches", type=int, default=None, help="the config's maxVictimSearches")
    p.add_argument("--trace-from", type=float, default=None, metavar="DAY",
                   help="follow allocations with tracemalloc from this virtual day on (slow): each later sample "
                   "holds the largest allocation sites still alive that were made since")
    output_args(p)
    args = p.parse_args(argv)
    log = progress(args.quiet, "soak")
    head = {"machine": machine_info(), "engine": engine_revision(), "loadBefore": os.getloadavg()}

    def checkpoint(soak: Soak) -> None:  # --json holds the samples so far while it runs (a long run may be cut)
        if args.json:
            partial = {**head, "partial": True, "cycles": soak.cycles, "invariantsBroken": len(soak.broken),
                       "brokenCycles": soak.broken[:50], "fits": soak.fits(min(1.0, args.days / 2)),
                       "samples": soak.samples}
            Path(args.json).write_text(json.dumps(partial, indent=1) + "\n", encoding="utf-8")

    overrides: dict[str, Any] = {}
    if args.actions:
        overrides["actions"] = [a.strip() for a in args.actions.split(",") if a.strip()]
    if args.max_victim_searches is not None:
        overrides["maxVictimSearches"] = args.max_victim_searches
    report = {**head, **run(args.days, args.nodes, args.seed, args.cycle_s, args.sample_s, args.load, log,
                            checkpoint, overrides, args.trace_from), "loadAfter": os.getloadavg()}
    fits = report["fits"]
    print(f"soak: {args.days:g} virtual days, {args.nodes} nodes, {report['jobs']} jobs, {report['cycles']} cycles, "
          f"{report['wallS']:.0f} s wall; invariants broken in {report['invariantsBroken']} cycles")
    for key, unit in (("cycleMedianMs", "ms"), ("rssMB", "MB"), ("podsBound", "pods")):
        f = fits[key]["afterWarmUp"]
        print(f"  {key}: mean {f['mean']} {unit}, slope {f['slopePerDay']} {unit}/day "
              f"({f['slopePerDayPctOfMean']}% of the mean per day, from day {f['fromDay']:g})")
    write_report("soak", report, args, bulky=("samples", "brokenCycles", "machine"))
    return 1 if report["invariantsBroken"] else 0


if __name__ == "__main__":
    sys.exit(main())
