"""Allocate: place pending jobs in KAI's order of queues and jobs (``order``), gangs all-or-nothing, elastic
pods one at a time with the job going back into the order after each. A job that fits only once pods on
their way out are gone is pipelined onto what they hold (docs/architecture.md, "The cycle")."""

from __future__ import annotations

from operator import attrgetter

from kaid.actions import gangs, subtopo
from kaid.actions.limits import PathLimits, charged_violation, limit_violation
from kaid.actions.order import ByQueue
from kaid.actions.scenario import held_by
from kaid.actions.session import Session, Vec, job_request
from kaid.api.config import Action
from kaid.model.objects import Job, Node, Pod, Reason
from kaid.model.vocabulary import OpKind, PodStatus, ReasonCode
from kaid.placement import gang
from kaid.placement.explain import fit_summary, fragmentation
from kaid.placement.index import Devices, NodeIndex

Failures = dict[tuple[object, ...], tuple[int, list[Reason]]]


def allocate(session: Session) -> None:
    """The allocate action: pending jobs in KAI's order, each placed whole (its gang) on free resources, or
    pipelined onto what releasing pods hold, or left with the reasons it waits (``session.reasons``)."""
    nexts = NextBatches(session.small_ref)
    order = ByQueue(session.snap.queues, session.total, nexts.request, held_by)
    # (the jobs with a pending pod, from the roll where the cycle has one: a job with none is not ``_waiting``; and
    # the job keys it holds, those of the jobs as they stand: nothing was changed since but what ``changed`` read)
    roll = session.roll
    if roll is None:
        order.push_all(j for j in session.snap.jobs.values() if _waiting(session, j))
    else:
        order.push_all((j for j in roll.waiting(session.snap) if _waiting(session, j)), roll.keys)
    failed: Failures = {}
    limits = PathLimits()
    full_checked = False
    # a shared-GPU pod may go into a GPU group whose releasing pods' share it needs; it is pipelined there (KAI's
    # FittingGPUs counts a group's releasing share, gpu_sharing/gpuSharing.go pipelines onto it)
    session.index.note_releasing(session.releasing())
    while (job := order.pop()) is not None:
        placed = _serve(session, job, nexts.batch(job), failed, nexts, limits)
        nexts.served(job)
        more = placed and _more(job, nexts)
        if more:
            order.push(job)  # elastic pods: one at a time, the queue re-enters the order
        elif placed:
            session.reasons.pop(job.key, None)
        if job.key == session.focus and not more:
            break
        if not placed and not full_checked and session.focus is None and _no_gpu_left(session):
            full_checked = True  # once: a job that could still fit keeps the order going to the end
            rest = order.remaining()
            sliver = _sliver(session.index)
            if all(_cannot_fit(sliver, nexts.batch(j)) for j in rest):
                # nothing is placed any more, so nothing changes: each job fails as it would in its turn
                order.clear()
                for j in rest:
                    _serve(session, j, nexts.batch(j), failed, nexts, limits)
                break
    session.allocate_reasons = dict(session.reasons)  # (the lists are shared: ``Session.say`` sets new ones)


def _more(job: Job, nexts: NextBatches) -> bool:
    """Whether a job just placed has another batch: for a job of one pod set, whether a pod of it still waits (its
    next batch is then one of them or more), read at C speed; the batch itself is worked out when it is served."""
    if not job.subgroups:
        return _PENDING in map(_STATUS, job.pods)
    return bool(nexts.batch(job))


def _no_gpu_left(session: Session) -> bool:
    """No idle GPU on any node and no releasing pod to pipeline onto: a job that needs a GPU of its own, or a share
    larger than any partly used device has left, cannot be placed for the rest of allocate."""
    index = session.index
    return not any(index.buckets[k] for k in range(1, index.max_gpus + 1)) and not session.releasing()


def _sliver(index: NodeIndex) -> int:
    """The most any partly used device has free (milli-GPU)."""
    return max((1000 - u for u, by_idle in index.partial.levels.items() if any(by_idle.values())), default=0)


def _cannot_fit(sliver: int, batch: list[Pod]) -> bool:
    """With no idle GPU left: some pod of the batch needs whole GPUs, or a fraction larger than the most any partly
    used device has free (``sliver``; a gpu-memory share or a pod without GPUs might still fit: not this)."""
    return bool(batch) and any(p.gpu_whole or (p.frac_devices and p.gpu_frac and p.gpu_frac > sliver) for p in batch)


