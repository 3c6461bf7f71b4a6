"""End-to-end tests of GPU sharing on the real control plane: reservation pods, the device handoff (the pod's
ConfigMaps, labels), rollback, crash safety.

Pods never run on kwok nodes, so nothing there reports a GPU's UUID: ``FakeGpuOperator`` plays that part (it
writes a made-up UUID on each reservation pod of the nodes it serves), as the fake GPU operator does in
KAI-Scheduler's scale tests. Each test has its own nodes, queue and namespace.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from kaid.api.config import GpuSharingConfig, NodeAgentConfig
from kaid.kube.client import KubeClient
from kaid.sharing.handoff import configmap_names, mutate, reservation_pod
from kaid.sharing.node_agent import NodeAgent
from kaid.sharing.nvml import Nvml
from kaid.sharing.reservation_agent import ReservationError, reserve, run_reservation_agent
from tests.fake_nvml import GIB, FakeGpu, FakeNvml, cgroupfs_cgroup, fake_proc, systemd_cgroup

from .controlplane import ApiError, ControlPlane
from .kaid_helpers import (
    KAI_NAMESPACE,
    PODGROUPS,
    QUEUES,
    RESERVATION_NAMESPACE,
    RESERVED_GPU_ANNOTATION,
    SCHEDULER,
    FakeGpuOperator,
    Obj,
    WebhookProcess,
    configmap_data,
    create_object,
    deployment,
    events,
    get_or_none,
    last_condition,
    metric_value,
    pod,
    pods_of,
    queue,
    reason_codes,
    reservation_pods,
    suffix,
    wait_for,
    watching,
)

BIND_TIMEOUT = 60.0  # generous: a loaded CI machine took over 20 s; a pass returns as soon as the pods are bound
GROUP_LABEL = "runai-gpu-group"


def shared_pod(name: str, pool: str, queue_name: str, annotations: Mapping[str, str]) -> Obj:
    """A pod asking for a share of a GPU, as kai's admission webhook leaves it."""
    plain = pod(name, pool, queue_name, 0, annotations=annotations)
    mutated = mutate(plain, GpuSharingConfig(), SCHEDULER, random.Random(name))
    assert mutated is not None
    return mutated


def read_pod(cp: ControlPlane, namespace: str, name: str) -> Obj | None:
    return get_or_none(cp, f"/api/v1/namespaces/{namespace}/pods/{name}")


def wait_bound(cp: ControlPlane, namespace: str, *names: str, timeout: float = BIND_TIMEOUT) -> list[Obj]:
    def all_bound() -> list[Obj] | None:
        pods = [p for n in names if (p := read_pod(cp, namespace, n)) is not None and p["spec"].get("nodeName")]
        return pods if len(pods) == len(names) else None

    found: list[Obj] = wait_for(all_bound, timeout, f"pods {', '.join(names)} bound")
    return found


def vllm(name: str, pool: str, queue_name: str, fraction: str) -> Obj:
    """An inference server on a share of a GPU, as in seed 001."""
    dep = deployment(name, pool, queue_name, {"gpu-fraction": fraction})
    container = dep["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilization", fraction]
    return dep


def wait_bound_of(cp: ControlPlane, namespace: str, selector: str, timeout: float = BIND_TIMEOUT) -> Obj:
    """The one pod of ``selector``, once bound."""
    found: list[Obj] = wait_for(lambda: [p for p in pods_of(cp, namespace, selector) if p["spec"].get("nodeName")],
                                timeout, f"a bound pod of {selector}")
    return found[0]


def capabilities(cp: ControlPlane, p: Obj) -> dict[str, str]:
    """The data of a pod's capabilities ConfigMap (NVIDIA_VISIBLE_DEVICES, GPU_PORTION, RUNAI_NUM_OF_GPUS)."""
    data = configmap_data(cp, p["metadata"]["namespace"], configmap_names(p)[0])
    assert data is not None, f"no ConfigMap for {p['metadata']['name']}"
    return data


