"""The device handoff of a shared-GPU pod, as plain data, KAI-Scheduler's way (its names, labels, annotations
and ConfigMap keys, so that its users' tooling keeps working):

1. admission (``mutate``) names the pod's ConfigMaps (annotation ``runai/shared-gpu-configmap``) and points the
   fraction container's env at them;
2. the binder holds each GPU group with a reservation pod (``reservation_pod``) that requests the whole device
   and reports the device's UUID (``reserved_uuid``); it writes the pod's ConfigMaps (``configmaps``), labels
   the pod (``bind_patch``) and binds it; on failure it takes the labels back (``rollback_patch``);
3. a reservation pod goes once no pod uses its group (``groups_in_use``).

Pure: objects in, objects out. ``kaid.kube.reservations`` talks to the API server.
"""

from __future__ import annotations

import copy
import hashlib
import math
import random
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kaid.api import constants as c
from kaid.api import meta as m
from kaid.api.config import GpuSharingConfig
from kaid.model.pods import gpu_groups_of, group_labels, is_reservation_pod
from kaid.model.vocabulary import PodPhase

Obj = dict[str, Any]

# The random part of a ConfigMap name prefix: 7 characters of this alphabet (no vowels: no words), as KAI's.
_RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_RANDOM_CHARS = 7
_NAME_MAX = 63  # the longest name derived from the prefix ("<prefix>-<index>-vol") must be a DNS label
_SHARED_SUFFIX = "shared-gpu"
SHARING_ANNOTATIONS = (c.GPU_FRACTION_ANNOTATION, c.GPU_MEMORY_ANNOTATION)
SHARING_ENV = (c.NVIDIA_VISIBLE_DEVICES, c.RUNAI_NUM_OF_GPUS, c.GPU_PORTION)
# phases in which a pod uses its GPU group (KAI's rule: a reservation goes once none of its pods is in one)
USING_PHASES = (PodPhase.PENDING, PodPhase.RUNNING)
ORPHAN_MARGIN = 5.0  # seconds beyond the reservation timeout before a reservation pod never used here goes


class HandoffError(ValueError):
    """A shared-GPU pod that cannot be given its device; the message says what to change."""


def pod_key(pod: Obj) -> str:
    meta = m.meta(pod)
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or meta.get('generateName') or ''}"


def is_shared_gpu_pod(pod: Obj) -> bool:
    """Asks for a share of a GPU (``gpu-fraction`` or ``gpu-memory``)."""
    ann = m.annotations_of(pod)
    return any(k in ann for k in SHARING_ANNOTATIONS)


# --------------------------------------------------------------------------------------------- reservation pods
def reservation_pod_name(node: str, group: str) -> str:
    """The one name of a group's reservation pod on a node: a second create for the group (a concurrent bind, a
    retry, a restarted kaid) meets the first one instead of reserving another device. (KAI's newer releases
    derive it the same way, so their pods are found too.)"""
    digest = hashlib.sha256(f"{node}/{group}".encode()).hexdigest()[:16]
    return f"{c.RESERVATION_POD_PREFIX}-{digest}"


def reservation_pod(node: str, group: str, fraction_pod: Obj, cfg: GpuSharingConfig) -> Obj:
    """The pod that holds GPU group ``group`` on ``node``: it asks for one whole device, goes straight to the node
    (no scheduler), tolerates what the shared-GPU pod tolerates, and its process writes the device's UUID on
    its own annotation (``kaid gpu-reservation``)."""
    tolerations = copy.deepcopy((fraction_pod.get("spec") or {}).get("tolerations") or [])
    spec: Obj = {
        "nodeName": node,
        "serviceAccountName": cfg.reservationServiceAccount,
        "terminationGracePeriodSeconds": 5,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": c.RESERVATION_CONTAINER,
            "image": cfg.reservationImage,
            "imagePullPolicy": "IfNotPresent",
            "args": ["gpu-reservation"],
            "terminationMessagePolicy": "FallbackToLogsOnError",  # its one-line error, for the binder to quote
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
            "resources": {"requests": {c.GPU_RESOURCE: "1", "cpu": "2m", "memory": "48Mi"},
                          "limits": {c.GPU_RESOURCE: "1", "memory": "128Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
        }],
    }
    if tolerations:
        spec["tolerations"] = tolerations
    if cfg.reservationRuntimeClassName:
        spec["runtimeClassName"] = cfg.reservationRuntimeClassName
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": reservation_pod_name(node, group), "namespace": cfg.reservationNamespace,
                     "labels": {c.RESERVATION_APP_LABEL: cfg.reservationAppLabel, c.GPU_GROUP_LABEL: group},
                     "annotations": {c.DO_NOT_DISRUPT_ANNOTATION: "true"}},
        "spec": spec,
    }


