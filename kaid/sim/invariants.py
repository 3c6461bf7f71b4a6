"""The invariants every scheduling cycle must keep, checked on plain Kubernetes objects (what the simulator
holds, or what an API server returns), apart from the engine's own model so that a bug there cannot hide
itself:

- no node overcommitted: the bound pods' cpu, memory and pods within its allocatable, and its GPUs counting
  fractions: whole GPUs plus the shared GPUs in use within its GPU count, and each shared GPU's fractions
  (``gpu-fraction``, or ``gpu-memory`` over the node's GPU memory) within one GPU;
- gangs all or nothing: a PodGroup has none of its pods placed or at least ``minMember`` of them (placed:
  bound, or pipelined onto a node whose victims are leaving, as a pod moved by reclaim or consolidation
  is), except for a while after it falls below minMember: it is marked stale by the next cycle and evicted
  whole once its grace has passed (``GangWatch`` follows that across cycles);
- limits: no queue's bound pods (its own and its children's) above its limit, per resource, in the units of
  ``Queue.spec.resources`` (gpu devices, cpu millicores, memory MB).

``violations`` returns what it found broken in one state, one line each (empty when all hold).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from kaid.api import constants as c
from kaid.api.meta import parse_time
from kaid.api.quantity import parse_quantity
from kaid.model.pods import gpu_groups_of, pod_requests

Obj = dict[str, Any]
EPSILON = 1e-6
_DONE = ("Succeeded", "Failed")


def _bound(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in _DONE


def _quantity(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except (ValueError, ArithmeticError):
        return Decimal(0)


def _pod_gpus(pod: Obj, node: Obj | None) -> tuple[int, float, list[str]]:
    """(whole GPUs, fraction of each shared GPU, the shared GPUs' groups) of a pod."""
    requests = pod_requests(pod.get("spec") or {})
    whole = int(requests.get(c.GPU_RESOURCE, Decimal(0)))
    anns = (pod.get("metadata") or {}).get("annotations") or {}
    groups = gpu_groups_of((pod.get("metadata") or {}).get("labels") or {})
    fraction = 0.0
    if anns.get(c.GPU_FRACTION_ANNOTATION):
        fraction = float(anns[c.GPU_FRACTION_ANNOTATION])
    elif anns.get(c.GPU_MEMORY_ANNOTATION) and node is not None:
        node_mib = float(((node.get("metadata") or {}).get("labels") or {}).get(c.GPU_MEMORY_NODE_LABEL) or 0)
        fraction = float(anns[c.GPU_MEMORY_ANNOTATION]) / node_mib if node_mib > 0 else 1.0
    return whole, fraction, groups if fraction > 0 else []


def node_violations(objs: Iterable[Obj]) -> list[str]:
    nodes: dict[str, Obj] = {}
    pods: list[Obj] = []
    for o in objs:
        kind = o.get("kind")
        if kind == "Node":
            nodes[(o.get("metadata") or {}).get("name", "")] = o
        elif kind == "Pod" and _bound(o):
            pods.append(o)
    used: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])  # whole GPUs, cpu, memory, pods
    shared: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))  # node -> group -> fraction
    out: list[str] = []
    for pod in pods:
        node_name = pod["spec"]["nodeName"]
        node = nodes.get(node_name)
        whole, fraction, groups = _pod_gpus(pod, node)
        requests = pod_requests(pod.get("spec") or {})
        u = used[node_name]
        u[0] += whole
        u[1] += float(requests.get("cpu", Decimal(0)))
        u[2] += float(requests.get("memory", Decimal(0)))
        u[3] += 1
        for g in groups:
            shared[node_name][g] += fraction
    for name, u in sorted(used.items()):
        node = nodes.get(name)
        if node is None:
            continue  # a pod on a node that is gone: nothing to overcommit
        alloc = (node.get("status") or {}).get("allocatable") or {}
        gpus = float(_quantity(alloc.get(c.GPU_RESOURCE, 0)))
        fractions = shared.get(name, {})
        if u[0] + len(fractions) > gpus + EPSILON:
            out.append(f"node {name}: {u[0]:g} whole GPUs and {len(fractions)} shared GPUs bound on {gpus:g} GPUs")
        for g, f in sorted(fractions.items()):
            if f > 1 + EPSILON:
                out.append(f"node {name}: shared GPU {g} holds {f:g} of one GPU")
        for i, res in ((1, "cpu"), (2, "memory"), (3, "pods")):
            if res in alloc and u[i] > float(_quantity(alloc[res])) * (1 + EPSILON):
                out.append(f"node {name}: {res} {u[i]:g} bound on {alloc[res]} allocatable")
    return out


