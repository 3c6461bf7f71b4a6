"""Reading nodes, and accounting the pods that already hold resources on them (their GPU devices included)."""

from __future__ import annotations

from typing import Any

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.quantity import QuantityError, to_int, to_milli
from kaid.model.objects import MAX_NODE_GPUS, MOST_AMOUNT, Node, ObjectProblem, Pod, Reason
from kaid.model.pods import gpu_groups_of, is_extended, new_gpu_group
from kaid.model.vocabulary import PodStatus, ReasonCode

Obj = dict[str, Any]


# the conditions that keep pods off a node unless they are False (KAI's CheckNodeConditionPredicate, d5bc503a)
PRESSURE_CONDITIONS = frozenset({"MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"})


def node_ready(conditions: Any) -> bool:
    """Whether a node takes pods and counts for fair share, as KAI reads its conditions: Ready True, and none of
    ``PRESSURE_CONDITIONS`` other than False (a node under memory pressure is tainted by its controller, but a pod
    that tolerates every taint would still go there). A node without conditions is ready (hand-written snapshots
    often omit them)."""
    if not conditions:
        return True
    ready = False
    for cond in conditions:  # (not a list: the node is malformed, ``build.malformed``)
        if not isinstance(cond, dict):
            continue
        kind = cond.get("type")
        if kind == "Ready":
            ready = cond.get("status") == "True"
        elif kind in PRESSURE_CONDITIONS and cond.get("status") != "False":
            return False
    return ready


def read_node(obj: Obj, problems: list[ObjectProblem] | None = None) -> Node:
    """One node: allocatable resources, GPUs and their memory, readiness, taints. A GPU count above
    ``MAX_NODE_GPUS`` is read as none, with a problem added to ``problems``."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}

    def q(key: str, fn: Any, default: int, most: int = MOST_AMOUNT) -> int:
        try:
            return min(int(fn(alloc[key])), most) if key in alloc else default
        except QuantityError:
            return 0

    ready = node_ready(status.get("conditions"))
    labels = meta.string_map(meta.labels_of(obj))
    try:
        gpu_mem = int(labels.get(c.GPU_MEMORY_NODE_LABEL, "0"))
    except ValueError:
        gpu_mem = 0
    taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
    name = meta.name(obj)
    gpus = q(c.GPU_RESOURCE, to_int, 0, MAX_NODE_GPUS + 1)
    if gpus > MAX_NODE_GPUS:
        if problems is not None:
            problems.append(ObjectProblem("Node", name, None, Reason(
                ReasonCode.INVALID_NODE, f"node {name} reports {to_int(alloc[c.GPU_RESOURCE])} GPUs "
                f"({c.GPU_RESOURCE}), more than any node can have (kai reads at most {MAX_NODE_GPUS}); kai places no "
                "GPU pod there until it reports a true count: check the node's GPU device plugin",
                {"most": MAX_NODE_GPUS})))
        gpus = 0
    node = Node(name, labels, taints, bool(spec.get("unschedulable")), ready,
                q("cpu", to_milli, 0), q("memory", to_int, 0), q("pods", to_int, 110), gpus, gpu_mem)
    if not _PLAIN.issuperset(alloc):  # (kwok's and many test nodes report cpu, memory, pods and GPUs alone)
        ext = {str(k): q(k, to_int, 0) for k in alloc if is_extended(str(k))}
        if ext:
            node.ext_alloc = ext
    return node


_PLAIN = frozenset({"cpu", "memory", "pods", c.GPU_RESOURCE})  # a node's allocatable without extended resources


def hold_extended(node: Node, pod: Pod, sign: int = 1) -> None:
    """Account (``sign`` 1) or give back (-1) what a pod holds of extended resources on the node."""
    used = node.ext_used
    if used is None:
        used = node.ext_used = {}
    for name, amount in pod.ext:
        used[name] = used.get(name, 0) + sign * amount


def hold_other(node: Node, pod: Pod) -> None:
    """Account what a pod of another scheduler holds on the node apart (``Node.other_held``), as well as in ``used``."""
    held = node.other_held
    if held is None:
        held = node.other_held = [0, 0, 0]
    held[0] += pod.gpu_whole * 1000 + pod.gpu_frac * pod.frac_devices
    held[1] += pod.cpu
    held[2] += pod.mem


def occupy(node: Node, pod: Pod) -> None:
    """Account a pod that already holds resources on a node, including its GPU devices."""
    node.used_cpu += pod.cpu
    node.used_mem += pod.mem
    node.used_pods += 1
    if pod.ext:
        hold_extended(node, pod)
    if pod.gpu_whole and node.gpus:
        if len(pod.devices) == pod.gpu_whole and _recorded_free(pod.devices, node):
            # (most: as many devices as it holds, recorded, distinct and free: the devices the general rule picks)
            used = node.dev_used
            for d in pod.devices:
                used[d] = 1000
            node.idle -= pod.gpu_whole
            return
        _occupy_whole(node, pod)
    elif pod.gpu_whole:
        pod.devices = ()  # a node without GPUs (it lost them): no device to account, or to give back on eviction
    elif pod.frac_devices:
        _occupy_shared(node, pod)


def _recorded_free(devices: tuple[int, ...], node: Node) -> bool:
    """Whether each of ``devices`` is a device of the node, free, and named once."""
    used, gpus = node.dev_used, node.gpus
    for d in devices:
        if d < 0 or d >= gpus or used[d]:
            return False
    return len(devices) == 1 or len(set(devices)) == len(devices)


def _occupy_whole(node: Node, pod: Pod) -> None:
    """A whole-GPU pod's devices on a node with GPUs, whatever it recorded."""
    # the devices it recorded while they are free, then other idle ones; then, for a pipelined pod (accounted after
    # every other, ``build``), the recorded ones anyway and then any: it waits for those (a device above 1000,
    # ``cycle.ready_pipelined``), which KAI does not count twice (a pipelined pod takes a releasing GPU, not an idle
    # one); for any other pod, devices beyond the node's (``beyond``), which KAI counts: the total is never lost
    recorded = [d for d in dict.fromkeys(pod.devices) if 0 <= d < node.gpus]
    wanted = [d for d in recorded if node.dev_used[d] == 0][: pod.gpu_whole]
    idle = [d for d in range(node.gpus) if node.dev_used[d] == 0]
    if pod.status != PodStatus.PIPELINED:
        for d in idle:
            if len(wanted) >= pod.gpu_whole:
                break
            if d not in wanted:
                wanted.append(d)
        for d in wanted:
            node.dev_used[d] = 1000
        node.idle -= len(wanted)
        while len(wanted) < pod.gpu_whole:
            wanted.append(beyond(node, 1000))
        pod.devices = tuple(wanted)
        return
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


