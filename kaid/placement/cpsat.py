"""Gang placement with OR-Tools CP-SAT.

Nodes are grouped into classes of equal free capacity and equal topology domain, so a model of a
thousand nodes stays small. For a gang whose pods are all alike (the common case) the variables are
``y[c][j]``: how many nodes of class ``c`` receive exactly ``j`` pods. Gangs with several pod shapes
use one slot per node that could be used (at most as many as there are pods, per class).

Objective, lexicographic through weights: all pods placed (a hard constraint), then preferred-level
topology domains used, then nodes used, then GPUs left idle on the nodes that were touched
(fragmentation). Every solve has a deterministic time limit and takes the greedy plan as a hint.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kaid.model.objects import Node, Pod
from kaid.placement.index import NodeIndex
from kaid.placement.predicates import extended_free, room_for

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

Plan = list[tuple[Pod, Node]]
ClassKey = tuple[tuple[int, ...], str | None, str | None, int]


@dataclass(slots=True)
class SolveStats:
    """How a solve went: CP-SAT's status name, its wall time, the node classes of the model."""

    status: str
    wall_s: float
    classes: int


def _shape(p: Pod) -> tuple[int, int, int, str]:
    return (p.gpu_whole, p.cpu, p.mem, p.sig)


def new_solver(time_limit: float, workers: int) -> cp_model.CpSolver:
    """A CP-SAT solver as kai runs every solve: a deterministic time limit (the same answer on a busy machine), a
    wall-clock limit four times that as a backstop, ``workers`` threads and a fixed seed."""
    from ortools.sat.python import cp_model  # imported on first use: it takes a while

    solver = cp_model.CpSolver()
    solver.parameters.max_deterministic_time = time_limit
    solver.parameters.max_time_in_seconds = time_limit * 4
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 7
    return solver


@dataclass
class _Model:
    """A gang's model as it is built: the node classes, the variables per class, the objective's terms."""

    model: cp_model.CpModel
    classes: dict[ClassKey, list[Node]]
    keys: list[ClassKey]
    rvar: dict[str, Any]  # required-level domain -> chosen
    pvar: dict[str, Any]  # preferred-level domain -> used
    assign: list[tuple[ClassKey, Any]] = field(default_factory=list)
    used_terms: list[Any] = field(default_factory=list)
    frag_terms: list[Any] = field(default_factory=list)

    def in_domains(self, k: ClassKey, count: Any, nodes: int) -> None:
        """``count`` nodes of class ``k`` used: only in the chosen required domain, and its preferred one counts."""
        if self.rvar:
            self.model.add(count <= nodes * self.rvar[str(k[1])])
        if self.pvar:
            self.model.add(count <= nodes * self.pvar[str(k[2])])


def solve_gang(pods: list[Pod], index: NodeIndex, allowed: bytearray | None, required_key: str | None,
               preferred_key: str | None, hint: Plan | None, time_limit: float,
               workers: int = 1) -> tuple[Plan | None, SolveStats]:
    """Place every pod of ``pods`` (whole-GPU or cpu-only pods) or return None."""
    from ortools.sat.python import cp_model  # imported on first use: it takes a while

    shapes: dict[tuple[int, int, int, str], list[Pod]] = defaultdict(list)
    for p in pods:
        shapes[_shape(p)].append(p)
    shape_list = list(shapes)
    reps = [shapes[s][0] for s in shape_list]
    m = _model(cp_model.CpModel(), _node_classes(index, reps, allowed, required_key, preferred_key),
               required_key, preferred_key)
    if len(shape_list) == 1:
        _count_vars(m, reps[0], len(pods))
    else:
        _slot_vars(m, reps, [len(shapes[s]) for s in shape_list], len(pods))
    max_nodes = min(len(pods), sum(len(m.classes[k]) for k in m.keys))
    max_frag = max(1, index.max_gpus * max_nodes)
    w_nodes = max_frag + 1
    w_dom = w_nodes * (max_nodes + 1)
    m.model.minimize(w_dom * sum(m.pvar.values()) + w_nodes * sum(m.used_terms) + sum(m.frag_terms))
    if hint:
        _add_hint(m.model, hint, m.assign, len(shape_list) == 1, shape_list, m.classes)
    solver = new_solver(time_limit, workers)
    status = solver.solve(m.model)
    stats = SolveStats(solver.status_name(status), solver.wall_time, len(m.keys))
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, stats
    if len(shape_list) == 1:
        return _count_plan(m, solver, pods), stats
    return _slot_plan(m, solver, [shapes[s] for s in shape_list]), stats


def _node_classes(index: NodeIndex, reps: list[Pod], allowed: bytearray | None, required_key: str | None,
                  preferred_key: str | None) -> dict[ClassKey, list[Node]]:
    """Nodes grouped by their room for each pod shape, their domains and their idle GPUs."""
    masks = [index.static_mask(r) for r in reps]
    classes: dict[ClassKey, list[Node]] = defaultdict(list)
    least = min(r.gpu_whole for r in reps)
    if least:  # whole-GPU shapes only: a node with fewer idle GPUs than the smallest has room for none of them
        nodes = [index.nodes[i] for k in range(least, index.max_gpus + 1) for i in index.buckets[k]]
        nodes.sort(key=lambda n: n.index)  # the order of the classes as a pass over every node gives it
    else:
        nodes = index.nodes
    for n in nodes:
        if allowed is not None and not allowed[n.index]:
            continue
        caps = tuple(room_for(n, r) if masks[k][n.index] else 0 for k, r in enumerate(reps))
        if not any(caps):
            continue
        rdom = n.labels.get(required_key) if required_key else None
        if required_key and rdom is None:
            continue
        pdom = n.labels.get(preferred_key) if preferred_key else None
        classes[(caps, rdom, pdom, n.idle)].append(n)
    return classes


