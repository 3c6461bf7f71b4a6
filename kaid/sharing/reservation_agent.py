"""``kaid gpu-reservation``: the process of a reservation pod. The pod asks for one whole GPU; the device plugin
gives it one; this process finds that device's UUID through NVML and writes it on its own pod (annotation
``run.ai/reserve_for_gpu_index``), where kaid's binder reads it and hands it to the shared-GPU pods of the group.
Then it idles until SIGTERM, holding the device for them.

Safe to restart: a pod that has its UUID already keeps it (NVML is not asked again). Any failure is one line on
stderr and exit status 1 (the binder then gives up on this reservation at its timeout, and says why).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from kaid.api import constants as c
from kaid.kube.client import ApiError, KubeClient, pod_path
from kaid.sharing.nvml import Nvml, NvmlError

log = logging.getLogger("kaid.gpu-reservation")


class ReservationError(RuntimeError):
    """Why this pod cannot report its GPU (one line)."""


def only_gpu_uuid(nvml: Nvml) -> str:
    """The UUID of the one GPU this process sees; ReservationError when it sees none or several."""
    count = nvml.count()
    if count == 0:
        raise ReservationError("NVML shows no GPU in this container: it got none (is nvidia.com/gpu: 1 among its "
                               "limits, and the NVIDIA device plugin running on this node?)")
    if count > 1:
        raise ReservationError(f"NVML shows {count} GPUs in this container, not the one it asked for: it must see "
                               "only its own device (no NVIDIA_VISIBLE_DEVICES=all, no privileged container)")
    return nvml.uuid(0)


def reserve(client: KubeClient, namespace: str, name: str, nvml_module: ModuleType | Any | None = None) -> str:
    """Write the UUID of this pod's GPU on the pod, unless it is there already; returns it."""
    try:
        pod = client.get(pod_path(namespace, name))
    except ApiError as err:
        raise ReservationError(f"cannot read its own pod {namespace}/{name}: {err.message}") from None
    known = ((pod.get("metadata") or {}).get("annotations") or {}).get(c.RESERVED_GPU_ANNOTATION)
    if known:
        log.info("pod %s/%s holds GPU %s already (a restart)", namespace, name, known)
        return str(known)
    try:
        with Nvml(nvml_module) as nvml:
            uuid = only_gpu_uuid(nvml)
    except NvmlError as err:
        raise ReservationError(str(err)) from None
    try:
        client.merge_patch(pod_path(namespace, name), {"metadata": {"annotations": {c.RESERVED_GPU_ANNOTATION: uuid}}})
    except ApiError as err:
        raise ReservationError(f"cannot annotate its own pod {namespace}/{name}: {err.message}") from None
    log.info("pod %s/%s holds GPU %s", namespace, name, uuid)
    return uuid


def run_reservation_agent(kubeconfig: Path | None = None, namespace: str | None = None, name: str | None = None,
                          nvml_module: ModuleType | Any | None = None, stop: threading.Event | None = None) -> int:
    """Report this pod's GPU, then hold it until SIGTERM (or ``stop``); the exit status."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    namespace = namespace or os.environ.get("POD_NAMESPACE")
    name = name or os.environ.get("POD_NAME")
    if not namespace or not name:
        print("error: set POD_NAMESPACE and POD_NAME (the downward API does, in a reservation pod)", file=sys.stderr)
        return 1
    try:
        client = KubeClient.from_config(str(kubeconfig) if kubeconfig else None)
        reserve(client, namespace, name, nvml_module)
    except (ReservationError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if stop is None:
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    return 0
