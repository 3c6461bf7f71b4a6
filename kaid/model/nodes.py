"""Reading nodes, and accounting the pods that already hold resources on them (their GPU devices included)."""

from __future__ import annotations

from typing import Any

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.quantity import QuantityError, to_int, to_milli
from kaid.model.objects import Node, Pod

Obj = dict[str, Any]


def read_node(obj: Obj) -> Node:
    """One node: allocatable resources, GPUs and their memory, readiness, taints."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}

    def q(key: str, fn: Any, default: int) -> int:
        try:
            return int(fn(alloc[key])) if key in alloc else default
        except QuantityError:
            return 0

    ready = any(cond.get("type") == "Ready" and cond.get("status") == "True"
                for cond in status.get("conditions") or [] if isinstance(cond, dict))
    if not status.get("conditions"):
        ready = True  # hand-written snapshots often omit conditions
    labels = meta.string_map(meta.labels_of(obj))
    try:
        gpu_mem = int(labels.get(c.GPU_MEMORY_NODE_LABEL, "0"))
    except ValueError:
        gpu_mem = 0
    taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
    return Node(meta.name(obj), labels, taints, bool(spec.get("unschedulable")), ready,
                q("cpu", to_milli, 0), q("memory", to_int, 0), q("pods", to_int, 110),
                q(c.GPU_RESOURCE, to_int, 0), gpu_mem)


def occupy(node: Node, pod: Pod) -> None:
    """Account a pod that already holds resources on a node, including its GPU devices."""
    node.used_cpu += pod.cpu
    node.used_mem += pod.mem
    node.used_pods += 1
    if pod.gpu_whole and node.gpus:
        # the devices it recorded while they are free, then other idle ones, then the recorded ones anyway
        # and then any (an over-committed node shows as a device above 1000): the total is never lost
        recorded = [d for d in dict.fromkeys(pod.devices) if 0 <= d < node.gpus]
        wanted = [d for d in recorded if node.dev_used[d] == 0][: pod.gpu_whole]
        idle = [d for d in range(node.gpus) if node.dev_used[d] == 0]
        for d in [*idle, *recorded]:
            if len(wanted) >= pod.gpu_whole:
                break
            if d not in wanted:
                wanted.append(d)
        for d in range(node.gpus):
            if len(wanted) >= pod.gpu_whole:
                break
            if d not in wanted:
                wanted.append(d)
        k = 0
        while len(wanted) < pod.gpu_whole:
            wanted.append(k % node.gpus)
            k += 1
        for d in wanted:
            if node.dev_used[d] == 0:
                node.idle -= 1
            node.dev_used[d] += 1000
        pod.devices = tuple(wanted)
    elif pod.frac_devices:
        share = min(1000, pod.gpu_milli_on(node) // pod.frac_devices)
        group = pod.gpu_group or f"{pod.key}"
        chosen: list[int] = []
        for k in range(pod.frac_devices):
            gname = group if k == 0 else f"{group}-{k}"
            dev = next((d for d in range(node.gpus) if node.dev_group[d] == gname), None)
            if dev is None and k < len(pod.devices) and 0 <= pod.devices[k] < node.gpus and \
                    node.dev_group[pod.devices[k]] is None and node.dev_used[pod.devices[k]] == 0:
                dev = pod.devices[k]
            if dev is None:
                dev = next((d for d in range(node.gpus) if node.dev_used[d] == 0 and d not in chosen), None)
            if dev is None:
                continue  # over-committed node: keep counting cpu/memory, the GPUs are already gone
            if node.dev_used[dev] == 0:
                node.idle -= 1
            node.dev_used[dev] += share
            node.dev_group[dev] = gname
            chosen.append(dev)
        pod.devices = tuple(chosen)


def reference_node(nodes: list[Node]) -> Node | None:
    """The node whose GPU memory converts a pending gpu-memory request into a share of a GPU before the pod has
    a node: the one with the most memory per device (the request is then the smallest share it can be)."""
    return max((n for n in nodes if n.gpu_mem_mib), key=lambda n: n.gpu_mem_mib, default=None)
