"""A watch cache over the objects the engine reads: list, then watch from the resourceVersion, resume
after a dropped watch, relist after ``410 Gone``. It keeps raw JSON dicts; a Snapshot is built from
them each cycle.

Optional resources (CRDs of other projects that a cluster may not have) are found through API discovery,
one request for all of them, repeated every ``DISCOVERY_PERIOD`` seconds: an informer lists and watches
its resource only while the API server serves it. Every request goes through the client's rate limit,
the one binds use, so absent resources must not be polled one by one."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kaid.api.meta import store_key
from kaid.kube.client import ApiError, KubeClient
from kaid.kube.strip import slim_pod

Obj = dict[str, Any]
log = logging.getLogger("kaid.cache")
DISCOVERY_PERIOD = 30.0
# pods are kept without the fields nothing in kaid reads (``kaid.kube.strip.slim_pod``); KAID_SLIM_PODS=off keeps
# them whole (to measure what it saves)
SLIM_PODS = os.environ.get("KAID_SLIM_PODS") != "off"
# An informer's watch whose events trickle in (one every millisecond or so, as a backlog's binds and their pods'
# status updates do) read as each comes costs its thread a wake-up and a run on cold caches per event: 47.5-54 us
# of CPU an event against 32-36 us when it reads what came in the last 20 ms at once (/work/notes/kube4-tools/
# trickle.py: 2,000 real pod events 1 ms apart, 3 x 3 runs interleaved, medians). So its reads gather
# (``KubeClient.watch``): while events come often they are seen up to this much later, after a quiet spell at once.
WATCH_GATHER_S = 0.02


@dataclass(frozen=True)
class ApiResource:
    kind: str
    path: str  # collection path, cluster-wide
    optional: bool = False  # a CRD that may not be installed (found through discovery)

    @property
    def group_version(self) -> str:
        """``/apis/kubeflow.org/v1/pytorchjobs`` -> ``kubeflow.org/v1``; ``/api/v1/pods`` -> ``v1``."""
        parts = self.path.strip("/").split("/")
        return "/".join(parts[1:3]) if parts[0] == "apis" else parts[1]


API_RESOURCES: tuple[ApiResource, ...] = (
    ApiResource("Pod", "/api/v1/pods"),  # first: the longest list (the server encodes it while the rest go out)
    ApiResource("Node", "/api/v1/nodes"),
    ApiResource("Namespace", "/api/v1/namespaces"),
    ApiResource("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses"),
    ApiResource("PodDisruptionBudget", "/apis/policy/v1/poddisruptionbudgets"),
    ApiResource("PersistentVolume", "/api/v1/persistentvolumes"),
    ApiResource("PersistentVolumeClaim", "/api/v1/persistentvolumeclaims"),
    ApiResource("StorageClass", "/apis/storage.k8s.io/v1/storageclasses"),
    ApiResource("Queue", "/apis/scheduling.run.ai/v2/queues"),
    ApiResource("PodGroup", "/apis/scheduling.run.ai/v2alpha2/podgroups"),
    ApiResource("Topology", "/apis/kai.scheduler/v1alpha1/topologies", optional=True),
    ApiResource("Job", "/apis/batch/v1/jobs"),
    ApiResource("ReplicaSet", "/apis/apps/v1/replicasets"),
    ApiResource("Deployment", "/apis/apps/v1/deployments"),
    ApiResource("StatefulSet", "/apis/apps/v1/statefulsets"),
    ApiResource("PyTorchJob", "/apis/kubeflow.org/v1/pytorchjobs", optional=True),
    ApiResource("MPIJob", "/apis/kubeflow.org/v2beta1/mpijobs", optional=True),
    ApiResource("RayJob", "/apis/ray.io/v1/rayjobs", optional=True),
    ApiResource("RayCluster", "/apis/ray.io/v1/rayclusters", optional=True),
    ApiResource("JobSet", "/apis/jobset.x-k8s.io/v1alpha2/jobsets", optional=True),
    ApiResource("LeaderWorkerSet", "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets", optional=True),
)


class Subscriber(Protocol):
    """What sees a watch cache's events (``WatchCache.subscribe``)."""

    def event(self, kind: str, deleted: bool, obj: Obj) -> None: ...

    def listed(self, kind: str, items: list[Obj]) -> None: ...


