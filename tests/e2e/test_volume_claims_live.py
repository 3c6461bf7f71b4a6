"""End to end: a pod whose PersistentVolumeClaims wait for their first consumer (a StorageClass with
``volumeBindingMode: WaitForFirstConsumer``, most clouds' default) is bound once kaid has told each claim its node
(``volume.kubernetes.io/selected-node``), the claim named in the pod and the one Kubernetes makes for its generic
ephemeral volume: the provisioner provisions only then. kaid bound it without, and the pod waited for ever."""

from __future__ import annotations

from typing import Any

from kaid.kube.volumes import SELECTED_NODE

from .controlplane import ControlPlane
from .kaid_helpers import bound, create_object, get_or_none, pod, pods_of, queue, suffix, wait_for

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