def reserved_uuid(reservation: Obj) -> str | None:
    """The UUID of the device a reservation pod holds, once its process has written it."""
    value = m.annotations_of(reservation).get(c.RESERVED_GPU_ANNOTATION)
    return str(value) if value else None


def reservation_failure(reservation: Obj) -> str | None:
    """Why a reservation pod will not report a UUID, once that is known: the pod failed (the kubelet found no
    free GPU: UnexpectedAdmissionError), or its process exited with an error (its one line is quoted)."""
    status = reservation.get("status") or {}
    if status.get("phase") == PodPhase.FAILED:
        return f"{status.get('reason') or 'Failed'}: {status.get('message') or 'no message'}"
    for ctr in status.get("containerStatuses") or []:
        for state in (ctr.get("state") or {}, ctr.get("lastState") or {}):
            ended = state.get("terminated") or {}
            if ended.get("exitCode"):
                said = str(ended.get("message") or ended.get("reason") or "").strip().splitlines()
                return f"its process exited with {ended['exitCode']}: {said[-1] if said else 'no message'}"
    return None


def reservation_group(reservation: Obj) -> str:
    return str(m.labels_of(reservation).get(c.GPU_GROUP_LABEL) or "")


# --------------------------------------------------------------------------------------------- GPU groups
def groups_of(pod: Obj) -> list[str]:
    """The GPU groups a pod's labels name."""
    return gpu_groups_of(m.labels_of(pod))


def groups_in_use(objects: Iterable[Obj], cfg: GpuSharingConfig) -> set[str]:
    """GPU groups that a pending or running pod (not a reservation pod) is labelled with."""
    used: set[str] = set()
    for obj in objects:
        if obj.get("kind") != "Pod" or is_reservation_pod(obj, cfg):
            continue
        if ((obj.get("status") or {}).get("phase") or "Pending") not in USING_PHASES:
            continue
        used.update(groups_of(obj))
    return used


@dataclass(frozen=True)
class Idle:
    """What ``idle_reservations`` found: the reservation pods to delete, and the groups seen in use."""

    pods: list[Obj]
    used: set[str]


def idle_reservations(objects: Iterable[Obj], cfg: GpuSharingConfig, busy: Container[str], used_before: Container[str],
                      now: float, skip: Container[str] = ()) -> Idle:
    """The reservation pods to delete: those whose group no pending or running pod and no bind in flight
    (``busy``) uses, if the group was seen in use before (``used_before``: its pods are gone) or the pod is older
    than the reservation timeout (made for a bind that never came back: a kaid that died, a pod placed
    elsewhere since). ``skip``: uids and names of pods already on their way out."""
    objects = list(objects)
    reservations = [o for o in objects if o.get("kind") == "Pod" and is_reservation_pod(o, cfg)]
    in_use = groups_in_use(objects, cfg) if reservations else set()
    idle: list[Obj] = []
    used: set[str] = set()
    for obj in reservations:
        meta = m.meta(obj)
        group = reservation_group(obj)
        if not group or meta.get("deletionTimestamp") or meta.get("uid") in skip or meta.get("name") in skip:
            continue
        if group in in_use or group in busy:
            used.add(group)
        elif group in used_before or now - m.parse_time(meta.get("creationTimestamp")) > \
                cfg.reservationTimeoutSeconds + ORPHAN_MARGIN:
            idle.append(obj)
    return Idle(idle, used)


# --------------------------------------------------------------------------------------------- the pod's ConfigMaps
@dataclass(frozen=True)
class FractionContainer:
    """The container that gets the shared GPU: the first one, or the one the pod names (init containers too)."""

    index: int
    init: bool
    name: str

    @property
    def suffix(self) -> str:
        return f"i{self.index}" if self.init else str(self.index)

    def of(self, pod: Obj) -> Obj:
        spec = pod.get("spec") or {}
        found: Obj = (spec.get("initContainers" if self.init else "containers") or [])[self.index]
        return found


