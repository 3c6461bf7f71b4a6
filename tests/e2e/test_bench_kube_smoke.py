"""Smoke test of benchmarks/bench_kube.py on a tiny cluster: both schedulers and the raw bind loop run against a real
control plane, every pod gets bound, kaid keeps its gangs whole, and the report is complete.

The benchmark starts (and stops) its own control plane rather than sharing the session's ``control_plane``
fixture: it installs kai's manifests, scales the kaid Deployment to 0, adds GPU nodes and starts
kube-scheduler, all of which would change what the other end-to-end tests see.

Nothing here looks at how long anything took (docs/architecture.md: benchmarks never fail on time).
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # benchmarks/ is not an installed package

from benchmarks import bench_kube as bench  # noqa: E402

TINY = [
    "--nodes",
    "5",
    "--pods",
    "40",
    "--gangs",
    "2",
    "--gang-min",
    "4",
    "--gang-max",
    "8",
    "--queues",
    "2",
    "--qps",
    "50",
    "--timeout",
    "180",
    "--seed",
    "1",
    "--quiet",
]

RESULT_KEYS = {
    "create_s",
    "quiet_wait_s",
    "first_bind_s",
    "all_bound_s",
    "pods_per_s",
    "pods_per_s_binding",
    "pods_bound",
    "gangs_whole",
    "gangs_partial",
    "max_gpus_on_a_node",
    "overcommitted_nodes",
    "scheduler_cpu_s",
    "scheduler_peak_rss_mb",
    "apiserver_cpu_s",
    "nodes_not_ready",
    "runs",
    "all_bound_every_run",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench-kube") / "report.json"
    assert bench.main([*TINY, "--raw-watches", "--json", str(out)]) == 0
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def test_report_has_both_schedulers_and_the_raw_loop(report: dict[str, Any]) -> None:
    assert {"benchmark", "args", "machine", "workload", "results", "ratios", "runs"} <= set(report)
    assert set(report["results"]) == {"kaid", "kube-scheduler", "raw", "raw+watches"}
    for sched in ("kaid", "kube-scheduler", "raw", "raw+watches"):
        assert set(report["results"][sched]) >= RESULT_KEYS, RESULT_KEYS - set(report["results"][sched])
        assert report["results"][sched]["scheduler_peak_rss_mb"] > 0, sched
    assert [r["scheduler"] for r in report["runs"]] == ["kaid", "kube-scheduler", "raw", "raw+watches"]
    assert report["ratios"]["pods_per_s"] > 0 and report["ratios"]["kaid_raw_pods_per_s"] > 0
    assert report["ratios"]["raw_kube_pods_per_s"] > 0
    assert len(report["machine"]["loadavg_before"]) == 3
    assert len(report["machine"]["loadavg"]) == 3
    wl = report["workload"]
    assert wl["pods"] == 40 and wl["gangs"] == 2 and wl["nodes"] == 5
    assert wl["single_pods"] + wl["gang_pods"] == 40


def test_every_pod_bound_by_both(report: dict[str, Any]) -> None:
    for run in report["runs"]:
        assert run["all_bound"], run
        assert run["pods_bound"] == 40
        assert run["bound_before_start"] == 0  # nothing scheduled the pods before the scheduler under test
        assert run["overcommitted_nodes"] == 0
        assert run["max_gpus_on_a_node"] <= 8
        assert run["gangs_whole"] == 2 and run["gangs_partial"] == 0
        assert run["nodes_not_ready"] == 0  # counted by a watch on the nodes during the run
        timeline = run["binds_per_half_second"]  # every bind in the half second the watch saw it, from the start
        assert sum(timeline) == 40 and timeline[-1] > 0, timeline


def test_the_raw_loop_binds_with_kaids_concurrency(report: dict[str, Any]) -> None:
    """The raw loop's workers come from the same rule as kaid's actuator's (``bind_workers``: QPS 50, burst 100)."""
    (raw,) = [r for r in report["runs"] if r["scheduler"] == "raw"]
    assert raw["raw"]["workers"] == 25 and raw["raw"]["sent"] == 40
    assert raw["raw"]["bound"] == 40 and raw["raw"]["failed"] == 0


def test_the_api_servers_work_is_counted(report: dict[str, Any]) -> None:
    """Each run reads the API server's counters before its start and after its last bind: exactly the run's binds,
    the lists kaid makes at its start (and not the raw loop's: it listed before its start), and the watch events
    kaid's informers got in the raw loop's process with ``--raw-watches``."""
    for run in report["runs"]:
        counted = run["apiserver"]
        assert counted["requests POST pods/binding"] == 40, run["scheduler"]
        assert counted.get("watch events pods", 0) >= 40, run["scheduler"]  # the timing watch sees every bind
        assert 0 <= run["apiserver_idle_cpu"] < 2
        assert run["apiserver_cpu_per_1000_binds"] is not None
        spent = run["cpu_s"]  # each process's CPU in the run: the control plane's, the scheduler's, the benchmark's
        assert set(spent) == {"kube-apiserver", "etcd", "kube-controller-manager", "kwok", "scheduler", "benchmark",
                              "total"}, run["scheduler"]
        assert spent["kube-apiserver"] > 0 and spent["scheduler"] > 0, run["scheduler"]
        assert spent["total"] >= spent["kube-apiserver"] + spent["scheduler"]
        rest = run["cpu_at_rest"]  # the same processes' CPU at rest before the start, in CPUs
        assert set(rest) == set(spent) - {"scheduler"} and all(0 <= v < 4 for v in rest.values()), rest
        assert run["apiserver_idle_cpu"] == rest["kube-apiserver"]
        assert run["cpu_beyond_rest_s"] == pytest.approx(spent["total"] - rest["total"] * run["all_bound_s"], abs=0.02)
        assert run["cpu_beyond_rest_per_1000_binds"] == pytest.approx(run["cpu_beyond_rest_s"] * 25, abs=0.01)
    by = {r["scheduler"]: r for r in report["runs"]}
    assert by["kaid"]["apiserver"]["response bytes LIST pods"] > 0
    assert "response bytes LIST pods" not in by["raw"]["apiserver"]
    watched = by["raw+watches"]["raw"]
    assert len(watched["watches"]) > 10 and watched["watch_events"]["Pod"] >= 40
    assert by["raw"]["raw"]["watches"] == [] and by["raw"]["raw"]["watch_events"] == {}


