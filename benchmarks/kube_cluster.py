"""bench_kube's cluster side: the workload's objects, a control plane made ready for it, creating and deleting
at speed, the watch that times binds, the control plane's CPU and quiet, kaid as a child process and the
metrics of both schedulers."""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import random
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import urllib3
import yaml
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.common import proc_memory_mb
from kaid.api import constants as c
from kaid.cycle import Bind
from kaid.kube.actuator import Actuator, bind_workers
from kaid.kube.cache import API_RESOURCES, WatchCache
from kaid.kube.client import ApiError, KubeClient
from kaid.kube.startup import pause_gc, settle_gc
from tests.e2e.controlplane import ControlPlane, ControlPlaneError

Obj = dict[str, Any]

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
SCHEDULERS: Final[tuple[str, str]] = ("kaid", "kube-scheduler")
KAID_BASE: Final = "kaid-base"  # kaid from another tree (--kaid-base DIR), interleaved with this tree's: an A/B
SCHEDULER_NAMES: Final[dict[str, str]] = {"kaid": c.DEFAULT_SCHEDULER_NAME, "kube-scheduler": "default-scheduler",
                                          KAID_BASE: c.DEFAULT_SCHEDULER_NAME}
RAW: Final = "raw"  # the bare bind loop: no scheduler, the ceiling
RAW_SCHEDULER_NAME: Final = "bench-raw-binds"  # a schedulerName nobody serves: the raw loop's pods wait for it
RAW_WATCHES: Final = "raw+watches"  # the raw loop with kaid's informers open over its client (--raw-watches)
GPUS_PER_NODE: Final = 8
NODE_PREFIX: Final = "bench-gpu"
PARENT_QUEUE: Final = "bench-kube"
JOB_LABEL: Final = "bench.kai.scheduler/job"
POD_IMAGE: Final = "registry.example/kai/fake:1"
PODGROUP_PATH: Final = f"/apis/{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}/namespaces/{{ns}}/podgroups"
CREATE_WORKERS: Final = 16
KAID_STOP_GRACE_S: Final = 120.0
NAMESPACE_GONE_TIMEOUT_S: Final = 600.0
PROGRESS_EVERY_S: Final = 15.0
START_SETTLE_S: Final = 3.0  # --starts: quiet time before each start
QUIET_CPU: Final = 0.3  # a control plane at rest: etcd, API server, controller manager and kwok under this
QUIET_WINDOW_S: Final = 1.0  # ... share of one CPU together, over this long
QUIET_TIMEOUT_S: Final = 30.0  # ... or this long after the pods were made, whichever comes first
# kwok's fake kubelets post their nodes' status every 15-25 s (.ci/controlplane/kwok/stages.yaml). On a loaded machine
# (kwok starting thousands of bound pods on 2 shared cores) some fall behind the controller manager's
# node-monitor-grace-period (50 s), which then marks their nodes Unknown and taints them unreachable until kwok catches
# up: schedulers skip those nodes (kaid also refuses binds to them), the raw loop does not look. Seen at 500 nodes:
# up to 106 nodes at once for 150 s, 136 of kaid's binds refused, the last pods bound 50 s late. A benchmark of
# schedulers must not measure that: its controller manager calls a node lost only after 10 minutes, and each run
# counts the nodes that still went NotReady (``NodeWatcher``).
CONTROLLER_MANAGER_ARGS: Final = ("--node-monitor-grace-period=10m",)
CYCLE_LINE: Final = re.compile(r"cycle (\d+): (\d+) bound, (\d+) evicted, (\d+) pipelined, (\d+) pending \((\d+) ms\)")


# ============================================================================================ workload
@dataclass(frozen=True)
class Job:
    name: str
    queue: str
    pods: int
    gang: bool


