"""Storage before a bind: each PersistentVolumeClaim of the pod that waits for its first consumer (its StorageClass's
``volumeBindingMode: WaitForFirstConsumer``, the default class of most clouds) is told the node the pod goes to, as
kube-scheduler's VolumeBinding plugin tells it (the annotation ``volume.kubernetes.io/selected-node``): the volume
is provisioned only then, where the pod runs. Bound without it, the pod waits for its volume for ever.

Where a pod may go by the volumes bound to its claims, and whether it waits for a claim its class binds at once, is
the engine's (``kaid.model.volumes``)."""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import quote

from kaid.kube.client import ApiError
from kaid.model.volumes import IMMEDIATE, WAIT_FOR_FIRST_CONSUMER

Obj = dict[str, Any]
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def claim_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace)}/persistentvolumeclaims/{quote(name)}"


class Claims:
    """What a bind does first for a pod with PersistentVolumeClaims (``Bind.claims``). A StorageClass's binding mode
    cannot change: each one's is read once."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._modes: dict[str, str] = {}
        self._lock = threading.Lock()

    def prepare(self, namespace: str, claims: tuple[str, ...], node: str) -> str | None:
        """Tell each of ``claims`` that waits for its first consumer that the pod goes to ``node``; None when done,
        else why the pod is not bound now (a claim that does not exist yet: its pod waits, as with
        kube-scheduler). An API error other than a missing claim is raised (the bind's retries decide)."""
        for name in claims:
            path = claim_path(namespace, name)
            try:
                pvc = self.client.get(path)
            except ApiError as err:
                if err.status == 404:
                    return f"its PersistentVolumeClaim {namespace}/{name} does not exist (yet): create it, or wait " \
                           "for the controller that makes it"
                raise
            spec = pvc.get("spec") if isinstance(pvc.get("spec"), dict) else {}
            if spec.get("volumeName"):
                continue  # bound to a volume already
            klass = spec.get("storageClassName")
            if not klass or self._mode(str(klass)) != WAIT_FOR_FIRST_CONSUMER:
                continue  # bound by its class's provisioner or by hand, whatever node the pod is on
            annotations = (pvc.get("metadata") or {}).get("annotations") or {}
            if annotations.get(SELECTED_NODE) != node:
                self.client.merge_patch(path, {"metadata": {"annotations": {SELECTED_NODE: node}}})
        return None

    def _mode(self, klass: str) -> str:
        """The ``volumeBindingMode`` of a StorageClass (Immediate where it is gone: nothing to tell its claims)."""
        with self._lock:
            known = self._modes.get(klass)
        if known is None:
            try:
                sc = self.client.get(f"/apis/storage.k8s.io/v1/storageclasses/{quote(klass)}")
            except ApiError as err:
                if err.status != 404:
                    raise
                return IMMEDIATE
            known = str(sc.get("volumeBindingMode") or IMMEDIATE)
            with self._lock:
                self._modes[klass] = known
        return known
