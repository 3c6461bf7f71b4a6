"""The session every action works on: the cycle's view of the cluster, its config, and tentative operations
that are committed or rolled back as a whole per job (the role of a statement in KAI's session), plus the
reasons and statistics the actions leave for the cycle's decisions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress
from operator import and_, attrgetter, not_
from typing import TYPE_CHECKING, Any

from kaid.actions.carried import Roll
from kaid.actions.limits import PathLimits
from kaid.actions.memory import Recall
from kaid.api.config import Action, SchedulerConfig
from kaid.model.journal import Journal
from kaid.model.nodes import reference_node
from kaid.model.objects import Job, Node, Pod, Reason, Snapshot
from kaid.model.queues import charge, pod_vector
from kaid.model.vocabulary import PLACED_THIS_CYCLE, OpKind, PodStatus
from kaid.placement.index import Devices, NodeIndex

if TYPE_CHECKING:
    from kaid.actions.evictions import Roles

Vec = tuple[int, int, int]
# a pod deleted longer ago than this is stuck (KAI's StuckInReleasing): what it holds is promised to no one
STUCK_RELEASING_SECONDS = 120.0
# what a placement writes, as module constants: an enum member read through its class (``PodStatus.PENDING``) is
# an attribute lookup through ``EnumType.__getattr__`` on Python 3.11, ~0.3 us, where a constant is ~0.02 us
_ALLOCATE, _ALLOCATED = OpKind.ALLOCATE, PodStatus.ALLOCATED
_PIPELINE, _PIPELINED = OpKind.PIPELINE, PodStatus.PIPELINED
_EVICT, _EVICTED, _RESTORE = OpKind.EVICT, PodStatus.EVICTED, OpKind.RESTORE
_KIND = attrgetter("kind")


@dataclass
class AllocateStats:
    """What allocate did, for the benchmarks and the daemon's metrics."""

    gangs_cpsat: int = 0  # gangs placed by the solver
    gangs_improved: int = 0  # gangs placed better than the greedy plan (solver or single-node bound)
    solves: int = 0
    solver_s: float = 0.0
    gang_nodes: list[int] = field(default_factory=list)  # nodes each placed gang spans
    # for each placed gang: (nodes the greedy plan would have used in the same state or None, nodes used)
    gang_vs_greedy: list[tuple[int | None, int]] = field(default_factory=list)
    gang_domains: list[int] = field(default_factory=list)


@dataclass
class VictimStats:
    """One eviction decision, for the benchmark and the explanations."""

    job: str
    action: str
    method: str  # cpsat | first-fit (KAI's victim order)
    gpus_evicted: float
    gpus_placed: float
    pods_evicted: int
    units: int


@dataclass
class EvictionStats:
    """The eviction actions' decisions, for the benchmarks."""

    decisions: list[VictimStats] = field(default_factory=list)
    solver_s: float = 0.0
    solver_skipped: int = 0  # searches where no set cheaper than first-fit's could make room: no solver run


@dataclass(slots=True)
class Op:
    """One tentative operation on a pod, with what it replaced (``prev_*``) so that a rollback restores it."""

    kind: OpKind
    pod: Pod
    node: Node
    devices: Devices
    action: str
    by: str | None = None
    message: str = ""
    prev_status: str = PodStatus.PENDING
    prev_node: str | None = None
    prev_devices: Devices = ()