@dataclass(frozen=True)
class Workload:
    nodes: int
    jobs: tuple[Job, ...]
    queues: tuple[str, ...]

    @property
    def pods(self) -> int:
        return sum(j.pods for j in self.jobs)

    @property
    def gangs(self) -> tuple[Job, ...]:
        return tuple(j for j in self.jobs if j.gang)

    def summary(self) -> Obj:
        sizes = [j.pods for j in self.gangs]
        return {"nodes": self.nodes, "gpus": self.nodes * GPUS_PER_NODE, "pods": self.pods,
                "single_pods": self.pods - sum(sizes), "gangs": len(sizes), "gang_pods": sum(sizes),
                "gang_size_min": min(sizes, default=0), "gang_size_max": max(sizes, default=0),
                "queues": len(self.queues), "gpus_requested": self.pods}


def build_workload(nodes: int, pods: int, gangs: int, gang_min: int, gang_max: int, queues: int,
                   seed: int) -> Workload:
    """``pods`` one-GPU pods: ``gangs`` gangs of ``gang_min``..``gang_max`` pods and single pods for the rest."""
    if nodes < 1 or pods < 1 or gangs < 0 or queues < 1:
        raise ValueError("--nodes, --pods and --queues must be at least 1, --gangs at least 0")
    if not 1 <= gang_min <= gang_max:
        raise ValueError("need 1 <= --gang-min <= --gang-max")
    if pods > nodes * GPUS_PER_NODE:
        raise ValueError(f"{pods} one-GPU pods cannot all be bound on {nodes} nodes of {GPUS_PER_NODE} GPUs: "
                         f"raise --nodes to at least {-(-pods // GPUS_PER_NODE)} or lower --pods")
    rng = random.Random(seed)
    sizes = [rng.randint(gang_min, gang_max) for _ in range(gangs)]
    if sum(sizes) > pods:
        raise ValueError(f"the {gangs} gangs drew {sum(sizes)} pods, more than --pods {pods}: lower --gangs or "
                         "--gang-max, or raise --pods")
    kinds = [True] * gangs + [False] * (pods - sum(sizes))
    rng.shuffle(kinds)
    queue_names = tuple(f"{PARENT_QUEUE}-{i}" for i in range(queues))
    jobs: list[Job] = []
    gang_sizes = iter(sizes)
    for i, gang in enumerate(kinds):
        name = f"g{i:05d}" if gang else f"s{i:05d}"
        jobs.append(Job(name, queue_names[i % queues], next(gang_sizes) if gang else 1, gang))
    return Workload(nodes, tuple(jobs), queue_names)


def queue_objects(wl: Workload) -> list[Obj]:
    """One parent queue and ``len(wl.queues)`` leaves whose GPU quotas add up to the cluster's GPUs."""
    total = wl.nodes * GPUS_PER_NODE
    free = {"quota": 0, "limit": -1, "overQuotaWeight": 1}

    def queue(name: str, gpus: int, parent: str | None) -> Obj:
        spec: Obj = {"resources": {"gpu": {"quota": gpus, "limit": -1, "overQuotaWeight": 1},
                                   "cpu": dict(free), "memory": dict(free)}}
        if parent:
            spec["parentQueue"] = parent
        return {"apiVersion": f"{c.SCHEDULING_GROUP}/{c.QUEUE_VERSION}", "kind": "Queue",
                "metadata": {"name": name}, "spec": spec}

    n = len(wl.queues)
    leaves = [queue(q, total // n + (1 if i < total % n else 0), PARENT_QUEUE) for i, q in enumerate(wl.queues)]
    return [queue(PARENT_QUEUE, total, None), *leaves]


def pod_name(job: Job, index: int) -> str:
    return f"{job.name}-{index:03d}" if job.gang else job.name


def pod_objects(wl: Workload, scheduler_name: str, namespace: str, podgroup_per_single: bool) -> list[Obj]:
    """The same pods for every scheduler but for ``schedulerName`` (and the PodGroup of single pods)."""
    pods: list[Obj] = []
    for job in wl.jobs:
        for i in range(job.pods):
            annotations = {}
            if job.gang or podgroup_per_single:
                annotations[c.POD_GROUP_ANNOTATION] = job.name
            pods.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod_name(job, i), "namespace": namespace,
                             "labels": {c.QUEUE_LABEL: job.queue, JOB_LABEL: job.name}, "annotations": annotations},
                "spec": {
                    "schedulerName": scheduler_name,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "main", "image": POD_IMAGE, "resources": {
                        "requests": {"cpu": "100m", "memory": "256Mi", c.GPU_RESOURCE: "1"},
                        "limits": {c.GPU_RESOURCE: "1"}}}],
                },
            })
    return pods


