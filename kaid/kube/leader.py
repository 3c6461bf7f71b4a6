"""Leader election with a ``coordination.k8s.io/v1`` Lease: only the holder schedules; another replica
takes over when the holder stops renewing. Updates use the Lease's resourceVersion, so two candidates
can never both win."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from urllib.parse import quote

from kaid.api.config import LeaderElectionConfig
from kaid.kube.client import ApiError, KubeClient

log = logging.getLogger("kaid.leader")


def _micro(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


class LeaderElector:
    def __init__(self, client: KubeClient, cfg: LeaderElectionConfig, identity: str,
                 on_change: Callable[[], None] | None = None) -> None:
        self.on_change = on_change
        self.client = client
        self.cfg = cfg
        self.identity = identity
        self.is_leader = threading.Event()
        self.stop = threading.Event()
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{quote(cfg.namespace)}/leases"
        self.thread = threading.Thread(target=self._run, name="leader", daemon=True)
        self.renewed_at = 0.0  # monotonic time of the last successful acquire or renew
        self.tried = threading.Event()  # the first attempt has an answer (won or not)

    def holds(self) -> bool:
        """Leader, and sure of it: the last renew is younger than the lease (a process frozen past its
        lease, by a GC pause or SIGSTOP, has lost it even before its renew loop notices)."""
        margin = min(1.0, self.cfg.leaseDurationSeconds / 4)
        return self.is_leader.is_set() and \
            time.monotonic() - self.renewed_at < self.cfg.leaseDurationSeconds - margin

    def start(self) -> None:
        self.thread.start()

    def _try(self) -> bool:
        now = dt.datetime.now(dt.UTC)
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.cfg.leaseDurationSeconds),
                "renewTime": _micro(now)}
        try:
            lease = self.client.get(f"{self.path}/{quote(self.cfg.name)}")
        except ApiError as err:
            if err.status != 404:
                raise
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.cfg.name, "namespace": self.cfg.namespace},
                    "spec": {**spec, "acquireTime": _micro(now), "leaseTransitions": 0}}
            try:
                self.client.create(self.path, body)
                return True
            except ApiError as err2:
                if err2.status == 409:
                    return False
                raise
        cur = lease.get("spec") or {}
        holder = cur.get("holderIdentity")
        renewed = _parse(cur.get("renewTime"))
        duration = float(cur.get("leaseDurationSeconds") or self.cfg.leaseDurationSeconds)
        expired = renewed is None or (now - renewed).total_seconds() > duration
        if holder != self.identity and holder and not expired:
            return False
        new_spec = {**cur, **spec}
        if holder != self.identity:
            new_spec["acquireTime"] = _micro(now)
            new_spec["leaseTransitions"] = int(cur.get("leaseTransitions") or 0) + 1
        lease["spec"] = new_spec
        try:
            self.client.request("PUT", f"{self.path}/{quote(self.cfg.name)}", lease)
            return True
        except ApiError as err:
            if err.status == 409:  # someone else updated it first
                return False
            raise

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                asked = time.monotonic()
                won = self._try()
                if won:
                    self.renewed_at = asked  # counted from before the request: never optimistic
            except Exception as err:
                log.warning("lease %s/%s: %s", self.cfg.namespace, self.cfg.name, err)
                won = False
            if won and not self.is_leader.is_set():
                log.info("%s became the leader", self.identity)
                self.is_leader.set()
                if self.on_change is not None:
                    self.on_change()
            elif not won and self.is_leader.is_set():
                log.warning("%s lost the lease; standing by", self.identity)
                self.is_leader.clear()
            self.tried.set()
            self.stop.wait(self.cfg.renewIntervalSeconds)

    def release(self) -> None:
        """Give the lease up on a clean shutdown so that a standby takes over at once."""
        self.stop.set()
        if not self.is_leader.is_set():
            return
        self.is_leader.clear()
        try:
            lease = self.client.get(f"{self.path}/{quote(self.cfg.name)}")
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["renewTime"] = _micro(dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
                lease["spec"]["holderIdentity"] = ""
                self.client.request("PUT", f"{self.path}/{quote(self.cfg.name)}", lease)
        except ApiError as err:
            log.info("lease not released: %s", err.message)
