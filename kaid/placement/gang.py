"""Placing a gang: every pod at once or none, greedy first and CP-SAT where the greedy plan fails or
spreads the gang over more nodes or topology domains than it needs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from kaid.model.objects import Node, Pod
from kaid.placement.cpsat import solve_gang
from kaid.placement.index import Devices, NodeIndex


@dataclass(slots=True)
class Topo:
    """A job's topology constraint resolved to node label keys (the domain label of each level)."""

    required: str | None = None
    preferred: str | None = None


@dataclass(slots=True)
class GangPlan:
    placements: list[tuple[Pod, Node, Devices]] = field(default_factory=list)
    method: str = "greedy"  # greedy | cpsat
    placed_max: int = 0  # the most pods any attempt placed (for "gang: needs N, placeable M")
    solver_s: float = 0.0
    topology_failed: bool = False

    @property
    def nodes_used(self) -> int:
        return len({n.name for _, n, _ in self.placements})


def _order(pods: list[Pod]) -> list[Pod]:
    return sorted(pods, key=lambda p: (-p.gpu_whole, -p.gpu_milli_on(None), -p.cpu, -p.mem, p.name))


def greedy(pods: list[Pod], index: NodeIndex, spread: bool, allowed: bytearray | None) -> tuple[
        list[tuple[Pod, Node, Devices]] | None, int]:
    """Place pods one by one with the strategy; undo the tentative changes and return the plan."""
    plan: list[tuple[Pod, Node, Devices]] = []
    ok = True
    for pod in pods:
        choice = index.best_node(pod, spread, allowed)
        if choice is None:
            ok = False
            break
        node, devs = choice
        index.assign(node, pod, devs)
        plan.append((pod, node, devs))
    placed = len(plan)
    for pod, node, devs in reversed(plan):
        index.release(node, pod, devs, planning=True)
    return (plan if ok else None), placed


def min_nodes(pods: list[Pod], index: NodeIndex, allowed: bytearray | None) -> int:
    """A lower bound on the nodes a gang needs: by GPUs for GPU gangs, by pods per node otherwise."""
    gpus = sum(p.gpu_whole for p in pods)
    mask = index.static_mask(pods[0])
    if gpus:
        free = sorted((n.idle for n in index.nodes if mask[n.index] and (allowed is None or allowed[n.index])),
                      reverse=True)
        need, count = gpus, 0
        for f in free:
            if need <= 0:
                break
            need -= f
            count += 1
        return max(1, count)
    return 1


def _domains(index: NodeIndex, key: str, allowed: bytearray | None) -> dict[str, bytearray]:
    out: dict[str, bytearray] = defaultdict(lambda: bytearray(len(index.nodes)))
    for n in index.nodes:
        value = n.labels.get(key)
        if value is not None and (allowed is None or allowed[n.index]):
            out[value][n.index] = 1
    return dict(out)


def _domain_order(index: NodeIndex, domains: dict[str, bytearray], spread: bool) -> list[str]:
    def idle(d: str) -> int:
        mask = domains[d]
        return sum(n.idle for n in index.nodes if mask[n.index])
    return sorted(domains, key=lambda d: ((-idle(d)) if spread else idle(d), d))


def place(pods: list[Pod], index: NodeIndex, spread: bool, topo: Topo | None, solver: str,
          time_limit: float, workers: int = 1) -> GangPlan:
    """Find a placement for all of ``pods`` or report how far it got."""
    pods = _order(pods)
    result = GangPlan()
    whole_only = all(not p.frac_devices for p in pods)
    regions: list[bytearray | None] = [None]
    if topo and topo.required:
        doms = _domains(index, topo.required, None)
        regions = [doms[d] for d in _domain_order(index, doms, spread)]
        if not regions:
            result.topology_failed = True
            return result
    best: list[tuple[Pod, Node, Devices]] | None = None
    for region in regions:
        plan, placed = _place_in(pods, index, spread, topo, solver, time_limit, workers, region, result)
        result.placed_max = max(result.placed_max, placed)
        if plan is not None:
            best = plan
            break
    if best is None:
        if topo and topo.required and len(regions) > 0:
            # would it fit ignoring the required domain? then topology is the reason
            plain, _ = greedy(pods, index, spread, None)
            result.topology_failed = plain is not None
        return result
    result.placements = best
    if not whole_only:
        result.method = "greedy"
    return result


def _place_in(pods: list[Pod], index: NodeIndex, spread: bool, topo: Topo | None, solver: str,
              time_limit: float, workers: int, region: bytearray | None,
              result: GangPlan) -> tuple[list[tuple[Pod, Node, Devices]] | None, int]:
    preferred = topo.preferred if topo else None
    plan: list[tuple[Pod, Node, Devices]] | None = None
    placed = 0
    if preferred:
        doms = _domains(index, preferred, region)
        for d in _domain_order(index, doms, spread):
            plan, p = greedy(pods, index, spread, doms[d])
            placed = max(placed, p)
            if plan is not None:
                break
    if plan is None:
        plan, p = greedy(pods, index, spread, region)
        placed = max(placed, p)
    whole_only = all(not p.frac_devices for p in pods)
    if solver != "cpsat" or not whole_only or len(pods) < 2 or spread:
        return plan, (len(pods) if plan else placed)
    poor = plan is None
    if plan is not None:
        nodes = len({n.name for _, n, _ in plan})
        poor = nodes > min_nodes(pods, index, region)
        if preferred and not poor:
            poor = len({n.labels.get(preferred) for _, n, _ in plan}) > 1
    if not poor:
        return plan, len(pods)
    hint = [(p, n) for p, n, _ in plan] if plan else None
    sol, stats = solve_gang(pods, index, region, None, preferred, hint, time_limit, workers)
    result.solver_s += stats.wall_s
    if sol is None:
        return plan, (len(pods) if plan else placed)
    better = plan is None or len({n.name for _, n in sol}) < len({n.name for _, n, _ in plan}) or (
        preferred is not None and len({n.labels.get(preferred) for _, n in sol}) <
        len({n.labels.get(preferred) for _, n, _ in plan}))
    if not better:
        return plan, len(pods)
    out: list[tuple[Pod, Node, Devices]] = []
    ok = True
    for pod, node in sol:
        devs = index.devices_for(node, pod)
        if devs is None:
            ok = False
            break
        index.assign(node, pod, devs)
        out.append((pod, node, devs))
    for pod, node, devs in reversed(out):
        index.release(node, pod, devs, planning=True)
    if not ok:
        return plan, (len(pods) if plan else placed)
    result.method = "cpsat"
    return out, len(pods)
