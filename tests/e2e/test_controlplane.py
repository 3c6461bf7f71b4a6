"""End-to-end checks of the test control plane itself: API server, fake GPU nodes, pods, Jobs, RBAC."""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from typing import Any

import pytest

from .controlplane import COMPLETE_DELAY_ANNOTATION, ApiError, ControlPlane, pinned_versions, wait_until

POD_TIMEOUT = 30.0


def _pod(name: str, *, node: str | None = None, gpus: int = 0, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.example/kai/fake:1"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    pod_spec: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 0, **spec}
    if node is not None:
        pod_spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod_spec}


def _get_pod(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = cp.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return pod


def _wait_pod_phase(
    cp: ControlPlane, namespace: str, name: str, phase: str, timeout: float = POD_TIMEOUT
) -> dict[str, Any]:
    pod: dict[str, Any] = {}

    def reached() -> bool:
        nonlocal pod
        pod = _get_pod(cp, namespace, name)
        return bool(pod.get("status", {}).get("phase") == phase)

    try:
        wait_until(reached, timeout, f"pod {namespace}/{name} to be {phase}")
    except Exception as exc:
        raise AssertionError(f"{exc}; last status: {json.dumps(pod.get('status'))}") from exc
    return pod


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def gpu_nodes(control_plane: ControlPlane) -> list[str]:
    return control_plane.add_gpu_nodes(
        2,
        name_prefix="e2e-gpu",
        labels={"kai.scheduler/test": "controlplane"},
        node_labels=lambda i: {"kai.scheduler/rack": f"rack-{i}"},
        wait=True,
    )


def test_apiserver_answers_with_pinned_version(control_plane: ControlPlane) -> None:
    assert control_plane.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    version = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == pinned_versions()["kubernetes"]
    assert version["serverVersion"]["major"] == "1"
    assert control_plane.server.startswith("https://127.0.0.1:")


def test_gpu_nodes_become_ready_with_gpus(control_plane: ControlPlane, gpu_nodes: list[str]) -> None:
    assert gpu_nodes == ["e2e-gpu-0", "e2e-gpu-1"]
    for i, name in enumerate(gpu_nodes):
        node = control_plane.request("GET", f"/api/v1/nodes/{name}")
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
        labels = node["metadata"]["labels"]
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert labels["nvidia.com/gpu.memory"] == "81920"
        assert labels["nvidia.com/gpu.count"] == "8"
        assert labels["topology.kubernetes.io/zone"] == "zone-a"
        assert labels["kai.scheduler/rack"] == f"rack-{i}"
        assert labels["kai.scheduler/test"] == "controlplane"
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conditions["Ready"] == "True"
        taints = [t["key"] for t in node["spec"].get("taints", [])]
        assert "node.kubernetes.io/not-ready" not in taints
        # kwok keeps the node's lease fresh, so the node lifecycle controller sees it alive.
        lease = control_plane.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")
        assert lease["spec"]["renewTime"]
        assert lease["spec"]["leaseDurationSeconds"] == 40
    assert control_plane.node_problems(gpu_nodes) == {}


def test_pod_with_node_name_runs(control_plane: ControlPlane, gpu_nodes: list[str], namespace: str) -> None:
    control_plane.create(f"/api/v1/namespaces/{namespace}/pods", _pod("direct", node=gpu_nodes[0], gpus=2))
    pod = _wait_pod_phase(control_plane, namespace, "direct", "Running")
    assert _ready(pod)
    assert pod["status"]["podIP"]
    assert pod["status"]["hostIP"].startswith("10.200.")
    assert pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]


