"""A job's errors, warnings and sub-groups start as one shared, read-only empty list (``objects.UNWRITTEN``): a cold
snapshot's tens of thousands of jobs no longer make three empty lists each. What writes to them gets a list of the
job's own first (``own_errors`` / ``own_warnings``); the shared one refuses every write. And the reasons a cycle
leaves are shared between ``Decisions.pending`` and ``allocate_reasons`` where they are the same: ``Session.say``
sets a new list rather than append to one allocate left."""

from __future__ import annotations

import pytest

from kaid.actions.session import Session
from kaid.api.config import SchedulerConfig
from kaid.cycle import Bind, _bind, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.journal import job_errors
from kaid.model.objects import UNWRITTEN, Job, Node, Pod, Reason, own_errors, own_warnings
from kaid.model.vocabulary import ReasonCode
from kaid.placement.index import NodeIndex
from tests.objects import node, pod, podgroup, queue


def test_a_new_job_shares_the_unwritten_list_and_it_refuses_writes() -> None:
    one, two = Job("ns", "one"), Job("ns", "two")
    assert one.errors is two.errors is one.warnings is UNWRITTEN and one.subgroups is UNWRITTEN
    assert one.errors == [] and not one.warnings and list(one.subgroups) == [] and repr(one.subgroups) == "[]"
    why = Reason(ReasonCode.INVALID_POD_GROUP, "x")
    for write in (lambda: one.errors.append(why), lambda: one.warnings.extend([why]), lambda: one.errors.insert(0, why),
                  lambda: one.subgroups.__iadd__([{}]), lambda: one.errors.__setitem__(slice(None), [why]),
                  lambda: one.errors.clear(), lambda: one.errors.reverse(), lambda: one.errors.pop()):
        with pytest.raises(TypeError):
            write()
    assert len(UNWRITTEN) == 0


def test_own_lists_are_the_jobs_own() -> None:
    one, two = Job("ns", "one"), Job("ns", "two")
    why = Reason(ReasonCode.INVALID_POD_GROUP, "x")
    own_errors(one).append(why)
    own_warnings(two).append(why)
    assert one.errors == [why] and one.warnings == [] and two.errors == [] and two.warnings == [why]
    assert own_errors(one) is one.errors  # (made once)
    assert UNWRITTEN == [] and two.errors is UNWRITTEN
    assert job_errors(None, two) is two.errors is not UNWRITTEN  # the daemon's writer without a journal


def test_a_cold_snapshot_writes_only_the_bad_jobs_lists() -> None:
    objs = [node("n1", gpus=8), queue("q"), podgroup("good", "q", 1), podgroup("bad", "nowhere", 1),
            pod("a", gpus=1, group="good"), pod("b", gpus=1, group="bad")]
    snap = build_snapshot(objs, SchedulerConfig(), 0.0)
    good, bad = snap.jobs["default/good"], snap.jobs["default/bad"]
    assert good.errors is UNWRITTEN and good.warnings is UNWRITTEN and good.subgroups is UNWRITTEN
    assert [r.code for r in bad.errors] == [ReasonCode.UNKNOWN_QUEUE] and bad.errors is not UNWRITTEN


def test_a_reason_said_after_allocate_leaves_allocates_reasons_as_they_were() -> None:
    objs = [node("n1", gpus=1), queue("q"), podgroup("big", "q", 1), pod("a", gpus=2, group="big")]
    snap = build_snapshot(objs, SchedulerConfig(), 0.0)
    d = run_cycle(snap, SchedulerConfig())
    left = d.allocate_reasons["default/big"]
    assert d.pending["default/big"] is left  # (shared: nothing was said after allocate)
    session = Session(snap, NodeIndex(snap.nodes))
    session.reasons = dict(d.allocate_reasons)
    session.allocate_reasons = d.allocate_reasons
    later = Reason(ReasonCode.NOT_PLACED_THIS_CYCLE, "later")
    session.say(snap.jobs["default/big"], later)
    assert session.reasons["default/big"] == [*left, later]
    assert d.allocate_reasons["default/big"] is left and later not in left


def test_one_device_groups_are_handed_out_once_per_group_with_the_same_value() -> None:
    n = Node("n1", {}, [], False, True, 8000, 10**10, 110, 2, 40000)
    n.dev_group[:] = ["g1", "g2"]
    job = Job("ns", "j")
    pods = []
    for i, devices in enumerate(((0,), (0,), (1,), (0, 1))):
        p = Pod("ns", f"p{i}", f"u{i}")
        p.job, p.frac_devices, p.gpu_frac, p.devices, p.gpu_group = job, len(devices), 500, devices, "g1"
        pods.append(p)
    ones: dict[str, tuple[str]] = {}
    made = [_bind(p, n, "allocate", None, ones) for p in pods]
    plain = [_bind(p, n, "allocate", None) for p in pods]
    assert made == plain and all(isinstance(b, Bind) for b in made)
    assert [b.gpu_groups for b in made] == [("g1",), ("g1",), ("g2",), ("g1", "g2")]
    assert made[0].gpu_groups is made[1].gpu_groups