def _model(model: cp_model.CpModel, classes: dict[ClassKey, list[Node]], required_key: str | None,
           preferred_key: str | None) -> _Model:
    """The model with its domain variables: exactly one required domain, and which preferred ones are used."""
    keys = sorted(classes, key=lambda k: (str(k[1]), str(k[2]), -k[3], k[0]))
    rdoms = sorted({str(k[1]) for k in keys}) if required_key else []
    pdoms = sorted({str(k[2]) for k in keys}) if preferred_key else []
    rvar = {d: model.new_bool_var(f"r_{i}") for i, d in enumerate(rdoms)}
    pvar = {d: model.new_bool_var(f"p_{i}") for i, d in enumerate(pdoms)}
    if rvar:
        model.add_exactly_one(rvar.values())
    return _Model(model, classes, keys, rvar, pvar)


def _count_vars(m: _Model, rep: Pod, need: int) -> None:
    """Pods all alike: ``y[c][j]``, how many nodes of class ``c`` receive exactly ``j`` pods."""
    for k in m.keys:
        nodes = m.classes[k]
        ys = {}
        for j in range(1, min(k[0][0], need) + 1):
            y = m.model.new_int_var(0, min(len(nodes), need // j), f"y_{len(m.assign)}_{j}")
            ys[j] = y
            m.used_terms.append(y)
            m.frag_terms.append((k[3] - j * rep.gpu_whole) * y)
        if not ys:
            continue
        m.model.add(sum(ys.values()) <= len(nodes))
        m.in_domains(k, sum(ys.values()), len(nodes))
        m.assign.append((k, ys))
    m.model.add(sum(j * y for _, ys in m.assign for j, y in ys.items()) == need)


def _slot_vars(m: _Model, reps: list[Pod], counts: list[int], total: int) -> None:
    """Several pod shapes: one slot per node that could be used (at most as many as pods, per class, and 800 in
    all), with how many pods of each shape it takes."""
    budget = 800
    extended = sorted({name for r in reps for name, _ in r.ext})
    for k in m.keys:
        nodes = m.classes[k]
        slots = min(len(nodes), total, max(1, budget))
        budget -= slots
        slot_vars: list[tuple[Any, list[Any]]] = []
        node0 = nodes[0]
        for s in range(slots):
            used = m.model.new_bool_var(f"u_{len(m.assign)}_{s}")
            xs = []
            for si in range(len(reps)):
                cap = k[0][si]
                x = m.model.new_int_var(0, min(cap, counts[si]), f"x_{len(m.assign)}_{s}_{si}")
                m.model.add(x <= cap * used)
                xs.append(x)
            m.model.add(sum(x * r.gpu_whole for x, r in zip(xs, reps, strict=True)) <= node0.idle)
            m.model.add(sum(x * r.cpu for x, r in zip(xs, reps, strict=True)) <= node0.free_cpu)
            m.model.add(sum(x * r.mem for x, r in zip(xs, reps, strict=True)) <= node0.free_mem)
            m.model.add(sum(xs) <= node0.free_pods)
            for name in extended:  # (what the shapes ask of each extended resource, against what the node has free)
                m.model.add(sum(x * dict(r.ext).get(name, 0) for x, r in zip(xs, reps, strict=True)) <=
                            extended_free(node0, name))
            m.model.add(sum(xs) >= used)
            if slot_vars:
                m.model.add(used <= slot_vars[-1][0])
            m.used_terms.append(used)
            m.frag_terms.append(node0.idle * used - sum(x * r.gpu_whole for x, r in zip(xs, reps, strict=True)))
            m.in_domains(k, used, 1)
            slot_vars.append((used, xs))
        m.assign.append((k, slot_vars))
        if budget <= 0:
            break
    for si, count in enumerate(counts):
        m.model.add(sum(xs[si] for _, sv in m.assign for _, xs in sv) == count)


def _count_plan(m: _Model, solver: cp_model.CpSolver, pods: list[Pod]) -> Plan:
    plan: Plan = []
    queue = list(pods)
    for k, ys in m.assign:
        nodes = list(m.classes[k])
        for j, y in sorted(ys.items(), reverse=True):
            for _ in range(int(solver.value(y))):
                node = nodes.pop(0)
                for _ in range(j):
                    plan.append((queue.pop(0), node))
    return plan


def _slot_plan(m: _Model, solver: cp_model.CpSolver, by_shape: list[list[Pod]]) -> Plan:
    plan: Plan = []
    remaining = [list(ps) for ps in by_shape]
    for k, sv in m.assign:
        nodes = list(m.classes[k])
        for s_idx, (used, xs) in enumerate(sv):
            if not solver.value(used):
                continue
            for si, x in enumerate(xs):
                for _ in range(int(solver.value(x))):
                    plan.append((remaining[si].pop(0), nodes[s_idx]))
    return plan


def _add_hint(model: cp_model.CpModel, hint: Plan, assign: list[tuple[ClassKey, Any]],
              single: bool, shape_list: list[tuple[int, int, int, str]],
              classes: dict[ClassKey, list[Node]]) -> None:
    per_node: dict[str, int] = defaultdict(int)
    for _, node in hint:
        per_node[node.name] += 1
    if single:
        for k, ys in assign:
            counts: dict[int, int] = defaultdict(int)
            for n in classes[k]:
                if per_node.get(n.name):
                    counts[per_node[n.name]] += 1
            for j, y in ys.items():
                model.add_hint(y, counts.get(j, 0))