def fraction_container(pod: Obj) -> FractionContainer:
    spec = pod.get("spec") or {}
    containers = [ctr for ctr in spec.get("containers") or [] if isinstance(ctr, dict)]
    wanted = m.annotations_of(pod).get(c.GPU_FRACTION_CONTAINER_NAME_ANNOTATION)
    if wanted is None:
        if not containers:
            raise HandoffError(f"pod {pod_key(pod)} has no container to give the shared GPU to")
        return FractionContainer(0, False, str(containers[0].get("name") or ""))
    for init, group in ((True, spec.get("initContainers") or []), (False, containers)):
        for i, ctr in enumerate(group):
            if isinstance(ctr, dict) and ctr.get("name") == wanted:
                return FractionContainer(i, init, wanted)
    raise HandoffError(f"pod {pod_key(pod)}: annotation {c.GPU_FRACTION_CONTAINER_NAME_ANNOTATION}={wanted!r} names "
                       "no container of the pod: name one of its containers or remove the annotation")


def configmap_names(pod: Obj) -> tuple[str, str]:
    """The names of a pod's two ConfigMaps: the capabilities one (``NVIDIA_VISIBLE_DEVICES``, ``GPU_PORTION``,
    ``RUNAI_NUM_OF_GPUS``, read key by key) and the env one (``<that>-evar``, read whole with envFrom)."""
    prefix = m.annotations_of(pod).get(c.SHARED_GPU_CONFIGMAP_ANNOTATION)
    if not prefix:
        raise HandoffError(
            f"pod {pod_key(pod)} asks for a share of a GPU but was not set up by kai's admission webhook (it has no "
            f"annotation {c.SHARED_GPU_CONFIGMAP_ANNOTATION}), so its container cannot be given the device: make "
            "sure `kaid webhook` runs (kubectl apply -k manifests/) and recreate the pod")
    capabilities = f"{prefix}-{fraction_container(pod).suffix}"
    return capabilities, f"{capabilities}-evar"


def not_set_up(pod: Obj) -> str | None:
    """Why a shared-GPU pod cannot be given its device whatever node it gets (None: it can)."""
    try:
        configmap_names(pod)
    except HandoffError as err:
        return str(err)
    return None


def portion(milli_per_device: int) -> str:
    """A share of one device as KAI writes it: two decimals, rounded up (700 milli-GPU -> ``"0.70"``)."""
    return f"{math.ceil(milli_per_device / 10) / 100:.2f}"


def visible_devices(uuids: Sequence[str], cdi: bool) -> str:
    return ",".join(f"{c.CDI_DEVICE_PREFIX}{u}" if cdi else u for u in uuids)


def _env_from_configmap(container: Obj, key: str) -> bool:
    return any(isinstance(e, dict) and e.get("name") == key and ((e.get("valueFrom") or {}).get("configMapKeyRef"))
               for e in container.get("env") or [])


def configmaps(pod: Obj, uuids: Sequence[str], milli_per_device: int, cdi: bool) -> list[Obj]:
    """The pod's two ConfigMaps with the device handed over, owned by the pod (they go with it).
    ``NVIDIA_VISIBLE_DEVICES`` goes where the container reads it: the capabilities ConfigMap when its env names
    that key there (what the webhook writes), else the env ConfigMap, which the container reads whole."""
    capabilities, env = configmap_names(pod)
    share = portion(milli_per_device)
    cap_data = {c.GPU_PORTION: share, c.RUNAI_NUM_OF_GPUS: share}
    env_data: dict[str, str] = {}
    devices = visible_devices(uuids, cdi)
    if _env_from_configmap(fraction_container(pod).of(pod), c.NVIDIA_VISIBLE_DEVICES):
        cap_data[c.NVIDIA_VISIBLE_DEVICES] = devices
    else:
        env_data[c.NVIDIA_VISIBLE_DEVICES] = devices
    meta = m.meta(pod)
    owner = {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"), "uid": meta.get("uid")}
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": name, "namespace": meta.get("namespace") or "default", "ownerReferences": [owner]},
             "data": data} for name, data in ((capabilities, cap_data), (env, env_data))]


def merged_configmap(existing: Obj, wanted: Obj) -> Obj:
    """What to write over a ConfigMap of the pod that exists already (an earlier try, or made by KAI): the new
    keys over the old ones, the legacy ``RUNAI-VISIBLE-DEVICES`` kept current where it is, the pod as owner."""
    data = dict(existing.get("data") or {})
    new = wanted.get("data") or {}
    if c.LEGACY_VISIBLE_DEVICES in data and c.NVIDIA_VISIBLE_DEVICES in new:
        data[c.LEGACY_VISIBLE_DEVICES] = new[c.NVIDIA_VISIBLE_DEVICES]
    data.update(new)
    return {"metadata": {"ownerReferences": m.meta(wanted).get("ownerReferences")}, "data": data}


