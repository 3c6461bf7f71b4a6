"""Smoke test of benchmarks/bench_victims.py on a tiny full cluster: it runs, both solvers evict and place,
and its report is complete.

Nothing here looks at how long anything took (docs/architecture.md: benchmarks never fail on time).
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # benchmarks/ is not an installed package

from benchmarks import bench_victims as bench  # noqa: E402

TINY = ["--nodes", "20", "--reclaimers", "12", "--preemptors", "6", "--repeat", "1", "--seed", "0", "--quiet"]

SOLVER_KEYS = {
    "snapshot_s", "cycle_s", "cycle_cpu_s", "cold_cycle_cpu_s", "allocate_only_cold_cycle_cpu_s",
    "allocate_only_cycle_s", "eviction_actions_s", "per_decision_s", "victim_search_s", "victim_search_served_s",
    "victim_searches", "gpus_evicted", "gpus_placed",
    "evicted_per_placed", "pods_evicted", "jobs_hit", "decisions", "reclaim_decisions", "preempt_decisions",
    "decisions_by_cpsat", "decisions_by_first_fit", "reclaimers_served", "preemptors_served", "gpus_evicted_reclaim",
    "gpus_evicted_preempt", "quality_stable", "slowest_searches", "unserved", "gpu_hours_lost",
    "gpu_hours_lost_per_decision", "jobs_restarted", "gangs_broken", "elastic_pods_evicted",
}
RATIO_KEYS = {"cycle_median", "cycle_p99", "per_decision", "victim_search_median", "gpus_evicted", "gpus_placed",
              "evicted_per_placed", "pods_evicted", "jobs_hit", "decisions", "gpu_hours_lost", "jobs_restarted",
              "gangs_broken", "cycle_vs_allocate_cycle", "first_fit_cycle_vs_allocate_cycle",
              "cycle_cpu_vs_freed_allocate_cpu", "first_fit_cycle_cpu_vs_freed_allocate_cpu",
              "cold_cycle_cpu_vs_freed_cold_allocate_cpu", "first_fit_cold_cycle_cpu_vs_freed_cold_allocate_cpu",
              "first_fit_cold_cycle_cpu_vs_cold_allocate_only_cpu"}
COMPARISON_KEYS = {"jobs_both_served", "cpsat_fewer_gpus", "cpsat_more_gpus", "same_gpus", "gpus_saved_total",
                   "only_cpsat_served", "only_first_fit_served", "more", "per_job", "cpsat_fewer_gpu_hours",
                   "cpsat_more_gpu_hours", "gpu_hours_saved_total"}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench") / "report.json"
    assert bench.main([*TINY, "--json", str(out)]) == 0
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def test_report_has_every_key(report: dict[str, Any]) -> None:
    assert {"benchmark", "args", "machine", "workload", "queues", "results", "ratios", "comparison",
            "same_state"} <= set(report)
    assert report["benchmark"] == "bench_victims"
    assert set(report["results"]) == {"cpsat", "greedy"}
    for solver in ("cpsat", "greedy"):
        res = report["results"][solver]
        assert set(res) >= SOLVER_KEYS, SOLVER_KEYS - set(res)
        for timing in ("snapshot_s", "cycle_s", "cycle_cpu_s", "cold_cycle_cpu_s", "allocate_only_cold_cycle_cpu_s",
                       "allocate_only_cycle_s", "eviction_actions_s"):
            assert {"median", "p99", "runs"} <= set(res[timing])
            assert len(res[timing]["runs"]) == 1
        # a cold cycle is the snapshot build and the cycle: never less than the cycle alone
        assert res["cold_cycle_cpu_s"]["median"] >= res["cycle_cpu_s"]["median"]
        assert res["freed_allocate"]["cold_cycle_cpu_s"]["median"] >= res["freed_allocate"]["cycle_cpu_s"]["median"]
    assert set(report["ratios"]) >= RATIO_KEYS
    assert set(report["comparison"]) >= COMPARISON_KEYS
    assert set(report["same_state"]) >= COMPARISON_KEYS | {"available", "cpsat_matches_timed_run"}
    assert report["args"] == {"nodes": 20, "reclaimers": 12, "preemptors": 6, "repeat": 1, "seed": 0}
    assert report["machine"]["loadavg_before"] is None or len(report["machine"]["loadavg_before"]) == 3


def test_both_solvers_evict_and_place(report: dict[str, Any]) -> None:
    for solver in ("cpsat", "greedy"):
        res = report["results"][solver]
        assert res["pods_evicted"] > 0, solver
        assert res["gpus_evicted"] > 0, solver
        assert res["gpus_placed"] > 0, solver
        assert res["decisions"] > 0, solver
    assert report["results"]["greedy"]["decisions_by_cpsat"] == 0  # greedy never asks CP-SAT for victims
    assert report["results"]["cpsat"]["decisions_by_cpsat"] > 0


def test_same_state_pass_leaves_the_cpsat_decisions_alone(report: dict[str, Any]) -> None:
    state = report["same_state"]
    if not state["available"]:
        pytest.skip("the engine has no kaid.actions.evictions._serve to wrap")
    assert state["cpsat_matches_timed_run"] is True
    assert state["jobs_both_served"] > 0


def test_workload_is_full_and_deterministic() -> None:
    a = bench.build_workload(nodes=12, reclaimers=10, preemptors=4, seed=5)
    b = bench.build_workload(nodes=12, reclaimers=10, preemptors=4, seed=5)
    assert a.objects == b.objects
    assert bench.build_workload(nodes=12, reclaimers=10, preemptors=4, seed=6).objects != a.objects
    running = sum(g for k, g in a.pod_gpus.items() if "/run-" in k)
    assert running == 12 * bench.GPUS_PER_NODE  # every GPU is held by a running pod
    assert len(a.reclaimers) == a.summary["reclaimers"] > 0
    assert len(a.preemptors) == 4
    for name, q in a.queues.items():
        assert (q["above_quota"] > 0) == (q["role"] == "borrower") or q["above_quota"] == 0, name


def test_text_report_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--nodes", "8", "--reclaimers", "6", "--repeat", "1", "--no-same-state", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "cpsat/greedy" in out
    assert "GPUs evicted per GPU placed" in out
    assert bench.main(["--repeat", "0", "--quiet"]) == 2
    assert "at least 1" in capsys.readouterr().err


def test_profile_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--nodes", "8", "--reclaimers", "6", "--profile", "cpsat", "--profile-top", "5"]) == 0
    out = capsys.readouterr().out
    assert "by cumulative" in out
    assert "by tottime" in out


def test_what_the_evictions_destroy(report: dict[str, Any]) -> None:
    """Every victim ran for at least START_SPREAD_S[0], so each GPU evicted loses at least that much progress; the
    jobs restarted are among the jobs hit, the gangs broken among the jobs restarted."""
    for solver in ("cpsat", "greedy"):
        res = report["results"][solver]
        assert res["gpu_hours_lost"] >= res["gpus_evicted"] * bench.START_SPREAD_S[0] / 3600 - 0.1
        assert res["gangs_broken"] <= res["jobs_restarted"] <= res["jobs_hit"]
        assert (res["gpu_hours_lost"] > 0) == (res["gpus_evicted"] > 0)
