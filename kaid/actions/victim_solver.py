"""CP-SAT's cheapest set of victim units for a job of identical whole-GPU or cpu pods: one model over the units
(evicted or not) and the job's pods per node, minimising the cost order of ``victims.cost`` lexicographically
(first the highest cost level hit, then GPU-seconds of progress lost and pods by weights that keep the order).
Every answer is checked as a scenario afterwards (``evictions``): the model is a relaxation of the action's rules."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kaid.actions.session import Session
from kaid.actions.victims import Search, Unit
from kaid.model.objects import Node, Pod
from kaid.model.vocabulary import PodStatus
from kaid.placement.cpsat import new_solver
from kaid.placement.predicates import room_for

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

MAX_NODES = 400  # nodes kept in the model beyond those that must be, once there is room enough


@dataclass
class Freed:
    """What each unit frees on each node the job may use."""

    per_node: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))  # node -> its units
    pods_at: dict[tuple[int, int], list[Pod]] = field(default_factory=lambda: defaultdict(list))  # (unit, node)

    def victims(self, n: Node) -> list[Pod]:
        return [p for i in self.per_node.get(n.index, []) for p in self.pods_at[(i, n.index)]]


def solve(session: Session, pods: list[Pod], search: Search, time_limit: float, workers: int = 1,
          hint: list[int] | None = None, keep_nodes: set[str] | None = None) -> tuple[list[int], dict[str, int]] | None:
    """Victim units and pods per node, or None (no room even with every candidate gone, or no answer in time)."""
    rep, need = pods[0], len(pods)
    freed = _freed(session, rep, search.units)
    nodes = _nodes(session, rep, search.units, freed, need, keep_nodes or set())
    if not nodes:
        return None
    wanted = _wanted_units(search.units, nodes, freed)
    model = _Model(session, rep, search, wanted)
    model.build(nodes, freed, need, hint or [])
    return model.solve(time_limit, workers)


def _freed(session: Session, rep: Pod, units: list[Unit]) -> Freed:
    mask = session.index.static_mask(rep)
    out = Freed()
    for i, u in enumerate(units):
        for p in u.pods:
            n = session.snap.node_by_name.get(p.node or "")
            if n is not None and mask[n.index]:
                if not out.pods_at[(i, n.index)]:
                    out.per_node[n.index].append(i)
                out.pods_at[(i, n.index)].append(p)
    return out


def room_freed(n: Node, pod: Pod, victims: list[Pod]) -> int:
    """Pods of this shape the node could take if all these victims left (shared GPUs counted whole)."""
    cap = n.alloc_pods - n.used_pods + len(victims)
    if pod.gpu_whole:
        freed = sum(p.gpu_whole for p in victims) + len({d for p in victims if p.frac_devices for d in p.devices})
        cap = min(cap, (n.idle + freed) // pod.gpu_whole)
    if pod.cpu:
        cap = min(cap, (n.free_cpu + sum(p.cpu for p in victims)) // pod.cpu)
    if pod.mem:
        cap = min(cap, (n.free_mem + sum(p.mem for p in victims)) // pod.mem)
    return max(0, cap)


def _nodes(session: Session, rep: Pod, units: list[Unit], freed: Freed, need: int, must: set[str]) -> list[Node]:
    """The nodes of the model: where room is cheapest, enough of them to leave the solver a choice."""
    mask = session.index.static_mask(rep)
    full = {n.index: room_freed(n, rep, freed.victims(n)) for n in session.index.nodes if mask[n.index]}
    candidates = [n for n in session.index.nodes if full.get(n.index, 0) > 0]
    if sum(full[n.index] for n in candidates) < need:
        return []  # even every candidate evicted would not make room: no search
    candidates.sort(key=lambda n: _cheapness(n, rep, units, freed))
    kept = [n for n in candidates if n.name in must]
    room = sum(full[n.index] for n in kept)
    for n in candidates:
        if room >= 20 * need + 16 and len(kept) >= MAX_NODES:
            break
        if n.name not in must:
            kept.append(n)
            room += full[n.index]
    return kept


def _cheapness(n: Node, rep: Pod, units: list[Unit], freed: Freed) -> tuple[int, float, str]:
    """What making room for one pod on this node costs: the cost level and GPU-seconds lost of the cheapest
    victims."""
    if room_for(n, rep) > 0:
        return (-1, 0.0, n.name)
    victims = sorted(freed.per_node.get(n.index, []), key=lambda i: (units[i].level, units[i].lost))
    taken: list[Pod] = []
    for k, i in enumerate(victims):
        taken += freed.pods_at[(i, n.index)]
        if room_freed(n, rep, taken) > 0:
            return (max(units[j].level for j in victims[: k + 1]), sum(units[j].lost for j in victims[: k + 1]),
                    n.name)
    return (1 << 30, 0.0, n.name)


def _wanted_units(units: list[Unit], nodes: list[Node], freed: Freed) -> set[int]:
    """The units on the model's nodes, and the units of their jobs that go before them."""
    wanted = {i for n in nodes for i in freed.per_node.get(n.index, [])}
    for i in sorted(wanted, reverse=True):
        j = units[i].prev
        while j is not None:
            wanted.add(j)
            j = units[j].prev
    return wanted


