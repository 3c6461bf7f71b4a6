"""Scenario tests: small clusters written as Kubernetes YAML, each with its expected outcome.

Every ``tests/scenarios/*.yaml`` file is one test case, named after the file. Its first YAML document
is a ``test.kai/v1`` ``Scenario`` (the engine ignores unknown kinds); the rest is the cluster. The file
is run through the CLI exactly as a user would run it::

    kaictl dry-run --snapshot FILE --cycles N -o json --now 1767225600 [--config CONFIG]

(in-process, with typer's ``CliRunner``), and the JSON it prints is checked against ``expect``. The
format is documented in ``tests/scenarios/README.md``. Unknown keys anywhere in the Scenario document
fail the test, so that a typo cannot make a check pass silently. A scenario that shows an engine bug
keeps the correct expectation and names the bug in ``knownBug``: it then runs as a strict xfail.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kaictl.app import app

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
NOW = "1767225600"  # 2026-01-01T00:00:00Z: every scenario sees the same clock
SCENARIO_API = "test.kai/v1"
STATUSES = {"Running", "Pending", "Pipelined", "Releasing", "Evicted", "Succeeded"}
TOP_KEYS = {"apiVersion", "kind", "metadata", "description", "cycles", "config", "expect", "knownBug"}

Json = dict[str, Any]


class ScenarioError(Exception):
    """A scenario file that is malformed (as opposed to one whose expectation fails)."""


# ------------------------------------------------------------------------------------------ loading
def load_scenario(path: Path) -> Json:
    """The Scenario document of a file, validated for shape (not for expectations)."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    if not docs or not isinstance(docs[0], dict) or docs[0].get("kind") != "Scenario":
        raise ScenarioError(f"{path.name}: the first document must be kind: Scenario")
    sc: Json = docs[0]
    if sc.get("apiVersion") != SCENARIO_API:
        raise ScenarioError(f"{path.name}: Scenario apiVersion must be {SCENARIO_API}")
    unknown = set(sc) - TOP_KEYS
    if unknown:
        raise ScenarioError(f"{path.name}: unknown Scenario keys {sorted(unknown)}; known: {sorted(TOP_KEYS)}")
    if not isinstance(sc.get("description"), str) or not sc["description"].strip():
        raise ScenarioError(f"{path.name}: a Scenario needs a description")
    cycles = sc.get("cycles", 1)
    if not isinstance(cycles, int) or isinstance(cycles, bool) or cycles < 1:
        raise ScenarioError(f"{path.name}: cycles must be a positive integer")
    if "config" in sc and not isinstance(sc["config"], dict):
        raise ScenarioError(f"{path.name}: config must be a mapping (a kai SchedulerConfig)")
    if not isinstance(sc.get("expect"), dict) or not sc["expect"]:
        raise ScenarioError(f"{path.name}: a Scenario needs a non-empty expect mapping")
    if "knownBug" in sc and (not isinstance(sc["knownBug"], str) or not sc["knownBug"].strip()):
        raise ScenarioError(f"{path.name}: knownBug must be a one-line description of the bug")
    if len(docs) < 2:
        raise ScenarioError(f"{path.name}: no cluster objects after the Scenario document")
    return sc


def run_dry_run(path: Path, sc: Json, tmp_path: Path) -> Json:
    """Run the scenario through ``kaictl dry-run`` and return its JSON."""
    args = ["dry-run", "--snapshot", str(path), "--cycles", str(sc.get("cycles", 1)), "-o", "json", "--now", NOW]
    if "config" in sc:
        cfg = tmp_path / "config.yaml"
        cfg.write_text(yaml.safe_dump(sc["config"]))
        args += ["--config", str(cfg)]
    result = CliRunner().invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, f"kaictl {' '.join(args)} exited {result.exit_code}:\n{result.output}"
    out: Json = json.loads(result.stdout)
    return out


