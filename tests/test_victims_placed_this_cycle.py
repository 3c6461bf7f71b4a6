"""A pod allocate placed earlier in a cycle may be a victim later in it (KAI's victims are its active allocated tasks,
``EVICTABLE``): what the session then decides for it. Its bind stands with its eviction (the daemon sent the bind at
allocate's commit, KAI calls Bind and then Evict); put back in its place by a scenario that did not need it, it keeps
its bind; a victim job with such a pod is not moved in that cycle (``scenario._take_back``)."""

from __future__ import annotations

from kaid.actions.session import Session
from kaid.actions.victims import running, units_of
from kaid.api.config import SchedulerConfig
from kaid.model.build import build_snapshot
from kaid.model.objects import Pod
from kaid.model.vocabulary import OpKind, PodStatus
from kaid.placement.index import NodeIndex
from tests.objects import node, pod, podgroup, queue

NOW = 1767225600.0


def _session() -> tuple[Session, Pod]:
    objs = [node("n0", gpus=2), queue("q"), podgroup("g", "q", priority_class="train"), pod("g-0", gpus=1, group="g")]
    cfg = SchedulerConfig()
    snap = build_snapshot(objs, cfg, NOW)
    session = Session(snap, NodeIndex(snap.nodes), cfg)
    p = snap.pods[0]
    choice = session.index.best_node(p, False)
    assert choice is not None
    session.allocate(p, *choice)
    return session, p


def test_a_pod_placed_this_cycle_is_a_victim_with_no_progress_lost() -> None:
    session, p = _session()
    assert p.status == PodStatus.ALLOCATED
    assert p.job is not None and running(p.job) == [p]
    units, protected = units_of(p.job, session.snap.queues["q"], NOW + 3600, 0.0)
    assert [u.pods for u in units] == [[p]] and units[0].lost == 0.0 and not protected


def test_placed_then_evicted_keeps_its_bind_and_its_eviction() -> None:
    session, p = _session()
    session.evict(p, "preempt", "default/other", "")
    assert session.placed_this_cycle(p)
    assert [op.kind for op in session.placements()] == [OpKind.ALLOCATE]
    assert [op.pod for op in session.evictions()] == [p]


def test_placed_evicted_and_put_back_keeps_its_bind_only() -> None:
    session, p = _session()
    session.evict(p, "preempt", "default/other", "")
    assert session.restore(p)
    assert p.status == PodStatus.ALLOCATED
    assert [op.kind for op in session.placements()] == [OpKind.ALLOCATE]
    assert session.evictions() == []
