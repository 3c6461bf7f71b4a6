"""What the eviction actions' memory of vain searches (``kaid.actions.memory``) reads of a snapshot's nodes, pods and
jobs, part by part, so that the daemon's live model can keep the fingerprint of its objects up to date as they
change (``ObjectParts``) instead of the cycle hashing every object of the cluster each time (issue 15).

A part is a hash of the fields of one object a victim search may read; the parts of a kind are summed (a sum
forgets the order, so a part also holds what orders it: a node its name, by which a snapshot sorts its nodes; a pod
the model's sequence number, the order it hands its pods out in; the jobs' order is hashed apart). Pod labels are
kept apart per namespace: they are read only where a PodDisruptionBudget may select them, so the fingerprint takes
the labels of the namespaces that have a budget and no other (relabelling a pending pod elsewhere changes nothing a
search reads)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaid.model.objects import Job, Node, Pod


def node_fields(n: Node) -> tuple[object, ...]:
    return (n.name, n.ready, n.unschedulable, n.alloc_cpu, n.alloc_mem, n.alloc_pods, n.gpus, n.gpu_mem_mib,
            n.used_cpu, n.used_mem, n.used_pods, tuple(n.dev_used), tuple(n.dev_group),
            repr(sorted(n.labels.items())), repr(n.taints), repr(sorted(n.ext_alloc.items())),
            repr(sorted(n.ext_used.items())) if n.ext_used else None, n.roles,
            tuple(n.other_held) if n.other_held else None)


def pod_fields(p: Pod) -> tuple[object, ...]:
    """A pod's fields but its labels (``labels_of``)."""
    return (p.key, p.uid, p.job.key if p.job is not None else None, p.status, p.phase, p.node, p.devices,
            p.gpu_group, p.releasing, p.deleted, p.started, p.created, p.cpu, p.mem, p.gpu_whole, p.gpu_frac,
            p.gpu_mem_mib, p.frac_devices, p.sig, p.pipeline_action)


def accounted(p: Pod) -> tuple[object, ...]:
    """What a node's reading writes on the templates of the pods it holds (``nodes.occupy``, ``build.node_gone``, a
    reservation pod's whole GPUs): a template made again from the same reading of a pod differs from the last one in
    these fields only."""
    return (p.status, p.devices, p.gpu_group, p.gpu_whole)


def labels_of(p: Pod) -> str:
    return repr(sorted(p.labels.items()))


def job_fields(j: Job, pods: tuple[str, ...]) -> tuple[object, ...]:
    """A job's fields with the keys of its pods, in its order."""
    return (j.key, j.queue, j.min_member, j.min_subgroup, j.priority, j.priority_class, j.preemptible,
            j.preempt_never, j.preemptibility, j.created, len(j.errors), j.topology, j.required_level,
            j.preferred_level, j.stale_grace, j.stale_since, repr(j.subgroups), j.request_milli, j.preemption_delay,
            j.last_eviction, j.succeeded, pods)


@dataclass
class ObjectParts:
    """The sums of a set of nodes, pods and jobs' parts, and the order of the jobs: equal sums, the same objects
    in the same order (but for a hash collision). ``LiveModel`` keeps one up to date; a snapshot it hands out
    carries a copy (``Snapshot.parts``)."""

    nodes: int = 0
    pods: int = 0  # every pod's part but its labels
    labels: dict[str, int] = field(default_factory=dict)  # namespace -> its pods' labels' parts
    jobs: int = 0
    order: int = 0  # hash of the jobs' keys in their order

    def copy(self) -> ObjectParts:
        return ObjectParts(self.nodes, self.pods, dict(self.labels), self.jobs, self.order)

    def key(self, guarded: tuple[str, ...]) -> tuple[int, ...]:
        """The fingerprint of the objects, with the labels of the pods of the ``guarded`` namespaces."""
        return (self.nodes, self.pods, self.jobs, self.order, *(self.labels.get(ns, 0) for ns in guarded))


def node_part(n: Node) -> int:
    return hash(node_fields(n))


def pod_part(p: Pod, seq: int) -> int:
    return hash((seq, pod_fields(p)))


def label_part(p: Pod, seq: int) -> int:
    return hash((seq, p.key, frozenset(p.labels.items())))  # (a third of the time of sorting them)


def job_part(j: Job, pods: tuple[str, ...]) -> int:
    return hash(job_fields(j, pods))