# ------------------------------------------------------------------------------------------ checking
class Outcome:
    """The dry-run JSON, indexed for the checks."""

    def __init__(self, data: Json) -> None:
        self.data = data
        self.pods: dict[str, Json] = {f"{p['namespace']}/{p['name']}": p for p in data["pods"]}
        self.pending: dict[str, Json] = {f"{j['namespace']}/{j['podGroup']}": j for j in data["pending"]}
        self.binds = [a for a in data["actions"] if a["type"] == "bind"]
        self.evictions = [a for a in data["actions"] if a["type"] == "evict"]
        self.pipelines = [a for a in data["actions"] if a["type"] == "pipeline"]
        for p in data["pods"]:
            assert p["status"] in STATUSES, f"pod {p['namespace']}/{p['name']} has unknown status {p['status']}"

    def pod(self, key: str) -> Json:
        if key not in self.pods:
            raise AssertionError(f"no pod {key} in the output (pods: {', '.join(sorted(self.pods))})")
        return self.pods[key]

    def group_pods(self, key: str) -> list[Json]:
        ns, name = _split(key)
        pods = [p for p in self.data["pods"] if p["namespace"] == ns and p["podGroup"] == name]
        if not pods:
            groups = sorted({f"{p['namespace']}/{p['podGroup']}" for p in self.data["pods"]})
            raise AssertionError(f"no pods of pod group {key} in the output (pod groups: {', '.join(groups)})")
        return pods

    def reasons(self, key: str) -> list[Json]:
        if key not in self.pending:
            raise AssertionError(f"pod group {key} is not pending (pending: {', '.join(sorted(self.pending)) or '-'})")
        reasons: list[Json] = self.pending[key]["reasons"]
        return reasons

    def running(self, key: str) -> Json:
        p = self.pod(key)
        if p["status"] != "Running":
            raise AssertionError(f"pod {key} is {p['status']}, expected Running")
        return p

    def evictions_of(self, key: str) -> list[Json]:
        _split(key)
        found = [a for a in self.evictions if a["pod"] == key]
        if not found:
            raise AssertionError(f"pod {key} was never evicted (evicted: {', '.join(self.evicted()) or '-'})")
        return found

    def evicted(self) -> list[str]:
        return sorted({a["pod"] for a in self.evictions})

    def summary(self) -> str:
        lines = [f"  {k}: {p['status']} node={p['node']} gpus={p['gpus']} devices={p['gpuDevices']} "
                 f"group={p['podGroup']} queue={p['queue']}" for k, p in sorted(self.pods.items())]
        for k, j in sorted(self.pending.items()):
            lines.append(f"  pending {k}:")
            lines += [f"    {r['reason']}: {r['message']}" for r in j["reasons"]]
        lines += [f"  problem {p['kind']} {p['name']}: {p['reason']}: {p['message']}" for p in self.data["problems"]]
        lines += [f"  cycle {a['cycle']} {a['type']} {a['pod']} on {a['node']} ({a['reason']}, by {a['by']})"
                  + (f": {a['message']}" if a.get("message") else "")
                  for a in self.data["actions"] if a["type"] != "bind"]
        return "\n".join(lines)


def _split(key: str) -> tuple[str, str]:
    if not isinstance(key, str) or key.count("/") != 1:
        raise ScenarioError(f"{key!r} must be written namespace/name")
    ns, name = key.split("/")
    return ns, name


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not value:
        raise ScenarioError(f"expect.{what} must be a non-empty mapping")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ScenarioError(f"expect.{what} must be a list")
    return value


def _groups(value: Any, what: str) -> list[list[str]]:
    groups = _list(value, what)
    for g in groups:
        if not isinstance(g, list) or len(g) < 2:
            raise ScenarioError(f"expect.{what} must be a list of lists of two or more pods")
    return groups


def check_running(out: Outcome, spec: Any) -> None:
    for key, node in _mapping(spec, "running").items():
        p = out.running(key)
        if node != "*" and p["node"] != node:
            raise AssertionError(f"pod {key} runs on {p['node']}, expected {node}")


def check_pending(out: Outcome, spec: Any) -> None:
    for key in _list(spec, "pending"):
        p = out.pod(key)
        if p["status"] != "Pending":
            raise AssertionError(f"pod {key} is {p['status']} on {p['node']}, expected Pending")


def check_status(out: Outcome, spec: Any) -> None:
    for key, status in _mapping(spec, "status").items():
        if status not in STATUSES:
            raise ScenarioError(f"expect.status: {status!r} is not one of {sorted(STATUSES)}")
        p = out.pod(key)
        if p["status"] != status:
            raise AssertionError(f"pod {key} is {p['status']}, expected {status}")