def test_pod_bound_via_binding_subresource_runs(
    control_plane: ControlPlane, gpu_nodes: list[str], namespace: str
) -> None:
    # No scheduler answers to this name: the pod stays Pending until we bind it, as kai will.
    pods = f"/api/v1/namespaces/{namespace}/pods"
    control_plane.create(pods, _pod("bound", gpus=8, schedulerName="kai-e2e-nobody"))
    time.sleep(0.5)
    assert _get_pod(control_plane, namespace, "bound")["status"]["phase"] == "Pending"
    control_plane.request(
        "POST",
        f"{pods}/bound/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "bound"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": gpu_nodes[1]},
        },
    )
    pod = _wait_pod_phase(control_plane, namespace, "bound", "Running")
    assert pod["spec"]["nodeName"] == gpu_nodes[1]
    assert _ready(pod)


def test_deleted_pod_goes_away(control_plane: ControlPlane, gpu_nodes: list[str], namespace: str) -> None:
    control_plane.create(f"/api/v1/namespaces/{namespace}/pods", _pod("doomed", node=gpu_nodes[0]))
    _wait_pod_phase(control_plane, namespace, "doomed", "Running")
    control_plane.kubectl("delete", "pod", "doomed", "-n", namespace, "--wait=false")

    def gone() -> bool:
        try:
            _get_pod(control_plane, namespace, "doomed")
        except ApiError as exc:
            return exc.status == 404
        return False

    wait_until(gone, POD_TIMEOUT, "pod to be deleted by kwok")


def _job(name: str, node: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeName": node,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "train", "image": "registry.example/kai/fake:1"}],
                },
            },
        },
    }


def _job_pod(cp: ControlPlane, namespace: str, job: str) -> dict[str, Any] | None:
    pods = cp.request("GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3D{job}")["items"]
    return pods[0] if pods else None


def test_job_with_completion_delay_succeeds(control_plane: ControlPlane, gpu_nodes: list[str], namespace: str) -> None:
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    control_plane.create(jobs, _job("finishes", gpu_nodes[0], {COMPLETE_DELAY_ANNOTATION: "3s"}))
    control_plane.create(jobs, _job("keeps-running", gpu_nodes[1], {}))

    def complete() -> bool:
        job = control_plane.request("GET", f"{jobs}/finishes")
        conditions = {c["type"]: c["status"] for c in job.get("status", {}).get("conditions", [])}
        return conditions.get("Complete") == "True"

    wait_until(complete, 60, "Job to be Complete")
    job = control_plane.request("GET", f"{jobs}/finishes")
    assert job["status"]["succeeded"] == 1
    pod = _job_pod(control_plane, namespace, "finishes")
    assert pod is not None
    assert pod["status"]["phase"] == "Succeeded"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 0
    ran_for = (_time(terminated["finishedAt"]) - _time(terminated["startedAt"])).total_seconds()
    assert 2 <= ran_for <= 20, ran_for

    # Without the annotation a Job pod runs until something deletes it.
    other = _job_pod(control_plane, namespace, "keeps-running")
    assert other is not None
    assert other["status"]["phase"] == "Running"
    running = control_plane.request("GET", f"{jobs}/keeps-running")["status"]
    assert running.get("active") == 1
    assert not running.get("succeeded")


