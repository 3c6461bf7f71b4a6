"""Build a Snapshot from plain Kubernetes objects (dicts).

Nothing here raises on a bad object: every problem becomes a Reason on that object (a job's
``errors``/``warnings``, a queue's ``errors``, or an ``ObjectProblem``), and every other object is
still read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from kaid.api import constants as c
from kaid.api.config import SchedulerConfig
from kaid.api.crds import PodGroupSpec, QueueSpec, TopologySpec, validation_message
from kaid.api.duration import parse_duration
from kaid.api.quantity import QuantityError, parse_quantity, to_int, to_milli
from kaid.model.grouping import OwnerIndex, group_for_pod, workload_labels
from kaid.model.objects import (
    CPU,
    GPU,
    MEM,
    UNLIMITED,
    Budget,
    Job,
    Node,
    ObjectProblem,
    Pod,
    PriorityClass,
    Queue,
    Reason,
    Snapshot,
)

Obj = dict[str, Any]
PodReader = Callable[[Obj, list[Reason]], Pod]
OWNER_KINDS = {"Job", "ReplicaSet", "Deployment", "StatefulSet", "CronJob", "PyTorchJob", "MPIJob",
               "RayJob", "RayCluster", "JobSet", "LeaderWorkerSet", "TFJob", "XGBoostJob"}
# owners the daemon watches: a pod whose owner is one of these waits until the owner is seen
WATCHED_OWNER_KINDS = {"Job", "ReplicaSet", "Deployment", "StatefulSet", "PyTorchJob", "MPIJob", "RayJob",
                       "RayCluster", "JobSet", "LeaderWorkerSet"}


def parse_time(value: Any) -> float:
    """RFC 3339 timestamp -> epoch seconds (0 when absent or unreadable)."""
    if not isinstance(value, str) or not value:
        return 0.0
    return _parse_timestamp(value)


@lru_cache(maxsize=4096)  # pods made together share their timestamps (they have whole seconds)
def _parse_timestamp(value: str) -> float:
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _meta(obj: Obj) -> Obj:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def _labels(obj: Obj) -> dict[str, str]:
    lab = _meta(obj).get("labels")
    return {str(k): str(v) for k, v in lab.items()} if isinstance(lab, dict) else {}


def _annotations(obj: Obj) -> dict[str, str]:
    ann = _meta(obj).get("annotations")
    return {str(k): str(v) for k, v in ann.items()} if isinstance(ann, dict) else {}


def _annotation(obj: Obj, key: str, default: str = "") -> str:
    """One annotation, without copying them all as ``_annotations`` does (pods are read by the thousand)."""
    ann = _meta(obj).get("annotations")
    value = ann.get(key) if isinstance(ann, dict) else None
    return default if value is None else str(value)


def _group(obj: Obj) -> str:
    return str(obj.get("apiVersion", "")).split("/")[0] if "/" in str(obj.get("apiVersion", "")) else ""


# --------------------------------------------------------------------------------------------- pods
def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    res = container.get("resources") or {}
    requests = dict(res.get("requests") or {})
    for name, value in (res.get("limits") or {}).items():
        requests.setdefault(name, value)  # the API server defaults requests to limits
    return {str(k): parse_quantity(v) for k, v in requests.items()}


def pod_requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests the way kube-scheduler sums them: containers plus restartable (sidecar)
    init containers, or the largest init step if that is bigger, plus the pod overhead."""
    containers = spec.get("containers") or []
    if len(containers) == 1 and not spec.get("initContainers") and not spec.get("overhead"):
        return _container_requests(containers[0])  # most pods
    total: dict[str, Decimal] = {}
    for ctr in containers:
        for k, v in _container_requests(ctr).items():
            total[k] = total.get(k, Decimal(0)) + v
    sidecars: dict[str, Decimal] = {}
    init_max: dict[str, Decimal] = {}
    for ctr in spec.get("initContainers") or []:
        req = _container_requests(ctr)
        if ctr.get("restartPolicy") == "Always":
            for k, v in req.items():
                sidecars[k] = sidecars.get(k, Decimal(0)) + v
            step = dict(sidecars)
        else:
            step = {k: sidecars.get(k, Decimal(0)) + req.get(k, Decimal(0)) for k in set(req) | set(sidecars)}
        for k, v in step.items():
            init_max[k] = max(init_max.get(k, Decimal(0)), v)
    for k, v in sidecars.items():
        total[k] = total.get(k, Decimal(0)) + v
    for k, v in init_max.items():
        total[k] = max(total.get(k, Decimal(0)), v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, Decimal(0)) + parse_quantity(v)
    return total


