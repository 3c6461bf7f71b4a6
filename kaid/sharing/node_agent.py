"""``kaid node-agent``: who uses how much GPU memory on one node (a DaemonSet on GPU nodes).

Every period it asks NVML for each GPU's processes and their memory, maps each process to its pod through the
process's cgroup (``/proc/<pid>/cgroup`` names the pod's UID), and publishes per pod and GPU:

- ``kai_gpu_memory_used_bytes{namespace,pod,gpu}``, ``kai_gpu_memory_share_bytes{...}`` (a shared-GPU pod's
  share: its ``gpu-memory``, or its ``gpu-fraction`` of the device) and ``kai_gpu_share_exceeded{...}`` (1 while it
  uses more than its share plus ``toleranceMiB``); processes of no pod count under an empty pod name;
- for a shared-GPU pod over its share: a Warning event on the pod and the condition ``GpuMemoryOverShare`` on its
  PodGroup (set back to False once it is under again), and, with ``evictOverShare``, an eviction through the
  Eviction API once it has been over for ``evictGraceSeconds``;
- the node label ``nvidia.com/gpu.memory`` (MiB, the smallest GPU's) when GPU Feature Discovery has not set it.

KAI-Scheduler shares GPUs without isolating their memory; this is what its users ask for to see and police it.
"""

from __future__ import annotations

import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import NodeAgentConfig
from kaid.kube.client import ApiError, KubeClient, pod_path
from kaid.model.vocabulary import FINISHED_PHASES, EventReason
from kaid.sharing.nvml import Gpu, Nvml, NvmlError

log = logging.getLogger("kaid.node-agent")
Obj = dict[str, Any]
OVER_SHARE = EventReason.GPU_MEMORY_OVER_SHARE  # the event's reason and the PodGroup condition's type
MIB = 1 << 20
# a pod's UID in a cgroup path: ".../pod<uid>/..." (cgroupfs) or "...-pod<uid with _>.slice" (systemd)
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


# --------------------------------------------------------------------------------------------- measuring
def pod_uid_from_cgroup(text: str) -> str | None:
    """The UID of the pod whose cgroup ``/proc/<pid>/cgroup`` text names (None: not a pod's process)."""
    found = _POD_UID.search(text)
    return found.group(1).replace("_", "-") if found else None


def pod_uid_of(pid: int, proc_root: Path) -> str | None:
    try:
        return pod_uid_from_cgroup((proc_root / str(pid) / "cgroup").read_text())
    except OSError:
        return None  # gone, or not visible from here


def share_bytes(pod: Obj, gpu_total: int) -> int | None:
    """The GPU memory a shared-GPU pod may use on one of its devices (None: not a shared-GPU pod)."""
    ann = meta.annotations_of(pod)
    try:
        if ann.get(c.GPU_MEMORY_ANNOTATION):
            return int(str(ann[c.GPU_MEMORY_ANNOTATION]).strip()) * MIB
        if ann.get(c.GPU_FRACTION_ANNOTATION):
            return int(Decimal(str(ann[c.GPU_FRACTION_ANNOTATION]).strip()) * gpu_total)
    except (ValueError, InvalidOperation):
        return None
    return None


@dataclass(frozen=True)
class Usage:
    """GPU memory one pod (or, with an empty ``pod``, processes of no pod) uses on one GPU."""

    namespace: str
    pod: str
    uid: str
    gpu: str  # the device's UUID
    used: int  # bytes
    share: int | None  # bytes it may use; None: not a shared-GPU pod

    def over(self, tolerance: int) -> bool:
        return self.share is not None and self.used > self.share + tolerance