class NextBatches:
    """Each job's next batch of pods (``gangs.tasks_to_allocate``) and what it asks for (for the order, gpu-memory
    sized on ``ref``), worked out once per job and kept until the job is served: in allocate only the job served
    changes. Nothing is evicted before allocate, so its pending pods are all that wait (the order of a victim
    scenario counts evicted pods too)."""

    __slots__ = ("_batches", "_ref", "_requests")

    def __init__(self, ref: Node | None) -> None:
        self._ref = ref
        self._batches: dict[int, list[Pod]] = {}
        self._requests: dict[int, Vec] = {}

    def batch(self, job: Job) -> list[Pod]:
        known = self._batches.get(id(job))
        if known is None:
            pods = job.pods
            if len(pods) == 1 and not job.subgroups:  # ``tasks_to_allocate`` of one pod: itself, if it waits
                known = [pods[0]] if pods[0].status == _PENDING else []
            else:
                known = gangs.tasks_to_allocate(job)
            self._batches[id(job)] = known
        return known

    def request(self, job: Job) -> Vec:
        pods = job.pods
        if len(pods) == 1 and not job.subgroups:  # ``job_request`` of its batch, the one pod if it waits: not kept
            pod = pods[0]
            return (pod.gpu_milli_on(self._ref), pod.cpu, pod.mem) if pod.status == _PENDING else _NOTHING
        known = self._requests.get(id(job))
        if known is None:
            known = self._requests[id(job)] = job_request(self.batch(job), self._ref)
        return known

    def served(self, job: Job) -> None:
        self._batches.pop(id(job), None)
        self._requests.pop(id(job), None)


_STATUS = attrgetter("status")
# read per job and per placement, as module constants: an enum member read through its class (``PodStatus.PENDING``) is
# an attribute lookup through ``EnumType.__getattr__`` on Python 3.11, ~0.3 us, where a constant is ~0.02 us
_PENDING: str = PodStatus.PENDING
_NOTHING: Vec = (0, 0, 0)  # what a job none of whose pods waits asks for


def _waiting(session: Session, job: Job) -> bool:
    q = session.snap.queues.get(job.queue)
    if q is None or q.children or q.errors or job.errors or _PENDING not in map(_STATUS, job.pods):
        return False
    if not gangs.gang_possible(job):
        active = sum(1 for p in job.pods if gangs.is_active(p))
        session.reasons[job.key] = [Reason(
            ReasonCode.GANG_INCOMPLETE, f"the gang needs {job.min_member} pods at once but only {len(job.pods)} exist "
            f"({active} running); it waits for the rest to be created",
            {"minMember": job.min_member, "exist": len(job.pods), "running": active})]
        return False
    return True


def _serve(session: Session, job: Job, batch: list[Pod], failed: Failures, nexts: NextBatches,
           limits: PathLimits) -> bool:
    if not batch:
        return False
    queue = session.snap.queues[job.queue]
    # the request on the reference GPU: the order's (on the smallest GPU) where no gpu-memory pod makes them differ
    one = len(batch) == 1 and not batch[0].gpu_mem_mib
    why = limits.violation(queue, nexts.request(job) if one else job_request(batch, session.ref), job)
    if why is not None:
        session.reasons[job.key] = [why]
        return False
    return _place(session, job, batch, failed)


_SHAPE = attrgetter("sig", "gpu_whole", "gpu_frac", "gpu_mem_mib", "frac_devices", "cpu", "mem")  # a pod's shape


def _failure_key(job: Job, batch: list[Pod]) -> tuple[object, ...] | None:
    """What a failed placement is remembered by within the cycle: the pods' one shape, their count and the job's
    topology constraint (a job whose required domain is fixed by its running pods is not remembered). None when the
    pods differ in shape."""
    if job.subgroups and subtopo.constrained(job):
        return None  # (its sub-groups' constraints are not in the key)
    first = _SHAPE(batch[0])
    if len(batch) > 1 and not all(map(first.__eq__, map(_SHAPE, batch))):
        return None
    return (*first, len(batch), job.topology, job.required_level, job.preferred_level)


