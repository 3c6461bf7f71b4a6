"""Reduce live objects to what scheduling reads.

- ``strip``/``snapshot_list``: for snapshot files people attach to bug reports: pod specs keep requests, placement
  constraints and identity, never environment, commands, volumes or image pull secrets; workload owners keep only
  their replica counts; Secrets are never read at all.
- ``slim_pod``: for the daemon's watch cache, where every pod of the cluster lives for as long as it exists: the
  fields of a pod that nothing in kaid reads are dropped as the pod is decoded (a bound kwok pod: 11.8 -> 4.7 KiB
  of Python objects). Unlike ``strip`` it keeps what the shared-GPU binder reads (containers' env and envFrom, a
  reservation pod's ended containers, status reason and message) and every key it does not know.
"""

from __future__ import annotations

from typing import Any

from kaid.api import constants as c
from kaid.model.nodes import PRESSURE_CONDITIONS
from kaid.model.pods import claim_volumes
from kaid.model.volumes import DEFAULT_CLASS_ANNOTATION

Obj = dict[str, Any]
KEEP_ANNOTATIONS = {
    c.POD_GROUP_ANNOTATION, c.BATCH_MIN_MEMBER_ANNOTATION, c.GPU_FRACTION_ANNOTATION, c.GPU_MEMORY_ANNOTATION,
    c.GPU_FRACTION_NUM_DEVICES_ANNOTATION, c.GPU_DEVICES_ANNOTATION, c.TOPOLOGY_ANNOTATION,
    c.TOPOLOGY_REQUIRED_ANNOTATION, c.TOPOLOGY_PREFERRED_ANNOTATION, c.PIPELINED_NODE_ANNOTATION,
    c.PIPELINED_ACTION_ANNOTATION, c.STALE_SINCE_ANNOTATION, c.LAST_EVICTION_ANNOTATION,
}
META_KEEP = ("name", "namespace", "uid", "labels", "creationTimestamp", "deletionTimestamp", "ownerReferences")