# --------------------------------------------------------------------------------------------- the pod's metadata
def bind_patch(groups: Sequence[str], devices: Sequence[int], podgroup: str) -> Obj:
    """The merge patch that ties a pod to its GPU groups before it is bound."""
    return {"metadata": {
        "labels": group_labels(groups),
        "annotations": {c.RECEIVED_RESOURCE_TYPE_ANNOTATION: c.RECEIVED_FRACTION,
                        c.GPU_DEVICES_ANNOTATION: ",".join(str(d) for d in devices) or None,
                        c.POD_GROUP_OF_POD_ANNOTATION: podgroup,
                        c.PIPELINED_NODE_ANNOTATION: None, c.PIPELINED_ACTION_ANNOTATION: None}}}


def rollback_patch(groups: Sequence[str]) -> Obj:
    """The merge patch that unties a pod from the groups ``bind_patch`` gave it."""
    return {"metadata": {"labels": {k: None for k in group_labels(groups)},
                         "annotations": {c.RECEIVED_RESOURCE_TYPE_ANNOTATION: None}}}


# --------------------------------------------------------------------------------------------- admission
def _random_part(rng: random.Random) -> str:
    return "".join(rng.choice(_RANDOM_ALPHABET) for _ in range(_RANDOM_CHARS))


def configmap_prefix(pod: Obj, container: FractionContainer, rng: random.Random) -> str:
    """``<owner or pod name>-<7 random>-shared-gpu``, short enough that every name made from it
    (``<prefix>-<index>-evar``, ``<prefix>-<index>-vol``) is a valid name."""
    meta = m.meta(pod)
    owners = meta.get("ownerReferences") or []
    base = str((owners[0].get("name") if owners and isinstance(owners[0], dict) else None) or meta.get("name")
               or meta.get("generateName") or "pod")
    room = _NAME_MAX - (_RANDOM_CHARS + 2) - len(_SHARED_SUFFIX) - (len(container.suffix) + 1) - len("-evar")
    base = base[:room].rstrip(".-") or "pod"
    return f"{base}-{_random_part(rng)}-{_SHARED_SUFFIX}"


def _set_env(container: Obj, configmap: str) -> None:
    env = [e for e in container.get("env") or [] if not (isinstance(e, dict) and e.get("name") in SHARING_ENV)]
    env += [{"name": key, "valueFrom": {"configMapKeyRef": {"name": configmap, "key": key}}} for key in SHARING_ENV]
    container["env"] = env


def _add_env_from(container: Obj, configmap: str) -> None:
    sources = list(container.get("envFrom") or [])
    if not any(isinstance(s, dict) and (s.get("configMapRef") or {}).get("name") == configmap for s in sources):
        sources.append({"configMapRef": {"name": configmap}})
    container["envFrom"] = sources


def mutate(pod: Obj, cfg: GpuSharingConfig, scheduler_name: str, rng: random.Random | None = None) -> Obj | None:
    """The pod as kai's admission webhook leaves it (None: nothing to change): a shared-GPU pod of
    ``scheduler_name`` gets its ConfigMap prefix annotation, its fraction container the env read from them, a
    volume of the capabilities ConfigMap (not mounted: the kubelet starts the pod once the ConfigMap exists)
    and, when configured and unset, a runtimeClassName. Raises HandoffError for a container name that does not
    exist."""
    spec = pod.get("spec") or {}
    if (spec.get("schedulerName") or "default-scheduler") != scheduler_name or not is_shared_gpu_pod(pod):
        return None
    target = fraction_container(pod)
    out = copy.deepcopy(pod)
    meta = out.setdefault("metadata", {})
    annotations = meta.setdefault("annotations", {})
    prefix = annotations.get(c.SHARED_GPU_CONFIGMAP_ANNOTATION) or \
        configmap_prefix(pod, target, rng or random.SystemRandom())
    annotations[c.SHARED_GPU_CONFIGMAP_ANNOTATION] = prefix
    capabilities = f"{prefix}-{target.suffix}"
    container = target.of(out)
    _set_env(container, capabilities)
    _add_env_from(container, f"{capabilities}-evar")
    out_spec = out["spec"]
    volumes = list(out_spec.get("volumes") or [])
    volume = f"{capabilities}-vol"
    if not any(isinstance(v, dict) and v.get("name") == volume for v in volumes):
        volumes.append({"name": volume, "configMap": {"name": capabilities}})
    out_spec["volumes"] = volumes
    if cfg.runtimeClassName and not out_spec.get("runtimeClassName"):
        out_spec["runtimeClassName"] = cfg.runtimeClassName
    return out
