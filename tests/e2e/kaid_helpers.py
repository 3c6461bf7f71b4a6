"""Helpers for the end-to-end tests of ``kaid run``: the daemon as a child process, object builders,
a pod watch recorder and small waits. Everything listens on 127.0.0.1 and every wait is bounded."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .controlplane import REPO_ROOT, ApiError, ControlPlane

Obj = dict[str, Any]

KAID = Path(sys.executable).with_name("kaid")
MANIFESTS = REPO_ROOT / "manifests"
EXAMPLES = MANIFESTS / "examples"
SCHEDULER = "kai-scheduler"
KAI_NAMESPACE = "kai-scheduler"
POOL_LABEL = "kai-e2e.test/pool"
QUEUE_LABEL = "kai.scheduler/queue"
IMAGE = "registry.example/kai/fake:1"
PODGROUPS = "/apis/scheduling.run.ai/v2alpha2"
QUEUES = "/apis/scheduling.run.ai/v2/queues"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def base_config() -> Obj:
    """The scheduler config shipped in manifests/config.yaml (the ConfigMap's ``config.yaml``)."""
    cm = yaml.safe_load((MANIFESTS / "config.yaml").read_text())
    cfg: Obj = yaml.safe_load(cm["data"]["config.yaml"])
    return cfg


@dataclass(frozen=True)
class KaiInstall:
    apply_output: str
    queues_output: str
    kubeconfig: Path  # a token of ServiceAccount kai-scheduler/kai-scheduler


WEBHOOK_CONFIGURATIONS = ("mutatingwebhookconfiguration/kai-webhook", "validatingwebhookconfiguration/kai-webhook")
NOT_HERE = (*WEBHOOK_CONFIGURATIONS, "daemonset/kai-node-agent")  # what install_kai takes out again


def install_kai(cp: ControlPlane) -> KaiInstall:
    """``kubectl apply -k manifests/``, then the default queues once the Queue CRD is served.

    What cannot work here is deleted again: the webhook configurations (their Service has no pods here, no
    kube-scheduler runs them, and the API server would call out to its cluster IP for every kai object) and the
    GPU node agent's DaemonSet (kwok nodes have no NVML; its pods would only wait). Tests that want the webhook
    run ``kaid webhook`` here and register it by URL (``kai_webhook``)."""
    cp.kubectl("delete", "--ignore-not-found", *WEBHOOK_CONFIGURATIONS)  # a test's, registered by URL
    applied = cp.kubectl("apply", "-k", str(MANIFESTS))
    cp.kubectl("delete", "--ignore-not-found", "-n", KAI_NAMESPACE, *NOT_HERE)

    def served() -> bool:
        names = cp.kubectl("api-resources", "--api-group=scheduling.run.ai", "-o", "name", check=False).stdout.split()
        return {"queues.scheduling.run.ai", "podgroups.scheduling.run.ai"} <= set(names)

    wait_for(served, 60, "the Queue and PodGroup CRDs to be served")
    cp.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/queues.scheduling.run.ai",
               "crd/podgroups.scheduling.run.ai", "crd/topologies.kai.scheduler")  # fmt: skip
    default_queues = cp.kubectl("apply", "-k", str(MANIFESTS / "default-queues"))
    kubeconfig = cp.serviceaccount_kubeconfig(KAI_NAMESPACE, "kai-scheduler")
    return KaiInstall(applied.stdout, default_queues.stdout, kubeconfig)


def suffix() -> str:
    """A short random suffix for names that must not collide across tests."""
    return uuid.uuid4().hex[:5]


# --------------------------------------------------------------------------------------------------
# kaid as a child process