def _spread(session: Session, batch: list[Pod]) -> bool:
    placement = session.cfg.placement
    if placement.gpu == placement.cpu:  # (as by default: the pods need not be read)
        return placement.gpu == "spread"
    return (placement.gpu if any(p.gpu_whole or p.frac_devices for p in batch) else placement.cpu) == "spread"


def _plan(session: Session, job: Job, batch: list[Pod], within: bytearray | None) -> gang.GangPlan:
    cfg = session.cfg.placement
    nest = subtopo.nest(session, job, batch)
    if nest is not None:
        plan = gang.place_nested(nest, session.index, _spread(session, batch), cfg.gangSolver,
                                 cfg.solverTimeLimitSeconds, cfg.solverWorkers, within=within)
        session.alloc_stats.solver_s += plan.solver_s
        session.alloc_stats.solves += plan.solves
        return plan
    topo = gang.Topo(job.required_level, job.preferred_level, tuple(session.snap.topologies.get(job.topology) or ())) \
        if job.topology is not None else None
    plan = gang.place(batch, session.index, _spread(session, batch), topo, cfg.gangSolver, cfg.solverTimeLimitSeconds,
                      cfg.solverWorkers, within=within)
    session.alloc_stats.solver_s += plan.solver_s
    session.alloc_stats.solves += plan.solves
    return plan


def _place(session: Session, job: Job, batch: list[Pod], failed: Failures) -> bool:
    """Bind the batch where it fits now, or pipeline it onto what releasing pods hold; else say why not."""
    index = session.index
    within = gangs.domain_of_running(job, session) if job.required_level else None
    # a batch that inter-pod affinity ties to the pods placed fails or fits by its labels and terms too, which its
    # shape does not say: its failure is neither looked up nor remembered
    tied = index.pod_affinity is not None and gang.linked(batch, index)
    # (the failure key is looked up once a placement failed in this cycle, and worked out where one fails)
    key = _failure_key(job, batch) if within is None and failed and not tied else None
    hit = failed.get(key) if key is not None and job.key != session.focus else None
    if hit is not None and hit[0] == index.epoch:
        session.reasons[job.key] = hit[1]  # (shared: never written, ``Session.say``)
        return False
    placed = _place_one(session, job, batch, within) if len(batch) == 1 else None
    if placed:
        return True
    plan = gang.GangPlan() if placed is False else _plan(session, job, batch, within)
    if plan.placements:
        return _commit(session, job, plan, OpKind.ALLOCATE)
    pipelined = _pipelined_plan(session, job, batch, within)
    if pipelined is not None:
        return _commit(session, job, pipelined, OpKind.PIPELINE)
    why = _explain(job, batch, plan.placed_max, index, plan.topology_failed) \
        if session.focus in (None, job.key) else _UNEXPLAINED
    session.reasons[job.key] = why
    if key is None and within is None and not tied:
        key = _failure_key(job, batch)
    if key is not None:
        failed[key] = (index.epoch, why)
    return False


def _pipelined_plan(session: Session, job: Job, batch: list[Pod], within: bytearray | None) -> gang.GangPlan | None:
    """A plan that fits once the releasing pods are gone (KAI pipelines onto their resources)."""
    lent = session.releasing()
    if not lent:
        return None
    groups = session.lend(lent)
    try:
        plan = _plan(session, job, batch, within)
    finally:
        session.unlend(lent, groups)
    return plan if plan.placements else None


def _commit(session: Session, job: Job, plan: gang.GangPlan, kind: OpKind) -> bool:
    queue = session.snap.queues[job.queue]
    over = charged_violation(queue, job, plan.placements)
    if over is not None:
        session.reasons[job.key] = [over]
        return False
    if kind == OpKind.ALLOCATE and (session.index.soft or session.index.waiting) and \
            _pipelined(session.index, plan.placements):
        kind = OpKind.PIPELINE  # a pod goes where it is pipelined: so is its whole job (KAI's ShouldPipelineJob)
    cp = session.checkpoint()
    for pod, node, devs in plan.placements:
        if kind == OpKind.ALLOCATE:
            session.allocate(pod, node, devs)
        else:
            session.pipeline(pod, node, devs, Action.ALLOCATE, None)
    session.committed(cp)
    _count(session, job, plan)
    return True


