"""The early first cycle's view of the cluster (``WatchCache.early_view``) and the hold on the pod list: what
a starting kaid may schedule while its pod list still arrives. The cache is filled by hand here (it is never
started, so no request is made); tests/e2e/test_kaid.py runs the whole thing on the real API server."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.kube import startup as cache_mod
from kaid.kube.client import KubeClient
from kaid.kube.startup import StartingCache as WatchCache
from kaid.model.build import build_snapshot
from tests.objects import node, pod, queue

Obj = dict[str, Any]
NOW = 1767225600.0


def _cache() -> WatchCache:
    return WatchCache(KubeClient("https://127.0.0.1:9"), early=True)  # never started: no request is made


def _others_listed(cache: WatchCache, objects: list[Obj]) -> None:
    for inf in cache.informers:
        if inf is not cache.pods:
            inf.items = {f"{o['metadata'].get('namespace') or ''}/{o['metadata']['name']}": o
                         for o in objects if o["kind"] == inf.res.kind}
            inf.synced.set()


def _arrive(cache: WatchCache, *pods: Obj) -> None:
    assert cache.pods is not None
    cache.pods.arrived.extend(pods)


def _names(objects: list[Obj], kind: str = "Pod") -> list[str]:
    return [o["metadata"]["name"] for o in objects if o["kind"] == kind]


CLUSTER = [node("a"), node("b"), queue("q")]


def test_nothing_until_every_other_kind_the_pods_on_nodes_and_enough_pending_pods_are_in() -> None:
    cache = _cache()
    assert cache.pods is not None
    pending = [pod(f"p{i}", gpus=1, queue="q") for i in range(4)]
    _arrive(cache, *pending[:3])
    _others_listed(cache, CLUSTER)
    assert cache.early_view("kai-scheduler", 4) is None, "the pods on nodes are not listed yet"
    cache.on_nodes = []
    assert cache.early_view("kai-scheduler", 4) is None, "3 pending pods of the 4 wanted"
    cache.informers[1].synced.clear()
    _arrive(cache, pending[3])
    assert cache.early_view("kai-scheduler", 4) is None, f"{cache.informers[1].res.kind} is not listed yet"
    cache.informers[1].synced.set()
    view = cache.early_view("kai-scheduler", 4)
    assert view is not None
    assert (view.pending, view.on_nodes, view.arrived) == (4, 0, 4)
    assert _names(view.objects) == ["p0", "p1", "p2", "p3"]
    assert sorted(_names(view.objects, "Node")) == ["a", "b"] and _names(view.objects, "Queue") == ["q"]
    cache.pods.synced.set()
    assert cache.early_view("kai-scheduler", 4) is None, "once the pods are listed, the cache itself is the view"


def test_a_held_list_is_enough_with_fewer_pending_pods_than_wanted() -> None:
    cache = _cache()
    _others_listed(cache, CLUSTER)
    cache.on_nodes = []
    _arrive(cache, pod("p0", gpus=1), pod("other", gpus=1, scheduler="default-scheduler"))
    assert cache.early_view("kai-scheduler", 8) is None
    cache.held.set()
    view = cache.early_view("kai-scheduler", 8)
    assert view is not None and _names(view.objects) == ["p0"], "only this scheduler's pending pods are taken"


def test_the_pods_on_nodes_come_from_their_own_list_and_later_binds_are_kept() -> None:
    cache = _cache()
    _others_listed(cache, CLUSTER)
    hog = pod("hog", gpus=6, node_name="a", phase="Running", scheduler="default-scheduler")
    bound_since = pod("x", gpus=1, node_name="b", phase="Running")  # bound after the pods-on-nodes list
    stale = pod("y", gpus=1)  # the big list still shows it pending; the pods-on-nodes list shows it bound
    deleting = pod("d", gpus=1)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    done = pod("f", gpus=1, phase="Failed")
    _arrive(cache, stale, bound_since, deleting, done, *[pod(f"p{i}", gpus=1) for i in range(5)])
    cache.on_nodes = [hog, pod("y", gpus=1, node_name="b", phase="Running")]
    view = cache.early_view("kai-scheduler", 3)
    assert view is not None
    pods = {o["metadata"]["name"]: o for o in view.objects if o["kind"] == "Pod"}
    assert sorted(pods) == ["hog", "p0", "p1", "p2", "x", "y"]
    assert pods["y"]["spec"]["nodeName"] == "b", "the pods-on-nodes list wins over the pending copy"
    assert (view.on_nodes, view.pending) == (3, 3)


def _placed(objects: list[Obj]) -> dict[str, str]:
    cfg = SchedulerConfig(actions=("allocate",))
    decisions = run_cycle(build_snapshot(objects, cfg, NOW, wait_for_owners=True), cfg)
    return {b.pod.split("/")[1]: b.node for b in decisions.binds}


def test_an_early_cycle_places_nothing_where_a_pod_not_yet_listed_runs() -> None:
    """Node a runs a 6-GPU pod that comes last in the big list: only the separate list shows it."""
    cache = _cache()
    _others_listed(cache, CLUSTER)
    pending = [pod(f"p{i}", gpus=4, queue="q") for i in range(3)]
    _arrive(cache, *pending)
    cache.on_nodes = [pod("zz-hog", gpus=6, node_name="a", phase="Running", scheduler="default-scheduler")]
    view = cache.early_view("kai-scheduler", 3)
    assert view is not None
    placed = _placed(view.objects)
    assert placed and set(placed.values()) == {"b"}, f"node a has 2 GPUs free, not 4: {placed}"
    assert len(placed) == 2
    # the same pods on what the big list alone had shown by then: node a looks empty and is handed out
    naive = _placed([*CLUSTER, *pending])
    assert "a" in naive.values(), naive


def test_the_pod_list_is_held_after_enough_pods_without_a_node_until_released(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_mod, "HOLD_PODS_AFTER", 3)
    monkeypatch.setattr(cache_mod, "HOLD_LIMIT", 30.0)
    cache = _cache()
    seen: list[str] = []

    def list_thread() -> None:  # as the pod list's thread hands each arriving pod over
        for p in [pod("on-a", node_name="a"), pod("p0"), pod("p1"), pod("on-b", node_name="b"), pod("p2"),
                  pod("p3")]:
            assert cache.pods is not None and cache.pods.arrival is not None
            cache.pods.arrival(p)
            seen.append(p["metadata"]["name"])

    t = threading.Thread(target=list_thread, daemon=True)
    t.start()
    assert cache.held.wait(10)
    t.join(0.2)
    assert t.is_alive() and seen == ["on-a", "p0", "p1", "on-b"], "held at the third pod without a node"
    cache.release_pods()
    t.join(10)
    assert not t.is_alive() and seen[-2:] == ["p2", "p3"]


def test_a_held_list_goes_on_by_itself_and_a_plain_cache_never_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_mod, "HOLD_PODS_AFTER", 1)
    monkeypatch.setattr(cache_mod, "HOLD_LIMIT", 0.05)
    cache = _cache()
    assert cache.pods is not None and cache.pods.arrival is not None
    cache.pods.arrival(pod("p0"))  # returns after HOLD_LIMIT, nobody having released it
    assert cache.held.is_set() and cache.released.is_set()
    plain = WatchCache(KubeClient("https://127.0.0.1:9"))
    assert plain.pods is not None and plain.pods.arrival is None and plain.released.is_set()
