"""The victim search's scenario budget (``maxVictimScenarios``, docs/compatibility.md): a job's search may simulate a
quarter of the action's scenarios, and the action all of them; a search cut short says which ran out, and the
jobs after a search its own quarter cut short are still searched."""

from __future__ import annotations

from typing import Any

from kaid.actions.memory import SearchMemory
from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.vocabulary import ReasonCode
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW

Obj = dict[str, Any]
NODES = 6
GANG = "default/gang"


def _cluster(gang_pods: int = 3, later: bool = False) -> list[Obj]:
    """Full 8-GPU nodes of one-GPU victims of queue ``a`` (no quota: every GPU above its share), the newest victims
    one per node in turn, so that a node is free only once all its victims are in; queue ``b``'s gang of 8-GPU pods
    (``later``: and a one-GPU job of ``b`` after it in the queue)."""
    objs: list[Obj] = [queue("a", gpu=(0, -1, 1)), queue("b", gpu=(NODES * 8, -1, 1)),
                       podgroup("gang", "b", gang_pods, priority_class="train", created="2026-01-01T00:00:00Z")]
    objs += [pod(f"gang-{i}", gpus=8, group="gang", created="2026-01-01T00:00:00Z") for i in range(gang_pods)]
    if later:
        objs += [podgroup("small", "b", 1, priority_class="train", created="2026-01-01T00:05:00Z"),
                 pod("small-0", gpus=1, group="small", created="2026-01-01T00:05:00Z")]
    for n in range(NODES):
        objs.append(node(f"n{n}"))
        for k in range(8):
            name, created = f"v{n}-{k}", f"2025-12-31T{10 + k:02}:{n:02}:00Z"
            objs += [podgroup(name, "a", 1, priority_class="train", created=created),
                     pod(f"{name}-0", gpus=1, group=name, node_name=f"n{n}", created=created)]
    return objs


def _cfg(scenarios: int) -> SchedulerConfig:
    return SchedulerConfig.model_validate({"maxVictimScenarios": scenarios, "actions": ["allocate", "reclaim"]})


def _cut_short(d: Decisions, key: str) -> list[str]:
    return [r.message for r in d.pending.get(key, []) if r.code == ReasonCode.NOT_PLACED_THIS_CYCLE]


def _served(d: Decisions, key: str) -> bool:
    return any(x.job == key for x in d.victims.decisions)


def _cycles(objs: list[Obj], cfg: SchedulerConfig, count: int, remember: bool) -> list[Decisions]:
    """``count`` cycles of the same objects (nothing applied between them), with the memory or without."""
    memory: SearchMemory | None = SearchMemory() if remember else None
    out = []
    for c in range(count):
        d = run_cycle(build_snapshot(objs, cfg, NOW + 30.0 * c), cfg, memory=memory)
        memory = d.memory
        out.append(d)
    return out


def test_the_unbounded_search_serves_the_gang() -> None:
    # the reference: with scenarios enough, reclaim frees three nodes for the gang
    (d,) = _cycles(_cluster(), _cfg(10**6), 1, remember=False)
    assert _served(d, GANG)
    assert sum(1 for e in d.evictions if e.by == GANG) == 3 * 8


def test_a_search_its_own_quarter_cuts_short_says_so() -> None:
    for d in _cycles(_cluster(), _cfg(4), 2, remember=True):
        assert not _served(d, GANG)
        (why,) = _cut_short(d, GANG)
        assert why.startswith("reclaim simulated as many victim scenarios as one job may this cycle (a quarter of "
                              "maxVictimScenarios, 4)"), why
        assert why.endswith("stops at the same point while the cluster stays as it is: a larger maxVictimScenarios "
                            "in the scheduler config lets it search further"), why


def test_a_search_its_own_quarter_cuts_short_stops_at_the_same_point_every_cycle() -> None:
    # searched afresh each cycle (no memory), the same cluster: the same scenarios, the same end, never served; the
    # reason's way out (a larger budget) serves it
    first, second = _cycles(_cluster(), _cfg(4), 2, remember=False)
    assert _cut_short(first, GANG) == _cut_short(second, GANG) != []
    assert first.evictions == second.evictions == [] and not _served(second, GANG)
    (raised,) = _cycles(_cluster(), _cfg(64), 1, remember=False)
    assert _served(raised, GANG) and not _cut_short(raised, GANG)


def test_the_jobs_after_a_search_cut_short_by_its_quarter_are_searched() -> None:
    (d,) = _cycles(_cluster(later=True), _cfg(4), 1, remember=False)
    assert _cut_short(d, GANG) and not _served(d, GANG)
    assert _served(d, "default/small") and not _cut_short(d, "default/small")


def test_a_search_the_actions_budget_cuts_short_says_so() -> None:
    # one scenario for the action, which the gang's first try (without victims) takes
    (d,) = _cycles(_cluster(), _cfg(1), 1, remember=False)
    (why,) = _cut_short(d, GANG)
    assert "as it may this cycle for all jobs (maxVictimScenarios, 1)" in why and why.endswith("it searches again "
                                                                                               "next cycle"), why
