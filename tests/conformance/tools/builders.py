"""``../kai-actions/`` files restated from KAI's builder tests (one case built in Go code, not a table), written out
here by hand: preempt-05 and preempt-20. (reclaim-21 and -22, builder tests with one ``TestTopologyBasic`` literal
each, are read by ``act2yaml`` from that literal.)"""

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


# (category, the builder func's line) -> the file text
HAND_WRITTEN = {("preempt", 276): preempt_05, ("preempt", 56): preempt_20}
# (category, the builder func's line) -> the line of its one TestTopologyBasic literal, read like a table case
LITERAL_AT = {("reclaim", 46): 52, ("reclaim", 133): 139}
