"""End-to-end tests of ``kaid run`` on the real control plane (etcd, kube-apiserver, controller manager,
kwok GPU nodes): the acceptance points of the daemon.

Every kaid here runs with a token of the ServiceAccount that ``manifests/`` creates, so the tests also
prove that its ClusterRole suffices. Each test works in its own namespace, on its own fake nodes (pods
carry a nodeSelector for them; the nodes are cordoned afterwards), with its own queues (deleted
afterwards) and its own leader-election Lease, so tests do not see each other's work.
"""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.kube import daemon as daemon_mod
from kaid.kube import startup as cache_mod
from kaid.kube.cache import API_RESOURCES, ApiResource
from kaid.kube.client import KubeClient
from kaid.kube.daemon import Daemon
from kaid.kube.podgrouper import create_podgroups
from kaid.kube.startup import StartingCache as WatchCache
from kaid.model.build import build_snapshot

from .controlplane import ControlPlane
from .kaid_helpers import (
    EXAMPLES,
    KAI_NAMESPACE,
    KAID,
    MANIFESTS,
    NOT_HERE,
    PODGROUPS,
    QUEUE_LABEL,
    QUEUES,
    FakeGpuOperator,
    Kaid,
    KaiInstall,
    Obj,
    bound,
    create_object,
    events,
    gang_job,
    last_condition,
    lease_holder,
    metric_value,
    pod,
    pod_condition,
    podgroup,
    pods_of,
    queue,
    reason_codes,
    suffix,
    wait_for,
    watching,
)

BIND_TIMEOUT = 20.0


_suffix = suffix
_create = create_object


def _job_pods(cp: ControlPlane, namespace: str, job: str) -> list[Obj]:
    return pods_of(cp, namespace, f"job-name={job}")


def _wait_bound(
    cp: ControlPlane, namespace: str, count: int, selector: str | None = None, timeout: float = BIND_TIMEOUT
) -> list[Obj]:
    def enough() -> list[Obj] | None:
        got = bound(pods_of(cp, namespace, selector))
        return got if len(got) >= count else None

    try:
        result: list[Obj] = wait_for(enough, timeout, f"{count} bound pods in {namespace} ({selector or 'all'})")
    except AssertionError as exc:
        pods = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods_of(cp, namespace, selector)}
        raise AssertionError(f"{exc}; pods: {pods}") from None
    return result


def _cycles(kaid: Kaid) -> float:
    return kaid.cycles()


def _wait_cycles(kaid: Kaid, n: int, timeout: float = 30.0) -> None:
    kaid.wait_cycles(n, timeout)


# --------------------------------------------------------------------------------------------------
# Installation and RBAC


def test_manifests_apply_and_serviceaccount_is_least_privilege(control_plane: ControlPlane, kai: KaiInstall) -> None:
    cp = control_plane
    for made in (
        "namespace/kai-scheduler",
        "customresourcedefinition.apiextensions.k8s.io/queues.scheduling.run.ai",
        "serviceaccount/kai-scheduler",
        "clusterrole.rbac.authorization.k8s.io/kai-scheduler",
        "deployment.apps/kai-scheduler",
        "priorityclass.scheduling.k8s.io/train",
    ):
        assert made in kai.apply_output, kai.apply_output
    assert "queue.scheduling.run.ai/default-queue" in kai.queues_output
    queues = json.loads(cp.kubectl("get", "queues", "-o", "json").stdout)["items"]
    parents = {q["metadata"]["name"]: q["spec"].get("parentQueue") for q in queues}
    assert parents.get("default-queue") == "default-parent-queue"
    # Applying again changes nothing (the manifests are stable); what install_kai deleted (nothing can run it
    # here) is made again and deleted again.
    again = cp.kubectl("apply", "-k", str(MANIFESTS)).stdout
    cp.kubectl("delete", "--ignore-not-found", "-n", KAI_NAMESPACE, *NOT_HERE)
    remade = [line for line in again.splitlines() if "created" in line
              and not any(line.startswith(f"{kind.split('/')[0]}.") for kind in NOT_HERE)]
    assert not remade, again

    kc = kai.kubeconfig
    who = json.loads(cp.kubectl("auth", "whoami", "-o", "json", kubeconfig=kc).stdout)
    assert who["status"]["userInfo"]["username"] == "system:serviceaccount:kai-scheduler:kai-scheduler"

    def can(*args: str) -> bool:
        return cp.kubectl("auth", "can-i", *args, kubeconfig=kc, check=False).stdout.strip() == "yes"

    assert can("create", "pods", "--subresource=binding", "-A")
    assert can("create", "pods", "--subresource=eviction", "-A")
    assert can("patch", "podgroups.scheduling.run.ai", "--subresource=status", "-A")
    assert can("update", "leases.coordination.k8s.io", "-n", KAI_NAMESPACE)
    assert not can("get", "secrets", "-A")
    assert not can("update", "leases.coordination.k8s.io", "-n", "default")
    assert not can("patch", "nodes")


# --------------------------------------------------------------------------------------------------
# Gang scheduling