class _Model:
    def __init__(self, session: Session, rep: Pod, search: Search, wanted: set[int]) -> None:
        from ortools.sat.python import cp_model  # imported on first use: it takes a while

        self.session, self.rep, self.search = session, rep, search
        self.model = cp_model.CpModel()
        units = search.units
        self.e = [self.model.new_bool_var(f"e{i}") if i in wanted else self.model.new_constant(0)
                  for i in range(len(units))]
        self.x: dict[str, cp_model.IntVar] = {}
        self.wanted = wanted

    def build(self, nodes: list[Node], freed: Freed, need: int, hint: list[int]) -> None:
        for i, u in enumerate(self.search.units):
            if u.prev is not None:
                self.model.add_implication(self.e[i], self.e[u.prev])
        shared = self._shared_holders(freed) if self.rep.gpu_whole else {}
        for n in nodes:
            self._node(n, freed, need, shared)
        self.model.add(sum(self.x.values()) == need)
        for i in hint:
            if i in self.wanted:
                self.model.add_hint(self.e[i], 1)
        self._rules()

    def _shared_holders(self, freed: Freed) -> dict[tuple[str, int], int]:
        """Pods on each shared device of the victims' nodes: a device is free only when all of them go."""
        nodes = {self.session.index.nodes[i].name for i in freed.per_node}
        out: dict[tuple[str, int], int] = defaultdict(int)
        for p in self.session.snap.pods:
            if p.frac_devices and p.node in nodes and p.active and p.status != PodStatus.EVICTED:
                for d in p.devices:
                    out[(p.node, d)] += 1
        return out

    def _node(self, n: Node, freed: Freed, need: int, shared: dict[tuple[str, int], int]) -> None:
        rep, e = self.rep, self.e
        here = {i: freed.pods_at[(i, n.index)] for i in freed.per_node.get(n.index, [])}
        top = max(0, n.alloc_pods - n.used_pods + sum(len(ps) for ps in here.values()))
        xn = self.model.new_int_var(0, min(need, top), f"x{n.index}")
        self.x[n.name] = xn
        if rep.gpu_whole:
            whole = sum(sum(p.gpu_whole for p in ps) * e[i] for i, ps in here.items())
            self.model.add(xn * rep.gpu_whole <= n.idle + whole + sum(self._shared_devices(n, here, shared)))
        if rep.cpu:
            self.model.add(xn * rep.cpu <= n.free_cpu + sum(sum(p.cpu for p in ps) * e[i] for i, ps in here.items()))
        if rep.mem:
            self.model.add(xn * rep.mem <= n.free_mem + sum(sum(p.mem for p in ps) * e[i] for i, ps in here.items()))
        self.model.add(xn <= n.free_pods + sum(len(ps) * e[i] for i, ps in here.items()))

    def _shared_devices(self, n: Node, here: dict[int, list[Pod]],
                        shared: dict[tuple[str, int], int]) -> list[cp_model.IntVar]:
        holders: dict[int, set[int]] = defaultdict(set)
        for i, ps in here.items():
            for p in ps:
                for d in p.devices if p.frac_devices else ():
                    holders[d].add(i)
        out = []
        for d, ids in holders.items():
            if shared[(n.name, d)] != sum(1 for i in ids for p in here[i] if p.frac_devices and d in p.devices):
                continue  # someone who is no candidate shares the device: it stays taken
            s = self.model.new_bool_var(f"s{n.index}_{d}")
            for i in ids:
                self.model.add_implication(s, self.e[i])
            out.append(s)
        return out

    def _rules(self) -> None:
        units, e = self.search.units, self.e
        for c in self.search.fair:
            self.model.add(sum(c.amount(units[i]) * e[i] for i in c.units) <= c.cap)
        for b, ids, _ in self.search.budgets:
            self.model.add(sum(sum(1 for p in units[i].pods if b.covers(p)) * e[i] for i in ids)
                           <= b.disruptions_allowed)

    def solve(self, time_limit: float, workers: int) -> tuple[list[int], dict[str, int]] | None:
        from ortools.sat.python import cp_model

        solver = new_solver(time_limit, workers)
        units = self.search.units
        if len({u.level for u in units}) > 1 and not self._lowest_level(solver):
            return None
        self.model.minimize(self._cost())
        if solver.solve(self.model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        chosen = [i for i in range(len(units)) if solver.value(self.e[i])]
        counts = {name: int(solver.value(xn)) for name, xn in self.x.items() if solver.value(xn)}
        return chosen, counts

    def _lowest_level(self, solver: cp_model.CpSolver) -> bool:
        """Stage 1: the highest cost level evicted, as low as possible; fixed for stage 2, its answer the hint."""
        from ortools.sat.python import cp_model

        units = self.search.units
        top = self.model.new_int_var(0, max(u.level for u in units), "top")
        for i, u in enumerate(units):
            self.model.add(top >= u.level * self.e[i])
        self.model.minimize(top)
        if solver.solve(self.model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return False
        self.model.add(top <= int(solver.value(top)))
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        for var in [*self.e, *self.x.values()]:
            self.model.add_hint(var, int(solver.value(var)))
        return True

    def _cost(self) -> cp_model.LinearExprT:
        """Stage 2 (the highest level fixed by stage 1): GPU-seconds of progress lost, then pods (a weight keeps the
        order lexicographic; whole seconds, so that equal losses stay equal)."""
        units = self.search.units
        w_lost = sum(len(u.pods) for u in units) + 1
        return sum(self.e[i] * (min(10**12, round(u.lost)) * w_lost + len(u.pods)) for i, u in enumerate(units))