def group_of(p: Obj) -> str:
    return str((p["metadata"].get("labels") or {}).get(GROUP_LABEL) or "")


def delete_pod(cp: ControlPlane, namespace: str, name: str) -> None:
    cp.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", {"gracePeriodSeconds": 0})


@pytest.fixture
def node_and_queue(make_pool: Any, make_queues: Any) -> Callable[[int, str], tuple[str, str, str]]:
    """One fake GPU node of ``gpus`` GPUs and a queue: (its pool, its name, the queue)."""

    def make(gpus: int, queue_prefix: str) -> tuple[str, str, str]:
        pool, (node,) = make_pool(1, gpus=gpus)
        (q,) = make_queues(queue(f"{queue_prefix}-{suffix()}", 0))
        return pool, node, q

    return make


def test_seed_001_deployments_share_one_gpu_through_one_reservation_pod(
    control_plane: ControlPlane, namespace: str, kai_webhook: Any, node_and_queue: Any, start_kaid: Any
) -> None:
    """Seed 001: two vLLM Deployments at gpu-fraction 0.7 and 0.2, set up by the webhook, bound by kaid."""
    cp = control_plane
    pool, node, q = node_and_queue(2, "share")
    with FakeGpuOperator(cp, [node]) as gpu:
        start_kaid("share")
        create_object(cp, namespace, vllm("vllm-large", pool, q, "0.7"))
        create_object(cp, namespace, vllm("vllm-small", pool, q, "0.2"))
        large = wait_bound_of(cp, namespace, "app=vllm-large")
        small = wait_bound_of(cp, namespace, "app=vllm-small")
        (first,) = reservation_pods(cp, node)
        group = first["metadata"]["labels"][GROUP_LABEL]
        assert group_of(large) == group_of(small) == group
        uuid = first["metadata"]["annotations"][RESERVED_GPU_ANNOTATION]
        assert uuid == gpu.uuids[first["metadata"]["name"]]
        assert first["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert {k: capabilities(cp, large)[k] for k in ("NVIDIA_VISIBLE_DEVICES", "GPU_PORTION", "RUNAI_NUM_OF_GPUS")} \
            == {"NVIDIA_VISIBLE_DEVICES": uuid, "GPU_PORTION": "0.70", "RUNAI_NUM_OF_GPUS": "0.70"}
        assert capabilities(cp, small)["NVIDIA_VISIBLE_DEVICES"] == uuid
        assert capabilities(cp, small)["GPU_PORTION"] == "0.20"
        cm = cp.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{configmap_names(large)[0]}")
        assert cm["metadata"]["ownerReferences"][0]["uid"] == large["metadata"]["uid"]
        assert large["metadata"]["annotations"]["received-resource-type"] == "Fraction"
        env = {e["name"]: e["valueFrom"]["configMapKeyRef"] for e in large["spec"]["containers"][0]["env"]}
        assert env["NVIDIA_VISIBLE_DEVICES"] == {"name": configmap_names(large)[0], "key": "NVIDIA_VISIBLE_DEVICES"}
        # the reservation pod holds a whole GPU, and counts for nothing in the queue's allocation
        wait_for(lambda: (get_or_none(cp, f"{QUEUES}/{q}") or {}).get("status", {}).get("allocated", {}).get("gpu")
                 == 0.9, BIND_TIMEOUT, f"queue {q} status allocated 0.9 GPU")  # fmt: skip

        create_object(cp, namespace, vllm("vllm-half", pool, q, "0.5"))
        middle = wait_bound_of(cp, namespace, "app=vllm-half")
        assert group_of(middle) not in ("", group)
        second = [p for p in reservation_pods(cp, node) if p["metadata"]["name"] != first["metadata"]["name"]]
        assert [p["metadata"]["labels"][GROUP_LABEL] for p in second] == [group_of(middle)]
        assert capabilities(cp, middle)["NVIDIA_VISIBLE_DEVICES"] not in ("", uuid)

        cp.kubectl("delete", "deployment", "vllm-large", "vllm-small", "-n", namespace, "--wait=false")
        wait_for(lambda: [p["metadata"]["name"] for p in reservation_pods(cp, node)]
                 == [second[0]["metadata"]["name"]], BIND_TIMEOUT, "only the second reservation pod left")  # fmt: skip
        assert not gpu.errors, gpu.errors


def test_reservations_go_in_parallel_and_whole_gpu_binds_do_not_wait_for_them(
    control_plane: ControlPlane, namespace: str, node_and_queue: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, node, q = node_and_queue(4, "parallel")
    with FakeGpuOperator(cp) as gpu:  # it serves the node only once both reservations wait
        start_kaid("parallel")
        create_object(cp, namespace, shared_pod("left", pool, q, {"gpu-fraction": "0.6"}))
        create_object(cp, namespace, shared_pod("right", pool, q, {"gpu-fraction": "0.6"}))
        create_object(cp, namespace, pod("whole", pool, q, 1))
        wait_for(lambda: len(reservation_pods(cp, node)) == 2, BIND_TIMEOUT, "two reservation pods, both waiting")
        wait_bound(cp, namespace, "whole", timeout=5)
        for name in ("left", "right"):
            waiting = read_pod(cp, namespace, name)
            assert waiting is not None and not waiting["spec"].get("nodeName"), f"{name} bound without a UUID"
        gpu.serve(node)
        left, right = wait_bound(cp, namespace, "left", "right")
        assert group_of(left) != group_of(right)
        assert capabilities(cp, left)["NVIDIA_VISIBLE_DEVICES"] != capabilities(cp, right)["NVIDIA_VISIBLE_DEVICES"]


def test_a_pod_on_two_shared_gpus_gets_a_reservation_and_a_label_per_gpu(
    control_plane: ControlPlane, namespace: str, node_and_queue: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, node, q = node_and_queue(2, "multi")
    with FakeGpuOperator(cp, [node]) as gpu:
        start_kaid("multi")
        create_object(cp, namespace, shared_pod("wide", pool, q, {"gpu-fraction": "0.5",
                                                                  "gpu-fraction-num-devices": "2"}))
        (wide,) = wait_bound(cp, namespace, "wide")
        reservations = reservation_pods(cp, node)
        assert len(reservations) == 2
        groups = {p["metadata"]["labels"][GROUP_LABEL] for p in reservations}
        labels = wide["metadata"]["labels"]
        assert {v for k, v in labels.items() if k.startswith(f"{GROUP_LABEL}/")} == groups
        assert all(labels[f"{GROUP_LABEL}/{g}"] == g for g in groups)
        data = capabilities(cp, wide)
        given = {gpu.uuids[p["metadata"]["name"]] for p in reservations}
        assert set(data["NVIDIA_VISIBLE_DEVICES"].split(",")) == given
        assert data["GPU_PORTION"] == "0.50"


def test_no_uuid_within_the_timeout_rolls_back_with_the_reason_and_leaves_nothing(
    control_plane: ControlPlane, namespace: str, node_and_queue: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, node, q = node_and_queue(1, "nouuid")
    kaid = start_kaid("nouuid", overrides={"gpuSharing": {"reservationTimeoutSeconds": 3,
                                                          "reservationRetrySeconds": 120}})
    p = shared_pod("lonely", pool, q, {"gpu-fraction": "0.5"})
    create_object(cp, namespace, p)
    wait_for(lambda: reservation_pods(cp, node), BIND_TIMEOUT, "a reservation pod")

    def failed() -> Obj | None:
        cond = last_condition(get_or_none(cp, f"{PODGROUPS}/namespaces/{namespace}/podgroups/pg-pod-lonely"))
        return cond if [r.get("reason") for r in cond.get("reasons") or []][:1] == ["GpuReservationFailed"] else None

    cond = wait_for(failed, BIND_TIMEOUT, "the PodGroup to say the reservation failed")
    assert "reported no GPU UUID within 3 s" in cond["message"], cond
    assert f"on node {node}" in cond["message"] and "device plugin" in cond["message"], cond
    wait_for(lambda: not reservation_pods(cp, node), BIND_TIMEOUT, "the reservation pod to be deleted")
    left = read_pod(cp, namespace, "lonely")
    assert left is not None and not left["spec"].get("nodeName")
    assert GROUP_LABEL not in (left["metadata"].get("labels") or {})
    cms = cp.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")["items"]
    assert not [c["metadata"]["name"] for c in cms if c["metadata"]["name"].startswith("lonely")]
    assert any("no GPU UUID" in e.get("message", "") for e in events(cp, namespace, "BindingError"))
    # and it stays so while the job waits to be placed again (reservationRetrySeconds)
    kaid.wait_cycles(3)
    assert not reservation_pods(cp, node)
    assert reason_codes(get_or_none(cp, f"{PODGROUPS}/namespaces/{namespace}/podgroups/pg-pod-lonely")) == [
        "GpuReservationFailed"]


def test_kaid_killed_after_making_a_reservation_pod_makes_no_second_one(
    control_plane: ControlPlane, namespace: str, node_and_queue: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, node, q = node_and_queue(1, "crash")
    with watching(cp, RESERVATION_NAMESPACE) as watch, FakeGpuOperator(cp) as gpu:
        kaid = start_kaid("crash", overrides={"gpuSharing": {"reservationTimeoutSeconds": 30}})
        create_object(cp, namespace, shared_pod("survivor", pool, q, {"gpu-fraction": "0.5"}))
        wait_for(lambda: reservation_pods(cp, node), BIND_TIMEOUT, "a reservation pod")
        kaid.kill()
        kaid.start()
        kaid.wait_ready()
        gpu.serve(node)
        (survivor,) = wait_bound(cp, namespace, "survivor")
        mine = {v.uid for v in watch.snapshot() if v.node == node}
        assert len(mine) == 1, f"reservation pods made for one group: {mine}"
        (reservation,) = reservation_pods(cp, node)
        assert reservation["metadata"]["uid"] in mine
        assert group_of(survivor) == reservation["metadata"]["labels"][GROUP_LABEL]


def test_a_shared_gpu_pod_admission_did_not_set_up_waits_with_the_fix(
    control_plane: ControlPlane, namespace: str, node_and_queue: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, node, q = node_and_queue(1, "raw")
    # made without a GPU share (admission has nothing to do), then asking for one: never set up (kaid starts
    # after that, so that it never sees the pod without the share)
    create_object(cp, namespace, pod("raw", pool, q, 0))
    cp.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/raw", {"metadata": {"annotations": {
        "gpu-fraction": "0.5"}}}, content_type="application/merge-patch+json")
    start_kaid("raw")

    def waiting() -> Obj | None:
        cond = last_condition(get_or_none(cp, f"{PODGROUPS}/namespaces/{namespace}/podgroups/pg-pod-raw"))
        return cond if [r.get("reason") for r in cond.get("reasons") or []][:1] == ["GpuSharingNotSetUp"] else None

    cond = wait_for(waiting, BIND_TIMEOUT, "the PodGroup to say the pod was not set up")
    assert "make sure `kaid webhook` runs" in cond["message"] and "recreate the pod" in cond["message"], cond
    assert not reservation_pods(cp, node)
    left = read_pod(cp, namespace, "raw")
    assert left is not None and not left["spec"].get("nodeName")


def test_webhook_sets_up_refuses_with_the_fix_and_its_outage_blocks_only_kai_shared_gpu_pods(
    control_plane: ControlPlane, namespace: str, kai_webhook: WebhookProcess, make_queues: Any
) -> None:
    cp = control_plane
    pods = f"/api/v1/namespaces/{namespace}/pods"
    nowhere = f"none-{suffix()}"  # a pool no node has: nothing here is ever placed
    conf = cp.request("GET", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kai-webhook")
    assert conf["webhooks"][0]["clientConfig"]["caBundle"], "kaid webhook did not patch the caBundle"
    assert get_or_none(cp, "/api/v1/namespaces/kai-scheduler/secrets/kai-webhook-ca") is not None

    made = cp.create(pods, pod("wired", nowhere, "default-queue", 0, annotations={"gpu-fraction": "0.5"}))
    prefix = made["metadata"]["annotations"]["runai/shared-gpu-configmap"]
    assert prefix.startswith("wired-") and prefix.endswith("-shared-gpu"), prefix
    ctr = made["spec"]["containers"][0]
    assert {e["name"]: e["valueFrom"]["configMapKeyRef"]["name"] for e in ctr["env"]} == {
        k: f"{prefix}-0" for k in ("NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION")}
    assert ctr["envFrom"] == [{"configMapRef": {"name": f"{prefix}-0-evar"}}]

    def refused(path: str, body: Obj, method: str = "POST") -> str:
        content = "application/merge-patch+json" if method == "PATCH" else "application/json"
        with pytest.raises(ApiError) as caught:
            cp.request(method, path, body, content_type=content)
        return str(json.loads(caught.value.body)["message"])

    too_big = refused(pods, pod("too-big", nowhere, "default-queue", 0, annotations={"gpu-fraction": "1.5"}))
    assert 'admission webhook "gpu-sharing.pods.kai.scheduler" denied the request' in too_big, too_big
    assert "must be a number between 0 and 1" in too_big and "request nvidia.com/gpu instead" in too_big, too_big

    top, child = f"wh-top-{suffix()}", f"wh-child-{suffix()}"
    make_queues(queue(top, 0), queue(child, 0, parent=top))
    cycle = refused(f"{QUEUES}/{top}", {"spec": {"parentQueue": child}}, "PATCH")
    assert "parent cycle" in cycle and "point one of them at a parent outside the cycle" in cycle, cycle
    missing = refused(QUEUES, queue(f"wh-lost-{suffix()}", 0, parent="no-such-queue"))
    assert "which does not exist: create it" in missing, missing
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "empty"},
             "spec": {"minMember": 0, "queue": "default-queue"}}
    assert "must be at least 1" in refused(f"{PODGROUPS}/namespaces/{namespace}/podgroups", group)

    kai_webhook.stop()
    try:
        other = pod("other", nowhere, "default-queue", 0, annotations={"gpu-fraction": "0.5"})
        other["spec"]["schedulerName"] = "default-scheduler"
        assert cp.create(pods, other)["metadata"]["name"] == "other"  # never sent to kai's webhook
        assert cp.create(pods, pod("plain", nowhere, "default-queue", 0))["metadata"]["name"] == "plain"
        down = refused(pods, pod("shared", nowhere, "default-queue", 0, annotations={"gpu-fraction": "0.5"}))
        assert "failed calling webhook" in down, down
        cp.request("PATCH", f"{QUEUES}/{child}", {"spec": {"priority": 90}},
                   content_type="application/merge-patch+json")  # Queues go through (failurePolicy Ignore)
    finally:
        kai_webhook.start().wait_ready()


def test_reservation_agent_reports_its_gpu_once_as_its_serviceaccount(
    control_plane: ControlPlane, kai: Any, make_pool: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = control_plane
    _, (node,) = make_pool(1, gpus=1)
    body = reservation_pod(node, f"agent-{suffix()}", {}, GpuSharingConfig())
    name = body["metadata"]["name"]
    cp.create(f"/api/v1/namespaces/{RESERVATION_NAMESPACE}/pods", body)
    kubeconfig = cp.serviceaccount_kubeconfig(RESERVATION_NAMESPACE, "kai-resource-reservation", create=False)
    client = KubeClient.from_config(str(kubeconfig))
    try:
        with pytest.raises(ReservationError, match="shows 2 GPUs"):
            reserve(client, RESERVATION_NAMESPACE, name, FakeNvml([FakeGpu("GPU-a"), FakeGpu("GPU-b")]))
        assert run_reservation_agent(kubeconfig, RESERVATION_NAMESPACE, name, FakeNvml([])) == 1
        (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
        assert line.startswith("error: NVML shows no GPU"), line
        unread = read_pod(cp, RESERVATION_NAMESPACE, name)
        assert unread is not None and RESERVED_GPU_ANNOTATION not in (unread["metadata"].get("annotations") or {})

        done = threading.Event()
        done.set()  # (else it would hold the GPU until SIGTERM)
        assert run_reservation_agent(kubeconfig, RESERVATION_NAMESPACE, name, FakeNvml([FakeGpu("GPU-e2e")]),
                                     stop=done) == 0
        held = read_pod(cp, RESERVATION_NAMESPACE, name)
        assert held is not None and held["metadata"]["annotations"][RESERVED_GPU_ANNOTATION] == "GPU-e2e"
        restarted = FakeNvml([FakeGpu("GPU-other")])
        assert reserve(client, RESERVATION_NAMESPACE, name, restarted) == "GPU-e2e"
        assert restarted.calls == {}, "a restarted agent asked NVML again"
        with pytest.raises(ReservationError, match="cannot read its own pod"):
            reserve(client, "default", "someone-else", FakeNvml([FakeGpu("GPU-x")]))
    finally:
        delete_pod(cp, RESERVATION_NAMESPACE, name)


def test_node_agent_measures_pods_flags_and_evicts_over_share(
    control_plane: ControlPlane, kai: Any, namespace: str, make_pool: Any, tmp_path: Path
) -> None:
    cp = control_plane
    pool, (node,) = make_pool(1, gpus=1)
    cp.request("PATCH", f"/api/v1/nodes/{node}", {"metadata": {"labels": {"nvidia.com/gpu.memory": None}}},
               content_type="application/merge-patch+json")  # as if GPU Feature Discovery did not run
    cp.create(f"{PODGROUPS}/namespaces/{namespace}/podgroups", {
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pg-greedy"},
        "spec": {"minMember": 1, "queue": "default-queue"}})
    greedy = pod("greedy", pool, "default-queue", 0, annotations={"gpu-fraction": "0.25",
                                                                   "kai.scheduler/pod-group": "pg-greedy"})
    modest = pod("modest", pool, "default-queue", 0, annotations={"gpu-memory": "20480"})
    uids = {}
    for p in (greedy, modest):
        p["spec"]["nodeName"] = node  # running there already (no scheduler in this test)
        uids[p["metadata"]["name"]] = cp.create(f"/api/v1/namespaces/{namespace}/pods", p)["metadata"]["uid"]
    proc = fake_proc(tmp_path / "proc", {101: systemd_cgroup(uids["greedy"]), 102: cgroupfs_cgroup(uids["modest"]),
                                         103: "0::/system.slice/nvidia-persistenced.service\n"})
    gpu = FakeGpu("GPU-e2e-node", total=80 * GIB, processes={101: 30 * GIB, 102: 8 * GIB, 103: GIB})
    cfg = NodeAgentConfig(procRoot=str(proc), evictOverShare=True, evictGraceSeconds=0, metricsPort=0)
    client = KubeClient.from_config(str(cp.serviceaccount_kubeconfig(KAI_NAMESPACE, "kai-node-agent", create=False)))
    with Nvml(FakeNvml([gpu])) as nvml:
        agent = NodeAgent(client, cfg, node, nvml)
        agent.tick(time.time())
        text = agent.metrics.render()[0].decode()

        def sample(name: str, pod_name: str) -> float | None:
            return metric_value(text, name, {"namespace": namespace if pod_name else "", "pod": pod_name,
                                             "gpu": "GPU-e2e-node"})

        assert sample("kai_gpu_memory_used_bytes", "greedy") == 30 * GIB
        assert sample("kai_gpu_memory_share_bytes", "greedy") == 20 * GIB
        assert sample("kai_gpu_share_exceeded", "greedy") == 1
        assert sample("kai_gpu_share_exceeded", "modest") == 0
        assert sample("kai_gpu_memory_used_bytes", "") == GIB  # no pod's
        labelled = cp.request("GET", f"/api/v1/nodes/{node}")["metadata"]["labels"]
        assert labelled["nvidia.com/gpu.memory"] == "81920"
        (warning,) = [e for e in events(cp, namespace, "GpuMemoryOverShare")]
        assert warning["involvedObject"]["name"] == "greedy" and "more than its share of 20.0 GiB" in warning["message"]
        conds = cp.request("GET", f"{PODGROUPS}/namespaces/{namespace}/podgroups/pg-greedy")["status"]["conditions"]
        assert [(x["type"], x["status"]) for x in conds] == [("GpuMemoryOverShare", "True")]
        wait_for(lambda: (read_pod(cp, namespace, "greedy") or {"metadata": {"deletionTimestamp": "gone"}})[
            "metadata"].get("deletionTimestamp"), BIND_TIMEOUT, "pod greedy evicted")
        assert read_pod(cp, namespace, "modest") is not None

        gpu.processes = {102: 8 * GIB}  # greedy's process has ended
        agent.tick(time.time())
        conds = cp.request("GET", f"{PODGROUPS}/namespaces/{namespace}/podgroups/pg-greedy")["status"]["conditions"]
        assert [(x["type"], x["status"]) for x in conds] == [("GpuMemoryOverShare", "False")]


def test_component_service_accounts_hold_least_privilege(control_plane: ControlPlane, kai: Any) -> None:
    cp = control_plane

    def can(account: str, *args: str) -> bool:
        ns, name = account.split("/")
        kubeconfig = cp.serviceaccount_kubeconfig(ns, name, create=False)
        return cp.kubectl("auth", "can-i", *args, kubeconfig=kubeconfig, check=False).stdout.strip() == "yes"

    kaid, agent = "kai-scheduler/kai-scheduler", "kai-resource-reservation/kai-resource-reservation"
    webhook, node_agent = "kai-scheduler/kai-webhook", "kai-scheduler/kai-node-agent"
    assert can(kaid, "create", "pods", "-n", RESERVATION_NAMESPACE) and not can(kaid, "create", "pods", "-n", "default")
    assert can(kaid, "create", "configmaps", "-n", "default") and not can(kaid, "get", "secrets", "-A")
    assert can(agent, "patch", "pods", "-n", RESERVATION_NAMESPACE) and not can(agent, "patch", "pods", "-n", "default")
    assert not can(agent, "create", "pods", "-n", RESERVATION_NAMESPACE)
    assert can(webhook, "get", "secrets/kai-webhook-ca", "-n", KAI_NAMESPACE)
    assert not can(webhook, "get", "secrets/other", "-n", KAI_NAMESPACE)
    assert can(webhook, "patch", "validatingwebhookconfigurations/kai-webhook")
    assert not can(webhook, "patch", "validatingwebhookconfigurations/someone-elses")
    assert can(webhook, "list", "queues.scheduling.run.ai") and not can(webhook, "create", "pods", "-n", "default")
    assert can(node_agent, "patch", "nodes") and can(node_agent, "create", "pods", "--subresource=eviction", "-A")
    assert not can(node_agent, "delete", "pods", "-n", "default") and not can(node_agent, "get", "secrets", "-A")
