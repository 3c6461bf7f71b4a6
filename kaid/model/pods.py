"""Reading pods: effective requests, GPU annotations (whole devices, a fraction or memory of a shared GPU),
placement constraints. A problem with one pod becomes a Reason; the pod is still read."""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from decimal import Decimal
from typing import Any

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import GpuSharingConfig
from kaid.api.quantity import QuantityError, parse_quantity, to_int, to_milli
from kaid.model.objects import MAX_NODE_GPUS, MOST_AMOUNT, Node, Pod, Reason
from kaid.model.podterms import required_pod_terms, spread_constraints
from kaid.model.selectors import node_selector_terms
from kaid.model.vocabulary import PodPhase, ReasonCode

Obj = dict[str, Any]
PodReader = Callable[[Obj, list[Reason]], Pod]


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


def claim_volumes(volumes: Any) -> list[Obj]:
    """The volumes of a pod spec that claim storage, with as much of each as ``claims`` reads: a
    PersistentVolumeClaim's claim name, a generic ephemeral volume's name (its claim is made for the pod)."""
    out: list[Obj] = []
    for v in volumes if isinstance(volumes, list) else ():
        if not isinstance(v, dict):
            continue
        pvc = v.get("persistentVolumeClaim")
        if isinstance(pvc, dict) and pvc.get("claimName"):
            out.append({"name": v.get("name"), "persistentVolumeClaim": {"claimName": pvc["claimName"]}})
        elif isinstance(v.get("ephemeral"), dict) and v.get("name"):
            out.append({"name": v["name"], "ephemeral": {}})
    return out


def claims(obj: Obj | None) -> tuple[str, ...]:
    """The PersistentVolumeClaims (in the pod's namespace) a pod's volumes use, in volume order: the ones named, and
    ``<pod>-<volume>`` for a generic ephemeral volume (the claim Kubernetes makes for it)."""
    if not isinstance(obj, dict):
        return ()
    spec = obj.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    if not volumes:
        return ()
    name = str(meta.meta(obj).get("name") or "")
    return tuple(str(v["persistentVolumeClaim"]["claimName"]) if "persistentVolumeClaim" in v else f"{name}-{v['name']}"
                 for v in claim_volumes(volumes))


