"""kaid against the upstream kube-scheduler on one real (kwok) control plane: time to bind a backlog.

Run from the repository root::

    python -m benchmarks.bench_kube                          # full size: 500 nodes, 4,000 pods, 50 gangs
    python -m benchmarks.bench_kube --json out.json          # also write the report as JSON
    python -m benchmarks.bench_kube --schedulers kaid --kaid-profile /tmp/kaid.prof   # where kaid's time goes

One control plane (``tests/e2e/controlplane.py``: etcd, kube-apiserver, kube-controller-manager and kwok on
loopback, binaries built and cached by ``.ci/controlplane/build.sh``) with ``--nodes`` fake nodes of 8 GPUs,
kai's CRDs, RBAC and default queues (``manifests/``; the kaid Deployment scaled to 0, kaid runs here as a
process) and ``--queues`` leaf queues under one parent, with equal GPU quotas that add up to the cluster.

The workload is ``--pods`` pods in all, every one asking for one GPU (so with the defaults the backlog
fills the 4,000 GPUs exactly and every pod can be bound): ``--gangs`` gangs of ``--gang-min`` to
``--gang-max`` pods (uniform, deterministic for ``--seed``), the rest single pods. Jobs are spread
round-robin over the queues (queue label on every pod). For kaid each gang is a PodGroup with
``minMember`` = its size and its pods carry the ``pod-group-name`` annotation; the single pods name no
PodGroup, so kaid's podgrouper makes one per pod as it would in a real cluster (``--podgroups precreated``
creates those too before kaid starts, as a separate podgrouper controller would). kube-scheduler gets the
very same pods (only ``schedulerName`` differs) and no PodGroups: it has no gang semantics, so it places
gang members one by one, in no particular order.

For each scheduler in turn (kaid, then kube-scheduler; with ``--repeat`` > 1 the order alternates):

1. a fresh namespace; create every pod (and PodGroup) with the scheduler not running, so the creation
   speed is not part of the measurement; then wait until the control plane is at rest again (its own
   watchers, the controller manager's and kwok's, take seconds to digest 4,000 new pods), so the scheduler
   starts as after a restart or a failover, not while the benchmark's burst still loads the machine;
2. one watch on the namespace's pods (the only load the benchmark puts on the API server while it
   measures), then start the scheduler: kaid as ``kaid run --no-leader-elect`` with a config file
   (``clientQPS``/``clientBurst`` = ``--qps``/``--burst``), kube-scheduler by
   ``ControlPlane.start_kube_scheduler(["--kube-api-qps=...", "--kube-api-burst=..."])``;
3. time from the scheduler's start to the watch seeing ``spec.nodeName`` on every pod; pods per second;
4. for kaid, once the cycle that bound the last pod has ended, its ``/metrics``: the cycle histogram
   ``kai_e2e_scheduling_latency_milliseconds`` and the phases ``kai_cycle_phase_latency_milliseconds``
   (sum and count), and its log lines per cycle; for kube-scheduler its scheduling-attempt metrics;
5. CPU seconds used by the scheduler process and by kube-apiserver during the run; checks that every
   pod is bound, that no node got more than 8 GPUs and that every gang is whole;
6. stop the scheduler, delete the pods and the namespace and wait until they are gone, so the next run
   sees the same empty cluster.

The report prints both schedulers side by side with the ratio kaid/kube-scheduler, and the machine load
(``os.getloadavg``) before and after. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import ctypes
import http.client
import io
import json
import os
import platform
import pstats
import random
import re
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.common import ratio as _ratio
from kaid.api import constants as c
from kaid.kube.client import ApiError, KubeClient
from kaid.kube.startup import TRICKS as STARTUP_TRICKS
from tests.e2e.controlplane import ControlPlane, ControlPlaneError, ensure_binaries, pinned_versions

Obj = dict[str, Any]

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
SCHEDULERS: Final[tuple[str, str]] = ("kaid", "kube-scheduler")
SCHEDULER_NAMES: Final[dict[str, str]] = {"kaid": c.DEFAULT_SCHEDULER_NAME, "kube-scheduler": "default-scheduler"}
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
    with contextlib.suppress(ApiError):
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
class BindWatcher:
    """One watch on a namespace's pods: when each pod got its ``spec.nodeName`` (as seen here)."""

    def __init__(self, client: KubeClient, namespace: str, total: int) -> None:
        self.client = client
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.total = total
        self.bound: dict[str, tuple[str, float]] = {}  # pod -> (node, monotonic time seen)
        self.labels: dict[str, str] = {}  # pod -> job
        self.all_bound = threading.Event()
        self.stop = threading.Event()
        self.errors = 0
        self.rv = ""
        self.thread = threading.Thread(target=self._run, name="bench-watch", daemon=True)

    def start(self) -> None:
        self._list()
        self.thread.start()

    def _list(self) -> None:
        data = self.client.get(self.path)
        for pod in data.get("items") or []:
            self._see(pod)
        self.rv = str((data.get("metadata") or {}).get("resourceVersion") or "")

    def _see(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        name = str(meta.get("name"))
        self.labels.setdefault(name, str((meta.get("labels") or {}).get(JOB_LABEL, "")))
        node = (pod.get("spec") or {}).get("nodeName")
        if node and name not in self.bound:
            self.bound[name] = (str(node), time.monotonic())
            if len(self.bound) >= self.total:
                self.all_bound.set()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                for event in self.client.watch(self.path, self.rv, timeout_seconds=10):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise ApiError(int(obj.get("code") or 500), str(obj.get("reason") or "watch error"), obj)
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        self.rv = str(rv)
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

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=20)


