"""A pod pipelined in this cycle is a victim an eviction can take (KAI's Pipelined tasks are active allocated:
``pod_status.go``, ``podgroup_info/eviction_info.go``), at no progress lost; evicting it takes back only its
pipelining: a pod that was pending has neither a pipeline nor an eviction in the decisions, a moved pod keeps the
eviction from where it ran. A pod pipelined in an earlier cycle (its object carries the mark) is not taken."""

from __future__ import annotations

from typing import Any

from kaid.actions import victims
from kaid.api import constants as c
from tests.objects import node, pod, podgroup, queue
from tests.sessions import NOW, pod_named, session_of


def _objs() -> list[dict[str, Any]]:
    return [queue("org"), queue("a", "org"), node("n0", gpus=4), node("n1", gpus=4),
            podgroup("r", "a", 1), pod("r-0", gpus=1, group="r", node_name="n0", phase="Running"),
            podgroup("w", "a", 1), pod("w-0", gpus=1, group="w")]


def test_a_pod_pipelined_from_pending_and_evicted_leaves_no_decision() -> None:
    session = session_of(_objs())
    w, n1 = pod_named(session, "w-0"), session.snap.node_by_name["n1"]
    assert not victims.takes(w) and victims.running(w.job) == []  # type: ignore[arg-type]
    session.pipeline(w, n1, (0,), "reclaim", None)
    assert victims.takes(w) and victims.running(w.job) == [w]  # type: ignore[arg-type]
    unit = victims.units_of(w.job, session.snap.queues["a"], NOW, 0.0)[0]  # type: ignore[arg-type]
    assert [u.pods for u in unit] == [[w]] and unit[0].lost == 0.0  # no progress made
    session.evict(w, "reclaim", None, "")
    assert session.placements() == [] and session.evictions() == []
    assert session.placed_this_cycle(w)  # not placed again in this cycle
    assert session.restore(w) and (str(w.status), w.node) == ("Pipelined", "n1")  # its place was free
    assert not session.restore(w)  # once back, nothing more to put back (``scenario._restore`` loops until none)
    assert [op.kind for op in session.placements()] == ["pipeline"]


def test_a_moved_pod_evicted_again_keeps_its_first_eviction() -> None:
    session = session_of(_objs())
    r, n1 = pod_named(session, "r-0"), session.snap.node_by_name["n1"]
    session.evict(r, "consolidate", None, "moved")
    session.pipeline(r, n1, (0,), "consolidate", None)
    assert victims.takes(r)
    session.evict(r, "reclaim", None, "taken")
    assert session.placements() == []
    assert [(op.node.name, op.message) for op in session.evictions()] == [("n0", "moved")]
    assert session.evictions(since=2) == []  # no new eviction after the move


def test_a_pod_pipelined_before_this_cycle_is_not_taken() -> None:
    objs = _objs()
    objs[-1]["metadata"]["annotations"][c.PIPELINED_NODE_ANNOTATION] = "n1"
    objs[-1]["metadata"]["annotations"][c.PIPELINED_ACTION_ANNOTATION] = "reclaim"
    session = session_of(objs)
    w = pod_named(session, "w-0")
    assert w.status == "Pipelined" and victims.persisted(w)
    assert not victims.takes(w) and victims.running(w.job) == []  # type: ignore[arg-type]
