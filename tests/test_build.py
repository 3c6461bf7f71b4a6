"""Reading Kubernetes objects into the model: contract keys, units, defaults and bad objects."""

from kaid.api.config import SchedulerConfig
from kaid.model.build import build_snapshot
from kaid.model.objects import CPU, GPU, MEM, UNLIMITED
from kaid.model.pods import pod_requests
from tests.objects import node, pod, podgroup, queue


def test_pod_requests_sum_like_kube_scheduler() -> None:
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                       {"resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "1"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "4"}}},
                           {"restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}}],
        "overhead": {"cpu": "100m"},
    }
    req = pod_requests(spec)
    # containers 1.5 + sidecar 0.25 = 1.75 < init step 4 -> 4, plus overhead 0.1
    assert req["cpu"] == 4 + __import__("decimal").Decimal("0.1")
    assert req["nvidia.com/gpu"] == 1  # limits default requests
    assert req["memory"] == 2**30


def test_queue_units_and_special_values() -> None:
    snap = build_snapshot([queue("q", gpu=(2.5, -1, 3), cpu=(4000, 8000, 1), memory=(1000, 0, 1))])
    q = snap.queues["q"]
    assert q.quota[GPU] == 2500 and q.limit[GPU] == UNLIMITED and q.weight[GPU] == 3
    assert q.quota[CPU] == 4000 and q.limit[CPU] == 8000
    assert q.quota[MEM] == 1000 * 10**6
    assert q.effective_limit(MEM) == 1000 * 10**6  # limit 0 = nothing beyond the quota


def test_queue_of_pod_owner_then_pod_then_namespace_then_default() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"runai/queue": "nsq"}}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "team", "labels":
           {"kai.scheduler/queue": "ownerq"}}, "spec": {"parallelism": 2}}
    p1 = pod("a", ns="team", labels={"kai.scheduler/queue": "podq"})
    p1["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "j", "controller": True}]
    p2 = pod("b", ns="team", labels={"runai/queue": "legacyq"})
    p3 = pod("c", ns="team")
    p4 = pod("d", ns="other")
    snap = build_snapshot([ns, job, p1, p2, p3, p4])
    by_pod = {p.name: p.job.queue for p in snap.pods if p.job}
    assert by_pod == {"a": "ownerq", "b": "legacyq", "c": "nsq", "d": "default-queue"}
    assert snap.jobs["team/pg-job-j"].min_member == 1


def test_gang_from_job_id_labels_and_batch_min_member() -> None:
    pods = [pod(f"w{i}", labels={"kai.nvidia.com/job-id": "x", "kai.nvidia.com/job-size": "3"}) for i in range(3)]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "b", "namespace": "default",
           "annotations": {"kai.scheduler/batch-min-member": "4"}}, "spec": {"parallelism": 4}}
    jp = pod("bp")
    jp["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "b", "controller": True}]
    snap = build_snapshot([*pods, job, jp])
    assert snap.jobs["default/pg-job-id-x"].min_member == 3
    assert len(snap.jobs["default/pg-job-id-x"].pods) == 3
    assert snap.jobs["default/pg-job-b"].min_member == 4


def test_priority_and_preemptibility() -> None:
    objs = [queue("q"),
            pod("t", queue="q", labels={"priorityClassName": "train"}),
            pod("i", queue="q", priorityClassName="inference"),
            pod("n", queue="q", labels={"priorityClassName": "train", "kai.scheduler/preemptibility":
                                        "non-preemptible"}),
            pod("u", queue="q", priorityClassName="nope"),
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "gold"},
             "value": 500, "preemptionPolicy": "Never"},
            pod("g", queue="q", priorityClassName="gold")]
    snap = build_snapshot(objs)
    j = {p.name: p.job for p in snap.pods if p.job}
    assert (j["t"].priority, j["t"].preemptible) == (50, True)
    assert (j["i"].priority, j["i"].preemptible) == (125, False)
    assert j["n"].preemptible is False
    assert j["u"].priority == 0 and j["u"].warnings[0].code == "UnknownPriorityClass"
    assert j["g"].preempt_never and not j["g"].preemptible


def test_bad_fraction_is_a_reason_on_that_job_only() -> None:
    objs = [node("n"), queue("q"),
            pod("bad", queue="q", annotations={"gpu-fraction": "1.5"}),
            pod("abc", queue="q", annotations={"gpu-fraction": "abc"}),
            pod("ok", queue="q", annotations={"gpu-fraction": "0.5"})]
    snap = build_snapshot(objs)
    j = {p.name: p.job for p in snap.pods if p.job}
    assert j["bad"].errors and "between 0 and 1" in j["bad"].errors[0].message
    assert j["abc"].errors and j["abc"].errors[0].code == "InvalidSpec"
    assert not j["ok"].errors
    assert snap.pods[-1].gpu_frac == 500