def _required_terms(spec: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    na = ((spec.get("affinity") or {}).get("nodeAffinity") or {})
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return node_selector_terms(req.get("nodeSelectorTerms"))


def _impossible_amounts(pod: Pod, problems: list[Reason]) -> None:
    """A pod that asks for less than nothing or for more than any node holds (``MAX_NODE_GPUS``, ``MOST_AMOUNT``):
    refused, with its amounts read within those bounds (the API server refuses a negative request, a hand-written
    file may hold one; past the bounds a pod fits nowhere all the same, and every sum of them stays within 64
    bits)."""
    problems.append(Reason(
        ReasonCode.INVALID_SPEC, f"pod {pod.key} requests {pod.gpu_whole} GPUs, {pod.cpu} millicores and {pod.mem} "
        f"bytes of memory: each must be at least 0 and at most what a node can hold (kai reads up to "
        f"{MAX_NODE_GPUS} GPUs and {MOST_AMOUNT} millicores or bytes on a node); fix its resources.requests",
        {"mostGpus": MAX_NODE_GPUS}))
    pod.gpu_whole = min(max(pod.gpu_whole, 0), MAX_NODE_GPUS + 1)
    pod.cpu = min(max(pod.cpu, 0), MOST_AMOUNT + 1)
    pod.mem = min(max(pod.mem, 0), MOST_AMOUNT + 1)


def read_pod(obj: Obj, problems: list[Reason]) -> Pod:
    """Parse one pod; problems with its GPU annotations or requests go into ``problems``. (Tens of thousands are
    read per cold snapshot: the metadata is read here directly, and of the annotations only the few kai reads.)"""
    m = obj.get("metadata")
    if not isinstance(m, dict):
        m = _NONE
    ann = m.get("annotations")
    return read_parts(obj, m, obj.get("spec") or {}, obj.get("status") or {}, ann if isinstance(ann, dict) else _NONE,
                      problems)


def read_parts(obj: Obj, m: Obj, spec: Obj, status: Obj, ann: Obj, problems: list[Reason]) -> Pod:
    """``read_pod`` with the object's parts as the caller read them (the cold build reads them once for all it
    reads of a pod): its metadata and annotations (a mapping: empty where absent or not one), its spec and status
    (``or {}``)."""
    pod = Pod(str(m.get("namespace") or meta.DEFAULT_NAMESPACE), str(m.get("name", "")), str(m.get("uid") or ""))
    raw_labels = m.get("labels")
    labels = pod.labels = {str(k): str(v) for k, v in raw_labels.items()} \
        if raw_labels and isinstance(raw_labels, dict) else {}
    pod.phase = str(status.get("phase") or PodPhase.PENDING)
    node = spec.get("nodeName")
    pod.node = str(node) if node else None
    pod.created = timestamp(m.get("creationTimestamp"))
    started = status.get("startTime")  # (none yet, as for a pending pod: read as 0, so the creation time)
    pod.started = (timestamp(started) or pod.created) if started else pod.created
    deletion = m.get("deletionTimestamp")
    if deletion:
        pod.releasing = True
        pod.deleted = timestamp(deletion)
    pod.cpu, pod.mem, pod.gpu_whole, part, pod.ext = _amounts(spec, pod, problems)
    ports = host_ports(spec)
    if ports:
        pod.ext = tuple(sorted((*pod.ext, *ports)))
    if not (0 <= pod.gpu_whole <= MAX_NODE_GPUS and 0 <= pod.cpu <= MOST_AMOUNT and 0 <= pod.mem <= MOST_AMOUNT):
        _impossible_amounts(pod, problems)
    if part is not None:
        problems.append(Reason(
            ReasonCode.INVALID_SPEC, f"pod {pod.key} requests {part} {c.GPU_RESOURCE}; whole devices only. "
            f"Use the annotation {c.GPU_FRACTION_ANNOTATION} for a share of one GPU"))
    if ann and not ann.keys().isdisjoint(_SHARING):  # (without any of them there is nothing to read)
        written = {k: str(ann[k]) for k in _SHARING if k in ann}
        key = (written.get(c.GPU_FRACTION_ANNOTATION), written.get(c.GPU_MEMORY_ANNOTATION),
               written.get(c.GPU_FRACTION_NUM_DEVICES_ANNOTATION))
        known = None if pod.gpu_whole else _SHARES.get(key)
        if known is not None:
            pod.gpu_frac, pod.gpu_mem_mib, pod.frac_devices = known
        else:
            _read_sharing(pod, written, problems)
            if pod.frac_devices:  # (read without a problem: the same words read the same for every pod)
                if len(_SHARES) >= _SHARES_KEPT:
                    _SHARES.clear()
                _SHARES[key] = (pod.gpu_frac, pod.gpu_mem_mib, pod.frac_devices)
    if spec.get("nodeSelector") or spec.get("affinity") or spec.get("tolerations") or pod.ext or \
            spec.get("topologySpreadConstraints"):
        _read_constraints(pod, spec)
    devs = _text(ann, c.GPU_DEVICES_ANNOTATION)
    if devs:
        pod.devices = _devices(devs)
    pod.gpu_group = labels.get(c.GPU_GROUP_LABEL)
    pod.raw = obj
    return pod


_NONE: Obj = {}  # a missing metadata or annotations mapping (read, never written)
_SHARING = (c.GPU_FRACTION_ANNOTATION, c.GPU_MEMORY_ANNOTATION, c.GPU_FRACTION_NUM_DEVICES_ANNOTATION)
_TIMES: dict[str, float] = {}  # a timestamp as written -> epoch seconds
_TIMES_KEPT = 32_768
# a GPU share as its annotations write it (fraction, memory, devices) -> (gpu_frac, gpu_mem_mib, frac_devices), for
# the shares read without a problem (a pod without whole GPUs): thousands of pods write the same few shares
_SHARES: dict[tuple[str | None, str | None, str | None], tuple[int, int, int]] = {}
_SHARES_KEPT = 1024


def timestamp(value: Any) -> float:
    """``meta.parse_time``, remembered: the pods and PodGroups of a job share their timestamps, and a cold snapshot
    reads each one in the PodGroups' pass, then in the pods' (at 4,000 nodes 17,398 of them, read in the same order
    each time: a least-recently-used memory of fewer entries keeps none of them)."""
    if type(value) is not str:
        return meta.parse_time(value)
    known = _TIMES.get(value)
    if known is None:
        if len(_TIMES) >= _TIMES_KEPT:
            _TIMES.clear()
        known = _TIMES[value] = meta.parse_time(value)
    return known


def _devices(text: str) -> tuple[int, ...]:
    """The devices annotation's indexes (empty parts skipped; unreadable: none), remembered by the text: a running
    pod's devices are one of a few sets (bench_allocate at 4,000 nodes: 9,542 pods, 20 texts), so the pods that write
    the same share one tuple (a tuple is a tracked object: the cold build's young collection read each)."""
    known = _DEVICE_SETS.get(text)
    if known is None:
        if len(_DEVICE_SETS) >= _DEVICE_SETS_KEPT:
            _DEVICE_SETS.clear()
        known = _DEVICE_SETS[text] = _read_devices(text)
    return known


_DEVICE_SETS: dict[str, tuple[int, ...]] = {}  # a devices annotation as written -> its indexes
_DEVICE_SETS_KEPT = 4096


def _read_devices(text: str) -> tuple[int, ...]:
    try:
        return tuple(map(int, text.split(",")))  # most: no empty part
    except ValueError:
        try:
            return tuple(int(x) for x in text.split(",") if x.strip())
        except ValueError:
            return ()


def annotation_value(obj: Obj, key: str) -> Any:
    """One annotation as written, None when absent (``meta.annotation`` without the text, in one call)."""
    m = obj.get("metadata")
    anns = m.get("annotations") if isinstance(m, dict) else None
    return anns.get(key) if isinstance(anns, dict) else None


def annotation_text(obj: Obj, key: str) -> str:
    """``meta.annotation``: one annotation as text, empty when absent (asked of every pod)."""
    value = annotation_value(obj, key)
    return "" if value is None else str(value)


def _text(values: Obj, key: str) -> str | None:
    """One label or annotation as text (``meta.string_map``'s reading of it), None when absent."""
    value = values.get(key)
    return value if type(value) is str else (None if value is None and key not in values else str(value))


def _read_constraints(pod: Pod, spec: Mapping[str, Any]) -> None:
    """The node selector, required node affinity, required inter-pod (anti-)affinity and tolerations, and the
    signature they make."""
    selector = spec.get("nodeSelector")
    if selector:
        pod.node_selector = {str(k): str(v) for k, v in selector.items()}
    affinity = spec.get("affinity")
    if affinity:
        pod.affinity = _required_terms(spec)
        if isinstance(affinity, dict) and ("podAffinity" in affinity or "podAntiAffinity" in affinity):
            pod.pod_affinity = required_pod_terms(affinity, "podAffinity", pod.namespace)
            pod.anti = required_pod_terms(affinity, "podAntiAffinity", pod.namespace)
    tolerations = spec.get("tolerations")
    if tolerations:
        pod.tolerations = [t for t in tolerations if isinstance(t, dict)]
    if spec.get("topologySpreadConstraints"):
        pod.spread = spread_constraints(spec, pod.labels, pod.namespace)
    if pod.pod_affinity or pod.anti or pod.spread:  # (which nodes take it depends on the pods placed: a signature
        # of its own)
        pod.sig = repr((sorted(pod.node_selector.items()), pod.affinity, pod.tolerations,
                        [t.ident for t in pod.pod_affinity], [t.ident for t in pod.anti],
                        [c.ident for c in pod.spread]))
    elif pod.node_selector or pod.affinity or pod.tolerations:
        pod.sig = repr((sorted(pod.node_selector.items()), pod.affinity, pod.tolerations))
    if pod.ext:  # (which nodes can take it depends on their extended resources, and what room each has on them)
        pod.sig = repr((pod.sig, pod.ext))


# cpu (milli), memory (bytes), whole GPUs (the request's whole part), the GPU request where it is not whole, and the
# extended resources requested (``extended``)
Amounts = tuple[int, int, int, Decimal | None, tuple[tuple[str, int], ...]]
_AMOUNTS: dict[tuple[Any, ...], Amounts] = {}  # a lone container's requests and limits
_AMOUNTS_KEPT = 4096


_NATIVE = frozenset({"cpu", "memory", c.GPU_RESOURCE})
HOST_PORT = "hostPort:"  # a host port among a pod's extended resources: ``hostPort:TCP/8080`` (a colon: no resource's
# name), of which every node has one (``placement.predicates.extended_alloc``)
EPHEMERAL_STORAGE = "ephemeral-storage"  # checked where a node reports it (every kubelet does; kwok's nodes do not)


def host_ports(spec: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """The host ports a pod's containers take (a hostNetwork pod's container ports are its host ports: the API server
    writes them so), as extended resources of one each (``HOST_PORT``), in name order. kube-scheduler's NodePorts:
    two pods conflict on the same protocol and port where their host IPs overlap; kai takes any two as
    overlapping."""
    found: set[str] = set()
    for ctr in spec.get("containers") or ():
        for p in (ctr.get("ports") or ()) if isinstance(ctr, dict) else ():
            port = p.get("hostPort") if isinstance(p, dict) else None
            if isinstance(port, int) and not isinstance(port, bool) and port > 0:
                found.add(f"{HOST_PORT}{p.get('protocol') or 'TCP'}/{port}")
    return tuple((name, 1) for name in sorted(found))


def is_extended(name: str) -> bool:
    """Whether a resource is one kai checks as kube-scheduler checks its scalar resources (``NodeResourcesFit``):
    extended resources (a name with a domain outside kubernetes.io: ``rdma/ib``, ``nvidia.com/mig-1g.10gb``), huge
    pages and ``ephemeral-storage`` (``predicates.extended_alloc``: without bound on a node that does not report it),
    but kai's own GPUs (``nvidia.com/gpu``, accounted by device)."""
    if name.startswith("hugepages-") or name == EPHEMERAL_STORAGE:
        return True
    domain, slash, _ = name.partition("/")
    return bool(slash) and name != c.GPU_RESOURCE and domain != "kubernetes.io" and \
        not domain.endswith(".kubernetes.io") and not name.startswith("requests.")


def extended(req: Mapping[str, Decimal]) -> tuple[tuple[str, int], ...]:
    """The extended resources of a pod's requests (``pod_requests``) that it asks some of, in name order, each in its
    own unit (fractions round up), read within ``MOST_AMOUNT`` (more than any node has: it fits nowhere)."""
    return tuple(sorted((name, min(to_int(v), MOST_AMOUNT + 1)) for name, v in req.items()
                        if is_extended(name) and v > 0))


def _amounts(spec: Mapping[str, Any], pod: Pod, problems: list[Reason]) -> Amounts:
    """What the pod requests of cpu, memory and GPUs (``pod_requests``; ``Amounts``). A pod of one container, as most
    are, asks what thousands of others ask: its amounts are remembered by its requests and limits as written."""
    containers = spec.get("containers")
    key: tuple[Any, ...] | None = None
    if isinstance(containers, list) and len(containers) == 1 and isinstance(containers[0], dict) and \
            not spec.get("initContainers") and not spec.get("overhead"):
        res = containers[0].get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        if isinstance(requests, dict) and isinstance(limits, dict):
            # flat (the requests' values, their names, their count, the limits' values and names): hashed at C speed
            key = (*requests.values(), *requests, len(requests), *limits.values(), *limits)
            try:
                known = _AMOUNTS.get(key)
            except TypeError:  # a value no quantity is made of (a list, a mapping): read it the long way
                key, known = None, None
            if known is not None:
                return known
    try:
        req = pod_requests(spec)
    except QuantityError as err:
        problems.append(Reason(ReasonCode.INVALID_SPEC, f"pod {pod.key} has an unreadable resource request: {err}"))
        return 0, 0, 0, None, ()
    gpu = req.get(c.GPU_RESOURCE, Decimal(0))
    whole = gpu == gpu.to_integral_value()
    amounts = (int(to_milli(req.get("cpu", 0))), int(to_int(req.get("memory", 0))), int(gpu), None if whole else gpu,
               extended(req) if not _NATIVE.issuperset(req) else ())
    if key is not None and all(type(v) is str for part in (requests, limits) for v in part.values()):  # (1 == 1.0)
        if len(_AMOUNTS) >= _AMOUNTS_KEPT:
            _AMOUNTS.clear()
        _AMOUNTS[key] = amounts
    return amounts


def _read_sharing(pod: Pod, ann: Mapping[str, str], problems: list[Reason]) -> None:
    frac_s = ann.get(c.GPU_FRACTION_ANNOTATION)
    mem_s = ann.get(c.GPU_MEMORY_ANNOTATION)
    num_s = ann.get(c.GPU_FRACTION_NUM_DEVICES_ANNOTATION)
    if frac_s is None and mem_s is None:
        if num_s is not None:
            problems.append(Reason(
                ReasonCode.INVALID_SPEC, f"pod {pod.key}: {c.GPU_FRACTION_NUM_DEVICES_ANNOTATION} needs "
                f"{c.GPU_FRACTION_ANNOTATION} or {c.GPU_MEMORY_ANNOTATION} beside it"))
        return
    if pod.gpu_whole:
        problems.append(Reason(
            ReasonCode.INVALID_SPEC, f"pod {pod.key} asks for whole GPUs ({c.GPU_RESOURCE}) and a GPU share "
            "at once: keep one of the two"))
        return
    if frac_s is not None and mem_s is not None:
        problems.append(Reason(ReasonCode.INVALID_SPEC, f"pod {pod.key} sets both {c.GPU_FRACTION_ANNOTATION} and "
                               f"{c.GPU_MEMORY_ANNOTATION}: keep one of the two"))
        return
    num = 1
    if num_s is not None:
        try:
            num = int(num_s)
        except ValueError:
            num = 0
        if num < 1:
            problems.append(Reason(ReasonCode.INVALID_SPEC, f"pod {pod.key}: {c.GPU_FRACTION_NUM_DEVICES_ANNOTATION}="
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
                ReasonCode.INVALID_SPEC,
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
                ReasonCode.INVALID_SPEC, f"pod {pod.key}: {c.GPU_MEMORY_ANNOTATION}={mem_s!r} must be a positive whole "
                "number of MiB (for example \"20000\")", {"annotation": c.GPU_MEMORY_ANNOTATION, "value": mem_s}))
            return
        pod.gpu_mem_mib = mib
    pod.frac_devices = num


# ------------------------------------------------------------------------------------- what kai writes on pods
def mark_bound(obj: Obj, node: str, devices: tuple[int, ...], gpu_groups: Sequence[str]) -> None:
    """Change a pod object (in place) as kai's bind does, so that ``read_pod`` reads it back bound: its node, the
    devices annotation (removed when there are none), the GPU group labels, and no pipelined reservation left.
    The daemon's assumed binds and the simulator apply binds with it."""
    obj.setdefault("spec", {})["nodeName"] = node
    anns = obj.setdefault("metadata", {}).setdefault("annotations", {})
    anns.pop(c.PIPELINED_NODE_ANNOTATION, None)
    anns.pop(c.PIPELINED_ACTION_ANNOTATION, None)
    _mark_devices(obj, devices, gpu_groups)


def mark_pipelined(obj: Obj, node: str, action: str, devices: tuple[int, ...], gpu_groups: Sequence[str]) -> None:
    """Change a pod object (in place) as kai's pipelining does: reserved on ``node`` by ``action``, with the
    devices it will get there."""
    anns = obj.setdefault("metadata", {}).setdefault("annotations", {})
    anns[c.PIPELINED_NODE_ANNOTATION] = node
    anns[c.PIPELINED_ACTION_ANNOTATION] = action
    _mark_devices(obj, devices, gpu_groups)


def _mark_devices(obj: Obj, devices: tuple[int, ...], gpu_groups: Sequence[str]) -> None:
    m = obj["metadata"]
    if devices:
        m["annotations"][c.GPU_DEVICES_ANNOTATION] = ",".join(str(d) for d in devices)
    else:
        m["annotations"].pop(c.GPU_DEVICES_ANNOTATION, None)
    if gpu_groups:
        m.setdefault("labels", {}).update(group_labels(gpu_groups))


def group_labels(groups: Sequence[str]) -> dict[str, str]:
    """The labels that tie a pod to its GPU groups (one group: ``runai-gpu-group``; several: one
    ``runai-gpu-group/<group>`` each, as KAI writes them); ``gpu_groups_of`` reads them back."""
    if len(groups) == 1:
        return {c.GPU_GROUP_LABEL: groups[0]}
    return {f"{c.GPU_GROUP_MULTI_LABEL_PREFIX}{g}": g for g in groups}


def gpu_groups_of(labels: Mapping[str, Any]) -> list[str]:
    """The GPU groups a pod's labels name: ``runai-gpu-group``, or one ``runai-gpu-group/<group>`` per device of
    a pod that spans several (sorted)."""
    multi = sorted(str(v) for k, v in labels.items() if str(k).startswith(c.GPU_GROUP_MULTI_LABEL_PREFIX) and v)
    if multi:
        return multi
    single = labels.get(c.GPU_GROUP_LABEL)
    return [str(single)] if single else []


def is_reservation_pod(obj: Obj, cfg: GpuSharingConfig) -> bool:
    """One of kai's reservation pods, which hold a shared GPU's device on its node."""
    return meta.meta(obj).get("namespace") == cfg.reservationNamespace and \
        meta.labels_of(obj).get(c.RESERVATION_APP_LABEL) == cfg.reservationAppLabel


def new_gpu_group(node: Node, pod: Pod, device: int, k: int) -> str:
    """The name of a GPU group that ``pod`` opens on ``device`` (its ``k``-th): unique to this group's life (from
    the pod's uid), so that a group opened later on the same device gets a reservation pod of its own; the same
    when the same pod is placed there again (it meets the reservation made for it before). A label value."""
    if not pod.uid:
        return f"{node.name}-gpu{device}"
    return pod.uid if pod.frac_devices == 1 else f"{pod.uid}-{k}"


def opened_by(group: str, uids: Container[str]) -> bool:
    """Whether ``group`` is named after one of the pods ``uids`` (``new_gpu_group``)."""
    return group in uids or group.rpartition("-")[0] in uids