class Kaid:
    """One ``kaid run`` process with its own config file, log file and metrics port."""

    def __init__(
        self,
        kubeconfig: Path,
        workdir: Path,
        identity: str,
        lease: str,
        *,
        lease_duration: float = 15.0,
        renew_interval: float = 2.0,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.identity = identity
        self.kubeconfig = kubeconfig
        self.port = free_port()
        self.log_path = workdir / f"kaid-{identity}.log"
        self.config_path = workdir / f"kaid-{identity}.yaml"
        cfg = base_config()
        cfg["leaderElection"] = {
            "enabled": True,
            "namespace": KAI_NAMESPACE,
            "name": lease,
            "leaseDurationSeconds": lease_duration,
            "renewIntervalSeconds": renew_interval,
        }
        cfg.update(overrides or {})
        self.config_path.write_text(yaml.safe_dump(cfg))
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> Kaid:
        if self.running():
            raise RuntimeError(f"kaid {self.identity} is already running")
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts + 1} ---\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [
                    str(KAID), "run",
                    "--kubeconfig", str(self.kubeconfig),
                    "--config", str(self.config_path),
                    "--identity", self.identity,
                    "--metrics-port", str(self.port),
                    "--metrics-address", "127.0.0.1",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        self.starts += 1
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"kaid {self.identity} exited with {self.process.returncode}:\n{self.log()}")
            return self.get("/readyz")[0] == 200

        wait_for(ready, timeout, f"kaid {self.identity} /readyz")

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """GET on the metrics/health server; (0, error) when it does not answer."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read().decode()
        except OSError as exc:
            return 0, str(exc)
        finally:
            conn.close()

    def metrics(self) -> str:
        status, body = self.get("/metrics")
        assert status == 200, f"/metrics of kaid {self.identity}: {status} {body}"
        return body

    def metric(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """The value of one sample of ``/metrics`` (None when absent)."""
        return metric_value(self.metrics(), name, labels)

    def cycles(self) -> float:
        """Scheduling cycles run so far (from /metrics; 0 before the first)."""
        return self.metric("kai_e2e_scheduling_latency_milliseconds_count") or 0.0

    def wait_cycles(self, n: int, timeout: float = 30.0) -> None:
        """Let ``n`` more scheduling cycles pass."""
        start = self.cycles()
        wait_for(lambda: self.cycles() >= start + n, timeout, f"{n} more cycles of kaid {self.identity}")

    def kill(self) -> None:
        """SIGKILL: no cleanup at all (the Lease is not released)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def terminate(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait; SIGKILL after ``timeout`` (then AssertionError). Returns the exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"kaid {self.identity} ignored SIGTERM for {timeout:.0f}s") from None
        return int(self.process.returncode)

    def stop(self) -> None:
        """Teardown: SIGTERM, then SIGKILL the process group after a short grace."""
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)

    def log(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def full_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def metric_value(text: str, name: str, labels: Mapping[str, str] | None = None) -> float | None:
    want = dict(labels or {})
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, rest = head.partition("{")
        if metric != name:
            continue
        have: dict[str, str] = {}
        for part in rest.rstrip("}").split(","):
            if "=" in part:
                k, _, v = part.partition("=")
                have[k.strip()] = v.strip().strip('"')
        if all(have.get(k) == v for k, v in want.items()):
            return float(value)
    return None


class WebhookProcess:
    """``kaid webhook`` as a child process on 127.0.0.1, registered with the API server by URL: kai's webhook
    configurations from ``manifests/webhook.yaml``, each ``clientConfig`` pointing at this process (made when it
    starts, deleted by ``unregister``). It runs as ServiceAccount kai-webhook, so its RBAC is what manifests/
    gives it; it makes its CA and patches the configurations' caBundle itself."""

    def __init__(self, cp: ControlPlane, kubeconfig: Path, workdir: Path) -> None:
        self.cp = cp
        self.kubeconfig = kubeconfig
        self.port = free_port()
        self.log_path = workdir / "kaid-webhook.log"
        self.config_path = workdir / "kaid-webhook.yaml"
        cfg = base_config()
        cfg["webhook"] = {"port": self.port, "address": "127.0.0.1", "hosts": ["127.0.0.1"]}
        self.config_path.write_text(yaml.safe_dump(cfg))
        self.process: subprocess.Popen[bytes] | None = None

    def register(self) -> None:
        """kai's webhook configurations, by URL to this process (no caBundle: the process writes it), and the
        RuntimeClass nvidia it gives shared-GPU pods (the GPU operator makes it on a real cluster)."""
        self.unregister()
        self.cp.create("/apis/node.k8s.io/v1/runtimeclasses", {
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
            "handler": "nvidia"}, exist_ok=True)
        for doc in yaml.safe_load_all((MANIFESTS / "webhook.yaml").read_text()):
            if not doc or doc["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                continue
            for hook in doc["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{self.port}{path}"}
            plural = doc["kind"].lower() + "s"
            self.cp.create(f"/apis/admissionregistration.k8s.io/v1/{plural}", doc)

    def unregister(self) -> None:
        self.cp.kubectl("delete", "--ignore-not-found", *WEBHOOK_CONFIGURATIONS)

    def start(self) -> WebhookProcess:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [str(KAID), "webhook", "--kubeconfig", str(self.kubeconfig), "--config", str(self.config_path)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        return self

    def ready(self) -> bool:
        """/readyz: serving, with the caBundle of both configurations in place."""
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # (the API server checks it for real)
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=5)
        try:
            conn.request("GET", "/readyz")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def wait_ready(self, timeout: float = 30.0) -> None:
        def up() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"kaid webhook exited with {self.process.returncode}:\n{self.log()}")
            return self.ready()

        wait_for(up, timeout, "kaid webhook /readyz")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)

    def log(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


# --------------------------------------------------------------------------------------------------
# Object builders


def queue(
    name: str,
    gpu_quota: float,
    gpu_limit: float = -1,
    *,
    weight: float = 1,
    parent: str | None = None,
    priority: int = 100,
) -> Obj:
    """A Queue with every value explicit (cpu and memory: no quota, no limit)."""
    spec: Obj = {
        "priority": priority,
        "resources": {
            "gpu": {"quota": gpu_quota, "limit": gpu_limit, "overQuotaWeight": weight},
            "cpu": {"quota": 0, "limit": -1, "overQuotaWeight": 1},
            "memory": {"quota": 0, "limit": -1, "overQuotaWeight": 1},
        },
    }
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def pod_spec(pool: str, gpus: float = 1, *, priority_class: str | None = None, restart: str = "Always") -> Obj:
    container: Obj = {"name": "main", "image": IMAGE}
    if gpus >= 1:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(int(gpus))}}
    spec: Obj = {
        "schedulerName": SCHEDULER,
        "nodeSelector": {POOL_LABEL: pool},
        "terminationGracePeriodSeconds": 0,
        "restartPolicy": restart,
        "containers": [container],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


def pod(
    name: str,
    pool: str,
    queue_name: str,
    gpus: float = 1,
    *,
    priority_class: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue_name}, "annotations": dict(annotations or {})},
        "spec": pod_spec(pool, gpus, priority_class=priority_class),
    }


