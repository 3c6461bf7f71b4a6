"""The session's undo and put-back (``Session.rollback``, ``Session.restore``, ``NodeIndex.fits_exactly``) against
their plain readings, kept here: a moved pod whose old place is on another node is answered without releasing and
taking again its new place, ``fits_exactly`` reads the pod slot, cpu and memory without ``resource_failure``'s GPU
checks (it looks at the given devices itself), rollback reads each operation's kind once and charges each job's
operations at once, and ``pipeline_all`` and ``evict_all`` charge a job's pods at once. Twin sessions on the same
objects take the same random operations, one through the session, one through the plain readings: every answer and
every piece of state (nodes, the index's buckets, queues, pods) stays the same, the queues whose versions a
rollback, a job's pipelining or a unit's eviction moves are the ones the plain readings' moves, and a rollback to
the start gives the state the session began with. And the eviction actions decide the same with the plain readings
patched in."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.actions import scenario
from kaid.actions.session import Op, Session
from kaid.api.config import Action
from kaid.model.objects import Job, Node, Pod
from kaid.model.vocabulary import OpKind, PodStatus
from kaid.placement.index import Devices, NodeIndex
from kaid.placement.predicates import resource_failure
from tests.equivalence import assert_same_decisions
from tests.objects import node, pod, podgroup, queue
from tests.sessions import session_of
from tests.test_eviction_properties import SETTINGS, Case, cases, decisions_over


# ------------------------------------------------------------------------------------------ the plain readings
def plain_fits_exactly(self: NodeIndex, node: Node, pod: Pod, devices: Devices) -> bool:
    if resource_failure(node, pod) in ("TooManyPods", "InsufficientCPU", "InsufficientMemory"):
        return False
    # a node holding GPUs beyond its devices (over-committed input) has fewer idle GPUs than free devices: each device
    # taken fresh must be one (KAI's NodeInfo idle count, dbed6b7)
    kai_idle = node.idle - sum(1 for d in range(node.gpus, len(node.dev_used)) if node.dev_used[d] > 0)
    if pod.gpu_whole:
        return len(devices) == pod.gpu_whole and all(node.dev_used[d] == 0 for d in devices) and \
            kai_idle >= pod.gpu_whole
    if pod.frac_devices:
        share = pod.gpu_milli_on(node) // pod.frac_devices
        return all(node.dev_used[d] + share <= 1000 for d in devices) and \
            kai_idle >= sum(1 for d in devices if node.dev_used[d] == 0)
    return True


def plain_restore(self: Session, pod: Pod, devices: Devices | None = None) -> bool:
    stack = self._evicts.get(id(pod))
    evicted = stack[-1] if stack else None
    if evicted is None or pod.status not in (PodStatus.EVICTED, PodStatus.PIPELINED):
        return False
    if pod.status == evicted.prev_status == PodStatus.PIPELINED and pod.node == evicted.prev_node:
        return False  # a pipelined victim back on the node it was pipelined to
    devices = evicted.devices if devices is None else devices
    placed = self.snap.node_by_name.get(pod.node or "") if pod.status == PodStatus.PIPELINED else None
    if placed is not None:
        self.index.release(placed, pod, pod.devices, planning=True)
    if not plain_fits_exactly(self.index, evicted.node, pod, devices):
        if placed is not None:
            self.index.assign(placed, pod, pod.devices)
        return False
    if placed is not None:
        self._charge(pod, placed, -1)
    op = Op(OpKind.RESTORE, pod, evicted.node, devices, evicted.action, by=evicted.by,
            prev_status=pod.status, prev_node=pod.node, prev_devices=pod.devices)
    self.index.assign(evicted.node, pod, devices)
    self._charge(pod, evicted.node, +1)
    pod.status, pod.node, pod.devices = evicted.prev_status, evicted.prev_node, devices
    self.ops.append(op)
    return True


def plain_home(self: Session, pod: Pod, node: Node, devices: Devices) -> bool:
    """An evicted pod pipelined back onto the node of its latest eviction (a shared-GPU pod: onto the same devices),
    that was not placed by this cycle: KAI's statement unevicts it."""
    evicts = [op for op in self.ops if op.kind == OpKind.EVICT and op.pod is pod]
    if pod.status != PodStatus.EVICTED or not evicts:
        return False
    last = evicts[-1]
    return last.node is node and last.prev_status not in (PodStatus.ALLOCATED, PodStatus.PIPELINED) and (
        not pod.frac_devices or devices == last.devices)


