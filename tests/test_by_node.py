"""KAI's victim search, task by task and node by node (``kaid.actions.by_node``):

- a vain search evicts, over all its simulations, a number of victim pods linear in the victims it tries (each
  simulation evicts the recorded victims and the victims of one node), where placing every accumulated victim again
  in every scenario was quadratic (issue 15);
- a simulation places the victims' pods and the job's only on the feasible nodes (nodes with an idle or releasing
  GPU when the attempt began, for a job of GPU pods) and the nodes of the victims it evicted;
- the GPU bound (``GpuRoom``) never skips a simulation that would have placed the job.
"""

from __future__ import annotations

import pytest
from hypothesis import event, given

from kaid.actions import by_node
from kaid.actions.scenario import Attempt, Outcome
from kaid.actions.session import Session
from kaid.actions.victims import Search, Unit
from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.vocabulary import OpKind, PodStatus
from tests.objects import node, pod, podgroup, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, cases, decisions_over


def _vain_cluster(nodes: int) -> list[dict[str, object]]:
    """Full 2-GPU nodes, each running two 1-GPU victims of queue a (far above its share) and a pod that holds most
    of its cpu; queue b's job asks for 2 GPUs and more cpu than evicting a node's victims frees: every scenario has
    the GPUs, none the cpu."""
    objs: list[dict[str, object]] = [queue("a", gpu=(0, -1, 1)), queue("b", gpu=(-1, -1, 1)),
                                     podgroup("hold", "a", 1, priority_class="build"),
                                     podgroup("want", "b", 1, priority_class="train")]
    for i in range(nodes):
        objs += [node(f"n{i:02}", gpus=2, cpu="8"), pod(f"hold-{i}", group="hold", cpu="6", node_name=f"n{i:02}")]
        for k in range(2):
            name = f"v{k}{i:02}"
            objs += [podgroup(name, "a", 1, priority_class="train", created=f"2025-12-31T{10 + k}:{i:02}:00Z"),
                     pod(f"{name}-0", gpus=1, cpu="500m", group=name, node_name=f"n{i:02}",
                         created=f"2025-12-31T{10 + k}:{i:02}:00Z")]
    objs.append(pod("want-0", gpus=2, cpu="4", group="want"))
    return objs


def test_a_vain_search_evicts_linearly_in_the_victims_it_tries() -> None:
    evicted = 0
    plain = Session.evict

    def counted(self: Session, p: object, action: str, by: str | None, message: str) -> None:
        nonlocal evicted
        evicted += 1
        plain(self, p, action, by, message)  # type: ignore[arg-type]

    cfg = SchedulerConfig.model_validate({"maxVictimScenarios": 10**6, "actions": ["allocate", "reclaim"]})
    nodes = 12
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Session, "evict", counted)
        d = run_cycle(build_snapshot(_vain_cluster(nodes), cfg, NOW), cfg)
    assert not d.evictions and not d.pipelined
    victims = 2 * nodes
    # the GPUs of a node suffice once both its victims are in: each such scenario evicts that node's two victims (24
    # in all here); the accumulated shape evicted every victim so far in each (13 + 14 + ... + 24 = 222)
    assert evicted <= 2 * victims, evicted


def _feasible(session: Session, att: Attempt) -> set[str]:
    """KAI's feasible nodes, read from the nodes themselves: for a job all of whose pods use GPUs, those with an
    unused share of a device or a releasing pod that holds one; every node otherwise."""
    nodes = session.snap.nodes
    if not all(p.gpu_whole or p.frac_devices for p in att.job.pods):
        return {n.name for n in nodes}
    out = {n.name for n in nodes if any(u < 1000 for u in n.dev_used)}
    return out | {p.node for p in session.releasing() if p.node and (p.gpu_whole or p.frac_devices)}


