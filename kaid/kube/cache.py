"""A watch cache over the objects the engine reads: list, then watch from the resourceVersion, resume
after a dropped watch, relist after ``410 Gone``. It keeps raw JSON dicts; a Snapshot is built from
them each cycle."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from kaid.kube.client import ApiError, KubeClient

Obj = dict[str, Any]
log = logging.getLogger("kaid.cache")


@dataclass(frozen=True)
class Resource:
    kind: str
    path: str  # collection path, cluster-wide
    optional: bool = False  # a CRD that may not be installed (retried now and then)


RESOURCES: tuple[Resource, ...] = (
    Resource("Node", "/api/v1/nodes"),
    Resource("Pod", "/api/v1/pods"),
    Resource("Namespace", "/api/v1/namespaces"),
    Resource("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses"),
    Resource("PodDisruptionBudget", "/apis/policy/v1/poddisruptionbudgets"),
    Resource("Queue", "/apis/scheduling.run.ai/v2/queues"),
    Resource("PodGroup", "/apis/scheduling.run.ai/v2alpha2/podgroups"),
    Resource("Topology", "/apis/kai.scheduler/v1alpha1/topologies", optional=True),
    Resource("Job", "/apis/batch/v1/jobs"),
    Resource("ReplicaSet", "/apis/apps/v1/replicasets"),
    Resource("Deployment", "/apis/apps/v1/deployments"),
    Resource("StatefulSet", "/apis/apps/v1/statefulsets"),
    Resource("PyTorchJob", "/apis/kubeflow.org/v1/pytorchjobs", optional=True),
    Resource("MPIJob", "/apis/kubeflow.org/v2beta1/mpijobs", optional=True),
    Resource("RayJob", "/apis/ray.io/v1/rayjobs", optional=True),
    Resource("RayCluster", "/apis/ray.io/v1/rayclusters", optional=True),
    Resource("JobSet", "/apis/jobset.x-k8s.io/v1alpha2/jobsets", optional=True),
    Resource("LeaderWorkerSet", "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets", optional=True),
)


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name', '')}"


class Informer:
    """One resource: a thread that keeps ``items`` equal to the server's state."""

    def __init__(self, client: KubeClient, res: Resource, stop: threading.Event, changed: threading.Event) -> None:
        self.client = client
        self.res = res
        self.stop = stop
        self.changed = changed
        self.items: dict[str, Obj] = {}
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self.absent = False  # an optional CRD that is not installed
        self.rv = ""
        self.relists = 0
        self.thread = threading.Thread(target=self._run, name=f"watch-{res.kind}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _list(self) -> None:
        data = self.client.get(self.res.path)
        kind = self.res.kind
        items = {}
        for obj in data.get("items") or []:
            obj.setdefault("kind", kind)
            items[_key(obj)] = obj
        with self.lock:
            self.items = items
        self.rv = str((data.get("metadata") or {}).get("resourceVersion") or "")
        self.relists += 1
        self.absent = False
        self.changed.set()
        self.synced.set()

    def _run(self) -> None:
        backoff = 0.5
        need_list = True
        while not self.stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                for event in self.client.watch(self.res.path, self.rv, timeout_seconds=240):
                    if self.stop.is_set():
                        return
                    self._handle(event)
                backoff = 0.5  # the server closed a healthy watch: resume from the last version
            except ApiError as err:
                if err.status == 410:
                    need_list = True  # too old: relist
                    continue
                if err.status == 404 and self.res.optional:
                    self.absent = True
                    self.synced.set()
                    self.stop.wait(10.0)  # look again soon: a CRD installed now should be seen
                    need_list = True
                    continue
                log.warning("watch %s failed: %s; retrying", self.res.kind, err.message)
                need_list = need_list or err.status in (403, 404)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            except Exception as err:  # dropped connection, bad chunk: resume from the last version
                log.info("watch %s dropped (%s); resuming from %s", self.res.kind, err, self.rv)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _handle(self, event: Obj) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            raise ApiError(code or 500, str(obj.get("reason") or "watch error"), obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self.rv = str(rv)
        if kind == "BOOKMARK":
            return
        obj.setdefault("kind", self.res.kind)
        with self.lock:
            if kind == "DELETED":
                self.items.pop(_key(obj), None)
            else:
                self.items[_key(obj)] = obj
        self.changed.set()


class WatchCache:
    def __init__(self, client: KubeClient, resources: tuple[Resource, ...] = RESOURCES) -> None:
        self.stop = threading.Event()
        self.changed = threading.Event()
        self.informers = [Informer(client, r, self.stop, self.changed) for r in resources]

    def start(self) -> None:
        for inf in self.informers:
            inf.start()

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(inf.synced.wait(max(0.0, deadline - time.monotonic())) for inf in self.informers)

    @property
    def synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers)

    def objects(self) -> list[Obj]:
        out: list[Obj] = []
        for inf in self.informers:
            with inf.lock:
                out.extend(inf.items.values())
        return out

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        for inf in self.informers:
            if inf.res.kind == kind:
                with inf.lock:
                    return inf.items.get(f"{namespace or ''}/{name}")
        return None

    def close(self) -> None:
        self.stop.set()
