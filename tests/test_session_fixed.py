"""What a session works out once per cycle, read at C speed or in one pass, is what the plain readings give: the
schedulable capacity (``Session.total``, ``session.capacity``: ``Snapshot.capacity``), the smallest GPU (``small_ref``:
the first node of the least GPU memory among those that publish it), the pods on their way out (``releasing``), and
what a job's active pods hold (``scenario.held_by``, read by every job order), on random nodes and pods (issue 15:
bench_victims' first-fit cycle, 2.1% of its opcodes)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kaid.actions import gangs
from kaid.actions.scenario import held_by
from kaid.actions.session import STUCK_RELEASING_SECONDS, Session, capacity
from kaid.api.config import SchedulerConfig
from kaid.model.objects import Job, Node, Pod, Snapshot
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
