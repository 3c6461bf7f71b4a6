"""End to end: a gang one of whose pods has finished (phase Succeeded) is not stale (KAI's PodGroupInfo.IsStale,
job_info.go:495): kaid reads the finished pod from the API only to count it for its job, and does not evict the pod
left running once the stale-gang grace period is over."""

from __future__ import annotations

import time
from typing import Any

from .controlplane import COMPLETE_DELAY_ANNOTATION, ControlPlane
from .kaid_helpers import bound, create_object, pod, pods_of, queue, suffix, wait_for

GRACE = 2  # seconds: the stale-gang grace period of this test's kaid


def test_a_gang_with_a_succeeded_pod_is_not_evicted_as_stale(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, _ = make_pool(1, gpus=4)
    (q,) = make_queues(queue(f"stale-{suffix()}", 0))
    kaid = start_kaid("stale", overrides={"staleGangGraceSeconds": GRACE})
    cp.create(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{namespace}/podgroups", {
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pair"},
        "spec": {"minMember": 2, "queue": q}})
    done = pod("done", pool, q, 1, annotations={"pod-group-name": "pair", COMPLETE_DELAY_ANNOTATION: "3s"})
    done["spec"]["restartPolicy"] = "Never"  # (kwok finishes only such pods)
    create_object(cp, namespace, done)
    create_object(cp, namespace, pod("runs", pool, q, 1, annotations={"pod-group-name": "pair"}))
    wait_for(lambda: len(bound(pods_of(cp, namespace))) == 2 or None, 30, "both pods of the gang bound")

    def phase(name: str) -> str:
        got = [p for p in pods_of(cp, namespace) if p["metadata"]["name"] == name]
        if not got:
            return "Gone"
        if got[0]["metadata"].get("deletionTimestamp"):
            return "Deleting"
        return str((got[0].get("status") or {}).get("phase"))

    wait_for(lambda: phase("done") == "Succeeded" or None, 60, "the pod 'done' to succeed")
    time.sleep(GRACE + 3)  # past the grace period the gang would have if it were stale
    kaid.wait_cycles(3)
    assert phase("runs") == "Running", "the running pod of a gang with a succeeded pod was evicted as stale"