class Informer:
    """One resource: a thread that keeps ``items`` equal to the server's state."""

    def __init__(self, client: KubeClient, res: ApiResource, stop: threading.Event, changed: threading.Event,
                 discovered: threading.Event | None = None) -> None:
        self.client = client
        self.res = res
        self.stop = stop
        self.changed = changed
        self.items: dict[str, Obj] = {}
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self.discovered = discovered or threading.Event()  # the first discovery has answered
        self.present = threading.Event()  # discovery (or a list) says the server has the resource
        if not res.optional:
            self.discovered.set()
            self.present.set()
        self.rv = ""
        self.relists = 0
        self.arrival: Callable[[Obj], None] | None = None  # the start's look at them (may hold the list)
        self.arrived: list[Obj] = []  # the items of the first list so far, while it lasts (see startup.early_view)
        self.listeners: list[Callable[[Obj], None]] = []  # see each object a watch event adds or changes
        self.subscribers: list[Subscriber] = []  # see every event and every list (``WatchCache.subscribe``)
        self.has_list = False  # the items are a whole list (the first has come)
        self.slim: Callable[[Obj], Obj] | None = slim_pod if res.kind == "Pod" and SLIM_PODS else None
        self.thread = threading.Thread(target=self._run, name=f"watch-{res.kind}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _list(self) -> None:
        began, cpu = time.monotonic(), time.thread_time()
        kind = self.res.kind
        items: dict[str, Obj] = {}

        first = self.relists == 0
        self.arrived = []

        slim = self.slim

        def add(obj: Obj) -> None:
            obj.setdefault("kind", kind)
            if slim is not None:
                slim(obj)
            items[store_key(obj)] = obj
            if first:
                self.arrived.append(obj)
                if self.arrival is not None:
                    self.arrival(obj)

        data = self.client.list(self.res.path, add)  # items decoded while the server still sends the rest
        with self.lock:
            self.items = items
            self._listed()
        self.arrived = []
        self.rv = str((data.get("metadata") or {}).get("resourceVersion") or "")
        self.relists += 1
        log.debug("listed %d %s in %.0f ms (%.0f ms CPU)", len(items), kind, (time.monotonic() - began) * 1000,
                  (time.thread_time() - cpu) * 1000)
        self.changed.set()
        self.synced.set()

    def _listed(self) -> None:
        """Tell the subscribers that the items are a new list (under ``lock``)."""
        self.has_list = True
        if self.subscribers:
            items = list(self.items.values())
            for sub in self.subscribers:
                sub.listed(self.res.kind, items)

    def _wait_present(self) -> None:
        """An optional resource the server does not have: empty and synced until discovery finds it."""
        self.discovered.wait()
        if self.present.is_set():
            return
        with self.lock:
            had = bool(self.items)
            self.items = {}
            self._listed()
        self.synced.set()
        if had:
            self.changed.set()
        while not self.stop.is_set() and not self.present.wait(1.0):
            pass

    def _run(self) -> None:
        backoff = 0.5
        need_list = True
        while not self.stop.is_set():
            if self.res.optional and not self.present.is_set():
                self._wait_present()
                need_list = True
                continue
            try:
                if need_list:
                    self._list()
                    need_list = False
                for event in self.client.watch(self.res.path, self.rv, timeout_seconds=240, gather=WATCH_GATHER_S):
                    if self.stop.is_set():
                        return
                    self._handle(event)
                backoff = 0.5  # the server closed a healthy watch: resume from the last version
            except ApiError as err:
                if err.status == 410:
                    log.info("watch %s expired (410 Gone at resourceVersion %s); listing again", self.res.kind,
                             self.rv)
                    need_list = True  # too old: relist
                    continue
                if err.status == 404 and self.res.optional:
                    self.present.clear()  # removed: discovery says when it is back
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
        if self.slim is not None:
            self.slim(obj)
        key = store_key(obj)
        with self.lock:
            if kind == "DELETED":
                self.items.pop(key, None)
            else:
                self.items[key] = obj
        for sub in self.subscribers:
            sub.event(self.res.kind, kind == "DELETED", obj)
        if not self.changed.is_set():  # (setting it takes a lock and wakes no one when it is set: once per event)
            self.changed.set()
        for listener in self.listeners:
            listener(obj)


def served_group_versions(client: KubeClient) -> set[str]:
    """The group/versions the API server serves, from discovery (``/apis``, one request)."""
    data = client.get("/apis", retries=1)
    return {str(v.get("groupVersion")) for g in data.get("groups") or [] for v in g.get("versions") or []}


class WatchCache:
    """Every resource listed and watched, each in its own thread. (A starting scheduler's cache does more:
    ``kaid.kube.startup.StartingCache``.)"""

    def __init__(self, client: KubeClient, resources: tuple[ApiResource, ...] = API_RESOURCES) -> None:
        self.client = client
        self.stop = threading.Event()
        self.changed = threading.Event()
        self.discovered = threading.Event()
        self.informers = [Informer(client, r, self.stop, self.changed, self.discovered) for r in resources]
        self.optional = [inf for inf in self.informers if inf.res.optional]
        self.discovery = threading.Thread(target=self._discover, name="discovery", daemon=True)
        self.started = False
        self.pods = next((inf for inf in self.informers if inf.res.kind == "Pod"), None)

    def start(self) -> None:
        """List and watch every resource, each in its own thread (once; later calls do nothing)."""
        if self.started:
            return
        self.started = True
        for inf in self.informers:
            inf.start()
        if self.optional:
            self.discovery.start()
        else:
            self.discovered.set()

    def _discover(self) -> None:
        while not self.stop.is_set():
            try:
                served: set[str] | None = served_group_versions(self.client)
            except Exception as err:  # no discovery: let each informer find out by listing
                log.info("API discovery failed (%s); listing every optional resource to find out", err)
                served = None
            for inf in self.optional:
                if served is None or inf.res.group_version in served:
                    inf.present.set()
            self.discovered.set()
            self.stop.wait(DISCOVERY_PERIOD)

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

    def subscribe(self, sub: Subscriber) -> None:
        """``sub`` sees every object each watch event adds, changes or deletes, and each informer's whole list when
        it lists (at the start and after ``410 Gone``), in the informers' threads; an informer that has listed
        already hands over its items at once. An event may be seen twice around the subscription: each must be
        idempotent."""
        for inf in self.informers:
            with inf.lock:
                inf.subscribers.append(sub)
                if inf.has_list:
                    sub.listed(inf.res.kind, list(inf.items.values()))

    def on_change(self, kind: str, listener: Callable[[Obj], None]) -> None:
        """``listener`` sees every object of ``kind`` that a watch event adds, changes or deletes, in the watch's
        thread, after the cache has it (a relist tells nobody: look at the cache too)."""
        for inf in self.informers:
            if inf.res.kind == kind:
                inf.listeners.append(listener)

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        for inf in self.informers:
            if inf.res.kind == kind:
                with inf.lock:
                    return inf.items.get(f"{namespace or ''}/{name}")
        return None

    def close(self) -> None:
        self.stop.set()