def measure(gpus: Iterable[Gpu], pods_by_uid: Mapping[str, Obj], uid_of_pid: Mapping[int, str | None]) -> list[Usage]:
    """GPU memory per pod and GPU, from NVML's processes and the pods they belong to."""
    totals: dict[tuple[str, str], int] = {}
    for gpu in gpus:
        for proc in gpu.processes:
            uid = uid_of_pid.get(proc.pid) or ""
            key = (uid if uid in pods_by_uid else "", gpu.uuid)
            totals[key] = totals.get(key, 0) + (proc.used_bytes or 0)
    by_uuid = {g.uuid: g for g in gpus}
    out = []
    for (uid, uuid), used in sorted(totals.items()):
        pod = pods_by_uid.get(uid)
        if pod is None:
            out.append(Usage("", "", "", uuid, used, None))
            continue
        out.append(Usage(meta.namespace(pod), meta.name(pod), uid, uuid, used,
                         share_bytes(pod, by_uuid[uuid].memory_total)))
    return out


@dataclass
class OverShare:
    """Since when each pod has been over its share (pod UID -> time), and what that calls for now."""

    since: dict[str, float] = field(default_factory=dict)
    evicted: set[str] = field(default_factory=set)

    def update(self, usages: Iterable[Usage], tolerance: int, now: float) -> tuple[list[Usage], list[str]]:
        """(usages newly over their share, UIDs of pods no longer over theirs)."""
        over = {u.uid: u for u in usages if u.uid and u.over(tolerance)}
        started = [u for uid, u in over.items() if uid not in self.since]
        ended = [uid for uid in self.since if uid not in over]
        for u in started:
            self.since[u.uid] = now
        for uid in ended:
            del self.since[uid]
            self.evicted.discard(uid)
        return started, ended

    def to_evict(self, grace: float, now: float) -> list[str]:
        """UIDs over their share for ``grace`` seconds and not evicted yet."""
        due = [uid for uid, t in self.since.items() if now - t >= grace and uid not in self.evicted]
        self.evicted.update(due)
        return due


def gib(n: int | None) -> str:
    return "?" if n is None else f"{n / (1 << 30):.1f} GiB"