def gang_job(name: str, pool: str, queue_name: str, size: int, gpus: int = 1, *, min_member: int | None = None) -> Obj:
    """A batch Job of ``size`` pods that must start together (``kai.scheduler/batch-min-member``)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {QUEUE_LABEL: queue_name},
            "annotations": {"kai.scheduler/batch-min-member": str(min_member or size)},
        },
        "spec": {
            "parallelism": size,
            "completions": size,
            "backoffLimit": 0,
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(pool, gpus, restart="Never")},
        },
    }


def deployment(name: str, pool: str, queue_name: str, annotations: Mapping[str, str], replicas: int = 1) -> Obj:
    """A Deployment whose pods ask for a shared GPU through annotations (no nvidia.com/gpu limit)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue_name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, QUEUE_LABEL: queue_name}, "annotations": dict(annotations)},
                "spec": pod_spec(pool, 0),
            },
        },
    }


def create_object(cp: ControlPlane, namespace: str, obj: Obj) -> Any:
    """Create a Pod, Job or Deployment in ``namespace``."""
    group = {"v1": "/api/v1", "batch/v1": "/apis/batch/v1", "apps/v1": "/apis/apps/v1"}[obj["apiVersion"]]
    plural = {"Pod": "pods", "Job": "jobs", "Deployment": "deployments"}[obj["kind"]]
    return cp.create(f"{group}/namespaces/{namespace}/{plural}", obj)


# --------------------------------------------------------------------------------------------------
# Reading the cluster


def pods_of(cp: ControlPlane, namespace: str, selector: str | None = None) -> list[Obj]:
    path = f"/api/v1/namespaces/{namespace}/pods"
    if selector:
        path += "?labelSelector=" + urllib.parse.quote(selector)
    items: list[Obj] = cp.request("GET", path)["items"]
    return items


def bound(pods: Sequence[Obj]) -> list[Obj]:
    return [p for p in pods if p["spec"].get("nodeName")]


def get_or_none(cp: ControlPlane, path: str) -> Obj | None:
    try:
        obj: Obj = cp.request("GET", path)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return obj


def podgroup(cp: ControlPlane, namespace: str, name: str) -> Obj | None:
    return get_or_none(cp, f"{PODGROUPS}/namespaces/{namespace}/podgroups/{name}")


def last_condition(pg: Obj | None) -> Obj:
    conds = ((pg or {}).get("status") or {}).get("schedulingConditions") or [{}]
    last: Obj = conds[-1]
    return last


def reason_codes(pg: Obj | None) -> list[str]:
    return [str(r.get("reason")) for r in last_condition(pg).get("reasons") or []]


def events(cp: ControlPlane, namespace: str, reason: str | None = None) -> list[Obj]:
    path = f"/api/v1/namespaces/{namespace}/events"
    if reason:
        path += "?fieldSelector=" + urllib.parse.quote(f"reason={reason}")
    items: list[Obj] = cp.request("GET", path)["items"]
    return items


