"""KAI-Scheduler's own scheduler tests, run against kai the way KAI's harness runs them.

The scenario files and the fair-share cases are in ``kai/`` beside this file (``kai/FORMAT.md`` says what
they hold), and in ``kai-more/`` the project's own restatement of more of KAI's tests in the same format
(its README says how they were made), in ``kai-actions/`` KAI's per-action tests (one action on one session, its
raw end checked) restated the same way; ``KAI_CONFORMANCE_DIR`` (directories separated by ``:``) adds more.
A test that fails and is listed in ``docs/compatibility-deviations.yaml`` is reported as a deviation
(xfail); a listed test that passes fails, so that the list stays true.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.deviations import Kind, load_deviations
from tests.conformance.fairshare import DivisionCase, load_cases, run_case
from tests.conformance.report import Group, Outcome, record
from tests.conformance.scenario import MatchMode, Scenario, load_scenario
from tests.conformance.translate import initial_state, objects
from tests.conformance.verdict import describe, verdict

HERE = Path(__file__).resolve().parent
SHARED, MORE, ACTIONS = HERE / "kai", HERE / "kai-more", HERE / "kai-actions"
DEVIATIONS = load_deviations()
SCENARIO_FILE = re.compile(r"[a-z_]+-[0-9]{2,3}\.yaml")  # <category>-<nn>; kai-actions' allocate runs past 99


def _dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("KAI_CONFORMANCE_DIR", "").split(":") if p]
    return [SHARED, MORE, ACTIONS, *extra]


def _scenarios() -> list[Any]:
    out = []
    for d in _dirs():
        for path in sorted(p for p in d.glob("*-[0-9][0-9]*.yaml") if SCENARIO_FILE.fullmatch(p.name)):
            out.append(pytest.param(path, id=path.stem if d == SHARED else f"{d.name}/{path.stem}"))
    return out


def _cases() -> list[Any]:
    out = []
    for d in _dirs():
        path = d / "fairshare.yaml"
        if path.exists():
            prefix = "" if d == SHARED else f"{d.name}/"
            out += [pytest.param(c, id=f"{prefix}{c.source_line}") for c in load_cases(path)]
    return out


def _group(folder: Path) -> Group:
    return Group.PER_ACTION if folder == ACTIONS else Group.REFERENCE


def _conclude(where: tuple[Group, str, str], source: str, line: int, problems: list[str], detail: str) -> None:
    """Record the outcome (``where``: group, category, test id); fail, or xfail for a listed deviation."""
    group, category, test_id = where
    listed = DEVIATIONS.get((source, line))
    if not problems:
        record(group, category, test_id, Outcome.PASSED)
        if listed is not None:
            pytest.fail(f"{test_id} passes but is listed as {listed.kind} '{listed.rule}' in "
                        "docs/compatibility-deviations.yaml: take it off the list")
        return
    if listed is not None:
        record(group, category, test_id, Outcome.DEVIATION if listed.kind == Kind.DEVIATION else Outcome.OPEN)
        pytest.xfail(f"{listed.kind} '{listed.rule}': {problems[0]}")
    record(group, category, test_id, Outcome.FAILED)
    pytest.fail("\n".join(problems) + ("\n" + detail if detail else ""))


@pytest.mark.parametrize("path", _scenarios())
def test_kai_scenario(path: Path) -> None:
    sc: Scenario = load_scenario(path)
    problems = [str(m) for m in verdict(sc)]
    detail = f"{sc.name}\n{describe(sc)}" if problems else ""
    _conclude((_group(path.parent), sc.category, f"{path.parent.name}/{sc.id}"), sc.source, sc.source_line, problems,
              detail)


@pytest.mark.parametrize("case", _cases())
def test_kai_fairshare(case: DivisionCase) -> None:
    _conclude((Group.REFERENCE, "fairshare", case.id), case.source, case.source_line, run_case(case), case.name)


# KAI reads a test's nodes, queues and jobs into maps, and every tie between them is broken by a field the files
# hold (creation times, names), so its outcome cannot depend on the order the file lists them in. kai's may not
# either: each scenario runs again with the three lists reversed. A scenario listed here fails reversed (strict
# xfail: take it off once it passes), with what differs.
ORDER_DEPENDENT: dict[tuple[str, int], str] = {}


@pytest.mark.parametrize("path", _scenarios())
def test_kai_scenario_in_reverse_file_order(path: Path) -> None:
    sc = load_scenario(path)
    listed = DEVIATIONS.get((sc.source, sc.source_line))
    if listed is not None:
        pytest.skip(f"listed as {listed.kind} '{listed.rule}' in file order already")
    reversed_sc = dataclasses.replace(sc, nodes=sc.nodes[::-1], queues=sc.queues[::-1], jobs=sc.jobs[::-1])
    known = ORDER_DEPENDENT.get((sc.source, sc.source_line))
    problems = [str(m) for m in verdict(reversed_sc)]
    if known is not None:
        if problems:
            pytest.xfail(f"order-dependent: {known}")
        pytest.fail(f"{sc.id} passes in reverse order: take it off ORDER_DEPENDENT")
    assert not problems, "\n".join(problems) + f"\n{sc.name} (nodes, queues and jobs in reverse order)\n" + describe(
        reversed_sc)


def test_every_scenario_file_is_read() -> None:
    """The shared half is all here: 56 scenario files and 35 division cases."""
    assert len(list(SHARED.glob("*-[0-9][0-9].yaml"))) == 56
    assert len(load_cases(SHARED / "fairshare.yaml")) == 35


def test_more_restates_no_shared_test() -> None:
    """kai-more/ adds KAI tests: none of them is one the shared half already holds."""
    def keys(d: Path) -> set[tuple[str, int]]:
        found = {(s.source, s.source_line) for s in map(load_scenario, d.glob("*-[0-9][0-9].yaml"))}
        if (d / "fairshare.yaml").exists():
            found |= {(c.source, c.source_line) for c in load_cases(d / "fairshare.yaml")}
        return found

    assert not keys(SHARED) & keys(MORE)


def test_actions_files_run_one_action_on_one_session() -> None:
    """kai-actions/ restates KAI's per-action tests: one session, the one action the Go test executes, its raw end."""
    files = sorted(p for p in ACTIONS.glob("*-[0-9][0-9]*.yaml") if SCENARIO_FILE.fullmatch(p.name))
    assert files
    for sc in map(load_scenario, files):
        assert sc.match_mode == MatchMode.RAW_SESSION, sc.id
        assert (sc.rounds, sc.rounds_after_match) == (1, 0), sc.id
        assert sc.actions == (sc.category.value,), sc.id
        assert sc.source.startswith(f"pkg/scheduler/actions/{sc.category.value}/"), sc.id