def check_running_count(out: Outcome, spec: Any) -> None:
    n = sum(1 for p in out.pods.values() if p["status"] == "Running")
    if n != spec:
        raise AssertionError(f"{n} pods are Running, expected {spec}")


def _pod_field(name: str) -> Callable[[Outcome, Any], None]:
    def check(out: Outcome, spec: Any) -> None:
        for key, want in _mapping(spec, name).items():
            got = out.pod(key)[name]
            if got != want:
                raise AssertionError(f"pod {key} has {name} {got!r}, expected {want!r}")
    return check


def check_pending_groups(out: Outcome, spec: Any) -> None:
    want = sorted(_list(spec, "pendingPodGroups"))
    got = sorted(out.pending)
    if got != want:
        raise AssertionError(f"pending pod groups are {got}, expected exactly {want}")


def check_pending_reasons(out: Outcome, spec: Any) -> None:
    for key, codes in _mapping(spec, "pendingReasons").items():
        got = [r["reason"] for r in out.reasons(key)]
        missing = [c for c in _list(codes, f"pendingReasons.{key}") if c not in got]
        if missing:
            raise AssertionError(f"pod group {key} lacks reasons {missing}; its reasons are {got}")


def check_absent_reasons(out: Outcome, spec: Any) -> None:
    for key, codes in _mapping(spec, "absentReasons").items():
        got = [r["reason"] for r in out.reasons(key)]
        present = [c for c in _list(codes, f"absentReasons.{key}") if c in got]
        if present:
            raise AssertionError(f"pod group {key} has reasons {present} it should not have; reasons: {got}")


def check_message_contains(out: Outcome, spec: Any) -> None:
    for key, parts in _mapping(spec, "messageContains").items():
        messages = [r["message"] for r in out.reasons(key)]
        for part in _list(parts, f"messageContains.{key}"):
            if not any(part in m for m in messages):
                raise AssertionError(f"no reason message of {key} contains {part!r}; messages: {messages}")


def check_reason_details(out: Outcome, spec: Any) -> None:
    for key, by_code in _mapping(spec, "reasonDetails").items():
        reasons = out.reasons(key)
        for code, want in _mapping(by_code, f"reasonDetails.{key}").items():
            found = [r.get("details", {}) for r in reasons if r["reason"] == code]
            if not found:
                raise AssertionError(f"pod group {key} has no {code} reason; reasons: {[r['reason'] for r in reasons]}")
            if not any(all(d.get(k) == v for k, v in _mapping(want, f"reasonDetails.{key}.{code}").items())
                       for d in found):
                raise AssertionError(f"{key} {code} details are {found}, expected to include {want}")


def check_same_node(out: Outcome, spec: Any) -> None:
    for group in _groups(spec, "sameNode"):
        nodes = {k: out.running(k)["node"] for k in group}
        if len(set(nodes.values())) != 1:
            raise AssertionError(f"pods {group} should share a node; they run on {nodes}")


def check_different_nodes(out: Outcome, spec: Any) -> None:
    for group in _groups(spec, "differentNodes"):
        nodes = {k: out.running(k)["node"] for k in group}
        if len(set(nodes.values())) != len(group):
            raise AssertionError(f"pods {group} should each run on a different node; they run on {nodes}")


def _devices(out: Outcome, key: str) -> tuple[str, set[int]]:
    p = out.running(key)
    if not p["gpuDevices"]:
        raise AssertionError(f"pod {key} holds no GPU device")
    return p["node"], set(p["gpuDevices"])


def check_same_device(out: Outcome, spec: Any) -> None:
    for group in _groups(spec, "sameDevice"):
        devs = [_devices(out, k) for k in group]
        first_node, common = devs[0]
        for node, d in devs[1:]:
            common &= d if node == first_node else set()
        if not common:
            held = dict(zip(group, devs, strict=True))
            raise AssertionError(f"pods {group} should share a GPU device; they hold {held}")


