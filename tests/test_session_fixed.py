"""What a session works out once per cycle, and what the actions ask again and again, is what the plain readings give:
the schedulable capacity (``Session.total``, ``session.capacity``: ``Snapshot.capacity``), the smallest GPU
(``small_ref``: the first node of the least GPU memory among those that publish it), the pods on their way out
(``releasing``), the jobs of each queue in the snapshot's order (``jobs_in``, ``places``), what a job's active pods hold
(``scenario.held_by``, read by every job order), what pods request (``session.job_request``), what every queue held as
an attempt began (``reclaimable.Before``), on random nodes, pods, jobs and queues (issue 15)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kaid.actions import gangs
from kaid.actions.reclaimable import Before, _le, within
from kaid.actions.scenario import held_by
from kaid.actions.session import STUCK_RELEASING_SECONDS, Session, capacity, job_request
from kaid.api.config import SchedulerConfig
from kaid.model.objects import Job, Node, Pod, Queue, Snapshot
from kaid.model.vocabulary import PodStatus
from kaid.placement.index import NodeIndex

STATUSES = list(PodStatus)
NOW = 1_800_000_000.0


@st.composite
def nodes(draw: st.DrawFn) -> list[Node]:
    out = []
    for i in range(draw(st.integers(0, 12))):
        memory = draw(st.sampled_from([0, 0, 40_000, 80_000]))
        n = Node(f"n{i}", {}, [], draw(st.booleans()), draw(st.booleans()), draw(st.integers(0, 64_000)),
                 draw(st.integers(0, 2**40)), 110, draw(st.integers(0, 8)), memory)
        out.append(n)
    return out


@st.composite
def pods(draw: st.DrawFn, nodes: list[Node]) -> list[Pod]:
    out = []
    for i in range(draw(st.integers(0, 12))):
        p = Pod("ns", f"p{i}", f"u{i}")
        p.status = draw(st.sampled_from(STATUSES))
        p.releasing = draw(st.booleans())
        p.deleted = NOW - draw(st.sampled_from([0.0, STUCK_RELEASING_SECONDS, STUCK_RELEASING_SECONDS + 1]))
        p.node = draw(st.sampled_from([None, "gone", *(n.name for n in nodes)]))
        kind = draw(st.sampled_from(["whole", "fraction", "memory", "none"]))
        if kind == "whole":
            p.gpu_whole = draw(st.integers(1, 8))
        elif kind == "fraction":
            p.gpu_frac, p.frac_devices = draw(st.integers(1, 999)), draw(st.integers(1, 3))
        elif kind == "memory":
            p.gpu_mem_mib, p.frac_devices = draw(st.integers(1, 80_000)), draw(st.integers(1, 3))
        p.cpu, p.mem = draw(st.integers(0, 8_000)), draw(st.integers(0, 2**36))
        out.append(p)
    return out


def _session(ns: list[Node], ps: list[Pod]) -> Session:
    snap = Snapshot(ns, {}, {}, ps, {}, {}, NOW)
    return Session(snap, NodeIndex(snap.nodes), SchedulerConfig())


@given(st.data())
def test_the_fixed_readings_are_the_plain_ones(data: st.DataObject) -> None:
    ns = data.draw(nodes())
    ps = data.draw(pods(ns))
    s = _session(ns, ps)
    cap = s.snap.capacity()
    assert s.total == capacity(ns) == tuple(cap)
    with_memory = [n for n in ns if n.gpu_mem_mib]
    least = min((n.gpu_mem_mib for n in with_memory), default=None)
    assert s.small_ref is next((n for n in with_memory if n.gpu_mem_mib == least), None)
    assert s.releasing() == [p for p in ps if p.releasing and p.node in s.snap.node_by_name
                             and NOW - p.deleted <= STUCK_RELEASING_SECONDS and p.status != PodStatus.EVICTED]


@given(st.data())
def test_what_a_job_holds_is_the_plain_sum(data: st.DataObject) -> None:
    job = Job("ns", "j")
    job.pods = data.draw(pods([]))
    active = [p for p in job.pods if gangs.is_active(p)]
    assert held_by(job) == (sum(p.gpu_milli_on(None) for p in active), sum(p.cpu for p in active),
                            sum(p.mem for p in active))


@given(st.data())
def test_what_pods_request_is_the_plain_sum(data: st.DataObject) -> None:
    ns = data.draw(nodes())
    ps = data.draw(pods(ns))
    ref = data.draw(st.sampled_from([None, *ns]))
    assert job_request(ps, ref) == (sum(p.gpu_milli_on(ref) for p in ps), sum(p.cpu for p in ps),
                                    sum(p.mem for p in ps))


@given(st.lists(st.sampled_from(["a", "b", "c", "", "a-1"]), max_size=20))
def test_the_jobs_of_a_queue_come_in_the_snapshots_order(queues: list[str]) -> None:
    jobs = {}
    for i, name in enumerate(queues):
        job = Job("ns", f"j{i:02}")
        job.queue = name
        jobs[f"ns/{i:02}"] = job
    s = Session(Snapshot([], {}, jobs, [], {}, {}, NOW), NodeIndex([]), SchedulerConfig())
    for name in {"a", "b", "c", "", "a-1", "none"}:
        plain = [j for j in jobs.values() if j.queue == name]
        assert s.jobs_in(name) == plain
        assert s.places(name) == {id(j): i for i, j in enumerate(plain)}


@given(st.lists(st.tuples(st.lists(st.integers(-5, 5), min_size=3, max_size=3),
                          st.lists(st.integers(-5, 5), min_size=3, max_size=3)), max_size=6),
       st.lists(st.integers(-1, 5), min_size=3, max_size=3), st.lists(st.integers(-1, 5), min_size=3, max_size=3))
def test_what_the_queues_held_is_copied(held: list[tuple[list[int], list[int]]], a: list[int], b: list[int]) -> None:
    qs = []
    for i, (allocated, np) in enumerate(held):
        q = Queue(f"q{i}")
        q.allocated, q.alloc_np = allocated, np
        qs.append(q)
    before = Before.of(iter(qs))
    assert before.allocated == {q.name: q.allocated for q in qs}
    assert before.non_preemptible == {q.name: q.alloc_np for q in qs}
    assert all(before.allocated[q.name] is not q.allocated and before.non_preemptible[q.name] is not q.alloc_np
               for q in qs)
    assert within(a, b) == all(_le(x, y) for x, y in zip(a, b, strict=True))
