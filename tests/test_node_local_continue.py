"""KAI's node-local scenario generator (d5bc503a, ``plugins/nodelocalgreedy/generator.go``) emits one scenario per
node of the newest victim's job, and its job solver (``job_solver.go`` SolveWithResult) goes on with the next one
when a simulation is rejected by the action's rules (its fingerprint recorded): a rule-rejected scenario of one
node does not end the accumulated scenario's other nodes (``by_node._solve_partial``).

Two full 2-GPU nodes: a gang V of two 1-GPU pods spans both (its job is drawn last: a higher priority), W runs on
n0 and Y on n1 (queue a, far above its share); a 2-GPU job of queue b waits. Once V is drawn, the node-local
scenarios are n0's (W and V) and n1's (Y and V). With the rules rejecting any scenario that takes W (evicted or
moved), n0's is rejected and n1's places the job: the node-local generator solves it. (Where it stopped at the
rejection, only the multi-node generator, left out here, could.)
"""

from __future__ import annotations

from typing import Any

import pytest

from kaid.actions import by_node
from kaid.actions.reclaim import ReclaimRules
from kaid.actions.scenario import Attempt, Outcome
from kaid.actions.session import Session
from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW


def _cluster() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [node("n0", gpus=2), node("n1", gpus=2),
                                  queue("a", gpu=(0, -1, 1)), queue("b", gpu=(-1, -1, 1)),
                                  podgroup("v", "a", 2, priority_class="build-preemptible"),
                                  podgroup("w", "a", 1, priority_class="train"),
                                  podgroup("y", "a", 1, priority_class="train"),
                                  podgroup("want", "b", 1, priority_class="train")]
    objs += [pod("v-0", gpus=1, group="v", node_name="n0"), pod("v-1", gpus=1, group="v", node_name="n1"),
             pod("w-0", gpus=1, group="w", node_name="n0"), pod("y-0", gpus=1, group="y", node_name="n1"),
             pod("want-0", gpus=2, group="want")]
    return objs


def test_a_rule_rejected_node_scenario_does_not_end_the_other_nodes() -> None:
    plain = ReclaimRules.valid
    simulated: list[list[str]] = []
    simulate = by_node._simulate

    def logged(session: Session, att: Attempt, search: Any, victims: Any, feasible: Any) -> Outcome | None:
        simulated.append(sorted(p.name for u in victims for p in u.pods))
        return simulate(session, att, search, victims, feasible)

    def no_w(self: ReclaimRules, session: Session, att: Attempt, out: Outcome) -> bool:
        return plain(self, session, att, out) and not any(p.name == "w-0" for u in out.units for p in u.pods)

    cfg = SchedulerConfig.model_validate({"actions": ["reclaim"]})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ReclaimRules, "valid", no_w)
        mp.setattr(by_node, "_simulate", logged)
        mp.setattr(by_node, "_solve_multi", lambda *args, **kwargs: None)  # the node-local generator alone
        d = run_cycle(build_snapshot(_cluster(), cfg, NOW), cfg)
    assert ["v-0", "v-1", "w-0"] in simulated  # n0's scenario was simulated and rejected
    assert sorted(e.pod for e in d.evictions) == ["default/v-0", "default/v-1", "default/y-0"]
    assert {b.pod: b.node for b in d.pipelined}["default/want-0"] == "n1"  # (Y moves to n0, where V's pod was)
    assert simulated[-1] == ["v-0", "v-1", "y-0"]