def podgroup_objects(wl: Workload, namespace: str, podgroup_per_single: bool) -> list[Obj]:
    return [{"apiVersion": f"{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}", "kind": "PodGroup",
             "metadata": {"name": job.name, "namespace": namespace, "labels": {c.QUEUE_LABEL: job.queue}},
             "spec": {"minMember": job.pods, "queue": job.queue}}
            for job in wl.jobs if job.gang or podgroup_per_single]


# ============================================================================================ cluster
def prepare_cluster(cp: ControlPlane, wl: Workload, progress: Callable[[str], None]) -> None:
    """kai's CRDs, RBAC and default queues, the benchmark's queues and ``wl.nodes`` Ready GPU nodes."""
    began = time.monotonic()
    cp.kubectl("apply", "-k", str(REPO_ROOT / "manifests"))
    # kai's webhook runs nowhere here (its configurations would make the API server call its Service's address)
    # and kwok nodes have no NVML for the GPU node agent
    cp.kubectl("delete", "--ignore-not-found", "-n", "kai-scheduler", "mutatingwebhookconfiguration/kai-webhook",
               "validatingwebhookconfiguration/kai-webhook", "daemonset/kai-node-agent")
    cp.kubectl("wait", "--for=condition=established", "--timeout=60s",
               f"crd/queues.{c.SCHEDULING_GROUP}", f"crd/podgroups.{c.SCHEDULING_GROUP}")
    cp.kubectl("apply", "-k", str(REPO_ROOT / "manifests" / "default-queues"))
    # kaid runs here as a process; the Deployments' pods would only be scheduled by kube-scheduler.
    cp.kubectl("-n", "kai-scheduler", "scale", "deployment/kai-scheduler", "deployment/kai-webhook", "--replicas=0")
    cp.apply(queue_objects(wl))
    have = len([n for n in cp.request("GET", "/api/v1/nodes")["items"]
                if n["metadata"]["name"].startswith(f"{NODE_PREFIX}-")])
    if have < wl.nodes:
        cp.add_gpu_nodes(wl.nodes - have, gpus=GPUS_PER_NODE, name_prefix=NODE_PREFIX)
    cp.wait_nodes_ready(timeout=max(120.0, wl.nodes * 0.5))
    progress(f"cluster ready: {wl.nodes} nodes x {GPUS_PER_NODE} GPUs, {len(wl.queues)} queues "
             f"({time.monotonic() - began:.0f} s)")


def admin_client(cp: ControlPlane, qps: float = 1000.0, burst: int = 1000) -> KubeClient:
    return KubeClient.from_config(str(cp.kubeconfig), qps=qps, burst=burst)


def create_all(client: KubeClient, objects: Sequence[Obj], collection: Callable[[Obj], str]) -> None:
    """POST every object, ``CREATE_WORKERS`` at a time, retrying transient failures."""
    def one(obj: Obj) -> None:
        for attempt in range(6):
            try:
                client.create(collection(obj), obj)
                return
            except ApiError as err:
                if err.status == 409:
                    return
                if err.status not in (429, 500, 503, 504) or attempt == 5:
                    raise
            except (OSError, ValueError):
                if attempt == 5:
                    raise
            time.sleep(0.2 * (attempt + 1))

    with ThreadPoolExecutor(CREATE_WORKERS, thread_name_prefix="create") as pool:
        for _ in pool.map(one, objects):
            pass