def test_gang_binds_all_together_or_none(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, nodes = make_pool(1, gpus=4)
    (q,) = make_queues(queue(f"gang-{_suffix()}", 0))
    kaid = start_kaid("gang")
    with watching(cp, namespace) as watch:
        # One GPU of the four is taken: only three are free.
        _create(cp, namespace, pod("blocker", pool, q, 1))
        _wait_bound(cp, namespace, 1)
        _create(cp, namespace, gang_job("gang", pool, q, 4))
        wait_for(lambda: len(_job_pods(cp, namespace, "gang")) == 4, 30, "the Job's 4 pods")

        pg = wait_for(
            lambda: (g := podgroup(cp, namespace, "pg-job-gang")) and "GangUnschedulable" in reason_codes(g) and g,
            BIND_TIMEOUT, "GangUnschedulable on PodGroup pg-job-gang",
        )  # fmt: skip
        assert pg["spec"]["minMember"] == 4
        assert pg["spec"]["queue"] == q
        cond = last_condition(pg)
        assert cond["type"] == "UnschedulableOnNodePool"
        assert "needs 4 pods placed at once; only 3 can be placed" in cond["message"], cond
        _wait_cycles(kaid, 3)
        assert bound(_job_pods(cp, namespace, "gang")) == [], "a pod of the gang was bound with only 3 GPUs free"

        # The blocker goes: all four bind, together.
        cp.kubectl("delete", "pod", "blocker", "-n", namespace, "--wait=false")
        pods = _wait_bound(cp, namespace, 4, "job-name=gang")
        assert {p["spec"]["nodeName"] for p in pods} == set(nodes)
        versions = watch.wait(
            lambda vs: len({v.uid for v in vs if v.node and v.labels.get("job-name") == "gang"}) == 4,
            10,
            "the watch to show the 4 bound pods",
        )
        first_bound: dict[str, float] = {}
        for v in versions:
            if v.node and v.labels.get("job-name") == "gang":
                first_bound.setdefault(v.uid, v.at)
        assert len(first_bound) == 4
        spread = max(first_bound.values()) - min(first_bound.values())
        assert spread < 3.0, f"the gang's pods were bound {spread:.1f}s apart"

    def scheduled() -> Obj | None:
        g = podgroup(cp, namespace, "pg-job-gang")
        if g is None or last_condition(g).get("type") != "Scheduled":
            return None
        return g if g["status"]["resourcesStatus"]["allocated"]["gpu"] == 4 else None

    wait_for(scheduled, BIND_TIMEOUT, "PodGroup pg-job-gang Scheduled with 4 GPUs allocated")


# --------------------------------------------------------------------------------------------------
# Queue limits, pending reasons, queue status


def test_queue_limit_holds_and_names_the_limit(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, _ = make_pool(1, gpus=4)
    (q,) = make_queues(queue(f"limited-{_suffix()}", 0, gpu_limit=2))
    kaid = start_kaid("limit")
    for i in range(3):
        _create(cp, namespace, pod(f"lim-{i}", pool, q, 1))
    _wait_bound(cp, namespace, 2)

    def limited() -> tuple[Obj, Obj] | None:
        pending = [p for p in pods_of(cp, namespace) if not p["spec"].get("nodeName")]
        if len(pending) != 1:
            return None
        name = pending[0]["metadata"]["name"]
        pg = podgroup(cp, namespace, f"pg-pod-{name}")
        return (pending[0], pg) if pg is not None and "QueueLimit" in reason_codes(pg) else None

    pending, pg = wait_for(limited, BIND_TIMEOUT, "one pod pending with a QueueLimit reason")
    details = next(r for r in last_condition(pg)["reasons"] if r["reason"] == "QueueLimit")
    assert f"queue {q} has a gpu limit of 2 GPUs" in details["message"], details
    assert "kaictl queue set" in details["message"]
    cond = wait_for(
        lambda: pod_condition(cp.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pending['metadata']['name']}"),
                              "PodScheduled"),
        BIND_TIMEOUT, "the PodScheduled condition of the pending pod",
    )  # fmt: skip
    assert cond["status"] == "False"
    assert cond["reason"] == "Unschedulable"
    assert "gpu limit of 2 GPUs" in cond["message"], cond
    _wait_cycles(kaid, 3)
    assert len(bound(pods_of(cp, namespace))) == 2
    status = cp.request("GET", f"/apis/scheduling.run.ai/v2/queues/{q}")["status"]
    assert status["allocated"]["gpu"] == 2
    assert status["requested"]["gpu"] == 3


def test_pending_pod_says_why_in_status_and_events(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, _ = make_pool(1, gpus=4)
    (q,) = make_queues(queue(f"why-{_suffix()}", 0))
    start_kaid("why")
    _create(cp, namespace, pod("too-big", pool, q, 6))

    pg = wait_for(
        lambda: (g := podgroup(cp, namespace, "pg-pod-too-big")) and reason_codes(g) and g,
        BIND_TIMEOUT,
        "reasons on PodGroup pg-pod-too-big",
    )
    cond = last_condition(pg)
    assert cond["type"] == "UnschedulableOnNodePool"
    assert "NodeFit" in reason_codes(pg)
    assert re.search(r"0/\d+ nodes can take a pod of 6 GPUs", cond["message"]), cond
    printed = cp.kubectl("get", "pg", "-n", namespace).stdout
    assert re.search(r"pg-pod-too-big\s+" + re.escape(q) + r"\s+1\s+\S*\s*UnschedulableOnNodePool", printed), printed

    def warned() -> list[Obj]:
        return [e for e in events(cp, namespace, "Unschedulable") if e["involvedObject"]["kind"] == "PodGroup"]

    (event, *_) = wait_for(warned, BIND_TIMEOUT, "an Unschedulable event")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "pg-pod-too-big"
    assert "nodes can take a pod of 6 GPUs" in event["message"]
    assert event["source"]["component"] == "kai-scheduler"
    listed = cp.kubectl("get", "events", "-n", namespace, "--field-selector", "reason=Unschedulable").stdout
    assert "nodes can take a pod of 6 GPUs" in listed, listed
    podcond = pod_condition(cp.request("GET", f"/api/v1/namespaces/{namespace}/pods/too-big"), "PodScheduled")
    assert podcond is not None
    assert podcond["status"] == "False"
    assert "6 GPUs" in podcond["message"]


def test_kubectl_get_queues_shows_allocated_and_fair_share(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, _ = make_pool(1, gpus=4)
    (q,) = make_queues(queue(f"shown-{_suffix()}", 2, gpu_limit=-1))
    start_kaid("shown")
    for i in range(2):
        _create(cp, namespace, pod(f"p-{i}", pool, q, 1))
    _wait_bound(cp, namespace, 2)

    def row() -> dict[str, str] | None:
        header, line = cp.kubectl("get", "queues", q).stdout.splitlines()[:2]
        # Columns by their header's position (PARENT is empty for a root queue).
        starts = [m.start() for m in re.finditer(r"\S+", header)]
        ends = [*starts[1:], None]
        values = {header[a:b].strip(): line[a:b].strip() for a, b in zip(starts, ends, strict=True)}
        return values if values.get("GPU-ALLOCATED") == "2" else None

    values = wait_for(row, BIND_TIMEOUT, f"GPU-ALLOCATED 2 in kubectl get queues {q}")
    assert values["GPU-FAIRSHARE"] == "2", values
    assert values["GPU-QUOTA"] == "2"
    assert values["GPU-LIMIT"] == "-1"


def test_metrics_and_health_endpoints(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, _ = make_pool(1, gpus=4)
    (q,) = make_queues(queue(f"metered-{_suffix()}", 3))
    kaid = start_kaid("metrics")
    assert kaid.get("/healthz") == (200, "ok")
    assert kaid.get("/readyz") == (200, "ok")
    _create(cp, namespace, pod("m-0", pool, q, 1))
    _wait_bound(cp, namespace, 1)

    def exposed() -> str | None:
        text = kaid.metrics()
        return text if metric_value(text, "kai_queue_allocated_gpus", {"queue": q}) == 1 else None

    text = wait_for(exposed, BIND_TIMEOUT, f"kai_queue_allocated_gpus{{queue={q}}} 1")
    assert metric_value(text, "kai_queue_fair_share_gpu", {"queue": q}) == 1  # min(quota 3, requested 1)
    assert (metric_value(text, "kai_e2e_scheduling_latency_milliseconds_count") or 0) >= 1
    assert metric_value(text, "kai_e2e_scheduling_latency_milliseconds_bucket", {"le": "+Inf"}) is not None
    assert metric_value(text, "kai_is_leader") == 1
    assert (metric_value(text, "kai_binds_total", {"result": "ok"}) or 0) >= 1
    assert kaid.get("/nope")[0] == 404


# --------------------------------------------------------------------------------------------------
# Crash safety and leader election


def test_sigkill_and_restart_loses_nothing_and_binds_nothing_twice(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, nodes = make_pool(2, gpus=8)
    (q,) = make_queues(queue(f"crash-{_suffix()}", 0))
    waves = [[("w1-a", 4), ("w1-b", 2)], [("w2-a", 4), ("w2-b", 2)], [("w3-a", 3)]]  # 15 of 16 GPUs
    partial: list[int] = []  # per kill: pods of the wave bound when the SIGKILL landed
    kaid: Kaid | None = None
    submitted = 0
    with watching(cp, namespace) as watch:
        for i, wave in enumerate(waves):
            # Each wave is submitted while kaid is down (its pods exist before kaid lists them; see
            # test_podgroup_is_not_made_before_its_owner_is_seen for why that matters).
            for job, size in wave:
                _create(cp, namespace, gang_job(job, pool, q, size))
                submitted += size

            def created(n: int = submitted) -> bool:
                return len(pods_of(cp, namespace)) == n

            wait_for(created, 30, f"the pods of wave {i + 1}")
            if kaid is None:
                # A slow client (20 requests/s, no burst) spreads a wave's binds over a second or so, so
                # the SIGKILL lands in the middle of binding, possibly with a gang half bound.
                kaid = start_kaid("crash", overrides={"clientQPS": 20, "clientBurst": 1}, ready=False)
            else:
                kaid.start()
            kaid.wait_ready(timeout=60)
            if i < len(waves) - 1:
                jobs = [j for j, _ in wave]

                def binding(jobs: list[str] = jobs) -> bool:
                    return any(bound(_job_pods(cp, namespace, j)) for j in jobs)

                wait_for(binding, BIND_TIMEOUT, f"wave {i + 1} to start binding", interval=0.05)
                kaid.kill()
                partial.append(sum(len(bound(_job_pods(cp, namespace, j))) for j in jobs))
        assert kaid is not None
        _wait_bound(cp, namespace, submitted, timeout=40)
        _wait_cycles(kaid, 2)
        versions = watch.wait(lambda vs: len(watch.bound_uids(vs)) == submitted, 10, "the watch to show every bind")

    pods = pods_of(cp, namespace)
    assert len(pods) == submitted, "a Job pod was recreated: kaid released or evicted something"
    assert all(p["spec"].get("nodeName") in nodes for p in pods)
    by_uid: dict[str, list[str]] = {}
    for v in versions:
        assert v.type != "DELETED" and not v.deleting, f"pod {v.name} was deleted"
        by_uid.setdefault(v.uid, [])
        if v.node and (not by_uid[v.uid] or by_uid[v.uid][-1] != v.node):
            by_uid[v.uid].append(v.node)
    assert len(by_uid) == submitted
    for uid, seen in by_uid.items():
        assert len(seen) == 1, f"pod {uid} was seen on nodes {seen}"
    used: dict[str, int] = {}
    for p in pods:
        used[p["spec"]["nodeName"]] = used.get(p["spec"]["nodeName"], 0) + 1
    assert all(n <= 8 for n in used.values()), f"a node's GPUs were handed out twice: {used}"
    scheduled: dict[str, int] = {}
    for e in events(cp, namespace, "Scheduled"):
        scheduled[e["involvedObject"]["name"]] = scheduled.get(e["involvedObject"]["name"], 0) + 1
    twice = {n: k for n, k in scheduled.items() if k > 1}
    assert not twice, f"pods bound more than once: {twice}"
    assert kaid.starts == 3
    print(f"pods of the wave bound when kaid was killed: {partial} (of {[sum(n for _, n in w) for w in waves]})")
    groups = {job: podgroup(cp, namespace, f"pg-job-{job}") for wave in waves for job, _ in wave}
    wrong = {
        job: (pg or {}).get("spec")
        for wave in waves
        for job, size in wave
        if (pg := groups[job]) is None or pg["spec"]["minMember"] != size or pg["spec"]["queue"] != q
    }
    assert not wrong, f"PodGroups with the wrong gang size or queue: {wrong}"


def _logged_binds(kaid: Kaid) -> int:
    """Pods bound according to the daemon's "cycle N: K bound, ..." log lines."""
    return sum(int(k) for k in re.findall(r"cycle \d+: (\d+) bound", kaid.full_log()))


def test_leader_election_only_leader_binds_and_standby_takes_over(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, _ = make_pool(1, gpus=8)
    (q,) = make_queues(queue(f"leader-{_suffix()}", 0))
    lease = f"kai-e2e-leader-{_suffix()}"
    first = start_kaid("kaid-a", lease=lease, lease_duration=4.0, renew_interval=0.5)
    wait_for(lambda: lease_holder(cp, lease) == "kaid-a", 15, "kaid-a to hold the Lease")
    second = start_kaid("kaid-b", lease=lease, lease_duration=4.0, renew_interval=0.5)
    wait_for(
        lambda: second.metric("kai_is_leader") == 0 and first.metric("kai_is_leader") == 1,
        15,
        "kai_is_leader 1 on kaid-a and 0 on kaid-b",
    )

    for i in range(2):
        _create(cp, namespace, pod(f"before-{i}", pool, q, 1))
    _wait_bound(cp, namespace, 2)
    _wait_cycles(first, 2)
    assert lease_holder(cp, lease) == "kaid-a"
    assert (first.metric("kai_binds_total", {"result": "ok"}) or 0) == 2
    assert (second.metric("kai_binds_total", {"result": "ok"}) or 0) == 0
    assert second.metric("kai_e2e_scheduling_latency_milliseconds_count") == 0, "the standby ran cycles"
    assert _logged_binds(first) == 2, first.log()
    assert _logged_binds(second) == 0, second.log()

    first.kill()
    killed = time.monotonic()
    wait_for(lambda: lease_holder(cp, lease) == "kaid-b", 20, "kaid-b to take the Lease over")
    took = time.monotonic() - killed
    assert took <= 4.0 + 5.0, f"takeover took {took:.1f}s with a 4s lease"
    wait_for(lambda: "kaid-b became the leader" in second.full_log(), 5, "kaid-b to log its leadership")
    for i in range(2):
        _create(cp, namespace, pod(f"after-{i}", pool, q, 1))
    after = _wait_bound(cp, namespace, 4)
    assert len(after) == 4
    wait_for(lambda: second.metric("kai_is_leader") == 1, 10, "kai_is_leader 1 on kaid-b")
    assert (second.metric("kai_binds_total", {"result": "ok"}) or 0) == 2
    assert _logged_binds(second) == 2, second.log()
    lease_obj = cp.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{KAI_NAMESPACE}/leases/{lease}")
    assert lease_obj["spec"]["leaseTransitions"] >= 1


def _pause_the_leader(cp: ControlPlane, lease: str, replicas: dict[str, Kaid]) -> tuple[str, float]:
    """SIGSTOP the Lease holder until the standby has taken over, SIGCONT it, and return its name and how
    many cycles it ran from just before the pause until it stands by again."""
    leader = wait_for(lambda: lease_holder(cp, lease), 10, "a Lease holder")
    standby = next(n for n in replicas if n != leader)
    paused = replicas[leader]
    assert paused.process is not None
    _wait_cycles(paused, 1)  # just after a cycle: the next is about a period away
    before = _cycles(paused)
    os.kill(paused.process.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: lease_holder(cp, lease) == standby, 15, f"{standby} to take the Lease over")
        time.sleep(0.3)
    finally:
        os.kill(paused.process.pid, signal.SIGCONT)
    wait_for(lambda: paused.metric("kai_is_leader") == 0, 10, f"{leader} to stand by")
    time.sleep(1.5)
    assert lease_holder(cp, lease) == standby
    return leader, _cycles(paused) - before


def test_a_leader_paused_past_its_lease_does_not_schedule_on_resume(
    control_plane: ControlPlane, start_kaid: Any
) -> None:
    """Only one replica may act. One frozen longer than the lease has lost it to the standby by the time it
    wakes up, so it must not run even one more cycle (bind, evict, write status) on its stale view."""
    cp = control_plane
    lease = f"kai-e2e-pause-{_suffix()}"
    replicas = {n: start_kaid(n, lease=lease, lease_duration=2.0, renew_interval=0.5) for n in ("pause-a", "pause-b")}
    stray = [_pause_the_leader(cp, lease, replicas) for _ in range(2)]
    assert all(n == 0 for _, n in stray), f"cycles run by a replica after its Lease was taken over: {stray}"


PYTORCHJOB_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "pytorchjobs.kubeflow.org"},
    "spec": {
        "group": "kubeflow.org",
        "scope": "Namespaced",
        "names": {
            "kind": "PyTorchJob",
            "plural": "pytorchjobs",
            "singular": "pytorchjob",
            "listKind": "PyTorchJobList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


def test_podgroup_is_not_made_before_its_owner_is_seen(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """A workload whose owner kaid cannot see yet must not be scheduled as something else.

    Deterministic stand-in for a race seen in the restart test (a Job's pods listed or watched before
    the Job): kaid starts before the PyTorchJob CRD exists, so its optional PyTorchJob watch is off (API
    discovery finds the CRD within 30 s). A PyTorchJob of 3 one-GPU pods then arrives, in a queue, on 2
    free GPUs: as a gang of 3 it cannot start, and nothing may bind."""
    cp = control_plane
    crd = "customresourcedefinition.apiextensions.k8s.io/pytorchjobs.kubeflow.org"
    if cp.kubectl("get", crd, check=False).returncode == 0:
        pytest.skip("the PyTorchJob CRD is already installed in this cluster")
    pool, _ = make_pool(1, gpus=2)
    (q,) = make_queues(queue(f"ptj-{_suffix()}", 0))
    kaid = start_kaid("owner")
    try:
        cp.apply(PYTORCHJOB_CRD)
        cp.kubectl("wait", "--for=condition=Established", "--timeout=30s", crd)
        wait_for(lambda: cp.kubectl("get", "pytorchjobs", "-n", namespace, check=False).returncode == 0, 30,
                 "the PyTorchJob resource to be served")  # fmt: skip
        ptj = cp.create(
            f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs",
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": "ddp", "labels": {QUEUE_LABEL: q}},
                "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 2}}},
            },
        )
        owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "ddp",
                 "uid": ptj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
        for role, i in (("master", 0), ("worker", 0), ("worker", 1)):
            member = pod(f"ddp-{role}-{i}", pool, q, 1)
            # As the training operator makes them: its own labels, not the job's queue label.
            member["metadata"]["labels"] = {"training.kubeflow.org/job-name": "ddp",
                                            "training.kubeflow.org/replica-type": role}  # fmt: skip
            member["metadata"]["ownerReferences"] = [owner]
            _create(cp, namespace, member)
        _wait_cycles(kaid, 4)
        pg = podgroup(cp, namespace, "pg-pytorchjob-ddp")
        placed = [p["metadata"]["name"] for p in bound(pods_of(cp, namespace))]
        spec = (pg or {}).get("spec")
        assert pg is None or (spec or {}).get("minMember") == 3, f"PodGroup made without its owner: {spec}"
        assert pg is None or (spec or {}).get("queue") == q, f"PodGroup made without its owner: {spec}"
        assert placed == [], f"pods of a 3-pod gang bound on 2 GPUs: {placed}"
        # API discovery (every 30 s) finds the new CRD; kaid then watches PyTorchJobs and groups the pods
        # by their owner: one gang of 3 in the job's queue, still unbound on 2 GPUs.
        wait_for(lambda: podgroup(cp, namespace, "pg-pytorchjob-ddp") is not None, 45,
                 "kaid to find the PyTorchJob CRD and make the job's PodGroup")  # fmt: skip
        spec = (podgroup(cp, namespace, "pg-pytorchjob-ddp") or {}).get("spec") or {}
        assert (spec.get("minMember"), spec.get("queue")) == (3, q), spec
        _wait_cycles(kaid, 2)
        assert bound(pods_of(cp, namespace)) == [], "a 3-pod gang bound on 2 GPUs"
    finally:
        cp.kubectl("delete", crd, "--wait=false", check=False)


def test_job_made_from_a_cronjob_is_scheduled_in_its_queue(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """``kubectl create job --from=cronjob/...`` (and every scheduled run) makes a Job owned by the CronJob;
    its pods must be scheduled as that Job's gang, in the queue its labels name."""
    cp = control_plane
    pool, _ = make_pool(1, gpus=4)
    (q,) = make_queues(queue(f"cron-{_suffix()}", 0))
    start_kaid("cron")
    template = gang_job("unused", pool, q, 2)
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {
            "schedule": "0 3 * * *",
            "suspend": True,
            "jobTemplate": {
                "metadata": {"labels": template["metadata"]["labels"],
                             "annotations": template["metadata"]["annotations"]},
                "spec": template["spec"],
            },
        },
    }  # fmt: skip
    cp.create(f"/apis/batch/v1/namespaces/{namespace}/cronjobs", cron)
    cp.kubectl("create", "job", "nightly-now", "--from=cronjob/nightly", "-n", namespace)
    job = cp.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/nightly-now")
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert job["metadata"]["labels"][QUEUE_LABEL] == q
    _wait_bound(cp, namespace, 2, "job-name=nightly-now")
    # (kaid binds pods whose PodGroup it made from memory while the PodGroup is being created: it may come after)
    groups = wait_for(lambda: cp.request("GET", f"{PODGROUPS}/namespaces/{namespace}/podgroups")["items"], 20,
                      "the PodGroup kaid made for Job nightly-now")
    assert [(g["spec"]["queue"], g["spec"]["minMember"]) for g in groups] == [(q, 2)], groups


def test_gang_below_its_minimum_is_marked_stale_as_kai_marks_it(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """A running gang that loses a pod below its minMember carries KAI's ``kai.scheduler/stale-podgroup-timestamp``
    on its PodGroup while its grace period runs (an hour here: nothing is evicted), so that a scheduler taking over
    from the other, either way, counts the grace from the same time."""
    cp = control_plane
    started = time.time()
    pool, _ = make_pool(1, gpus=2)
    (q,) = make_queues(queue(f"stale-{_suffix()}", 0))
    start_kaid("stale")
    cp.create(f"{PODGROUPS}/namespaces/{namespace}/podgroups", {
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pair"},
        "spec": {"minMember": 2, "queue": q, "stalenessGracePeriod": "1h"}})
    for i in range(2):
        _create(cp, namespace, pod(f"pair-{i}", pool, q, 1, annotations={c.POD_GROUP_ANNOTATION: "pair"}))
    _wait_bound(cp, namespace, 2)
    assert c.STALE_SINCE_ANNOTATION not in meta.annotations_of(podgroup(cp, namespace, "pair"))
    cp.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/pair-1")

    def mark() -> str | None:
        value = meta.annotations_of(podgroup(cp, namespace, "pair")).get(c.STALE_SINCE_ANNOTATION)
        return None if value is None else str(value)

    since = wait_for(mark, BIND_TIMEOUT, "the PodGroup marked stale")
    assert c.STALE_SINCE_ANNOTATION == "kai.scheduler/stale-podgroup-timestamp"
    assert started - 1 <= meta.parse_time(since) <= time.time() + 1, since
    assert [p["metadata"]["name"] for p in bound(pods_of(cp, namespace))] == ["pair-0"]  # its grace runs on


def test_podgroup_made_for_a_workload_takes_its_delay_annotations(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """KAI's workload annotations for the PodGroup kaid makes: ``kai.scheduler/preemption-delay`` on the Job (the
    owner's wins over its pods') and ``kai.scheduler/staleness-grace-period`` on its pods become the PodGroup's
    ``preemptionDelay`` and ``stalenessGracePeriod``."""
    cp = control_plane
    pool, _ = make_pool(1, gpus=2)
    (q,) = make_queues(queue(f"delay-{_suffix()}", 0))
    start_kaid("delay")
    job = gang_job("tuned", pool, q, 2)
    job["metadata"]["annotations"][c.PREEMPTION_DELAY_ANNOTATION] = "5m"
    job["spec"]["template"]["metadata"]["annotations"] = {c.PREEMPTION_DELAY_ANNOTATION: "1s",
                                                          c.STALENESS_GRACE_ANNOTATION: "2m"}
    _create(cp, namespace, job)
    _wait_bound(cp, namespace, 2, "job-name=tuned")
    made = wait_for(lambda: podgroup(cp, namespace, "pg-job-tuned"), BIND_TIMEOUT, "kaid to make the Job's PodGroup")
    spec = made.get("spec") or {}
    assert (spec.get("preemptionDelay"), spec.get("stalenessGracePeriod"), spec.get("minMember")) == ("5m", "2m", 2)


def test_workloads_that_skip_the_podgrouper_join_the_podgroup_they_name_or_wait_saying_why(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """KAI's externally made PodGroups: a Job annotated ``kai.scheduler/skip-podgrouper: "true"`` whose pods name a
    PodGroup made by hand is scheduled as that gang, and kaid makes no PodGroup of its own for it; one whose pods name
    none waits, and its pod's ``PodScheduled`` condition names the annotation."""
    cp = control_plane
    pool, _ = make_pool(1, gpus=4)
    (q,) = make_queues(queue(f"skip-{_suffix()}", 0))
    start_kaid("skip")
    cp.create(f"{PODGROUPS}/namespaces/{namespace}/podgroups", {
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "external"},
        "spec": {"minMember": 2, "queue": q}})
    joined, orphan = gang_job("joined", pool, q, 2), gang_job("orphan", pool, q, 1)
    for job in (joined, orphan):
        job["metadata"]["annotations"][c.SKIP_PODGROUPER_ANNOTATION] = "true"
    joined["spec"]["template"]["metadata"]["annotations"] = {c.POD_GROUP_ANNOTATION: "external"}
    _create(cp, namespace, orphan)
    _create(cp, namespace, joined)
    _wait_bound(cp, namespace, 2, "job-name=joined")

    def waiting() -> Obj | None:
        pods = _job_pods(cp, namespace, "orphan")
        cond = pod_condition(pods[0], "PodScheduled") if pods else None
        return cond if cond and c.SKIP_PODGROUPER_ANNOTATION in str(cond.get("message")) else None

    cond = wait_for(waiting, BIND_TIMEOUT, "the skipped Job's pod to say why it waits")
    assert cond["status"] == "False" and "Job orphan" in cond["message"], cond
    groups = cp.request("GET", f"{PODGROUPS}/namespaces/{namespace}/podgroups")["items"]
    assert [g["metadata"]["name"] for g in groups] == ["external"]
    assert not bound(_job_pods(cp, namespace, "orphan"))


# --------------------------------------------------------------------------------------------------
# The early first cycle


def test_early_cycle_binds_while_the_pod_list_is_held_and_counts_pods_not_listed_yet(
    control_plane: ControlPlane, kai: KaiInstall, namespace: str, make_pool: Any, make_queues: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A starting kaid binds the first pending pods while the rest of its pod list is held back, on a view that
    counts a running pod the held list has not delivered yet (it comes last by name): it is seen through the
    separate list of pods on nodes. Neither the first full cycle nor its binds wait for other work: the model
    reads the lists while the early binds are out, the first full cycle decides and sends its binds before those
    are answered, the solver begins to load once that cycle is over, and the PodGroups it made from memory are
    created once its binds are answered. The daemon runs in this process (a
    thread), with the ServiceAccount's token, so that the hold can be set to 4 pods; its pods list covers this
    test's namespace only."""
    cp = control_plane
    pool, nodes = make_pool(2, gpus=8)
    (q,) = make_queues(queue(f"early-{_suffix()}", 0))
    scheduler = f"kai-early-{_suffix()}"
    hog = pod("zz-hog", pool, q, gpus=6)
    hog["spec"].update(nodeName=nodes[0], schedulerName="default-scheduler")  # bound at creation
    _create(cp, namespace, hog)
    for i in range(12):
        p = pod(f"p{i:02}", pool, q)
        p["spec"]["schedulerName"] = scheduler
        _create(cp, namespace, p)
    wait_for(lambda: len(pods_of(cp, namespace)) == 13, 30, "the pods")

    monkeypatch.setattr(cache_mod, "HOLD_PODS_AFTER", 4)
    monkeypatch.setattr(cache_mod, "HOLD_LIMIT", 30.0)  # released by the daemon, never by the clock
    cfg = SchedulerConfig.model_validate({
        **yaml.safe_load(yaml.safe_load((MANIFESTS / "config.yaml").read_text())["data"]["config.yaml"]),
        "schedulerName": scheduler, "clientQPS": 50, "clientBurst": 2, "metricsPort": 0,
        "leaderElection": {"enabled": False}})
    client = KubeClient.from_config(str(kai.kubeconfig))
    resources = tuple(ApiResource("Pod", f"/api/v1/namespaces/{namespace}/pods") if r.kind == "Pod" else r
                      for r in API_RESOURCES)
    cache = WatchCache(client, resources, early=True)
    daemon = Daemon(cfg, client, "early", cache)
    warm_ups: list[int] = []  # the cycles run when the solver began to load
    monkeypatch.setattr(daemon_mod, "warm_up_solver", lambda: warm_ups.append(daemon.cycles))
    lock = threading.Lock()
    binds = {"sent": 0, "answered": 0}
    creations: list[dict[str, int]] = []  # the binds sent and answered when each creation of PodGroups began
    sends: list[dict[str, int]] = []  # the binds sent (with these) and answered when each was sent
    send, bind_one = daemon.actuator.start_binds, daemon.actuator._bind_one

    def counted_send(sent: list[Any]) -> Any:
        with lock:
            binds["sent"] += len(sent)
            sends.append(dict(binds))
        return send(sent)

    def counted_bind(b: Any, patch: Any = None) -> Any:
        # a busy API server: it answers no bind before every list is in, and each takes a while (a creation begun
        # alongside the binds would begin before they end; the early cycle's, 1.5 s: the next cycle's come meanwhile)
        cache.wait_synced(30.0)
        time.sleep(1.5 if b.pod in early else 0.5)
        try:
            return bind_one(b, patch)
        finally:
            with lock:
                binds["answered"] += 1

    def seen_create(*args: Any) -> Any:
        with lock:
            creations.append(dict(binds))
        return create_podgroups(*args)

    early = {f"{namespace}/p{i:02}" for i in range(4)}
    monkeypatch.setattr(daemon.actuator, "start_binds", counted_send)
    monkeypatch.setattr(daemon.actuator, "_bind_one", counted_bind)
    assert daemon.actuator.sender is not None
    daemon.actuator.sender.close()  # every bind through _bind_one (slowed above), none through the bind loop
    monkeypatch.setattr(daemon.actuator, "sender", None)
    monkeypatch.setattr(daemon_mod, "create_podgroups", seen_create)
    catch_ups: list[dict[str, int]] = []  # the binds sent and answered when the model read the lists early
    assert daemon.live is not None
    catch_up = daemon.live.catch_up

    def seen_catch_up() -> None:
        with lock:
            catch_ups.append(dict(binds))
        catch_up()

    monkeypatch.setattr(daemon.live, "catch_up", seen_catch_up)
    with _in_process(daemon, "kaid-early"):
        wait_for(lambda: daemon.cycles >= 2, 60, "an early cycle and a full one")
        assert cache.held.is_set(), "the pod list was held"
        # 2 * clientBurst pending pods, the first by name; the hog's node had room for 2 of them
        assert sorted(daemon.early_bound) == [f"{namespace}/p{i:02}" for i in range(4)]
        got = _wait_bound(cp, namespace, 11)  # the hog and 10 of the 12: 2 + 8 GPUs were free
        _wait_cycles_of(daemon, 2)
    pods = pods_of(cp, namespace)
    assert len(bound(pods)) == 11 and len(got) == 11
    gpus: dict[str, int] = {}
    for p in bound(pods):
        node = p["spec"]["nodeName"]
        gpus[node] = gpus.get(node, 0) + int(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
    assert gpus == {nodes[0]: 8, nodes[1]: 8}, f"GPUs handed out per node: {gpus}"
    scheduled: dict[str, int] = {}
    for e in events(cp, namespace, "Scheduled"):
        scheduled[e["involvedObject"]["name"]] = scheduled.get(e["involvedObject"]["name"], 0) + 1
    # one event per PodGroup (here one per pod), the early cycle's binds included though it wrote nothing itself
    bound_names = {p["metadata"]["name"] for p in bound(pods)} - {"zz-hog"}
    assert scheduled == {f"pg-pod-{name}": 1 for name in bound_names}, scheduled
    listed = [k for k in cache.informers[0].items if k.startswith(f"{namespace}/")]
    assert len(listed) == 13, "the held list went on to the end once released"
    assert catch_ups[:1] == [{"sent": 4, "answered": 0}], \
        f"the model did not read the lists while the early cycle's binds were out: {catch_ups}"
    first_full = next(s for s in sends if s["sent"] > 4)
    assert first_full["answered"] < 4, f"the first full cycle's binds waited for the early cycle's answers: {sends}"
    assert warm_ups == [2], f"the solver began to load after {warm_ups} cycles, not once the first full one was over"
    assert creations and creations[0]["sent"] > 4, creations  # the first full cycle's, after the early 4
    assert all(c["sent"] == c["answered"] for c in creations), \
        f"PodGroups created before the cycle's binds were answered: {creations}"


@contextmanager
def _in_process(daemon: Daemon, name: str) -> Iterator[None]:
    """``daemon`` runs on a thread of this process; on the way out it is stopped and the garbage collector is set back
    as it was (``kaid run`` freezes the heap and sets its own thresholds)."""
    thresholds = gc.get_threshold()
    runner = threading.Thread(target=daemon.run, name=name, daemon=True)
    runner.start()
    try:
        yield
    finally:
        daemon.stopping.set()
        daemon.cache.changed.set()
        runner.join(30)
        gc.unfreeze()
        gc.set_threshold(*thresholds)
    assert not runner.is_alive()


def _wait_cycles_of(daemon: Daemon, n: int, timeout: float = 30.0) -> None:
    start = daemon.cycles
    wait_for(lambda: daemon.cycles >= start + n, timeout, f"{n} more cycles")


# --------------------------------------------------------------------------------------------------
# Configuration and signals


def test_bad_config_exits_1_naming_the_field_and_sigterm_exits_0(
    control_plane: ControlPlane, kai: KaiInstall, tmp_path: Path, start_kaid: Any
) -> None:
    for body, field in (("cyclePeriodSeconds: -1\n", "cyclePeriodSeconds"),
                        ("placement: {gpu: tightpack}\n", "placement.gpu"),
                        ("cyclePeriod: 1\n", "cyclePeriod")):  # fmt: skip
        bad = tmp_path / "bad.yaml"
        bad.write_text(body)
        proc = subprocess.run(
            [str(KAID), "run", "--config", str(bad), "--kubeconfig", str(kai.kubeconfig), "--metrics-port", "0"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 1, (body, proc.returncode, proc.stderr)
        assert f"{bad}: {field}: " in proc.stderr, (body, proc.stderr)  # the file, then the field
        assert "Traceback" not in proc.stderr, proc.stderr

    lease = f"kai-e2e-term-{_suffix()}"
    kaid = start_kaid("term", lease=lease)
    wait_for(lambda: lease_holder(cp=control_plane, name=lease) == "term", 15, "kaid to hold its Lease")
    started = time.monotonic()
    assert kaid.terminate(timeout=10) == 0, kaid.log()
    took = time.monotonic() - started
    assert took < 5.0, f"SIGTERM took {took:.1f}s"
    # A clean exit hands the Lease back at once.
    assert lease_holder(control_plane, lease) == ""


# --------------------------------------------------------------------------------------------------
# Reclaim


def test_reclaim_evicts_over_fair_share_and_binds_the_gang(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, (node,) = make_pool(1, gpus=8)
    sfx = _suffix()
    # A and B share a department of 8 GPUs. overQuotaWeight 0 keeps the department at its quota whatever
    # else the cluster holds, so A's fair share is 4 once B asks for its 4.
    _, a, b = make_queues(
        queue(f"dept-{sfx}", 8, weight=0),
        queue(f"team-a-{sfx}", 4, parent=f"dept-{sfx}"),
        queue(f"team-b-{sfx}", 4, parent=f"dept-{sfx}"),
    )
    kaid = start_kaid("reclaim")
    with watching(cp, namespace) as watch:
        for i in range(8):
            _create(cp, namespace, pod(f"a-{i}", pool, a, 1, priority_class="train"))
        _wait_bound(cp, namespace, 8)
        # A runs above its quota on idle GPUs: that is allowed.
        _create(cp, namespace, gang_job("b-gang", pool, b, 4))
        gang = _wait_bound(cp, namespace, 4, "job-name=b-gang", timeout=40)
        assert {p["spec"]["nodeName"] for p in gang} == {node}
        for p in gang:
            stale = {k for k in p["metadata"].get("annotations", {}) if k.startswith("kai.scheduler/pipelined")}
            assert not stale, f"{p['metadata']['name']} keeps {stale} after it was bound"
        versions = watch.wait(
            lambda vs: sum(1 for v in vs if v.type == "DELETED") >= 4, 10, "the watch to show the deletions"
        )

    left = [p for p in pods_of(cp, namespace) if p["metadata"]["name"].startswith("a-")]
    assert len(left) == 4, [p["metadata"]["name"] for p in left]
    evicted = {v.name for v in versions if v.name.startswith("a-") and v.type == "DELETED"}
    assert len(evicted) == 4, evicted
    for name in evicted:
        seen = [c for v in versions if v.name == name for c in v.conditions if c.get("type") == "DisruptionTarget"]
        assert seen, f"evicted pod {name} never had a DisruptionTarget condition"
        assert any("reclaim" in str(c.get("message")) for c in seen), seen
    evicted_events = {e["involvedObject"]["name"]: e for e in events(cp, namespace, "Evicted")
                      if e["source"].get("component") == "kai-scheduler"}  # fmt: skip
    assert set(evicted_events) == evicted
    for e in evicted_events.values():
        assert e["type"] == "Warning"
        assert e["message"].startswith(f"reclaim for {namespace}/pg-job-b-gang: "), e["message"]
    assert (kaid.metric("kai_pod_group_evicted_pods_total", {"action": "reclaim"}) or 0) == 4

    def shares() -> dict[str, tuple[float, float]] | None:
        got = {}
        for name in (a, b):
            status = cp.request("GET", f"{QUEUES}/{name}").get("status", {})
            got[name] = (status.get("allocated", {}).get("gpu"), status.get("fairShare", {}).get("gpu"))
        return got if got == {a: (4, 4), b: (4, 4)} else None

    wait_for(shares, BIND_TIMEOUT, f"queues {a} and {b} each at 4 allocated against a fair share of 4")


def test_preempt_evicts_lower_priority_in_the_queue_and_binds_the_gang(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """Inside one queue, a gang of higher priority (build, 100) takes the GPUs of preemptible pods of lower
    priority (train, 50) that fill the node: exactly as many as it needs are evicted, through the Eviction
    API, and each says who preempted it."""
    cp = control_plane
    pool, (node,) = make_pool(1, gpus=8)
    (q,) = make_queues(queue(f"prio-{_suffix()}", 8))
    kaid = start_kaid("preempt")
    with watching(cp, namespace) as watch:
        for i in range(8):
            _create(cp, namespace, pod(f"low-{i}", pool, q, 1, priority_class="train"))
        _wait_bound(cp, namespace, 8)
        job = gang_job("high", pool, q, 4)
        job["spec"]["template"]["spec"]["priorityClassName"] = "build"
        _create(cp, namespace, job)
        gang = _wait_bound(cp, namespace, 4, "job-name=high", timeout=40)
        assert {p["spec"]["nodeName"] for p in gang} == {node}
        versions = watch.wait(
            lambda vs: sum(1 for v in vs if v.type == "DELETED") >= 4, 10, "the watch to show the deletions"
        )

    low = [p for p in pods_of(cp, namespace) if p["metadata"]["name"].startswith("low-")]
    assert len(low) == 4 and len(bound(low)) == 4, [p["metadata"]["name"] for p in low]
    evicted = {v.name for v in versions if v.name.startswith("low-") and v.type == "DELETED"}
    assert len(evicted) == 4, evicted
    for name in evicted:
        seen = [c for v in versions if v.name == name for c in v.conditions if c.get("type") == "DisruptionTarget"]
        assert any("preempt" in str(c.get("message")) for c in seen), f"{name}: {seen}"
    evicted_events = {e["involvedObject"]["name"]: e for e in events(cp, namespace, "Evicted")
                      if e["source"].get("component") == "kai-scheduler"}  # fmt: skip
    assert set(evicted_events) == evicted
    for e in evicted_events.values():
        assert e["message"].startswith(f"preempt for {namespace}/pg-job-high: "), e["message"]
    assert (kaid.metric("kai_pod_group_evicted_pods_total", {"action": "preempt"}) or 0) == 4
    assert (kaid.metric("kai_pod_group_evicted_pods_total", {"action": "reclaim"}) or 0) == 0


def test_preempted_job_podgroup_carries_its_last_eviction(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """KAI's last-eviction mark: when a gang of higher priority preempts a whole lower-priority gang, the victim's
    PodGroup (owned by its batch Job, so it outlives the evicted pods) carries the time of the eviction, from which
    its ``preemptionDelay`` counts; the PodGroups of the job left running and of the preemptor carry none. (A bare
    pod's PodGroup is owned by the pod: the garbage collector deletes it with the evicted pod.)"""
    cp = control_plane
    started = time.time()
    pool, (node,) = make_pool(1, gpus=8)
    (q,) = make_queues(queue(f"mark-{_suffix()}", 8))
    start_kaid("mark")
    low = ["low-a", "low-b"]
    for n, name in enumerate(low, 1):  # one after the other, so that their ages differ
        job = gang_job(name, pool, q, 4)
        job["spec"]["template"]["spec"]["priorityClassName"] = "train"
        _create(cp, namespace, job)
        _wait_bound(cp, namespace, 4 * n)
    high = gang_job("high", pool, q, 4)
    high["spec"]["template"]["spec"]["priorityClassName"] = "build"
    _create(cp, namespace, high)
    gang = _wait_bound(cp, namespace, 4, "job-name=high", timeout=40)
    assert {p["spec"]["nodeName"] for p in gang} == {node}
    running = {name for name in low if len(bound(pods_of(cp, namespace, f"job-name={name}"))) == 4}
    assert len(running) == 1, running  # one whole gang made room; the other runs on
    (evicted,) = set(low) - running

    def marks() -> dict[str, str | None]:
        return {name: (meta.annotations_of(podgroup(cp, namespace, f"pg-job-{name}") or {})
                       .get(c.LAST_EVICTION_ANNOTATION)) for name in [*low, "high"]}

    wait_for(lambda: marks()[evicted], BIND_TIMEOUT, f"pg-job-{evicted} marked with its eviction")
    got = marks()
    assert {name for name, mark in got.items() if mark} == {evicted}, got
    assert started - 1 <= meta.parse_time(got[evicted]) <= time.time() + 1, got


# --------------------------------------------------------------------------------------------------
# Examples


def _docs(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_examples_apply_group_and_schedule(
    control_plane: ControlPlane, namespace: str, kai: KaiInstall, kai_webhook: Any, make_pool: Any, start_kaid: Any
) -> None:
    cp = control_plane
    tree = _docs(EXAMPLES / "queue-tree.yaml")
    names = [q["metadata"]["name"] for q in tree]
    try:
        cp.kubectl("apply", "-f", str(EXAMPLES / "queue-tree.yaml"))
        cp.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "gang-job.yaml"))
        cp.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "inference-fractional.yaml"))
        served = [cp.request("GET", f"/apis/scheduling.run.ai/v2/queues/{n}") for n in names]
        # Every value is explicit in the example tree; the server kept them all.
        for q in served:
            for res in ("gpu", "cpu", "memory"):
                assert set(q["spec"]["resources"][res]) == {"quota", "limit", "overQuotaWeight"}, q
            assert "priority" in q["spec"]
        depth = {n: 0 for n in names}
        parents = {q["metadata"]["name"]: q["spec"].get("parentQueue") for q in served}
        for n in names:
            p = parents[n]
            while p:
                depth[n] += 1
                p = parents.get(p)
        assert max(depth.values()) == 2, depth

        job_doc = next(d for d in _docs(EXAMPLES / "gang-job.yaml") if d["kind"] == "Job")
        wanted = int(job_doc["metadata"]["annotations"]["kai.scheduler/batch-min-member"])
        job_name = job_doc["metadata"]["name"]
        job = cp.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{job_name}")
        pods = wait_for(lambda: len(p := _job_pods(cp, namespace, job_name)) >= wanted and p, 30, "the Job's pods")
        deps = [d for d in _docs(EXAMPLES / "inference-fractional.yaml") if d["kind"] == "Deployment"]
        assert len(deps) >= 2
        for d in deps:
            anns = d["spec"]["template"]["metadata"]["annotations"]
            assert "gpu-fraction" in anns or "gpu-memory" in anns
            assert d["spec"]["template"]["spec"]["schedulerName"] == "kai-scheduler"
            cp.request("GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/{d['metadata']['name']}")
        # The engine reads the served objects as one gang in a leaf of the example tree.
        # (Items of a list carry no kind: give them theirs, as kaid's watch cache does.)
        nodes = [{**n, "kind": "Node"} for n in cp.request("GET", "/api/v1/nodes")["items"]]
        pods = [{**p, "kind": "Pod"} for p in pods]
        snap = build_snapshot([*served, job, *pods, *nodes], SchedulerConfig(), time.time())
        gang = snap.jobs[f"{namespace}/pg-job-{job_name}"]
        assert gang.min_member == wanted
        assert len(gang.pods) == len(pods)
        assert gang.queue in names
        assert not snap.queues[gang.queue].children, "workloads must go to a leaf queue"
        assert not gang.errors, gang.errors
        assert all(not snap.queues[n].errors for n in names), {n: snap.queues[n].errors for n in names}

        # And kaid schedules them: the gang whole, the inference pods on shared GPUs. (The example pods
        # select no nodes: they may land on any schedulable node; this pool makes sure there is room.)
        make_pool(1, gpus=8)
        start_kaid("examples")
        replicas = sum(int(d["spec"].get("replicas", 1)) for d in deps)
        with FakeGpuOperator(cp, every_node=True):  # the shared GPUs' reservation pods get a UUID
            placed = _wait_bound(cp, namespace, wanted + replicas)
        shared = [p for p in placed if "job-name" not in p["metadata"]["labels"]]
        assert len(shared) == replicas
        for p in shared:
            assert p["metadata"]["labels"].get("runai-gpu-group"), p["metadata"]
            assert p["metadata"]["annotations"].get("kai.scheduler/gpu-devices"), p["metadata"]
        wait_for(
            lambda: (
                cp.request("GET", f"{QUEUES}/{gang.queue}").get("status", {}).get("allocated", {}).get("gpu") == wanted
            ),
            BIND_TIMEOUT,
            f"queue {gang.queue} status allocated {wanted}",
        )
    finally:
        cp.kubectl("delete", "-n", namespace, "-f", str(EXAMPLES / "gang-job.yaml"), "--wait=false", check=False)
        cp.kubectl("delete", "-n", namespace, "-f", str(EXAMPLES / "inference-fractional.yaml"), "--wait=false",
                   check=False)  # fmt: skip
        cp.kubectl("delete", "-f", str(EXAMPLES / "queue-tree.yaml"), "--wait=false", check=False)


def test_pytorchjob_example_is_one_gang() -> None:
    docs = _docs(EXAMPLES / "pytorchjob.yaml")
    (ptj,) = [d for d in docs if d["kind"] == "PyTorchJob"]
    assert ptj["apiVersion"] == "kubeflow.org/v1"
    specs = ptj["spec"]["pytorchReplicaSpecs"]
    assert set(specs) == {"Master", "Worker"}
    total = sum(int(s.get("replicas", 1)) for s in specs.values())
    queue_name = ptj["metadata"]["labels"][QUEUE_LABEL]
    for s in specs.values():
        assert s["template"]["spec"]["schedulerName"] == "kai-scheduler"
    ns = "ml"
    ptj = {**ptj, "metadata": {**ptj["metadata"], "namespace": ns, "uid": "ptj-uid"}}
    fake_pods: list[Obj] = []
    for role, s in specs.items():
        for i in range(int(s.get("replicas", 1))):
            name = f"{ptj['metadata']['name']}-{role.lower()}-{i}"
            fake_pods.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}",
                             "labels": {"training.kubeflow.org/replica-type": role.lower()},
                             "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                                  "name": ptj["metadata"]["name"], "uid": "ptj-uid",
                                                  "controller": True}]},
                "spec": s["template"]["spec"], "status": {"phase": "Pending"},
            })  # fmt: skip
    q = queue(queue_name, 8)
    snap = build_snapshot([q, ptj, *fake_pods], SchedulerConfig(), 0.0)
    assert list(snap.jobs) == [f"{ns}/pg-pytorchjob-{ptj['metadata']['name']}"]
    (job,) = snap.jobs.values()
    assert job.min_member == total
    assert len(job.pods) == total
    assert job.queue == queue_name
    assert not job.errors, job.errors


def test_a_cycle_that_finds_the_status_writer_busy_hands_its_events_to_the_next_write(
    control_plane: ControlPlane, kai: KaiInstall, namespace: str, make_pool: Any, make_queues: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cycle leaves its status to the next while the status writer is still busy, but what only it can tell goes
    on to the next write: the Evicted events of the pods it preempted (gone by then) and the Scheduled event of the
    pods it bound. The daemon runs in this process (a thread) so that its status writer can be held; its pods list
    covers this test's namespace only."""
    cp = control_plane
    pool, _ = make_pool(1, gpus=8)
    (q,) = make_queues(queue(f"busy-{_suffix()}", 8))
    scheduler = f"kai-busy-{_suffix()}"
    cfg = SchedulerConfig.model_validate({
        **yaml.safe_load(yaml.safe_load((MANIFESTS / "config.yaml").read_text())["data"]["config.yaml"]),
        "schedulerName": scheduler, "metricsPort": 0, "leaderElection": {"enabled": False}})
    client = KubeClient.from_config(str(kai.kubeconfig))
    resources = tuple(ApiResource("Pod", f"/api/v1/namespaces/{namespace}/pods") if r.kind == "Pod" else r
                      for r in API_RESOURCES)
    daemon = Daemon(cfg, client, "busy", WatchCache(client, resources))
    holding, held, release = threading.Event(), threading.Event(), threading.Event()
    send = daemon.status.send

    def held_send() -> None:  # (after the writer read the snapshot: the next snapshot does not wait for it)
        if holding.is_set():
            held.set()
            release.wait(60)
        send()

    monkeypatch.setattr(daemon.status, "send", held_send)

    def ours(p: Obj) -> Obj:
        p["spec"]["schedulerName"] = scheduler
        return p

    with _in_process(daemon, "kaid-busy"):
        try:
            for i in range(8):
                _create(cp, namespace, ours(pod(f"low-{i}", pool, q, 1, priority_class="train")))
            _wait_bound(cp, namespace, 8)
            holding.set()
            wait_for(held.is_set, 30, "a status write to be held")
            _create(cp, namespace, ours(pod("high", pool, q, 4, priority_class="build")))
            wait_for(lambda: bound([p for p in pods_of(cp, namespace) if p["metadata"]["name"] == "high"]), 40,
                     "the high-priority pod to be bound")
            gone = {f"low-{i}" for i in range(8)} - {p["metadata"]["name"] for p in pods_of(cp, namespace)}
            assert len(gone) == 4, gone
            assert not events(cp, namespace, "Evicted"), "the status writer was held: no cycle wrote since"
            release.set()

            def evicted_events() -> set[str] | None:
                names = {e["involvedObject"]["name"] for e in events(cp, namespace, "Evicted")
                         if e["source"].get("component") == scheduler}
                return names if names == gone else None

            wait_for(evicted_events, 30, f"Evicted events for {sorted(gone)}")
            wait_for(lambda: [e for e in events(cp, namespace, "Scheduled")
                              if e["involvedObject"]["name"] == "pg-pod-high"
                              and e["source"].get("component") == scheduler], 30, "the Scheduled event of pg-pod-high")
        finally:
            release.set()  # (a held write would keep the daemon from stopping)
