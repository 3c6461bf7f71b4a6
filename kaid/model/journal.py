"""What a cycle changed on a snapshot that shares its objects with the daemon's live model (issue 15), to be put
back before the model moves on.

``LiveModel.snapshot`` hands out its own pods, nodes and jobs instead of copies. A cycle changes a few fields of
them as it decides, always through the same few places: ``Session`` (a pod placed, pipelined, evicted, put back,
rolled back), ``NodeIndex.assign`` / ``release`` (a node's accounting and GPU groups), ``cycle.ready_pipelined``
(a pipelined pod whose node is gone) and the daemon's ``_hold`` (a job's errors). Each of them tells the
snapshot's ``Journal`` before its first write to an object, which keeps the object's cycle-mutable fields as they
were; ``undo`` writes them back. The model undoes the journal of the snapshot it handed out at its next call, so
that what it keeps is never what a cycle decided, and a cycle costs a record per object it touches instead of a
copy of every object.

Queues are not journaled: the model copies them for each snapshot (there are few), and everything a cycle computes
on them (fair shares, charges, usage) goes on the copies. A snapshot from ``build_snapshot`` has no journal (its
objects are its own). A snapshot with a journal must not be read once its model has moved on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaid.model.objects import own_errors

if TYPE_CHECKING:
    from kaid.model.objects import Job, Node, Pod, Reason

PodFields = tuple["Pod", str, "str | None", "tuple[int, ...]", "str | None"]
NodeFields = tuple["Node", int, int, int, int, "list[int]", "list[str | None]", "dict[str, int] | None"]


class Journal:
    """The cycle-mutable fields of every pod, node and job a cycle wrote to, as they were before its first write."""

    __slots__ = ("jobs", "nodes", "pods")

    def __init__(self) -> None:
        self.pods: dict[int, PodFields] = {}  # id(pod) -> (pod, status, node, devices, gpu_group)
        # id(node) -> (node, used_cpu, used_mem, used_pods, idle, dev_used, dev_group, ext_used)
        self.nodes: dict[int, NodeFields] = {}
        self.jobs: dict[int, tuple[Job, list[Reason]]] = {}  # id(job) -> (job, its errors list)

    def pod(self, pod: Pod) -> None:
        """``pod``'s status, node, devices and GPU group are about to change."""
        if id(pod) not in self.pods:
            self.pods[id(pod)] = (pod, pod.status, pod.node, pod.devices, pod.gpu_group)

    def node(self, node: Node) -> None:
        """``node``'s accounting (used resources, idle GPUs, each device's use and GPU group) is about to change."""
        if id(node) not in self.nodes:
            self.nodes[id(node)] = (node, node.used_cpu, node.used_mem, node.used_pods, node.idle,
                                    list(node.dev_used), list(node.dev_group),
                                    None if node.ext_used is None else dict(node.ext_used))

    def job_errors(self, job: Job) -> list[Reason]:
        """``job``'s errors as a list of this snapshot's own, to add to."""
        if id(job) not in self.jobs:
            self.jobs[id(job)] = (job, job.errors)
            job.errors = list(job.errors)
        return job.errors

    def __len__(self) -> int:
        return len(self.pods) + len(self.nodes) + len(self.jobs)

    def undo(self) -> None:
        """Every object recorded as it was before the cycle's first write to it; the journal is then empty."""
        for pod, status, node_name, devices, group in self.pods.values():
            pod.status, pod.node, pod.devices, pod.gpu_group = status, node_name, devices, group
        for node, cpu, mem, pods, idle, used, groups, ext in self.nodes.values():
            node.used_cpu, node.used_mem, node.used_pods, node.idle, node.ext_used = cpu, mem, pods, idle, ext
            node.dev_used[:] = used
            node.dev_group[:] = groups
        for job, errors in self.jobs.values():
            job.errors = errors
        self.pods.clear()
        self.nodes.clear()
        self.jobs.clear()


def job_errors(journal: Journal | None, job: Job) -> list[Reason]:
    """The errors list to add a snapshot's job error to: the job's own in a snapshot without a journal."""
    return own_errors(job) if journal is None else journal.job_errors(job)