def check_different_device(out: Outcome, spec: Any) -> None:
    for group in _groups(spec, "differentDevice"):
        devs = [_devices(out, k) for k in group]
        for i in range(len(devs)):
            for j in range(i + 1, len(devs)):
                if devs[i][0] == devs[j][0] and devs[i][1] & devs[j][1]:
                    raise AssertionError(f"pods {group[i]} and {group[j]} share a GPU device: {devs[i]} / {devs[j]}")


def _nodes_of(out: Outcome, key: str) -> set[str]:
    return {p["node"] for p in out.group_pods(key) if p["status"] == "Running"}


def check_nodes_used(out: Outcome, spec: Any) -> None:
    for key, n in _mapping(spec, "nodesUsed").items():
        nodes = _nodes_of(out, key)
        if len(nodes) != n:
            raise AssertionError(f"pod group {key} runs on {len(nodes)} nodes {sorted(nodes)}, expected exactly {n}")


def check_max_nodes_used(out: Outcome, spec: Any) -> None:
    for key, n in _mapping(spec, "maxNodesUsed").items():
        nodes = _nodes_of(out, key)
        if not nodes or len(nodes) > n:
            raise AssertionError(f"pod group {key} runs on {sorted(nodes)}, expected 1 to {n} nodes")


def check_all_on_nodes(out: Outcome, spec: Any) -> None:
    for key, allowed in _mapping(spec, "allOnNodes").items():
        pods = out.group_pods(key)
        for p in pods:
            if p["status"] != "Running" or p["node"] not in _list(allowed, f"allOnNodes.{key}"):
                raise AssertionError(f"pod {p['namespace']}/{p['name']} of {key} is {p['status']} on {p['node']}, "
                                     f"expected Running on one of {allowed}")


def check_problems(out: Outcome, spec: Any) -> None:
    want = sorted(set(_list(spec, "problems")))
    got = sorted({p["reason"] for p in out.data["problems"]})
    if got != want:
        raise AssertionError(f"problem codes are {got}, expected exactly {want}")


def check_problem_messages(out: Outcome, spec: Any) -> None:
    messages = [p["message"] for p in out.data["problems"]]
    for part in _list(spec, "problemMessageContains"):
        if not any(part in m for m in messages):
            raise AssertionError(f"no problem message contains {part!r}; messages: {messages}")


def check_bound_count(out: Outcome, spec: Any) -> None:
    if len(out.binds) != spec:
        raise AssertionError(f"{len(out.binds)} binds, expected {spec}: {[b['pod'] for b in out.binds]}")


def check_bound_in_cycle(out: Outcome, spec: Any) -> None:
    for key, cycle in _mapping(spec, "boundInCycle").items():
        cycles = [b["cycle"] for b in out.binds if b["pod"] == key]
        if cycles != [cycle]:
            raise AssertionError(f"pod {key} was bound in cycles {cycles}, expected once, in cycle {cycle}")


def check_evicted(out: Outcome, spec: Any) -> None:
    want = sorted(set(_list(spec, "evicted")))
    for key in want:
        _split(key)
    got = out.evicted()
    if got != want:
        raise AssertionError(f"evicted pods are {got}, expected exactly {want}")


def check_not_evicted(out: Outcome, spec: Any) -> None:
    keys = _list(spec, "notEvicted")
    for key in keys:
        _split(key)
    hit = [k for k in keys if any(a["pod"] == k for a in out.evictions)]
    if hit:
        raise AssertionError(f"pods {hit} were evicted, expected never")


def _eviction_field(name: str, field: str) -> Callable[[Outcome, Any], None]:
    def check(out: Outcome, spec: Any) -> None:
        for key, want in _mapping(spec, name).items():
            got = [a[field] for a in out.evictions_of(key)]
            if any(g != want for g in got):
                raise AssertionError(f"pod {key} was evicted with {field} {got}, expected {want!r}")
    return check


def check_evicted_in_cycle(out: Outcome, spec: Any) -> None:
    for key, cycle in _mapping(spec, "evictedInCycle").items():
        cycles = [a["cycle"] for a in out.evictions_of(key)]
        if cycles != [cycle]:
            raise AssertionError(f"pod {key} was evicted in cycles {cycles}, expected once, in cycle {cycle}")


