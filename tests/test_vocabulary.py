"""The typed vocabulary stands for the strings and numbers it replaced: outputs and files read the same."""

from __future__ import annotations

import json

import yaml

from kaid.api.config import Action, SchedulerConfig
from kaid.api.serialize import to_yaml
from kaid.model.build import build_snapshot
from kaid.model.vocabulary import (
    HOLDS_RESOURCES,
    RESOURCES,
    NodeFailure,
    PodStatus,
    ReasonCode,
    Resource,
)
from tests.objects import node, pod


def test_resources_keep_their_indexes_and_names() -> None:
    assert [int(r) for r in Resource] == [0, 1, 2]
    assert [r.key for r in Resource] == list(RESOURCES) == ["gpu", "cpu", "memory"]
    assert [0, 1, 2][Resource.MEM] == 2


def test_string_enums_equal_their_strings_in_comparisons_and_sets() -> None:
    running, pending, bound = "Running", "Pending", "Bound"  # as code that still uses literals has them
    assert running == PodStatus.RUNNING and running in HOLDS_RESOURCES
    assert pending not in HOLDS_RESOURCES and PodStatus.ALLOCATED not in HOLDS_RESOURCES
    assert {str(PodStatus.BOUND): 1}.get(bound) == 1 and hash(PodStatus.BOUND) == hash(bound)
    assert NodeFailure.TAINT.words == "untolerated taint"


def test_pod_statuses_are_one_documented_set() -> None:
    assert {s.value for s in PodStatus} == {"Pending", "Bound", "Running", "Releasing", "Pipelined", "NodeGone",
                                            "Allocated", "Evicted"}


def test_json_and_yaml_write_the_values() -> None:
    data = {"reason": ReasonCode.NODE_FIT, "status": PodStatus.PIPELINED, "resource": Resource.CPU,
            PodStatus.RUNNING: [Action.STALE_GANG]}
    plain = {"reason": "NodeFit", "status": "Pipelined", "resource": 1, "Running": ["stale-gang"]}
    assert json.loads(json.dumps(data)) == plain
    assert yaml.safe_load(to_yaml(data)) == plain


def test_the_config_reads_and_writes_action_names() -> None:
    cfg = SchedulerConfig.model_validate({"actions": ["allocate", "stale-gang"]})
    assert cfg.actions == (Action.ALLOCATE, Action.STALE_GANG)
    assert cfg.model_dump(mode="json")["actions"] == ["allocate", "stale-gang"]


def test_a_snapshot_gives_pods_statuses_of_the_vocabulary() -> None:
    snap = build_snapshot([node("n1"), pod("a", gpus=1, node_name="n1", phase="Running"), pod("b", gpus=1)])
    assert {p.name: p.status for p in snap.pods} == {"a": PodStatus.RUNNING, "b": PodStatus.PENDING}
    assert all(isinstance(p.status, PodStatus) for p in snap.pods)
