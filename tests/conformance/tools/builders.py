"""``../kai-actions/`` files restated from KAI's builder tests (one case built in Go code, not a table), written out
here by hand: preempt-05 and preempt-20. (reclaim-21 and -22, builder tests with one ``TestTopologyBasic`` literal
each, are read by ``act2yaml`` from that literal.) Also kai-more/reclaim-50 and -51, two raw-session integration tests
on generated topologies, which ``go2yaml --check`` compares with these."""

from __future__ import annotations

from typing import Any

from tests.conformance.tools.go2yaml import dump

DEPT_NOTE = ("No Departments in source: KAI test utils add department 'default' (gpu quota -1, limit -1, "
             "over_quota_weight -1) and make it the parent of every queue.")


def _queue(name: str, parent: str | None, offset: int, quota: int, weight: int, kind: str = "queue",
           limit: int = -1) -> dict[str, Any]:
    return {"name": name, "parent": parent, "kind": kind, "priority": 100, "created_offset_minutes": offset,
            "gpu": {"quota": quota, "limit": limit, "over_quota_weight": weight},
            "cpu": {"quota": -1, "limit": -1, "over_quota_weight": 1},
            "memory": {"quota": -1, "limit": -1, "over_quota_weight": 1}}


def _job(name: str, q: str, prio: int, gpus: int, ago: int, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "queue": q, "priority": prio, "preemptible": prio < 100, "gpus_per_task": gpus,
            "cpu_millis": 1000, "memory_mb": 1000, "created_minutes_ago": ago, "min_member": len(tasks),
            "tasks": tasks}


def _node(name: str, gpus: int) -> dict[str, Any]:
    return {"name": name, "gpus": gpus, "cpu_millis": 20000000, "memory_mb": 20000, "gpu_memory_mib": 100,
            "labels": {}}


def preempt_20() -> str:
    """TestPreemptGangFullDrainMultiVictimPerNode (preempt_gang_full_drain_test.go:56, issue #1591 reproducer)."""
    n, g = 11, 4
    victims = [f"victim-n{i}-g{j}" for i in range(n) for j in range(g)]
    # jobs_fake stable-sorts by priority (gang 100 first, then the 44 victims in source order); N jobs = 45:
    # sorted index r was created 45 - r minutes ago.
    jobs = [_job(v, "queue0", 50, 1, 44 - k, [{"name": f"{v}-0", "state": "Running", "node": f"node{k // g}"}])
            for k, v in enumerate(victims)]
    jobs.append(_job("gang-preemptor", "queue0", 100, g, 45,
                     [{"name": f"gang-preemptor-{t}", "state": "Pending"} for t in range(n)]))
    sc = {"name": "issue-1591 reproducer: 11-pod gang of 4-GPU pods, fully-packed 11-node × 4-GPU cluster, 1-GPU "
                  "victims",
          "category": "preempt", "source": "pkg/scheduler/actions/preempt/preempt_gang_full_drain_test.go",
          "source_line": 56, "actions": ["preempt"], "match_mode": "raw_session", "rounds": 1,
          "rounds_after_match": 0, "nodes": [_node(f"node{i}", g) for i in range(n)],
          "queues": [_queue("default", None, 0, -1, -1, "department"), _queue("queue0", "default", 0, n * g, 1)],
          "jobs": jobs,
          "expected": {"jobs": {"gang-preemptor": {"status": "Pipelined", "gpus_required": n * g},
                                **{v: {"status": "Releasing", "gpus_required": 1} for v in victims}},
                       "max_per_round": {"binds": 0, "evictions": n * g, "pipelines": n}}}
    notes = [
        "Builder test (TestPreemptGangFullDrainMultiVictimPerNode, not a table): the source builds one session "
        "(test_utils.BuildSession), runs only preempt.New().Execute(ssn) and checks the raw session "
        "(MatchExpectedAndRealTasks). Regression test for KAI issue #1591 (the exponential job solver's binary-search "
        "local minimum; fixed in 7b02faaf by the sg-multinodegang scenario generator).",
        "11 nodes x 4 GPUs, fully packed by 44 running 1-GPU train jobs victim-n{i}-g{j} on node{i} (j = 0..3), all "
        "in queue0; one pending build-priority (100, non-preemptible) gang gang-preemptor of 11 tasks x 4 GPUs in the "
        "same queue. Every victim must go: the gang is Pipelined on all 11 nodes, the 44 victims Releasing.",
        "queue0: DeservedGPUs 44, GPUOverQuotaWeight 1, MaxAllowedGPUs -1 (limit -1). The source's comments '16' and "
        "'4' next to GPUsRequired and the mocks are stale: the values are nodeCount*gpusPerNode = 44 and nodeCount = "
        "11.",
        "Cache mocks: NumberOfCacheEvictions 44, NumberOfPipelineActions 11, NumberOfCacheBinds not set (0). Job "
        "expectations set DontValidateGPUGroup (dropped).",
        "created_minutes_ago: jobs_fake stable-sorts the 45 jobs by priority, so the gang (100) is first (45 minutes "
        "ago) and victim k in source order (k = 0..43) was created 44-k minutes ago.",
        DEPT_NOTE,
    ]
    return dump(sc, notes)


