"""What a reclaim scenario takes from a victim job, as KAI's validator reads it (``proportion.getVictimResources``
with allowConsolidatingReclaim, KAI's default): the job's victim pods in the order the scenario took them, split per
pod set into its first ``minAvailable`` (the core, one amount, checked last) and the rest (the elastic pods, one
amount each); a pod placed back holds its place in the split but gives up nothing. Each amount is checked against
the victim queue as the amounts before it left it (``reclaimable.reclaimable``).

KAI's ``reclaim_elastic_test.go:995`` (kai-actions/reclaim-33) has a gang of three 1-GPU pods (minMember 2) in a queue
at 3 GPUs against a fair share of 2, and a 2-GPU job of a sibling queue: the scenario that evicts the gang's core and
puts its elastic pod back takes 1 GPU as the elastic amount (3 > 2: allowed) and 1 as the core (2 > 2: not), so
nothing is reclaimed. kai read the core's two evicted pods as one amount checked at 3 and reclaimed.
"""

from __future__ import annotations

from typing import Any

from kaid.actions.reclaim import reclaimed, victim_tasks
from kaid.actions.victims import Unit
from kaid.api import constants
from kaid.api.config import SchedulerConfig
from kaid.api.meta import parse_time
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Job, Pod, Queue
from kaid.model.vocabulary import PodStatus
from tests.objects import node, pod, podgroup, queue

T0 = parse_time("2026-01-01T00:00:00Z")
Obj = dict[str, Any]
GPU = 1000


def world(gpus: int = 3, victim_quota: int = 2, pods: int = 3) -> list[Obj]:
    """``gpus`` GPUs; q2 (quota ``victim_quota``) runs a gang of ``pods`` 1-GPU pods, minMember 2; q0 (quota 2) waits
    with a 2-GPU pod."""
    objs = [node("n0", gpus=gpus), queue("q0", gpu=(2, -1, 1)), queue("q2", gpu=(victim_quota, -1, 1)),
            podgroup("gang", "q2", min_member=2, priority_class="train"),
            podgroup("want", "q0", priority_class="train")]
    objs += [pod(f"gang-{i}", gpus=1, group="gang", node_name="n0") for i in range(pods)]
    objs.append(pod("want-0", gpus=2, group="want"))
    return objs


def cycle(objs: list[Obj]) -> Decisions:
    cfg = SchedulerConfig.model_validate({})
    return run_cycle(build_snapshot(objs, cfg, T0), cfg)


def test_no_reclaim_that_takes_the_victim_queue_below_its_share_by_its_core() -> None:
    d = cycle(world())
    assert d.evictions == [] and d.pipelined == []


def test_reclaim_where_the_core_leaves_the_victim_queue_above_its_share() -> None:
    """The same gang in a queue whose fair share is 1: both amounts are taken above it, so KAI's rule allows it."""
    d = cycle(world(victim_quota=1))
    assert [p.pod for p in d.pipelined] == ["default/want-0"]
    assert len(d.evictions) >= 2


def test_reclaim_of_elastic_pods_alone_above_the_share() -> None:
    """Four pods, minMember 2, at 4 against a share of 2: the two elastic pods go, one amount each."""
    d = cycle(world(gpus=4, pods=4))
    assert [p.pod for p in d.pipelined] == ["default/want-0"]
    assert sorted(e.pod for e in d.evictions) == ["default/gang-2", "default/gang-3"]


def _job(min_member: int, n: int, subgroups: list[dict[str, Any]] | None = None,
         labels: list[str] | None = None) -> Job:
    job = Job.__new__(Job)
    job.key, job.queue, job.min_member, job.subgroups = "ns/j", "q", min_member, subgroups or []
    job.min_subgroup = None
    job.pods = []
    for i in range(n):
        p = Pod("ns", f"j-{i}", f"u{i}")
        p.gpu_whole, p.cpu, p.mem, p.job, p.status = 1, 100, 10, job, PodStatus.EVICTED
        if labels:
            p.labels = {constants.SUBGROUP_LABEL: labels[i]}
        job.pods.append(p)
    return job


def test_elastic_pods_one_by_one_then_the_core() -> None:
    job = _job(2, 4)
    a, b, c, d = job.pods
    assert reclaimed(job, [d, c, b, a]) == [(GPU, 100, 10), (GPU, 100, 10), (2 * GPU, 200, 20)]


def test_a_pod_placed_back_holds_its_place_in_the_split() -> None:
    job = _job(2, 3)
    a, b, c = job.pods
    c.status = PodStatus.RUNNING  # the elastic pod, taken first, put back
    assert reclaimed(job, [c, b, a]) == [(GPU, 100, 10), (GPU, 100, 10)]  # a elastic, then the core's b
    b.status = a.status = PodStatus.RUNNING
    assert reclaimed(job, [c, b, a]) == []


def test_a_job_at_or_below_its_minimum_is_all_core() -> None:
    job = _job(3, 3)
    assert reclaimed(job, job.pods) == [(3 * GPU, 300, 30)]


def test_the_split_is_per_pod_set() -> None:
    subgroups = [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 2}]
    job = _job(0, 5, subgroups, ["a", "a", "b", "b", "b"])
    a0, a1, b0, b1, b2 = job.pods
    # a: core a0, elastic a1; b: core b0 b1, elastic b2; the core of both sets is one amount, last
    assert reclaimed(job, [a0, a1, b0, b1, b2]) == [(GPU, 100, 10), (GPU, 100, 10), (3 * GPU, 300, 30)]


def test_victim_tasks_gathers_each_job_in_the_order_of_its_units() -> None:
    job = _job(2, 3)
    a, b, c = job.pods
    q = Queue.__new__(Queue)
    units = [Unit(job, [c], True, q), Unit(job, [b, a], False, q)]
    assert victim_tasks(units) == {"ns/j": (job, [c, b, a])}
