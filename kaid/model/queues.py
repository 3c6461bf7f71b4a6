"""Reading queues (units, parents, cycles) and accounting what their jobs hold and ask for, up the tree."""

from __future__ import annotations

from typing import Any, Final

from pydantic import ValidationError

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.crds import QueueSpec, validation_message
from kaid.api.duration import parse_duration
from kaid.model.nodes import reference_node
from kaid.model.objects import UNLIMITED, Node, ObjectProblem, Pod, Queue, Reason, Snapshot, malformed, zero
from kaid.model.vocabulary import CPU, GPU, HOLDS_RESOURCES, MEM, ReasonCode

Obj = dict[str, Any]


SPEC_SCALE: Final = {GPU: c.MILLI, CPU: 1, MEM: c.MEGABYTE}
"""kai's units per unit of a Queue spec: GPUs in devices, cpu in millicores, memory in megabytes (10^6 bytes)."""


def _queue_units(spec: QueueSpec, q: Queue, unmanaged: bool) -> None:
    """Quota, limit and weight per resource, in engine units. A resource the spec does not mention is
    ``unmanaged`` (no guarantee, no limit, weight 1: kai's deviation from KAI, docs/compatibility.md), or
    else KAI's reading (quota 0, limit 0: nothing at all)."""
    res = spec.resources
    blocks = (res.gpu, res.cpu, res.memory) if res is not None else (None, None, None)
    for r, block in zip((GPU, CPU, MEM), blocks, strict=True):
        if block is None:
            if unmanaged:
                q.quota[r], q.limit[r], q.weight[r] = 0, UNLIMITED, 1.0
            continue
        scale = SPEC_SCALE[r]
        q.quota[r] = UNLIMITED if block.quota == -1 else round(block.quota * scale)
        q.limit[r] = UNLIMITED if block.limit == -1 else round(block.limit * scale)
        q.weight[r] = float(block.overQuotaWeight)


def read_queues(objs: list[Obj], problems: list[ObjectProblem], unmanaged: bool = True) -> dict[str, Queue]:
    """Queues by name, linked into their tree. A bad queue (invalid spec, missing parent, parent cycle, under a
    bad queue) carries its errors; a second queue of the same name is a problem and is dropped."""
    queues: dict[str, Queue] = {}
    for obj in objs:
        name = meta.name(obj)
        if name in queues:
            problems.append(ObjectProblem("Queue", name, None, Reason(
                ReasonCode.DUPLICATE_QUEUE, f"queue {name} appears twice in the input; the first one is used")))
            continue
        try:
            queues[name] = _read_queue(obj, name, unmanaged)
        except Exception as err:  # (a malformed object: left out)
            problems.append(malformed("Queue", obj, err, namespaced=False))
    _link_parents(queues)
    _cut_cycles(queues)
    _cut_deep(queues)
    for q in queues.values():
        if q.parent is not None:
            q.parent.children.append(q)
    for q in queues.values():
        q.depth = len(q.path()) - 1
        if not q.errors:
            bad = next((a for a in q.path()[1:] if a.errors), None)
            if bad is not None:
                q.errors.append(Reason(ReasonCode.INVALID_PARENT_QUEUE, f"queue {q.name} sits under queue {bad.name}, "
                                       f"which is invalid: {bad.errors[0].message}"))
    for q in queues.values():
        q.children.sort(key=lambda x: x.name)
    return queues


def _read_queue(obj: Obj, name: str, unmanaged: bool) -> Queue:
    q = Queue(name)
    q.created = meta.parse_time(meta.meta(obj).get("creationTimestamp"))
    try:
        spec = QueueSpec.model_validate(obj.get("spec") or {})
    except ValidationError as err:
        q.errors.append(Reason(ReasonCode.INVALID_QUEUE, f"queue {name} is invalid: {validation_message(err)}. Fix the "
                               f"Queue (kubectl edit queue {name}); its jobs wait until then"))
        return q
    q.display = spec.displayName or name
    q.parent_name = spec.parentQueue or None
    q.priority = spec.priority
    q.preempt_min_runtime = parse_duration(spec.preemptMinRuntime) if spec.preemptMinRuntime else None
    q.reclaim_min_runtime = parse_duration(spec.reclaimMinRuntime) if spec.reclaimMinRuntime else None
    _queue_units(spec, q, unmanaged)
    return q