def preempt_05() -> str:
    """TestHandleScatteredNodesForGangPreempt (preemptGang_test.go:276; its case is built by
    getTestsScatteredNodesForGangMetadata, line 291)."""
    nodes = [_node(f"node{i}", 1) for i in range(4)]
    for nd in nodes:
        nd["labels"] = {"kai.scheduler/type": nd["name"]}
    # jobs_fake: a stable sort by priority puts the preemptor (75) first, 5 jobs: default ages 5 (preemptor), 4-i
    # (job-i-0); JobAgeInMinutes i, when not 0, replaces the default (job-0-0 has 0, so it keeps its default 4).
    jobs = [_job(f"job-{i}-0", "queue", 50, 1, i if i else 4,
                 [{"name": f"job-{i}-0-0", "state": "Running", "node": f"node{i}"}]) for i in range(4)]
    jobs.append(_job("preemptor", "queue", 75, 1, 5,
                     [{"name": "preemptor-0", "state": "Pending", "node_affinity": ["node1"]},
                      {"name": "preemptor-1", "state": "Pending", "node_affinity": ["node3"]}]))
    sc = {"name": "flaky scenario", "category": "preempt",
          "source": "pkg/scheduler/actions/preempt/preemptGang_test.go", "source_line": 276,
          "actions": ["preempt"], "match_mode": "raw_session", "rounds": 1,
          "rounds_after_match": 0, "nodes": nodes,
          "queues": [_queue("default", None, 0, -1, -1, "department"), _queue("queue", "default", 0, 0, 1)],
          "jobs": jobs,
          "expected": {"jobs": {"preemptor": {"status": "Pipelined", "gpus_required": 2}},
                       "max_per_round": {"binds": 2, "evictions": 4, "pipelines": 4}}}
    notes = [
        "Builder test (TestHandleScatteredNodesForGangPreempt, func at line 276; its one case is built by "
        "getTestsScatteredNodesForGangMetadata, line 291): one session (test_utils.BuildSession), only "
        "preempt.New().Execute(ssn), the raw session checked (MatchExpectedAndRealTasks).",
        "4 nodes x 1 GPU, each running a 1-GPU train job job-i-0 (i = 0..3) in queue 'queue'; a pending "
        "interactive-preemptible (75) gang 'preemptor' of 2 x 1 GPU whose tasks have required node affinity to node1 "
        "and node3 (NodeAffinityNames: KAI's test utils match the node label kai.scheduler/type, which they set to the "
        "node name on every node; written out in the nodes' labels). Only job-1-0 and job-3-0 need to go.",
        "queue: DeservedGPUs 0 (unset), MaxAllowedGPUs -1, GPUOverQuotaWeight 1.",
        "created_minutes_ago: jobs_fake stable-sorts the 5 jobs by priority (preemptor first: 5 minutes ago; job-i-0 "
        "default 4-i); JobAgeInMinutes i replaces the default when not 0, so job-1-0, job-2-0, job-3-0 are 1, 2, 3 "
        "minutes old and job-0-0 keeps its default 4.",
        "Cache mocks: NumberOfCacheBinds 2, NumberOfCacheEvictions 4, NumberOfPipelineActions 4 (upper bounds).",
        DEPT_NOTE,
    ]
    return dump(sc, notes)