def _required_terms(spec: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    na = ((spec.get("affinity") or {}).get("nodeAffinity") or {})
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = []
    for term in req.get("nodeSelectorTerms") or []:
        exprs = list((term or {}).get("matchExpressions") or [])
        exprs += [{**f, "field": True} for f in (term or {}).get("matchFields") or []]
        terms.append(exprs)
    return terms


def read_pod(obj: Obj, problems: list[Reason]) -> Pod:
    """Parse one pod; problems with its GPU annotations or requests go into ``problems``."""
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    pod = Pod(str(meta.get("namespace") or "default"), str(meta.get("name", "")), str(meta.get("uid") or ""))
    pod.labels = _labels(obj)
    pod.phase = str(status.get("phase") or "Pending")
    pod.node = spec.get("nodeName") or None
    pod.created = parse_time(meta.get("creationTimestamp"))
    pod.started = parse_time(status.get("startTime")) or pod.created
    pod.releasing = bool(meta.get("deletionTimestamp"))
    try:
        req = pod_requests(spec)
    except QuantityError as err:
        problems.append(Reason("InvalidSpec", f"pod {pod.key} has an unreadable resource request: {err}"))
        req = {}
    pod.cpu = int(to_milli(req.get("cpu", 0)))
    pod.mem = int(to_int(req.get("memory", 0)))
    gpu = req.get(c.GPU_RESOURCE, Decimal(0))
    if gpu != gpu.to_integral_value():
        problems.append(Reason("InvalidSpec", f"pod {pod.key} requests {gpu} {c.GPU_RESOURCE}; whole devices only. "
                               f"Use the annotation {c.GPU_FRACTION_ANNOTATION} for a share of one GPU"))
    pod.gpu_whole = int(gpu)
    ann = _annotations(obj)
    _read_sharing(pod, ann, problems)
    pod.node_selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    pod.affinity = _required_terms(spec)
    pod.tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
    if pod.node_selector or pod.affinity or pod.tolerations:
        pod.sig = repr((sorted(pod.node_selector.items()), pod.affinity, pod.tolerations))
    devs = ann.get(c.GPU_DEVICES_ANNOTATION)
    if devs:
        try:
            pod.devices = tuple(int(x) for x in devs.split(",") if x.strip())
        except ValueError:
            pod.devices = ()
    pod.gpu_group = pod.labels.get(c.GPU_GROUP_LABEL)
    pod.raw = obj
    return pod


class PodMemo:
    """Pods read once and copied in later snapshots, for as long as their object is the very same dict (a
    watch cache replaces an object's dict when it changes). ``read`` is a ``pod_reader`` for
    ``build_snapshot``; ``next_cycle`` forgets the pods the last snapshot did not read (gone or changed).

    A pod is kept from the second snapshot that finds its object unchanged: the first snapshot after a
    list (the one a starting scheduler waits for) only reads, as it would without the memo."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[Obj, Pod | None, list[Reason]]] = {}
        self.seen: dict[str, tuple[Obj, Pod | None, list[Reason]]] = {}

    def read(self, obj: Obj, problems: list[Reason]) -> Pod:
        key = _memo_key(obj)
        hit = self.last.get(key)
        if hit is None or hit[0] is not obj:  # new or changed: read, remember that it was seen
            self.seen[key] = (obj, None, [])
            return read_pod(obj, problems)
        kept, found = hit[1], hit[2]
        if kept is None:  # unchanged since the last snapshot: worth keeping
            found = []
            kept = read_pod(obj, found)
        self.seen[key] = (obj, kept, found)
        problems.extend(found)
        return kept.copy()  # the snapshot changes its pods; the one kept here stays as read

    def next_cycle(self) -> None:
        self.last, self.seen = self.seen, {}

    def peek(self, obj: Obj, problems: list[Reason]) -> Pod:
        """A ``pod_reader`` that uses what was read ahead and remembers nothing: for a snapshot taken while the
        first list still arrives (``preread`` may run meanwhile), before the first ``read``."""
        hit = self.last.get(_memo_key(obj))
        if hit is None or hit[0] is not obj or hit[1] is None:
            return read_pod(obj, problems)
        problems.extend(hit[2])
        return hit[1].copy()

    def preread(self, obj: Obj) -> None:
        """Read a pod ahead of the first snapshot (as a list arrives), which then copies it. Not for use during
        a snapshot: it writes to what ``read`` looks in."""
        if obj.get("kind") == "Pod":
            problems: list[Reason] = []
            self.last[_memo_key(obj)] = (obj, read_pod(obj, problems), problems)


def _memo_key(obj: Obj) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace') or ''}/{meta.get('name', '')}"


def _read_sharing(pod: Pod, ann: Mapping[str, str], problems: list[Reason]) -> None:
    frac_s = ann.get(c.GPU_FRACTION_ANNOTATION)
    mem_s = ann.get(c.GPU_MEMORY_ANNOTATION)
    num_s = ann.get(c.GPU_FRACTION_NUM_DEVICES_ANNOTATION)
    if frac_s is None and mem_s is None:
        if num_s is not None:
            problems.append(Reason("InvalidSpec", f"pod {pod.key}: {c.GPU_FRACTION_NUM_DEVICES_ANNOTATION} needs "
                                   f"{c.GPU_FRACTION_ANNOTATION} or {c.GPU_MEMORY_ANNOTATION} beside it"))
        return
    if pod.gpu_whole:
        problems.append(Reason("InvalidSpec", f"pod {pod.key} asks for whole GPUs ({c.GPU_RESOURCE}) and a GPU share "
                               "at once: keep one of the two"))
        return
    if frac_s is not None and mem_s is not None:
        problems.append(Reason("InvalidSpec", f"pod {pod.key} sets both {c.GPU_FRACTION_ANNOTATION} and "
                               f"{c.GPU_MEMORY_ANNOTATION}: keep one of the two"))
        return
    num = 1
    if num_s is not None:
        try:
            num = int(num_s)
        except ValueError:
            num = 0
        if num < 1:
            problems.append(Reason("InvalidSpec", f"pod {pod.key}: {c.GPU_FRACTION_NUM_DEVICES_ANNOTATION}="
                                   f"{num_s!r} must be a whole number of devices, 1 or more"))
            return
    if frac_s is not None:
        try:
            frac = Decimal(frac_s.strip())
            ok = frac.is_finite() and 0 < frac < 1
        except ArithmeticError:
            ok = False
        if not ok:
            problems.append(Reason(
                "InvalidSpec",
                f"pod {pod.key}: {c.GPU_FRACTION_ANNOTATION}={frac_s!r} must be a number between 0 and 1 (for "
                f"example \"0.5\"); for one or more whole GPUs request {c.GPU_RESOURCE} instead",
                {"annotation": c.GPU_FRACTION_ANNOTATION, "value": frac_s}))
            return
        pod.gpu_frac = max(1, int(frac * 1000))
    else:
        try:
            mib = int(str(mem_s).strip())
        except ValueError:
            mib = 0
        if mib <= 0:
            problems.append(Reason(
                "InvalidSpec", f"pod {pod.key}: {c.GPU_MEMORY_ANNOTATION}={mem_s!r} must be a positive whole "
                "number of MiB (for example \"20000\")", {"annotation": c.GPU_MEMORY_ANNOTATION, "value": mem_s}))
            return
        pod.gpu_mem_mib = mib
    pod.frac_devices = num


# --------------------------------------------------------------------------------------------- nodes
def read_node(obj: Obj) -> Node:
    meta = _meta(obj)
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
    labels = _labels(obj)
    try:
        gpu_mem = int(labels.get(c.GPU_MEMORY_NODE_LABEL, "0"))
    except ValueError:
        gpu_mem = 0
    taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
    return Node(str(meta.get("name", "")), labels, taints, bool(spec.get("unschedulable")), ready,
                q("cpu", to_milli, 0), q("memory", to_int, 0), q("pods", to_int, 110),
                q(c.GPU_RESOURCE, to_int, 0), gpu_mem)


def _occupy(node: Node, pod: Pod) -> None:
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


# --------------------------------------------------------------------------------------------- queues
def _queue_units(spec: QueueSpec, q: Queue) -> None:
    res = spec.resources
    for r, block in enumerate((res.gpu, res.cpu, res.memory) if res else (None, None, None)):
        if block is None:
            continue
        scale = (1000, 1, c.MEGABYTE)[r]
        q.quota[r] = UNLIMITED if block.quota == -1 else round(block.quota * scale)
        q.limit[r] = UNLIMITED if block.limit == -1 else round(block.limit * scale)
        q.weight[r] = float(block.overQuotaWeight)


def read_queues(objs: list[Obj], problems: list[ObjectProblem]) -> dict[str, Queue]:
    queues: dict[str, Queue] = {}
    for obj in objs:
        name = str(_meta(obj).get("name", ""))
        q = Queue(name)
        if name in queues:
            problems.append(ObjectProblem("Queue", name, None, Reason(
                "DuplicateQueue", f"queue {name} appears twice in the input; the first one is used")))
            continue
        queues[name] = q
        try:
            spec = QueueSpec.model_validate(obj.get("spec") or {})
        except ValidationError as err:
            q.errors.append(Reason("InvalidQueue", f"queue {name} is invalid: {validation_message(err)}. Fix the "
                                   f"Queue (kubectl edit queue {name}); its jobs wait until then"))
            continue
        q.display = spec.displayName or name
        q.parent_name = spec.parentQueue or None
        q.priority = spec.priority
        q.preempt_min_runtime = parse_duration(spec.preemptMinRuntime) if spec.preemptMinRuntime else 0.0
        q.reclaim_min_runtime = parse_duration(spec.reclaimMinRuntime) if spec.reclaimMinRuntime else 0.0
        _queue_units(spec, q)
    for q in queues.values():
        if q.parent_name is None:
            continue
        parent = queues.get(q.parent_name)
        if parent is None:
            q.errors.append(Reason(
                "MissingParentQueue", f"queue {q.name} names parent queue {q.parent_name}, which does not exist: "
                f"create it (kaictl queue create {q.parent_name}) or fix spec.parentQueue",
                {"parent": q.parent_name}))
            continue
        q.parent = parent
    # Cycles: walk up from each queue; a queue that reaches itself is in a cycle.
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
                    "QueueCycle", f"queue {q.name} is in a parent cycle ({' -> '.join([*cycle, cycle[0]])}): "
                    "point one of them at a parent outside the cycle", {"cycle": cycle}))
    for q in queues.values():
        if any(e.code == "QueueCycle" for e in q.errors):
            q.parent = None  # cut the cycle so that tree walks end
    for q in queues.values():
        if q.parent is not None:
            q.parent.children.append(q)
    for q in queues.values():
        depth, cur2 = 0, q.parent
        while cur2 is not None:
            depth, cur2 = depth + 1, cur2.parent
        q.depth = depth
        if not q.errors:
            bad = next((a for a in q.path()[1:] if a.errors), None)
            if bad is not None:
                q.errors.append(Reason("InvalidParentQueue", f"queue {q.name} sits under queue {bad.name}, "
                                       f"which is invalid: {bad.errors[0].message}"))
    for q in queues.values():
        q.children.sort(key=lambda x: x.name)
    return queues


def _cycle_names(start: Queue) -> list[str]:
    names = [start.name]
    cur = start.parent
    while cur is not None and cur.name != start.name:
        names.append(cur.name)
        cur = cur.parent
    return names


# --------------------------------------------------------------------------------------------- build
class _Inputs:
    def __init__(self) -> None:
        self.nodes: list[Obj] = []
        self.pods: list[Obj] = []
        self.queues: list[Obj] = []
        self.podgroups: list[Obj] = []
        self.priority_classes: list[Obj] = []
        self.topologies: list[Obj] = []
        self.namespaces: dict[str, Obj] = {}
        self.pdbs: list[Obj] = []
        self.owners: OwnerIndex = {}


def _sort_inputs(objects: Iterable[Obj]) -> _Inputs:
    inp = _Inputs()
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        kind = obj.get("kind")
        if kind == "List":
            sub = _sort_inputs(obj.get("items") or [])
            for attr in ("nodes", "pods", "queues", "podgroups", "priority_classes", "topologies", "pdbs"):
                getattr(inp, attr).extend(getattr(sub, attr))
            inp.namespaces.update(sub.namespaces)
            inp.owners.update(sub.owners)
        elif kind == "Node":
            inp.nodes.append(obj)
        elif kind == "Pod":
            inp.pods.append(obj)
        elif kind == "Queue":
            inp.queues.append(obj)
        elif kind == "PodGroup":
            inp.podgroups.append(obj)
        elif kind == "PriorityClass":
            inp.priority_classes.append(obj)
        elif kind == "Topology":
            inp.topologies.append(obj)
        elif kind == "Namespace":
            inp.namespaces[str(_meta(obj).get("name", ""))] = obj
        elif kind == "PodDisruptionBudget":
            inp.pdbs.append(obj)
        elif kind in OWNER_KINDS:
            ns = str(_meta(obj).get("namespace") or "default")
            inp.owners[(ns, str(kind), str(_meta(obj).get("name", "")))] = obj
    return inp


def build_snapshot(objects: Iterable[Obj], config: SchedulerConfig | None = None, now: float = 0.0,
                   usage: Mapping[str, list[float]] | None = None, wait_for_owners: bool = False,
                   pod_reader: PodReader | None = None) -> Snapshot:
    """Read plain Kubernetes objects into a Snapshot. Never raises on a bad object.

    ``wait_for_owners``: a pod whose workload owner (a Job, PyTorchJob, ...) is not among the objects yet
    waits instead of being grouped by itself; the daemon sets it, since its watches can show a pod before
    its owner and the owner decides the gang.

    ``pod_reader``: reads one pod as ``read_pod`` does (the daemon's, a ``PodMemo``, copies the pods it
    read in an earlier cycle); it must return a Pod this snapshot may change."""
    read = pod_reader or read_pod
    cfg = config or SchedulerConfig()
    inp = _sort_inputs(objects)
    problems: list[ObjectProblem] = []

    pcs = {name: PriorityClass(name, value) for name, value in c.DEFAULT_PRIORITY_CLASSES.items()}
    for obj in inp.priority_classes:
        name = str(_meta(obj).get("name", ""))
        try:
            value = int(obj.get("value", 0))
        except (TypeError, ValueError):
            problems.append(ObjectProblem("PriorityClass", name, None, Reason(
                "InvalidPriorityClass", f"priority class {name} has a non-integer value {obj.get('value')!r}")))
            continue
        pcs[name] = PriorityClass(name, value, obj.get("preemptionPolicy") == "Never")

    topologies: dict[str, list[str]] = {}
    for obj in inp.topologies:
        name = str(_meta(obj).get("name", ""))
        try:
            tspec = TopologySpec.model_validate(obj.get("spec") or {})
        except ValidationError as err:
            problems.append(ObjectProblem("Topology", name, None, Reason(
                "InvalidTopology", f"topology {name} is invalid: {validation_message(err)}")))
            continue
        topologies[name] = [lvl.nodeLabel for lvl in tspec.levels]

    queues = read_queues(inp.queues, problems)
    for q in queues.values():
        for qerr in q.errors:
            problems.append(ObjectProblem("Queue", q.name, None, qerr))
    for name, u in (usage or {}).items():
        if name in queues:
            queues[name].usage = list(u)

    nodes = [read_node(obj) for obj in inp.nodes]
    nodes.sort(key=lambda n: n.name)
    node_by_name = {n.name: n for n in nodes}

    jobs: dict[str, Job] = {}
    for obj in inp.podgroups:
        _read_podgroup(obj, jobs, problems)

    pods: list[Pod] = []
    # pods holding resources, accounted after all are read: those that recorded their GPUs first, then
    # the others, then pipelined pods, which take what is left
    holders: list[tuple[int, Node, Pod]] = []
    for obj in inp.pods:
        spec = obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            continue
        ours = (spec.get("schedulerName") or "default-scheduler") == cfg.schedulerName
        if not ours and not spec.get("nodeName"):
            continue  # another scheduler's pending pod: not ours to place, holds nothing yet
        pod_problems: list[Reason] = []
        pod = read(obj, pod_problems)
        pipelined = _annotation(obj, c.PIPELINED_NODE_ANNOTATION) if ours and not pod.node else None
        if pipelined and not pod.releasing:
            pod.node = pipelined
        node = node_by_name.get(pod.node) if pod.node else None
        if pipelined and pod.node:
            pod.status = "Pipelined"
            pod.pipeline_action = _annotation(obj, c.PIPELINED_ACTION_ANNOTATION)
            if node is not None:
                holders.append((2, node, pod))
        elif pod.node:
            pod.status = "Releasing" if pod.releasing else ("Running" if pod.phase == "Running" else "Bound")
            if node is not None:
                holders.append((0 if pod.devices else 1, node, pod))
        if not ours:
            continue
        if not pod.node and pod.releasing:
            continue  # deleted before it was ever placed
        pods.append(pod)
        job = _job_for_pod(obj, pod, jobs, inp, cfg, pcs, wait_for_owners)
        job.errors.extend(pod_problems)
        pod.job = job
        job.pods.append(pod)

    holders.sort(key=lambda h: h[0])
    for _, node, pod in holders:
        _occupy(node, pod)
    for job in jobs.values():
        _finish_job(job, queues, pcs, topologies, inp)
        if job.stale_since is None:  # jobs without a PodGroup object keep the mark on their pods
            marks = [parse_time(_annotation(p.raw, c.STALE_SINCE_ANNOTATION)) for p in job.pods if p.raw]
            job.stale_since = max(marks, default=0.0) or None
    _check_min_member(jobs, inp)
    budgets = [_read_pdb(o) for o in inp.pdbs]
    snap = Snapshot(nodes, queues, jobs, pods, topologies, pcs, now, problems,
                    [b for b in budgets if b is not None], node_by_name)
    account(snap)
    return snap


def _read_pdb(obj: Obj) -> Budget | None:
    meta = _meta(obj)
    sel = (obj.get("spec") or {}).get("selector") or {}
    allowed = (obj.get("status") or {}).get("disruptionsAllowed")
    if allowed is None:
        allowed = 0
    try:
        allowed_i = int(allowed)
    except (TypeError, ValueError):
        return None
    return Budget(str(meta.get("namespace") or "default"), str(meta.get("name", "")), sel, allowed_i)


def _read_podgroup(obj: Obj, jobs: dict[str, Job], problems: list[ObjectProblem]) -> None:
    meta = _meta(obj)
    job = Job(str(meta.get("namespace") or "default"), str(meta.get("name", "")))
    job.explicit = True
    job.raw = obj
    job.created = parse_time(meta.get("creationTimestamp"))
    try:
        spec = PodGroupSpec.model_validate(obj.get("spec") or {})
    except ValidationError as err:
        job.errors.append(Reason("InvalidPodGroup", f"PodGroup {job.key} is invalid: {validation_message(err)}"))
        jobs[job.key] = job
        return
    job.min_member = spec.minMember
    job.queue = spec.queue or ""
    job.priority_class = spec.priorityClassName or ""
    if spec.preemptibility:
        job.preemptibility = spec.preemptibility
    job.subgroups = [s.model_dump() for s in spec.subGroups]
    if spec.topologyConstraint is not None:
        job.topology = spec.topologyConstraint.topology
        job.required_level = spec.topologyConstraint.requiredTopologyLevel
        job.preferred_level = spec.topologyConstraint.preferredTopologyLevel
    if spec.stalenessGracePeriod is not None:
        job.stale_grace = parse_duration(spec.stalenessGracePeriod)
    job.stale_since = parse_time(_annotations(obj).get(c.STALE_SINCE_ANNOTATION)) or None
    jobs[job.key] = job


def _job_for_pod(obj: Obj, pod: Pod, jobs: dict[str, Job], inp: _Inputs, cfg: SchedulerConfig,
                 pcs: Mapping[str, PriorityClass], wait_for_owners: bool = False) -> Job:
    pg_name = _annotation(obj, c.POD_GROUP_ANNOTATION)
    owner: Obj | None = None
    if pg_name:
        key = f"{pod.namespace}/{pg_name}"
        job = jobs.get(key)
        if job is None:
            job = Job(pod.namespace, pg_name)
            job.errors.append(Reason(
                "MissingPodGroup", f"pod {pod.key} names PodGroup {pg_name} (annotation {c.POD_GROUP_ANNOTATION}), "
                f"which does not exist in namespace {pod.namespace}: create the PodGroup or remove the annotation",
                {"podGroup": pg_name}))
            jobs[key] = job
    else:
        info = group_for_pod(obj, inp.owners)
        owner = info.owner if info.owner is not obj else None
        key = f"{pod.namespace}/{info.name}"
        job = jobs.get(key)
        if job is None:
            job = Job(pod.namespace, info.name)
            job.min_member = info.min_member
            job.created = parse_time(_meta(owner).get("creationTimestamp")) if owner else 0.0
            job.raw = owner
            jobs[key] = job
            if wait_for_owners and info.owner is None and info.owner_kind in WATCHED_OWNER_KINDS:
                job.errors.append(Reason(
                    "OwnerNotSeen", f"waiting to see its {info.owner_kind} {info.owner_name}, which decides how many "
                    "of its pods must start together", {"kind": info.owner_kind, "name": info.owner_name}))
    if not job.pods:
        _labels_from(job, obj, owner, inp, cfg)
    return job


def _labels_from(job: Job, pod: Obj, owner: Obj | None, inp: _Inputs, cfg: SchedulerConfig) -> None:
    """Queue, priority class, preemptibility and topology from the owner, then the pod, then the namespace;
    what an explicit PodGroup says wins."""
    ns_obj = inp.namespaces.get(str(_meta(pod).get("namespace") or "default"))
    wl = workload_labels(pod, owner, ns_obj, cfg.queueLabelKeys)
    if not job.queue:
        job.queue = wl.queue or cfg.defaultQueue
    if not job.priority_class:
        job.priority_class = wl.priority_class or ""
        if wl.priority is not None:
            job.priority = wl.priority
    if job.preemptibility is None:
        job.preemptibility = wl.preemptibility
        if wl.bad_preemptibility:
            job.warnings.append(Reason(
                "InvalidPreemptibility", f"label {c.PREEMPTIBILITY_LABEL}={wl.bad_preemptibility!r} is neither "
                f"{c.PREEMPTIBLE} nor {c.NON_PREEMPTIBLE}; using the priority to decide"))
    if job.topology is None and wl.topology:
        job.topology, job.required_level, job.preferred_level = wl.topology, wl.required_level, wl.preferred_level


def _finish_job(job: Job, queues: Mapping[str, Queue], pcs: Mapping[str, PriorityClass],
                topologies: Mapping[str, list[str]], inp: _Inputs) -> None:
    job.pods.sort(key=lambda p: p.name)
    if not job.created:
        job.created = min((p.created for p in job.pods), default=0.0)
    if job.priority_class:
        pc = pcs.get(job.priority_class)
        if pc is None:
            job.warnings.append(Reason(
                "UnknownPriorityClass", f"priority class {job.priority_class!r} does not exist; using priority 0 "
                f"(preemptible). Create it, or use one of {', '.join(sorted(pcs))}",
                {"priorityClass": job.priority_class}))
            job.priority = 0
        else:
            job.priority = pc.value
            job.preempt_never = pc.preempt_never
    job.preemptible = (job.preemptibility == c.PREEMPTIBLE) if job.preemptibility else \
        job.priority < c.PREEMPTIBLE_BELOW
    q = queues.get(job.queue)
    if q is None:
        job.errors.append(Reason(
            "UnknownQueue", f"queue {job.queue!r} does not exist: create it (kaictl queue create {job.queue} "
            f"--gpu-quota N) or label the workload with an existing queue ({c.QUEUE_LABEL}=NAME)",
            {"queue": job.queue}))
    elif q.errors:
        job.errors.append(Reason("InvalidQueue", f"its queue {q.name} is invalid: {q.errors[0].message}",
                                 {"queue": q.name}))
    elif q.children:
        job.errors.append(Reason(
            "NotLeafQueue", f"queue {q.name} has child queues ({', '.join(ch.name for ch in q.children)}); only "
            "leaf queues hold workloads: submit to one of its children", {"queue": q.name}))
    if job.topology is not None:
        levels = topologies.get(job.topology)
        if levels is None:
            job.errors.append(Reason(
                "UnknownTopology", f"topology {job.topology!r} does not exist: create the Topology object or fix the "
                f"{c.TOPOLOGY_ANNOTATION} annotation (known: {', '.join(sorted(topologies)) or 'none'})",
                {"topology": job.topology}))
        else:
            for lvl in (job.required_level, job.preferred_level):
                if lvl is not None and lvl not in levels:
                    job.errors.append(Reason(
                        "UnknownTopologyLevel", f"{lvl!r} is not a level of topology {job.topology} (its levels: "
                        f"{', '.join(levels)})", {"topology": job.topology, "level": lvl}))
    elif job.required_level or job.preferred_level:
        job.errors.append(Reason("InvalidTopology", "a topology level is set without a topology name: set "
                                 f"spec.topologyConstraint.topology or the {c.TOPOLOGY_ANNOTATION} annotation"))


def _owner_capacity(owner: Obj | None) -> int | None:
    """How many pods an owner will ever run at once, when it says so."""
    if owner is None:
        return None
    kind = owner.get("kind")
    spec = owner.get("spec") or {}
    try:
        if kind == "Job":
            return int(spec.get("parallelism", 1))
        if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
            return int(spec.get("replicas", 1))
    except (TypeError, ValueError):
        return None
    return None


def _check_min_member(jobs: Mapping[str, Job], inp: _Inputs) -> None:
    for job in jobs.values():
        if not job.pods or job.min_member <= len(job.pods):
            continue
        owners = set()
        for p in job.pods:
            if p.raw is not None:
                from kaid.model.grouping import top_owner

                _, _, o = top_owner(p.raw, inp.owners)
                if o is not None and o is not p.raw:
                    owners.add(id(o))
                    cap = _owner_capacity(o)
                    if cap is not None and cap < job.min_member:
                        job.errors.append(Reason(
                            "MinMemberTooLarge", f"PodGroup {job.key} needs minMember={job.min_member} pods at once "
                            f"but its {o.get('kind')} {_meta(o).get('name')} runs at most {cap}: lower minMember to "
                            f"{cap} or raise the workload's replicas", {"minMember": job.min_member, "max": cap}))
                        break


def pod_vector(pod: Pod, ref: Node | None) -> tuple[int, int, int]:
    """(milli-GPU, millicores, bytes) of a pod; a pending gpu-memory pod is converted with ``ref``."""
    node = ref
    return pod.gpu_milli_on(node), pod.cpu, pod.mem


def account(snap: Snapshot) -> None:
    """Fill each queue's allocated, non-preemptible allocated and requested, up the tree."""
    ref = max((n for n in snap.nodes if n.gpu_mem_mib), key=lambda n: n.gpu_mem_mib, default=None)
    for q in snap.queues.values():
        q.jobs = []
        q.allocated = [0, 0, 0]
        q.alloc_np = [0, 0, 0]
        q.requested = [0, 0, 0]
    for job in snap.jobs.values():
        jq = snap.queues.get(job.queue)
        if jq is None:
            continue
        q = jq
        q.jobs.append(job)
        job.request_milli = 0
        for pod in job.pods:
            node = snap.node_by_name.get(pod.node) if pod.node else ref
            g, cpu, mem = pod_vector(pod, node)
            job.request_milli += g
            for anc in q.path():
                anc.requested[GPU] += g
                anc.requested[CPU] += cpu
                anc.requested[MEM] += mem
                if pod.active:
                    anc.allocated[GPU] += g
                    anc.allocated[CPU] += cpu
                    anc.allocated[MEM] += mem
                    if not job.preemptible:
                        anc.alloc_np[GPU] += g
                        anc.alloc_np[CPU] += cpu
                        anc.alloc_np[MEM] += mem
    for q in snap.queues.values():
        q.jobs.sort(key=lambda j: (-j.priority, j.created, j.key))