def preempt_min_runtime(victim: Queue) -> float:
    """Seconds a running pod of ``victim``'s jobs is kept from preempt (KAI's minruntime plugin, resolver.go at
    d5bc503a): the nearest queue up its path that sets preemptMinRuntime (an explicit 0 included), else none."""
    for q in victim.path():
        if q.preempt_min_runtime is not None:
            return q.preempt_min_runtime
    return 0.0


def reclaim_min_runtime(victim: Queue, claimant: Queue) -> float:
    """Seconds a running pod of ``victim``'s jobs is kept from reclaim by ``claimant``'s (KAI's default resolve
    method, "lca"): the walk up the victim's path starts at the child, on the victim's side, of the two queues'
    lowest common ancestor (the victim's own queue when they are the same; its top-level queue alone when they
    share none), and takes the first reclaimMinRuntime set."""
    path = victim.path()  # leaf first
    above = {id(q) for q in claimant.path()}
    start = next((at for at, q in enumerate(path) if id(q) in above), None)
    for q in path[-1:] if start is None else path[max(start - 1, 0):]:
        if q.reclaim_min_runtime is not None:
            return q.reclaim_min_runtime
    return 0.0


def min_runtimes(victim: Queue) -> set[float]:
    """Every protection a running pod of ``victim``'s jobs may have, against any claimant (positive ones)."""
    return {v for q in victim.path() for v in (q.reclaim_min_runtime, q.preempt_min_runtime) if v}


def _link_parents(queues: dict[str, Queue]) -> None:
    for q in queues.values():
        if q.parent_name is None:
            continue
        parent = queues.get(q.parent_name)
        if parent is None:
            q.errors.append(Reason(
                ReasonCode.MISSING_PARENT_QUEUE,
                f"queue {q.name} names parent queue {q.parent_name}, which does not exist: "
                f"create it (kaictl queue create {q.parent_name}) or fix spec.parentQueue",
                {"parent": q.parent_name}))
            continue
        q.parent = parent


def _cut_cycles(queues: dict[str, Queue]) -> None:
    """Walk up from each queue; a queue that reaches itself is in a cycle: it says so, and its parent link is cut
    so that tree walks end."""
    for q in queues.values():
        seen: set[str] = set()
        cur: Queue | None = q
        while cur is not None and cur.name not in seen:
            seen.add(cur.name)
            cur = cur.parent
        if cur is not None:
            cycle = _cycle_names(cur)
            if q.name in cycle:
                q.errors.append(Reason(
                    ReasonCode.QUEUE_CYCLE, f"queue {q.name} is in a parent cycle ({' -> '.join([*cycle, cycle[0]])}): "
                    "point one of them at a parent outside the cycle", {"cycle": cycle}))
    for q in queues.values():
        if any(e.code == ReasonCode.QUEUE_CYCLE for e in q.errors):
            q.parent = None


MAX_QUEUE_DEPTH: Final = 32
"""The most levels of queues kai reads above a queue (a cluster's tree is two or three deep; the engine walks it
recursively, and a chain of 600 Queue objects, each the parent of the next, failed every cycle)."""


def _cut_deep(queues: dict[str, Queue]) -> None:
    """A queue more than ``MAX_QUEUE_DEPTH`` levels below its root says so, and its parent link is cut (each one's
    below it too, so that no walk goes deeper)."""
    depth: dict[str, int] = {}
    for q in queues.values():
        chain: list[Queue] = []
        cur: Queue | None = q
        while cur is not None and cur.name not in depth:
            chain.append(cur)
            cur = cur.parent
        at = -1 if cur is None else depth[cur.name]
        for link in reversed(chain):
            at += 1
            depth[link.name] = at
    for q in queues.values():  # (the depths are all known: cutting one link changes none of them)
        if depth[q.name] > MAX_QUEUE_DEPTH:
            q.errors.append(Reason(
                ReasonCode.QUEUE_TOO_DEEP, f"queue {q.name} is {depth[q.name]} levels below its root queue; kai reads "
                f"at most {MAX_QUEUE_DEPTH}: give it a parent higher up (spec.parentQueue)",
                {"depth": depth[q.name], "most": MAX_QUEUE_DEPTH}))
            q.parent = None