INTEGRATION = "pkg/scheduler/actions/integration_tests/reclaim/"


def reclaim_50_more() -> str:
    """kai-more/reclaim-50: TestUnschedulableDistributedReclaimTopology (reclaim_topology_test.go:26), a raw-session
    test on a generated topology."""
    running = [_job(f"running-job-{i}", "queue-0", 50, 1, 81 - i,
                    [{"name": f"running-job-{i}-0", "state": "Running", "node": f"node{i % 10}"}]) for i in range(80)]
    pend = _job("unschedulable-distributed-job", "queue-1", 50, 8, 1,
                [{"name": f"unschedulable-distributed-job-{t}", "state": "Pending"} for t in range(10)])
    sc = {"name": "unschedulable distributed reclaim topology", "category": "reclaim",
          "source": INTEGRATION + "reclaim_topology_test.go", "source_line": 26, "actions": ["reclaim"],
          "match_mode": "raw_session", "rounds": 1, "rounds_after_match": 0,
          "nodes": [_node(f"node{i}", 8) for i in range(10)],
          "queues": [_queue("default", None, 0, -1, -1, "department"), _queue("queue-0", "default", 0, 1, 0),
                     _queue("queue-1", "default", 1, 80, 0)],
          "jobs": [*running, pend],
          "expected": {"jobs": {"unschedulable-distributed-job": {"status": "Pending", "gpus_required": 80},
                                **{j["name"]: {"status": "Running", "node": j["tasks"][0]["node"], "gpus_required": 1}
                                   for j in running}},
                       "max_per_round": {"binds": 0, "evictions": 0, "pipelines": 0}}}
    notes = [
        "Custom harness (TestUnschedulableDistributedReclaimTopology): the topology comes from "
        "buildLargeJobReclaimTopology (reclaim_large_job_topology_test.go:34) with "
        "defaultUnschedulableDistributedReclaimParams(10): 10 nodes x 8 GPUs, 80 running 1-GPU train jobs in queue-0 "
        "(node{i mod 10}), one pending train job of 10 tasks x 8 GPUs in queue-1; queue-0 deserves 80-80+1 = 1 GPU, "
        "queue-1 deserves 80, both with GPUOverQuotaWeight 0.",
        "One session is built and only the reclaim action runs. The source asserts on the raw session that all 10 "
        "tasks of unschedulable-distributed-job are Pending and that no job has a Releasing or a Pipelined task; the "
        "running jobs (which can only be Running or Releasing here) are therefore written as Running. The source does "
        "not assert nodes; the running jobs' nodes are their input nodes.",
        "Cache mocks: NumberOfCacheBinds, NumberOfCacheEvictions and NumberOfPipelineActions are all 0.",
        "The source also asserts that reclaim tried to solve for the job (OnJobSolutionStart called at least once); "
        "that is not expressible here. TestDefaultGeneratorPortfolioPreservesTopologyReclaimCoverage in the same file "
        "builds the same session and asserts the same pending tasks plus scenario-generator internals; it is not "
        "restated separately.",
        "All jobs have the same priority, so created_minutes_ago follows the source order: running-job-i was created "
        "81-i minutes ago, the pending job 1 minute ago.",
        DEPT_NOTE,
    ]
    return dump(sc, notes)