def check_eviction_messages(out: Outcome, spec: Any) -> None:
    for key, parts in _mapping(spec, "evictionMessageContains").items():
        messages = [a.get("message") or "" for a in out.evictions_of(key)]
        for part in _list(parts, f"evictionMessageContains.{key}"):
            if not any(part in m for m in messages):
                raise AssertionError(f"no eviction message of {key} contains {part!r}; messages: {messages}")


def check_pipelined(out: Outcome, spec: Any) -> None:
    for key, node in _mapping(spec, "pipelined").items():
        _split(key)
        nodes = [a["node"] for a in out.pipelines if a["pod"] == key]
        if not nodes:
            raise AssertionError(f"pod {key} was never pipelined")
        if node != "*" and node not in nodes:
            raise AssertionError(f"pod {key} was pipelined onto {nodes}, expected {node}")


ACTION_TYPES = {"bind", "evict", "pipeline"}
ACTION_REASONS = {"allocate", "reclaim", "preempt", "consolidate", "stale-gang"}


def check_actions_count(out: Outcome, spec: Any) -> None:
    for key, n in _mapping(spec, "actionsCount").items():
        kind, _, reason = str(key).partition("/")
        if kind not in ACTION_TYPES or (reason and reason not in ACTION_REASONS):
            raise ScenarioError(f"expect.actionsCount: {key!r} must be TYPE or TYPE/REASON with TYPE one of "
                                f"{sorted(ACTION_TYPES)} and REASON one of {sorted(ACTION_REASONS)}")
        got = [a for a in out.data["actions"] if a["type"] == kind and (not reason or a["reason"] == reason)]
        if len(got) != n:
            raise AssertionError(f"{len(got)} {key} actions, expected {n}: "
                                 f"{[(a['cycle'], a['pod'], a['reason']) for a in got]}")


CHECKS: dict[str, Callable[[Outcome, Any], None]] = {
    "running": check_running,
    "pending": check_pending,
    "status": check_status,
    "runningCount": check_running_count,
    "podGroup": _pod_field("podGroup"),
    "queue": _pod_field("queue"),
    "gpus": _pod_field("gpus"),
    "gpuGroup": _pod_field("gpuGroup"),
    "pendingPodGroups": check_pending_groups,
    "pendingReasons": check_pending_reasons,
    "absentReasons": check_absent_reasons,
    "messageContains": check_message_contains,
    "reasonDetails": check_reason_details,
    "sameNode": check_same_node,
    "differentNodes": check_different_nodes,
    "sameDevice": check_same_device,
    "differentDevice": check_different_device,
    "nodesUsed": check_nodes_used,
    "maxNodesUsed": check_max_nodes_used,
    "allOnNodes": check_all_on_nodes,
    "problems": check_problems,
    "problemMessageContains": check_problem_messages,
    "boundCount": check_bound_count,
    "boundInCycle": check_bound_in_cycle,
    "evicted": check_evicted,
    "notEvicted": check_not_evicted,
    "evictedBy": _eviction_field("evictedBy", "by"),
    "evictReason": _eviction_field("evictReason", "reason"),
    "evictedInCycle": check_evicted_in_cycle,
    "evictionMessageContains": check_eviction_messages,
    "pipelined": check_pipelined,
    "actionsCount": check_actions_count,
}


def check(sc: Json, data: Json) -> list[str]:
    """Every failed expectation of ``sc`` against ``data``, one line each."""
    unknown = set(sc["expect"]) - set(CHECKS)
    if unknown:
        raise ScenarioError(f"unknown expectation keys {sorted(unknown)}; known: {sorted(CHECKS)}")
    out = Outcome(data)
    failures = []
    for name, spec in sc["expect"].items():
        try:
            CHECKS[name](out, spec)
        except AssertionError as err:
            failures.append(f"{name}: {err}")
    if failures:
        failures.append("outcome:\n" + out.summary())
    return failures


# ------------------------------------------------------------------------------------------ cases
def _cases() -> list[Any]:
    cases = []
    for path in sorted(SCENARIO_DIR.glob("*.yaml")):
        marks = []
        try:
            bug = load_scenario(path).get("knownBug")
        except (ScenarioError, yaml.YAMLError):
            bug = None  # reported by the test itself
        if bug:
            marks.append(pytest.mark.xfail(strict=True, reason=f"known engine bug: {bug}"))
        cases.append(pytest.param(path, id=path.stem, marks=marks))
    return cases


