"""Node predicates: what kube-scheduler's filters check, as plain functions over the model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kaid.model.nodes import short
from kaid.model.objects import ANY_ROLE, CPU_WORKER, GPU_WORKER, MOST_AMOUNT, Node, Pod
from kaid.model.pods import EPHEMERAL_STORAGE, HOST_PORT
from kaid.model.selectors import matches_expression
from kaid.model.vocabulary import NodeFailure


def tolerates(tolerations: Sequence[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """Whether one of the tolerations tolerates the taint (kube-scheduler's rule)."""
    for tol in tolerations:
        effect = tol.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        op = tol.get("operator") or "Equal"
        key = tol.get("key")
        if op == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and str(tol.get("value") or "") == str(taint.get("value") or ""):
            return True
    return False


def static_failure(node: Node, pod: Pod) -> NodeFailure | None:
    """The first node-level reason the pod can never go to this node this cycle, or None."""
    if not node.ready:
        return NodeFailure.NOT_READY
    if node.unschedulable:
        return NodeFailure.UNSCHEDULABLE
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return NodeFailure.NODE_SELECTOR
    if pod.affinity and not any(
        all(matches_expression(e, node.labels, node.name) for e in term) for term in pod.affinity
    ):
        return NodeFailure.AFFINITY
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(pod.tolerations, taint):
            return NodeFailure.TAINT
    if node.roles != ANY_ROLE and not node.roles & (GPU_WORKER if pod.gpu_whole or pod.frac_devices else CPU_WORKER):
        return NodeFailure.NODE_ROLE
    for terms in pod.volume_terms:
        if not any(all(matches_expression(e, node.labels, node.name) for e in term) for term in terms):
            return NodeFailure.VOLUME_NODE_AFFINITY
    if pod.ext and any(extended_alloc(node, name) < amount for name, amount in pod.ext):
        return NodeFailure.INSUFFICIENT_EXTENDED  # (all of it would not do)
    return None


def extended_alloc(node: Node, name: str) -> int:
    """What the node has of an extended resource in all: one of each host port (``pods.HOST_PORT``); ephemeral
    storage without bound where the node does not report it (a kubelet always does; kwok's and hand-written nodes
    often do not, and kube-scheduler would place nothing that asks for it there)."""
    have = node.ext_alloc.get(name)
    if have is not None:
        return have
    return 1 if name.startswith(HOST_PORT) else MOST_AMOUNT if name == EPHEMERAL_STORAGE else 0


def extended_free(node: Node, name: str) -> int:
    """What the node has free of an extended resource now."""
    used = node.ext_used
    return extended_alloc(node, name) - (used.get(name, 0) if used else 0)


def extended_failure(node: Node, pod: Pod) -> NodeFailure | None:
    """The first of the pod's extended resources the node lacks now (``extended_room``), or None."""
    for name, amount in pod.ext:
        if extended_free(node, name) < amount:
            return NodeFailure.HOST_PORT if name.startswith(HOST_PORT) else NodeFailure.INSUFFICIENT_EXTENDED
    return None


def extended_room(node: Node, pod: Pod) -> int:
    """How many pods of ``pod``'s extended resources (``Pod.ext``; at least one) the node has room for now."""
    room = -1
    for name, amount in pod.ext:
        r = extended_free(node, name) // amount
        if room < 0 or r < room:
            room = r
    return room if room > 0 else 0


# one device as a tuple, one per device number: the devices of a one-GPU pod or a one-device shared pod, most
# placements, are these instead of a new tuple each (and a list before it): every new tuple is a tracked object, which
# counts toward the collector's next young collection (bench_allocate at 4,000 nodes: 18,865 of the 83,616 objects a
# cold cycle left, and two young collections in the cycle)
_ONE_DEVICE: tuple[tuple[int], ...] = tuple((d,) for d in range(64))


def one_device(d: int) -> tuple[int]:
    """``(d,)``, the same tuple for every pod on device ``d``."""
    return _ONE_DEVICE[d] if d < 64 else (d,)


def shared_devices(node: Node, pod: Pod, spread: bool = False) -> tuple[int, ...] | None:
    """Devices for a shared-GPU pod: an existing GPU group with room first (the tightest, or the
    emptiest when spreading), then an idle device. None when it does not fit, which on an over-committed node (pods
    holding GPUs beyond its devices, ``nodes.short``) is until its idle GPUs less those, plus the groups with room,
    are as many as the pod's devices (KAI's ``NodeInfo.isTaskAllocatableOnNonAllocatedResources``, node_info.go:348
    at d5bc503a)."""
    share = pod.gpu_frac if pod.gpu_frac else node.mem_to_milli(pod.gpu_mem_mib)
    if share > 1000:
        return None
    used = node.dev_used
    if pod.frac_devices == 1:  # most: the best partly used device with room in one pass, else the first idle one
        best, best_used = -1, 0
        for d in range(node.gpus):
            u = used[d]
            if u > 0 and u + share <= 1000 and (best < 0 or (u < best_used if spread else u > best_used)):
                best, best_used = d, u
        if len(used) > node.gpus and node.idle - short(node) < (0 if best >= 0 else 1):  # (over-committed input)
            return None
        if best >= 0:
            return one_device(best)
        try:
            return one_device(used.index(0, 0, node.gpus))
        except ValueError:
            return None
    chosen: list[int] = []
    partial = [d for d in range(node.gpus) if used[d] > 0 and used[d] + share <= 1000]
    partial.sort(key=lambda d: (used[d], d) if spread else (-used[d], d))
    if node.idle - short(node) < max(0, pod.frac_devices - len(partial)):
        return None
    idle = [d for d in range(node.gpus) if used[d] == 0]
    for d in partial + idle:
        if len(chosen) == pod.frac_devices:
            break
        chosen.append(d)
    return tuple(chosen) if len(chosen) == pod.frac_devices else None


def resource_failure(node: Node, pod: Pod) -> NodeFailure | None:
    """The first resource the node lacks for the pod right now, or None."""
    if node.used_pods + 1 > node.alloc_pods:
        return NodeFailure.TOO_MANY_PODS
    if node.used_cpu + pod.cpu > node.alloc_cpu:
        return NodeFailure.INSUFFICIENT_CPU
    if node.used_mem + pod.mem > node.alloc_mem:
        return NodeFailure.INSUFFICIENT_MEMORY
    if pod.ext and not extended_room(node, pod):
        return extended_failure(node, pod)
    if pod.gpu_whole and node.idle < pod.gpu_whole:
        return NodeFailure.INSUFFICIENT_GPU
    if pod.frac_devices:
        if pod.gpu_mem_mib and node.gpus and node.gpu_mem_mib <= 0:
            return NodeFailure.NO_GPU_MEMORY_LABEL
        if shared_devices(node, pod) is None:
            return NodeFailure.INSUFFICIENT_GPU_SHARE if node.gpus else NodeFailure.INSUFFICIENT_GPU
    return None


def room_for(node: Node, pod: Pod) -> int:
    """How many pods of ``pod``'s shape (whole GPUs, cpu, memory, one pod slot each; shared GPUs aside) the
    node can take now, on resources alone."""
    room = node.alloc_pods - node.used_pods
    if pod.gpu_whole and node.idle // pod.gpu_whole < room:  # (comparisons: a call of min() costs more)
        room = node.idle // pod.gpu_whole
    if pod.cpu and (node.alloc_cpu - node.used_cpu) // pod.cpu < room:
        room = (node.alloc_cpu - node.used_cpu) // pod.cpu
    if pod.mem and (node.alloc_mem - node.used_mem) // pod.mem < room:
        room = (node.alloc_mem - node.used_mem) // pod.mem
    if pod.ext:
        room = min(room, extended_room(node, pod))
    return room if room > 0 else 0


def whole_devices(node: Node, count: int) -> tuple[int, ...]:
    """The first ``count`` idle devices of the node (each found at C speed)."""
    used, gpus = node.dev_used, node.gpus
    if count == 1:  # (most placements: one GPU)
        try:
            return one_device(used.index(0, 0, gpus))
        except ValueError:
            return ()
    if count <= 0:  # (never asked: as the count is never reached, every idle device)
        return tuple(d for d in range(gpus) if used[d] == 0)
    out: list[int] = []
    d = -1
    try:
        while len(out) < count:
            d = used.index(0, d + 1, gpus)
            out.append(d)
    except ValueError:  # fewer idle than asked
        pass
    return tuple(out)