def pod_condition(pod_obj: Obj, kind: str) -> Obj | None:
    for cond in (pod_obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            found: Obj = cond
            return found
    return None


def lease_holder(cp: ControlPlane, name: str) -> str | None:
    lease = get_or_none(cp, f"/apis/coordination.k8s.io/v1/namespaces/{KAI_NAMESPACE}/leases/{name}")
    return None if lease is None else (lease.get("spec") or {}).get("holderIdentity")


# --------------------------------------------------------------------------------------------------
# A pod watch that records every version of every pod of a namespace


@dataclass
class PodVersion:
    at: float
    type: str  # ADDED, MODIFIED, DELETED
    uid: str
    name: str
    node: str
    deleting: bool
    conditions: list[Obj]
    labels: dict[str, str]


@dataclass
class PodEventStream:
    """Lists, then watches, the pods of one namespace as admin, handing every object to ``on_event(type, obj)``
    (the listing's as ADDED; bookmarks only move the resource version). The one watch loop of the e2e tests
    (``PodWatch``, ``faults.BindRecorder``).

    ``relist`` False: ``start`` lists before it returns; a watch the server refuses or ends with an ERROR event
    stops the stream, a dropped connection resumes from the last version; each goes to ``errors``.
    ``relist`` True (the API server may restart under it): the first listing is the thread's, and a 410, an
    ERROR event or a dropped connection lists again (``relists`` counts the listings)."""

    cp: ControlPlane
    namespace: str
    on_event: Callable[[str, Obj], None]
    relist: bool = False
    watch_timeout_s: int = 300
    errors: list[str] = field(default_factory=list)
    relists: int = 0
    _rv: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)
    _conn: http.client.HTTPSConnection | None = None
    _thread: threading.Thread | None = None

    def _context(self) -> ssl.SSLContext:
        user = yaml.safe_load(self.cp.kubeconfig.read_text())["users"][0]["user"]
        ctx = ssl.create_default_context(cafile=str(self.cp.ca_file))
        ctx.load_cert_chain(user["client-certificate"], user["client-key"])
        return ctx

    def _list(self) -> None:
        listing = self.cp.request("GET", f"/api/v1/namespaces/{self.namespace}/pods")
        for item in listing["items"]:
            self.on_event("ADDED", item)
        self._rv = listing["metadata"]["resourceVersion"]
        self.relists += 1

    def start(self, name: str = "pod-watch") -> PodEventStream:
        if not self.relist:
            self._list()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        return self

    def _failed(self, why: str) -> bool:
        """A watch went wrong: whether to go on (listing again where ``relist``)."""
        if self.relist:
            self._rv = ""
            return True
        self.errors.append(why)
        return False

    def _watch(self, ctx: ssl.SSLContext, port: int | None) -> bool:
        """One watch request, until it ends; whether to go on."""
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=2 * self.watch_timeout_s)
        self._conn = conn
        try:
            conn.request("GET", f"/api/v1/namespaces/{self.namespace}/pods?watch=1&allowWatchBookmarks=true"
                                f"&resourceVersion={self._rv}&timeoutSeconds={self.watch_timeout_s}")
            response = conn.getresponse()
            if response.status != 200:
                return self._failed(f"watch: HTTP {response.status}: {response.read()[:500]!r}")
            while not self._stop.is_set():
                line = response.readline()
                if not line:
                    return True
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    return self._failed(f"watch error: {obj}")
                self._rv = (obj.get("metadata") or {}).get("resourceVersion") or self._rv
                if event.get("type") != "BOOKMARK":
                    self.on_event(str(event.get("type")), obj)
            return False
        finally:
            conn.close()

    def _run(self) -> None:
        ctx = self._context()
        port = urllib.parse.urlparse(self.cp.server).port
        while not self._stop.is_set():
            try:
                if not self._rv:
                    self._list()
                if not self._watch(ctx, port):
                    return
            except (OSError, ValueError, http.client.HTTPException, ApiError) as exc:
                if self._stop.is_set():
                    return
                if self.relist:
                    self._rv = ""
                    self._stop.wait(0.5)
                else:  # a dropped connection: resume from the last version
                    self.errors.append(f"watch: {exc!r}")
                    self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=10)