def reclaim_51_more() -> str:
    """kai-more/reclaim-51: TestManySingleGPUJobsReclaimTopology (reclaim_many_single_gpu_topology_test.go:54)."""
    rq_name, pq_name = "many-single-gpu-running-queue", "many-single-gpu-pending-queue"
    running = [_job(f"many-single-gpu-running-job-{i}", rq_name, 50, 1, 160 - i,
                    [{"name": f"many-single-gpu-running-job-{i}-0", "state": "Running", "node": f"node{i % 10}"}])
               for i in range(80)]
    pending = [_job(f"many-single-gpu-pending-job-{i}", pq_name, 50, 1, 80 - i,
                    [{"name": f"many-single-gpu-pending-job-{i}-0", "state": "Pending"}]) for i in range(80)]
    rq = _queue(rq_name, "default", 0, 0, 0)
    rq["reclaim_min_runtime_seconds"] = 30
    sc = {"name": "many single GPU jobs reclaim benchmark", "category": "reclaim",
          "source": INTEGRATION + "reclaim_many_single_gpu_topology_test.go", "source_line": 54,
          "actions": ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"],
          "match_mode": "raw_session", "rounds": 1, "rounds_after_match": 0,
          "nodes": [_node(f"node{i}", 8) for i in range(10)],
          "queues": [_queue("default", None, 0, -1, -1, "department"), rq, _queue(pq_name, "default", 1, 80, 0)],
          "jobs": running + pending,
          "expected": {"jobs": {**{j["name"]: {"status": "Releasing", "gpus_required": 1} for j in running},
                                **{j["name"]: {"status": "Pipelined", "gpus_required": 1} for j in pending}},
                       "max_per_round": {"binds": 0, "evictions": 80, "pipelines": 80}}}
    notes = [
        "Custom harness (TestManySingleGPUJobsReclaimTopology): the topology is buildManySingleGPUJobsReclaimTopology "
        "(line 158) with manySingleGPUJobsReclaimParamsWithMinRuntime(10): 10 nodes x 8 GPUs, 80 running 1-GPU train "
        "jobs in many-single-gpu-running-queue (node{i mod 10}; deserved 0 GPUs, GPUOverQuotaWeight 0, "
        "ReclaimMinRuntime 30s) and 80 pending 1-GPU train jobs in many-single-gpu-pending-queue (deserved 80, "
        "GPUOverQuotaWeight 0).",
        "One session is built and the actions of manySingleGPUJobsSchedulingCycleActions "
        "(reclaim_benchmark_test.go:157: allocate, consolidation, reclaim, preempt, stalegangeviction) run once "
        "each. The source asserts on the raw "
        "session that every running job has one Releasing task and every pending job one Pipelined task. It does not "
        "assert nodes.",
        "The source also asserts that after allocate alone all 80 pending tasks carry a fit error, and that reclaim "
        "tried to solve (OnJobSolutionStart called); neither is expressible here.",
        "Cache mocks: NumberOfCacheEvictions 80, NumberOfPipelineActions 80, NumberOfCacheBinds not set (0).",
        "Jobs in the input started 60 s before the session (FORMAT.md 2.4), past the running queue's 30 s "
        "ReclaimMinRuntime, so they may be reclaimed.",
        "All jobs have the same priority, so created_minutes_ago follows the source order (running jobs first, then "
        "pending jobs; 160 jobs).",
        DEPT_NOTE,
    ]
    return dump(sc, notes)


# (category, the builder func's line) -> the file text
HAND_WRITTEN = {("preempt", 276): preempt_05, ("preempt", 56): preempt_20}
# (category, the builder func's line) -> the line of its one TestTopologyBasic literal, read like a table case
LITERAL_AT = {("reclaim", 46): 52, ("reclaim", 133): 139}
# integration files (kai-more) written by hand: (source, source_line) -> the file text
INTEGRATION_HAND_WRITTEN = {(INTEGRATION + "reclaim_topology_test.go", 26): reclaim_50_more,
                            (INTEGRATION + "reclaim_many_single_gpu_topology_test.go", 54): reclaim_51_more}
