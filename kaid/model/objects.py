"""Hot-path model classes. Units: GPU in milli-GPU (1000 = one device), cpu in millicores, memory in
bytes. Queue quota and limit keep ``UNLIMITED`` (-1) as a sentinel. The vocabulary (statuses, resources,
reason codes) is in ``kaid.model.vocabulary``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

# kaid/actions and kaid/fairshare import the resource indexes from here until they adopt the vocabulary module
from kaid.api import meta
from kaid.api.constants import DEFAULT_SUBGROUP, SUBGROUP_LABEL
from kaid.model.selectors import selector_matches
from kaid.model.vocabulary import CPU as CPU
from kaid.model.vocabulary import GPU as GPU
from kaid.model.vocabulary import HOLDS_RESOURCES, PodPhase, PodStatus, ReasonCode
from kaid.model.vocabulary import MEM as MEM
from kaid.model.vocabulary import RESOURCES as RESOURCES

if TYPE_CHECKING:
    from kaid.model.fingerprint import ObjectParts
    from kaid.model.journal import Journal
    from kaid.model.podterms import PodTerm, Spread

UNLIMITED = -1

Vec = list[int]


def zero() -> Vec:
    """A resource vector of zeros, indexed by ``Resource``."""
    return [0, 0, 0]


@dataclass(slots=True)
class Reason:
    """A structured, human-readable reason. ``code`` is stable (a ``ReasonCode``); ``message`` is for a person."""

    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"reason": str(self.code), "message": self.message,
                **({"details": self.details} if self.details else {})}


MAX_NODE_GPUS = 4096
"""The most GPUs kai reads on one node (a node of eight GPUs time-sliced 48 ways reports 384); a node reporting more is
read without GPUs, with a problem (``nodes.read_node``), and a pod asking for more is refused and read as asking for
one more than this (``pods.read_parts``): past it, what an object says cannot be true, and reading it literally made a
list of that many devices (an API-valid pod asking for 100,000,000 GPUs, bound by hand, stalled the snapshot build in
``nodes.occupy``)."""
MOST_AMOUNT = 2**53
"""The most millicores or bytes kai reads of a node or a pod (a node's larger amount is read as this, a pod asking
more is refused): a request of 1e30 cpu is valid to the API server, and an amount past 64 bits breaks the placement
solver's model."""


# what a node may run (``Node.roles``): KAI's worker roles, read with restrictSchedulingNodes (``Partition.node_roles``)
NO_ROLE, GPU_WORKER, CPU_WORKER = 0, 1, 2
ANY_ROLE = GPU_WORKER | CPU_WORKER


