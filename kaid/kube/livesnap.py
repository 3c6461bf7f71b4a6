"""The daemon's snapshots from watch events (issue 15): the engine's model (``kaid.model.live.LiveModel``) kept up to
date by the watch cache's events and lists, instead of a cold build of every object each cycle.

Two layers lie over what the watch says, as they lay over the cold build's objects:

- this replica's assumptions (the daemon's ``Overlay``): a pod it bound, evicted or pipelined, as its writes left it,
  until the watch shows them; only the assumed pods are looked at each cycle;
- the PodGroups it makes from memory for workloads that name none (``podgrouper.podgroup_for``), until the API
  server's own come back through the watch; only the jobs without a PodGroup are looked at.

The snapshot hands the cycle the model's own objects (``LiveModel(shared=True)``: what the cycle changes is
journaled and undone at the model's next call), so nothing may read a snapshot once the model has moved on: a
reader on another thread (the daemon's status writer) ``holds`` it, and the next ``snapshot`` or ``catch_up`` waits
until it lets go.

Events are queued by the informers' threads and applied by the cycle's thread when it takes a snapshot; a replica
that stands by (it runs no cycle) applies them each period instead (``catch_up``), so that its queue stays as short
as one period's events and its model is current the moment it leads. A relist (``410 Gone``, a watch restarted)
replaces its kind as a whole (``LiveModel.resync``)."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.kube.cache import Subscriber
from kaid.kube.podgrouper import podgroup_for
from kaid.model.grouping import OWNER_KINDS
from kaid.model.live import LiveModel
from kaid.model.objects import Snapshot
from kaid.model.vocabulary import FINISHED_PHASES

Obj = dict[str, Any]
log = logging.getLogger("kaid.snapshot")


class Assumptions(Protocol):
    """What the daemon's ``Overlay`` tells: the pods assumed now, and each as this replica's writes left it."""

    def assumed_pods(self, now: float) -> set[str]: ...

    def assumption(self, key: str) -> tuple[object, ...]: ...

    def assumed(self, pod: Obj) -> Obj: ...


class Subscribable(Protocol):
    """A watch cache (``WatchCache.subscribe``)."""

    def subscribe(self, sub: Subscriber) -> None: ...


class LiveSnapshots:
    """Snapshots of a watch cache's objects, each cycle's from the events since the last."""

    def __init__(self, cache: Subscribable, cfg: SchedulerConfig) -> None:
        self.cache = cache
        self.cfg = cfg
        self.model = LiveModel(cfg, wait_for_owners=True)
        self.free = threading.Event()  # no other thread reads the last snapshot (``hold``)
        self.free.set()
        self.queue: deque[tuple[str, bool, Obj | None, list[Obj] | None]] = deque()
        self.lock = threading.Lock()  # one snapshot at a time
        # pod key -> (the watch's object, as assumed, what was assumed)
        self.overrides: dict[str, tuple[Obj, Obj, tuple[object, ...]]] = {}
        self.made: dict[str, Obj] = {}  # PodGroup key -> the one made from memory, while the watch has none
        # what each was made from (``_made_from``): made again only when that changed, or the owners or namespaces did
        self.made_from: dict[str, tuple[int, list[tuple[object, ...]]]] = {}
        self.context = 0  # counts the owner and Namespace events and lists (what ``podgroup_for`` reads beside pods)
        self.relists = 0
        cache.subscribe(self)

    # ------------------------------------------------------------------- the informers' threads (Subscriber)
    def event(self, kind: str, deleted: bool, obj: Obj) -> None:
        self.queue.append((kind, deleted, obj, None))

    def listed(self, kind: str, items: list[Obj]) -> None:
        self.queue.append((kind, False, None, items))

    # ------------------------------------------------------------------------------------ the cycle's thread
    def hold(self) -> Callable[[], None]:
        """The last snapshot is read on another thread until the function returned is called (once, whatever
        happens): the model does not move on before."""
        self.free.clear()
        return self.free.set

    def snapshot(self, overlay: Assumptions, now: float) -> tuple[Snapshot, list[Obj]]:
        """The snapshot of now, and the PodGroups made from memory that the API server does not have yet. The last
        one's objects are the model's again (its cycle's changes undone) once no one holds it."""
        self.free.wait()
        with self.lock:
            self._drain()
            self._assume(overlay, now)
            made = self._podgroups()
            return self.model.snapshot(now), made

    def catch_up(self) -> None:
        """Apply the events queued since the last call or snapshot, and read what they changed, without a snapshot:
        what a standby replica does each period (else its queue would grow for as long as it stands by)."""
        self.free.wait()
        with self.lock:
            self._drain()
            self.model.refresh(implicit=not self.cfg.createPodGroups)  # (those jobs are read with their PodGroups)

    @property
    def queued(self) -> int:
        """Events and lists waiting to be applied."""
        return len(self.queue)

    def objects(self) -> list[Obj]:
        """Every object as the last snapshot saw it (assumptions and PodGroups made from memory included)."""
        with self.lock:
            return self.model.objects()

    def _drain(self) -> None:
        while self.queue:
            kind, deleted, obj, items = self.queue.popleft()
            try:
                self._apply(kind, deleted, obj, items)
            except Exception as err:  # (an object the model cannot hold: left out, the other events applied)
                log.warning("a %s watch event is left out of the snapshot: %s", kind, err)

    def _apply(self, kind: str, deleted: bool, obj: Obj | None, items: list[Obj] | None) -> None:
        model = self.model
        if kind == "Namespace" or kind in OWNER_KINDS:
            self.context += 1
        if items is not None:
            self.relists += 1
            if kind == "Pod":
                self.overrides.clear()  # set again from the new objects (``_assume``)
            elif kind == "PodGroup":
                self.made.clear()  # made again where still missing (``_podgroups``)
                self.made_from.clear()
            model.resync(kind, items)
        elif obj is not None:
            obj.setdefault("kind", kind)
            if deleted:
                model.delete(kind, meta.store_key(obj))
                if kind == "PodGroup":
                    self._unmade(meta.store_key(obj))
            else:
                if kind == "PodGroup":
                    self._unmade(meta.store_key(obj))  # the API server's own has come
                model.upsert(obj)

    def _assume(self, overlay: Assumptions, now: float) -> None:
        """The assumed pods as this replica's writes left them; pods no longer assumed as the watch shows them."""
        keys = overlay.assumed_pods(now)
        for key in keys | set(self.overrides):
            entry = self.model.pods.get(key)
            before = self.overrides.get(key)
            base = before[0] if before is not None and entry is not None and entry.obj is before[1] else \
                entry.obj if entry is not None else None
            if base is None:  # gone
                self.overrides.pop(key, None)
                continue
            what = overlay.assumption(key)
            if key in keys:
                if before is not None and before[0] is base and before[2] == what:
                    continue  # as assumed already
                seen = overlay.assumed(base)
            else:
                seen = base
            if seen is base:
                self.overrides.pop(key, None)
            else:
                self.overrides[key] = (base, seen, what)
            self.model.upsert(seen)

    def _podgroups(self) -> list[Obj]:
        """PodGroups made from memory for the jobs without one, as the cold path's ``podgroups_to_create``."""
        model = self.model
        if not self.cfg.createPodGroups:
            return []
        model.refresh(implicit=False)  # which pods are in which job (those without a PodGroup: read once it is made)
        # new ones in the order of their jobs' first pods, as the cold path makes them, not in the order the model
        # read those pods in (a set's, which depends on how its reads fell: a catch_up reads part of them before)
        implicit = sorted(model.implicit_jobs(),
                          key=lambda job: min(model.pods[k].seq for k in model.job_pods[job] if k in model.pods))
        for key in [*implicit, *self.made]:
            pg = model.podgroups.get(key)
            if pg is not None and pg is not self.made.get(key):
                self._unmade(key)  # the API server's own
                continue
            pods = model.pod_objects(key)
            source = (self.context, [_made_from(p) for p in pods])
            had = self.made.get(key)
            if had is not None and self.made_from.get(key) == source:
                continue  # made from the same: the same again
            wanted = podgroup_for(pods, model.owners, model.namespaces, self.cfg)
            if wanted is None:
                if had is not None:
                    self._unmade(key)
                    model.delete("PodGroup", key)
            else:
                self.made_from[key] = source
                if had is None or wanted != had:
                    self.made[key] = wanted
                    model.upsert(wanted)
        return list(self.made.values())

    def _unmade(self, key: str) -> None:
        self.made.pop(key, None)
        self.made_from.pop(key, None)


def _made_from(pod: Obj) -> tuple[object, ...]:
    """What ``podgroup_for`` reads of a pod (with the owners and namespaces): a pod bound or running since reads the
    same, so its job's PodGroup made from memory is not made again each cycle until the API server's comes (bench_kube:
    2,141 of them, 50 ms a snapshot)."""
    m = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    deleting = m.get("deletionTimestamp")
    return (pod.get("apiVersion"), pod.get("kind"), m.get("name"), m.get("namespace"), m.get("uid"), m.get("labels"),
            m.get("annotations"), m.get("ownerReferences"), deleting, deleting and not spec.get("nodeName"),
            spec.get("schedulerName"), spec.get("priorityClassName"), spec.get("priority", _ABSENT),
            (pod.get("status") or {}).get("phase") in FINISHED_PHASES)


_ABSENT = object()