def proc_cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a process (all its threads), from /proc; None where unknown."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _component_pid(cp: ControlPlane, name: str) -> int | None:
    comp = cp.components.get(name)
    return comp.process.pid if comp is not None else None


def wait_quiet(cp: ControlPlane) -> float:
    """Until the control plane is at rest after the pods were made (its watchers have seen them all), so the
    scheduler starts on a quiet machine as it would after a restart or a failover: seconds waited."""
    names = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")
    pids = [pid for pid in (_component_pid(cp, n) for n in names) if pid is not None]

    def used() -> float:
        return sum(proc_cpu_seconds(pid) or 0.0 for pid in pids)

    began = time.monotonic()
    while time.monotonic() - began < QUIET_TIMEOUT_S:
        before = used()
        time.sleep(QUIET_WINDOW_S)
        if used() - before < QUIET_CPU * QUIET_WINDOW_S:
            break
    return round(time.monotonic() - began, 1)


def _delta(after: float | None, before: float | None) -> float | None:
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
    user = yaml.safe_load(cp.kubeconfig.read_text())["users"][0]["user"]
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate, on 127.0.0.1
    ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    conn = http.client.HTTPSConnection("127.0.0.1", cp.ports["scheduler"], context=ctx, timeout=10)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        body = resp.read().decode("utf-8", errors="replace")
    finally:
        conn.close()
    if resp.status != 200:
        raise ControlPlaneError(f"kube-scheduler /metrics: HTTP {resp.status}")
    return body


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
    workdir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))


class KaidProcess:
    """``kaid run`` as a child process in its own process group (optionally under cProfile)."""

    def __init__(self, cp: ControlPlane, opts: Options, workdir: Path, run_id: str, startup_off: str = "") -> None:
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
        with self.log.open("wb") as out:
            self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=env,
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


def _wait_kaid_cycle_end(kaid: KaidProcess, total: int, timeout: float) -> str:
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


def _fresh_namespace(cp: ControlPlane, wl: Workload, scheduler: str, opts: Options,
                     prefix: str) -> tuple[str, bool, bool, list[Obj]]:
    """A new namespace and the scheduler's pods for it (not created yet): (namespace, gangs, PodGroups of
    single pods made beforehand, pods)."""
    namespace = f"{prefix}-{uuid.uuid4().hex[:5]}"
    cp.ensure_namespace(namespace)
    cp.wait_for_default_serviceaccount(namespace)
    gangs = scheduler == "kaid"
    precreate = gangs and opts.podgroups == "precreated"
    return namespace, gangs, precreate, pod_objects(wl, SCHEDULER_NAMES[scheduler], namespace, precreate)