def delete_namespace(cp: ControlPlane, client: KubeClient, namespace: str, timeout: float) -> float:
    """Delete the pods at once (grace 0), then the namespace; wait until it is gone. Returns seconds."""
    began = time.monotonic()
    # a busy API server may drop the connection of the big delete; the namespace's deletion finishes the work
    with contextlib.suppress(ApiError, urllib3.exceptions.HTTPError, OSError):
        client.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", params={"gracePeriodSeconds": "0"},
                       timeout=300.0)
    with contextlib.suppress(ApiError):
        client.request("DELETE", f"/api/v1/namespaces/{namespace}")
    deadline = began + timeout
    while True:
        try:
            client.get(f"/api/v1/namespaces/{namespace}")
        except ApiError as err:
            if err.status == 404:
                return time.monotonic() - began
            raise
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"namespace {namespace} still there {timeout:.0f}s after its deletion")
        time.sleep(1.0)


# ============================================================================================ measuring
class _ListWatch:
    """A list, then one watch from its resourceVersion on ``path`` in a thread, each object handed to ``_see``; a
    dropped stream resumes from the last version seen, an expired one (410) lists again."""

    def __init__(self, client: KubeClient, path: str, name: str) -> None:
        self.client = client
        self.path = path
        self.stop = threading.Event()
        self.errors = 0
        self.rv = ""
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _see(self, obj: Obj) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._list()
        self.thread.start()

    def _list(self) -> None:
        data = self.client.get(self.path)
        for obj in data.get("items") or []:
            self._see(obj)
        self.rv = str((data.get("metadata") or {}).get("resourceVersion") or "")

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                for event in self.client.watch(self.path, self.rv, timeout_seconds=10):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise ApiError(int(obj.get("code") or 500), str(obj.get("reason") or "watch error"), obj)
                    self.rv = str((obj.get("metadata") or {}).get("resourceVersion") or self.rv)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._see(obj)
                    if self.stop.is_set():
                        return
            except ApiError as err:
                self.errors += 1
                if err.status == 410:
                    with contextlib.suppress(Exception):
                        self._list()
                self.stop.wait(0.5)
            except Exception:  # a dropped stream: resume from the last version seen
                self.errors += 1
                self.stop.wait(0.5)

    def _close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():  # (not when its first list failed)
            self.thread.join(timeout=20)


class BindWatcher(_ListWatch):
    """One watch on a namespace's pods: when each pod got its ``spec.nodeName`` (as seen here)."""

    def __init__(self, client: KubeClient, namespace: str, total: int) -> None:
        super().__init__(client, f"/api/v1/namespaces/{namespace}/pods", "bench-watch")
        self.total = total
        self.bound: dict[str, tuple[str, float]] = {}  # pod -> (node, monotonic time seen)
        self.labels: dict[str, str] = {}  # pod -> job
        self.all_bound = threading.Event()

    def _see(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        self.labels.setdefault(name, str((meta.get("labels") or {}).get(JOB_LABEL, "")))
        node = (obj.get("spec") or {}).get("nodeName")
        if node and name not in self.bound:
            self.bound[name] = (str(node), time.monotonic())
            if len(self.bound) >= self.total:
                self.all_bound.set()

    def close(self) -> None:
        self._close()


class NodeWatcher(_ListWatch):
    """One watch on the nodes during a run: the nodes seen not Ready, or tainted not-ready or unreachable, at any
    moment of it (a fake kubelet starved of CPU: ``CONTROLLER_MANAGER_ARGS``)."""

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client, "/api/v1/nodes", "bench-node-watch")
        self.not_ready: set[str] = set()

    def _see(self, obj: Obj) -> None:
        status = obj.get("status") or {}
        ready = any(cond.get("type") == "Ready" and cond.get("status") == "True"
                    for cond in status.get("conditions") or [])
        tainted = any(t.get("key") in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
                      for t in (obj.get("spec") or {}).get("taints") or [])
        if not ready or tainted:
            self.not_ready.add(str((obj.get("metadata") or {}).get("name")))

    def close(self) -> int:
        """Stop; the count of nodes seen not Ready."""
        self._close()
        return len(self.not_ready)


def proc_cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a process (all its threads), from /proc; None where unknown."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


