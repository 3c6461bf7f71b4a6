"""Usage history that survives a failover, on the real control plane (issue 16): the leader keeps each Queue's
decayed use in its status (``status.usage``); the standby that takes over reads it back and continues from it,
and a malformed ``status.usage`` is skipped with a log line, never a crash."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from kaictl.app import app as kaictl

from .controlplane import ControlPlane
from .kaid_helpers import bound, get_or_none, lease_holder, pod, pods_of, queue, suffix, wait_for

USAGE = {"usage": {"enabled": True, "windowType": "cumulative", "writeIntervalSeconds": 1}}


def used_gpu_seconds(status: Any) -> float:
    return float(sum(s["used"]["gpu"] for s in (status or {}).get("slices") or []))


def queue_usage(cp: ControlPlane, name: str) -> Any:
    q = get_or_none(cp, f"/apis/scheduling.run.ai/v2/queues/{name}")
    return ((q or {}).get("status") or {}).get("usage")


def test_new_leader_continues_usage_history_from_queue_status(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any, tmp_path: Path
) -> None:
    cp = control_plane
    pool, _ = make_pool(2, gpus=8)
    q, broken = make_queues(queue(f"usage-{suffix()}", 0), queue(f"usage-bad-{suffix()}", 0))
    lease = f"kai-e2e-usage-{suffix()}"
    first = start_kaid("kaid-a", lease=lease, lease_duration=4.0, renew_interval=0.5, overrides=USAGE)
    wait_for(lambda: lease_holder(cp, lease) == "kaid-a", 15, "kaid-a to hold the Lease")
    second = start_kaid("kaid-b", lease=lease, lease_duration=4.0, renew_interval=0.5, overrides=USAGE)
    for i in range(2):
        cp.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod(f"user-{i}", pool, q, 4))
    wait_for(lambda: len(bound(pods_of(cp, namespace))) == 2, 20, "2 pods of 4 GPUs bound")

    # the leader writes the queue's use every second: wait until it has 15 s at 8 GPUs
    wait_for(lambda: used_gpu_seconds(queue_usage(cp, q)) > 120, 40, "120 GPU-seconds in the queue's status.usage")
    first.kill()
    killed = time.time()
    last = queue_usage(cp, q)  # what kaid-a wrote last: nobody writes until kaid-b leads
    assert last["windowType"] == "cumulative" and last["share"]["gpu"] > 0
    cp.request("PATCH", f"/apis/scheduling.run.ai/v2/queues/{broken}/status",
               {"status": {"usage": {"computedAt": "soon", "slices": "many"}}},
               content_type="application/merge-patch+json")

    wait_for(lambda: lease_holder(cp, lease) == "kaid-b", 20, "kaid-b to take the Lease over")
    wait_for(lambda: "usage history continued from the status of" in second.full_log(), 10,
             "kaid-b to read the usage history back")
    assert f"Queue {broken}: status.usage is malformed" in second.full_log(), second.log()

    def rewritten() -> Any:
        now = queue_usage(cp, q)
        return now if now and now["computedAt"] != last["computedAt"] else None

    after = wait_for(rewritten, 15, "kaid-b to write the queue's status.usage", interval=0.1)
    gap = time.time() - killed
    # continued: what kaid-a had, plus the time since at the 8 GPUs kaid-b found held; starting afresh it would
    # have had at most gap * 8 GPU-seconds, less than kaid-a's
    assert used_gpu_seconds(last) > 8 * gap, (last, gap)
    assert used_gpu_seconds(last) <= used_gpu_seconds(after) <= used_gpu_seconds(last) + 8 * gap + 8, \
        (last, after, gap)

    # the broken status is written afresh, and kaid-b keeps scheduling
    wait_for(lambda: isinstance((queue_usage(cp, broken) or {}).get("slices"), list), 10,
             "kaid-b to write the broken queue's status.usage afresh")
    cp.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod("after", pool, q, 1))
    wait_for(lambda: len(bound(pods_of(cp, namespace))) == 3, 20, "the pod made after the failover bound")
    assert second.running()

    # kaictl fairshare shows the usage kaid keeps in the Queue's status (read live, under the same settings)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(USAGE))
    res = CliRunner().invoke(kaictl, ["fairshare", "--kubeconfig", str(cp.kubeconfig), "--config", str(config),
                                      "-o", "json"])
    assert res.exit_code == 0, res.output
    shown = json.loads(res.stdout)
    rows = {r["name"]: r for r in shown["queues"]}
    assert rows[q]["usage"]["gpu"] > 0 and "usageComputedAt" in shown, rows[q]
