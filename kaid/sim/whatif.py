"""What-if edits for ``simulate``: change a queue (``research.gpu.quota=16``), add nodes (``4x8gpu``),
and a generated trace for the leaf queues of a real cluster's snapshot."""

from __future__ import annotations

import copy
import re
from typing import Any

from kaid.sim.cluster import gpu_node
from kaid.sim.workload import QueueLoad, WorkloadProfile

Obj = dict[str, Any]
FIELDS = {"quota", "limit", "overQuotaWeight", "weight"}


def set_queue(objs: list[Obj], expr: str) -> None:
    """Apply ``QUEUE.RESOURCE.FIELD=VALUE`` or ``QUEUE.priority=N`` in place; ValueError says what is wrong."""
    m = re.fullmatch(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?)\.(gpu|cpu|memory)\.(\w+)=(-?[0-9.]+)|"
                     r"([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.priority=(-?[0-9]+)", expr.strip())
    if m is None:
        raise ValueError(f"--set-queue {expr!r}: expected QUEUE.RESOURCE.FIELD=VALUE (for example "
                         "research.gpu.quota=16) or QUEUE.priority=N; RESOURCE is gpu, cpu or memory, FIELD is "
                         "quota, limit or overQuotaWeight")
    queues = {o["metadata"]["name"]: o for o in objs if o.get("kind") == "Queue"}
    name = m.group(1) or m.group(6)
    if name not in queues:
        raise ValueError(f"--set-queue {expr!r}: no queue {name!r} (queues: {', '.join(sorted(queues)) or 'none'})")
    spec = queues[name].setdefault("spec", {})
    if m.group(8) is not None:
        spec["priority"] = int(m.group(8))
        return
    res, field, value = m.group(3), m.group(4), float(m.group(5))
    if field not in FIELDS:
        raise ValueError(f"--set-queue {expr!r}: unknown field {field!r}; use quota, limit or overQuotaWeight")
    field = "overQuotaWeight" if field == "weight" else field
    spec.setdefault("resources", {}).setdefault(res, {})[field] = value


def add_nodes(objs: list[Obj], expr: str) -> list[Obj]:
    """``NxGgpu`` nodes shaped like the cluster's largest GPU node (its labels and allocatable)."""
    m = re.fullmatch(r"(\d+)x(\d+)gpus?", expr.strip())
    if m is None:
        raise ValueError(f"--add-nodes {expr!r}: expected COUNTxGPUSgpu, for example 4x8gpu")
    count, gpus = int(m.group(1)), int(m.group(2))
    if count < 1 or count > 10000:
        raise ValueError(f"--add-nodes {expr!r}: between 1 and 10000 nodes")
    template = max((o for o in objs if o.get("kind") == "Node"),
                   key=lambda o: int(((o.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", 0)),
                   default=None)
    out = []
    for i in range(count):
        name = f"whatif-{gpus}gpu-{i}"
        if template is None:
            out.append(gpu_node(name, gpus))
            continue
        node = copy.deepcopy(template)
        node["metadata"] = {"name": name, "labels": {**(template["metadata"].get("labels") or {}),
                                                     "kubernetes.io/hostname": name}}
        alloc = node.setdefault("status", {}).setdefault("allocatable", {})
        alloc["nvidia.com/gpu"] = str(gpus)
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        node.setdefault("spec", {}).pop("taints", None)
        node["spec"].pop("unschedulable", None)
        out.append(node)
    return out


def profile_for(objs: list[Obj], seed: int, hours: float) -> WorkloadProfile:
    """A generated workload for the leaf queues of a snapshot, sized to keep about 80% of its GPUs busy."""
    queues = [o for o in objs if o.get("kind") == "Queue"]
    parents = {(q.get("spec") or {}).get("parentQueue") for q in queues}
    leaves = sorted(q["metadata"]["name"] for q in queues if q["metadata"]["name"] not in parents)
    if not leaves:
        raise ValueError("the snapshot has no queues to send work to: add Queues or pass --trace")
    gpus = sum(int(((o.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", 0))
               for o in objs if o.get("kind") == "Node")
    per_job = 4.8  # GPU-hours per job of the default mix (kaid.sim.workload)
    rate = max(1.0, 0.8 * max(gpus, 1) / per_job / len(leaves))
    mix = {"train": 0.75, "interactive": 0.15, "inference": 0.10}
    return WorkloadProfile(queues=tuple(QueueLoad(q, rate, mix, max(1, min(64, gpus // 2 or 1))) for q in leaves),
                           hours=hours, seed=seed)
