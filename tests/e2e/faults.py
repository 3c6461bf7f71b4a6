"""Shared parts of the fault tests (test_faults.py): workloads made fast, a bind recorder that survives the API
server going away, the one invariant check every fault test ends with, and the recording of recovery times.

``check_invariants`` reads the API server's own state:
- no pod bound twice (a pod seen on two nodes by the recorder's watch),
- no node's GPUs over-committed, counting fractions (``gpu-fraction`` x devices, ``gpu-memory`` of the node's),
- no gang partly bound past its grace (waits that long for each PodGroup to be whole or empty),
- no pending pod lost (every pod the test expects still exists),
- kaid still alive (its /healthz answers) and scheduling new work (a pod on a fresh node is bound).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .controlplane import ApiError, ControlPlane
from .kaid_helpers import PODGROUPS, POOL_LABEL, Kaid, Obj, PodEventStream, pod, pods_of, suffix, wait_for

RESULTS_ENV = "KAI_FAULT_RESULTS"  # a JSON-lines file each fault test appends its figures to


def record(fault: str, **figures: Any) -> None:
    """Print a fault test's figures (shown with ``pytest -s`` or on failure) and append them to
    ``$KAI_FAULT_RESULTS`` when set (docs/reliability.md's table is made from it)."""
    line = json.dumps({"fault": fault, **figures}, sort_keys=True)
    print(f"FAULT {line}")
    path = os.environ.get(RESULTS_ENV)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def rss_kib(pid: int) -> int:
    """Resident set size of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


# --------------------------------------------------------------------------------------------------
# Workloads


def podgroup_obj(name: str, queue_name: str, min_member: int, **spec: Any) -> Obj:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": min_member, "queue": queue_name, **spec}}


def gang_pods(name: str, pool: str, queue_name: str, size: int, gpus: int = 1) -> list[Obj]:
    """``size`` bare pods of PodGroup ``name`` (annotation ``pod-group-name``)."""
    return [pod(f"{name}-{i}", pool, queue_name, gpus, annotations={"pod-group-name": name}) for i in range(size)]


def create_all(cp: ControlPlane, namespace: str, objs: Sequence[Obj], workers: int = 8) -> list[Any]:
    """Create PodGroups and Pods in ``namespace``, concurrently (PodGroups first); returns what the server
    answered, or the ApiError, per object."""

    def one(obj: Obj) -> Any:
        path = f"{PODGROUPS}/namespaces/{namespace}/podgroups" if obj["kind"] == "PodGroup" else \
            f"/api/v1/namespaces/{namespace}/pods"
        try:
            return cp.request("POST", path, obj)
        except ApiError as err:
            return err

    groups = [o for o in objs if o["kind"] == "PodGroup"]
    rest = [o for o in objs if o["kind"] != "PodGroup"]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, groups)) + list(pool.map(one, rest))


def bound_count(cp: ControlPlane, namespace: str) -> int:
    return sum(1 for p in pods_of(cp, namespace) if p["spec"].get("nodeName"))


# --------------------------------------------------------------------------------------------------
# A bind recorder that lives through API server restarts


@dataclass
class BindRecorder:
    """Watches the pods of one namespace as admin and remembers every node each pod (uid) was seen on. It
    lists again after a 410, an ERROR event or a dropped connection (the API server may restart under it)."""

    cp: ControlPlane
    namespace: str
    nodes: dict[str, set[str]] = field(default_factory=dict)  # uid -> nodes seen
    names: dict[str, str] = field(default_factory=dict)  # uid -> name
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stream: PodEventStream | None = None

    @property
    def relists(self) -> int:
        return self._stream.relists if self._stream is not None else 0

    def __enter__(self) -> BindRecorder:
        self._stream = PodEventStream(self.cp, self.namespace, self._see, relist=True, watch_timeout_s=60)
        self._stream.start("bind-recorder")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stream is not None:
            self._stream.stop()

    def _see(self, _type: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        node = (obj.get("spec") or {}).get("nodeName")
        uid = str(meta.get("uid"))
        with self._lock:
            self.names[uid] = str(meta.get("name"))
            if node:
                self.nodes.setdefault(uid, set()).add(node)

    def bound_twice(self) -> dict[str, list[str]]:
        with self._lock:
            return {self.names.get(uid, uid): sorted(nodes) for uid, nodes in self.nodes.items() if len(nodes) > 1}


# --------------------------------------------------------------------------------------------------
# The invariants


def _gpu_use(p: Obj, node: Obj) -> float:
    """GPUs a pod holds on its node, counting fractions."""
    whole = 0.0
    for container in (p.get("spec") or {}).get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        with contextlib.suppress(TypeError, ValueError):
            whole += float(limits.get("nvidia.com/gpu", 0))
    annotations = (p.get("metadata") or {}).get("annotations") or {}
    devices = 1.0
    with contextlib.suppress(TypeError, ValueError):
        devices = float(annotations.get("gpu-fraction-num-devices", 1))
    with contextlib.suppress(TypeError, ValueError):
        if "gpu-fraction" in annotations:
            return whole + float(annotations["gpu-fraction"]) * devices
    with contextlib.suppress(TypeError, ValueError, ZeroDivisionError):
        if "gpu-memory" in annotations:
            memory = float(((node.get("metadata") or {}).get("labels") or {}).get("nvidia.com/gpu.memory", 0))
            return whole + float(annotations["gpu-memory"]) / memory * devices
    return whole


def _active(p: Obj) -> bool:
    return bool(p["spec"].get("nodeName")) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def partial_gangs(cp: ControlPlane, namespace: str) -> dict[str, tuple[int, int]]:
    """PodGroups with some but fewer than minMember pods bound: name -> (bound, minMember)."""
    groups = cp.request("GET", f"{PODGROUPS}/namespaces/{namespace}/podgroups")["items"]
    pods = pods_of(cp, namespace)
    out: dict[str, tuple[int, int]] = {}
    for g in groups:
        name = g["metadata"]["name"]
        need = int((g.get("spec") or {}).get("minMember") or 1) if isinstance(
            (g.get("spec") or {}).get("minMember"), int) else 1
        n = sum(1 for p in pods if _active(p) and not p["metadata"].get("deletionTimestamp")
                and ((p["metadata"].get("annotations") or {}).get("pod-group-name") == name))
        if 0 < n < need:
            out[name] = (n, need)
    return out


def overcommitted(cp: ControlPlane, namespaces: Iterable[str]) -> dict[str, tuple[float, float]]:
    """Nodes whose GPUs the pods of ``namespaces`` over-commit: node -> (used, capacity)."""
    nodes = {n["metadata"]["name"]: n for n in cp.request("GET", "/api/v1/nodes")["items"]}
    used: dict[str, float] = {}
    for ns in namespaces:
        for p in pods_of(cp, ns):
            node = nodes.get(p["spec"].get("nodeName") or "")
            if node is not None and _active(p):
                used[node["metadata"]["name"]] = used.get(node["metadata"]["name"], 0.0) + _gpu_use(p, node)
    out = {}
    for name, u in used.items():
        cap = float(((nodes[name].get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", 0))
        if u > cap + 1e-6:
            out[name] = (u, cap)
    return out


@dataclass
class Invariants:
    """What ``check_invariants`` measured."""

    gangs_whole_after: float  # seconds until no gang was partly bound
    probe_bound_after: float  # seconds a new pod on a fresh node took to be bound
    pods: int
    bound: int


def check_invariants(
    cp: ControlPlane,
    namespace: str,
    queue_name: str,
    kaids: Sequence[Kaid],
    *,
    expected: Iterable[str] = (),
    recorder: BindRecorder | None = None,
    grace: float = 60.0,
    probe_timeout: float = 90.0,
) -> Invariants:
    """The invariants every fault test ends with, read from the API server (see the module's docstring).
    ``kaids``: the replicas that must still be alive (at least one of them binds the probe pod)."""
    began = time.monotonic()
    for k in kaids:
        assert k.running(), f"kaid {k.identity} died:\n{k.log(80)}"
        status, body = k.get("/healthz")
        assert status == 200, f"kaid {k.identity} /healthz: {status} {body}\n{k.log(40)}"
    last: dict[str, tuple[int, int]] = {}

    def gangs_whole() -> bool:
        nonlocal last
        last = partial_gangs(cp, namespace)
        return not last

    try:
        wait_for(gangs_whole, grace, "every gang whole or empty", interval=1.0)
    except AssertionError:
        raise AssertionError(f"gangs partly bound {grace:.0f}s on: {last}") from None
    gangs_after = time.monotonic() - began
    over = overcommitted(cp, [namespace])
    assert not over, f"nodes whose GPUs are over-committed (used, capacity): {over}"
    pods = pods_of(cp, namespace)
    names = {p["metadata"]["name"] for p in pods}
    lost = sorted(set(expected) - names)
    assert not lost, f"{len(lost)} pods lost: {lost[:20]}"
    if recorder is not None:
        twice = recorder.bound_twice()
        assert not twice, f"pods bound to more than one node: {twice}"
    # still scheduling: a pod for a fresh node of its own is bound
    pool = f"probe-{suffix()}"
    (node,) = cp.add_gpu_nodes(1, gpus=1, name_prefix=f"fault-{pool}", labels={POOL_LABEL: pool}, wait=True)
    probe = pod(f"probe-{pool}", pool, queue_name, 1)
    t0 = time.monotonic()
    cp.request("POST", f"/api/v1/namespaces/{namespace}/pods", probe)
    try:
        wait_for(lambda: cp.request("GET", f"/api/v1/namespaces/{namespace}/pods/{probe['metadata']['name']}")
                 ["spec"].get("nodeName") == node, probe_timeout, "kaid to bind a new pod after the fault")
    except AssertionError:
        logs = "\n".join(f"--- kaid {k.identity}:\n{k.log(60)}" for k in kaids)
        raise AssertionError(f"kaid does not schedule new work after the fault\n{logs}") from None
    probe_after = time.monotonic() - t0
    cp.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{probe['metadata']['name']}",
               {"gracePeriodSeconds": 0})
    cp.request("DELETE", f"/api/v1/nodes/{node}")
    return Invariants(gangs_after, probe_after, len(pods), sum(1 for p in pods if p["spec"].get("nodeName")))
