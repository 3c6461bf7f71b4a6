"""The Go-to-YAML converters of tests/conformance/tools on a Go table written here (synthetic, in the style of
KAI-Scheduler's per-action tests), so that they cannot rot unnoticed. With KAI_SOURCE set to a checkout of KAI at
d5bc503a, the last test regenerates every tests/conformance/kai-actions/ file and compares them byte for byte."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conformance.tools import act2yaml, builders, check, go2yaml, plan

GO = '''package reclaim

const (
\tsmallQueue = "small-queue"
)

func getSyntheticTestsMetadata() []integration_tests_utils.TestTopologyMetadata {
\treturn []integration_tests_utils.TestTopologyMetadata{
\t\t{
\t\t\tTestTopologyBasic: test_utils.TestTopologyBasic{
\t\t\t\tName: "synthetic: one pending job reclaims a 2-GPU pod",
\t\t\t\tJobs: []*jobs_fake.TestJobBasic{
\t\t\t\t\t{
\t\t\t\t\t\tName:                "hog",
\t\t\t\t\t\tRequiredGPUsPerTask: 2,
\t\t\t\t\t\tPriority:            constants.PriorityTrainNumber,
\t\t\t\t\t\tQueueName:           "big-queue",
\t\t\t\t\t\tTasks: []*tasks_fake.TestTaskBasic{
\t\t\t\t\t\t\t{NodeName: "n1", State: pod_status.Running},
\t\t\t\t\t\t},
\t\t\t\t\t}, {
\t\t\t\t\t\tName:                "waiting",
\t\t\t\t\t\tRequiredGPUsPerTask: 0.5,
\t\t\t\t\t\tPriority:            constants.PriorityBuildNumber,
\t\t\t\t\t\tQueueName:           smallQueue, // a file constant
\t\t\t\t\t\tJobAgeInMinutes:     7,
\t\t\t\t\t\tTasks: []*tasks_fake.TestTaskBasic{
\t\t\t\t\t\t\t{State: pod_status.Pending},
\t\t\t\t\t\t},
\t\t\t\t\t},
\t\t\t\t},
\t\t\t\tNodes: map[string]nodes_fake.TestNodeBasic{
\t\t\t\t\t"n1": {GPUs: 2, CPUMemory: 2000},
\t\t\t\t},
\t\t\t\tQueues: []test_utils.TestQueueBasic{
\t\t\t\t\t{Name: "big-queue", DeservedGPUs: 0, GPUOverQuotaWeight: 1},
\t\t\t\t\t{Name: smallQueue, DeservedGPUs: 1, MaxAllowedGPUs: 1 + 1},
\t\t\t\t},
\t\t\t\tJobExpectedResults: map[string]test_utils.TestExpectedResultBasic{
\t\t\t\t\t"hog":     {GPUsRequired: 2, Status: pod_status.Releasing},
\t\t\t\t\t"waiting": {NodeName: "n1", GPUsRequired: 0.5, Status: pod_status.Pipelined},
\t\t\t\t},
\t\t\t\tMocks: &test_utils.TestMock{
\t\t\t\t\tCacheRequirements: &test_utils.CacheMocking{
\t\t\t\t\t\tNumberOfCacheEvictions:  1,
\t\t\t\t\t\tNumberOfPipelineActions: 1,
\t\t\t\t\t},
\t\t\t\t},
\t\t\t},
\t\t\tRoundsUntilMatch: 1,
\t\t},
\t\t{
\t\t\tTestTopologyBasic: test_utils.TestTopologyBasic{
\t\t\t\tName:  "synthetic: an unknown field",
\t\t\t\tNodes: map[string]nodes_fake.TestNodeBasic{"n1": {GPUs: 1, GPUName: "X"}},
\t\t\t},
\t\t},
\t}
}
'''

EXPECTED = """\
name: 'synthetic: one pending job reclaims a 2-GPU pod'
category: reclaim
source: pkg/scheduler/actions/reclaim/synthetic_test.go
source_line: 9
actions: [reclaim]
match_mode: raw_session
rounds: 1
rounds_after_match: 0
nodes:
- name: n1
  gpus: 2
  cpu_millis: 20000000
  memory_mb: 0.002
  gpu_memory_mib: 100
  labels: {}
queues:
- name: default
  parent: null
  kind: department
  priority: 100
  created_offset_minutes: 0
  gpu: {quota: -1, limit: -1, over_quota_weight: -1}
  cpu: {quota: -1, limit: -1, over_quota_weight: 1}
  memory: {quota: -1, limit: -1, over_quota_weight: 1}
- name: big-queue
  parent: default
  kind: queue
  priority: 100
  created_offset_minutes: 0
  gpu: {quota: 0, limit: -1, over_quota_weight: 1}
  cpu: {quota: -1, limit: -1, over_quota_weight: 1}
  memory: {quota: -1, limit: -1, over_quota_weight: 1}
- name: small-queue
  parent: default
  kind: queue
  priority: 100
  created_offset_minutes: 1
  gpu: {quota: 1, limit: 2, over_quota_weight: 0}
  cpu: {quota: -1, limit: -1, over_quota_weight: 1}
  memory: {quota: -1, limit: -1, over_quota_weight: 1}
jobs:
- name: hog
  queue: big-queue
  priority: 50
  preemptible: true
  gpus_per_task: 2
  cpu_millis: 1000
  memory_mb: 1000
  created_minutes_ago: 1
  min_member: 1
  tasks:
  - {name: hog-0, state: Running, node: n1}
