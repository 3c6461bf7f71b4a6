"""kaictl and kaid command lines: contracts, formats, help and errors."""

from __future__ import annotations

import inspect
import json
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from kaictl.app import app as kaictl
from kaid.cli import main
from kaid.commands import app as kaid
from kaid.kube import startup as kaid_run
from kaid.kube.startup import RUN_FLAGS, RUN_OPTIONS, parse_run_args
from tests.objects import node, pod, podgroup, queue

runner = CliRunner()


def write(tmp_path: Path, objs: list[dict[str, Any]], name: str = "snap.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump_all(objs))
    return p


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    objs = [node("n1", gpus=4), queue("team", gpu=(2, 3, 1)), podgroup("g", "team", 2),
            pod("g-0", gpus=1, group="g"), pod("g-1", gpus=1, group="g"),
            pod("big", gpus=4, queue="team", created="2026-01-02T00:00:00Z")]
    return write(tmp_path, objs)


def test_dry_run_json_contract(snap: Path) -> None:
    res = runner.invoke(kaictl, ["dry-run", "--snapshot", str(snap), "-o", "json", "--now", "1767225600"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) >= {"cycles", "pods", "actions", "pending"}
    assert out["cycles"] == 1
    assert {p["name"]: p["status"] for p in out["pods"]} == {"g-0": "Running", "g-1": "Running", "big": "Pending"}
    for p in out["pods"]:
        assert set(p) >= {"namespace", "name", "podGroup", "queue", "status", "node", "gpus"}
    assert all(set(a) >= {"cycle", "type", "pod", "node", "reason", "by"} for a in out["actions"])
    assert [a["type"] for a in out["actions"]] == ["bind", "bind"]
    (pending,) = out["pending"]
    assert pending["podGroup"] == "pg-pod-big"
    assert pending["reasons"][0]["reason"] == "QueueLimit"


def test_dry_run_cycles_and_extra_files(snap: Path, tmp_path: Path) -> None:
    extra = write(tmp_path, [pod("late", gpus=1, queue="team", created="2026-01-03T00:00:00Z")], "more.yaml")
    res = runner.invoke(kaictl, ["dry-run", "--snapshot", str(snap), "-f", str(extra), "--cycles", "3",
                                 "-o", "yaml"])
    assert res.exit_code == 0, res.output
    out = yaml.safe_load(res.stdout)
    assert out["cycles"] == 3
    status = {p["name"]: p["status"] for p in out["pods"]}
    assert status["late"] == "Running" and status["big"] == "Pending"


def test_dry_run_table_for_people(snap: Path) -> None:
    res = runner.invoke(kaictl, ["dry-run", "--snapshot", str(snap)])
    assert res.exit_code == 0
    assert "Pending" in res.stdout and "QueueLimit" in res.stdout and "kaictl queue set team" in res.stdout
    assert "\x1b[" not in res.stdout  # no colour when not on a terminal


@pytest.mark.parametrize(("args", "words"), [
    (["dry-run", "--snapshot", "/nonexistent.yaml"], "snapshot save"),
    (["dry-run"], "--snapshot"),
    (["fairshare", "--snapshot", "/nonexistent.yaml"], "no such file"),
])
def test_errors_say_what_to_do(args: list[str], words: str) -> None:
    res = runner.invoke(kaictl, args)
    assert res.exit_code == 1
    assert words in res.output


def test_broken_snapshot_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Node\nmetadata: {name: [unclosed\n")
    res = runner.invoke(kaictl, ["dry-run", "--snapshot", str(bad)])
    assert res.exit_code == 1 and "not valid YAML" in res.output
    bad.write_text("- 1\n- 2\n")
    res = runner.invoke(kaictl, ["dry-run", "--snapshot", str(bad)])
    assert res.exit_code == 1 and "not a Kubernetes object" in res.output


def test_an_object_without_a_name_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "nameless.yaml"
    bad.write_text("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: scheduling.run.ai/v2, kind: Queue, spec: {}}\n")
    res = runner.invoke(kaictl, ["dry-run", "--snapshot", str(bad)])
    assert res.exit_code == 1 and "item 1 of the List (Queue) has no metadata.name" in res.output


GENERATED_JOB = """
apiVersion: batch/v1
kind: Job
metadata: {generateName: train-, labels: {kai.scheduler/queue: team-a}}
spec:
  parallelism: 2
  template:
    spec:
      containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: "1"}}}]
"""


def test_a_workload_named_by_generate_name_keeps_its_queue_and_gang(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all([
        {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "team-a"},
         "spec": {"resources": {"gpu": {"quota": 8, "limit": -1}}}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
         "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8", "pods": "110"}}},
    ]))
    job = tmp_path / "job.yaml"
    job.write_text(GENERATED_JOB)
    runs = [runner.invoke(kaictl, ["dry-run", "--snapshot", str(cluster), "-f", str(job), "-o", "json"])
            for _ in range(2)]
    assert all(r.exit_code == 0 for r in runs), runs[0].output
    pods = json.loads(runs[0].stdout)["pods"]
    assert len(pods) == 2 and {p["queue"] for p in pods} == {"team-a"}
    assert len({p["podGroup"] for p in pods}) == 1 and pods[0]["podGroup"].startswith("pg-job-train-")
    assert {p["status"] for p in pods} == {"Running"}
    assert runs[0].stdout == runs[1].stdout  # the made-up name is the same every time


def test_queue_create_checks_the_queue_before_the_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nowhere = tmp_path / "no-kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(nowhere))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    bad = runner.invoke(kaictl, ["queue", "create", "team", "--gpu-quota", "-5"])
    assert bad.exit_code == 1 and "queue team is invalid" in bad.output and "kubeconfig" not in bad.output
    good = runner.invoke(kaictl, ["queue", "create", "team", "--gpu-quota", "5"])
    assert good.exit_code == 1 and "kubeconfig" in good.output
    assert "--snapshot" not in good.output  # queue create writes to a cluster: no offline way to offer
    offline = runner.invoke(kaictl, ["fairshare"])
    assert offline.exit_code == 1 and "--snapshot FILE to work offline" in offline.output


def test_unknown_output_format(snap: Path) -> None:
    res = runner.invoke(kaictl, ["dry-run", "--snapshot", str(snap), "-o", "xml"])
    assert res.exit_code == 1 and "table, wide, json, yaml" in res.output


def test_fairshare_json_and_tree(snap: Path) -> None:
    res = runner.invoke(kaictl, ["fairshare", "--snapshot", str(snap), "-o", "json"])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["queues"]
    assert set(row) >= {"name", "parent", "deserved", "fairShare", "allocated", "requested", "limit"}
    assert row["limit"] == {"gpu": 3.0, "cpu": -1, "memory": -1}
    assert row["requested"]["gpu"] == 6.0 and row["fairShare"]["gpu"] == 3.0
    tree = runner.invoke(kaictl, ["fairshare", "--snapshot", str(snap)])
    assert tree.exit_code == 0 and "team" in tree.stdout and "under share" in tree.stdout
    wide = runner.invoke(kaictl, ["fairshare", "--snapshot", str(snap), "-o", "wide"])
    assert "MEMORY" in wide.stdout


def test_simulate_json_is_deterministic() -> None:
    args = ["simulate", "--hours", "1", "--seed", "3", "-o", "json"]
    a = runner.invoke(kaid, args)
    b = runner.invoke(kaictl, args)
    assert a.exit_code == 0, a.output
    sa, sb = json.loads(a.stdout), json.loads(b.stdout)
    for s in (sa, sb):
        s.pop("wallSeconds")
    assert sa == sb
    assert set(sa["queues"]) == {"team-a", "team-b", "research", "inference"}
    assert sa["binds"] > 0 and 0 < sa["meanAllocation"] <= 1
    assert sa["timeline"] and set(sa["timeline"][0]) == {"t", "allocatedGPUs", "pendingJobs", "queues"}


def test_simulate_table_and_bad_trace(tmp_path: Path) -> None:
    res = runner.invoke(kaid, ["simulate", "--hours", "0.5"])
    assert res.exit_code == 0, res.output
    assert "fair share against use" in res.stdout and "Waits by job size" in res.stdout
    bad = tmp_path / "t.yaml"
    bad.write_text("jobs: [{name: a}]\n")
    res = runner.invoke(kaid, ["simulate", "--trace", str(bad)])
    assert res.exit_code == 1 and "t.yaml" in res.output


def test_simulate_with_cluster_and_trace_files(tmp_path: Path) -> None:
    cluster = write(tmp_path, [node("n1", gpus=8), queue("q")], "cluster.yaml")
    trace = tmp_path / "trace.yaml"
    trace.write_text(yaml.safe_dump({"jobs": [
        {"name": "a", "queue": "q", "arrival_s": 0, "duration_s": 600, "pods": 2, "gpus_per_pod": 4},
        {"name": "b", "queue": "q", "arrival_s": 60, "duration_s": 600, "pods": 1, "gpus_per_pod": 1}]}))
    res = runner.invoke(kaictl, ["simulate", "--cluster", str(cluster), "--trace", str(trace), "--hours", "1",
                                 "-o", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["capacityGPUs"] == 8 and out["queues"]["q"]["started"] == 2


@pytest.mark.parametrize("cmd", [[], ["dry-run"], ["fairshare"], ["simulate"], ["version"]])
def test_help_everywhere(cmd: list[str]) -> None:
    res = runner.invoke(kaictl, [*cmd, "--help"])
    assert res.exit_code == 0 and "Usage" in res.output


def test_console_scripts() -> None:
    scripts = {e.name: e.value for e in entry_points(group="console_scripts") if e.name in
               ("kaid", "kaictl", "kubectl-kai")}
    assert scripts == {"kaid": "kaid.cli:main", "kaictl": "kaictl.app:main", "kubectl-kai": "kaictl.app:main"}


DAEMON_DEFAULTS = {name: p.default for name, p in inspect.signature(kaid_run.run_daemon).parameters.items()}


def _typer_run_params(args: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What typer hands ``run_daemon`` for ``kaid run ARGS``."""
    seen: list[tuple[Any, ...]] = []

    def run_daemon(*args: Any) -> int:
        seen.append(args)
        return 0

    monkeypatch.setattr(kaid_run, "run_daemon", run_daemon)
    res = runner.invoke(kaid, ["run", *args])
    assert res.exit_code == 0, res.output
    names = ["kubeconfig", "context", "config", "identity", "metrics_port", "metrics_address", "leader_elect",
             "log_level"]
    return dict(zip(names, seen[0], strict=True))


def test_kaid_run_fast_options_are_the_commands() -> None:
    """``kaid run`` reads its options without typer: the same options, for the same parameters."""
    command = typer.main.get_command(kaid).commands["run"]  # type: ignore[attr-defined]
    declared = {opt: param.name for param in command.params for opt in [*param.opts, *param.secondary_opts]
                if opt.startswith("--") and opt != "--help"}
    assert declared == {opt: param for opt, (param, _) in RUN_OPTIONS.items()}
    assert set(RUN_FLAGS) == {opt for opt, (_, kind) in RUN_OPTIONS.items() if kind is None}


@pytest.mark.parametrize("args", [
    [],
    ["--kubeconfig", "/tmp/kc", "--context", "lab", "--config=/etc/kai/config.yaml"],
    ["--identity", "a", "--metrics-port", "0", "--metrics-address", "127.0.0.1", "--no-leader-elect"],
    ["--leader-elect", "--log-level=debug", "--metrics-port=8080", "--metrics-port", "9090"],
])
def test_kaid_run_fast_parse_equals_typer(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _typer_run_params(args, monkeypatch)
    parsed = parse_run_args(args)
    assert parsed is not None
    assert {**DAEMON_DEFAULTS, **parsed} == expected


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--metrics-port", "eighty"], ["--kubeconfig"],
                                  ["--bogus", "1"], ["extra"], ["--no-leader-elect=yes"]])
def test_kaid_run_leaves_the_rest_to_typer(args: list[str], monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_run_args(args) is None
    started: list[Any] = []

    def run_daemon(*args: Any, **params: Any) -> int:
        started.append(args or params)
        return 0

    monkeypatch.setattr(kaid_run, "run_daemon", run_daemon)
    monkeypatch.setattr("sys.argv", ["kaid", "run", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    out = capsys.readouterr()
    if args[0] in ("--help", "-h"):
        assert exit_.value.code == 0 and "Usage" in out.out and "--kubeconfig" in out.out
    else:  # typer explains the mistake, and nothing starts
        assert exit_.value.code == 2 and "Error" in out.err
    assert started == []


def test_kaid_run_fast_path_starts_the_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[dict[str, Any]] = []

    def run_daemon(**params: Any) -> int:
        started.append(params)
        return 3

    monkeypatch.setattr(kaid_run, "run_daemon", run_daemon)
    monkeypatch.setattr("sys.argv", ["kaid", "run", "--context", "lab", "--metrics-port", "0"])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 3 and started == [{"context": "lab", "metrics_port": 0}]
