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


def _storage_class(cp: ControlPlane, name: str, mode: str) -> None:
    cp.create("/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
        "provisioner": "example.com/none", "volumeBindingMode": mode})


def _claim(cp: ControlPlane, namespace: str, klass: str, volume: str = "") -> None:
    """The claim ``data`` of ``klass`` (``volume``: bound to it by name)."""
    spec: Obj = {"storageClassName": klass, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    cp.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": spec})


def _local_volume(cp: ControlPlane, name: str, klass: str, namespace: str, node: str) -> None:
    """A local volume on ``node`` made for the claim ``data`` (its claimRef: the volume controller binds them)."""
    cp.create("/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": klass,
                 "persistentVolumeReclaimPolicy": "Retain", "local": {"path": f"/mnt/{name}"},
                 "claimRef": {"namespace": namespace, "name": "data"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}})


def _delete(cp: ControlPlane, *paths: str) -> None:
    for path in paths:
        try:
            cp.request("DELETE", path)
        except ApiError as err:  # (made late in a test that failed before)
            if err.status != 404:
                raise


def test_a_pods_claims_that_wait_for_their_first_consumer_are_told_its_node(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, _ = make_pool(2, gpus=4)
    (q,) = make_queues(queue(f"vol-{suffix()}", 0))
    klass = f"wffc-{suffix()}"
    _storage_class(cp, klass, "WaitForFirstConsumer")
    try:
        _claim(cp, namespace, klass)
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
        _delete(cp, f"/apis/storage.k8s.io/v1/storageclasses/{klass}")


def _two_nodes_one_busy(cp: ControlPlane, namespace: str, make_pool: Any, make_queues: Any,
                        ) -> tuple[str, str, str, str]:
    """Two nodes of four GPUs, three of the first's busy (bin packing's choice for a one-GPU pod), and a queue:
    (pool, queue, the fuller node, the emptier one)."""
    pool, (fuller, emptier) = make_pool(2, gpus=4)
    (q,) = make_queues(queue(f"pv-{suffix()}", 0))
    busy = pod("busy", pool, q, 3)
    busy["spec"]["nodeName"] = fuller
    create_object(cp, namespace, busy)
    return pool, q, fuller, emptier


def _db(cp: ControlPlane, namespace: str, pool: str, q: str) -> None:
    """A one-GPU pod whose volume is the claim ``data``."""
    db = pod("db", pool, q, 1)
    db["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    create_object(cp, namespace, db)


def _db_bound(cp: ControlPlane, namespace: str) -> list[Obj]:
    return [p for p in bound(pods_of(cp, namespace)) if p["metadata"]["name"] == "db"]


def test_a_pod_goes_where_the_volume_bound_to_its_claim_is(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """A local volume on node B, bound to the pod's claim by the API server's volume controller: kaid's bin packing
    puts a one-GPU pod on node A (three of its four GPUs busy), where the volume cannot be attached; it goes to B."""
    cp = control_plane
    pool, q, fuller, emptier = _two_nodes_one_busy(cp, namespace, make_pool, make_queues)
    pv = f"local-{suffix()}"
    try:
        _local_volume(cp, pv, "", namespace, emptier)
        _claim(cp, namespace, "", volume=pv)
        wait_for(lambda: (get_or_none(cp, f"/api/v1/persistentvolumes/{pv}") or {}).get("status", {}).get("phase")
                 == "Bound", 60, "the volume to be bound to the claim")
        _db(cp, namespace, pool, q)
        start_kaid("pv")
        placed = wait_for(lambda: _db_bound(cp, namespace), 60, "the pod with the bound claim to be bound")
        assert placed[0]["spec"]["nodeName"] == emptier, (placed[0]["spec"]["nodeName"], fuller, emptier)
    finally:
        _delete(cp, f"/api/v1/persistentvolumes/{pv}")


def test_a_pod_waits_for_a_claim_bound_at_once_then_goes_where_its_volume_is(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    """A claim of a class that binds at once (no provisioner here: it stays unbound until a volume is made for it by
    hand): the pod waits and says why, as with kube-scheduler; once the volume controller binds it to a volume on
    node B, the pod goes to B, not to node A where bin packing would put it. kaid bound it at once, to A."""
    cp = control_plane
    pool, q, fuller, emptier = _two_nodes_one_busy(cp, namespace, make_pool, make_queues)
    klass, pv = f"imm-{suffix()}", f"zonal-{suffix()}"
    _storage_class(cp, klass, "Immediate")
    try:
        _claim(cp, namespace, klass)
        _db(cp, namespace, pool, q)
        kaid = start_kaid("imm")

        def says() -> Obj | None:
            (obj,) = [p for p in pods_of(cp, namespace) if p["metadata"]["name"] == "db"]
            cond = pod_condition(obj, "PodScheduled")
            return cond if cond and "unbound immediate PersistentVolumeClaims" in str(cond.get("message")) else None

        wait_for(says, 60, "the pod to say it waits for its claim")
        kaid.wait_cycles(2)
        assert not _db_bound(cp, namespace)
        _local_volume(cp, pv, klass, namespace, emptier)
        placed = wait_for(lambda: _db_bound(cp, namespace), 60, "the pod to be bound once its claim is")
        assert placed[0]["spec"]["nodeName"] == emptier, (placed[0]["spec"]["nodeName"], fuller, emptier)
    finally:
        _delete(cp, f"/api/v1/persistentvolumes/{pv}", f"/apis/storage.k8s.io/v1/storageclasses/{klass}")