def beyond(node: Node, milli: int = 0) -> int:
    """A device beyond the node's ``gpus``, used ``milli``, for a whole GPU or a shared GPU group of over-committed
    input that no device of the node is left for: placement never offers it (it reads devices up to ``gpus``), it is
    never an idle GPU, and while it is used it counts against the node's idle GPUs (``short``)."""
    node.dev_used.append(milli)
    node.dev_group.append(None)
    return len(node.dev_used) - 1


def short(node: Node) -> int:
    """How many GPUs the node's pods hold beyond its devices (``beyond``). KAI's NodeInfo takes one GPU off the node's
    idle GPUs for every whole GPU and every shared group but a pipelined pod's, whatever the node has (node_info.go
    addTaskResources, gpu_sharing_node_info.go addSharedGPUTaskResourcesPerPodGroup at d5bc503a): its idle GPUs are
    ``node.idle - short(node)``, below 0 while the node is over-committed."""
    used, gpus = node.dev_used, node.gpus
    return 0 if len(used) == gpus else sum(1 for u in used[gpus:] if u)


def _occupy_shared(node: Node, pod: Pod) -> None:
    """Each of a shared-GPU pod's groups on one device: the one the group's other pods are on, else the device
    the pod recorded (a pod without group labels, pipelined, joins the group there), else an idle one."""
    share = pod.device_share(node)
    groups = gpu_groups_of(pod.labels)
    chosen: list[int] = []
    for k in range(pod.frac_devices):
        group = groups[k] if k < len(groups) else None
        dev = next((d for d, g in enumerate(node.dev_group) if g == group), None) if group else None
        own = pod.devices[k] if k < len(pod.devices) else -1
        if dev is None and 0 <= own < node.gpus and own not in chosen and \
                node.dev_used[own] + share <= 1000 and (node.dev_group[own] is None or group is None):
            dev = own
        if dev is None:
            dev = next((d for d in range(node.gpus) if node.dev_used[d] == 0 and d not in chosen), None)
        if dev is None:
            dev = beyond(node)  # an over-committed node: the group holds a GPU the node does not have
        elif node.dev_used[dev] == 0:
            node.idle -= 1
        node.dev_used[dev] += share
        if node.dev_group[dev] is None:
            node.dev_group[dev] = group or new_gpu_group(node, pod, dev, k)
        chosen.append(dev)
    pod.devices = tuple(chosen)
    if chosen:
        pod.gpu_group = node.dev_group[chosen[0]]


def hold_reserved_device(node: Node, group: str | None) -> None:
    """A reservation pod whose group no pod on its node is in (its pods are gone, or it waits for one) still holds a
    whole device at the kubelet until it is deleted: count that device as used."""
    if not group or group in node.dev_group:
        return
    idle = next((d for d in range(node.gpus) if node.dev_used[d] == 0), None)
    if idle is not None:
        node.dev_used[idle] = 1000
        node.dev_group[idle] = group
        node.idle -= 1


def reference_node(nodes: list[Node]) -> Node | None:
    """The node whose GPU memory converts a pending gpu-memory request into a share of a GPU before the pod has
    a node: the one with the most memory per device (the request is then the smallest share it can be)."""
    return max((n for n in nodes if n.gpu_mem_mib), key=lambda n: n.gpu_mem_mib, default=None)
