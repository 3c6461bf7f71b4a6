"""kaictl commands offline (snapshot files), completions and the kubectl plugin mechanism."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kaictl.app import app as kaictl
from kaictl.completion import files as completion_files
from kaid.kube.strip import snapshot_list
from tests.objects import node, pod, podgroup, queue

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    objs: list[dict[str, Any]] = [
        node("n1", gpus=8), node("n2", gpus=8),
        queue("org", gpu=(16, -1, 1)), queue("team", "org", gpu=(2, 3, 1)), queue("other", "org", gpu=(4, -1, 1)),
        pod("run", gpus=2, queue="team", node_name="n1"),
        pod("b", gpus=2, queue="team", created="2026-01-02T00:00:00Z"),
        pod("huge", gpus=16, queue="other"),
        podgroup("g", "other", 3), *(pod(f"g-{i}", gpus=6, group="g") for i in range(3)),
    ]
    p = tmp_path / "snap.yaml"
    p.write_text(yaml.safe_dump_all(objs))
    return p


def test_queue_list_and_describe_offline(snap: Path) -> None:
    res = runner.invoke(kaictl, ["queue", "list", "--snapshot", str(snap), "-o", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)["queues"]}
    assert rows["team"]["parent"] == "org" and rows["team"]["limit"]["gpu"] == 3.0
    assert rows["team"]["overQuotaWeight"]["gpu"] == 1.0
    table = runner.invoke(kaictl, ["queue", "list", "--snapshot", str(snap)])
    assert "  team" in table.stdout  # indented under org
    res = runner.invoke(kaictl, ["queue", "describe", "team", "--snapshot", str(snap), "-o", "json"])
    data = json.loads(res.stdout)
    pending = [j for j in data["jobs"] if j["state"] == "Pending"]
    assert pending and pending[0]["reasons"][0]["reason"] == "QueueLimit"
    missing = runner.invoke(kaictl, ["queue", "describe", "nope", "--snapshot", str(snap)])
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_explain_limit_with_what_if(snap: Path) -> None:
    res = runner.invoke(kaictl, ["explain", "pod", "b", "--snapshot", str(snap), "-o", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["state"] == "Pending" and data["queue"] == "team"
    assert data["reasons"][0]["reason"] == "QueueLimit"
    assert any("fits now if queue team's gpu limit were 4" in w for w in data["whatIf"])
    assert "1 of 1 waiting" in data["position"]
    text = runner.invoke(kaictl, ["explain", "pod", "b", "--snapshot", str(snap)])
    assert "What would change it" in text.stdout and "kaictl queue set team --gpu-limit 4" in text.stdout


def test_explain_impossible_and_gang(snap: Path) -> None:
    data = json.loads(runner.invoke(kaictl, ["explain", "pod", "huge", "--snapshot", str(snap), "-o",
                                             "json"]).stdout)
    assert any("can never fit: pod huge needs 16 GPUs on one node, the largest node has 8" in w
               for w in data["whatIf"])
    data = json.loads(runner.invoke(kaictl, ["explain", "podgroup", "g", "--snapshot", str(snap), "-o",
                                             "json"]).stdout)
    codes = [r["reason"] for r in data["reasons"]]
    assert "GangUnschedulable" in codes
    gang = next(r for r in data["reasons"] if r["reason"] == "GangUnschedulable")
    assert gang["details"] == {"needed": 3, "placeable": 2}


def test_explain_fragmentation_suggests_consolidation(tmp_path: Path) -> None:
    objs = [node("a", gpus=2), node("b", gpus=2), queue("q"),
            pod("x", gpus=1, queue="q", node_name="a"), pod("y", gpus=1, queue="q", node_name="b"),
            pod("big", gpus=2, queue="q")]
    p = tmp_path / "frag.yaml"
    p.write_text(yaml.safe_dump_all(objs))
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("actions: [allocate, reclaim, preempt]\n")
    res = runner.invoke(kaictl, ["explain", "pod", "big", "--snapshot", str(p), "--config", str(cfg), "-o", "json"])
    data = json.loads(res.stdout)
    assert "Fragmentation" in [r["reason"] for r in data["reasons"]]
    assert "fits after moving 1 preemptible pods (consolidation is off)" in data["whatIf"]


def test_explain_unknown_pod(snap: Path) -> None:
    res = runner.invoke(kaictl, ["explain", "pod", "ghost", "--snapshot", str(snap)])
    assert res.exit_code == 1 and "not found" in res.output


def test_top_json(snap: Path) -> None:
    res = runner.invoke(kaictl, ["top", "--snapshot", str(snap), "-o", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["gpus"] == 16 and data["gpusUsed"] == 2
    assert {q["name"] for q in data["queues"]} == {"org", "team", "other"}
    assert {j["podGroup"] for j in data["pending"]} >= {"default/pg-pod-b", "default/pg-pod-huge", "default/g"}
    assert "Pending" in runner.invoke(kaictl, ["top", "--snapshot", str(snap)]).stdout


def test_dry_run_expands_workload_files(snap: Path, tmp_path: Path) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "annotations": {
        "kai.scheduler/batch-min-member": "2"}}, "spec": {"parallelism": 2, "template": {
            "metadata": {"labels": {"kai.scheduler/queue": "other"}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    ptj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt", "labels": {
        "kai.scheduler/queue": "other"}}, "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {
                "limits": {"nvidia.com/gpu": "1"}}}]}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "resources": {
                "limits": {"nvidia.com/gpu": "1"}}}]}}}}}}
    wl = tmp_path / "work.yaml"
    wl.write_text(yaml.safe_dump_all([job, ptj]))
    res = runner.invoke(kaictl, ["dry-run", "--snapshot", str(snap), "-f", str(wl), "-o", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    pods = {p["name"]: p for p in out["pods"]}
    assert pods["train-0"]["podGroup"] == "pg-job-train" and pods["train-0"]["status"] == "Running"
    assert {pods[f"pt-{r}"]["podGroup"] for r in ("master-0", "worker-0", "worker-1")} == {"pg-pytorchjob-pt"}


def test_snapshot_strip_keeps_scheduling_and_drops_secrets() -> None:
    p = pod("a", gpus=1, annotations={"gpu-fraction": "0.5", "secret-ish": "token"})
    p["spec"]["containers"][0]["env"] = [{"name": "PASSWORD", "value": "hunter2"}]
    p["spec"]["containers"][0]["command"] = ["run", "--token=abc"]
    p["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "x"}}]
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}, "data": {"k": "dg=="}}
    doc = snapshot_list([p, secret])
    assert [i["kind"] for i in doc["items"]] == ["Pod"]
    text = json.dumps(doc)
    assert "hunter2" not in text and "token" not in text and "volumes" not in text
    item = doc["items"][0]
    assert item["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
    assert item["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"


def test_simulate_from_snapshot_with_what_ifs(snap: Path, tmp_path: Path) -> None:
    png = tmp_path / "sim.png"
    base = ["simulate", "--snapshot", str(snap), "--hours", "1", "-o", "json", "--seed", "2"]
    a = json.loads(runner.invoke(kaictl, base).stdout)
    b = runner.invoke(kaictl, [*base, "--add-nodes", "2x8gpu", "--set-queue", "team.gpu.limit=8",
                               "--plot", str(png)])
    assert b.exit_code == 0, b.output
    bj = json.loads(b.stdout)
    assert a["capacityGPUs"] == 16 and bj["capacityGPUs"] == 32
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = runner.invoke(kaictl, [*base, "--set-queue", "nope.gpu.quota=1"])
    assert bad.exit_code == 1 and "no queue 'nope'" in bad.output
    bad = runner.invoke(kaictl, [*base, "--add-nodes", "lots"])
    assert bad.exit_code == 1 and "4x8gpu" in bad.output


def test_completions_are_current() -> None:
    for name, text in completion_files().items():
        path = ROOT / "completions" / name
        assert path.exists() and path.read_text() == text, f"{path} is stale: run `python -m kaictl.completion`"


def test_completion_of_commands() -> None:
    res = runner.invoke(kaictl, ["__complete", "queue", "de"])
    assert res.stdout.split() == ["delete", "describe", ":4"]


def test_kubectl_finds_the_plugin(tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    plugin = Path(sys.executable).parent / "kubectl-kai"
    assert plugin.exists(), "kubectl-kai is not installed next to the interpreter: pip install -e ."
    env = {**os.environ, "PATH": f"{plugin.parent}:{os.environ.get('PATH', '')}",
           "KUBECONFIG": str(tmp_path / "none")}
    out = subprocess.run([kubectl, "kai", "version"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("kaictl ")
    listed = subprocess.run([kubectl, "plugin", "list"], capture_output=True, text=True, env=env, timeout=60)
    assert "kubectl-kai" in listed.stdout


def test_explain_a_podgroup_left_alone_says_why(tmp_path: Path) -> None:
    """A PodGroup tried once per node pool and found unschedulable there, and one of another scheduling shard: kai
    does not schedule them, and explain says so (exit 0), for the PodGroup and for its pod."""
    once = podgroup("once", "q", 1, schedulingBackoff=1)
    once["status"] = {"schedulingConditions": [{"type": "Unschedulable", "status": "True", "nodePool": "default",
                                                "message": "0/1 nodes can take a pod of 8 GPUs"}]}
    other = podgroup("other", "q", 1)
    other["metadata"]["labels"] = {"kai.scheduler/node-pool": "b"}
    objs = [node("n1", gpus=8), queue("q", gpu=(8, -1, 1)), once, pod("once-0", gpus=8, group="once"),
            other, pod("other-0", gpus=1, group="other")]
    p = tmp_path / "snap.yaml"
    p.write_text(yaml.safe_dump_all(objs))
    for kind, name in (("podgroup", "once"), ("pod", "once-0")):
        res = runner.invoke(kaictl, ["explain", kind, name, "--snapshot", str(p), "-o", "json"])
        assert res.exit_code == 0, res.output
        data = json.loads(res.stdout)
        assert data["podGroup"] == "default/once" and data["state"] == "NotScheduledHere"
        (why,) = data["reasons"]
        assert "schedulingBackoff: 1" in why and "node pool 'default'" in why
    text = runner.invoke(kaictl, ["explain", "pod", "other-0", "--snapshot", str(p)])
    assert text.exit_code == 0, text.output
    assert "Not scheduled by this scheduler" in text.stdout and "another scheduling shard" in text.stdout
    missing = runner.invoke(kaictl, ["explain", "podgroup", "nope", "--snapshot", str(p)])
    assert missing.exit_code == 1 and "not found" in missing.output