def test_queue_problems_missing_parent_and_cycle() -> None:
    objs = [queue("orphan", parent="ghost"), queue("a", parent="b"), queue("b", parent="a"), queue("fine"),
            pod("p", queue="orphan"), pod("r", queue="a"), pod("s", queue="fine")]
    snap = build_snapshot(objs)
    codes = {(p.name, p.reason.code) for p in snap.problems}
    assert ("orphan", "MissingParentQueue") in codes
    assert ("a", "QueueCycle") in codes and ("b", "QueueCycle") in codes
    j = {p.name: p.job for p in snap.pods if p.job}
    assert j["p"].errors[0].code == "InvalidQueue"
    assert j["r"].errors[0].code == "InvalidQueue"
    assert not j["s"].errors


def test_min_member_larger_than_owner_can_run() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
           "spec": {"parallelism": 2}}
    pods = []
    for i in range(2):
        p = pod(f"j-{i}", group="pg")
        p["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "j", "controller": True}]
        pods.append(p)
    snap = build_snapshot([queue("q"), podgroup("pg", "q", min_member=5), job, *pods])
    assert snap.jobs["default/pg"].errors[0].code == "MinMemberTooLarge"


def test_running_pods_occupy_devices_and_other_schedulers_count() -> None:
    objs = [node("n", gpus=4),
            pod("whole", gpus=2, node_name="n"),
            pod("frac1", node_name="n", annotations={"gpu-fraction": "0.5"}, labels={"runai-gpu-group": "g1"}),
            pod("frac2", node_name="n", annotations={"gpu-fraction": "0.25"}, labels={"runai-gpu-group": "g1"}),
            pod("foreign", gpus=1, node_name="n", scheduler="default-scheduler"),
            pod("foreign-pending", gpus=1, scheduler="default-scheduler"),
            pod("done", gpus=1, node_name="n", phase="Succeeded")]
    snap = build_snapshot(objs, SchedulerConfig())
    n = snap.node_by_name["n"]
    assert n.idle == 0
    assert sorted(n.dev_used) == [750, 1000, 1000, 1000]
    assert {p.name for p in snap.pods} == {"whole", "frac1", "frac2"}


def test_job_made_by_a_cronjob_is_its_own_workload() -> None:
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": "default"}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "nightly-1", "namespace": "default", "labels": {"kai.scheduler/queue": "q"},
        "annotations": {"kai.scheduler/batch-min-member": "2"},
        "ownerReferences": [{"kind": "CronJob", "name": "nightly", "controller": True}]}, "spec": {"parallelism": 2}}
    pods = []
    for i in range(2):
        p = pod(f"nightly-1-{i}")
        p["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "nightly-1", "controller": True}]
        pods.append(p)
    snap = build_snapshot([queue("q"), cron, job, *pods], wait_for_owners=True)
    only = snap.jobs["default/pg-job-nightly-1"]
    assert only.min_member == 2 and only.queue == "q" and not only.errors


def test_pods_wait_for_an_owner_not_seen_yet() -> None:
    p = pod("w-0")
    p["metadata"]["ownerReferences"] = [{"kind": "PyTorchJob", "name": "ddp", "controller": True}]
    waiting = build_snapshot([queue("default-queue"), p], wait_for_owners=True)
    (job,) = waiting.jobs.values()
    assert job.errors[0].code == "OwnerNotSeen" and "PyTorchJob ddp" in job.errors[0].message
    offline = build_snapshot([queue("default-queue"), p])
    assert not next(iter(offline.jobs.values())).errors


def test_the_collector_sleeps_while_a_snapshot_is_read_and_is_left_as_it_was() -> None:
    import gc

    from kaid.model.objects import Pod, Reason
    from kaid.model.pods import read_pod

    seen: list[bool] = []

    def reader(obj: dict[str, object], problems: list[Reason]) -> Pod:
        seen.append(gc.isenabled())
        return read_pod(obj, problems)

    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            snap = build_snapshot([node("n1"), pod("a", gpus=1)], pod_reader=reader)
            assert snap.pods and gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False, False]


def test_queue_charged_for_gpu_memory_by_the_node_it_is_on() -> None:
    """A running gpu-memory pod counts for its queue as a share of its own node's devices; a pending one as a share of
    the reference node's (the most memory per device); whole GPUs as they are; a releasing pod not at all."""
    objs = [queue("q"), node("small", gpu_memory=40960), node("big", gpu_memory=81920),
            pod("mem-run", queue="q", node_name="small", phase="Running", annotations={"gpu-memory": "20480"}),
            pod("mem-wait", queue="q", annotations={"gpu-memory": "20480"}),
            pod("whole-run", gpus=2, queue="q", node_name="big", phase="Running"),
            pod("whole-wait", gpus=1, queue="q")]
    gone = pod("whole-gone", gpus=1, queue="q", node_name="big", phase="Running")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    snap = build_snapshot([*objs, gone], SchedulerConfig())
    q = snap.queues["q"]
    assert q.allocated[GPU] == 500 + 2000  # 20480 of 40960 MiB, and two devices
    assert q.requested[GPU] == 500 + 250 + 2000 + 1000  # the waiting one as 20480 of 81920 MiB