@dataclass
class PodWatch:
    """Records every version of every pod of one namespace (as admin) in ``versions``."""

    cp: ControlPlane
    namespace: str
    versions: list[PodVersion] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stream: PodEventStream | None = None

    @property
    def errors(self) -> list[str]:
        return self._stream.errors if self._stream is not None else []

    def start(self) -> PodWatch:
        self._stream = PodEventStream(self.cp, self.namespace, self._record).start()
        return self

    def _record(self, kind: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        version = PodVersion(
            at=time.monotonic(),
            type=kind,
            uid=str(meta.get("uid")),
            name=str(meta.get("name")),
            node=str((obj.get("spec") or {}).get("nodeName") or ""),
            deleting=bool(meta.get("deletionTimestamp")),
            conditions=list((obj.get("status") or {}).get("conditions") or []),
            labels=dict(meta.get("labels") or {}),
        )
        with self._lock:
            self.versions.append(version)

    def snapshot(self) -> list[PodVersion]:
        with self._lock:
            return list(self.versions)

    def stop(self) -> None:
        if self._stream is not None:
            self._stream.stop()

    def wait(self, predicate: Callable[[list[PodVersion]], bool], timeout: float, what: str) -> list[PodVersion]:
        """Wait until the recorded versions satisfy ``predicate`` (the watch may lag a GET by a moment)."""

        def ok() -> list[PodVersion] | None:
            assert not self.errors, self.errors
            versions = self.snapshot()
            return versions if predicate(versions) else None

        result: list[PodVersion] = wait_for(ok, timeout, what)
        return result

    def bound_uids(self, versions: list[PodVersion] | None = None) -> dict[str, str]:
        """uid -> node of every pod seen bound."""
        return {v.uid: v.node for v in (self.snapshot() if versions is None else versions) if v.node}


@contextlib.contextmanager
def watching(cp: ControlPlane, namespace: str) -> Iterator[PodWatch]:
    watch = PodWatch(cp, namespace).start()
    try:
        yield watch
    finally:
        watch.stop()


# --------------------------------------------------------------------------------------------------
# GPU sharing: playing the GPU operator for reservation pods on kwok nodes

RESERVATION_NAMESPACE = "kai-resource-reservation"
RESERVATION_SELECTOR = "app=kai-resource-reservation"
RESERVED_GPU_ANNOTATION = "run.ai/reserve_for_gpu_index"


def reservation_pods(cp: ControlPlane, node: str | None = None) -> list[Obj]:
    """kai's reservation pods (of ``node``, or all)."""
    pods = pods_of(cp, RESERVATION_NAMESPACE, RESERVATION_SELECTOR)
    return [p for p in pods if node is None or p["spec"].get("nodeName") == node]


def configmap_data(cp: ControlPlane, namespace: str, name: str) -> dict[str, str] | None:
    cm = get_or_none(cp, f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    return None if cm is None else dict(cm.get("data") or {})


class FakeGpuOperator:
    """Plays NVIDIA's GPU stack for the reservation pods on kwok nodes, as the fake GPU operator does in
    KAI-Scheduler's scale tests: each reservation pod on one of ``nodes`` gets a made-up device UUID on its
    annotation (on a GPU node, the pod's own process, ``kaid gpu-reservation``, writes the real one). It looks
    ten times a second; ``serve`` adds nodes later (``every_node``: all nodes from the start). ``uuids``:
    reservation pod name -> the UUID it was given."""

    def __init__(self, cp: ControlPlane, nodes: Sequence[str] = (), *, every_node: bool = False) -> None:
        self.cp = cp
        self.nodes = set(nodes)
        self.every_node = every_node
        self.uuids: dict[str, str] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-gpu-operator", daemon=True)

    def __enter__(self) -> FakeGpuOperator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def serve(self, *nodes: str) -> None:
        self.nodes.update(nodes)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                for p in reservation_pods(self.cp):
                    meta = p["metadata"]
                    node = p["spec"].get("nodeName") or ""
                    if not (self.every_node or node in self.nodes) or \
                            (meta.get("annotations") or {}).get(RESERVED_GPU_ANNOTATION):
                        continue
                    gpu = f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, node + '/' + meta['uid'])}"
                    self.cp.request(
                        "PATCH", f"/api/v1/namespaces/{RESERVATION_NAMESPACE}/pods/{meta['name']}",
                        {"metadata": {"annotations": {RESERVED_GPU_ANNOTATION: gpu}}},
                        content_type="application/merge-patch+json",
                    )  # fmt: skip
                    self.uuids[meta["name"]] = gpu
            except ApiError as exc:
                if exc.status != 404:  # a pod deleted meanwhile is fine
                    self.errors.append(str(exc))
            except OSError as exc:
                self.errors.append(repr(exc))