def _kept_metadata(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    out = {k: meta[k] for k in META_KEEP if k in meta}
    anns = {k: v for k, v in (meta.get("annotations") or {}).items() if k in KEEP_ANNOTATIONS}
    if anns:
        out["annotations"] = anns
    if "ownerReferences" in out:
        out["ownerReferences"] = [{k: r[k] for k in ("apiVersion", "kind", "name", "uid", "controller") if k in r}
                                  for r in out["ownerReferences"]]
    return out


def _container(ctr: Obj) -> Obj:
    out: Obj = {"name": ctr.get("name", "")}
    res = ctr.get("resources") or {}
    if res:
        out["resources"] = {k: res[k] for k in ("requests", "limits") if k in res}
    if ctr.get("restartPolicy"):
        out["restartPolicy"] = ctr["restartPolicy"]
    return out


def _pod_spec(spec: Obj) -> Obj:
    out: Obj = {k: spec[k] for k in ("schedulerName", "nodeName", "nodeSelector", "tolerations", "priority",
                                     "priorityClassName", "overhead", "preemptionPolicy") if k in spec}
    out["containers"] = [_container(x) for x in spec.get("containers") or []]
    if spec.get("initContainers"):
        out["initContainers"] = [_container(x) for x in spec["initContainers"]]
    affinity = spec.get("affinity") or {}
    kept = {k: affinity[k] for k in ("nodeAffinity", "podAffinity", "podAntiAffinity") if affinity.get(k)}
    if kept:
        out["affinity"] = kept
    if spec.get("topologySpreadConstraints"):
        out["topologySpreadConstraints"] = spec["topologySpreadConstraints"]
    return out


def strip(obj: Obj) -> Obj | None:
    kind = obj.get("kind")
    if kind == "Secret":
        return None
    base: Obj = {"apiVersion": obj.get("apiVersion"), "kind": kind, "metadata": _kept_metadata(obj)}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if kind == "Pod":
        base["spec"] = _pod_spec(spec)
        base["status"] = {k: status[k] for k in ("phase", "startTime") if k in status}
    elif kind == "Node":
        base["metadata"]["labels"] = (obj.get("metadata") or {}).get("labels") or {}
        base["spec"] = {k: spec[k] for k in ("taints", "unschedulable") if k in spec}
        base["status"] = {"allocatable": status.get("allocatable") or {}, "capacity": status.get("capacity") or {},
                          "conditions": [{"type": x.get("type"), "status": x.get("status")}
                                         for x in status.get("conditions") or []
                                         if x.get("type") == "Ready" or x.get("type") in PRESSURE_CONDITIONS]}
    elif kind in ("Queue", "PodGroup", "Topology"):
        base["spec"] = spec
        if kind == "PodGroup" and status:
            base["status"] = status
        if kind == "Queue" and status:
            base["status"] = status
    elif kind == "PriorityClass":
        base.update({k: obj[k] for k in ("value", "preemptionPolicy", "globalDefault") if k in obj})
    elif kind == "PodDisruptionBudget":
        base["spec"] = {k: spec[k] for k in ("selector", "minAvailable", "maxUnavailable") if k in spec}
        base["status"] = {k: status[k] for k in ("disruptionsAllowed", "currentHealthy", "desiredHealthy")
                          if k in status}
    elif kind == "PersistentVolume":  # where a pod whose claim it is bound to can run (``kaid.model.volumes``)
        base["spec"] = {k: spec[k] for k in ("nodeAffinity", "storageClassName") if k in spec}
        ref = spec.get("claimRef")
        if isinstance(ref, dict):
            base["spec"]["claimRef"] = {k: ref[k] for k in ("namespace", "name") if k in ref}
        base["status"] = {k: status[k] for k in ("phase",) if k in status}
    elif kind == "PersistentVolumeClaim":  # bound or not, and how its class binds it (``kaid.model.volumes``)
        base["spec"] = {k: spec[k] for k in ("storageClassName", "volumeName") if k in spec}
        base["status"] = {k: status[k] for k in ("phase",) if k in status}
    elif kind == "StorageClass":
        base.update({k: obj[k] for k in ("volumeBindingMode", "provisioner") if k in obj})
        anns = (obj.get("metadata") or {}).get("annotations") or {}
        if DEFAULT_CLASS_ANNOTATION in anns:
            base["metadata"]["annotations"] = {DEFAULT_CLASS_ANNOTATION: anns[DEFAULT_CLASS_ANNOTATION]}
    elif kind == "Namespace":
        pass
    else:  # workload owners: only what minMember is computed from
        keep: Obj = {}
        for key in ("parallelism", "completions", "replicas"):
            if key in spec:
                keep[key] = spec[key]
        for key in ("pytorchReplicaSpecs", "mpiReplicaSpecs"):
            if key in spec:
                keep[key] = {role: {"replicas": (rs or {}).get("replicas", 1)} for role, rs in spec[key].items()}
        if "workerGroupSpecs" in spec:
            keep["workerGroupSpecs"] = [{k: g.get(k) for k in ("groupName", "replicas", "minReplicas") if k in g}
                                        for g in spec["workerGroupSpecs"]]
        if "replicatedJobs" in spec:
            keep["replicatedJobs"] = [{"name": r.get("name"), "replicas": r.get("replicas", 1),
                                       "template": {"spec": {"parallelism": ((r.get("template") or {}).get("spec")
                                                                             or {}).get("parallelism", 1)}}}
                                      for r in spec["replicatedJobs"]]
        if "leaderWorkerTemplate" in spec:
            keep["leaderWorkerTemplate"] = {"size": (spec["leaderWorkerTemplate"] or {}).get("size", 1)}
        base["spec"] = keep
    return base


def snapshot_list(objects: list[Obj]) -> Obj:
    items = [s for s in (strip(o) for o in objects) if s is not None]
    return {"apiVersion": "v1", "kind": "List", "items": items}


# --------------------------------------------------------------------------------------------- the watch cache
# What nothing in kaid reads of a live pod. Readers of pods: kaid.model (pods, grouping, jobs, build, live), the
# podgrouper, the status writers (the PodScheduled condition), kaid.sharing.handoff and kaid.kube.reservations
# (annotations, containers' env/envFrom, a reservation pod's phase, reason, message and ended containers).
POD_SPEC_UNREAD = frozenset({
    "dnsPolicy", "dnsConfig", "enableServiceLinks", "restartPolicy", "securityContext", "serviceAccount",
    "serviceAccountName", "automountServiceAccountToken", "terminationGracePeriodSeconds", "activeDeadlineSeconds",
    "hostname", "subdomain", "imagePullSecrets", "hostAliases", "readinessGates", "shareProcessNamespace",
    "ephemeralContainers", "setHostnameAsFQDN",
})
CONTAINER_UNREAD = frozenset({
    "command", "args", "workingDir", "ports", "volumeMounts", "volumeDevices", "livenessProbe", "readinessProbe",
    "startupProbe", "lifecycle", "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy",
    "securityContext", "stdin", "stdinOnce", "tty", "resizePolicy",
})
POD_STATUS_KEPT = ("phase", "startTime", "reason", "message")
POD_CONDITIONS_KEPT = frozenset({"PodScheduled", "DisruptionTarget"})
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _slim_containers(containers: Any) -> Any:
    if not isinstance(containers, list):
        return containers
    out = [{k: v for k, v in ctr.items() if k not in CONTAINER_UNREAD} if isinstance(ctr, dict) else ctr
           for ctr in containers]
    for ctr, slim in zip(containers, out, strict=True):  # of the ports, the host ports (``pods.host_ports``)
        ports = ctr.get("ports") if isinstance(ctr, dict) else None
        if ports and isinstance(ports, list):
            held = [{k: p[k] for k in ("hostPort", "protocol") if k in p} for p in ports
                    if isinstance(p, dict) and p.get("hostPort")]
            if held:
                slim["ports"] = held
    return out


def _ended(statuses: Any) -> list[Obj]:
    """Of the containers' statuses, only the ended states (``handoff.reservation_failure`` reads them)."""
    out: list[Obj] = []
    for st in statuses if isinstance(statuses, list) else []:
        if not isinstance(st, dict):
            continue
        kept = {k: {"terminated": st[k]["terminated"]} for k in ("state", "lastState")
                if isinstance(st.get(k), dict) and st[k].get("terminated")}
        if kept:
            out.append({"name": st.get("name"), **kept})
    return out


def slim_pod(pod: Obj) -> Obj:
    """``pod`` (a decoded live pod: its top-level dict changed in place and returned) without the fields nothing in
    kaid reads."""
    meta = pod.get("metadata")
    if isinstance(meta, dict):
        anns = meta.get("annotations")
        if isinstance(anns, dict) and LAST_APPLIED in anns:
            del anns[LAST_APPLIED]
    spec = pod.get("spec")
    if isinstance(spec, dict):  # new dicts, not keys deleted: a dict keeps its table's size when keys go
        spec = pod["spec"] = {k: v for k, v in spec.items() if k not in POD_SPEC_UNREAD}
        for key in ("containers", "initContainers"):
            if key in spec:
                spec[key] = _slim_containers(spec[key])
        if "volumes" in spec:
            claims = claim_volumes(spec["volumes"])
            if claims:
                spec["volumes"] = claims
            else:
                del spec["volumes"]
    status = pod.get("status")
    if isinstance(status, dict):
        out: Obj = {k: status[k] for k in POD_STATUS_KEPT if k in status}
        conds = [x for x in status.get("conditions") or []
                 if isinstance(x, dict) and x.get("type") in POD_CONDITIONS_KEPT]
        if conds:
            out["conditions"] = conds
        ended = _ended(status.get("containerStatuses"))
        if ended:
            out["containerStatuses"] = ended
        pod["status"] = out
    return pod
