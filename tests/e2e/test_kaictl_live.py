"""kaictl against the real control plane: queues, fair share, explain, dry-run, snapshots, top, and
``kubectl kai`` through kubectl's plugin mechanism. Dry-run and explain run as a read-only account."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kaictl.app import app as kaictl

from .controlplane import ControlPlane
from .kaid_helpers import install_kai

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
Obj = dict[str, Any]


def kai(kubeconfig: Path, *args: str) -> Any:
    res = runner.invoke(kaictl, [*args, "--kubeconfig", str(kubeconfig)])
    return res


@pytest.fixture(scope="module")
def setup(control_plane: ControlPlane) -> Iterator[dict[str, Any]]:
    cp = control_plane
    install_kai(cp)
    tag = uuid.uuid4().hex[:6]
    pool = f"kctl-{tag}"
    cp.add_gpu_nodes(2, gpus=4, name_prefix=pool, labels={"kai.test/pool": pool}, wait=True)
    ns = f"kctl-{tag}"
    cp.ensure_namespace(ns)
    cp.wait_for_default_serviceaccount(ns)
    # a read-only identity: everything kaictl reads, nothing it could write
    cp.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"kai-readonly-{tag}"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}],
        }
    )
    cp.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"kai-readonly-{tag}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"kai-readonly-{tag}"},
            "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": ns}],
        }
    )
    viewer = cp.serviceaccount_kubeconfig(ns, "viewer")
    yield {"cp": cp, "ns": ns, "pool": pool, "tag": tag, "admin": cp.kubeconfig, "viewer": viewer}
    cp.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def pod(name: str, ns: str, pool: str, queue: str, gpus: int, **extra: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"kai.scheduler/queue": queue}, **extra.pop("meta", {})},
        "spec": {
            "schedulerName": "kai-scheduler",
            "nodeSelector": {"kai.test/pool": pool},
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {
                        "limits": {"nvidia.com/gpu": str(gpus)},
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                    },
                }
            ],
            **extra,
        },
    }


def test_queue_lifecycle(setup: dict[str, Any]) -> None:
    admin, tag = setup["admin"], setup["tag"]
    parent, child = f"p-{tag}", f"c-{tag}"
    res = kai(admin, "queue", "create", parent, "--gpu-quota", "8", "--gpu-limit", "16")
    assert res.exit_code == 0, res.output
    q = json.loads(setup["cp"].kubectl("get", "queue", parent, "-o", "json").stdout)
    assert q["spec"]["resources"]["cpu"] == {"quota": 0, "limit": -1, "overQuotaWeight": 1}  # explicit values
    assert kai(admin, "queue", "create", child, "--parent", f"ghost-{tag}").exit_code == 1
    bad = kai(admin, "queue", "create", child, "--parent", parent, "--gpu-quota", "4", "--gpu-limit", "2")
    assert bad.exit_code == 1 and "below quota" in bad.output
    warn = kai(admin, "queue", "create", child, "--parent", parent, "--gpu-quota", "12")
    assert warn.exit_code == 0 and "add up to 12" in warn.output
    listed = json.loads(kai(admin, "queue", "list", "-o", "json").stdout)["queues"]
    row = next(r for r in listed if r["name"] == child)
    assert row["parent"] == parent and row["deserved"]["gpu"] == 12
    assert kai(admin, "queue", "set", child, "--gpu-limit", "20").exit_code == 0
    q = json.loads(setup["cp"].kubectl("get", "queue", child, "-o", "json").stdout)
    assert q["spec"]["resources"]["gpu"]["limit"] == 20 and q["spec"]["resources"]["gpu"]["quota"] == 12
    desc = json.loads(kai(admin, "queue", "describe", child, "-o", "json").stdout)
    assert desc["name"] == child and desc["limit"]["gpu"] == 20
    refused = kai(admin, "queue", "delete", parent)
    assert refused.exit_code == 1 and "child queues" in refused.output
    assert kai(admin, "queue", "delete", child).exit_code == 0
    assert kai(admin, "queue", "delete", parent).exit_code == 0
    assert setup["cp"].kubectl("get", "queue", parent, check=False).returncode != 0


@pytest.fixture(scope="module")
def pending_work(setup: dict[str, Any]) -> dict[str, Any]:
    """No kaid runs here: pods stay pending, and kaictl recomputes why with the engine."""
    cp, ns, pool, tag, admin = setup["cp"], setup["ns"], setup["pool"], setup["tag"], setup["admin"]
    lim = f"lim-{tag}"
    assert (
        kai(
            admin, "queue", "create", lim, "--parent", "default-parent-queue", "--gpu-quota", "1", "--gpu-limit", "2"
        ).exit_code
        == 0
    )
    cp.apply(pod("limited", ns, pool, lim, 4))
    cp.apply(pod("huge", ns, pool, "default-queue", 16))
    cp.apply(
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "gang", "namespace": ns},
            "spec": {"minMember": 3, "queue": "default-queue"},
        }
    )
    for i in range(3):
        cp.apply(pod(f"gang-{i}", ns, pool, "default-queue", 3, meta={"annotations": {"pod-group-name": "gang"}}))
    return {"queue": lim}


def test_explain_limit_gang_impossible_as_read_only(setup: dict[str, Any], pending_work: dict[str, Any]) -> None:
    viewer, ns = setup["viewer"], setup["ns"]
    res = kai(viewer, "explain", "pod", "limited", "-n", ns, "-o", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["reasons"][0]["reason"] == "QueueLimit"
    assert any(f"fits now if queue {pending_work['queue']}'s gpu limit were 4" in w for w in data["whatIf"])
    data = json.loads(kai(viewer, "explain", "pod", "huge", "-n", ns, "-o", "json").stdout)
    assert any("can never fit" in w and "16 GPUs" in w for w in data["whatIf"])
    data = json.loads(kai(viewer, "explain", "podgroup", "gang", "-n", ns, "-o", "json").stdout)
    gang = next(r for r in data["reasons"] if r["reason"] == "GangUnschedulable")
    assert gang["details"] == {"needed": 3, "placeable": 2}
    text = kai(viewer, "explain", "pod", "gang-0", "-n", ns)
    assert "Why it waits" in text.stdout


def test_explain_fragmentation(setup: dict[str, Any]) -> None:
    cp, tag, admin = setup["cp"], setup["tag"], setup["admin"]
    pool = f"frag-{tag}"
    cp.add_gpu_nodes(2, gpus=2, name_prefix=pool, labels={"kai.test/pool": pool}, wait=True)
    ns = f"frag-{tag}"
    cp.ensure_namespace(ns)
    cp.wait_for_default_serviceaccount(ns)
    nodes = [f"{pool}-0", f"{pool}-1"]
    for i, n in enumerate(nodes):  # one GPU taken on each node
        filler = pod(f"filler-{i}", ns, pool, "default-queue", 1, priorityClassName="inference")
        filler["spec"]["nodeName"] = n  # non-preemptible, so consolidation cannot move it
        cp.apply(filler)
    cp.apply(pod("pair", ns, pool, "default-queue", 2))
    data = json.loads(kai(admin, "explain", "pod", "pair", "-n", ns, "-o", "json").stdout)
    frag = next(r for r in data["reasons"] if r["reason"] == "Fragmentation")
    assert frag["details"]["largestBlock"] == 1


def test_explain_evicted_pod(setup: dict[str, Any]) -> None:
    cp, ns = setup["cp"], setup["ns"]
    cp.create(
        f"/api/v1/namespaces/{ns}/events",
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "gone.1", "namespace": ns},
            "involvedObject": {"kind": "Pod", "name": "gone", "namespace": ns},
            "reason": "Evicted",
            "type": "Warning",
            "message": f"reclaim for {ns}/winner: reclaimed for {ns}/winner: queue a has 0 GPUs allocated",
            "lastTimestamp": "2026-11-21T10:00:00Z",
            "firstTimestamp": "2026-11-21T10:00:00Z",
            "count": 1,
            "source": {"component": "kai-scheduler"},
        },
    )
    data = json.loads(kai(setup["viewer"], "explain", "pod", "gone", "-n", ns, "-o", "json").stdout)
    assert data["state"] == "Evicted" and data["action"] == "reclaim" and data["by"] == f"{ns}/winner"
    assert data["when"] == "2026-11-21T10:00:00Z"


def test_fairshare_and_top_live(setup: dict[str, Any], pending_work: dict[str, Any]) -> None:
    rows = json.loads(kai(setup["viewer"], "fairshare", "-o", "json").stdout)["queues"]
    assert pending_work["queue"] in {r["name"] for r in rows}
    top = kai(setup["viewer"], "top", "-o", "json")
    assert top.exit_code == 0, top.output
    data = json.loads(top.stdout)
    assert data["gpus"] > 0 and any(j["podGroup"] == f"{setup['ns']}/gang" for j in data["pending"])


def test_dry_run_live_equals_saved_snapshot(
    setup: dict[str, Any], pending_work: dict[str, Any], tmp_path: Path
) -> None:
    viewer, ns, pool = setup["viewer"], setup["ns"], setup["pool"]
    work = tmp_path / "work.yaml"
    work.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "train", "namespace": ns, "annotations": {"kai.scheduler/batch-min-member": "2"}},
                "spec": {
                    "parallelism": 2,
                    "template": {
                        "metadata": {"labels": {"kai.scheduler/queue": "default-queue"}},
                        "spec": {
                            "nodeSelector": {"kai.test/pool": pool},
                            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                        },
                    },
                },
            }
        )
    )
    now = "1800000000"
    live = kai(viewer, "dry-run", "-f", str(work), "-o", "json", "--now", now)
    assert live.exit_code == 0, live.output
    saved = tmp_path / "snap.yaml"
    assert kai(viewer, "snapshot", "save", "-o", str(saved)).exit_code == 0
    assert "Secret" not in saved.read_text()
    offline = runner.invoke(kaictl, ["dry-run", "--snapshot", str(saved), "-f", str(work), "-o", "json", "--now", now])
    assert offline.exit_code == 0, offline.output
    a, b = json.loads(live.stdout), json.loads(offline.stdout)
    assert a["pods"] == b["pods"] and a["pending"] == b["pending"] and a["actions"] == b["actions"]
    mine = {p["name"]: p for p in a["pods"] if p["namespace"] == ns}
    assert mine["train-0"]["status"] == "Running" and mine["limited"]["status"] == "Pending"
    # and nothing was written: the Job does not exist, no pod got a node
    assert setup["cp"].kubectl("get", "job", "train", "-n", ns, check=False).returncode != 0
    pods = json.loads(setup["cp"].kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"]
    assert not any(p["spec"].get("nodeName") for p in pods if not p["metadata"]["name"].startswith("filler"))


def test_read_only_account_cannot_write(setup: dict[str, Any]) -> None:
    res = kai(setup["viewer"], "queue", "create", f"nope-{setup['tag']}")
    assert res.exit_code == 1 and "forbidden" in res.output.lower()


def test_kubectl_kai_plugin_live(setup: dict[str, Any]) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '')}", "KUBECONFIG": str(setup["admin"])}
    out = subprocess.run(
        [kubectl, "kai", "fairshare", "-o", "json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "default-queue" in {r["name"] for r in json.loads(out.stdout)["queues"]}
