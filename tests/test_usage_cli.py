"""``kaictl fairshare`` shows (and, with usage history on, weighs) each queue's usage as kaid kept it in the
Queue's ``status.usage``; the same numbers with a live cluster (tests/e2e/test_kaictl_live.py reads it live)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from kaictl.app import app as kaictl
from kaid.api.config import UsageConfig
from kaid.fairshare.usage import UsageHistory, UsageParams
from tests.objects import node, pod, queue

runner = CliRunner()
Obj = dict[str, Any]


def _cluster(tmp_path: Path) -> Path:
    """Two queues of equal weight, each asking for the whole 8-GPU node; kaid's history: ``a`` held 6 GPUs for
    the last hour, ``b`` none (a usage share of 0.75 and 0)."""
    history = UsageHistory(UsageParams.of(UsageConfig()))
    t = time.time() - 600
    for now in (t - 3600, t):
        history.advance(now, {"a": (6000.0, 0.0, 0.0), "b": (0.0, 0.0, 0.0)}, (8000.0, 8000.0, 64e9))
    qa, qb = queue("a", gpu=(0, -1, 1)), queue("b", gpu=(0, -1, 1))
    qa["status"] = {"usage": history.status("a")}
    qb["status"] = {"usage": history.status("b")}
    objs = [node("n1", gpus=8), qa, qb,
            pod("a-0", gpus=8, queue="a"), pod("b-0", gpus=8, queue="b")]
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    return path


def _rows(res: Any) -> dict[str, Obj]:
    assert res.exit_code == 0, res.output
    return {r["name"]: r for r in json.loads(res.stdout)["queues"]}


def test_fairshare_shows_each_queues_persisted_usage(tmp_path: Path) -> None:
    snap = _cluster(tmp_path)
    res = runner.invoke(kaictl, ["fairshare", "--snapshot", str(snap), "-o", "json"])
    rows = _rows(res)
    assert abs(rows["a"]["usage"]["gpu"] - 0.75) < 1e-6 and rows["b"]["usage"]["gpu"] == 0.0
    assert json.loads(res.stdout)["usageComputedAt"].endswith("Z")
    # usage history off (the default): shown, not weighed
    assert rows["a"]["fairShare"]["gpu"] == rows["b"]["fairShare"]["gpu"] == 4.0
    tree = runner.invoke(kaictl, ["fairshare", "--snapshot", str(snap)])
    assert tree.exit_code == 0 and "usage 75.0%" in tree.stdout and "usage 0.0%" in tree.stdout
    table = runner.invoke(kaictl, ["fairshare", "--snapshot", str(snap), "-o", "table"])
    assert table.exit_code == 0 and "GPU USAGE" in table.stdout and "75.0%" in table.stdout


def test_fairshare_weighs_the_persisted_usage_as_kaid_does(tmp_path: Path) -> None:
    """With usage history on, a's weight share 0.5 becomes 0.5 + (0.5 - 0.75) = 0.25 and b's 1.0: 1.6 and 6.4
    GPUs of the 8 (rounded to whole GPUs by the division)."""
    snap = _cluster(tmp_path)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"usage": {"enabled": True}, "kValue": 1.0}))
    rows = _rows(runner.invoke(kaictl, ["fairshare", "--snapshot", str(snap), "--config", str(cfg), "-o", "json"]))
    assert rows["a"]["fairShare"]["gpu"] < rows["b"]["fairShare"]["gpu"]
    assert rows["a"]["fairShare"]["gpu"] + rows["b"]["fairShare"]["gpu"] == 8.0


def test_a_queue_without_usage_status_has_no_usage_field(tmp_path: Path) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all([node("n1", gpus=8), queue("a")]))
    res = runner.invoke(kaictl, ["fairshare", "--snapshot", str(path), "-o", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert "usageComputedAt" not in out and "usage" not in out["queues"][0]
