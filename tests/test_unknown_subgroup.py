"""A pod of a PodGroup with sub-groups names one of its pod sets (the sub-groups with none under them) by its
``kai.scheduler/subgroup-name`` label; a pod without it names ``default``. KAI leaves out a pod that names no pod
set (job_info.go AddTaskInfo / addInvalidSubGroupTask at d5bc503a); kai holds the job and says which pods and what
to do (docs/compatibility.md)."""

from __future__ import annotations

from typing import Any

import pytest

from kaid.api import constants as c
from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.kube.daemon import Overlay
from kaid.kube.livesnap import LiveSnapshots
from kaid.model.build import build_snapshot
from kaid.model.vocabulary import ReasonCode
from tests.objects import node, pod, podgroup, queue
from tests.test_live_model import Cache
from tests.test_live_snapshots import FakeCache, _cold, _live, listed

Obj = dict[str, Any]

# a tree: "workers" holds the pod sets "a" and "b"; "driver" is a pod set under the root
SUBGROUPS = [{"name": "driver", "minMember": 1}, {"name": "workers", "minSubGroup": 2},
             {"name": "a", "parent": "workers", "minMember": 1}, {"name": "b", "parent": "workers", "minMember": 1}]


def _cluster(*names: str | None, subgroups: list[Obj] | None = None) -> list[Obj]:
    """One PodGroup ``train`` of min 3 with SUBGROUPS (or ``subgroups``), and one 1-GPU pod per sub-group name
    given (None: no label)."""
    pods = [pod(f"p{i}", gpus=1, group="train", queue="q",
                labels={} if name is None else {c.SUBGROUP_LABEL: name}) for i, name in enumerate(names)]
    return [node("n1"), queue("q"),
            podgroup("train", "q", min_member=len(names), subGroups=subgroups or SUBGROUPS), *pods]


def test_pods_in_the_pod_sets_run() -> None:
    cfg = SchedulerConfig()
    snap = build_snapshot(_cluster("driver", "a", "b"), cfg, 0.0)
    assert not snap.jobs["default/train"].errors
    assert len(run_cycle(snap, cfg).binds) == 3


@pytest.mark.parametrize(("name", "said"), [
    ("typo", "sub-group 'typo'"),            # no such sub-group
    ("workers", "sub-group 'workers'"),      # a sub-group with sub-groups under it holds no pods
    (None, "no sub-group"),                  # no label: "default", which this PodGroup does not define
])
def test_a_pod_that_names_no_pod_set_holds_its_job_and_says_why(name: str | None, said: str) -> None:
    cfg = SchedulerConfig()
    snap = build_snapshot(_cluster("driver", "a", "b", name), cfg, 0.0)
    job = snap.jobs["default/train"]
    assert [e.code for e in job.errors] == [ReasonCode.UNKNOWN_SUBGROUP]
    message = job.errors[0].message
    assert said in message and "pod p3 " in message and "(a, b, driver" in message
    assert job.errors[0].details == {"subGroup": name or c.DEFAULT_SUBGROUP, "pods": ["p3"]}
    d = run_cycle(snap, cfg)
    assert not d.binds and ReasonCode.UNKNOWN_SUBGROUP in [r.code for r in d.pending[job.key]]


def test_pods_naming_the_same_wrong_sub_group_are_one_reason() -> None:
    snap = build_snapshot(_cluster("driver", "a", "b", "x", "x", "x", "x", "y"), SchedulerConfig(), 0.0)
    job = snap.jobs["default/train"]
    assert [(e.details["subGroup"], e.details["pods"]) for e in job.errors] == [
        ("x", ["p3", "p4", "p5", "p6"]), ("y", ["p7"])]
    assert "pods p3, p4, p5 and 1 more of PodGroup default/train name sub-group 'x'" in job.errors[0].message


def test_a_pod_set_named_default_takes_the_pods_without_the_label() -> None:
    subgroups = [{"name": "default", "minMember": 1}, {"name": "a", "minMember": 1}]
    cfg = SchedulerConfig()
    snap = build_snapshot(_cluster(None, "a", subgroups=subgroups), cfg, 0.0)
    assert not snap.jobs["default/train"].errors
    assert len(run_cycle(snap, cfg).binds) == 2


def test_a_podgroup_without_sub_groups_ignores_the_label() -> None:
    objs = [node("n1"), queue("q"), podgroup("train", "q", min_member=2),
            *(pod(f"p{i}", gpus=1, group="train", queue="q", labels={c.SUBGROUP_LABEL: "x"}) for i in range(2))]
    cfg = SchedulerConfig()
    snap = build_snapshot(objs, cfg, 0.0)
    assert not snap.jobs["default/train"].errors
    assert len(run_cycle(snap, cfg).binds) == 2


def test_the_daemons_live_snapshot_says_it_as_the_cold_path() -> None:
    cfg = SchedulerConfig()
    fake = FakeCache()
    live = LiveSnapshots(fake, cfg)
    sub = fake.subs[0]
    cache = Cache()
    objs = _cluster("driver", "a", "b")
    listed(objs, cache, sub)
    overlay = Overlay()
    assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg)
    wrong = pod("p3", gpus=1, group="train", queue="q", labels={c.SUBGROUP_LABEL: "typo"})
    cache.upsert(wrong)
    sub.event("Pod", False, wrong)
    seen = _live(live, overlay)
    assert seen == _cold(cache.objects(), overlay, cfg)
    assert "UnknownSubGroup" in repr(seen)
