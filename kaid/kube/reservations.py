"""Shared-GPU binds, with the device handed over (``kaid.sharing.handoff`` says what is written).

A job that has a shared-GPU pod is bound here, in the background, apart from whole-GPU binds (which never
wait behind a reservation): every GPU group it uses is held by a reservation pod, whose process reports the
device's UUID; then each pod's ConfigMaps are written, the pod is labelled with its groups, and bound. If any
step fails, the pods not bound are rolled back (ConfigMaps, labels) and the job's outcome says why; the daemon
puts that on the PodGroup and waits before placing the job again. As on the whole-GPU path (``kaid.kube.actuator``),
the pods of a gang bound already stay bound: deleting them would lose bare pods and fail Jobs; the next cycle places
the rest, and the stale-gang grace evicts a gang that stays below its minimum.

Reservations of different groups proceed in parallel; binds that need the same group share one reservation
(a future per group). A reservation pod's name is derived from its node and group, so a second create for the
group (a retry, another replica, a kaid restarted after a SIGKILL) meets the first pod and reuses it. A
reservation pod goes (``collect``) once no pending or running pod and no bind in flight uses its group; one
this process never saw used (made by a kaid that died before using it) gets the reservation timeout first,
in case the pod it was made for lands on it again.

The UUID is read from the watch cache (``notify`` wakes the waits), not from a watch per reservation.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import quote

from kaid.api.config import GpuSharingConfig
from kaid.cycle import Bind
from kaid.kube.client import ApiError, KubeClient, pod_path
from kaid.model.objects import Reason
from kaid.model.pods import is_reservation_pod
from kaid.model.vocabulary import ReasonCode
from kaid.sharing import handoff

log = logging.getLogger("kaid.reservations")
Obj = dict[str, Any]
PodLookup = Callable[[str, str], "Obj | None"]  # (namespace, name) -> the pod as the watch cache has it
BindOne = Callable[[Bind, "Obj | None"], "str | None"]  # bind one pod with this metadata patch; an error or None
RESERVATION_FAILED = ReasonCode.GPU_RESERVATION_FAILED
NOT_SET_UP = ReasonCode.GPU_SHARING_NOT_SET_UP


class BindFailure(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.reason = Reason(code, message)


@dataclass
class SharedOutcome:
    """What became of one job sent to ``SharedBinder.submit``."""

    job: str
    binds: list[Bind]
    bound: list[Bind] = field(default_factory=list)
    failed: list[tuple[Bind, Reason]] = field(default_factory=list)


def _split(key: str) -> tuple[str, str]:
    ns, name = key.split("/", 1)
    return ns, name


def _configmap_path(namespace: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{quote(namespace)}/configmaps"
    return f"{base}/{quote(name)}" if name else base


class SharedBinder:
    def __init__(self, client: KubeClient, cfg: GpuSharingConfig, lookup: PodLookup, bind_one: BindOne) -> None:
        self.client = client
        self.cfg = cfg
        self.lookup = lookup
        self.bind_one = bind_one
        self.jobs = ThreadPoolExecutor(cfg.reservationWorkers, thread_name_prefix="shared-bind")
        self.reservers = ThreadPoolExecutor(cfg.reservationWorkers, thread_name_prefix="reserve")
        self.lock = threading.Lock()
        self.changed = threading.Condition()  # a reservation pod changed (the watch cache says so)
        self.stopping = threading.Event()
        self.reserving: dict[tuple[str, str], Future[str]] = {}  # (node, group) -> the device's UUID
        self.users: Counter[str] = Counter()  # group -> jobs in flight that use it (until drained)
        self.used_here: set[str] = set()  # groups this process has seen used
        self.group_locks: dict[str, threading.Lock] = {}
        self.gone: set[str] = set()  # uids of reservation pods this process deleted (the cache may still show them)
        self.deleting: set[str] = set()  # names of idle reservation pods being deleted
        self.outcomes: list[SharedOutcome] = []

    # ------------------------------------------------------------------------------------------ the daemon's side
    def submit(self, binds: list[Bind]) -> None:
        """Bind one job's pods (some of them shared-GPU ones) in the background; ``drain`` gives the outcome."""
        job = binds[0].job
        groups = {g for b in binds for g in b.gpu_groups}
        with self.lock:
            self.users.update(groups)
            self.used_here.update(groups)
        self.jobs.submit(self._run_job, job, list(binds))

    def drain(self) -> list[SharedOutcome]:
        """The outcomes of the jobs finished since the last call. Their groups count as in use until here: the
        daemon records the binds (the watch may not show them yet) before it next looks for idle reservations."""
        with self.lock:
            done, self.outcomes = self.outcomes, []
            for out in done:
                self.users.subtract({g for b in out.binds for g in b.gpu_groups})
            self.users = +self.users  # drop the zeros
        return done

    def notify(self, obj: Obj) -> None:
        """A pod changed in the watch cache: wake the reservations waiting for a UUID if it is a reservation pod."""
        if is_reservation_pod(obj, self.cfg):
            with self.changed:
                self.changed.notify_all()

    def collect(self, objects: list[Obj], now: float) -> list[str]:
        """Delete the reservation pods whose group nothing uses (in the background); returns their names."""
        with self.lock:
            found = handoff.idle_reservations(objects, self.cfg, set(self.users), self.used_here, now,
                                              self.gone | self.deleting)
            self.used_here |= found.used
            names = [str(o["metadata"]["name"]) for o in found.pods]
            self.deleting.update(names)
            if self.gone:  # forgotten once the cache has caught up
                self.gone &= {str((o.get("metadata") or {}).get("uid")) for o in objects if o.get("kind") == "Pod"}
        for obj in found.pods:
            self.jobs.submit(self._delete_idle, obj)
        return names

    def close(self) -> None:
        """Stop: reservations still waiting fail (their pods are deleted), then the threads end."""
        self.stopping.set()
        with self.changed:
            self.changed.notify_all()
        self.jobs.shutdown(wait=True)
        self.reservers.shutdown(wait=True)

    # ------------------------------------------------------------------------------------------ one job
    def _run_job(self, job: str, binds: list[Bind]) -> None:
        out = SharedOutcome(job, binds)
        try:
            self._bind_job(binds, out)
        except Exception as err:  # never lose a job's outcome: the daemon must forget its assumed binds
            log.exception("shared-GPU binds of %s failed", job)
            done = {b.pod for b in out.bound} | {b.pod for b, _ in out.failed}
            out.failed.extend((b, Reason(RESERVATION_FAILED, f"binding failed: {err}")) for b in binds
                              if b.pod not in done)
        with self.lock:
            self.outcomes.append(out)

    def _bind_job(self, binds: list[Bind], out: SharedOutcome) -> None:
        pods: dict[str, Obj] = {}
        try:
            for b in binds:
                if b.gpu_groups:
                    pod = self.lookup(*_split(b.pod))
                    if pod is None:
                        raise BindFailure(RESERVATION_FAILED, f"pod {b.pod} is gone")
                    problem = handoff.not_set_up(pod)
                    if problem is not None:
                        raise BindFailure(NOT_SET_UP, problem)
                    pods[b.pod] = pod
            uuids = self._reserve_all(binds, pods)
        except BindFailure as err:
            out.failed.extend((b, err.reason) for b in binds)
            return
        for b in binds:
            error = self._bind_shared(b, pods[b.pod], uuids) if b.gpu_groups else self.bind_one(b, None)
            if error is None:
                out.bound.append(b)
            else:
                out.failed.append((b, error if isinstance(error, Reason) else Reason(ReasonCode.BINDING_ERROR, error)))
        if out.failed and out.bound:
            # The gang is partly bound; its bound pods stay (as in ``Actuator.bind``): the daemon assumes them, the
            # next cycle places the rest, the stale-gang grace evicts a gang that stays below its minimum.
            log.warning("%d of %d binds of %s failed (%s); its %d bound pods stay, the rest is placed again",
                        len(out.failed), len(binds), out.job, out.failed[0][1].message, len(out.bound))

    def _reserve_all(self, binds: list[Bind], pods: dict[str, Obj]) -> dict[tuple[str, str], str]:
        """The UUID of every group the job uses, reserved in parallel; BindFailure naming the first that failed."""
        futures: dict[tuple[str, str], Future[str]] = {}
        for b in binds:
            for group in b.gpu_groups:
                key = (b.node, group)
                if key not in futures:
                    futures[key] = self._reservation(b.node, group, pods[b.pod])
        uuids: dict[tuple[str, str], str] = {}
        failure: BindFailure | None = None
        for key, fut in futures.items():
            try:
                uuids[key] = fut.result()
            except BindFailure as err:
                failure = failure or err
        if failure is not None:
            raise failure
        return uuids

    def _reservation(self, node: str, group: str, pod: Obj) -> Future[str]:
        """The one reservation of ``group`` on ``node`` under way (started if none is)."""
        key = (node, group)
        with self.lock:
            fut = self.reserving.get(key)
            if fut is None:
                fut = self.reservers.submit(self._reserve, node, group, pod)
                self.reserving[key] = fut
                fut.add_done_callback(partial(self._forget, key))
            return fut

    def _forget(self, key: tuple[str, str], fut: Future[str]) -> None:
        """A finished reservation is not kept: the next bind for the group finds its pod (and UUID) in the cache,
        or, if it has gone since, makes another."""
        with self.lock:
            if self.reserving.get(key) is fut:
                del self.reserving[key]

    # ------------------------------------------------------------------------------------------ one reservation
    def _group_lock(self, group: str) -> threading.Lock:
        with self.lock:
            return self.group_locks.setdefault(group, threading.Lock())

    def _current(self, name: str) -> Obj | None:
        """The reservation pod as the cache has it, unless this process deleted it."""
        obj = self.lookup(self.cfg.reservationNamespace, name)
        if obj is not None and (obj.get("metadata") or {}).get("uid") in self.gone:
            return None
        return obj

    def _reserve(self, node: str, group: str, pod: Obj) -> str:
        name = handoff.reservation_pod_name(node, group)
        ns = self.cfg.reservationNamespace
        deadline = time.monotonic() + self.cfg.reservationTimeoutSeconds
        with self._group_lock(group):
            existing = self._current(name)
            if existing is not None and (existing.get("metadata") or {}).get("deletionTimestamp"):
                self._wait(lambda: self._current(name) is None, deadline)  # an older one on its way out
                existing = self._current(name)
            if existing is None:
                try:
                    self.client.create(f"/api/v1/namespaces/{quote(ns)}/pods",
                                       handoff.reservation_pod(node, group, pod, self.cfg))
                    log.info("reservation pod %s/%s made for GPU group %s on %s", ns, name, group, node)
                except ApiError as err:
                    if err.status != 409:  # 409: made meanwhile (a retry, another replica): it is reused
                        raise BindFailure(RESERVATION_FAILED, f"could not make reservation pod {ns}/{name} on node "
                                          f"{node} for GPU group {group}: {err.message}") from None
        uuid = self._wait(lambda: self._uuid_or_failure(name, node), deadline)
        if isinstance(uuid, str):
            return uuid
        why = uuid if isinstance(uuid, BindFailure) else BindFailure(RESERVATION_FAILED, (
            "kaid is stopping" if self.stopping.is_set() else
            f"reservation pod {ns}/{name} on node {node} reported no GPU UUID within "
            f"{self.cfg.reservationTimeoutSeconds:g} s (is the NVIDIA device plugin running there, with a free GPU? "
            f"kubectl describe pod -n {ns} {name} says more)"))
        self._delete_reservation(name, group)
        raise why

    def _uuid_or_failure(self, name: str, node: str) -> str | BindFailure | None:
        obj = self._current(name)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None  # not in the cache yet, or on its way out (the timeout says so)
        uuid = handoff.reserved_uuid(obj)
        if uuid:
            return uuid
        failed = handoff.reservation_failure(obj)
        if failed is not None:
            return BindFailure(RESERVATION_FAILED, f"reservation pod {self.cfg.reservationNamespace}/{name} failed on "
                               f"node {node}: {failed}")
        return None

    def _wait(self, check: Callable[[], Any], deadline: float) -> Any:
        """``check()`` until it returns something truthy or the deadline (or a stop) comes; woken by ``notify``
        and looking at least once a second (a relisted cache wakes nobody)."""
        while True:
            found = check()
            if found or self.stopping.is_set():
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                return found
            with self.changed:
                self.changed.wait(min(left, 1.0))

    def _delete_reservation(self, name: str, group: str) -> None:
        obj = self.lookup(self.cfg.reservationNamespace, name)
        try:
            self.client.request("DELETE", pod_path(self.cfg.reservationNamespace, name), {"gracePeriodSeconds": 0})
            log.info("reservation pod %s/%s of GPU group %s deleted", self.cfg.reservationNamespace, name, group)
        except ApiError as err:
            if err.status != 404:
                log.warning("could not delete reservation pod %s: %s", name, err.message)
                return
        with self.lock:
            if obj is not None and (obj.get("metadata") or {}).get("uid"):
                self.gone.add(str(obj["metadata"]["uid"]))
            self.used_here.discard(group)

    def _delete_idle(self, obj: Obj) -> None:
        group, name = handoff.reservation_group(obj), str(obj["metadata"]["name"])
        try:
            with self._group_lock(group):
                with self.lock:
                    if self.users.get(group):
                        return  # a bind for the group came in meanwhile
                self._delete_reservation(name, group)
        finally:
            with self.lock:
                self.deleting.discard(name)

    # ------------------------------------------------------------------------------------------ one pod
    def _bind_shared(self, b: Bind, pod: Obj, uuids: dict[tuple[str, str], str]) -> Reason | str | None:
        devices = [uuids[(b.node, g)] for g in b.gpu_groups]
        milli = b.gpu_milli // max(1, len(b.gpu_groups))
        try:
            for cm in handoff.configmaps(pod, devices, milli, self.cfg.cdi):
                self._write_configmap(cm)
        except (ApiError, handoff.HandoffError) as err:
            self._undo_pod(b, pod)
            return Reason(RESERVATION_FAILED, f"could not write the GPU ConfigMaps of pod {b.pod}: "
                          f"{err.message if isinstance(err, ApiError) else err}")
        patch = handoff.bind_patch(b.gpu_groups, b.devices, _split(b.job)[1])
        patch["metadata"]["labels"].update(b.set_labels)
        error = self.bind_one(b, patch)
        if error is not None:
            self._undo_pod(b, pod)
        return error

    def _write_configmap(self, cm: Obj) -> None:
        ns, name = cm["metadata"]["namespace"], cm["metadata"]["name"]
        try:
            self.client.create(_configmap_path(ns), cm)
        except ApiError as err:
            if err.status != 409:
                raise
            existing = self.client.get(_configmap_path(ns, name))
            self.client.merge_patch(_configmap_path(ns, name), handoff.merged_configmap(existing, cm))

    def _undo_pod(self, b: Bind, pod: Obj) -> None:
        """Take back what ``_bind_shared`` wrote on a pod that is not bound: its ConfigMaps and group labels."""
        try:
            names: tuple[str, ...] = handoff.configmap_names(pod)
        except handoff.HandoffError:
            names = ()
        ns = _split(b.pod)[0]
        for name in names:
            try:
                self.client.request("DELETE", _configmap_path(ns, name))
            except ApiError as err:
                if err.status != 404:
                    log.warning("could not delete ConfigMap %s/%s: %s", ns, name, err.message)
        try:
            self.client.merge_patch(pod_path(*_split(b.pod)), handoff.rollback_patch(b.gpu_groups))
        except ApiError as err:
            if err.status != 404:
                log.warning("could not remove the GPU group labels of %s: %s", b.pod, err.message)