def test_pod_in_brand_new_namespace(control_plane: ControlPlane, gpu_nodes: list[str]) -> None:
    name = f"fresh-{uuid.uuid4().hex[:6]}"
    control_plane.ensure_namespace(name)
    try:
        # The ServiceAccount admission plugin refuses pods until the namespace's default
        # ServiceAccount exists; the controller manager makes it within moments.
        control_plane.wait_for_default_serviceaccount(name, timeout=30)
        control_plane.create(f"/api/v1/namespaces/{name}/pods", _pod("first", node=gpu_nodes[0]))
        pod = _wait_pod_phase(control_plane, name, "first", "Running")
        assert pod["spec"]["serviceAccountName"] == "default"
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_serviceaccount_kubeconfig_obeys_rbac(control_plane: ControlPlane, namespace: str) -> None:
    kubeconfig = control_plane.serviceaccount_kubeconfig(namespace, "reader")
    whoami = control_plane.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig)
    assert json.loads(whoami.stdout)["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:reader"
    denied = control_plane.kubectl("get", "pods", "-n", namespace, kubeconfig=kubeconfig, check=False)
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower()

    control_plane.kubectl(
        "create", "rolebinding", "reader-view", "--clusterrole=view", f"--serviceaccount={namespace}:reader",
        "-n", namespace,
    )  # fmt: skip

    def allowed() -> bool:
        return control_plane.kubectl("get", "pods", "-n", namespace, kubeconfig=kubeconfig, check=False).returncode == 0

    wait_until(allowed, 15, "the RoleBinding to take effect")
    still_denied = control_plane.kubectl("get", "nodes", kubeconfig=kubeconfig, check=False)
    assert still_denied.returncode != 0


def test_kube_scheduler_baseline_schedules_gpu_pod(
    control_plane: ControlPlane, gpu_nodes: list[str], namespace: str
) -> None:
    control_plane.start_kube_scheduler()
    try:
        control_plane.create(f"/api/v1/namespaces/{namespace}/pods", _pod("scheduled", gpus=4))
        pod = _wait_pod_phase(control_plane, namespace, "scheduled", "Running")
        nodes = {n["metadata"]["name"] for n in control_plane.request("GET", "/api/v1/nodes")["items"]}
        assert pod["spec"]["nodeName"] in nodes
        # Nine GPUs fit on no node of eight: the scheduler reports the pod Unschedulable.
        control_plane.create(f"/api/v1/namespaces/{namespace}/pods", _pod("too-big", gpus=9))

        def unschedulable() -> bool:
            status = _get_pod(control_plane, namespace, "too-big")["status"]
            return any(
                c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in status.get("conditions", [])
            )

        wait_until(unschedulable, POD_TIMEOUT, "the too-big pod to be reported Unschedulable")
        assert _get_pod(control_plane, namespace, "too-big")["status"]["phase"] == "Pending"
    finally:
        control_plane.stop_kube_scheduler()


def test_user_kubeconfig_carries_user_and_groups(control_plane: ControlPlane) -> None:
    kubeconfig = control_plane.user_kubeconfig("kai-e2e-user", groups=["kai:testers"])
    whoami = json.loads(control_plane.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig).stdout)
    info = whoami["status"]["userInfo"]
    assert info["username"] == "kai-e2e-user"
    assert "kai:testers" in info["groups"]
    assert control_plane.kubectl("get", "nodes", kubeconfig=kubeconfig, check=False).returncode != 0


def test_request_asks_again_while_the_storage_is_reinitializing(monkeypatch: pytest.MonkeyPatch) -> None:
    """After etcd restarts, the API server answers 429 "storage is (re)initializing" until its watch cache is
    filled again (test_faults' etcd restart met it in a GET of the harness's own): ``request`` asks again within
    ``REINITIALIZING_WAIT_S``; any other 429 (an eviction a disruption budget forbids) is the caller's at once."""
    from . import controlplane

    cp = ControlPlane()
    reinitializing = '{"kind":"Status","message":"storage is (re)initializing","reason":"TooManyRequests","code":429}'
    answers: list[Any] = [ApiError("GET", "/api/v1/pods", 429, reinitializing, 0.0)] * 3 + [{"items": []}]
    calls: list[str] = []

    def once(method: str, path: str, body: Any, **_: Any) -> Any:
        calls.append(path)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(cp, "_request_once", once)
    assert cp.request("GET", "/api/v1/pods") == {"items": []}
    assert len(calls) == 4

    budget = ApiError("POST", "/eviction", 429, '{"message":"Cannot evict pod as it would violate the budget"}', 10.0)
    answers[:] = [budget, {}]
    with pytest.raises(ApiError) as raised:
        cp.request("POST", "/eviction", {})
    assert raised.value is budget

    monkeypatch.setattr(controlplane, "REINITIALIZING_WAIT_S", 0.3)
    answers[:] = [ApiError("GET", "/api/v1/pods", 429, reinitializing, 0.0)] * 100
    began = time.monotonic()
    with pytest.raises(ApiError):
        cp.request("GET", "/api/v1/pods")
    assert time.monotonic() - began < 2.0