- name: waiting
  queue: small-queue
  priority: 100
  preemptible: false
  gpus_per_task: 0.5
  cpu_millis: 1000
  memory_mb: 1000
  created_minutes_ago: 7
  min_member: 1
  tasks:
  - {name: waiting-0, state: Pending}
expected:
  jobs:
    hog: {status: Releasing, gpus_required: 2}
    waiting: {status: Pipelined, node: n1, gpus_required: 0.5}
  max_per_round: {binds: 0, evictions: 1, pipelines: 1}
"""

NOTES = [
    "Per-action test: the source builds one session (test_utils.BuildSession), runs only reclaim.New().Execute(ssn) "
    "and checks the raw session (MatchExpectedAndRealTasks).",
    "No Departments in source: KAI test utils add department 'default' (gpu quota -1, limit -1, over_quota_weight -1) "
    "and make it the parent of every queue.",
    "job waiting: JobAgeInMinutes 7 in source -> created_minutes_ago.",
    "The case sets RoundsUntilMatch 1: the integration harness's fields, which this per-action test does not read (one "
    "session, one action).",
]
PATH = "pkg/scheduler/actions/reclaim/synthetic_test.go"


def test_cases_lists_every_table_element_with_its_line() -> None:
    assert plan.cases(GO) == [(9, '"synthetic: one pending job reclaims a 2-GPU pod"'),
                              (52, '"synthetic: an unknown field"')]


def test_a_synthetic_table_case_converts_to_the_expected_file() -> None:
    text = act2yaml.convert(GO, PATH, 9, "reclaim")
    head, _, notes = text.partition("notes:\n")
    assert head == EXPECTED
    assert yaml.safe_load("notes:\n" + notes) == {"notes": NOTES}


def test_an_unknown_go_field_raises() -> None:
    with pytest.raises(ValueError, match="GPUName"):
        act2yaml.convert(GO, PATH, 52, "reclaim")


def test_the_integration_form_and_its_check(tmp_path: Path) -> None:
    """go2yaml restates the same case for the integration folders (every action, RoundsUntilMatch kept), and check
    finds a file that agrees and one that does not."""
    kai = tmp_path / "kai"
    (kai / PATH).parent.mkdir(parents=True)
    (kai / PATH).write_text(GO)
    text = go2yaml.convert(kai, PATH, 9, "reclaim")
    sc = yaml.safe_load(text)
    assert (sc["match_mode"], sc["rounds"], sc["rounds_after_match"]) == ("projected", 1, 5)
    assert sc["actions"] == ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"]
    same, other = tmp_path / "reclaim-01.yaml", tmp_path / "reclaim-02.yaml"
    same.write_text(text)
    other.write_text(text.replace("gpus_required: 0.5", "gpus_required: 1"))
    out: list[str] = []
    assert go2yaml.main(["--kai-source", str(kai), PATH, "9", "reclaim"], out.append) == 0
    assert out == [text]
    out.clear()
    assert check.main(["--kai-source", str(kai), str(same)], out.append) == 0
    assert check.main(["--kai-source", str(kai), str(same), str(other)], out.append) == 1
    assert out[0] == f"{tmp_path.name}/reclaim-01.yaml: same\n"
    assert ".expected.jobs.waiting.gpus_required: file=1 tool=0.5" in out[-2]
    assert out[-1] == "1 DIFFERS, 1 same\n"


KAI_SOURCE = os.environ.get("KAI_SOURCE")


@pytest.mark.skipif(not KAI_SOURCE, reason="set KAI_SOURCE to a checkout of KAI-Scheduler at d5bc503a")
def test_every_kai_actions_file_regenerates_byte_for_byte(tmp_path: Path) -> None:
    out: list[str] = []
    assert act2yaml.main(["--kai-source", str(KAI_SOURCE), "--out", str(tmp_path)], out.append) == 0
    repo = Path(__file__).parent / "conformance" / "kai-actions"
    have = {p.name: p.read_text() for p in repo.glob("*.yaml")}
    made = {p.name: p.read_text() for p in tmp_path.glob("*.yaml")}
    assert sorted(made) == sorted(have)
    assert [n for n in sorted(have) if have[n] != made[n]] == []


@pytest.mark.parametrize(("made", "path"), [
    (builders.preempt_05, "kai-actions/preempt-05.yaml"), (builders.preempt_20, "kai-actions/preempt-20.yaml"),
    (builders.reclaim_50_more, "kai-more/reclaim-50.yaml"), (builders.reclaim_51_more, "kai-more/reclaim-51.yaml")])
def test_the_hand_written_files_are_the_repositorys(made: Callable[[], str], path: str) -> None:
    assert made() == (Path(__file__).parent / "conformance" / path).read_text()


def test_an_unknown_constant_is_reported_not_guessed() -> None:
    assert go2yaml.evaluate(["constants.PriorityBuildNumber", "+", "1"], {}) == 101
    with pytest.raises(ValueError, match=r"cannot evaluate constants\.SpreadStrategy"):
        go2yaml.evaluate(["constants.SpreadStrategy"], {})


def test_a_checkout_at_another_commit_is_warned_about(tmp_path: Path) -> None:
    assert go2yaml.revision_warning(tmp_path) is None  # not a git checkout: nothing to say
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    warning = go2yaml.revision_warning(tmp_path)
    assert warning is not None and "not d5bc503a" in warning
