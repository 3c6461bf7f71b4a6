"""End to end: a pod whose PersistentVolumeClaims wait for their first consumer (a StorageClass with
``volumeBindingMode: WaitForFirstConsumer``, most clouds' default) is bound once kaid has told each claim its node
(``volume.kubernetes.io/selected-node``), the claim named in the pod and the one Kubernetes makes for its generic
ephemeral volume: the provisioner provisions only then. kaid bound it without, and the pod waited for ever."""

from __future__ import annotations

from typing import Any

from kaid.kube.client import ApiError
from kaid.kube.volumes import SELECTED_NODE

from .controlplane import ControlPlane
from .kaid_helpers import bound, create_object, get_or_none, pod, pod_condition, pods_of, queue, suffix, wait_for

Obj = dict[str, Any]


def test_a_pods_claims_that_wait_for_their_first_consumer_are_told_its_node(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, _ = make_pool(2, gpus=4)
    (q,) = make_queues(queue(f"vol-{suffix()}", 0))
    klass = f"wffc-{suffix()}"
    cp.create("/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": klass},
        "provisioner": "example.com/none", "volumeBindingMode": "WaitForFirstConsumer"})
    try:
        cp.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"storageClassName": klass, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}})
        trainer = pod("trainer", pool, q, 1)
        trainer["spec"]["volumes"] = [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "storageClassName": klass, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}}}]
        create_object(cp, namespace, trainer)
        start_kaid("vol")
        (placed,) = wait_for(lambda: bound(pods_of(cp, namespace)), 60, "the pod with claims to be bound")
        node = placed["spec"]["nodeName"]
        for claim in ("data", "trainer-scratch"):
            pvc = get_or_none(cp, f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}")
            assert pvc is not None, claim
            assert (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE) == node, pvc["metadata"]
    finally:
        cp.request("DELETE", f"/apis/storage.k8s.io/v1/storageclasses/{klass}")


def test_a_pod_goes_where_the_volume_bound_to_its_claim_is(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """A local volume on node B, bound to the pod's claim by the API server's volume controller: kaid's bin packing
    puts a one-GPU pod on node A (three of its four GPUs busy), where the volume cannot be attached; it goes to B."""
    cp = control_plane
    pool, (fuller, emptier) = make_pool(2, gpus=4)
    (q,) = make_queues(queue(f"pv-{suffix()}", 0))
    busy = pod("busy", pool, q, 3)
    busy["spec"]["nodeName"] = fuller
    create_object(cp, namespace, busy)
    pv = f"local-{suffix()}"
    cp.create("/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Retain", "local": {"path": "/mnt/disk0"},
                 "claimRef": {"namespace": namespace, "name": "data"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [emptier]}]}]}}}})
    try:
        cp.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"storageClassName": "", "volumeName": pv, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}})
        wait_for(lambda: (get_or_none(cp, f"/api/v1/persistentvolumes/{pv}") or {}).get("status", {}).get("phase")
                 == "Bound", 60, "the volume to be bound to the claim")
        db = pod("db", pool, q, 1)
        db["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        create_object(cp, namespace, db)
        start_kaid("pv")
        placed = wait_for(lambda: [p for p in bound(pods_of(cp, namespace)) if p["metadata"]["name"] == "db"], 60,
                          "the pod with the bound claim to be bound")
        assert placed[0]["spec"]["nodeName"] == emptier, (placed[0]["spec"]["nodeName"], fuller, emptier)
    finally:
        cp.request("DELETE", f"/api/v1/persistentvolumes/{pv}")


def test_a_pod_waits_for_a_claim_bound_at_once_then_goes_where_its_volume_is(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """A claim of a class that binds at once (no provisioner here: it stays unbound until a volume is made for it by
    hand): the pod waits and says why, as with kube-scheduler; once the volume controller binds it to a volume on
    node B, the pod goes to B, not to node A where bin packing would put it. kaid bound it at once, to A."""
    cp = control_plane
    pool, (fuller, emptier) = make_pool(2, gpus=4)
    (q,) = make_queues(queue(f"imm-{suffix()}", 0))
    busy = pod("busy", pool, q, 3)
    busy["spec"]["nodeName"] = fuller
    create_object(cp, namespace, busy)
    klass, pv = f"imm-{suffix()}", f"zonal-{suffix()}"
    cp.create("/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": klass},
        "provisioner": "example.com/none", "volumeBindingMode": "Immediate"})
    try:
        cp.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"storageClassName": klass, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}})
        db = pod("db", pool, q, 1)
        db["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        create_object(cp, namespace, db)
        kaid = start_kaid("imm")

        def says() -> Obj | None:
            (obj,) = [p for p in pods_of(cp, namespace) if p["metadata"]["name"] == "db"]
            cond = pod_condition(obj, "PodScheduled")
            return cond if cond and "unbound immediate PersistentVolumeClaims" in str(cond.get("message")) else None

        wait_for(says, 60, "the pod to say it waits for its claim")
        kaid.wait_cycles(2)
        assert not [p for p in bound(pods_of(cp, namespace)) if p["metadata"]["name"] == "db"]
        cp.create("/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": klass,
                     "persistentVolumeReclaimPolicy": "Retain", "local": {"path": "/mnt/disk1"},
                     "claimRef": {"namespace": namespace, "name": "data"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [emptier]}]}]}}}})
        placed = wait_for(lambda: [p for p in bound(pods_of(cp, namespace)) if p["metadata"]["name"] == "db"], 60,
                          "the pod to be bound once its claim is")
        assert placed[0]["spec"]["nodeName"] == emptier, (placed[0]["spec"]["nodeName"], fuller, emptier)
    finally:
        for path in (f"/api/v1/persistentvolumes/{pv}", f"/apis/storage.k8s.io/v1/storageclasses/{klass}"):
            try:
                cp.request("DELETE", path)
            except ApiError as err:  # (the volume is made late in the test)
                if err.status != 404:
                    raise