def test_kaid_metrics_and_podgroups(report: dict[str, Any]) -> None:
    (kaid,) = [r for r in report["runs"] if r["scheduler"] == "kaid"]
    assert kaid["podgroups_created"] == 2  # the gangs; kaid's podgrouper makes the single pods' own
    metrics = kaid["kaid"]
    assert metrics["binds_ok"] >= 40 and metrics["binds_failed"] == 0
    assert metrics["cycles"] >= 1
    assert {"snapshot", "decide", "apply", "status"} <= set(metrics["phases"])
    assert sum(c["bound"] for c in kaid["kaid_cycles"]) == 40
    (kube,) = [r for r in report["runs"] if r["scheduler"] == "kube-scheduler"]
    assert "podgroups_created" not in kube  # no gang semantics for kube-scheduler


def test_bad_arguments_are_refused() -> None:
    assert bench.main(["--nodes", "1", "--pods", "9", "--gangs", "0", "--quiet"]) == 2  # 9 pods > 8 GPUs
    assert bench.main(["--nodes", "5", "--pods", "10", "--gangs", "3", "--gang-min", "8", "--quiet"]) == 2
    assert bench.main(["--schedulers", "volcano", "--quiet"]) == 2


def test_starts_mode_measures_each_cold_start(tmp_path: pathlib.Path) -> None:
    """``--starts 2``: each scheduler started twice on the same backlog, killed at its first bind, the pods
    it bound made again (so the second start faces the same backlog: it binds again)."""
    out = tmp_path / "starts.json"
    assert bench.main([*TINY, "--starts", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data["starts"]) == {"kaid", "kube-scheduler"}
    for sched, r in data["starts"].items():
        assert len(r["first_bind_s"]) == 2, (sched, r)
        assert all(0 < t < 180 for t in r["first_bind_s"]), (sched, r)
        assert r["min_s"] <= r["median_s"] <= r["max_s"]
    assert data["ratio_first_bind"] > 0


def test_bad_ab_and_start_arguments_are_refused(tmp_path: pathlib.Path) -> None:
    assert bench.main([*TINY, "--kaid-base", str(tmp_path)]) == 2  # no kaid package there
    assert bench.main([*TINY, "--start-binds", "10"]) == 2  # only with --starts
    assert bench.main([*TINY, "--starts", "1", "--start-binds", "0"]) == 2


def test_kaid_against_another_tree_interleaved(tmp_path: pathlib.Path) -> None:
    """``--kaid-base DIR``: kaid of another tree (here a copy whose ``kaid run`` marks its log) runs beside this
    tree's on the same control plane, in the runs and in ``--starts`` (each start lasting ``--start-binds`` binds)."""
    base = tmp_path / "base"
    shutil.copytree(ROOT / "kaid", base / "kaid", ignore=shutil.ignore_patterns("__pycache__"))
    cli = base / "kaid" / "cli.py"
    cli.write_text(cli.read_text(encoding="utf-8") + "\nprint('kaid of the base tree', flush=True)\n",
                   encoding="utf-8")
    logs = tmp_path / "logs"
    out = tmp_path / "ab.json"
    assert bench.main([*TINY, "--schedulers", "kaid", "--no-raw", "--repeat", "2", "--kaid-base", str(base),
                       "--keep-logs", str(logs), "--json", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [r["scheduler"] for r in data["runs"]] == ["kaid", "kaid-base", "kaid-base", "kaid"]  # interleaved
    assert all(r["all_bound"] and r["gangs_whole"] == 2 for r in data["runs"])
    assert set(data["results"]) == {"kaid", "kaid-base"} and data["results"]["kaid-base"]["runs"] == 2
    marked = {p.name for p in logs.iterdir() if "kaid of the base tree" in p.read_text(errors="replace")}
    assert marked == {"kaid-base0.log", "kaid-base1.log"}, sorted(p.name for p in logs.iterdir())
    out = tmp_path / "starts.json"
    assert bench.main([*TINY, "--schedulers", "kaid", "--starts", "1", "--start-binds", "10", "--kaid-base",
                       str(base), "--json", str(out)]) == 0
    starts = json.loads(out.read_text(encoding="utf-8"))["starts"]["kaid"]
    for r in (starts, starts["startup_off"]["kaid-base"]):
        assert len(r["nth_bind_s"]) == 1 and 0 < r["first_bind_s"][0] <= r["nth_bind_s"][0] < 180, r