@dataclass
class Session:
    """What every action works on (``action(session)``): the snapshot, a ``NodeIndex`` over its nodes, the config,
    and the tentative operations. An action takes a ``checkpoint``, places, pipelines and evicts through the
    methods below, and keeps the operations or ``rollback``s to the checkpoint, which restores the nodes'
    accounting, the queues' charges and the pods exactly. The reasons and statistics it leaves become the
    cycle's decisions."""

    snap: Snapshot
    index: NodeIndex
    cfg: SchedulerConfig = field(default_factory=SchedulerConfig)
    ops: list[Op] = field(default_factory=list)
    # one job to explain: allocate stops once it is done (later jobs cannot change its fate) and the
    # eviction actions try only it
    focus: str | None = None
    # called with a job's allocations as soon as allocate commits them (the daemon starts binding)
    on_commit: Callable[[list[Op]], None] | None = None
    reasons: dict[str, list[Reason]] = field(default_factory=dict)  # job key -> why it still waits
    allocate_reasons: dict[str, list[Reason]] = field(default_factory=dict)  # ... as allocate left it
    alloc_stats: AllocateStats = field(default_factory=AllocateStats)
    victim_stats: EvictionStats = field(default_factory=EvictionStats)
    stale: dict[str, float | None] = field(default_factory=dict)  # job key -> stale since (None: clear)
    scenarios_left: int = 0  # victim scenarios the running eviction action may still simulate this cycle
    search_left: int = 0  # ... and the job it searches victims for
    recall: Recall | None = None  # the eviction actions' memory of vain searches, last cycle's and this one's
    # what stays put for the whole cycle, worked out once (``total``, ``ref``, ``small_ref``, ``releasing``)
    _fixed: dict[str, object] = field(default_factory=dict, init=False, repr=False)
    _releasing: list[Pod] | None = field(default=None, init=False, repr=False)
    _by_queue: dict[str, list[Job]] | None = field(default=None, init=False, repr=False)
    _places: dict[str, dict[int, int]] = field(default_factory=dict, init=False, repr=False)  # ``places``
    # id(job) -> the pods of a job of one pod set in task order (``scenario.tasks``): a pod's task key and a job's pods
    # stay put in a cycle
    task_orders: dict[int, list[Pod]] = field(default_factory=dict, init=False, repr=False)
    # the limits and quotas on each queue's path (``limits.PathLimits``): a queue's limits and quotas are read from its
    # spec when the snapshot is built, and stay put in a cycle
    path_limits: PathLimits = field(default_factory=PathLimits, init=False, repr=False)
    # id(job) -> the fewest whole GPUs a pod of the job takes, 0 where one takes none (``scenario.stuck``): a job's pods
    # and what they ask stay put in a cycle
    whole_least: dict[int, int] = field(default_factory=dict, init=False, repr=False)
    _evicts: dict[int, list[Op]] = field(default_factory=dict, init=False, repr=False)  # id(pod) -> its EVICT ops
    # the snapshot's record of what the cycle changes on objects it shares with a live model (``kaid.model.journal``)
    _journal: Journal | None = field(default=None, init=False, repr=False)
    # the eviction actions' waiting jobs and candidate victims, kept from one action to the next (``evictions.Roles``)
    roles: Roles | None = field(default=None, init=False, repr=False)
    # the snapshot's jobs as the cycle began, read once (a live model's snapshot with a memory: ``carried.Roll``)
    roll: Roll | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._journal = self.snap.journal

    @property
    def total(self) -> Vec:
        """The schedulable capacity (Ready, schedulable nodes)."""
        if "total" not in self._fixed:
            self._fixed["total"] = capacity(self.snap.nodes)
        return self._fixed["total"]  # type: ignore[return-value]

    def jobs_in(self, queue: str) -> list[Job]:
        """The snapshot's jobs of a queue."""
        if self._by_queue is None:
            self._by_queue = {}
            for job in self.snap.jobs.values():
                self._by_queue.setdefault(job.queue, []).append(job)
        return self._by_queue.get(queue, [])

    def places(self, queue: str) -> dict[int, int]:
        """id(job) -> its index in ``jobs_in(queue)`` (made once per queue)."""
        at = self._places.get(queue)
        if at is None:
            at = self._places[queue] = {id(job): i for i, job in enumerate(self.jobs_in(queue))}
        return at

    @property
    def ref(self) -> Node | None:
        """The GPU a gpu-memory request is sized against for limits: the largest (KAI's capacity policy)."""
        if "ref" not in self._fixed:
            self._fixed["ref"] = reference_node(self.snap.nodes)
        return self._fixed["ref"]  # type: ignore[return-value]

    @property
    def small_ref(self) -> Node | None:
        """... and for fair share and the order of queues: the smallest (KAI's proportion plugin)."""
        if "small_ref" not in self._fixed:
            # (the first of the least, as a walk finds it, at C speed)
            self._fixed["small_ref"] = min(filter(_GPU_MEM, self.snap.nodes), key=_GPU_MEM, default=None)
        return self._fixed["small_ref"]  # type: ignore[return-value]

    def committed(self, checkpoint: int) -> None:
        """A job's operations since ``checkpoint`` stand: hand its allocations to ``on_commit``."""
        if self.on_commit is not None:
            self.on_commit([op for op in self.ops[checkpoint:] if op.kind == OpKind.ALLOCATE])

    def _charge(self, pod: Pod, node: Node, sign: int) -> None:
        job = pod.job
        if job is not None and (q := self.snap.queues.get(job.queue)) is not None:
            charge(q, pod_vector(pod, node), not job.preemptible, sign)

    def checkpoint(self) -> int:
        """A point to ``rollback`` or ``undo`` to."""
        return len(self.ops)

    def _place(self, kind: OpKind, status: str, pod: Pod, node: Node, devices: Devices, action: str,
               by: str | None) -> None:
        op = Op(kind, pod, node, devices, action, by, "", pod.status, pod.node, pod.devices)
        if self._journal is not None:
            self._journal.pod(pod)
        self.index.assign(node, pod, devices)
        self._charge(pod, node, +1)
        _put(pod, status, node, devices)
        self.ops.append(op)

    def allocate(self, pod: Pod, node: Node, devices: Devices, action: str = Action.ALLOCATE) -> None:
        """Place a pending pod on free resources of ``node`` (``devices``: the GPUs it gets); bound by the cycle."""
        self._place(_ALLOCATE, _ALLOCATED, pod, node, devices, action, None)

    def pipeline(self, pod: Pod, node: Node, devices: Devices, action: str, by: str | None) -> None:
        """Place a pod onto resources that evictions in this session are freeing; it is bound once the
        victims are gone, and the resources stay reserved for it until then."""
        self._place(_PIPELINE, _PIPELINED, pod, node, devices, action, by)

    def pipeline_all(self, job: Job, placements: list[tuple[Pod, Node, Devices]], action: str, by: str | None) -> None:
        """``pipeline`` each of ``placements`` (pods of ``job``) in order, with what they hold charged to the job's
        queue at once (``_charge`` per pod walked the queue path for each: a victim scenario pipelines the pending
        job's whole batch, bench_victims: 2,368 pods a first-fit cycle); nothing between them reads the queue."""
        journal, index, ops = self._journal, self.index, self.ops
        g = c = m = 0
        for pod, node, devices in placements:
            if pod.status == _EVICTED and self._home(pod, node, devices) and self.restore(pod, devices):
                continue  # back onto the node it was evicted from: not moved (``_home``)
            op = Op(_PIPELINE, pod, node, devices, action, by, "", pod.status, pod.node, pod.devices)
            if journal is not None:
                journal.pod(pod)
            index.assign(node, pod, devices)
            if pod.job is job:
                g += pod.gpu_milli_on(node)
                c += pod.cpu
                m += pod.mem
            else:  # (not the job's: charged on its own)
                self._charge(pod, node, +1)
            _put(pod, _PIPELINED, node, devices)
            ops.append(op)
        if placements and (q := self.snap.queues.get(job.queue)) is not None:
            charge(q, (g, c, m), not job.preemptible)

    def evict(self, pod: Pod, action: str, by: str | None, message: str) -> None:
        """Evict a running pod: its resources are free for this session's later placements."""
        node = self.snap.node_by_name[pod.node or ""]
        op = Op(_EVICT, pod, node, pod.devices, action, by, message, pod.status, pod.node, pod.devices)
        if self._journal is not None:
            self._journal.pod(pod)
        self.index.release(node, pod, pod.devices, planning=True)
        self._charge(pod, node, -1)
        pod.status = _EVICTED
        self.ops.append(op)
        self._evicts.setdefault(id(pod), []).append(op)

    def evict_all(self, job: Job, pods: list[Pod], action: str, by: str | None, message: str) -> None:
        """``evict`` each of ``pods`` (of ``job``) in order, with what they held given back by the job's queue at once
        (a victim unit's pods, evicted in every scenario that names it: bench_victims, 801 pods a first-fit cycle)."""
        nodes, journal, index, ops, evicts = self.snap.node_by_name, self._journal, self.index, self.ops, self._evicts
        g = c = m = 0
        for pod in pods:
            node = nodes[pod.node or ""]
            op = Op(_EVICT, pod, node, pod.devices, action, by, message, pod.status, pod.node, pod.devices)
            if journal is not None:
                journal.pod(pod)
            index.release(node, pod, pod.devices, planning=True)
            if pod.job is job:
                g += pod.gpu_milli_on(node)
                c += pod.cpu
                m += pod.mem
            else:  # (not the job's: charged on its own)
                self._charge(pod, node, -1)
            pod.status = _EVICTED
            ops.append(op)
            evicts.setdefault(id(pod), []).append(op)
        if pods and (q := self.snap.queues.get(job.queue)) is not None:
            charge(q, (-g, -c, -m), not job.preemptible)

    def _home(self, pod: Pod, node: Node, devices: Devices) -> bool:
        """Whether pipelining an evicted pod onto ``node``'s ``devices`` puts it back where it runs: the node its
        latest eviction took it from, and, for a shared-GPU pod, the same devices (its GPU groups). KAI's statement
        unevicts a pod pipelined onto the node it is being evicted from (``Statement.Pipeline``, statement.go: the
        pod is still on the node; only a shared-GPU pod on another GPU group moves): whole GPUs have no device
        identity there, so a whole-GPU pod placed on other devices of its own node keeps running, and so does a
        pod without GPUs. Only a pod that was running when the cycle began: one allocate or a move placed in this
        cycle stands by that placement's own operation."""
        stack = self._evicts.get(id(pod))
        if not stack:
            return False
        evicted = stack[-1]
        return evicted.node is node and evicted.prev_status != _ALLOCATED and evicted.prev_status != _PIPELINED \
            and (not pod.frac_devices or devices == evicted.devices)

    def placed_this_cycle(self, pod: Pod) -> bool:
        """Whether the pod's latest eviction took it from a place this cycle gave it (allocated or pipelined)."""
        stack = self._evicts.get(id(pod))
        return stack is not None and bool(stack) and stack[-1].prev_status in PLACED_THIS_CYCLE

    def restore(self, pod: Pod, devices: Devices | None = None) -> bool:
        """Put an evicted (or moved) pod back where it was, if that place is free now: it was not a victim.
        ``devices``: other devices of its node it goes back onto (``_home``: a pod pipelined back onto its own
        node); the operation carries them, for ``rollback`` and ``redo``."""
        stack = self._evicts.get(id(pod))  # its latest eviction (was a scan of every operation: quadratic)
        if not stack:
            return False
        evicted = stack[-1]
        status = pod.status
        if status != _EVICTED and status != _PIPELINED:
            return False
        if status == _PIPELINED and evicted.prev_status == _PIPELINED and pod.node == evicted.prev_node:
            return False  # a pipelined pod taken as a victim, back where it was pipelined: nothing to put back
        if devices is None:
            devices = evicted.devices
        index = self.index
        placed = self.snap.node_by_name.get(pod.node or "") if status == _PIPELINED else None
        if placed is not None and placed is not evicted.node:
            # where it was moved to is another node: whether it fits back reads only its old node
            if not index.fits_exactly(evicted.node, pod, devices):
                return False
            index.release(placed, pod, pod.devices, planning=True)
        elif placed is not None:
            index.release(placed, pod, pod.devices, planning=True)
            if not index.fits_exactly(evicted.node, pod, devices):
                index.assign(placed, pod, pod.devices)
                return False
        elif not index.fits_exactly(evicted.node, pod, devices):
            return False
        op = Op(_RESTORE, pod, evicted.node, devices, evicted.action, evicted.by, "", status, pod.node,
                pod.devices)
        if self._journal is not None:  # (recorded by its eviction already)
            self._journal.pod(pod)
        back = evicted.node
        index.assign(back, pod, devices)
        job = pod.job  # (``_charge`` inline: one charge for a moved pod's way back, its move given back with it)
        if job is not None and (q := self.snap.queues.get(job.queue)) is not None:
            g = pod.gpu_milli_on(back)
            if placed is None:
                charge(q, (g, pod.cpu, pod.mem), not job.preemptible)
            else:
                charge(q, (g - pod.gpu_milli_on(placed), 0, 0), not job.preemptible)
        pod.status, pod.node, pod.devices = evicted.prev_status, evicted.prev_node, devices
        self.ops.append(op)
        return True

    def _standing(self, kinds: tuple[OpKind, ...], since: int = 0) -> list[Op]:
        """The operations of these kinds (from checkpoint ``since`` on) that stand: each pod's last one, unless a
        later restore of the pod undid it. A restore undoes the pod's latest eviction and what came after it (a move's
        pipeline); what came before stands: a pod allocate placed, then evicted and put back, keeps its bind. Where no
        restore is among them (most cycles), each pod's last operation of these kinds, found without a list per pod
        (a cycle asks twice, at 4,000 nodes over 19,393 operations: 28.6 -> 10.2 ms, and the 19,358 lists were a young
        collection's worth of tracked objects)."""
        ops = self.ops[since:] if since else self.ops
        restore, evict = OpKind.RESTORE, OpKind.EVICT
        if restore not in map(_KIND, ops):
            last_of = {id(op.pod): op for op in ops if op.kind in kinds}
            kept = {id(op) for op in last_of.values()}
            return [op for op in ops if id(op) in kept]
        done: dict[int, list[Op]] = {}  # id(pod) -> its operations that stand, in order
        for op in ops:
            mine = done.setdefault(id(op.pod), [])
            if op.kind == restore:
                while mine and mine.pop().kind != evict:
                    pass
            else:
                mine.append(op)
        last: set[int] = set()  # id(op) of each pod's last standing operation of these kinds
        for mine in done.values():
            found = next((op for op in reversed(mine) if op.kind in kinds), None)
            if found is not None:
                last.add(id(found))
        return [op for op in ops if id(op) in last]

    def evictions(self, since: int = 0) -> list[Op]:
        """The evictions that stand (from checkpoint ``since`` on): not those of pods put back in place. A pod
        pipelined in this cycle and then evicted only loses its pipelining: where it was moved (evicted from where it
        runs, then pipelined), that first eviction is the one that stands; where it was pending, none does."""
        ops = self._standing((OpKind.EVICT,), since)
        if all(op.prev_status != _PIPELINED for op in ops):
            return ops
        kept: set[int] = set()
        for op in ops:
            if op.prev_status != _PIPELINED:
                kept.add(id(op))
                continue
            stack = self._evicts[id(op.pod)]
            at = next(i for i, e in enumerate(stack) if e is op)
            first = next((e for e in reversed(stack[:at]) if e.prev_status != _PIPELINED), None)
            if first is not None:
                kept.add(id(first))
        return [op for op in (self.ops[since:] if since else self.ops) if id(op) in kept]

    def placements(self) -> list[Op]:
        """The binds and pipelines that stand (a moved pod put back in place has none, nor a pipelined pod evicted
        since: ``evictions``)."""
        ops = self._standing((OpKind.ALLOCATE, OpKind.PIPELINE))
        return [op for op in ops if op.kind != _PIPELINE or op.pod.status != _EVICTED]

    def undo(self, checkpoint: int) -> list[Op]:
        """Roll back to ``checkpoint``; return the operations undone, for ``redo``."""
        done = self.ops[checkpoint:]
        self.rollback(checkpoint)
        return done

    def redo(self, ops: list[Op]) -> None:
        """Apply operations that ``undo`` took back, exactly as they were (same nodes and devices)."""
        for op in ops:
            if op.kind == OpKind.EVICT:
                self.evict(op.pod, op.action, op.by, op.message)
            elif op.kind == OpKind.PIPELINE:
                self.pipeline(op.pod, op.node, op.devices, op.action, op.by)
            elif op.kind == OpKind.ALLOCATE:
                self.allocate(op.pod, op.node, op.devices, op.action)
            elif not self.restore(op.pod, op.devices):
                raise AssertionError(f"{op.pod.key} cannot be put back where it was again")

    def rollback(self, checkpoint: int) -> None:
        """Undo every operation since ``checkpoint``, newest first. What the operations charged is given back per
        job, once (``_charge`` per operation walked the queue path for each: a victim scenario rolls back every pod
        it placed and evicted; bench_victims: 854 rollbacks, ~3,500 operations a first-fit cycle): nothing reads a
        queue while the nodes are given back, the sums are the same, and each job's queue gets one charge, so its
        version moves past any it had while the operations stood (``order.ByQueue`` reads versions, not amounts)."""
        ops, index = self.ops, self.index
        if len(ops) <= checkpoint:
            return
        owed: dict[int, list[Any]] = {}  # id(job) -> [job, milli-GPU, millicores, bytes] to charge it
        evicts = self._evicts
        while len(ops) > checkpoint:
            op = ops.pop()
            pod, kind, node = op.pod, op.kind, op.node
            if kind == _EVICT:
                index.assign(node, pod, op.devices)
                sign = 1
                evicts[id(pod)].pop()
            else:  # an allocation, a pipeline or a restore
                index.release(node, pod, op.devices, planning=True)
                sign = -1
            job = pod.job
            if job is not None:
                sums = owed.get(id(job))
                if sums is None:
                    sums = owed[id(job)] = [job, 0, 0, 0]
                sums[1] += sign * pod.gpu_milli_on(node)
                sums[2] += sign * pod.cpu
                sums[3] += sign * pod.mem
                if kind == _RESTORE and op.prev_status == _PIPELINED:
                    placed = self.snap.node_by_name[op.prev_node or ""]
                    index.assign(placed, pod, op.prev_devices)
                    sums[1] += pod.gpu_milli_on(placed)
                    sums[2] += pod.cpu
                    sums[3] += pod.mem
            elif kind == _RESTORE and op.prev_status == _PIPELINED:
                index.assign(self.snap.node_by_name[op.prev_node or ""], pod, op.prev_devices)
            pod.status, pod.node, pod.devices = op.prev_status, op.prev_node, op.prev_devices
        queues = self.snap.queues
        for job, g, c, m in owed.values():
            if (q := queues.get(job.queue)) is not None:
                charge(q, (g, c, m), not job.preemptible)

    # ------------------------------------------------------------------------------------ releasing pods
    def releasing(self) -> list[Pod]:
        """Pods on their way out (deleted, not gone yet, not stuck): what they hold can be promised to a pipelined
        pod."""
        if self._releasing is None:  # which pods are on their way out does not change in a cycle
            now = self.snap.now
            self._releasing = [p for p in self.snap.pods if p.releasing and p.node in self.snap.node_by_name
                               and now - p.deleted <= STUCK_RELEASING_SECONDS]
        return [p for p in self._releasing if p.status != _EVICTED]

    def lend(self, pods: list[Pod]) -> list[tuple[Node, int, str | None]]:
        """Make what releasing pods hold look free, to place pods that will be pipelined onto it; returns the
        GPU groups to give back with ``unlend``."""
        groups = []
        for p in pods:
            node = self.snap.node_by_name[p.node or ""]
            groups += [(node, d, node.dev_group[d]) for d in p.devices if p.frac_devices]
            self.index.release(node, p, p.devices, planning=True)
        return groups

    def unlend(self, pods: list[Pod], groups: list[tuple[Node, int, str | None]]) -> None:
        for p in pods:
            self.index.assign(self.snap.node_by_name[p.node or ""], p, p.devices)
        for node, d, group in groups:
            node.dev_group[d] = group

    def say(self, job: Job, reason: Reason) -> None:
        """Add a reason why ``job`` waits. The lists of ``reasons`` are never written once set (``allocate_reasons``
        and allocate's failures share them): a new one is set."""
        said = self.reasons.get(job.key)
        self.reasons[job.key] = [reason] if said is None else [*said, reason]


