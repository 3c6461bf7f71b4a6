"""A standby replica on the real control plane: it runs no cycle, yet it keeps its incremental snapshot current from
the watch events (``LiveSnapshots.catch_up`` each period), so the events queued for it stay one period's worth
however long it stands by, and when it takes over it schedules on what the cluster holds now: the GPUs freed while
it stood by are handed out again, none twice, and its queue accounting is the cluster's. It has loaded the solver
meanwhile (``warm_up_solver``), so its first cycle as leader does not."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from .controlplane import ControlPlane
from .kaid_helpers import Kaid, bound, create_object, lease_holder, pod, pods_of, queue, suffix, wait_for

GPUS_PER_NODE = 8


def _delete_pod(cp: ControlPlane, namespace: str, name: str) -> None:
    cp.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0")


def _wait_bound(cp: ControlPlane, namespace: str, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    def enough() -> list[dict[str, Any]] | None:
        got = bound(pods_of(cp, namespace))
        return got if len(got) >= count else None

    result: list[dict[str, Any]] = wait_for(enough, timeout, f"{count} bound pods in {namespace}")
    return result


def _wait_count(cp: ControlPlane, namespace: str, count: int) -> None:
    wait_for(lambda: len(pods_of(cp, namespace)) == count, 10, f"{count} pods in {namespace}")


def _gpus_by_node(cp: ControlPlane, namespace: str) -> dict[str, int]:
    used: dict[str, int] = {}
    for p in bound(pods_of(cp, namespace)):
        used[p["spec"]["nodeName"]] = used.get(p["spec"]["nodeName"], 0) + 1
    return used


class _Sampler:
    """Reads a replica's ``kai_snapshot_events_queued`` every 0.1 s in a thread: the largest value seen."""

    def __init__(self, kaid: Kaid) -> None:
        self.kaid = kaid
        self.most = 0.0
        self.samples = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            value = self.kaid.metric("kai_snapshot_events_queued")
            if value is not None:
                self.most = max(self.most, value)
                self.samples += 1

    def __enter__(self) -> _Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


def test_standby_keeps_its_event_queue_short_and_schedules_on_the_current_cluster_after_failover(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, nodes = make_pool(2, gpus=GPUS_PER_NODE)
    (q,) = make_queues(queue(f"standby-{suffix()}", 0))
    lease = f"kai-e2e-standby-{suffix()}"
    leader = start_kaid("standby-a", lease=lease, lease_duration=4.0, renew_interval=0.5)
    wait_for(lambda: lease_holder(cp, lease) == "standby-a", 15, "standby-a to hold the Lease")
    standby = start_kaid("standby-b", lease=lease, lease_duration=4.0, renew_interval=0.5)
    wait_for(lambda: standby.metric("kai_is_leader") == 0, 15, "kai_is_leader 0 on standby-b")

    # churn: six rounds of six pods made and bound, four of the running ones deleted (12 of 16 GPUs held at the end)
    made = deleted = 0
    with _Sampler(standby) as sampler:
        for _ in range(6):
            for _ in range(6):
                create_object(cp, namespace, pod(f"churn-{made}", pool, q, 1))
                made += 1
            running = _wait_bound(cp, namespace, made - deleted)
            for p in sorted(running, key=lambda p: p["metadata"]["name"])[:4]:
                _delete_pod(cp, namespace, p["metadata"]["name"])
                deleted += 1
            _wait_count(cp, namespace, made - deleted)
        time.sleep(2.0)  # two standby periods with no churn
    settled = standby.metric("kai_snapshot_events_queued")
    print(f"standby's queued events: at most {sampler.most:.0f} in {sampler.samples} samples during the churn "
          f"({made} pods made, {deleted} deleted); {settled} once it stopped")
    assert sampler.samples > 20
    # a pod is added, bound, set Running and deleted, its PodGroup made and its status written: about 40 events a
    # period here; without catch_up the queue keeps them all (277 by the end of this churn)
    assert sampler.most < 150, f"the standby's event queue grew to {sampler.most:.0f}"
    assert settled is not None and settled < 20, f"{settled} events still queued on the standby"
    assert standby.metric("kai_e2e_scheduling_latency_milliseconds_count") == 0, "the standby ran cycles"
    # the solver is loaded while standing by: the first cycle as leader does not pay for it
    assert standby.process is not None
    assert "ortools" in Path(f"/proc/{standby.process.pid}/maps").read_text(), "OR-Tools not loaded on the standby"

    leader.kill()
    wait_for(lambda: lease_holder(cp, lease) == "standby-b", 20, "standby-b to take the Lease over")
    held = made - deleted
    free = 2 * GPUS_PER_NODE - held
    for i in range(free + 2):  # two more than fit
        create_object(cp, namespace, pod(f"after-{i}", pool, q, 1))
    _wait_bound(cp, namespace, held + free)
    standby.wait_cycles(2)
    used = _gpus_by_node(cp, namespace)
    assert sum(used.values()) == 2 * GPUS_PER_NODE and all(n <= GPUS_PER_NODE for n in used.values()), used
    assert set(used) <= set(nodes)
    # the new leader's accounting is the cluster's: every GPU of its pool allocated, two more requested
    wait_for(lambda: standby.metric("kai_queue_allocated_gpus", {"queue": q}) == 2 * GPUS_PER_NODE, 10,
             f"kai_queue_allocated_gpus of {q} on standby-b to be {2 * GPUS_PER_NODE}")
    assert standby.metric("kai_queue_requested_gpus", {"queue": q}) == 2 * GPUS_PER_NODE + 2
    # two running pods go: the two waiting take their GPUs
    for p in sorted(bound(pods_of(cp, namespace)), key=lambda p: p["metadata"]["name"])[:2]:
        _delete_pod(cp, namespace, p["metadata"]["name"])
    wait_for(lambda: len(bound(pods_of(cp, namespace))) == 2 * GPUS_PER_NODE
             and len(pods_of(cp, namespace)) == 2 * GPUS_PER_NODE, 20, "the two waiting pods to be bound")
    used = _gpus_by_node(cp, namespace)
    assert all(n <= GPUS_PER_NODE for n in used.values()), used
