"""Tentative changes to the cycle's view of the cluster, committed or rolled back as a whole per job
(the role of a statement in KAI's session)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kaid.model.objects import CPU, GPU, MEM, Job, Node, Pod, Queue, Snapshot
from kaid.placement.index import Devices, NodeIndex


@dataclass(slots=True)
class Op:
    kind: str  # allocate | evict | pipeline
    pod: Pod
    node: Node
    devices: Devices
    action: str
    by: str | None = None
    message: str = ""
    prev_status: str = "Pending"
    prev_node: str | None = None
    prev_devices: Devices = ()


@dataclass
class Session:
    snap: Snapshot
    index: NodeIndex
    ops: list[Op] = field(default_factory=list)
    # one job to explain: allocate stops once it is done (later jobs cannot change its fate) and the
    # eviction actions try only it
    focus: str | None = None
    # called with a job's allocations as soon as allocate commits them (the daemon starts binding)
    on_commit: Callable[[list[Op]], None] | None = None

    def committed(self, checkpoint: int) -> None:
        if self.on_commit is not None:
            self.on_commit([op for op in self.ops[checkpoint:] if op.kind == "allocate"])

    def _queue(self, pod: Pod) -> Queue | None:
        return self.snap.queues.get(pod.job.queue) if pod.job else None

    def _charge(self, pod: Pod, node: Node, sign: int) -> None:
        q = self._queue(pod)
        if q is None or pod.job is None:
            return
        vec = (pod.gpu_milli_on(node), pod.cpu, pod.mem)
        np_job = not pod.job.preemptible
        for anc in q.path():
            anc.allocated[GPU] += sign * vec[0]
            anc.allocated[CPU] += sign * vec[1]
            anc.allocated[MEM] += sign * vec[2]
            if np_job:
                anc.alloc_np[GPU] += sign * vec[0]
                anc.alloc_np[CPU] += sign * vec[1]
                anc.alloc_np[MEM] += sign * vec[2]

    def checkpoint(self) -> int:
        return len(self.ops)

    def _place(self, kind: str, status: str, pod: Pod, node: Node, devices: Devices, action: str,
               by: str | None) -> None:
        op = Op(kind, pod, node, devices, action, by=by, prev_status=pod.status, prev_node=pod.node,
                prev_devices=pod.devices)
        self.index.assign(node, pod, devices)
        self._charge(pod, node, +1)
        pod.status = status
        pod.node = node.name
        pod.devices = devices
        if pod.frac_devices and devices:
            pod.gpu_group = node.dev_group[devices[0]]
        self.ops.append(op)

    def allocate(self, pod: Pod, node: Node, devices: Devices, action: str = "allocate") -> None:
        self._place("allocate", "Allocated", pod, node, devices, action, None)

    def pipeline(self, pod: Pod, node: Node, devices: Devices, action: str, by: str | None) -> None:
        """Place a pod onto resources that evictions in this session are freeing; it is bound once the
        victims are gone, and the resources stay reserved for it until then."""
        self._place("pipeline", "Pipelined", pod, node, devices, action, by)

    def evict(self, pod: Pod, action: str, by: str | None, message: str) -> None:
        """Evict a running pod: its resources are free for this session's later placements."""
        node = self.snap.node_by_name[pod.node or ""]
        op = Op("evict", pod, node, pod.devices, action, by=by, message=message, prev_status=pod.status,
                prev_node=pod.node, prev_devices=pod.devices)
        self.index.release(node, pod, pod.devices, planning=True)
        self._charge(pod, node, -1)
        pod.status = "Evicted"
        self.ops.append(op)

    def rollback(self, checkpoint: int) -> None:
        while len(self.ops) > checkpoint:
            op = self.ops.pop()
            if op.kind in ("allocate", "pipeline"):
                self.index.release(op.node, op.pod, op.devices, planning=True)
                self._charge(op.pod, op.node, -1)
            elif op.kind == "evict":
                self.index.assign(op.node, op.pod, op.devices)
                self._charge(op.pod, op.node, +1)
            op.pod.status, op.pod.node, op.pod.devices = op.prev_status, op.prev_node, op.prev_devices

    def allocations(self) -> list[Op]:
        return [op for op in self.ops if op.kind == "allocate"]

    def of_kind(self, kind: str) -> list[Op]:
        return [op for op in self.ops if op.kind == kind]


def job_request(pods: list[Pod], ref: Node | None) -> tuple[int, int, int]:
    g = c = m = 0
    for p in pods:
        g += p.gpu_milli_on(ref)
        c += p.cpu
        m += p.mem
    return g, c, m


def ref_node(snap: Snapshot) -> Node | None:
    return max((n for n in snap.nodes if n.gpu_mem_mib), key=lambda n: n.gpu_mem_mib, default=None)


def job_of(pod: Pod) -> Job:
    assert pod.job is not None
    return pod.job
