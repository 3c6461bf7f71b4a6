"""Fault tests on the real control plane: what a production control plane does to a scheduler (restarts of the
API server and etcd, expired watches, throttling and errors, a scheduler killed mid-reclaim, a partitioned
leader, nodes that vanish or go NotReady under a gang, malformed objects by the thousand).

Each test is bounded in time (every wait has a deadline) and ends with ``faults.check_invariants``, read from
the API server's own state. Each records its recovery figures (``faults.record``: printed, and appended to
``$KAI_FAULT_RESULTS`` when set); docs/reliability.md's fault table comes from them. They share the session's
control plane; the tests that stop etcd or the API server wait until it serves again before they end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from .controlplane import ApiError, ControlPlane
from .faultproxy import FaultProxy, Rule
from .faults import (
    BindRecorder,
    bound_count,
    check_invariants,
    create_all,
    gang_pods,
    podgroup_obj,
    record,
    rss_kib,
)
from .kaid_helpers import (
    POOL_LABEL,
    Kaid,
    KaiInstall,
    Obj,
    events,
    lease_holder,
    pod,
    pod_condition,
    pods_of,
    queue,
    suffix,
    wait_for,
)

# kaid as the fault tests run it: binds at 100/s; a gang below its minimum is evicted after 20 s
FAULT_CONFIG: dict[str, Any] = {"clientQPS": 100, "clientBurst": 100, "staleGangGraceSeconds": 20}
GANG_GRACE = 20 + 40  # the stale-gang grace, and a margin for cycles on a loaded machine


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    """A fault-injecting proxy to the API server (see faultproxy.py); it outlives the kaids of ``start``."""
    with FaultProxy(control_plane) as p:
        yield p


@pytest.fixture
def start(kai: KaiInstall, tmp_path: Path, proxy: FaultProxy) -> Iterator[Callable[..., Kaid]]:
    """Start ``kaid run`` replicas as ServiceAccount kai-scheduler, directly or through the test's ``proxy``
    (``proxied=True``); all share one Lease per test, and are stopped and their logs printed afterwards."""
    started: list[Kaid] = []
    lease = f"kai-fault-{suffix()}"

    def run(identity: str, *, proxied: bool = False, ready: bool = True, **kwargs: Any) -> Kaid:
        kubeconfig = proxy.kubeconfig(kai.kubeconfig) if proxied else kai.kubeconfig
        overrides = {**FAULT_CONFIG, **kwargs.pop("overrides", {})}
        kaid = Kaid(kubeconfig, tmp_path, identity, kwargs.pop("lease", lease), overrides=overrides, **kwargs)
        started.append(kaid)
        kaid.start()
        if ready:
            kaid.wait_ready(timeout=60)
        return kaid

    yield run
    for kaid in started:
        if kaid.process is not None and kaid.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(kaid.process.pid, signal.SIGCONT)
        kaid.stop()
    for kaid in started:
        print(f"===== kaid {kaid.identity} (log {kaid.log_path}) =====\n{kaid.log(120)}")


def _pod_names(objs: list[Obj]) -> list[str]:
    return [o["metadata"]["name"] for o in objs if o["kind"] == "Pod"]


def _wait_all_bound(cp: ControlPlane, namespace: str, count: int, timeout: float, what: str) -> float:
    """Wait until ``count`` pods of the namespace are bound; returns when (monotonic)."""
    last = 0

    def done() -> bool:
        nonlocal last
        last = bound_count(cp, namespace)
        return last >= count

    try:
        wait_for(done, timeout, what, interval=0.5)
    except AssertionError:
        raise AssertionError(f"{what}: {last} of {count} bound after {timeout:.0f}s") from None
    return time.monotonic()


def _lists(kaid: Kaid, resource: str) -> float:
    return kaid.metric("kai_watch_lists", {"resource": resource}) or 0.0


# --------------------------------------------------------------------------------------------------
# The API server and etcd


def test_apiserver_killed_and_restarted_during_a_backlog(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start: Any
) -> None:
    """1,000 pending pods (100 gangs of 4 and 600 single pods) on 40 kwok nodes of 32 GPUs; kube-apiserver is
    SIGKILLed while kaid binds them, and started again. Every pod ends bound, every gang whole, none twice."""
    cp = control_plane
    pool, _ = make_pool(40, gpus=32)
    (q,) = make_queues(queue(f"backlog-{suffix()}", 0))
    objs: list[Obj] = []
    for g in range(100):
        objs.append(podgroup_obj(f"gang-{g}", q, 4))
        objs += gang_pods(f"gang-{g}", pool, q, 4)
    objs += [pod(f"single-{i}", pool, q, 1) for i in range(600)]
    expected = _pod_names(objs)
    failed = [r for r in create_all(cp, namespace, objs) if isinstance(r, Exception)]
    assert not failed, failed[:3]
    with BindRecorder(cp, namespace) as recorder:
        kaid = start("backlog")
        began = time.monotonic()
        wait_for(lambda: bound_count(cp, namespace) >= 150, 120, "kaid to bind 150 pods of the backlog", interval=0.1)
        at_kill = bound_count(cp, namespace)
        cp.kill("kube-apiserver")
        killed = time.monotonic()
        down = cp.restart("kube-apiserver")
        back = time.monotonic()
        done = _wait_all_bound(cp, namespace, len(expected), 300, "the backlog bound after the restart")
        inv = check_invariants(cp, namespace, q, [kaid], expected=expected, recorder=recorder, grace=GANG_GRACE)
    record("apiserver-restart", pods=len(expected), bound_at_kill=at_kill, apiserver_down_s=round(down, 1),
           backlog_done_after_restart_s=round(done - back, 1), whole_run_s=round(done - began, 1),
           killed_after_s=round(killed - began, 1), pod_lists=_lists(kaid, "Pod"),
           probe_bound_s=round(inv.probe_bound_after, 1))


def test_etcd_restarted_and_watches_expired(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start: Any, proxy: FaultProxy
) -> None:
    """etcd (its history compacted first) is SIGKILLed and started again under a running kaid; later the pod watch
    of kaid expires in the middle of a run (``410 Gone``, as the API server says it after a compaction). kaid
    lists again and goes on: pods created after each fault are bound."""
    cp = control_plane
    pool, _ = make_pool(2, gpus=8)
    (q,) = make_queues(queue(f"etcd-{suffix()}", 0))
    kaid = start("etcd", proxied=True)
    expected: list[str] = []

    def wave(name: str, n: int, timeout: float) -> float:
        objs = [pod(f"{name}-{i}", pool, q, 1) for i in range(n)]
        expected.extend(_pod_names(objs))
        t0 = time.monotonic()
        assert not [r for r in create_all(cp, namespace, objs) if isinstance(r, Exception)]
        return _wait_all_bound(cp, namespace, len(expected), timeout, f"wave {name} bound") - t0

    with BindRecorder(cp, namespace) as recorder:
        wave("before", 4, 60)
        revision = cp.compact_etcd()
        cp.kill("etcd")
        down = cp.restart("etcd")
        after_etcd = wave("after-etcd", 4, 120)
        lists_after_etcd = _lists(kaid, "Pod")
        # the pod watch expires mid-run: its next watch is told 410 Gone, its stream is cut
        proxy.add(Rule("GET", r"^/api/v1/pods$", 410, watch=True, limit=1))
        proxy.cut()
        wait_for(lambda: proxy.rules[0].answered == 1, 60, "kaid to watch pods again (and be told 410 Gone)")
        after_expiry = wave("after-expiry", 4, 60)
        wait_for(lambda: _lists(kaid, "Pod") > lists_after_etcd, 30, "kaid to list pods again after the 410")
        inv = check_invariants(cp, namespace, q, [kaid], expected=expected, recorder=recorder, grace=GANG_GRACE)
    assert "expired (410 Gone" in kaid.full_log()
    record("etcd-restart", compacted_at=revision, etcd_and_apiserver_down_s=round(down, 1),
           bound_after_etcd_s=round(after_etcd, 1), pod_lists_after_etcd=lists_after_etcd,
           probe_bound_s=round(inv.probe_bound_after, 1))
    record("watch-expired", bound_after_expiry_s=round(after_expiry, 1), pod_lists=_lists(kaid, "Pod"))


# --------------------------------------------------------------------------------------------------
# Throttling and errors


BINDING = r"^/api/v1/namespaces/[^/]+/pods/[^/]+/binding$"
EVICTION = r"^/api/v1/namespaces/[^/]+/pods/[^/]+/eviction$"


def test_binds_and_evictions_answered_429_and_500(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start: Any, proxy: FaultProxy
) -> None:
    """Between kaid and the API server, a proxy answers bindings and evictions with 429 (Retry-After: 1) and 500:
    first every one for a while (a storm), then one in four 500 and one in four 429. kaid backs off, and binds
    and preempts anyway: 16 low-priority pods, then a gang of 8 of higher priority that must preempt 8 of them."""
    cp = control_plane
    pool, _ = make_pool(2, gpus=8)
    (q,) = make_queues(queue(f"throttle-{suffix()}", 16))
    storm = [Rule("POST", BINDING, 429, retry_after=1, limit=40), Rule("POST", EVICTION, 429, retry_after=1, limit=12)]
    steady = [Rule("POST", BINDING, 500, every=4), Rule("POST", BINDING, 429, every=3, retry_after=1),
              Rule("POST", EVICTION, 500, every=4), Rule("POST", EVICTION, 429, every=3, retry_after=1)]
    proxy.add(*storm, *steady)
    kaid = start("throttle", proxied=True)
    low = [pod(f"low-{i}", pool, q, 1, priority_class="train") for i in range(16)]
    with BindRecorder(cp, namespace) as recorder:
        t0 = time.monotonic()
        create_all(cp, namespace, low)
        low_done = _wait_all_bound(cp, namespace, 16, 120, "the low-priority pods bound through 429s and 500s") - t0
        gang = [podgroup_obj("high", q, 8, priorityClassName="build"), *gang_pods("high", pool, q, 8)]
        for p in gang[1:]:
            p["spec"]["priorityClassName"] = "build"
        t1 = time.monotonic()
        create_all(cp, namespace, gang)

        def gang_bound() -> bool:
            return sum(1 for p in pods_of(cp, namespace, None) if p["metadata"]["name"].startswith("high-")
                       and p["spec"].get("nodeName")) == 8

        wait_for(gang_bound, 180, "the gang bound after preempting through 429s and 500s", interval=0.5)
        gang_done = time.monotonic() - t1
        low_left = [p for p in pods_of(cp, namespace) if p["metadata"]["name"].startswith("low-")]
        assert len(low_left) == 8, f"{len(low_left)} low-priority pods left, 8 should have been preempted"
        inv = check_invariants(cp, namespace, q, [kaid], expected=_pod_names(gang) + [
            p["metadata"]["name"] for p in low_left], recorder=recorder, grace=GANG_GRACE)
    names = ["storm binding 429", "storm eviction 429", "binding 500", "binding 429", "eviction 500", "eviction 429"]
    injected = {name: r.answered for name, r in zip(names, proxy.rules, strict=True)}
    assert all(v > 0 for v in injected.values()), injected
    record("429-500", injected=injected, low_bound_s=round(low_done, 1), gang_preempted_and_bound_s=round(gang_done, 1),
           binds_failed=kaid.metric("kai_binds_total", {"result": "failed"}) or 0,
           probe_bound_s=round(inv.probe_bound_after, 1))


# --------------------------------------------------------------------------------------------------
# kaid killed in the middle of a reclaim


HOLD = "kai-e2e.test/hold"


@pytest.mark.parametrize("victims_end", ["while-down", "after-restart"])
def test_kaid_sigkilled_in_the_middle_of_a_reclaim(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start: Any, victims_end: str
) -> None:
    """Team A runs 8 pods on 8 GPUs, over its quota of 4; team B's gang of 4 reclaims. The victims hold a finalizer,
    so they stay Terminating: kaid is SIGKILLed once they are evicted and before the gang is bound. The victims end
    while kaid is down, or once it is back (it must then wait for them, evicting nothing more). Either way the gang
    is bound and A keeps its 4: nothing is lost on both sides."""
    cp = control_plane
    pool, (node,) = make_pool(1, gpus=8)
    sfx = suffix()
    _, a, b = make_queues(queue(f"dept-{sfx}", 8, weight=0), queue(f"team-a-{sfx}", 4, parent=f"dept-{sfx}"),
                          queue(f"team-b-{sfx}", 4, parent=f"dept-{sfx}"))
    kaid = start("reclaim")
    low = [pod(f"a-{i}", pool, a, 1, priority_class="train") for i in range(8)]
    for p in low:
        p["metadata"]["finalizers"] = [HOLD]
    with BindRecorder(cp, namespace) as recorder:
        create_all(cp, namespace, low)
        _wait_all_bound(cp, namespace, 8, 60, "team A's 8 pods")
        gang = [podgroup_obj("b-gang", b, 4), *gang_pods("b-gang", pool, b, 4)]
        create_all(cp, namespace, gang)

        def victims() -> list[str]:
            return [p["metadata"]["name"] for p in pods_of(cp, namespace) if p["metadata"].get("deletionTimestamp")]

        evicted = wait_for(lambda: len(victims()) >= 4 and victims(), 60, "the reclaim's 4 evictions")
        gang_bound = [p for p in pods_of(cp, namespace) if p["metadata"]["name"].startswith("b-gang")
                      and p["spec"].get("nodeName")]
        assert not gang_bound, "the gang was bound while its victims still held their GPUs"
        kaid.kill()
        killed = time.monotonic()

        def end_victims() -> None:
            for name in evicted:
                cp.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}",
                           {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")

        if victims_end == "while-down":
            end_victims()
        kaid.start()
        kaid.wait_ready(60)
        if victims_end == "after-restart":
            kaid.wait_cycles(3, 60)
            assert not [p for p in pods_of(cp, namespace) if p["metadata"]["name"].startswith("b-gang")
                        and p["spec"].get("nodeName")], "the gang was bound onto GPUs its victims still hold"
            assert len(victims()) == 4, f"the restarted kaid evicted more: {victims()}"
            end_victims()
        done = _wait_all_bound(cp, namespace, 8, 90, "the gang bound after kaid's restart")
        names = {p["metadata"]["name"] for p in pods_of(cp, namespace)}
        assert sum(1 for n in names if n.startswith("a-")) == 4 and sum(1 for n in names if n.startswith("b-")) == 4
        for p in pods_of(cp, namespace):
            if p["metadata"].get("finalizers"):
                cp.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}",
                           {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")
        expected = sorted(names)
        inv = check_invariants(cp, namespace, b, [kaid], expected=expected, recorder=recorder, grace=GANG_GRACE)
    assert {p["spec"]["nodeName"] for p in pods_of(cp, namespace) if p["metadata"]["name"].startswith("b-")} == {node}
    record(f"sigkill-mid-reclaim-{victims_end}", victims=len(evicted),
           reclaimer_bound_after_kill_s=round(done - killed, 1),
           probe_bound_s=round(inv.probe_bound_after, 1))


# --------------------------------------------------------------------------------------------------
# A partitioned leader


def test_partitioned_leader_does_not_act_on_its_stale_view(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start: Any, proxy: FaultProxy
) -> None:
    """Two replicas; the leader reaches the API server through a proxy. It has decided binds that the API server
    refuses (503) and keeps trying them when the proxy turns into a black hole. The standby takes the Lease over
    and binds those pods; the old leader, let back (its binds would now pass), must send no bind or eviction
    after it lost the Lease (the proxy logs every request it passes)."""
    cp = control_plane
    pool, _ = make_pool(2, gpus=8)
    (q,) = make_queues(queue(f"partition-{suffix()}", 0))
    lease = f"kai-fault-part-{suffix()}"
    cut = start("cut-off", proxied=True, lease=lease, lease_duration=4.0, renew_interval=0.5)
    wait_for(lambda: lease_holder(cp, lease) == "cut-off", 20, "the proxied replica to lead")
    standby = start("standby", lease=lease, lease_duration=4.0, renew_interval=0.5)
    expected: list[str] = []

    def wave(name: str, n: int) -> list[Obj]:
        objs = [pod(f"{name}-{i}", pool, q, 1) for i in range(n)]
        expected.extend(_pod_names(objs))
        create_all(cp, namespace, objs)
        return objs

    with BindRecorder(cp, namespace) as recorder:
        wave("before", 4)
        _wait_all_bound(cp, namespace, 4, 60, "the leader's binds")
        # the leader decides on the next wave, but its binds are refused (503) and it keeps trying them ...
        proxy.add(Rule("POST", BINDING, 503, retry_after=1))
        wave("during", 4)
        wait_for(lambda: proxy.rules[0].answered >= 4, 60, "the leader to try binding the wave")
        # ... when it is cut off; once let back, its binds would pass: it must not send them
        proxy.partition()
        cut_at = time.monotonic()
        proxy.clear()
        wait_for(lambda: lease_holder(cp, lease) == "standby", 30, "the standby to take the Lease over")
        took_over = time.monotonic()
        _wait_all_bound(cp, namespace, 8, 60, "the new leader's binds")
        bound_by_new = time.monotonic()
        proxy.heal()
        healed = time.monotonic()
        wait_for(lambda: cut.metric("kai_is_leader") == 0, 60, "the old leader to stand by")
        wave("after", 4)
        _wait_all_bound(cp, namespace, 12, 60, "binds after the partition healed")
        standby.wait_cycles(2, 60)
        inv = check_invariants(cp, namespace, q, [cut, standby], expected=expected, recorder=recorder,
                               grace=GANG_GRACE)
    acts = [e for pattern in (BINDING, EVICTION) for e in proxy.sent("POST", pattern, since=cut_at) if not e.injected]
    assert not acts, f"the cut-off leader acted after it lost the Lease: {acts}"
    assert lease_holder(cp, lease) == "standby"
    record("partitioned-leader", takeover_s=round(took_over - cut_at, 1),
           bound_by_new_leader_s=round(bound_by_new - cut_at, 1), old_leader_stood_by_after_heal_s=round(
               time.monotonic() - healed, 1), stale_acts=len(acts), probe_bound_s=round(inv.probe_bound_after, 1))


# --------------------------------------------------------------------------------------------------
# Nodes that go away under a gang


def test_node_deleted_and_node_not_ready_while_a_gang_binds(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start: Any
) -> None:
    """A gang of 12 pods (minMember 6) spans two of five 8-GPU nodes; binds go out slowly (2/s). The node of its
    first bind is deleted in the middle; later, while a second gang (8 of 8) binds, the node of its first bind goes
    NotReady. kaid sends no more binds to either node once its watch shows the change; the binds it dropped are
    placed again on the nodes left, each gang ends whole, and nothing new goes to the NotReady node. (The pods
    bound to the deleted node before kaid saw it go are lost with it: the pod garbage collector removes them.)
    Five nodes: the late pods fit on the Ready nodes however few binds were lost (with four, the fewer the lost
    pods, the fuller the Ready nodes: with 2 lost the late pods waited until KWOK made the sick node Ready again)."""
    cp = control_plane
    pool, _ = make_pool(5, gpus=8)
    (q,) = make_queues(queue(f"nodes-{suffix()}", 0))
    kaid = start("nodes", overrides={"clientQPS": 2, "clientBurst": 1})

    def gang(name: str) -> list[Obj]:
        return [p for p in pods_of(cp, namespace) if p["metadata"]["name"].startswith(f"{name}-")]

    def first_bound_node(name: str) -> str | None:
        return next((p["spec"]["nodeName"] for p in gang(name) if p["spec"].get("nodeName")), None)

    with BindRecorder(cp, namespace) as recorder:
        create_all(cp, namespace, [podgroup_obj("first", q, 6), *gang_pods("first", pool, q, 12)])
        doomed = wait_for(lambda: first_bound_node("first"), 60, "the first gang's first bind", interval=0.05)
        cp.request("DELETE", f"/api/v1/nodes/{doomed}")
        deleted = time.monotonic()
        wait_for(lambda: all(p["spec"].get("nodeName") for p in gang("first")), 90, "every pod of the first gang bound",
                 interval=0.5)
        first_s = time.monotonic() - deleted
        lost = [p["metadata"]["name"] for p in gang("first") if p["spec"]["nodeName"] == doomed]
        # binds in flight when the node went (2/s, until kaid's watch shows the deletion) reach it; the rest not
        assert f"node {doomed} no longer exists" in kaid.full_log(), "kaid did not drop the binds for the gone node"
        assert len(lost) < 8, f"kaid went on binding to the deleted node: {lost}"
        assert len(gang("first")) - len(lost) >= 6, "the first gang is below its minimum on the nodes left"
        # the second gang: the node of its first bind goes NotReady in the middle
        create_all(cp, namespace, [podgroup_obj("second", q, 8), *gang_pods("second", pool, q, 8)])
        sick = wait_for(lambda: first_bound_node("second"), 60, "the second gang's first bind", interval=0.05)
        cp.request("PATCH", f"/api/v1/nodes/{sick}", {"metadata": {"annotations": {"kai-e2e-not-ready": "true"}}},
                   content_type="application/merge-patch+json")
        node_obj = cp.request("GET", f"/api/v1/nodes/{sick}")
        for cond in node_obj["status"]["conditions"]:
            if cond["type"] == "Ready":
                cond.update(status="False", reason="KubeletNotReady", message="kai e2e: NotReady")
        cp.request("PUT", f"/api/v1/nodes/{sick}/status", node_obj)
        not_ready = time.monotonic()
        wait_for(lambda: all(p["spec"].get("nodeName") for p in gang("second")), GANG_GRACE, "the second gang bound",
                 interval=0.5)
        second_s = time.monotonic() - not_ready
        on_sick = sum(1 for p in gang("second") if p["spec"]["nodeName"] == sick)
        late = [pod(f"late-{i}", pool, q, 1) for i in range(2)]
        create_all(cp, namespace, late)
        wait_for(lambda: all(p["spec"].get("nodeName") for p in gang("late")), 60, "the late pods bound")
        assert all(p["spec"]["nodeName"] != sick for p in gang("late")), "a new pod went to the NotReady node"
        expected = [p["metadata"]["name"] for p in pods_of(cp, namespace) if p["metadata"]["name"] not in lost]
        inv = check_invariants(cp, namespace, q, [kaid], expected=expected, recorder=recorder, grace=GANG_GRACE)
    record("node-deleted", bound_to_it=len(lost), gang_bound_on_nodes_left_s=round(first_s, 1),
           probe_bound_s=round(inv.probe_bound_after, 1))
    record("node-not-ready", gang_pods_bound_to_it=on_sick, gang_bound_s=round(second_s, 1))


# --------------------------------------------------------------------------------------------------
# Malformed objects by the thousand


MALFORMED_BATCHES = 5
MALFORMED_BATCH = {"priority_class": 125, "topology": 125, "queue": 300, "podgroup": 300, "pod": 150}  # 1,000
_COLLECTIONS = {
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "Topology": "/apis/kai.scheduler/v1alpha1/topologies",
    "Queue": "/apis/scheduling.run.ai/v2/queues",
    "PodGroup": "/apis/scheduling.run.ai/v2alpha2/namespaces/{ns}/podgroups",
    "Pod": "/api/v1/namespaces/{ns}/pods",
}


def _apply_malformed(cp: ControlPlane, namespace: str, objs: list[Obj]) -> tuple[list[Obj], dict[str, int]]:
    """Create each object (concurrently, kind by kind in order); returns those the API server took and the count
    it rejected per kind."""

    accepted: list[Obj] = []
    rejected: dict[str, int] = {}

    def one(obj: Obj) -> Obj | None:
        try:
            created: Obj = cp.request("POST", _COLLECTIONS[obj["kind"]].format(ns=namespace), obj)
            return created
        except ApiError as err:
            if err.status not in (400, 422):
                raise
            return None

    with ThreadPoolExecutor(8) as pool:
        for kind in _COLLECTIONS:
            batch = [o for o in objs if o["kind"] == kind]
            for obj, got in zip(batch, pool.map(one, batch), strict=True):
                if got is None:
                    rejected[kind] = rejected.get(kind, 0) + 1
                else:
                    got.setdefault("kind", obj["kind"])
                    accepted.append(got)
    return accepted, rejected


def _evicted_by_kai(cp: ControlPlane, namespace: str) -> set[str]:
    """The pods kaid evicted (its ``Evicted`` events): gone on purpose, not lost."""
    return {e["involvedObject"]["name"] for e in events(cp, namespace, "Evicted")
            if (e.get("source") or {}).get("component") == "kai-scheduler"}


def _has_reason(cp: ControlPlane, namespace: str, accepted: list[Obj], invalid_topologies: set[str]) -> list[str]:
    """The accepted objects that do not show kaid's verdict yet: a pod neither bound nor PodScheduled=False with a
    message; a PodGroup without a scheduling condition; a Queue without its Valid condition; an invalid Topology
    without a Warning event."""
    from .kaid_helpers import PODGROUPS, QUEUES

    missing: list[str] = []
    pods = {p["metadata"]["name"]: p for p in pods_of(cp, namespace)}
    evicted = _evicted_by_kai(cp, namespace)
    groups = {g["metadata"]["name"]: g for g in cp.request("GET", f"{PODGROUPS}/namespaces/{namespace}/podgroups")[
        "items"]}
    queues = {q["metadata"]["name"]: q for q in cp.request("GET", QUEUES)["items"]}
    topo_events = {e["involvedObject"]["name"] for e in cp.request("GET", "/api/v1/namespaces/default/events")["items"]
                   if e["involvedObject"].get("kind") == "Topology" and e.get("type") == "Warning"}
    for obj in accepted:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind == "Pod":
            p = pods.get(name)
            if p is None:
                if name not in evicted:  # a victim of a preemption among them is gone, with its event
                    missing.append(f"Pod {name} is gone")
                continue
            conds = [c for c in (p.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
            if not p["spec"].get("nodeName") and not any(c.get("status") == "False" and c.get("message")
                                                         for c in conds):
                missing.append(f"Pod {name}")
        elif kind == "PodGroup":
            conds = ((groups.get(name) or {}).get("status") or {}).get("schedulingConditions") or []
            if not conds:
                missing.append(f"PodGroup {name}")
        elif kind == "Queue":
            conds = ((queues.get(name) or {}).get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Valid" for c in conds):
                missing.append(f"Queue {name}")
        elif kind == "Topology" and name in invalid_topologies and name not in topo_events:
            missing.append(f"Topology {name}")
    return missing


def test_malformed_objects_while_scheduling(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start: Any
) -> None:
    """5,000 objects generated with hypothesis (PriorityClasses, Topologies, Queues, PodGroups, pods with bad
    annotations and labels), applied in five batches while kaid schedules a well-formed workload on nodes of its
    own. What the API server's validation takes, kaid reads: each gets its verdict (a reason on its status, a
    condition, or an event), the well-formed pods are all bound, and kaid's memory stays bounded."""
    from kaid.model.objects import ObjectProblem
    from kaid.model.policy import read_topologies

    from .malformed import MALFORMED_LABEL, Generator

    cp = control_plane
    bad_pool, _ = make_pool(2, gpus=8)
    good_pool, _ = make_pool(2, gpus=8)
    (q,) = make_queues(queue(f"good-{suffix()}", 0))
    run = suffix()
    gen = Generator(run, bad_pool, q)
    kaid = start("malformed")
    assert kaid.process is not None
    good: list[str] = []
    accepted: list[Obj] = []
    rejected: dict[str, int] = {}
    rss = [rss_kib(kaid.process.pid)]
    began = time.monotonic()
    try:
        with BindRecorder(cp, namespace) as recorder, ThreadPoolExecutor(1) as drawing:
            upcoming = drawing.submit(gen.batch, MALFORMED_BATCH, 0)
            for i in range(MALFORMED_BATCHES):
                objs = upcoming.result()
                if i + 1 < MALFORMED_BATCHES:  # drawn while this batch is applied
                    upcoming = drawing.submit(gen.batch, MALFORMED_BATCH, i + 1)
                wave = [pod(f"good-{i}-{j}", good_pool, q, 1) for j in range(3)]
                good.extend(_pod_names(wave))
                create_all(cp, namespace, wave)
                got, bad = _apply_malformed(cp, namespace, objs)
                accepted.extend(got)
                for k, n in bad.items():
                    rejected[k] = rejected.get(k, 0) + n
                rss.append(rss_kib(kaid.process.pid))
            applied = time.monotonic()
            wait_for(lambda: all(p["spec"].get("nodeName") for p in pods_of(cp, namespace)
                                 if p["metadata"]["name"] in set(good)), 300, "the well-formed pods bound", interval=1)
            problems: list[ObjectProblem] = []
            read_topologies([o for o in accepted if o["kind"] == "Topology"], problems)
            invalid_topologies = {p.name for p in problems}
            left: list[str] = []

            def verdicts() -> bool:
                nonlocal left
                left = _has_reason(cp, namespace, accepted, invalid_topologies)
                return not left

            try:
                wait_for(verdicts, 420, "a verdict on every accepted object", interval=3)
            except AssertionError:
                raise AssertionError(f"{len(left)} objects without kaid's verdict, e.g. {left[:10]}") from None
            settled = time.monotonic()
            rss.append(rss_kib(kaid.process.pid))
            kaid.wait_cycles(3, 300)  # nothing new comes: kaid's memory must stay where it is
            rss.append(rss_kib(kaid.process.pid))
            evicted = _evicted_by_kai(cp, namespace)
            expected = good + [o["metadata"]["name"] for o in accepted if o["kind"] == "Pod"
                               and o["metadata"]["name"] not in evicted]
            inv = check_invariants(cp, namespace, q, [kaid], expected=expected, recorder=recorder, grace=GANG_GRACE)
    finally:
        cp.kubectl("delete", "queues.scheduling.run.ai,topologies.kai.scheduler,priorityclasses.scheduling.k8s.io",
                   "-l", f"{MALFORMED_LABEL}={run}", "--wait=false", check=False, timeout=300)
    kinds = {k: sum(1 for o in accepted if o["kind"] == k) for k in _COLLECTIONS}
    growth = rss[-2] - rss[1]
    idle_growth = rss[-1] - rss[-2]
    record("malformed-objects", generated=MALFORMED_BATCHES * sum(MALFORMED_BATCH.values()), accepted=kinds,
           rejected=rejected, invalid_topologies=len(invalid_topologies), rss_kib=rss,
           verdicts_after_last_batch_s=round(settled - applied, 1), whole_run_s=round(settled - began, 1),
           rss_growth_over_batches_mib=round(growth / 1024), rss_growth_idle_mib=round(idle_growth / 1024),
           probe_bound_s=round(inv.probe_bound_after, 1))
    # bounded: what kaid holds grows with the objects it caches (about 5,000 here, and the PodGroups it makes for
    # them), then stays where it is while nothing new comes
    assert growth < 400 * 1024, f"kaid's RSS grew by {growth / 1024:.0f} MiB over the batches: {rss}"
    assert idle_growth < max(32 * 1024, rss[-2] // 10), f"kaid's RSS grew by {idle_growth / 1024:.0f} MiB in 3 " \
        f"cycles without new objects: {rss}"


def test_objects_no_node_can_hold_harm_nothing(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start: Any
) -> None:
    """Objects the API server takes whose amounts no node can hold: a pod bound by hand (its nodeName set) asking
    for 100,000,000 GPUs, a pending pod asking as much, a node reporting 10^9 GPUs. Before, the bound pod's
    devices were read one by one: the snapshot build never ended and nothing was scheduled any more; a node of 10^9
    GPUs ran kaid out of memory. Now kaid keeps binding, the pending pod is told why it waits, and the node gets a
    Warning event ``Invalid`` (in namespace ``default``) and no GPU pod."""
    cp = control_plane
    pool, nodes = make_pool(2, gpus=8)
    bad_node = cp.add_gpu_nodes(1, gpus=10**9, name_prefix=f"kaid-{pool}-huge", labels={POOL_LABEL: pool},
                                wait=True)[0]
    try:
        q, other = make_queues(queue(f"sane-{suffix()}", 0), queue(f"huge-{suffix()}", 0))
        kaid = start("impossible")
        by_hand = pod("by-hand", pool, other, 100_000_000)
        by_hand["spec"]["nodeName"] = nodes[0]
        create_all(cp, namespace, [by_hand, pod("asks-too-much", pool, other, 100_000_000)])
        kaid.wait_cycles(2, 60)
        good = [pod(f"good-{i}", pool, q, 1) for i in range(4)]
        create_all(cp, namespace, good)
        wait_for(lambda: all(p["spec"].get("nodeName") for p in pods_of(cp, namespace)
                             if p["metadata"]["name"].startswith("good-")), 60, "the well-formed pods bound",
                 interval=0.5)
        # nodes[0] is over-committed by the pod bound by hand, the bad node has no GPU kai reads: nodes[1] takes them
        assert {p["spec"]["nodeName"] for p in pods_of(cp, namespace) if p["metadata"]["name"].startswith("good-")} \
            == {nodes[1]}

        def told(name: str) -> str:
            obj = next(p for p in pods_of(cp, namespace) if p["metadata"]["name"] == name)
            cond = pod_condition(obj, "PodScheduled") or {}
            return str(cond.get("message") or "") if cond.get("status") == "False" else ""

        wait_for(lambda: "requests 100000000 GPUs" in told("asks-too-much"), 60, "the pending pod told why",
                 interval=0.5)

        def node_warned() -> bool:
            return any(e["involvedObject"].get("name") == bad_node and "reports 1000000000 GPUs" in e["message"]
                       for e in events(cp, "default", "Invalid"))

        wait_for(node_warned, 60, "a Warning event on the node of 10^9 GPUs", interval=0.5)
        assert "cycle failed" not in kaid.full_log()
    finally:
        cp.request("DELETE", f"/api/v1/nodes/{bad_node}")
