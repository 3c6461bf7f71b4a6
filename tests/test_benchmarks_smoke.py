"""Smoke test of benchmarks/bench_allocate.py on a tiny cluster: it runs, and its report is complete.

Nothing here looks at how long anything took (docs/architecture.md: benchmarks never fail on time).
"""

from __future__ import annotations

import gc
import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # benchmarks/ is not an installed package

from benchmarks import bench_allocate as bench  # noqa: E402
from kaid.kube.startup import GC_THRESHOLDS  # noqa: E402

TINY = ["--nodes", "20", "--pods", "200", "--queues", "50", "--repeat", "1", "--seed", "3", "--scale", "2", "--quiet"]

SOLVER_KEYS = {
    "snapshot_s", "cycle_s", "total_s", "cycle_cpu_s", "solver_s", "actions_s", "fair_share_and_decisions_s",
    "gpus_allocated", "pods_bound", "jobs_bound", "jobs_pending",
    "gangs_placed", "gang_nodes_mean", "gang_nodes_max", "topology_gangs_placed", "topology_gang_racks_mean",
    "gangs_cpsat", "quality_stable",
}
RATIO_KEYS = {"snapshot_median", "cycle_median", "cycle_p99", "total_median", "gpus_allocated", "pods_bound",
              "gangs_placed", "gang_nodes_mean", "gang_nodes_max", "topology_gang_racks_mean"}
COMPARISON_KEYS = {"gangs_both_placed", "cpsat_fewer_nodes", "cpsat_more_nodes", "same_nodes", "nodes_saved_total",
                   "only_cpsat_placed", "only_greedy_placed", "per_gang_nodes"}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench") / "report.json"
    assert bench.main([*TINY, "--json", str(out)]) == 0
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def test_report_has_every_key(report: dict[str, Any]) -> None:
    assert {"benchmark", "args", "machine", "workload", "results", "ratios", "comparison", "larger", "scaling",
            "rss"} <= set(report)
    assert set(report["results"]) == {"cpsat", "greedy"}
    for solver in ("cpsat", "greedy"):
        res = report["results"][solver]
        assert set(res) >= SOLVER_KEYS, SOLVER_KEYS - set(res)
        for timing in ("snapshot_s", "cycle_s", "total_s", "cycle_cpu_s", "solver_s"):
            assert {"median", "p99", "runs"} <= set(res[timing])
            assert len(res[timing]["runs"]) == 1
        assert set(res["actions_s"]) == {"allocate", "consolidate", "reclaim", "preempt", "stale-gang"}
        assert set(report["larger"]["results"][solver]) >= SOLVER_KEYS
        assert set(report["scaling"][solver]) == {"total_s", "cycle_s", "snapshot_s", "total_cpu_s", "cycle_cpu_s"}
        for k in ("total_s", "total_cpu_s"):  # each repeat's two sizes, measured together
            pairs = report["scaling_by_repeat"][solver][k]
            assert len(pairs["runs"]) == 1
            assert pairs["runs"][0] == round(report["larger"]["results"][solver][k]["runs"][0] / res[k]["runs"][0], 3)
            assert pairs["median"] == pairs["runs"][0]
        assert set(res["actions_cpu_s"]) == set(res["actions_s"])
    assert set(report["ratios"]) >= RATIO_KEYS
    assert set(report["comparison"]) >= COMPARISON_KEYS
    assert report["args"] == {"nodes": 20, "pods": 200, "queues": 50, "repeat": 1, "seed": 3, "scale": 2,
                              "gc": "kaid"}
    assert report["larger"]["workload"]["nodes"] == 40
    for size in ("20x200x50", "40x400x100"):
        assert report["rss"][size]["peak_mb"] >= report["rss"][size]["imports_mb"] > 0


def test_the_collector_is_left_as_it_was_found() -> None:
    """The cold cycles run under kaid's gc settings (``--gc kaid``) and hand the collector back unchanged."""
    before, frozen = (gc.isenabled(), gc.get_threshold()), gc.get_freeze_count()
    with bench.kaid_gc():
        assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.get_freeze_count() > 0
    assert (gc.isenabled(), gc.get_threshold()) == before
    if not frozen:  # what others froze before stays frozen; otherwise nothing does
        assert gc.get_freeze_count() == 0


def test_every_solver_binds_pods(report: dict[str, Any]) -> None:
    for solver in ("cpsat", "greedy"):
        res = report["results"][solver]
        assert res["pods_bound"] > 0
        assert res["jobs_bound"] > 0
        assert res["gpus_allocated"] > 0
    assert report["results"]["greedy"]["gangs_cpsat"] == 0  # the greedy path never calls the solver


def test_workload_matches_the_arguments(report: dict[str, Any]) -> None:
    wl = report["workload"]
    assert wl["nodes"] == 20
    assert wl["gpus"] == 20 * bench.GPUS_PER_NODE
    assert wl["queues"] == 50
    assert wl["leaf_queues"] == 40
    assert wl["pending_pods"] == 200
    assert wl["single_pods"] + wl["fractional_pods"] + wl["gang_pods"] == 200
    assert wl["gangs"] > 0
    assert wl["background_pods"] > 0


def test_workload_is_deterministic() -> None:
    a = bench.build_workload(nodes=12, pods=80, queues=20, seed=5)
    b = bench.build_workload(nodes=12, pods=80, queues=20, seed=5)
    assert a.objects == b.objects
    assert a.gangs == b.gangs
    assert bench.build_workload(nodes=12, pods=80, queues=20, seed=6).objects != a.objects


def test_text_report_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--nodes", "8", "--pods", "40", "--queues", "18", "--repeat", "1", "--scale", "2", "--no-rss",
                       "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "cpsat/greedy" in out
    assert "cycle, every action, median (s)" in out
    assert "2 times the cluster, cpsat: cold cycle x" in out
    assert bench.main(["--queues", "5", "--quiet"]) == 2
    assert "at least" in capsys.readouterr().err


def test_profile_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--nodes", "8", "--pods", "40", "--profile", "cpsat", "--profile-top", "5"]) == 0
    out = capsys.readouterr().out
    assert "by cumulative" in out
    assert "by tottime" in out


def test_steady_only_writes_its_report_and_restores_the_gc(tmp_path: Any) -> None:
    """``--steady-only`` (kaid's incremental snapshot, under kaid's gc settings) writes a JSON report like the rest, so
    ``--record`` keeps its history; the collector is as it was afterwards."""
    import gc

    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    out = tmp_path / "steady.json"
    assert bench.main([*TINY, "--steady-only", "--json", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["steady_only"] is True and data["args"]["scale"] == 2
    for part in (data, data["larger"]):
        assert {"steady_snapshot_cpu_s", "cold_build_snapshot_cpu_s", "steady_total_cpu_s"} <= set(part["steady"])
    assert "commit" in data["machine"]
    assert gc.get_threshold() == thresholds
    assert frozen or gc.get_freeze_count() == 0


def test_a_probe_started_by_a_large_process_reads_its_own_peak() -> None:
    """The resident-memory probes run in a fresh interpreter that the benchmark starts: its peak must be its own.
    ``getrusage``'s ``ru_maxrss`` there reads the benchmark's (Linux keeps the parent's peak across the exec)."""
    ballast = bytearray(300_000_000)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    code = "import os; from benchmarks.common import proc_memory_mb; print(proc_memory_mb(os.getpid())[0])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert len(ballast) == 300_000_000
    assert float(done.stdout.strip()) < 150