# what the API server did in a run, from its /metrics (counters, whoever asked): requests by verb and resource, watch
# events sent and their bytes by resource, the bytes of the answers by verb and resource (the lists)
APISERVER_COUNTERS: Final = {
    "apiserver_request_total": "requests",
    "apiserver_watch_events_total": "watch events",
    "apiserver_watch_events_sizes_sum": "watch bytes",
    "apiserver_response_sizes_sum": "response bytes",
}
IDLE_WINDOW_S: Final = 3.0  # the CPU of the processes at rest is measured over this long before each run starts


def scrape_apiserver(cp: ControlPlane) -> str:
    """kube-apiserver's /metrics, as the admin."""
    ctx = ssl.create_default_context(cafile=str(cp.ca_file))
    return _scrape_as_admin(cp, "kube-apiserver", cp.ports["apiserver"], ctx, timeout=30)


def _scrape_as_admin(cp: ControlPlane, component: str, port: int, ctx: ssl.SSLContext, timeout: float) -> str:
    """``component``'s /metrics on its loopback ``port``, with the client certificate of the admin's kubeconfig."""
    user = yaml.safe_load(cp.kubeconfig.read_text())["users"][0]["user"]
    ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        body = resp.read().decode("utf-8", errors="replace")
    finally:
        conn.close()
    if resp.status != 200:
        raise ControlPlaneError(f"{component} /metrics: HTTP {resp.status}")
    return body


def apiserver_counters(text: str) -> dict[str, float]:
    """The counters of ``APISERVER_COUNTERS`` summed by what they are about: ``"requests POST pods/binding"``,
    ``"watch events pods"``, ``"watch bytes nodes"``, ``"response bytes LIST pods"`` (codes, scopes, groups and
    versions added up)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            what = APISERVER_COUNTERS.get(s.name)
            if what is None:
                continue
            labels = s.labels
            resource = labels.get("resource") or labels.get("kind") or "?"
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            key = f"{what} {labels['verb']} {resource}" if "verb" in labels else f"{what} {resource}"
            out[key] = out.get(key, 0.0) + s.value
    return out


def counters_delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """What changed between two readings of ``apiserver_counters`` (only what did), sorted by name."""
    return {k: round(v - before.get(k, 0.0)) for k, v in sorted(after.items()) if v - before.get(k, 0.0) >= 0.5}


CONTROL_PLANE: Final = ("kube-apiserver", "etcd", "kube-controller-manager", "kwok")


def cpu_readings(cp: ControlPlane, scheduler_pid: int | None) -> dict[str, float | None]:
    """CPU seconds so far of each control-plane process, of the scheduler (or the raw loop) and of this benchmark
    (its watches): a run's readings at its start and after its last bind tell where the machine's CPUs went."""
    out = {name: proc_cpu_seconds(component_pid(cp, name)) for name in CONTROL_PLANE}
    out["scheduler"] = proc_cpu_seconds(scheduler_pid) if scheduler_pid is not None else 0.0
    out["benchmark"] = time.process_time()
    return out


def cpu_spent(after: dict[str, float | None], before: dict[str, float | None]) -> dict[str, float | None]:
    """``cpu_readings`` after minus before, process by process, and their ``total``."""
    spent = {name: delta(after.get(name), before.get(name)) for name in after}
    spent["total"] = round(sum(v for v in spent.values() if v is not None), 2)
    return spent


def component_pid(cp: ControlPlane, name: str) -> int | None:
    comp = cp.components.get(name)
    return comp.process.pid if comp is not None else None


def wait_quiet(cp: ControlPlane) -> float:
    """Until the control plane is at rest after the pods were made (its watchers have seen them all), so the
    scheduler starts on a quiet machine as it would after a restart or a failover: seconds waited."""
    names = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")
    pids = [pid for pid in (component_pid(cp, n) for n in names) if pid is not None]

    def used() -> float:
        return sum(proc_cpu_seconds(pid) or 0.0 for pid in pids)

    began = time.monotonic()
    while time.monotonic() - began < QUIET_TIMEOUT_S:
        before = used()
        time.sleep(QUIET_WINDOW_S)
        if used() - before < QUIET_CPU * QUIET_WINDOW_S:
            break
    return round(time.monotonic() - began, 1)


def delta(after: float | None, before: float | None) -> float | None:
    return round(after - before, 2) if after is not None and before is not None else None


def parse_kaid_metrics(text: str) -> Obj:
    """Cycle and phase histograms (sum, count, mean in ms) and bind counters of kaid's /metrics."""
    out: Obj = {"cycle_ms_sum": 0.0, "cycles": 0, "phases": {}, "binds_ok": 0, "binds_failed": 0}
    phases: dict[str, Obj] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "kai_e2e_scheduling_latency_milliseconds_sum":
                out["cycle_ms_sum"] = s.value
            elif s.name == "kai_e2e_scheduling_latency_milliseconds_count":
                out["cycles"] = int(s.value)
            elif s.name == "kai_cycle_phase_latency_milliseconds_sum":
                phases.setdefault(s.labels["phase"], {})["sum_ms"] = s.value
            elif s.name == "kai_cycle_phase_latency_milliseconds_count":
                phases.setdefault(s.labels["phase"], {})["count"] = int(s.value)
            elif s.name == "kai_binds_total":
                out["binds_ok" if s.labels.get("result") == "ok" else "binds_failed"] += int(s.value)
    out["cycle_ms_mean"] = out["cycle_ms_sum"] / out["cycles"] if out["cycles"] else None
    for p in phases.values():
        p["mean_ms"] = p.get("sum_ms", 0.0) / p["count"] if p.get("count") else None
    out["phases"] = phases
    return out