@SETTINGS
@given(case=cases())
def test_a_simulation_places_on_the_feasible_nodes_and_the_victims_nodes(case: Case) -> None:
    real = by_node._simulate
    placed = 0

    def checked(session: Session, att: Attempt, search: Search, victims: list[Unit],
                feasible: bytearray | None) -> Outcome | None:
        nonlocal placed
        allowed = _feasible(session, att) | {search.home[id(p)] for u in victims for p in u.pods}
        start = session.checkpoint()
        out = real(session, att, search, victims, feasible)
        for op in session.ops[start:]:
            if op.kind == OpKind.PIPELINE and op.pod.status == PodStatus.PIPELINED:
                placed += 1
                assert op.node.name in allowed, (op.pod.key, op.node.name, sorted(allowed))
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "_simulate", checked)
        decisions_over(case, 3)
    event(f"pods placed by simulations: {'some' if placed else 'none'}")


@SETTINGS
@given(case=cases())
def test_the_gpu_bound_never_skips_a_simulation_that_places_the_job(case: Case) -> None:
    """Every scenario simulated (the bound told to say yes), and each simulation that placed the job was one the
    bound, read afresh, said yes to."""
    real = by_node._simulate
    enough = by_node.Tally.enough
    outcomes = []

    def checked(session: Session, att: Attempt, search: Search, victims: list[Unit],
                feasible: bytearray | None) -> Outcome | None:
        said = enough(by_node.GpuRoom(session, att, search.home).tally(att, victims))
        out = real(session, att, search, victims, feasible)
        outcomes.append((said, out is not None))
        assert said or out is None, [p.key for u in victims for p in u.pods]
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(by_node, "_simulate", checked)
        mp.setattr(by_node.Tally, "enough", lambda self: True)
        decisions_over(case, 3)
    event(f"simulations the bound says no to: {'some' if any(not s for s, _ in outcomes) else 'none'}")
    event(f"simulations that placed the job: {'some' if any(ok for _, ok in outcomes) else 'none'}")


PREEMPT = SchedulerConfig.model_validate({"actions": ["allocate", "preempt"]})


def _preempted(objs: list[dict[str, object]]) -> tuple[list[str], list[str]]:
    d = run_cycle(build_snapshot(objs, PREEMPT, NOW), PREEMPT)
    return sorted(e.pod for e in d.evictions), sorted(p.pod for p in d.pipelined)


def test_a_victim_is_not_moved_off_the_feasible_nodes() -> None:
    """The job lands where its cpu-only victim ran; KAI places the victim again on the feasible nodes only (the GPU
    job's: the node with an idle GPU), where it no longer fits, so it stays evicted, though the cpu node has room."""
    objs = [node("n0", gpus=1, cpu="4"), node("n1", gpus=0, cpu="8"), queue("q"),
            podgroup("v", "q", 1, priority_class="train"), pod("v-0", cpu="3", group="v", node_name="n0"),
            podgroup("w", "q", 1, priority_class="build"), pod("w-0", gpus=1, cpu="2", group="w")]
    assert _preempted(objs) == (["default/v-0"], ["default/w-0"])


def test_the_gpu_bound_counts_releasing_gpus_and_shared_devices() -> None:
    """Room for a 2-GPU pod: a victim's GPU and a releasing pod's; room for a whole GPU: a shared device's only
    pod."""
    releasing = pod("r-0", gpus=1, group="r", node_name="n0")
    releasing["metadata"]["deletionTimestamp"] = "2025-12-31T23:59:30Z"
    objs = [node("n0", gpus=2), queue("q"), podgroup("r", "q", 1, priority_class="train"), releasing,
            podgroup("v", "q", 1, priority_class="train"), pod("v-0", gpus=1, group="v", node_name="n0"),
            podgroup("w", "q", 1, priority_class="build"), pod("w-0", gpus=2, group="w")]
    assert _preempted(objs) == (["default/v-0"], ["default/w-0"])
    shared = [node("n0", gpus=1), queue("q"), podgroup("v", "q", 1, priority_class="train"),
              pod("v-0", group="v", node_name="n0", annotations={"gpu-fraction": "0.5"}),
              podgroup("w", "q", 1, priority_class="build"), pod("w-0", gpus=1, group="w")]
    assert _preempted(shared) == (["default/v-0"], ["default/w-0"])