def test_actions_fields_reach_the_objects() -> None:
    """kai-actions' extra fields become the objects KAI's test utilities make: the PodGroup's preemptionDelay, the
    pod's required node affinity on the node-name label, a task's own GPU request, memory finer than a MB, sub-groups'
    topology constraints."""
    sc = load_scenario(ACTIONS / "preempt-29.yaml")
    pgs = {o["metadata"]["name"]: o for o in objects(sc, initial_state(sc)) if o["kind"] == "PodGroup"}
    assert pgs["pending_job0"]["spec"]["preemptionDelay"] == "600s"
    assert "preemptionDelay" not in pgs["running_job0"]["spec"]
    sc = load_scenario(ACTIONS / "reclaim-80.yaml")
    pods = {o["metadata"]["name"]: o for o in objects(sc, initial_state(sc)) if o["kind"] == "Pod"}
    terms = pods["q1_job0-3"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "kai.scheduler/type", "operator": "In", "values": ["unexisting-node-affinity"]}]}]
    nodes = [o for o in objects(sc, initial_state(sc)) if o["kind"] == "Node"]
    assert all(n["metadata"]["labels"]["kai.scheduler/type"] == n["metadata"]["name"] for n in nodes)
    sc = load_scenario(ACTIONS / "consolidation-05.yaml")  # a task's own whole-GPU request (test util RequiredGPUs)
    pods = {o["metadata"]["name"]: o for o in objects(sc, initial_state(sc)) if o["kind"] == "Pod"}
    assert pods["pending_job0-1"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "3"
    sc = load_scenario(ACTIONS / "allocate-41.yaml")  # memory in bytes: CPUMemory 2000, RequiredMemoryPerTask 750
    nodes = [o for o in objects(sc, initial_state(sc)) if o["kind"] == "Node"]
    assert nodes[0]["status"]["allocatable"]["memory"] == "0.002M"
    sc = load_scenario(ACTIONS / "allocate-63.yaml")  # sub-groups' own topology constraints, the root's the job's
    pg = next(o for o in objects(sc, initial_state(sc)) if o["kind"] == "PodGroup")
    assert pg["spec"]["topologyConstraint"] == {"topology": "cluster-topology",
                                                "preferredTopologyLevel": "k8s.io/spine"}
    sub = {g["name"]: g for g in pg["spec"]["subGroups"]}
    assert sub["subgroup-a"]["topologyConstraint"] == {"topology": "cluster-topology",
                                                       "preferredTopologyLevel": "k8s.io/rack"}
    assert "topologyConstraint" not in sub["pod-a-1"]
    sc = load_scenario(ACTIONS / "allocate-102.yaml")  # pod labels, pod affinity and anti-affinity terms
    pod = next(o for o in objects(sc, initial_state(sc)) if o["metadata"]["name"] == "affinity-job-0")
    assert pod["metadata"]["labels"]["app"] == "database"
    term = {"labelSelector": {"matchLabels": {"app": "database"}}}
    assert pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"topologyKey": "topology.kubernetes.io/zone", **term}]
    assert pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"topologyKey": "kai.scheduler/type", **term}]