def partial_gangs(objs: Iterable[Obj]) -> dict[str, tuple[int, int, str | None]]:
    """PodGroups with some but fewer than ``minMember`` pods placed: key -> (placed, minMember, stale since)."""
    groups: dict[tuple[str, str], Obj] = {}
    placed: dict[tuple[str, str], int] = defaultdict(int)
    for o in objs:
        m = o.get("metadata") or {}
        if o.get("kind") == "PodGroup":
            groups[(m.get("namespace", ""), m.get("name", ""))] = o
        elif o.get("kind") == "Pod" and (_bound(o) or (m.get("annotations") or {}).get(c.PIPELINED_NODE_ANNOTATION)):
            pg = (m.get("annotations") or {}).get(c.POD_GROUP_ANNOTATION)
            if pg:
                placed[(m.get("namespace", ""), pg)] += 1
    out = {}
    for key, n in sorted(placed.items()):
        pg = groups.get(key)
        if pg is None:
            continue
        min_member = int((pg.get("spec") or {}).get("minMember") or 1)
        if n < min_member:
            since = ((pg.get("metadata") or {}).get("annotations") or {}).get(c.STALE_SINCE_ANNOTATION)
            out[f"{key[0]}/{key[1]}"] = (n, min_member, since)
    return out


def _gang_line(key: str, n: int, min_member: int, since: str | None) -> str:
    return f"gang {key}: {n} of minMember {min_member} pods placed" + (f", stale since {since}" if since else "")


def gang_violations(objs: Iterable[Obj], now: float, grace_s: float) -> list[str]:
    """Gangs partly placed and marked stale longer ago than their grace (one state: a gang that has just
    fallen below minMember is not marked yet; ``GangWatch`` follows gangs across cycles)."""
    if grace_s < 0:
        return []
    return [_gang_line(k, n, m, since) for k, (n, m, since) in partial_gangs(objs).items()
            if since and now - parse_time(since) > grace_s]


class GangWatch:
    """Gangs partly placed for longer than ``allowed_s`` (followed across states: a running gang that falls below
    minMember is marked stale by the next cycle and evicted whole once its grace has passed)."""

    def __init__(self, allowed_s: float) -> None:
        self.allowed_s = allowed_s
        self.since: dict[str, float] = {}  # gang -> when it was first seen partly placed

    def check(self, objs: Iterable[Obj], now: float) -> list[str]:
        partial = partial_gangs(objs)
        self.since = {k: self.since.get(k, now) for k in partial}
        return [_gang_line(k, n, m, since) + f", partly placed for {now - self.since[k]:.0f} s"
                for k, (n, m, since) in partial.items() if now - self.since[k] > self.allowed_s]


def _limit(spec_resources: Obj, res: str) -> float | None:
    """The queue's limit of ``res`` in Queue units, None when unlimited or the resource is unmentioned."""
    r = spec_resources.get(res)
    if not isinstance(r, dict):
        return None
    limit, quota = r.get("limit"), r.get("quota")
    if limit in (None, 0):  # nothing beyond the quota
        return None if quota in (None, -1) else float(quota or 0)
    return None if float(limit) < 0 else float(limit)


def limit_violations(objs: Iterable[Obj]) -> list[str]:
    queues: dict[str, Obj] = {}
    nodes: dict[str, Obj] = {}
    pods: list[Obj] = []
    for o in objs:
        kind = o.get("kind")
        if kind == "Queue":
            queues[(o.get("metadata") or {}).get("name", "")] = o
        elif kind == "Node":
            nodes[(o.get("metadata") or {}).get("name", "")] = o
        elif kind == "Pod" and _bound(o):
            pods.append(o)
    used: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # gpu devices, millicores, MB
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        q = labels.get(c.QUEUE_LABEL) or labels.get(c.LEGACY_QUEUE_LABEL)
        if not q:
            continue
        whole, fraction, groups = _pod_gpus(pod, nodes.get(pod["spec"]["nodeName"]))
        requests = pod_requests(pod.get("spec") or {})
        amounts = (whole + fraction * len(groups), float(requests.get("cpu", Decimal(0))) * 1000,
                   float(requests.get("memory", Decimal(0))) / 1e6)
        seen: set[str] = set()
        while q and q not in seen:  # the queue and its ancestors
            seen.add(q)
            for i, a in enumerate(amounts):
                used[q][i] += a
            q = ((queues.get(q) or {}).get("spec") or {}).get("parentQueue")
    out = []
    for name, u in sorted(used.items()):
        spec = (queues.get(name) or {}).get("spec") or {}
        for i, res in enumerate(("gpu", "cpu", "memory")):
            limit = _limit(spec.get("resources") or {}, res)
            if limit is not None and u[i] > limit * (1 + EPSILON) + EPSILON:
                out.append(f"queue {name}: {res} {u[i]:g} bound above its limit {limit:g}")
    return out


def violations(objs: list[Obj], now: float, stale_grace_s: float) -> list[str]:
    """Every broken invariant in ``objs`` at time ``now`` (see the module's docstring)."""
    return node_violations(objs) + gang_violations(objs, now, stale_grace_s) + limit_violations(objs)