def plain_rollback(self: Session, checkpoint: int) -> None:
    while len(self.ops) > checkpoint:
        op = self.ops.pop()
        if op.kind in (OpKind.ALLOCATE, OpKind.PIPELINE, OpKind.RESTORE):
            self.index.release(op.node, op.pod, op.devices, planning=True)
            self._charge(op.pod, op.node, -1)
        if op.kind == OpKind.RESTORE and op.prev_status == PodStatus.PIPELINED:
            placed = self.snap.node_by_name[op.prev_node or ""]
            self.index.assign(placed, op.pod, op.prev_devices)
            self._charge(op.pod, placed, +1)
        elif op.kind == OpKind.EVICT:
            self.index.assign(op.node, op.pod, op.devices)
            self._charge(op.pod, op.node, +1)
            self._evicts[id(op.pod)].pop()
        op.pod.status, op.pod.node, op.pod.devices = op.prev_status, op.prev_node, op.prev_devices


def plain_away_from_rest(session: Session, att: scenario.Attempt) -> bytearray | None:
    batch = att.batch if att.tasks is None else att.tasks
    rest = [p for p in att.job.pods if p.status == PodStatus.PENDING and p not in batch]
    if not rest or att.action == Action.CONSOLIDATE:
        return None
    index = session.index
    masks = [index.static_mask(p) for p in {p.sig: p for p in rest}.values()]
    return bytearray(0 if any(m[i] for m in masks) else 1 for i in range(len(index.nodes)))


def plain_pipeline_all(self: Session, job: Job, placements: list[tuple[Pod, Node, Devices]], action: str,
                       by: str | None) -> None:
    for p, n, devices in placements:
        if not (plain_home(self, p, n, devices) and plain_restore(self, p, devices)):
            self.pipeline(p, n, devices, action, by)


def plain_evict_all(self: Session, job: Job, pods: list[Pod], action: str, by: str | None, message: str) -> None:
    for p in pods:
        self.evict(p, action, by, message)


PLAIN = [(Session, "restore", plain_restore), (Session, "rollback", plain_rollback),
         (Session, "pipeline_all", plain_pipeline_all), (Session, "evict_all", plain_evict_all),
         (NodeIndex, "fits_exactly", plain_fits_exactly),
         (scenario, "_away_from_rest", plain_away_from_rest)]


@SETTINGS
@given(case=cases())
def test_eviction_actions_decide_as_with_the_plain_undo(case: Case) -> None:
    assert_same_decisions(lambda: decisions_over(case, 4), [], PLAIN)


# ------------------------------------------------------------------------------------------ twin sessions
@st.composite
def objects(draw: st.DrawFn) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [queue("org"), queue("a", "org"), queue("b", "org")]
    nodes = draw(st.integers(1, 4))
    for i in range(nodes):
        objs.append(node(f"n{i}", gpus=draw(st.sampled_from([2, 4, 8])), cpu=draw(st.sampled_from(["4", "8", "64"])),
                         labels={"pool": "ab"[i % 2]}))
    for j in range(draw(st.integers(1, 6))):
        size, gpus = draw(st.integers(1, 3)), draw(st.sampled_from([0, 0, 1, 2]))
        cpu = draw(st.sampled_from(["1", "3"]))
        where = draw(st.one_of(st.none(), st.integers(0, nodes - 1)))  # running on one node, or pending
        objs.append(podgroup(f"g{j}", draw(st.sampled_from("ab")), 1))
        for k in range(size):
            objs.append(pod(f"g{j}-{k}", gpus=gpus, cpu=cpu, group=f"g{j}",
                            node_name=None if where is None else f"n{where}",
                            phase=None if where is None else "Running"))
    return objs