def _place_one(session: Session, job: Job, batch: list[Pod], within: bytearray | None) -> bool | None:
    """A batch of one pod with no topology domain to choose, bound where the greedy choice puts it: ``_plan`` and
    ``_commit`` without the plan (``gang.place``'s plan of one such pod is that choice, and nothing is counted of it).
    True: bound; False: no node has room for it now (the plan is empty); None: not such a batch, or the limit check
    on the node it would go to failed (the general path says why)."""
    if (job.topology is not None and (job.required_level or job.preferred_level)) or \
            (job.subgroups and subtopo.constrained(job)):
        return None
    pod = batch[0]
    choice = session.index.best_node(pod, _spread(session, batch), within)
    if choice is None:
        return False
    node, devices = choice
    if pod.gpu_mem_mib and limit_violation(session.snap.queues[job.queue],
                                           (pod.gpu_milli_on(node), pod.cpu, pod.mem), job) is not None:
        return None  # (``charged_violation``)
    cp = session.checkpoint()
    if (session.index.soft or session.index.waiting) and session.index.must_pipeline(node, pod, devices):
        session.pipeline(pod, node, devices, Action.ALLOCATE, None)
    else:
        session.allocate(pod, node, devices)
    session.committed(cp)
    return True


def _pipelined(index: NodeIndex, placements: list[tuple[Pod, Node, Devices]]) -> bool:
    """Whether a pod of the plan, placed after the ones before it, goes into a GPU group where it is pipelined
    (``NodeIndex.must_pipeline``); the index is left as it was."""
    done: list[tuple[Pod, Node, Devices]] = []
    try:
        for pod, node, devs in placements:
            if index.must_pipeline(node, pod, devs):
                return True
            index.assign(node, pod, devs)
            done.append((pod, node, devs))
        return False
    finally:
        for pod, node, devs in reversed(done):
            index.release(node, pod, devs, planning=True)


def _count(session: Session, job: Job, plan: gang.GangPlan) -> None:
    stats = session.alloc_stats
    if plan.method == "cpsat":
        stats.gangs_cpsat += 1
    if plan.method != "greedy":
        stats.gangs_improved += 1
    if len(plan.placements) > 1:
        stats.gang_nodes.append(plan.nodes_used)
        stats.gang_vs_greedy.append((plan.greedy_nodes, plan.nodes_used))
        label = job.preferred_level or job.required_level
        if job.topology is not None and label:
            stats.gang_domains.append(len({n.labels.get(label) for _, n, _ in plan.placements}))


# with a focus job, the others' reasons are not worked out (kaictl explain asks about one job only)
_UNEXPLAINED = [Reason(ReasonCode.NOT_EXPLAINED, "not worked out: this cycle was run to explain another job")]


def _explain(job: Job, batch: list[Pod], placeable: int, index: NodeIndex, topo_failed: bool) -> list[Reason]:
    out: list[Reason] = []
    if len(batch) > 1:
        out.append(Reason(
            ReasonCode.GANG_UNSCHEDULABLE,
            f"the gang needs {len(batch)} pods placed at once; only {placeable} can be placed now",
            {"needed": len(batch), "placeable": placeable}))
    if topo_failed:
        out.append(Reason(
            ReasonCode.TOPOLOGY,
            f"the pods fit in the cluster but not inside one {job.required_level} domain of topology "
            f"{job.topology}, as required", {"topology": job.topology, "requiredLevel": job.required_level}))
    if len(batch) > 1 and placeable < len(batch) and gang.linked(batch, index) and _fits_unlinked(batch, index):
        out.append(Reason(
            ReasonCode.POD_AFFINITY, f"the gang's pods fit on resources, but their required pod affinity, "
            f"anti-affinity or topology spread lets only {placeable} of the {len(batch)} be placed at once",
            {"needed": len(batch), "placeable": placeable}))
    frag = fragmentation(batch, index)
    if frag is not None:
        out.append(frag)
    first = batch[min(placeable, len(batch) - 1)] if len(batch) > 1 else batch[0]
    out.append(fit_summary(first, index))
    return out


def _fits_unlinked(batch: list[Pod], index: NodeIndex) -> bool:
    """Whether the batch would fit now with no inter-pod affinity read (the greedy plan; what it assigns in the
    index it releases again, so the pods placed are as they were for ``index.pod_affinity``)."""
    tracker, index.pod_affinity = index.pod_affinity, None
    try:
        plain, _ = gang.greedy(batch, index, False, None)
    finally:
        index.pod_affinity = tracker
    return plain is not None