def _cycle_names(start: Queue) -> list[str]:
    names = [start.name]
    cur = start.parent
    while cur is not None and cur.name != start.name:
        names.append(cur.name)
        cur = cur.parent
    return names


def pod_vector(pod: Pod, node: Node | None) -> tuple[int, int, int]:
    """(milli-GPU, millicores, bytes) of a pod on ``node``; a pending gpu-memory pod converts with the reference
    node (``reference_node``)."""
    return pod.gpu_milli_on(node), pod.cpu, pod.mem


def charge(queue: Queue, vec: tuple[int, int, int], non_preemptible: bool, sign: int = 1) -> None:
    """Add (``sign`` -1: take back) what a pod holds to its queue and every ancestor. (Indices, not ``Resource``:
    iterating the enum cost more than the sums, on the cycle's hot path.)"""
    g, c, m = vec
    if sign != 1:
        g, c, m = sign * g, sign * c, sign * m
    q: Queue | None = queue
    while q is not None:
        q.version += 1
        a = q.allocated
        a[0] += g
        a[1] += c
        a[2] += m
        if non_preemptible:
            a = q.alloc_np
            a[0] += g
            a[1] += c
            a[2] += m
        q = q.parent


def account(snap: Snapshot) -> None:
    """Fill each queue's jobs, allocated, non-preemptible allocated and requested, up the tree. A pod on its way
    out (releasing) still holds its node's resources but no longer counts for its queue (as in KAI). A job's pods
    are summed first, and what they hold charged to each queue of its path once; what the jobs request is summed
    per queue, and added to each queue of its path once."""
    ref = reference_node(snap.nodes)
    for q in snap.queues.values():
        q.jobs = []
        q.allocated, q.alloc_np, q.requested = zero(), zero(), zero()
        q.version += 1
    node_by_name = snap.node_by_name
    requested: dict[int, list[Any]] = {}  # id(queue) -> [queue, gpu, cpu, memory] its jobs request
    for job in snap.jobs.values():
        queue = snap.queues.get(job.queue)
        if queue is None:
            continue
        queue.jobs.append(job)
        rg = rc = rm = ag = ac = am = 0
        for pod in job.pods:
            if pod.releasing:
                continue
            # (``gpu_milli_on`` and ``active`` inline: every pod of the snapshot is read here)
            if pod.gpu_whole:
                g = pod.gpu_whole * 1000
            elif pod.frac_devices:
                g = pod.gpu_milli_on(node_by_name.get(pod.node) if pod.node else ref)
            else:
                g = 0
            rg += g
            rc += pod.cpu
            rm += pod.mem
            if pod.status in HOLDS_RESOURCES:
                ag += g
                ac += pod.cpu
                am += pod.mem
        job.request_milli = rg
        if rg or rc or rm:
            sums = requested.get(id(queue))
            if sums is None:
                requested[id(queue)] = [queue, rg, rc, rm]
            else:
                sums[1] += rg
                sums[2] += rc
                sums[3] += rm
        if ag or ac or am:
            charge(queue, (ag, ac, am), not job.preemptible)
    for queue, rg, rc, rm in requested.values():  # each queue's jobs' requests added up its path once
        anc: Queue | None = queue
        while anc is not None:
            r = anc.requested
            r[0] += rg
            r[1] += rc
            r[2] += rm
            anc = anc.parent
    for q in snap.queues.values():
        q.jobs.sort(key=lambda j: (-j.priority, j.created, j.key))