# --------------------------------------------------------------------------------------------- the agent
class NodeAgentMetrics:
    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Gauge

        self.registry = CollectorRegistry()
        labels = ["namespace", "pod", "gpu"]
        self.used = Gauge("kai_gpu_memory_used_bytes", "GPU memory used, per pod and GPU", labels,
                          registry=self.registry)
        self.share = Gauge("kai_gpu_memory_share_bytes", "GPU memory a shared-GPU pod may use, per GPU", labels,
                           registry=self.registry)
        self.exceeded = Gauge("kai_gpu_share_exceeded", "1 while a shared-GPU pod uses more GPU memory than its share",
                              labels, registry=self.registry)
        self.total = Gauge("kai_gpu_memory_total_bytes", "GPU memory of a device", ["gpu"], registry=self.registry)

    def set(self, gpus: Iterable[Gpu], usages: Iterable[Usage], tolerance: int) -> None:
        for gauge in (self.used, self.share, self.exceeded, self.total):
            gauge.clear()
        for gpu in gpus:
            self.total.labels(gpu.uuid).set(gpu.memory_total)
        for u in usages:
            self.used.labels(u.namespace, u.pod, u.gpu).set(u.used)
            if u.share is not None:
                self.share.labels(u.namespace, u.pod, u.gpu).set(u.share)
                self.exceeded.labels(u.namespace, u.pod, u.gpu).set(1 if u.over(tolerance) else 0)

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class NodeAgent:
    """One node's GPU memory, measured every period (``tick``)."""

    RELIST_EVERY = 60.0  # seconds between lists of the node's pods (sooner when a process of an unknown pod shows)

    def __init__(self, client: KubeClient, cfg: NodeAgentConfig, node: str, nvml: Nvml,
                 component: str = "kai-node-agent") -> None:
        self.client = client
        self.cfg = cfg
        self.node = node
        self.nvml = nvml
        self.component = component
        self.proc_root = Path(cfg.procRoot)
        self.metrics = NodeAgentMetrics()
        self.over = OverShare()
        self.pods: dict[str, Obj] = {}  # uid -> pod on this node
        self.listed_at = -1e9
        self.labelled = False
        self.last: list[Usage] = []
        self.measured_at = time.monotonic()  # the last period that measured (for /healthz)

    def tick(self, now: float) -> list[Usage]:
        gpus = self.nvml.gpus()
        if not self.labelled:
            self.labelled = self._label_node(gpus)
        uids = {p.pid: pod_uid_of(p.pid, self.proc_root) for g in gpus for p in g.processes}
        if now - self.listed_at > self.RELIST_EVERY or any(u and u not in self.pods for u in uids.values()):
            self._list_pods(now)
        usages = measure(gpus, self.pods, uids)
        tolerance = self.cfg.toleranceMiB * MIB
        self.metrics.set(gpus, usages, tolerance)
        started, ended = self.over.update(usages, tolerance, now)
        for u in started:
            self._report_over(u)
        for uid in ended:
            self._report_under(uid)
        if self.cfg.evictOverShare:
            for uid in self.over.to_evict(self.cfg.evictGraceSeconds, now):
                self._evict(uid, next(u for u in usages if u.uid == uid))
        self.last = usages
        self.measured_at = time.monotonic()
        return usages

    def healthy(self) -> bool:
        return time.monotonic() - self.measured_at < max(60.0, 5 * self.cfg.periodSeconds)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.tick(time.time())
            except NvmlError as err:
                log.error("%s", err)
            except Exception:  # one bad period must not end the agent
                log.exception("measuring GPU memory failed; trying again next period")
            stop.wait(self.cfg.periodSeconds)

    # ------------------------------------------------------------------------------------------ the API side
    def _list_pods(self, now: float) -> None:
        pods: dict[str, Obj] = {}

        def keep(p: Obj) -> None:
            if (p.get("status") or {}).get("phase") not in FINISHED_PHASES:
                pods[str(meta.meta(p).get("uid"))] = p

        try:
            self.client.list("/api/v1/pods", keep, fieldSelector=f"spec.nodeName={self.node}")
        except ApiError as err:
            log.warning("could not list the pods of node %s: %s", self.node, err.message)
            return
        self.pods, self.listed_at = pods, now

    def _label_node(self, gpus: list[Gpu]) -> bool:
        """Label the node with its GPU memory (MiB) unless it is labelled; True once that is settled."""
        if not self.cfg.labelGpuMemory or not gpus:
            return True
        try:
            node = self.client.get(f"/api/v1/nodes/{quote(self.node)}")
            if meta.labels_of(node).get(c.GPU_MEMORY_NODE_LABEL):
                return True
            mib = min(g.memory_total for g in gpus) // MIB
            self.client.merge_patch(f"/api/v1/nodes/{quote(self.node)}",
                                    {"metadata": {"labels": {c.GPU_MEMORY_NODE_LABEL: str(mib)}}})
            log.info("labelled node %s %s=%d (GPU Feature Discovery had not)", self.node, c.GPU_MEMORY_NODE_LABEL, mib)
            return True
        except ApiError as err:
            log.warning("could not label node %s with its GPU memory: %s", self.node, err.message)
            return False

    def _event(self, pod: Obj, reason: str, message: str) -> None:
        ns = meta.namespace(pod)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{meta.name(pod)}.", "namespace": ns},
                "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta.name(pod), "namespace": ns,
                                   "uid": meta.meta(pod).get("uid")},
                "reason": reason, "message": message[:1000], "type": "Warning",
                "source": {"component": self.component, "host": self.node}, "reportingComponent": self.component,
                "reportingInstance": self.node, "firstTimestamp": now, "lastTimestamp": now, "count": 1}
        try:
            self.client.create(f"/api/v1/namespaces/{quote(ns)}/events", body)
        except ApiError as err:
            log.warning("event %s on %s/%s not written: %s", reason, ns, meta.name(pod), err.message)

    def _podgroup_condition(self, pod: Obj, over: bool, message: str) -> None:
        """Set the pod's PodGroup condition ``GpuMemoryOverShare`` (in ``status.conditions``, beside the
        scheduler's ``schedulingConditions``)."""
        ann = meta.annotations_of(pod)
        group = ann.get(c.POD_GROUP_OF_POD_ANNOTATION) or ann.get(c.POD_GROUP_ANNOTATION)
        if not group:
            return
        path = (f"/apis/{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}/namespaces/{quote(meta.namespace(pod))}/"
                f"podgroups/{quote(str(group))}")
        for _ in range(3):  # read, change, write with the read's resourceVersion: another node may write too
            try:
                pg = self.client.get(path)
                conds = [x for x in (pg.get("status") or {}).get("conditions") or [] if x.get("type") != OVER_SHARE]
                conds.append({"type": OVER_SHARE, "status": "True" if over else "False",
                              "reason": OVER_SHARE if over else "WithinShare", "message": message[:1000],
                              "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
                self.client.merge_patch(f"{path}/status", {"metadata": {"resourceVersion": pg["metadata"][
                    "resourceVersion"]}, "status": {"conditions": conds}})
                return
            except ApiError as err:
                if err.status != 409:
                    log.warning("condition %s on PodGroup %s not written: %s", OVER_SHARE, group, err.message)
                    return

    def _report_over(self, u: Usage) -> None:
        pod = self.pods.get(u.uid)
        if pod is None:
            return
        message = (f"pod {u.namespace}/{u.pod} uses {gib(u.used)} of GPU {u.gpu} on node {self.node}, more than its "
                   f"share of {gib(u.share)}: other pods on that GPU may run out of memory. Lower its use (for "
                   f"example vLLM's --gpu-memory-utilization) or ask for a larger {c.GPU_FRACTION_ANNOTATION}")
        log.warning("%s", message)
        self._event(pod, OVER_SHARE, message)
        self._podgroup_condition(pod, True, message)

    def _report_under(self, uid: str) -> None:
        pod = self.pods.get(uid)
        if pod is not None:
            self._podgroup_condition(pod, False, f"pod {meta.object_key(pod)} is within its share of GPU memory again")

    def _evict(self, uid: str, u: Usage) -> None:
        pod = self.pods.get(uid)
        if pod is None:
            return
        ns, name = meta.namespace(pod), meta.name(pod)
        message = (f"evicted by kai's node agent: it used {gib(u.used)} of GPU {u.gpu}, more than its share of "
                   f"{gib(u.share)}, for {self.cfg.evictGraceSeconds:g} s (nodeAgent.evictOverShare)")
        cond = {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKai", "message": message,
                "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            self.client.strategic_patch(pod_path(ns, name, "status"), {"status": {"conditions": [cond]}})
            self.client.create(pod_path(ns, name, "eviction"), {
                "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}})
            log.warning("%s/%s %s", ns, name, message)
            self._event(pod, EventReason.EVICTED_OVER_SHARE, message)
        except ApiError as err:  # 429: a PodDisruptionBudget says not now; tried again at the next period
            log.warning("could not evict %s/%s: %s", ns, name, err.message)
            self.over.evicted.discard(uid)


def run_node_agent(kubeconfig: Path | None, config: Path | None, node: str | None, log_level: str = "info",
                   nvml_module: ModuleType | Any | None = None) -> int:
    """Measure until SIGTERM; the exit status (1: a bad kubeconfig or config, no node name, no NVML)."""
    import os

    from kaid.api.config import load_config
    from kaid.kube.metrics import serve

    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    node = node or os.environ.get("NODE_NAME")
    if not node:
        print("error: no node name: pass --node or set NODE_NAME (the DaemonSet sets it from spec.nodeName)",
              file=sys.stderr)
        return 1
    try:
        cfg = load_config(config)
        client = KubeClient.from_config(str(kubeconfig) if kubeconfig else None)
        nvml = Nvml(nvml_module)
    except (ValueError, NvmlError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    agent = NodeAgent(client, cfg.nodeAgent, node, nvml)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = None
    if cfg.nodeAgent.metricsPort:
        server = serve(lambda: agent.metrics, cfg.nodeAgent.metricsPort, agent.healthy, agent.healthy,
                       cfg.nodeAgent.metricsAddress)
    log.info("measuring the GPU memory of node %s every %g s", node, cfg.nodeAgent.periodSeconds)
    try:
        agent.run(stop)
    finally:
        nvml.close()
        if server is not None:
            server.shutdown()
    return 0
