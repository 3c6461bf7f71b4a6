"""Small builders of Kubernetes objects (plain dicts) for tests."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def node(name: str, gpus: int = 8, cpu: str = "64", memory: str = "512Gi", labels: dict[str, str] | None = None,
         taints: list[Obj] | None = None, ready: bool = True, unschedulable: bool = False,
         gpu_memory: int | None = 81920) -> Obj:
    lab = dict(labels or {})
    if gpu_memory is not None:
        lab["nvidia.com/gpu.memory"] = str(gpu_memory)
    spec: Obj = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": lab}, "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def queue(name: str, parent: str | None = None, gpu: tuple[float, float, float] = (-1, -1, 1),
          priority: int = 100, cpu: tuple[float, float, float] = (-1, -1, 1),
          memory: tuple[float, float, float] = (-1, -1, 1)) -> Obj:
    def res(t: tuple[float, float, float]) -> Obj:
        return {"quota": t[0], "limit": t[1], "overQuotaWeight": t[2]}

    spec: Obj = {"priority": priority, "resources": {"gpu": res(gpu), "cpu": res(cpu), "memory": res(memory)}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def podgroup(name: str, queue: str, min_member: int = 1, ns: str = "default", priority_class: str | None = None,
             created: str = "2026-01-01T00:00:00Z", **spec: Any) -> Obj:
    s: Obj = {"minMember": min_member, "queue": queue, **spec}
    if priority_class:
        s["priorityClassName"] = priority_class
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created}, "spec": s}


def pod(name: str, gpus: int = 0, group: str | None = None, queue: str | None = None, ns: str = "default",
        cpu: str = "1", memory: str = "1Gi", node_name: str | None = None, phase: str | None = None,
        annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
        created: str = "2026-01-01T00:00:00Z", scheduler: str = "kai-scheduler", **spec: Any) -> Obj:
    ann = dict(annotations or {})
    lab = dict(labels or {})
    if group:
        ann["pod-group-name"] = group
    if queue:
        lab["kai.scheduler/queue"] = queue
    req: Obj = {"cpu": cpu, "memory": memory}
    if gpus:
        req["nvidia.com/gpu"] = str(gpus)
    s: Obj = {"schedulerName": scheduler, "containers": [{"name": "c", "resources": {"requests": req}}], **spec}
    if node_name:
        s["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": ann, "labels": lab,
                         "creationTimestamp": created},
            "spec": s, "status": {"phase": phase or ("Running" if node_name else "Pending")}}
