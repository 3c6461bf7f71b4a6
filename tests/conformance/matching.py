"""KAI's matching of a scenario's expectations, with the two readings this suite allows (issue 12):

* node names may differ by a swap of interchangeable nodes (same capacity and labels), as long as the
  tasks are grouped on nodes the same way: one consistent one-to-one renaming must explain every node;
* a task KAI expects Pending may be Releasing (evicted) instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.conformance.scenario import Expectation, NodeSpec, Scenario, TaskState
from tests.conformance.translate import TaskStatus


@dataclass(frozen=True, slots=True)
class Mismatch:
    what: str

    def __str__(self) -> str:
        return self.what


def expected_per_task(sc: Scenario) -> dict[str, Expectation]:
    """Job expectations spread over the job's tasks, then the task expectations on top."""
    out: dict[str, Expectation] = {}
    for job in sc.jobs:
        exp = sc.expected_jobs.get(job.name)
        if exp is not None:
            out.update({t.name: exp for t in job.tasks})
    out.update(sc.expected_tasks)
    return out


def _status_ok(want: TaskState, got: TaskStatus) -> bool:
    if want == got.state:
        return True
    return want == TaskState.PENDING and got.state == TaskState.RELEASING


def _interchangeable(a: NodeSpec, b: NodeSpec) -> bool:
    return (a.gpus, a.cpu_millis, a.memory_mb, a.gpu_memory_mib, a.labels) == \
        (b.gpus, b.cpu_millis, b.memory_mb, b.gpu_memory_mib, b.labels)


def _node_of(want: Expectation, got: TaskStatus) -> str | None:
    """The node to compare: a pending task's expected node is the spec.nodeName preset in the input."""
    return got.preset_node if want.status == TaskState.PENDING else got.node


def match(sc: Scenario, state: dict[str, TaskStatus]) -> list[Mismatch]:
    """Every way ``state`` falls short of the expectations (empty: it matches)."""
    wants = expected_per_task(sc)
    out: list[Mismatch] = []
    renaming: dict[str, str] = {}
    nodes = {n.name: n for n in sc.nodes}
    for task, want in sorted(wants.items()):
        got = state[task]
        if not _status_ok(want.status, got):
            out.append(Mismatch(f"{task}: {got.state} on {got.node}, expected {want.status}"
                                + (f" on {want.node}" if want.node else "")))
            continue
        if want.node is None or want.status != got.state:
            continue
        actual = _node_of(want, got)
        if want.status == TaskState.PENDING:
            if actual != want.node:
                out.append(Mismatch(f"{task}: pending with node {actual}, expected its preset node {want.node}"))
            continue
        if actual is None or not _interchangeable(nodes[want.node], nodes[actual]):
            out.append(Mismatch(f"{task}: on {actual}, expected {want.node}"))
        elif renaming.setdefault(want.node, actual) != actual:
            out.append(Mismatch(f"{task}: on {actual}, but other tasks expected on {want.node} are on "
                                f"{renaming[want.node]}"))
    targets = list(renaming.values())
    if len(set(targets)) != len(targets):
        out.append(Mismatch(f"tasks expected on different nodes share one: {renaming}"))
    return out


def over_limits(sc: Scenario, binds: int, evictions: int, pipelines: int) -> list[Mismatch]:
    """KAI's per-round bounds on Bind, Evict and TaskPipelined calls (0: the call is forbidden)."""
    lim = sc.max_per_round
    out = []
    for what, got, most in (("binds", binds, lim.binds), ("evictions", evictions, lim.evictions),
                            ("pipelines", pipelines, lim.pipelines)):
        if got > most:
            out.append(Mismatch(f"{got} {what} in one round, at most {most} allowed"))
    return out