def _state(session: Session) -> object:
    snap, index = session.snap, session.index
    return ([(n.name, n.used_cpu, n.used_mem, n.used_pods, n.idle, list(n.dev_used), list(n.dev_group))
             for n in snap.nodes], [list(b) for b in index.buckets], sorted(index.shared),
            sorted((q.name, list(q.allocated), list(q.alloc_np)) for q in snap.queues.values()),
            sorted((p.key, str(p.status), p.node, p.devices) for p in snap.pods),
            [(str(op.kind), op.pod.key, op.node.name, op.devices, str(op.prev_status), op.prev_node, op.prev_devices)
             for op in session.ops])


def _versions(session: Session) -> dict[str, int]:
    return {name: q.version for name, q in session.snap.queues.items()}


def _moved(before: dict[str, int], session: Session) -> list[str]:
    """The queues whose version moved since ``before``; it never goes back."""
    now = _versions(session)
    assert all(now[name] >= v for name, v in before.items())
    return sorted(name for name, v in before.items() if now[name] != v)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_twin_sessions_answer_and_stand_alike(data: st.DataObject) -> None:
    objs = data.draw(objects())
    fast, plain = session_of(objs), session_of(objs)
    start = _state(fast)
    assert _state(plain) == start
    marks = [0]
    for _ in range(data.draw(st.integers(1, 25))):
        what = data.draw(st.sampled_from(["evict", "unit", "place", "gang", "restore", "restore", "mark",
                                          "rollback"]))
        pods = sorted(fast.snap.pods, key=lambda p: p.key)
        twin = {p.key: p for p in plain.snap.pods}
        if what == "evict":
            running = [p for p in pods if p.node and p.status in (PodStatus.RUNNING, PodStatus.BOUND,
                                                                  PodStatus.PIPELINED, PodStatus.ALLOCATED)]
            if running:
                p = data.draw(st.sampled_from(running))
                fast.evict(p, "reclaim", None, "")
                plain.evict(twin[p.key], "reclaim", None, "")
        elif what == "unit":  # some of a job's running pods, evicted one by one in the plain session, at once in the
            # other (``evict_all``)
            jobs = sorted({p.job.key for p in pods if p.job is not None and p.node and p.status in (
                PodStatus.RUNNING, PodStatus.BOUND, PodStatus.PIPELINED, PodStatus.ALLOCATED)})
            if jobs:
                job = plain.snap.jobs[data.draw(st.sampled_from(jobs))]
                names = [p.key for p in sorted(job.pods, key=lambda p: p.key) if p.node and p.status in (
                    PodStatus.RUNNING, PodStatus.BOUND, PodStatus.PIPELINED, PodStatus.ALLOCATED)]
                chosen = data.draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
                versions = _versions(fast), _versions(plain)
                for k in chosen:
                    plain.evict(twin[k], "reclaim", job.key, "unit")
                mine = {p.key: p for p in fast.snap.pods}
                fast.evict_all(fast.snap.jobs[job.key], [mine[k] for k in chosen], "reclaim", job.key, "unit")
                assert _moved(versions[0], fast) == _moved(versions[1], plain)
        elif what == "place":
            waiting = [p for p in pods if p.status in (PodStatus.PENDING, PodStatus.EVICTED)]
            if waiting:
                p = data.draw(st.sampled_from(waiting))
                choice = fast.index.best_node(p, data.draw(st.booleans()))
                if choice is not None:
                    n, devs = choice
                    fast.pipeline(p, n, devs, "reclaim", None)
                    plain.pipeline(twin[p.key], plain.snap.node_by_name[n.name], devs, "reclaim", None)
        elif what == "gang":  # a job's waiting pods, as many as fit one after another: pipelined pod by pod in the
            # plain session, at once in the other (``pipeline_all``), with the same nodes and devices
            jobs = sorted({p.job.key for p in pods if p.job is not None and
                           p.status in (PodStatus.PENDING, PodStatus.EVICTED)})
            if jobs:
                job = plain.snap.jobs[data.draw(st.sampled_from(jobs))]
                versions = _versions(fast), _versions(plain)
                placed = []
                for p in sorted(job.pods, key=lambda p: p.key):
                    choice = plain.index.best_node(p, False) if p.status in (PodStatus.PENDING,
                                                                             PodStatus.EVICTED) else None
                    if choice is not None:
                        plain_pipeline_all(plain, job, [(p, choice[0], choice[1])], "reclaim", job.key)
                        placed.append((p.key, choice[0].name, choice[1]))
                mine = {p.key: p for p in fast.snap.pods}
                fast.pipeline_all(fast.snap.jobs[job.key], [(mine[k], fast.snap.node_by_name[n], devs)
                                                            for k, n, devs in placed], "reclaim", job.key)
                assert _moved(versions[0], fast) == _moved(versions[1], plain)
        elif what == "restore":
            p = data.draw(st.sampled_from(pods))
            versions = _versions(fast), _versions(plain)
            assert fast.restore(p) == plain_restore(plain, twin[p.key])
            assert _moved(versions[0], fast) == _moved(versions[1], plain)
        elif what == "mark":
            marks.append(fast.checkpoint())
        else:
            at = data.draw(st.sampled_from(marks))
            versions = _versions(fast), _versions(plain)
            fast.rollback(at)
            plain_rollback(plain, at)
            marks = [m for m in marks if m <= at]
            # the queues charged by what was undone show a version none of them had before (``ByQueue`` reads
            # versions): the same queues as the plain rollback's, which charges per operation
            assert _moved(versions[0], fast) == _moved(versions[1], plain)
        assert _state(fast) == _state(plain)
    fast.rollback(0)
    assert _state(fast) == start


