"""``kaictl explain`` on a snapshot of 1,000 nodes and 10,000 pods: how long one answer takes.

Target (issue "kubectl kai"): within 2 s. The workload is bench_allocate's (same seed, same objects),
written to a snapshot file as ``kaictl snapshot save`` would; each measured run is the whole command,
``kaictl explain pod NAME --snapshot FILE -o json``, in process: reading the file, the snapshot, a cycle,
and the what-ifs the answer needs. Usage: ``python -m benchmarks.bench_explain [--repeat N] [--json F] [--record]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from benchmarks.bench_allocate import build_workload
from benchmarks.common import machine_info, output_args, percentile, write_report
from kaictl.app import app as kaictl
from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.kube.strip import snapshot_list
from kaid.model.build import build_snapshot


def pick_targets(objs: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """A pending single pod, a gang pod and a fractional pod that a cycle leaves pending."""
    cfg = SchedulerConfig()
    snap = build_snapshot(objs, cfg, time.time())
    d = run_cycle(snap, cfg)
    out: dict[str, tuple[str, str]] = {}
    for key in sorted(d.pending):
        job = snap.jobs[key]
        pod = job.pods[0]
        kind = "gang" if job.min_member > 1 else ("fractional" if pod.frac_devices else "single")
        out.setdefault(kind, (pod.namespace, pod.name))
        if len(out) == 3:
            break
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_explain")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    output_args(p)
    args = p.parse_args(argv)
    load = os.getloadavg()
    wl = build_workload(args.nodes, args.pods, 50, args.seed)
    runner = CliRunner()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.json"  # what `kaictl snapshot save -o snapshot.json` writes
        path.write_text(json.dumps(snapshot_list(wl.objects)))
        targets = pick_targets(wl.objects)
        results: dict[str, Any] = {}
        for kind, (ns, name) in targets.items():
            times = []
            answer: dict[str, Any] = {}
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                res = runner.invoke(kaictl, ["explain", "pod", name, "-n", ns, "--snapshot", str(path), "-o", "json"])
                times.append(time.perf_counter() - t0)
                if res.exit_code != 0:
                    print(res.output, file=sys.stderr)
                    return 1
                answer = json.loads(res.stdout)
            results[kind] = {"pod": f"{ns}/{name}", "median_s": round(statistics.median(times), 3),
                             "p99_s": round(percentile(times, 0.99), 3),
                             "reasons": [r["reason"] for r in answer["reasons"]], "whatIf": answer["whatIf"]}
    report = {"benchmark": "bench_explain", "nodes": args.nodes,
              "pods": len([o for o in wl.objects if o.get("kind") == "Pod"]),
              "snapshotBytes": path.stat().st_size if path.exists() else None, "loadavg_before": load,
              "machine": machine_info(), "results": results}
    print(f"bench_explain: {args.nodes} nodes, {report['pods']} pods, {args.repeat} repeats; "
          f"load {load[0]:.2f} before, {report['machine']['loadavg'][0]:.2f} after")
    print(f"{'pending pod':<12} {'median s':>9} {'p99 s':>7}  reasons")
    for kind, r in results.items():
        print(f"{kind:<12} {r['median_s']:>9.3f} {r['p99_s']:>7.3f}  {', '.join(r['reasons'])}")
    print("(the whole command in process: read the file, build the snapshot, run a cycle and the what-ifs; "
          "target: within 2 s)")
    write_report("bench_explain", report, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
