"""A pod evicted in a session and pipelined back onto the node it was evicted from is put back, not moved (KAI's
``Statement.Pipeline`` unevicts a pod still on the node it is pipelined to, statement.go at d5bc503a: whole GPUs have
no device identity there). A whole-GPU pod may come back on other devices of its node: the put-back carries them,
so a rollback and a redo give the same state. A shared-GPU pod on another device, a pod of another node, and a pod
that this cycle placed are pipelined (moved) as before."""

from __future__ import annotations

from typing import Any

from kaid.actions.session import Session
from kaid.model.vocabulary import OpKind, PodStatus
from tests.objects import node, pod, podgroup, queue
from tests.sessions import pod_named, session_of


def _state(session: Session) -> object:
    return ([(n.name, n.idle, list(n.dev_used)) for n in session.snap.nodes],
            sorted((q.name, list(q.allocated)) for q in session.snap.queues.values()),
            sorted((p.key, str(p.status), p.node, p.devices) for p in session.snap.pods))


def _objs(**extra: Any) -> list[dict[str, Any]]:
    return [queue("org"), queue("a", "org"), node("n0", gpus=4), node("n1", gpus=4), podgroup("g", "a", 1),
            pod("g-0", gpus=1, group="g", node_name="n0", phase="Running",
                annotations={"kai.scheduler/gpu-devices": "0"}, **extra)]


def test_a_whole_gpu_pod_pipelined_onto_other_devices_of_its_node_is_put_back() -> None:
    session = session_of(_objs())
    p, n0 = pod_named(session, "g-0"), session.snap.node_by_name["n0"]
    assert p.devices == (0,)
    start = _state(session)
    session.evict(p, "consolidate", None, "")
    evicted = _state(session)
    mark = session.checkpoint()
    session.pipeline_all(p.job, [(p, n0, (3,))], "consolidate", None)  # type: ignore[arg-type]
    assert (str(p.status), p.node, p.devices) == (str(PodStatus.RUNNING), "n0", (3,))
    assert n0.dev_used == [0, 0, 0, 1000] and n0.idle == 3
    assert [op.kind for op in session.ops[mark:]] == [OpKind.RESTORE]
    assert session.evictions() == [] and session.placements() == []  # neither evicted nor moved
    back = _state(session)
    done = session.undo(mark)
    assert _state(session) == evicted
    session.redo(done)  # onto the devices it was put back on
    assert _state(session) == back
    session.rollback(0)
    assert _state(session) == start


def test_a_pod_pipelined_onto_another_node_moves() -> None:
    session = session_of(_objs())
    p, n1 = pod_named(session, "g-0"), session.snap.node_by_name["n1"]
    session.evict(p, "consolidate", None, "")
    session.pipeline_all(p.job, [(p, n1, (0,))], "consolidate", None)  # type: ignore[arg-type]
    assert (str(p.status), p.node) == (str(PodStatus.PIPELINED), "n1")
    assert [op.pod.name for op in session.evictions()] == ["g-0"]


def test_a_shared_gpu_pod_on_another_device_of_its_node_moves() -> None:
    session = session_of([
        queue("org"), queue("a", "org"), node("n0", gpus=4), podgroup("g", "a", 1),
        pod("g-0", group="g", node_name="n0", phase="Running", annotations={"gpu-fraction": "0.5"})])
    p, n0 = pod_named(session, "g-0"), session.snap.node_by_name["n0"]
    home = p.devices
    other = (1,) if home != (1,) else (2,)
    session.evict(p, "consolidate", None, "")
    session.pipeline_all(p.job, [(p, n0, other)], "consolidate", None)  # type: ignore[arg-type]
    assert (str(p.status), p.devices) == (str(PodStatus.PIPELINED), other)
    session.rollback(0)
    session.evict(p, "consolidate", None, "")
    session.pipeline_all(p.job, [(p, n0, home)], "consolidate", None)  # type: ignore[arg-type]
    assert (str(p.status), p.devices) == (str(PodStatus.RUNNING), home)  # the same device: put back


def test_a_pod_placed_this_cycle_is_pipelined_back() -> None:
    objs = [queue("org"), queue("a", "org"), node("n0", gpus=4), podgroup("g", "a", 1), pod("g-0", gpus=1, group="g")]
    session = session_of(objs)
    p, n0 = pod_named(session, "g-0"), session.snap.node_by_name["n0"]
    session.allocate(p, n0, (0,))
    session.evict(p, "reclaim", None, "")
    session.pipeline_all(p.job, [(p, n0, (1,))], "reclaim", None)  # type: ignore[arg-type]
    assert (str(p.status), p.devices) == (str(PodStatus.PIPELINED), (1,))