def test_a_moved_pod_goes_back_only_where_its_place_is_free() -> None:
    objs = [queue("org"), queue("a", "org"), node("n0", gpus=2), node("n1", gpus=2), podgroup("g", "a", 1),
            pod("g-0", gpus=2, group="g", node_name="n0", phase="Running"), podgroup("h", "a", 1),
            pod("h-0", gpus=2, group="h")]
    session = session_of(objs)
    moved, other = (session.snap.pods[0], session.snap.pods[1]) if session.snap.pods[0].name == "g-0" else \
        (session.snap.pods[1], session.snap.pods[0])
    n0, n1 = session.snap.node_by_name["n0"], session.snap.node_by_name["n1"]
    session.evict(moved, "reclaim", None, "")
    session.pipeline(moved, n1, (0, 1), "reclaim", None)  # moved to n1
    session.pipeline(other, n0, (0, 1), "reclaim", None)  # its place taken
    before = _state(session)
    assert not session.restore(moved)
    assert _state(session) == before
    session.rollback(len(session.ops) - 1)  # the place is free again
    assert session.restore(moved)
    assert (moved.node, moved.devices, n1.idle, n0.idle) == ("n0", (0, 1), 2, 0)
    session.rollback(0)
    assert (moved.node, str(moved.status), n1.idle, n0.idle) == ("n0", str(PodStatus.RUNNING), 2, 0)


def test_fits_exactly_reads_pod_slots_cpu_memory_and_the_devices() -> None:
    index = NodeIndex([Node("n0", {}, [], False, True, 4000, 8 * 10**9, 3, 2, 81920)])
    n = index.nodes[0]
    p = Pod("ns", "p", "p")
    p.cpu, p.mem, p.gpu_whole = 2000, 4 * 10**9, 1
    assert index.fits_exactly(n, p, (1,))
    for used, value in (("used_cpu", 2001), ("used_mem", 4 * 10**9 + 1), ("used_pods", 3)):
        setattr(n, used, value)
        assert not index.fits_exactly(n, p, (1,)) and not plain_fits_exactly(index, n, p, (1,))
        setattr(n, used, 0)
    n.dev_used[1] = 1000
    assert not index.fits_exactly(n, p, (1,)) and index.fits_exactly(n, p, (0,))
    assert not index.fits_exactly(n, p, (0, 1))  # not the pod's count of devices


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.lists(st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n),
                                                     min_size=1, max_size=4)))
def test_none_of_is_the_plain_reading(masks: list[list[int]]) -> None:
    """``scenario._none_of``, the nodes no mask sets, against the plain reading node by node."""
    arrays = [bytearray(m) for m in masks]
    size = len(masks[0])
    assert scenario._none_of(arrays, size) == bytearray(0 if any(m[i] for m in arrays) else 1 for i in range(size))
    assert [list(a) for a in arrays] == masks  # the masks stay as they were
