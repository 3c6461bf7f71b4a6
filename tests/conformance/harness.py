"""KAI's test harness, for kai's engine: rounds of one scheduling cycle each, KAI's mapping of the end of a
session onto the next round's input, and the raw end-of-session state that the after-match rounds and the
``raw_session`` scenarios compare (``kai/FORMAT.md`` section 1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Snapshot
from tests.conformance.scenario import Scenario, TaskState
from tests.conformance.translate import T0, TaskStatus, harness_config, initial_state, objects


@dataclass(slots=True)
class Round:
    """One round: the raw end-of-session state of every task, and what the cache was asked to do."""

    raw: dict[str, TaskStatus]
    binds: int
    evictions: int
    pipelines: int
    decisions: Decisions


@dataclass
class Run:
    """A scenario run so far: the mapped state (the input of the next round) and every round."""

    scenario: Scenario
    state: dict[str, TaskStatus]
    rounds: list[Round] = field(default_factory=list)

    def snapshot(self) -> Snapshot:
        """A fresh session over the current state, no actions run (what KAI's projected match reads)."""
        cfg = harness_config(self.scenario)
        return build_snapshot(objects(self.scenario, self.state), cfg, T0)

    def step(self) -> Round:
        """Run one round and map its end state onto the next round's input."""
        cfg = harness_config(self.scenario)
        snap = build_snapshot(objects(self.scenario, self.state), cfg, T0)
        decisions = run_cycle(snap, cfg, bind_ready=False)  # (KAI's session binds no Pipelined task)
        raw = raw_state(self.state, decisions)
        self.state = {name: mapped(st) for name, st in raw.items()}
        rnd = Round(raw, len(decisions.binds), len(decisions.evictions), len(decisions.pipelined), decisions)
        self.rounds.append(rnd)
        return rnd


def start(sc: Scenario) -> Run:
    return Run(sc, initial_state(sc))


def _task_name(pod_key: str) -> str:
    return pod_key.split("/", 1)[1]


def raw_state(before: dict[str, TaskStatus], decisions: Decisions) -> dict[str, TaskStatus]:
    """Each task's status at the end of the session: Binding (bound now), Pipelined, Releasing (evicted
    now), or what it was. In the order a cycle's operations on one pod can come: bound by allocate, then evicted
    by a later action (Releasing: KAI evicts tasks it allocated in the same session), then placed again (a moved
    pod: Pipelined)."""
    raw = dict(before)
    for b in decisions.binds:
        name = _task_name(b.pod)
        raw[name] = TaskStatus(TaskState.BINDING, b.node, b.devices, b.gpu_group or raw[name].gpu_group, T0)
    for e in decisions.evictions:
        name = _task_name(e.pod)
        raw[name] = TaskStatus(TaskState.RELEASING, raw[name].node, raw[name].devices, raw[name].gpu_group,
                               raw[name].started)
    for p in decisions.pipelined:
        name = _task_name(p.pod)
        raw[name] = TaskStatus(TaskState.PIPELINED, p.node, p.devices, p.gpu_group or raw[name].gpu_group)
    return raw


def mapped(st: TaskStatus) -> TaskStatus:
    """KAI's mapping between rounds: binds run, pipelined and releasing tasks are pending again (an evicted
    pod is made again, pending), everything else stays as it is."""
    if st.state == TaskState.BINDING:
        return TaskStatus(TaskState.RUNNING, st.node, st.devices, st.gpu_group, st.started)
    if st.state in (TaskState.PIPELINED, TaskState.RELEASING):
        return st.pending()
    return st


def projected(run: Run) -> dict[str, TaskStatus]:
    """The state a fresh session sees after the rounds so far: Running, Pending, or an input status that
    persists (StuckInReleasing)."""
    return dict(run.state)