def run_once(cp: ControlPlane, wl: Workload, scheduler: str, opts: Options, run_id: str,
             log: Callable[[str], None]) -> Obj:
    """One measured run of ``scheduler`` on a fresh namespace; the namespace is gone when it returns."""
    client = admin_client(cp)
    namespace, gangs, precreate, pods = _fresh_namespace(cp, wl, scheduler, opts, f"bench-kube-{run_id}")
    result: Obj = {"scheduler": scheduler, "run": run_id, "namespace": namespace, "pods": len(pods)}
    kaid: KaidProcess | None = None
    watcher: BindWatcher | None = None
    try:
        began = time.monotonic()
        if gangs:
            podgroups = podgroup_objects(wl, namespace, precreate)
            create_all(client, podgroups, lambda o: PODGROUP_PATH.format(ns=namespace))
            result["podgroups_created"] = len(podgroups)
        create_all(client, pods, lambda o: f"/api/v1/namespaces/{namespace}/pods")
        result["create_s"] = round(time.monotonic() - began, 2)
        result["quiet_wait_s"] = wait_quiet(cp)
        log(f"{run_id}: {len(pods)} pods created in {result['create_s']:.1f} s; control plane at rest after "
            f"{result['quiet_wait_s']:.1f} s more; starting {scheduler}")

        watcher = BindWatcher(admin_client(cp, qps=50, burst=50), namespace, len(pods))
        watcher.start()
        result["bound_before_start"] = len(watcher.bound)
        result["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
        api_pid = _component_pid(cp, "kube-apiserver")
        api_cpu0 = proc_cpu_seconds(api_pid)
        t0 = time.monotonic()
        if scheduler == "kaid":
            kaid = KaidProcess(cp, opts, opts.workdir, run_id)
            sched_pid: int | None = kaid.pid
        else:
            cp.stop_kube_scheduler()
            cp.start_kube_scheduler([f"--kube-api-qps={opts.qps:g}", f"--kube-api-burst={opts.burst}"])
            sched_pid = _component_pid(cp, "kube-scheduler")
        result["start_s"] = round(time.monotonic() - t0, 2)  # kube-scheduler: until /healthz answered

        next_note = t0 + PROGRESS_EVERY_S
        deadline = t0 + opts.timeout
        while not watcher.all_bound.wait(0.5):
            now = time.monotonic()
            if kaid is not None and not kaid.running():
                raise ControlPlaneError(f"kaid exited with status {kaid.process.returncode}:\n{kaid.log_tail()}")
            if now > deadline:
                log(f"{run_id}: timed out after {opts.timeout:.0f} s with {len(watcher.bound)}/{len(pods)} bound")
                break
            if now >= next_note:
                log(f"{run_id}: {len(watcher.bound)}/{len(pods)} bound after {now - t0:.0f} s")
                next_note += PROGRESS_EVERY_S
        times = sorted(t for _, t in watcher.bound.values())
        all_bound = len(watcher.bound) >= len(pods)
        end = times[-1] if all_bound else time.monotonic()
        result.update({
            "all_bound": all_bound,
            "pods_bound": len(watcher.bound),
            "first_bind_s": round(times[0] - t0, 2) if times else None,
            "all_bound_s": round(end - t0, 2) if all_bound else None,
            "pods_per_s": round(len(watcher.bound) / (end - t0), 1) if end > t0 else None,
            "pods_per_s_binding": (round((len(times) - 1) / (times[-1] - times[0]), 1)
                                   if len(times) > 1 and times[-1] > times[0] else None),
        })
        result.update(_check_placement(wl, watcher))
        result["scheduler_cpu_s"] = proc_cpu_seconds(sched_pid)
        result["apiserver_cpu_s"] = _delta(proc_cpu_seconds(api_pid), api_cpu0)
        if kaid is not None:
            text = _wait_kaid_cycle_end(kaid, len(pods), timeout=max(30.0, deadline - time.monotonic()))
            result["cycle_end_s"] = round(time.monotonic() - t0, 2)
            result["kaid"] = parse_kaid_metrics(text) if text else None
            result["scheduler_cpu_s"] = proc_cpu_seconds(sched_pid)
        else:
            try:
                result["kube_scheduler"] = parse_kube_scheduler_metrics(scrape_kube_scheduler(cp))
            except (OSError, ControlPlaneError, http.client.HTTPException, KeyError, ValueError) as err:
                result["kube_scheduler"] = {"error": str(err)}
        result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        log(f"{run_id}: {scheduler}: {result['pods_bound']}/{len(pods)} bound, first after "
            f"{result['first_bind_s']} s, all after {result['all_bound_s']} s ({result['pods_per_s']} pods/s)")
    finally:
        if watcher is not None:
            watcher.close()
            result["watch_errors"] = watcher.errors
        if kaid is not None:
            kaid.stop()
            result["kaid_cycles"] = kaid.cycles()
            result["kaid_exit"] = kaid.process.returncode
            if opts.keep_logs:
                Path(opts.keep_logs).mkdir(parents=True, exist_ok=True)
                shutil.copy(kaid.log, Path(opts.keep_logs) / kaid.log.name)
        if scheduler == "kube-scheduler":
            comp = cp.components.get("kube-scheduler")
            if opts.keep_logs and comp is not None:
                Path(opts.keep_logs).mkdir(parents=True, exist_ok=True)
                shutil.copy(comp.log, Path(opts.keep_logs) / f"kube-scheduler-{run_id}.log")
            cp.stop_kube_scheduler()
        result["delete_s"] = round(delete_namespace(cp, client, namespace, NAMESPACE_GONE_TIMEOUT_S), 1)
    return result


def measure_starts(cp: ControlPlane, wl: Workload, scheduler: str, opts: Options, starts: int,
                   log: Callable[[str], None], startup_off: Sequence[str] = ()) -> Obj:
    """``starts`` cold starts of ``scheduler`` on the same backlog: the time from its start to the first
    bind the watch sees; the scheduler is killed right after, and the pods it bound are made again. For kaid,
    each of ``startup_off`` (start-up tricks to turn off, ``+`` between several) is measured too, its starts
    interleaved with the plain ones."""
    client = admin_client(cp)
    namespace, gangs, precreate, pods = _fresh_namespace(cp, wl, scheduler, opts, f"bench-start-{scheduler}")
    variants = ["", *startup_off] if scheduler == "kaid" else [""]
    firsts: dict[str, list[float]] = {v: [] for v in variants}
    try:
        if gangs:
            create_all(client, podgroup_objects(wl, namespace, precreate), lambda o: PODGROUP_PATH.format(
                ns=namespace))
        create_all(client, pods, lambda o: f"/api/v1/namespaces/{namespace}/pods")
        for i in range(starts):
            for variant in variants:
                first = _one_start(cp, client, wl, scheduler, opts, namespace, pods, variant, f"start{i}{variant}")
                firsts[variant].append(first)
                log(f"start {i}: {scheduler}{' without ' + variant if variant else ''} first bind after {first} s")
    finally:
        delete_namespace(cp, client, namespace, NAMESPACE_GONE_TIMEOUT_S)
    out = {"scheduler": scheduler, **_spread(firsts[""])}
    if len(variants) > 1:
        out["startup_off"] = {v: _spread(firsts[v]) for v in variants[1:]}
    return out


def _spread(firsts: list[float]) -> Obj:
    return {"first_bind_s": firsts, "median_s": _median(firsts), "min_s": min(firsts, default=None),
            "max_s": max(firsts, default=None)}


def _one_start(cp: ControlPlane, client: KubeClient, wl: Workload, scheduler: str, opts: Options, namespace: str,
               pods: list[Obj], startup_off: str, run_id: str) -> float:
    """One cold start on the backlog: seconds to the first bind; then the backlog is made whole again."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    pg_path = PODGROUP_PATH.format(ns=namespace)
    if wl.gangs and opts.podgroups != "precreated":  # each start makes the single pods' PodGroups again
        gang_names = {j.name for j in wl.gangs}
        for pg in client.get(pg_path).get("items") or []:
            if pg["metadata"]["name"] not in gang_names:
                with contextlib.suppress(ApiError):
                    client.request("DELETE", f"{pg_path}/{pg['metadata']['name']}")
    time.sleep(START_SETTLE_S)  # let the control plane finish with the clean-up (deletions, new pods)
    wait_quiet(cp)  # ... and with anything else, as the measured runs do
    watcher = BindWatcher(admin_client(cp, qps=50, burst=50), namespace, len(pods))
    watcher.start()
    kaid: KaidProcess | None = None
    t0 = time.monotonic()
    try:
        if scheduler == "kaid":
            kaid = KaidProcess(cp, opts, opts.workdir, run_id, startup_off.replace("+", ","))
        else:
            cp.start_kube_scheduler([f"--kube-api-qps={opts.qps:g}", f"--kube-api-burst={opts.burst}"])
        while not watcher.bound and time.monotonic() - t0 < opts.timeout:
            time.sleep(0.005)
    finally:
        if kaid is not None:
            kaid.kill()
            if opts.keep_logs:
                Path(opts.keep_logs).mkdir(parents=True, exist_ok=True)
                shutil.copy(kaid.log, Path(opts.keep_logs) / kaid.log.name)
        else:
            cp.stop_kube_scheduler()
        watcher.close()
    if not watcher.bound:
        raise ControlPlaneError(f"{scheduler} bound nothing within {opts.timeout:.0f} s")
    first = round(min(t for _, t in watcher.bound.values()) - t0, 3)
    _unbind(client, path, {p["metadata"]["name"]: p for p in pods})
    return first


def _unbind(client: KubeClient, path: str, pods: dict[str, Obj]) -> None:
    """Delete the bound pods (binds still in flight included) and make them again, unbound."""
    deadline = time.monotonic() + NAMESPACE_GONE_TIMEOUT_S
    while time.monotonic() < deadline:
        time.sleep(0.5)  # binds the scheduler sent before it stopped may still land
        items = client.get(path).get("items") or []
        bound = {p["metadata"]["name"] for p in items if (p.get("spec") or {}).get("nodeName")}
        if not bound:
            missing = [pods[n] for n in pods if n not in {p["metadata"]["name"] for p in items}]
            if not missing:
                return
            create_all(client, missing, lambda o: path)
            continue
        for name in bound:
            with contextlib.suppress(ApiError):
                client.request("DELETE", f"{path}/{name}", params={"gracePeriodSeconds": "0"})
    raise ControlPlaneError("the pods bound during a start measurement were not gone in time")


def _check_placement(wl: Workload, watcher: BindWatcher) -> Obj:
    """No node holds more than its GPUs; gangs whole; how far apart in time each gang's pods were bound."""
    per_node: dict[str, int] = {}
    for node, _ in watcher.bound.values():
        per_node[node] = per_node.get(node, 0) + 1
    gang_times: dict[str, list[float]] = {j.name: [] for j in wl.gangs}
    for pod, (_, t) in watcher.bound.items():
        job = watcher.labels.get(pod, "")
        if job in gang_times:
            gang_times[job].append(t)
    sizes = {j.name: j.pods for j in wl.gangs}
    whole = sum(1 for g, ts in gang_times.items() if len(ts) == sizes[g])
    partial = sum(1 for g, ts in gang_times.items() if 0 < len(ts) < sizes[g])
    spreads = [max(ts) - min(ts) for g, ts in gang_times.items() if len(ts) == sizes[g]]
    return {
        "nodes_used": len(per_node),
        "max_gpus_on_a_node": max(per_node.values(), default=0),
        "overcommitted_nodes": sum(1 for v in per_node.values() if v > GPUS_PER_NODE),
        "gangs_whole": whole,
        "gangs_partial": partial,
        "gang_bind_spread_max_s": round(max(spreads), 2) if spreads else None,
        "gang_bind_spread_mean_s": round(statistics.fmean(spreads), 2) if spreads else None,
    }


# ============================================================================================ report
NUMERIC_KEYS: Final = ("create_s", "quiet_wait_s", "first_bind_s", "all_bound_s", "pods_per_s", "pods_per_s_binding",
                       "pods_bound",
                       "gangs_whole", "gangs_partial", "gang_bind_spread_max_s", "max_gpus_on_a_node",
                       "overcommitted_nodes", "scheduler_cpu_s", "apiserver_cpu_s", "delete_s")


def _median(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 3) if vals else None




def summarise(runs: list[Obj]) -> Obj:
    """Per scheduler: the median of every numeric result over its runs, and kaid's cycle figures."""
    results: Obj = {}
    for sched in SCHEDULERS:
        mine = [r for r in runs if r["scheduler"] == sched]
        if not mine:
            continue
        res: Obj = {k: _median([r.get(k) for r in mine]) for k in NUMERIC_KEYS}
        res["runs"] = len(mine)
        res["all_bound_every_run"] = all(r.get("all_bound") for r in mine)
        if sched == "kaid":
            ms = [r["kaid"] for r in mine if r.get("kaid")]
            res["cycles"] = _median([m["cycles"] for m in ms])
            res["cycle_ms_mean"] = _median([m["cycle_ms_mean"] for m in ms])
            phases = sorted({p for m in ms for p in m["phases"]})
            res["phase_ms_mean"] = {p: _median([m["phases"].get(p, {}).get("mean_ms") for m in ms]) for p in phases}
            res["phase_ms_sum"] = {p: _median([m["phases"].get(p, {}).get("sum_ms") for m in ms]) for p in phases}
            res["cycle_ms_sum"] = _median([m["cycle_ms_sum"] for m in ms])
            res["binding_cycles"] = [r.get("kaid_cycles") for r in mine]
        else:
            ks = [r["kube_scheduler"] for r in mine if r.get("kube_scheduler") and "error" not in r["kube_scheduler"]]
            res["attempts"] = _median([k["attempts"] for k in ks])
            res["attempt_ms_mean"] = _median([k["attempt_ms_mean"] for k in ks])
        results[sched] = res
    return results


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def format_report(report: Obj) -> str:
    res, wl, m = report["results"], report["workload"], report["machine"]
    k, s = res.get("kaid", {}), res.get("kube-scheduler", {})
    rows: list[tuple[str, Any, Any, Any]] = []

    def row(name: str, key: str, ratio: bool = True) -> None:
        a, b = k.get(key), s.get(key)
        rows.append((name, a, b, _ratio(a, b) if ratio else None))

    row("pods created before the start (s)", "create_s", ratio=False)
    row("then waited for a quiet control plane (s)", "quiet_wait_s", ratio=False)
    row("start to first bind (s)", "first_bind_s")
    row("start to all bound (s)", "all_bound_s")
    row("pods per second (start to all bound)", "pods_per_s")
    row("pods per second (first to last bind)", "pods_per_s_binding")
    row("pods bound", "pods_bound")
    rows.append(("every pod bound, every run", k.get("all_bound_every_run"), s.get("all_bound_every_run"), None))
    row("gangs whole", "gangs_whole", ratio=False)
    row("gangs partly bound at the end", "gangs_partial", ratio=False)
    row("gang bind spread, max (s)", "gang_bind_spread_max_s")
    row("max GPUs on one node", "max_gpus_on_a_node", ratio=False)
    row("scheduler CPU time (s)", "scheduler_cpu_s")
    row("kube-apiserver CPU time in the run (s)", "apiserver_cpu_s")
    if k:
        rows.append(("kaid cycles (until the binding one ended)", k.get("cycles"), None, None))
        rows.append(("  cycle, mean (ms)", k.get("cycle_ms_mean"), None, None))
        rows.append(("  cycle, total (ms)", k.get("cycle_ms_sum"), None, None))
        total = k.get("cycle_ms_sum") or 0.0
        phase_sum = 0.0
        for phase, ms in (k.get("phase_ms_sum") or {}).items():
            phase_sum += ms or 0.0
            rows.append((f"  phase {phase}, total (ms)", ms, None, None))
        if total:
            rows.append(("  outside the phases, total (ms)", round(total - phase_sum, 1), None, None))
    if s:
        rows.append(("kube-scheduler attempts", None, s.get("attempts"), None))
        rows.append(("  attempt, mean (ms)", None, s.get("attempt_ms_mean"), None))
    width = max(len(r[0]) for r in rows)
    a = report["args"]
    lines = [
        f"bench_kube: {wl['nodes']} nodes x {GPUS_PER_NODE} GPUs, {wl['pods']} one-GPU pods ({wl['single_pods']} "
        f"single, {wl['gang_pods']} in {wl['gangs']} gangs of {wl['gang_size_min']}-{wl['gang_size_max']}), "
        f"{wl['queues']} queues; client QPS {a['qps']:g} / burst {a['burst']} for both; {a['repeat']} repeat(s); "
        f"kaid's single-pod PodGroups: {'made by kaid' if a['podgroups'] == 'kaid' else 'created beforehand'}"
        + ("; kaid under cProfile" if a.get("kaid_profile") else ""),
        f"control plane: Kubernetes {m['versions'].get('kubernetes')}, etcd {m['versions'].get('etcd')}, kwok "
        f"{m['versions'].get('kwok')} on loopback; kube-scheduler has no gangs: it binds gang pods one by one",
        f"machine: {m['cpus']} CPUs, load average (1, 5, 15 min) {m['loadavg_before']} before, {m['loadavg']} after, "
        f"Python {m['python']}, engine at commit {m['commit']}"
        f"{' with uncommitted changes in kaid/' if m['kaid_uncommitted_changes'] else ''}",
        "",
        f"{'metric':<{width}}  {'kaid':>10}  {'kube-sched':>10}  {'kaid/kube':>10}",
        f"{'-' * width}  {'-' * 10}  {'-' * 10}  {'-' * 10}",
    ]
    lines += [f"{name:<{width}}  {_fmt(x):>10}  {_fmt(y):>10}  {_fmt(r):>10}" for name, x, y, r in rows]
    ratio = report["ratios"].get("pods_per_s")
    lines += ["", f"pods/s ratio kaid/kube-scheduler: {_fmt(ratio)} (target >= 1.0)"
              if ratio is not None else "pods/s ratio kaid/kube-scheduler: -"]
    for r in report["runs"]:
        if r["scheduler"] == "kaid" and r.get("kaid_cycles"):
            shown = ", ".join(f"#{x['cycle']}: {x['bound']} bound in {x['ms']} ms" for x in r["kaid_cycles"][:8])
            lines.append(f"kaid cycles that bound pods ({r['run']}): {shown}")
    lines.append("(medians over the repeats; times from the scheduler's start, seen by one watch on the pods)")
    return "\n".join(lines)


def profile_summary(path: str, top: int) -> str:
    buf = io.StringIO()
    for key in ("cumulative", "tottime"):
        buf.write(f"--- kaid main thread, top {top} by {key} ---\n")
        pstats.Stats(path, stream=buf).strip_dirs().sort_stats(key).print_stats(top)
    return buf.getvalue()


def machine_info() -> Obj:
    from benchmarks.common import engine_revision

    try:
        versions = pinned_versions()
    except (OSError, ControlPlaneError):
        versions = {}
    return {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "loadavg": [round(x, 2) for x in os.getloadavg()], "versions": versions, **engine_revision()}


def compile_kaid() -> None:
    """kaid's bytecode, as an installed kaid has it (pip compiles a wheel's modules when it installs them;
    the image does too): otherwise every run would first compile kaid's sources, with PYTHONDONTWRITEBYTECODE
    set or without a writable tree, and the start would measure the compiler. Written to __pycache__ beside
    the sources (ignored by git), only for modules whose sources changed."""
    compileall.compile_dir(str(REPO_ROOT / "kaid"), quiet=1)


def _progress(opts: Options) -> Callable[[str], None]:
    def log(msg: str) -> None:
        if opts.progress:
            print(f"bench_kube: {msg}", file=sys.stderr, flush=True)
    return log


def _begin(cp: ControlPlane, wl: Workload, schedulers: Sequence[str], log: Callable[[str], None]) -> list[float]:
    """kaid's bytecode and the cluster; returns the load average before."""
    load_before = [round(x, 2) for x in os.getloadavg()]
    if "kaid" in schedulers:
        compile_kaid()
    prepare_cluster(cp, wl, log)
    return load_before


def run_benchmark(cp: ControlPlane, wl: Workload, opts: Options, repeat: int = 1,
                  schedulers: Sequence[str] = SCHEDULERS, args: Obj | None = None) -> Obj:
    """``prepare_cluster`` then ``repeat`` runs of each scheduler (alternating which goes first)."""
    if repeat < 1:
        raise ValueError("--repeat must be at least 1")
    if opts.kaid_profile and repeat > 1:
        raise ValueError("--kaid-profile profiles one run: use --repeat 1")

    log = _progress(opts)
    load_before = _begin(cp, wl, schedulers, log)
    runs: list[Obj] = []
    for r in range(repeat):
        order = list(schedulers) if r % 2 == 0 else list(schedulers)[::-1]
        for sched in order:
            runs.append(run_once(cp, wl, sched, opts, f"{'kaid' if sched == 'kaid' else 'kube'}{r}", log))
    results = summarise(runs)
    k, s = results.get("kaid", {}), results.get("kube-scheduler", {})
    ratios = {key: _ratio(k.get(key), s.get(key)) for key in ("pods_per_s", "pods_per_s_binding", "all_bound_s",
                                                              "first_bind_s", "scheduler_cpu_s", "apiserver_cpu_s")}
    return {
        "benchmark": "bench_kube",
        "args": args or {},
        "machine": {**machine_info(), "loadavg_before": load_before},
        "workload": wl.summary(),
        "results": results,
        "ratios": ratios,
        "runs": runs,
    }


def run_starts(cp: ControlPlane, wl: Workload, opts: Options, starts: int, schedulers: Sequence[str],
               args: Obj | None = None, startup_off: Sequence[str] = ()) -> Obj:
    """``--starts N``: only the cold start, N times per scheduler on the same backlog."""
    log = _progress(opts)
    load_before = _begin(cp, wl, schedulers, log)
    results = {sched: measure_starts(cp, wl, sched, opts, starts, log, startup_off) for sched in schedulers}
    k, s = results.get("kaid", {}), results.get("kube-scheduler", {})
    return {"benchmark": "bench_kube --starts", "args": args or {},
            "machine": {**machine_info(), "loadavg_before": load_before}, "workload": wl.summary(),
            "starts": results, "ratio_first_bind": _ratio(k.get("median_s"), s.get("median_s"))}


def format_starts(report: Obj) -> str:
    w, m = report["workload"], report["machine"]
    lines = [f"bench_kube --starts: start to first bind on a backlog of {w['pods']} pods ({w['gangs']} gangs) on "
             f"{w['nodes']} nodes; load {m['loadavg_before']} before, {m['loadavg']} after",
             f"{'scheduler':<16}{'median s':>10}{'min s':>8}{'max s':>8}  every start (s)"]
    for sched, r in report["starts"].items():
        for name, v in [(sched, r), *((f"  without {k}", v) for k, v in r.get("startup_off", {}).items())]:
            lines.append(f"{name:<16}{_fmt(v['median_s']):>10}{_fmt(v['min_s']):>8}{_fmt(v['max_s']):>8}  "
                         f"{', '.join(str(x) for x in v['first_bind_s'])}")
    lines.append(f"first bind ratio kaid/kube-scheduler (median): {_fmt(report['ratio_first_bind'])} (lower is sooner)")
    return "\n".join(lines)


# ============================================================================================ main
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_kube",
                                description="kaid against kube-scheduler on one kwok control plane: time to bind "
                                            "a backlog of one-GPU pods and gangs.")
    p.add_argument("--nodes", type=int, default=500, help="fake GPU nodes of 8 GPUs (default 500)")
    p.add_argument("--pods", type=int, default=4000, help="one-GPU pods in all, gang members included (default 4000)")
    p.add_argument("--gangs", type=int, default=50, help="gangs among them (default 50)")
    p.add_argument("--gang-min", type=int, default=8, help="smallest gang, pods (default 8)")
    p.add_argument("--gang-max", type=int, default=64, help="largest gang, pods (default 64)")
    p.add_argument("--queues", type=int, default=4, help="leaf queues, equal GPU quotas (default 4)")
    p.add_argument("--qps", type=float, default=100.0, help="client QPS of both schedulers (default 100)")
    p.add_argument("--burst", type=int, help="client burst of both schedulers (default 2 x QPS)")
    p.add_argument("--cycle-period", type=float, default=1.0, help="kaid's cyclePeriodSeconds (default 1)")
    p.add_argument("--podgroups", choices=("kaid", "precreated"), default="kaid",
                   help="single pods' PodGroups: made by kaid's podgrouper (default), or created with the pods")
    p.add_argument("--schedulers", default="kaid,kube-scheduler",
                   help="comma-separated subset of kaid,kube-scheduler (default both)")
    p.add_argument("--repeat", type=int, default=1, help="runs per scheduler (default 1)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run to wait for every bind (default 900)")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON to FILE")
    p.add_argument("--kaid-log-level", default="info", help="kaid's --log-level (default info)")
    p.add_argument("--kaid-profile", metavar="FILE",
                   help="run kaid under cProfile (its main thread), dump the stats to FILE and print the top functions")
    p.add_argument("--profile-top", type=int, default=25, help="functions listed per ordering (default 25)")
    p.add_argument("--keep-logs", metavar="DIR", help="copy kaid's and kube-scheduler's logs to DIR")
    p.add_argument("--starts", type=int, default=0, metavar="N",
                   help="instead of the runs: start each scheduler N times on the backlog, kill it at its first "
                        "bind, and report start-to-first-bind times (the part of the runs that differs)")
    p.add_argument("--startup-off", default="", metavar="TRICK,...",
                   help="with --starts: also measure kaid with each of these start-up tricks off (kaid.kube.startup;"
                        " join several with +), interleaved with the plain starts")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    schedulers = [x.strip() for x in args.schedulers.split(",") if x.strip()]
    burst = args.burst if args.burst is not None else max(1, int(2 * args.qps))
    try:
        if not schedulers or any(x not in SCHEDULERS for x in schedulers):
            raise ValueError(f"--schedulers takes a comma-separated subset of {','.join(SCHEDULERS)}")
        if args.qps <= 0:
            raise ValueError("--qps must be positive")
        if args.kaid_profile and args.repeat > 1:
            raise ValueError("--kaid-profile profiles one run: use --repeat 1")
        if args.starts < 0 or (args.starts and args.kaid_profile):
            raise ValueError("--starts takes a positive count and no --kaid-profile")
        unknown = {t for v in args.startup_off.split(",") for t in v.split("+") if t} - set(STARTUP_TRICKS)
        if unknown or (args.startup_off and not args.starts):
            raise ValueError(f"--startup-off goes with --starts and names tricks of {', '.join(STARTUP_TRICKS)}")
        wl = build_workload(args.nodes, args.pods, args.gangs, args.gang_min, args.gang_max, args.queues, args.seed)
    except ValueError as err:
        print(f"bench_kube: {err}", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="bench-kube-"))
    opts = Options(qps=args.qps, burst=burst, cycle_period=args.cycle_period, timeout=args.timeout,
                   podgroups=args.podgroups, kaid_log_level=args.kaid_log_level, kaid_profile=args.kaid_profile,
                   profile_top=args.profile_top, keep_logs=args.keep_logs, progress=not args.quiet, workdir=workdir)
    arg_record = {"nodes": args.nodes, "pods": args.pods, "gangs": args.gangs, "gang_min": args.gang_min,
                  "gang_max": args.gang_max, "queues": args.queues, "qps": args.qps, "burst": burst,
                  "cycle_period": args.cycle_period, "podgroups": args.podgroups, "schedulers": schedulers,
                  "repeat": args.repeat, "seed": args.seed, "kaid_profile": args.kaid_profile}
    cp = ControlPlane(bindir=ensure_binaries())
    try:
        cp.start()
        if args.starts:
            off = [v for v in args.startup_off.split(",") if v]
            report = run_starts(cp, wl, opts, args.starts, schedulers,
                                {**arg_record, "starts": args.starts, "startup_off": off}, off)
        else:
            report = run_benchmark(cp, wl, opts, args.repeat, schedulers, arg_record)
    except ValueError as err:
        print(f"bench_kube: {err}", file=sys.stderr)
        return 2
    finally:
        cp.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(format_starts(report) if args.starts else format_report(report))
    if args.kaid_profile and "kaid" in schedulers and Path(args.kaid_profile).exists():
        print(profile_summary(args.kaid_profile, args.profile_top))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
