"""The watch cache keeps pods without the fields nothing in kaid reads (``kaid.kube.strip.slim_pod``): a slimmed pod
gives the same snapshot, the same decisions, the same pending reasons and the same answers to the shared-GPU
binder's and the status writers' questions as the whole pod."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from kaid.api import constants as c
from kaid.api.config import GpuSharingConfig, SchedulerConfig
from kaid.cycle import run_cycle
from kaid.kube.strip import slim_pod
from kaid.model.build import build_snapshot
from kaid.sharing import handoff
from tests.objects import node, pod, podgroup, queue
from tests.test_live_model import describe

Obj = dict[str, Any]
NOW = 1_800_000_000.0


def _as_served(p: Obj, node_name: str | None = None, running: bool = False) -> Obj:
    """``p`` with what the API server's defaults, a kubelet (kwok) and kubectl add to a pod."""
    out = copy.deepcopy(p)
    meta = out["metadata"]
    meta.setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(p)
    meta.update({"resourceVersion": "4711", "uid": f"uid-{meta['name']}", "generation": 1})
    spec = out["spec"]
    spec.update({"dnsPolicy": "ClusterFirst", "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
                 "priority": 0, "restartPolicy": "Always", "securityContext": {}, "serviceAccount": "default",
                 "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                 "volumes": [{"name": "kube-api-access-x", "projected": {"defaultMode": 420, "sources": [
                     {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                     {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]})
    spec.setdefault("tolerations", []).extend([
        {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
        {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
         "tolerationSeconds": 300}])
    for ctr in spec["containers"]:
        ctr.update({"image": "registry.example/x:1", "imagePullPolicy": "IfNotPresent", "command": ["sleep", "inf"],
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                    "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                      "name": "kube-api-access-x", "readOnly": True}],
                    "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 10}})
    conds = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes: GPU",
              "lastProbeTime": None, "lastTransitionTime": "2026-11-26T10:00:00Z"}]
    status: Obj = {"phase": "Pending", "qosClass": "Burstable", "conditions": conds}
    if node_name:
        spec["nodeName"] = node_name
        conds[0].update({"status": "True", "reason": None, "message": None})
        conds += [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-11-26T10:00:01Z"}
                  for t in ("Initialized", "Ready", "ContainersReady", "PodReadyToStartContainers")]
    if running:
        status.update({"phase": "Running", "startTime": "2026-11-26T10:00:01Z", "hostIP": "10.0.0.1",
                       "hostIPs": [{"ip": "10.0.0.1"}], "podIP": "10.1.0.1", "podIPs": [{"ip": "10.1.0.1"}],
                       "containerStatuses": [{"name": c["name"], "ready": True, "restartCount": 0, "started": True,
                                              "image": "registry.example/x:1", "imageID": "", "containerID": "kwok://x",
                                              "state": {"running": {"startedAt": "2026-11-26T10:00:01Z"}},
                                              "lastState": {}} for c in spec["containers"]]})
    out["status"] = status
    return out


def _cluster() -> list[Obj]:
    sidecar = pod("sidecar", gpus=1, queue="q1", initContainers=[
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}}},
        {"name": "setup", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}],
        overhead={"cpu": "100m"})
    selective = pod("selective", gpus=2, queue="q2", nodeSelector={"zone": "b"},
                    affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}},
                    tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
    shared = handoff.mutate(pod("shared", queue="q1", annotations={c.GPU_FRACTION_ANNOTATION: "0.5"}),
                            GpuSharingConfig(), "kai-scheduler", random.Random(1))  # as admission leaves it
    assert shared is not None
    objs = [node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "b"},
                                                  taints=[{"key": "gpu", "value": "x", "effect": "NoSchedule"}]),
            node("n3", gpus=4, labels={"zone": "a"}), queue("default-queue"), queue("q1", gpu=(8, -1, 1)),
            queue("q2", gpu=(4, -1, 1), priority=120), podgroup("gang", "q2", min_member=3, priority_class="train")]
    served = [_as_served(pod(f"run-{i}", gpus=2, queue="q1", group="old", node_name=None), f"n{1 + i % 2}", True)
              for i in range(3)]
    served += [_as_served(pod(f"gang-{i}", gpus=1, group="gang", queue="q2", priorityClassName="train"))
               for i in range(3)]
    served += [_as_served(p) for p in (sidecar, selective, shared, pod("big", gpus=8, queue="q1"))]
    return [*objs, podgroup("old", "q1", min_member=3), *served]


def _slimmed(objects: list[Obj]) -> list[Obj]:
    return [slim_pod(copy.deepcopy(o)) if o["kind"] == "Pod" else o for o in objects]


def _plain(objects: list[Obj], cfg: SchedulerConfig) -> Any:
    d = describe(build_snapshot(copy.deepcopy(objects), cfg, NOW))
    for p in d["pods"]:
        p["raw"] = None
    for _, j in d["jobs"]:
        j["raw"] = j["raw"] is not None
    return d


def _decided(objects: list[Obj], cfg: SchedulerConfig) -> Any:
    d = run_cycle(build_snapshot(copy.deepcopy(objects), cfg, NOW), cfg)
    return (d.binds, d.evictions, d.pipelined, {k: [r.message for r in v] for k, v in d.pending.items()},
            {k: [r.message for r in v] for k, v in d.allocate_reasons.items()})


def test_a_slimmed_pod_gives_the_same_snapshot_and_decisions() -> None:
    cfg = SchedulerConfig()
    whole = _cluster()
    slim = _slimmed(whole)
    assert _plain(slim, cfg) == _plain(whole, cfg)
    decided = _decided(whole, cfg)
    assert decided[0], "the cluster must bind something for the comparison to mean anything"
    assert decided[3], "... and leave something pending"
    assert _decided(slim, cfg) == decided
    assert len(json.dumps(slim)) < 0.6 * len(json.dumps(whole))


def test_what_the_shared_gpu_binder_and_the_status_writers_read_stays() -> None:
    (shared,) = [o for o in _cluster() if o["metadata"]["name"] == "shared"]
    slim = slim_pod(copy.deepcopy(shared))
    assert handoff.not_set_up(slim) == handoff.not_set_up(shared)
    assert handoff.not_set_up(slim) is None
    assert handoff.configmap_names(slim) == handoff.configmap_names(shared)
    for key in ("env", "envFrom"):
        assert slim["spec"]["containers"][0][key] == shared["spec"]["containers"][0][key]
    (cond,) = slim["status"]["conditions"]  # the status writers compare their PodScheduled message with it
    assert cond == shared["status"]["conditions"][0]
    reservation = _as_served(pod("gpu-reservation-x", ns="kai-resource-reservation"), "n1", running=True)
    reservation["status"]["containerStatuses"][0]["lastState"] = {"terminated": {
        "exitCode": 3, "reason": "Error", "message": "no NVML\ncannot read the device", "finishedAt": "x"}}
    for failed in (False, True):
        if failed:
            reservation["status"].update({"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": "m"})
        slim = slim_pod(copy.deepcopy(reservation))
        assert handoff.reservation_failure(slim) == handoff.reservation_failure(reservation) is not None
    assert "volumes" not in slim["spec"] and "podIPs" not in slim["status"]
    assert "volumeMounts" not in slim["spec"]["containers"][0]
    assert "kubectl.kubernetes.io/last-applied-configuration" not in slim["metadata"]["annotations"]