def parse_kube_scheduler_metrics(text: str) -> Obj:
    out: Obj = {"attempts": 0, "attempt_s_sum": 0.0, "scheduled": 0}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "scheduler_schedule_attempts_total":
                out["attempts"] += int(s.value)
                if s.labels.get("result") == "scheduled":
                    out["scheduled"] += int(s.value)
            elif s.name == "scheduler_scheduling_attempt_duration_seconds_sum":
                out["attempt_s_sum"] += s.value
    out["attempt_ms_mean"] = out["attempt_s_sum"] * 1000 / out["attempts"] if out["attempts"] else None
    return out


def scrape_kube_scheduler(cp: ControlPlane) -> str:
    """kube-scheduler's /metrics on its loopback port, as the admin (the client certificate of its kubeconfig)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate, on 127.0.0.1
    return _scrape_as_admin(cp, "kube-scheduler", cp.ports["scheduler"], ctx, timeout=10)


def _load_prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _load_prctl()  # resolved here: no symbol lookup in the forked child
_PR_SET_PDEATHSIG: Final = 1


def _die_with_parent() -> None:
    """preexec_fn: kaid gets SIGKILL if this process dies before it could stop it."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ============================================================================================ schedulers
@dataclass
class Options:
    qps: float = 100.0
    burst: int = 200
    cycle_period: float = 1.0
    timeout: float = 900.0
    podgroups: str = "kaid"  # "kaid": kaid's podgrouper makes the single pods' PodGroups; "precreated"
    kaid_log_level: str = "info"
    kaid_profile: str | None = None
    profile_top: int = 25
    keep_logs: str | None = None
    progress: bool = True
    kaid_base: Path | None = None  # --kaid-base: the tree whose kaid runs as KAID_BASE
    start_binds: int = 1  # --starts: each start lasts until this many binds are seen
    workdir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))