class Node:
    """A node: what it can hold (``alloc_*``), what its pods hold (``used_*``), and per GPU device the milli-GPU in
    use (``dev_used``, 1000 = whole) and the GPU group sharing it (``dev_group``); ``idle`` counts unused devices."""

    __slots__ = (
        "alloc_cpu", "alloc_mem", "alloc_pods", "dev_group", "dev_used", "ext_alloc", "ext_used", "gpu_mem_mib", "gpus",
        "idle", "index", "labels", "name", "other_held", "ready", "roles", "taints", "unschedulable", "used_cpu",
        "used_mem", "used_pods",
    )

    def __init__(self, name: str, labels: dict[str, str], taints: list[dict[str, str]], unschedulable: bool,
                 ready: bool, cpu: int, mem: int, pods: int, gpus: int, gpu_mem_mib: int) -> None:
        self.name = name
        self.labels = labels
        self.taints = taints
        self.unschedulable = unschedulable
        self.ready = ready
        self.alloc_cpu = cpu
        self.alloc_mem = mem
        self.alloc_pods = pods
        self.gpus = gpus
        self.gpu_mem_mib = gpu_mem_mib
        self.used_cpu = 0
        self.used_mem = 0
        self.used_pods = 0
        self.dev_used: list[int] = [0] * gpus
        self.dev_group: list[str | None] = [None] * gpus
        self.idle = gpus
        self.index = 0
        # extended resources (``rdma/ib``, ``hugepages-2Mi``, ...: ``pods.is_extended``): allocatable, fixed; and
        # what its pods hold of them (None until a pod holds some: most nodes and pods have none)
        self.ext_alloc: Mapping[str, int] = _NO_EXTENDED
        self.ext_used: dict[str, int] | None = None
        self.roles = ANY_ROLE  # the pods it may run: GPU_WORKER (those asking for GPUs), CPU_WORKER (the others)
        # what pods of other schedulers hold here (milli-GPU, cpu, memory; None: none), left out of the capacity that
        # fair share divides (``Snapshot.capacity``)
        self.other_held: list[int] | None = None

    @property
    def free_cpu(self) -> int:
        return self.alloc_cpu - self.used_cpu

    @property
    def free_mem(self) -> int:
        return self.alloc_mem - self.used_mem

    @property
    def free_pods(self) -> int:
        return self.alloc_pods - self.used_pods

    def mem_to_milli(self, mib: int) -> int:
        """A gpu-memory request (MiB) as a share of one of this node's devices."""
        if self.gpu_mem_mib <= 0:
            return 1001  # never fits: the node does not publish its GPU memory
        return -(-mib * 1000 // self.gpu_mem_mib)

    def __repr__(self) -> str:
        return f"Node({self.name}, idle={self.idle}/{self.gpus})"


_NO_EXTENDED: Mapping[str, int] = {}  # a node's extended resources where it has none (read, never written)
# the placement constraints of a pod that has none (``Pod``: tens of thousands are read per snapshot, and three new
# empty containers each were work for the allocator and the garbage collector)
_NO_SELECTOR: Mapping[str, str] = {}
_NO_TERMS: Sequence[list[dict[str, Any]]] = []
_NO_TOLERATIONS: Sequence[dict[str, Any]] = []
# a new pod's phase and status, as module constants: an enum member read through its class (``PodStatus.PENDING``) is
# an attribute lookup through ``EnumType.__getattr__`` on Python 3.11, ~0.3 us, where a constant is ~0.02 us
_PENDING_PHASE: str = PodPhase.PENDING
_PENDING: str = PodStatus.PENDING


class Pod:
    """A pod as the engine sees it: requests (cpu, memory, whole GPUs or a share of ``frac_devices`` GPUs),
    placement constraints, its ``status`` (a ``PodStatus``), node and devices, and the object it was read from."""

    __slots__ = (
        "affinity", "anti", "cpu", "created", "deleted", "devices", "ext", "frac_devices", "gpu_frac", "gpu_group",
        "gpu_mem_mib", "gpu_whole", "job", "key", "labels", "mem", "name", "namespace", "node", "node_selector",
        "phase", "pipeline_action", "pod_affinity", "raw", "releasing", "sig", "spread", "started", "status",
        "tolerations", "uid", "volume_terms",
    )

    def __init__(self, namespace: str, name: str, uid: str) -> None:
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.key = f"{namespace}/{name}"
        self.job: Job | None = None
        self.node: str | None = None
        self.phase: str = _PENDING_PHASE
        self.status: str = _PENDING  # a PodStatus
        self.releasing = False
        self.deleted = 0.0  # when deletion was asked for (releasing pods)
        self.cpu = 0
        self.mem = 0
        self.gpu_whole = 0
        self.gpu_frac = 0  # milli-GPU per device for gpu-fraction pods
        self.gpu_mem_mib = 0  # MiB per device for gpu-memory pods
        self.frac_devices = 0  # devices a shared-GPU pod spans (0 when not shared)
        self.devices: tuple[int, ...] = ()
        self.gpu_group: str | None = None
        # read from the object, never changed in place: a pod without them shares one empty container of each
        self.node_selector: Mapping[str, str] = _NO_SELECTOR
        self.affinity: Sequence[list[dict[str, Any]]] = _NO_TERMS  # required nodeSelectorTerms (OR of ANDs)
        self.tolerations: Sequence[dict[str, Any]] = _NO_TOLERATIONS
        # required inter-pod affinity and anti-affinity terms (``kaid.model.podterms``)
        self.pod_affinity: tuple[PodTerm, ...] = ()
        self.anti: tuple[PodTerm, ...] = ()
        self.spread: tuple[Spread, ...] = ()  # topology spread constraints that must hold (``kaid.model.podterms``)
        # the node affinity of each volume bound to one of its claims (``kaid.model.volumes``): the node must match
        # one term of each (part of ``sig``)
        self.volume_terms: tuple[Sequence[list[dict[str, Any]]], ...] = ()
        self.labels: dict[str, str] = {}
        self.created = 0.0
        self.started = 0.0
        self.sig = ""
        self.pipeline_action = ""
        self.raw: dict[str, Any] | None = None
        # what it requests of extended resources (``pods.is_extended``), by name, in name order (part of ``sig``)
        self.ext: tuple[tuple[str, int], ...] = ()

    @property
    def shared(self) -> bool:
        return self.frac_devices > 0

    @property
    def subgroup(self) -> str:
        """The sub-group of its PodGroup the pod names (KAI: a pod without the label names ``default``)."""
        return self.labels.get(SUBGROUP_LABEL) or DEFAULT_SUBGROUP

    def copy(self) -> Pod:
        """A shallow copy: what a cycle changes on a pod (job, node, status, devices, group) is its own;
        the containers read from the object (labels, selectors, tolerations) are shared and never changed."""
        new = Pod.__new__(Pod)
        new.affinity, new.anti, new.pod_affinity = self.affinity, self.anti, self.pod_affinity
        new.cpu, new.created, new.devices = self.cpu, self.created, self.devices
        new.deleted, new.ext = self.deleted, self.ext
        new.frac_devices, new.gpu_frac, new.gpu_group = self.frac_devices, self.gpu_frac, self.gpu_group
        new.gpu_mem_mib, new.gpu_whole, new.job, new.key = self.gpu_mem_mib, self.gpu_whole, self.job, self.key
        new.labels, new.mem, new.name, new.namespace = self.labels, self.mem, self.name, self.namespace
        new.node, new.node_selector, new.phase = self.node, self.node_selector, self.phase
        new.pipeline_action, new.raw, new.releasing = self.pipeline_action, self.raw, self.releasing
        new.sig, new.started, new.status = self.sig, self.started, self.status
        new.tolerations, new.uid, new.volume_terms = self.tolerations, self.uid, self.volume_terms
        new.spread = self.spread
        return new

    @property
    def active(self) -> bool:
        """Holds or is about to hold resources (``HOLDS_RESOURCES``)."""
        return self.status in HOLDS_RESOURCES

    def gpu_milli_on(self, node: Node | None) -> int:
        """GPU share in milli-GPU; gpu-memory requests convert with the node's device memory."""
        if self.gpu_whole:
            return self.gpu_whole * 1000
        if not self.frac_devices:
            return 0
        if self.gpu_frac:
            return self.gpu_frac * self.frac_devices
        if node is not None and node.gpu_mem_mib > 0:
            return min(1000, node.mem_to_milli(self.gpu_mem_mib)) * self.frac_devices
        return 0

    def device_share(self, node: Node) -> int:
        """What a shared-GPU pod holds of each device it is on, in milli-GPU: at least 1, so that a device that
        holds one is never counted idle (a gpu-memory pod on a node that does not publish its GPU memory reads 0)."""
        return max(1, min(1000, self.gpu_milli_on(node) // self.frac_devices))

    def __repr__(self) -> str:
        return f"Pod({self.key}, {self.status}, node={self.node})"


class _Unwritten(list[Any]):
    """The empty list a job's ``errors``, ``warnings`` and ``subgroups`` are until one is written: read like any empty
    list, written it raises (write through ``own_errors`` / ``own_warnings``, or set a new list). A cold snapshot reads
    tens of thousands of jobs, and their three empty lists were 81,000 of the 214,000 objects that the garbage
    collector's young collection after a 4,000-node build traverses."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a job's unwritten empty list is shared: add with own_errors / own_warnings, or set a new list")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse


UNWRITTEN: list[Any] = _Unwritten()


def own_errors(job: Job) -> list[Reason]:
    """``job.errors`` as a list of its own, to add to."""
    errors = job.errors
    if type(errors) is _Unwritten:
        errors = job.errors = []
    return errors


def own_warnings(job: Job) -> list[Reason]:
    """``job.warnings`` as a list of its own, to add to."""
    warnings = job.warnings
    if type(warnings) is _Unwritten:
        warnings = job.warnings = []
    return warnings


NO_BACKOFF = -1  # a PodGroup's spec.schedulingBackoff when it sets none (KAI's NoSchedulingBackoff)
SINGLE_BACKOFF = 1  # ... tried once per node pool (KAI's SingleSchedulingBackoff): its messages name the pool


class Job:
    """A PodGroup: the unit of gang scheduling."""

    __slots__ = (
        "created",
        "errors",
        "explicit",
        "key",
        "last_eviction",
        "mark_unschedulable",
        "min_member",
        "min_subgroup",
        "name",
        "namespace",
        "pods",
        "preempt_never",
        "preemptibility",
        "preemptible",
        "preemption_delay",
        "preferred_level",
        "priority",
        "priority_class",
        "queue",
        "raw",
        "request_milli",
        "required_level",
        "scheduling_backoff",
        "stale_grace",
        "stale_since",
        "subgroups",
        "succeeded",
        "topology",
        "warnings",
    )

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name
        self.key = f"{namespace}/{name}"
        self.queue = ""
        self.min_member = 1
        self.priority = 0
        self.priority_class = ""
        self.preemptible = True
        self.preempt_never = False
        self.preemptibility: str | None = None  # explicit preemptible / non-preemptible, if any
        self.pods: list[Pod] = []
        self.created = 0.0
        # (these two and ``subgroups`` start as the shared ``UNWRITTEN``: add with ``own_errors`` / ``own_warnings``)
        self.errors: list[Reason] = UNWRITTEN  # the job cannot be scheduled until these are fixed
        self.warnings: list[Reason] = UNWRITTEN  # scheduled anyway, but the user should know
        self.topology: str | None = None
        self.required_level: str | None = None
        self.preferred_level: str | None = None
        self.stale_grace: float | None = None
        self.stale_since: float | None = None
        # spec.preemptionDelay (seconds; None: none) and the last eviction of its pods (KAI's annotation): it may not
        # evict anyone before max(created, last eviction) + the delay
        self.preemption_delay: float | None = None
        self.last_eviction: float | None = None
        self.subgroups: list[dict[str, Any]] = UNWRITTEN  # spec.subGroups: name, minMember, minSubGroup, parent
        self.min_subgroup: int | None = None  # spec.minSubGroup: top-level sub-groups needed (None: all)
        self.explicit = False
        self.raw: dict[str, Any] | None = None
        self.request_milli = 0
        # its pods that have finished with phase Succeeded: not in ``pods`` (never placed nor counted), read only so
        # that a job with one is never stale (KAI's PodGroupInfo.IsStale, job_info.go:495)
        self.succeeded = 0
        self.mark_unschedulable = True  # spec.markUnschedulable: PodScheduled=False with the reasons on its pods
        self.scheduling_backoff = NO_BACKOFF  # spec.schedulingBackoff (1: its messages name its node pool)

    def __repr__(self) -> str:
        return f"Job({self.key}, q={self.queue}, min={self.min_member}, pods={len(self.pods)})"


class Queue:
    """A queue of the tree: its spec (quota, limit, over-quota weight per resource, in kai's units), its jobs,
    and what the cycle computes: requested, allocated, deserved and fair share per resource."""

    __slots__ = (
        "alloc_np",
        "allocated",
        "children",
        "created",
        "depth",
        "deserved",
        "display",
        "errors",
        "fair",
        "jobs",
        "limit",
        "name",
        "parent",
        "parent_name",
        "preempt_min_runtime",
        "priority",
        "quota",
        "reclaim_min_runtime",
        "requested",
        "usage",
        "version",
        "weight",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.display = name
        self.parent_name: str | None = None
        self.parent: Queue | None = None
        self.children: list[Queue] = []
        self.priority = 100
        self.quota: Vec = zero()
        self.limit: Vec = zero()
        self.weight: list[float] = [1.0, 1.0, 1.0]
        self.errors: list[Reason] = []
        self.depth = 0
        self.created = 0.0  # creation time: the older queue wins KAI's ties
        self.jobs: list[Job] = []
        self.requested: Vec = zero()
        self.allocated: Vec = zero()
        self.alloc_np: Vec = zero()
        self.deserved: Vec = zero()
        self.fair: Vec = zero()
        self.usage: list[float] = [0.0, 0.0, 0.0]
        self.preempt_min_runtime: float | None = None  # seconds; None: unset (an ancestor's, or none)
        self.reclaim_min_runtime: float | None = None
        # bumped whenever ``allocated`` changes here or below (``model.queues.charge``): what the job order
        # caches about a queue is valid while its version stands
        self.version = 0

    def path(self) -> list[Queue]:
        """This queue and its ancestors, leaf first."""
        out: list[Queue] = []
        q: Queue | None = self
        while q is not None:
            out.append(q)
            q = q.parent
        return out

    def effective_limit(self, r: int) -> int:
        """The hard cap for resource r: -1 -> unlimited, 0/unset -> the quota (nothing beyond it)."""
        lim = self.limit[r]
        if lim == UNLIMITED:
            return UNLIMITED
        if lim == 0:
            return self.quota[r]  # quota may itself be -1 (unlimited)
        return lim

    def __repr__(self) -> str:
        return f"Queue({self.name})"


@dataclass(slots=True)
class ObjectProblem:
    """A bad object that is not a job (a Queue, a Topology, ...): reported, never fatal."""

    kind: str
    name: str
    namespace: str | None
    reason: Reason

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "namespace": self.namespace, **self.reason.to_dict()}


def malformed(kind: str, obj: dict[str, Any], err: Exception, namespaced: bool = True) -> ObjectProblem:
    """The problem of an object that could not be read at all (a field of the wrong type: a spec that is a string, a
    container that is a number), which a snapshot leaves out. The API server refuses such an object, so only a
    hand-written snapshot or manifest holds one; reading on would stop the whole snapshot for it."""
    name = meta.name(obj)
    namespace = meta.namespace(obj) if namespaced else None
    shown = f"{namespace}/{name}" if namespace else name
    return ObjectProblem(kind, name, namespace, Reason(
        ReasonCode.MALFORMED_OBJECT, f"{kind} {shown or '(no name)'} is malformed and left out ({type(err).__name__}: "
        f"{err}): fix it so that each field has the type the Kubernetes API gives it", {"error": type(err).__name__}))


@dataclass(slots=True)
class PriorityClass:
    """A priority class: its value, and whether it never preempts (``preemptionPolicy: Never``)."""

    name: str
    value: int
    preempt_never: bool = False


@dataclass(slots=True)
class Budget:
    """A PodDisruptionBudget, reduced to what the engine needs."""

    namespace: str
    name: str
    selector: dict[str, Any]
    disruptions_allowed: int

    def covers(self, pod: Pod) -> bool:
        """Whether evicting ``pod`` counts against this budget: same namespace, and a selector that names
        something and matches the pod's labels (a budget with an empty selector covers nothing here)."""
        if pod.namespace != self.namespace or not (self.selector.get("matchLabels") or
                                                   self.selector.get("matchExpressions")):
            return False
        return selector_matches(self.selector, pod.labels)


@dataclass
class Snapshot:
    """The cluster as one cycle sees it (``kaid.model.build.build_snapshot``); ``now`` is the only clock the engine
    reads."""

    nodes: list[Node]
    queues: dict[str, Queue]
    jobs: dict[str, Job]
    pods: list[Pod]
    topologies: dict[str, list[str]]
    priority_classes: dict[str, PriorityClass]
    now: float
    problems: list[ObjectProblem] = field(default_factory=list)
    budgets: list[Budget] = field(default_factory=list)
    node_by_name: dict[str, Node] = field(default_factory=dict)
    # set when the objects are a live model's own (``kaid.model.journal``): every write a cycle makes to a pod, node
    # or job is recorded there first, to be undone
    journal: Journal | None = None
    # set by a live model: the fingerprint of its nodes, pods and jobs as handed out (``kaid.model.fingerprint``),
    # kept up to date as they change; None for plain objects (the memory of vain searches hashes them all)
    parts: ObjectParts | None = None

    def __post_init__(self) -> None:
        if not self.node_by_name:
            self.node_by_name = {n.name: n for n in self.nodes}
        for i, n in enumerate(self.nodes):
            n.index = i

    def release(self) -> None:
        """Let go of a snapshot of plain objects once its caller is done with it (the simulator's and a dry-run's
        cycles). Its pods and jobs refer to each other, as do the queues of its tree, so a dropped snapshot waits for
        the garbage collector: promoted by the young collection that follows its build, the dead snapshots of cold
        cycles piled up until a collection of that older generation (at 4,000 nodes, ten snapshots and 1.2 s).
        Released, reference counting frees it as soon as nothing else holds it. It is left empty: a use after this
        finds no node, queue, job or pod. A live model's snapshot (``journal`` set) holds the model's own objects:
        never released."""
        if self.journal is not None:
            raise ValueError("a live model's snapshot holds the model's objects: it is never released")
        for pod in self.pods:  # (every job's pods are among them)
            pod.job = None
        for q in self.queues.values():
            q.parent, q.children, q.jobs = None, [], []
        self.nodes, self.pods, self.budgets, self.problems = [], [], [], []
        self.queues, self.jobs, self.node_by_name = {}, {}, {}

    @property
    def roots(self) -> list[Queue]:
        return [q for q in self.queues.values() if q.parent is None]

    def capacity(self) -> Vec:
        """Schedulable capacity: Ready, schedulable nodes, less what other schedulers' pods hold on them."""
        cap = zero()
        for n in self.nodes:
            if n.ready and not n.unschedulable:
                gpus = n.gpus * 1000 if n.roles & GPU_WORKER else 0  # (KAI: a node that may run no GPU pod counts none)
                held = n.other_held
                if held is None:
                    cap[GPU] += gpus
                    cap[CPU] += n.alloc_cpu
                    cap[MEM] += n.alloc_mem
                else:  # (KAI's proportion: what other schedulers' pods hold is no queue's to share)
                    cap[GPU] += max(gpus - held[GPU], 0)
                    cap[CPU] += max(n.alloc_cpu - held[CPU], 0)
                    cap[MEM] += max(n.alloc_mem - held[MEM], 0)
        return cap