@pytest.mark.parametrize("path", _cases())
def test_scenario(path: Path, tmp_path: Path) -> None:
    sc = load_scenario(path)
    data = run_dry_run(path, sc, tmp_path)
    failures = check(sc, data)
    assert not failures, f"{path.name}: {sc['description']}\n" + "\n".join(failures)


def test_enough_scenarios() -> None:
    assert len(list(SCENARIO_DIR.glob("*.yaml"))) >= 45


def test_unknown_expectation_key_fails() -> None:
    sc = {"expect": {"runing": {"ns/p": "*"}}}
    with pytest.raises(ScenarioError, match="unknown expectation keys"):
        check(sc, {"pods": [], "pending": [], "actions": [], "problems": []})


def test_unknown_scenario_key_fails(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: test.kai/v1\nkind: Scenario\ndescription: x\nexpect: {boundCount: 0}\n"
                    "cylces: 2\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n")
    with pytest.raises(ScenarioError, match="unknown Scenario keys"):
        load_scenario(path)


def test_failed_expectation_is_reported() -> None:
    data: Json = {"pods": [{"namespace": "ns", "name": "p", "podGroup": "pg-pod-p", "queue": "q", "status": "Pending",
                      "node": None, "gpus": 1, "gpuDevices": [], "gpuGroup": None}],
            "pending": [], "actions": [], "problems": []}
    failures = check({"expect": {"running": {"ns/p": "*"}, "pending": ["ns/p"]}}, data)
    assert failures[0].startswith("running: pod ns/p is Pending")
    assert len(failures) == 2  # the failure and the outcome summary


def test_enough_eviction_scenarios() -> None:
    assert len(list(SCENARIO_DIR.glob("evict-*.yaml"))) >= 42


def _evicting_outcome() -> Json:
    pod: Json = {"namespace": "ns", "podGroup": "pg-pod-v", "queue": None, "node": None, "gpus": 0, "gpuDevices": [],
           "gpuGroup": None}
    return {"pods": [{**pod, "name": "v", "status": "Evicted"},
                     {**pod, "name": "w", "podGroup": "job", "queue": "q", "status": "Pipelined", "node": "n"}],
            "pending": [], "problems": [],
            "actions": [{"cycle": 1, "type": "evict", "pod": "ns/v", "node": "n", "reason": "reclaim", "by": "ns/job",
                         "message": "reclaimed for ns/job: queue q has 0 GPUs"},
                        {"cycle": 1, "type": "pipeline", "pod": "ns/w", "node": "n", "reason": "reclaim",
                         "by": "ns/job"}]}


def test_eviction_expectations() -> None:
    data = _evicting_outcome()
    ok: Json = {"evicted": ["ns/v"], "notEvicted": ["ns/w"], "evictedBy": {"ns/v": "ns/job"},
                "evictReason": {"ns/v": "reclaim"}, "evictedInCycle": {"ns/v": 1},
                "evictionMessageContains": {"ns/v": ["queue q has 0 GPUs"]}, "pipelined": {"ns/w": "n"},
                "actionsCount": {"evict": 1, "evict/reclaim": 1, "pipeline/preempt": 0, "bind": 0}}
    assert check({"expect": ok}, data) == []
    bad: Json = {"evicted": [], "notEvicted": ["ns/v"], "evictedBy": {"ns/v": "ns/other"},
                 "evictReason": {"ns/v": "preempt"}, "evictedInCycle": {"ns/v": 2},
                 "evictionMessageContains": {"ns/v": ["fair share of 9"]}, "pipelined": {"ns/w": "m", "ns/v": "*"},
                 "actionsCount": {"evict/reclaim": 2}}
    failures = check({"expect": bad}, data)
    assert [f.split(":")[0] for f in failures[:-1]] == list(bad)


def test_actions_count_rejects_unknown_kinds() -> None:
    with pytest.raises(ScenarioError, match="TYPE or TYPE/REASON"):
        check({"expect": {"actionsCount": {"evict/steal": 1}}}, _evicting_outcome())