class KaidProcess:
    """``kaid run`` as a child process in its own process group (optionally under cProfile)."""

    def __init__(self, cp: ControlPlane, opts: Options, workdir: Path, run_id: str, startup_off: str = "",
                 tree: Path = REPO_ROOT) -> None:
        """``tree``: the source tree whose kaid runs (its ``kaid`` package first on the path)."""
        self.port = _free_port()
        self.log = workdir / f"kaid-{run_id}.log"
        config = workdir / f"kaid-{run_id}.yaml"
        config.write_text(yaml.safe_dump({
            "clientQPS": opts.qps, "clientBurst": opts.burst, "cyclePeriodSeconds": opts.cycle_period,
            "metricsPort": self.port, "leaderElection": {"enabled": False}}))
        kubeconfig = cp.serviceaccount_kubeconfig("kai-scheduler", "kai-scheduler", expiration_seconds=7200,
                                                  create=False)
        argv = ["kaid", "run", "--kubeconfig", str(kubeconfig), "--config", str(config), "--metrics-port",
                str(self.port), "--metrics-address", "127.0.0.1", "--no-leader-elect", "--log-level",
                opts.kaid_log_level]
        self.profile = opts.kaid_profile
        if self.profile:
            code = (f"import cProfile, sys; sys.argv = {argv!r}; from kaid.cli import main; "
                    f"cProfile.run('main()', {self.profile!r})")
        else:
            code = f"import sys; sys.argv = {argv!r}; from kaid.cli import main; main()"
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBECONFIG") and k != "KAID_STARTUP_OFF"}
        if startup_off:
            env["KAID_STARTUP_OFF"] = startup_off  # start-up tricks off (kaid.kube.startup)
        if tree != REPO_ROOT:
            env["PYTHONPATH"] = str(tree)
        with self.log.open("wb") as out:
            self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, cwd=tree, env=env,
                                            start_new_session=True, preexec_fn=_die_with_parent)

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as resp:
            return str(resp.read().decode("utf-8", errors="replace"))

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def cycles(self) -> list[Obj]:
        """The cycles that bound or evicted something, from kaid's log lines."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return []
        return [{"cycle": int(m[1]), "bound": int(m[2]), "evicted": int(m[3]), "pipelined": int(m[4]),
                 "pending": int(m[5]), "ms": int(m[6])} for m in CYCLE_LINE.finditer(text)]

    def stop(self, grace: float = KAID_STOP_GRACE_S) -> None:
        """SIGTERM (kaid finishes its cycle in flight; cProfile writes its file), SIGKILL after ``grace``."""
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


    def kill(self) -> None:
        """SIGKILL, at once (a start measurement must not let kaid bind the rest of the backlog)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def wait_kaid_cycle_end(kaid: KaidProcess, total: int, timeout: float) -> str:
    """/metrics once kaid's counters show every bind (they are updated when the binding cycle ends)."""
    deadline = time.monotonic() + timeout
    text = ""
    while True:
        with contextlib.suppress(OSError):
            text = kaid.metrics()
            if parse_kaid_metrics(text)["binds_ok"] >= total:
                return text
        if time.monotonic() > deadline or not kaid.running():
            return text
        time.sleep(0.5)