def _put(pod: Pod, status: str, node: Node, devices: Devices) -> None:
    """A pod placed (allocated or pipelined) on ``node``'s ``devices``, and the GPU group of its shared device."""
    pod.status = status
    pod.node = node.name
    pod.devices = devices
    if pod.frac_devices and devices:
        pod.gpu_group = node.dev_group[devices[0]]


def capacity(nodes: list[Node]) -> Vec:
    """``Snapshot.capacity`` (milli-GPU, millicores, bytes of the Ready, schedulable nodes) read at C speed: the
    snapshot's loop ran per node in Python (bench_victims, 1,000 nodes: 0.9% of a first-fit cycle's opcodes)."""
    ready = list(compress(nodes, map(and_, map(_READY, nodes), map(not_, map(_UNSCHEDULABLE, nodes)))))
    return sum(map(_GPUS, ready)) * 1000, sum(map(_ALLOC_CPU, ready)), sum(map(_ALLOC_MEM, ready))


_READY, _UNSCHEDULABLE, _GPUS = attrgetter("ready"), attrgetter("unschedulable"), attrgetter("gpus")
_ALLOC_CPU, _ALLOC_MEM = attrgetter("alloc_cpu"), attrgetter("alloc_mem")
_GPU_MEM = attrgetter("gpu_mem_mib")


def job_request(pods: list[Pod], ref: Node | None) -> Vec:
    """What ``pods`` request together (GPUs in milli-GPU, gpu-memory sized on ``ref``): a loop (``sum(map(...))``
    reads fewer Python opcodes but costs 2-3 times the CPU on the few pods of a batch)."""
    g = c = m = 0
    for p in pods:
        g += p.gpu_milli_on(ref)
        c += p.cpu
        m += p.mem
    return g, c, m

