"""Reclaim under a queue limit: KAI checks the limits inside its scenario, once the victims are gone
(``AllocateJob``'s ``IsJobOverQueueCapacityFn``); its reclaim action has no check before. So a job whose department
sits at its limit may still take from a sibling queue under the same department, whose pods free room under that
limit (KAI's ``reclaim_elastic_test.go:879``, kai-actions/reclaim-32); a limit on the job's own queue no victim can
lift (reclaim takes nothing of its own queue), nor one above that only other departments' pods would lift."""

from __future__ import annotations

from typing import Any

from kaid.actions.reclaim import room_by_evicting
from kaid.api.config import SchedulerConfig
from kaid.api.meta import parse_time
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from tests.objects import node, pod, podgroup, queue

T0 = parse_time("2026-01-01T00:00:00Z")
Obj = dict[str, Any]


def world(dept_limit: float = 4000, own_limit: float = -1, other_dept: bool = False) -> list[Obj]:
    """4 cpus; q0 runs 3 one-cpu pods of an elastic job (min 1), q1 runs 1 of its 3 (min 1); both deserve 1 cpu;
    their department's cpu limit is ``dept_limit``, q1's own ``own_limit``; ``other_dept``: q0 under another
    department."""
    objs = [node("n0", gpus=0, cpu="4"),
            queue("dept", cpu=(-1, dept_limit, 1)), queue("other", cpu=(-1, -1, 1)),
            queue("q0", parent="other" if other_dept else "dept", cpu=(1000, -1, 1)),
            queue("q1", parent="dept", cpu=(1000, own_limit, 1)),
            podgroup("r", "q0", min_member=1, priority_class="train"),
            podgroup("p", "q1", min_member=1, priority_class="train", created="2026-01-01T00:01:00Z")]
    objs += [pod(f"r-{i}", group="r", node_name="n0", memory="1M") for i in range(3)]
    objs.append(pod("p-0", group="p", node_name="n0", memory="1M", created="2026-01-01T00:01:00Z"))
    objs += [pod(f"p-{i}", group="p", memory="1M", created="2026-01-01T00:01:00Z") for i in (1, 2)]
    return objs


def cycle(objs: list[Obj]) -> Decisions:
    cfg = SchedulerConfig.model_validate({})
    return run_cycle(build_snapshot(objs, cfg, T0), cfg)


def test_a_department_at_its_limit_reclaims_from_its_own_other_queue() -> None:
    d = cycle(world())
    assert len(d.evictions) == 1 and d.evictions[0].pod.startswith("default/r-")
    assert [p.pod for p in d.pipelined] == ["default/p-1"]


def test_no_reclaim_past_a_limit_of_the_job_own_queue() -> None:
    d = cycle(world(dept_limit=-1, own_limit=1000))
    assert d.evictions == [] and d.pipelined == []


def test_no_reclaim_past_a_department_limit_that_only_other_departments_hold_under() -> None:
    d = cycle(world(dept_limit=1000, other_dept=True))
    assert d.evictions == [] and d.pipelined == []


def test_room_by_evicting_bounds() -> None:
    snap = build_snapshot(world(), SchedulerConfig.model_validate({}), T0)
    q1 = snap.queues["q1"]
    assert room_by_evicting(q1, (0, 1000, 0), True)  # dept: 1 of q1's + 1 wanted <= 4
    assert room_by_evicting(q1, (0, 3000, 0), True)
    assert not room_by_evicting(q1, (0, 3001, 0), True)  # more than the limit with q1's own pod
    snap = build_snapshot(world(dept_limit=1000, other_dept=True), SchedulerConfig.model_validate({}), T0)
    assert not room_by_evicting(snap.queues["q1"], (0, 1000, 0), True)