# ============================================================================================ raw binds
def raw_placement(pods: Sequence[Obj], nodes: Sequence[str]) -> list[tuple[str, str]]:
    """(namespace/pod, node) for each pod, ``GPUS_PER_NODE`` one-GPU pods per node in order: no scheduling."""
    if len(pods) > len(nodes) * GPUS_PER_NODE:
        raise ValueError(f"{len(pods)} pods do not fit {len(nodes)} nodes of {GPUS_PER_NODE} GPUs")
    return [(f"{p['metadata']['namespace']}/{p['metadata']['name']}", nodes[i // GPUS_PER_NODE])
            for i, p in enumerate(pods)]


class RawBinder:
    """kaid's own actuator and client, in a child process (its CPU and memory its own), with kaid's QPS, burst and
    bind workers (``bind_workers``), sending a bare ``pods/binding`` for each pod: no watch, no cycle, no PodGroups.
    The child loads everything, says ``ready`` and waits for ``go`` on its stdin, then binds and writes its result
    (JSON) to ``result``. ``watches``: kinds of ``kaid.kube.cache.API_RESOURCES`` the child also lists and watches
    over the same client, with kaid's own informers (``WatchCache``, objects decoded and kept as kaid keeps them),
    listed before it says ``ready``: what kaid's watches cost the API server during the binds, without scheduling."""

    def __init__(self, kubeconfig: Path, qps: float, burst: int, placement: list[tuple[str, str]],
                 workdir: Path, run_id: str, watches: Sequence[str] = ()) -> None:
        spec = workdir / f"raw-{run_id}.json"
        self.result = workdir / f"raw-{run_id}-result.json"
        self.log = workdir / f"raw-{run_id}.log"
        spec.write_text(json.dumps({"kubeconfig": str(kubeconfig), "qps": qps, "burst": burst,
                                    "placement": placement, "result": str(self.result), "watches": list(watches)}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBECONFIG")}
        with self.log.open("wb") as err:
            self.process = subprocess.Popen([sys.executable, "-m", "benchmarks.kube_cluster", str(spec)],
                                            stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=err, cwd=REPO_ROOT, env=env,
                                            start_new_session=True, preexec_fn=_die_with_parent)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != b"ready":
            self.process.kill()
            raise ControlPlaneError(f"the raw bind loop did not start: {line!r}; {self.log.read_text()[-2000:]}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        self.process.stdin.flush()

    def finish(self, timeout: float) -> Obj:
        """Its result once it has exited (killed after ``timeout``)."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        try:
            out: Obj = json.loads(self.result.read_text())
            return out
        except (OSError, ValueError):
            return {"error": f"exit {self.process.returncode}: {self.log.read_text(errors='replace')[-2000:]}"}


WATCH_TAIL_S: Final = 3.0  # the raw loop with watches keeps them open this long after its binds


class _EventCount:
    """Counts the watch events of each kind (a ``kaid.kube.cache.Subscriber``)."""

    def __init__(self, seen: dict[str, int]) -> None:
        self.seen = seen

    def event(self, kind: str, deleted: bool, obj: Obj) -> None:
        self.seen[kind] = self.seen.get(kind, 0) + 1

    def listed(self, kind: str, items: list[Obj]) -> None:
        pass


def raw_bind_main(spec_path: str) -> None:
    """The child side of ``RawBinder``."""
    spec = json.loads(Path(spec_path).read_text())
    qps, burst = float(spec["qps"]), int(spec["burst"])
    client = KubeClient.from_config(spec["kubeconfig"], qps=qps, burst=burst)
    workers = bind_workers(burst)
    actuator = Actuator(client, workers=workers)
    binds = [Bind(pod, node, pod, "", (), None, 1000) for pod, node in spec["placement"]]
    watches = set(spec.get("watches") or ())
    cache: WatchCache | None = None
    seen: dict[str, int] = {}
    if watches:  # listed as kaid lists at its start: no cyclic collection until the lists are in, then frozen
        cache = WatchCache(client, tuple(r for r in API_RESOURCES if r.kind in watches))
        cache.subscribe(_EventCount(seen))
        pause_gc()
        cache.start()
        if not cache.wait_synced(300.0):
            raise SystemExit("the raw loop's watches did not list in 300 s")
        settle_gc()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    cpu0 = time.process_time()
    began = time.monotonic()
    try:
        applied = actuator.bind(binds)
    finally:
        actuator.close()
    cpu = time.process_time() - cpu0
    if cache is not None:  # the watch events of the bound pods (kwok's status updates) still coming
        time.sleep(WATCH_TAIL_S)
        cache.close()
    Path(spec["result"]).write_text(json.dumps({
        "workers": workers, "sent": len(binds), "bound": len(applied.bound), "failed": len(applied.failed),
        "watches": sorted(watches), "watch_events": dict(sorted(seen.items())),
        "first_failure": applied.failed[0][1] if applied.failed else None,
        "send_s": round(time.monotonic() - began, 3), "bind_cpu_s": round(cpu, 3),
        "peak_rss_mb": proc_memory_mb(os.getpid())[0]}))


if __name__ == "__main__":  # RawBinder's child: python -m benchmarks.kube_cluster SPEC.json
    raw_bind_main(sys.argv[1])
