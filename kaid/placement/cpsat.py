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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kaid.model.objects import Node, Pod
from kaid.placement.index import NodeIndex
from kaid.placement.predicates import room_for

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

Plan = list[tuple[Pod, Node]]
ClassKey = tuple[tuple[int, ...], str | None, str | None, int]


@dataclass(slots=True)
class SolveStats:
    status: str
    wall_s: float
    variables: int
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
    masks = [index.static_mask(r) for r in reps]
    # Node classes: equal capacity for every shape, equal domains.
    classes: dict[ClassKey, list[Node]] = defaultdict(list)
    for n in index.nodes:
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
    keys = sorted(classes, key=lambda k: (str(k[1]), str(k[2]), -k[3], k[0]))
    model = cp_model.CpModel()
    total = len(pods)
    max_nodes = min(total, sum(len(classes[k]) for k in keys))
    rdoms = sorted({str(k[1]) for k in keys}) if required_key else []
    pdoms = sorted({str(k[2]) for k in keys}) if preferred_key else []
    rvar = {d: model.new_bool_var(f"r_{i}") for i, d in enumerate(rdoms)}
    pvar = {d: model.new_bool_var(f"p_{i}") for i, d in enumerate(pdoms)}
    if rvar:
        model.add_exactly_one(rvar.values())
    used_terms = []
    frag_terms = []
    nvars = 0
    assign: list[tuple[ClassKey, Any]] = []
    if len(shape_list) == 1:
        need = total
        for k in keys:
            nodes = classes[k]
            cap = min(k[0][0], need)
            idle = k[3]
            g = reps[0].gpu_whole
            ys = {}
            for j in range(1, cap + 1):
                y = model.new_int_var(0, min(len(nodes), need // j), f"y_{len(assign)}_{j}")
                ys[j] = y
                nvars += 1
                used_terms.append(y)
                frag_terms.append((idle - j * g) * y)
            if not ys:
                continue
            model.add(sum(ys.values()) <= len(nodes))
            cnt = sum(ys.values())
            if rvar:
                model.add(cnt <= len(nodes) * rvar[str(k[1])])
            if pvar:
                model.add(cnt <= len(nodes) * pvar[str(k[2])])
            assign.append((k, ys))
        model.add(sum(j * y for _, ys in assign for j, y in ys.items()) == need)
    else:
        budget = 800
        for k in keys:
            nodes = classes[k]
            slots = min(len(nodes), total, max(1, budget))
            budget -= slots
            slot_vars: list[tuple[Any, list[Any]]] = []
            for s in range(slots):
                used = model.new_bool_var(f"u_{len(assign)}_{s}")
                xs = []
                for si in range(len(reps)):
                    cap = k[0][si]
                    x = model.new_int_var(0, min(cap, len(shapes[shape_list[si]])), f"x_{len(assign)}_{s}_{si}")
                    model.add(x <= cap * used)
                    xs.append(x)
                    nvars += 1
                node0 = nodes[0]
                model.add(sum(x * r.gpu_whole for x, r in zip(xs, reps, strict=True)) <= node0.idle)
                model.add(sum(x * r.cpu for x, r in zip(xs, reps, strict=True)) <= node0.free_cpu)
                model.add(sum(x * r.mem for x, r in zip(xs, reps, strict=True)) <= node0.free_mem)
                model.add(sum(xs) <= node0.free_pods)
                model.add(sum(xs) >= used)
                if slot_vars:
                    model.add(used <= slot_vars[-1][0])
                used_terms.append(used)
                frag_terms.append(node0.idle * used - sum(x * r.gpu_whole for x, r in zip(xs, reps, strict=True)))
                if rvar:
                    model.add(used <= rvar[str(k[1])])
                if pvar:
                    model.add(used <= pvar[str(k[2])])
                slot_vars.append((used, xs))
            assign.append((k, slot_vars))
            if budget <= 0:
                break
        for si, shape in enumerate(shape_list):
            model.add(sum(xs[si] for _, sv in assign for _, xs in sv) == len(shapes[shape]))
    max_frag = max(1, index.max_gpus * max_nodes)
    w_nodes = max_frag + 1
    w_dom = w_nodes * (max_nodes + 1)
    model.minimize(w_dom * sum(pvar.values()) + w_nodes * sum(used_terms) + sum(frag_terms))
    if hint:
        _add_hint(model, hint, assign, len(shape_list) == 1, shape_list, classes)
    solver = new_solver(time_limit, workers)
    status = solver.solve(model)
    stats = SolveStats(solver.status_name(status), solver.wall_time, nvars, len(keys))
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, stats
    plan: Plan = []
    if len(shape_list) == 1:
        queue = list(pods)
        for k, ys in assign:
            nodes = list(classes[k])
            for j, y in sorted(ys.items(), reverse=True):
                for _ in range(int(solver.value(y))):
                    node = nodes.pop(0)
                    for _ in range(j):
                        plan.append((queue.pop(0), node))
    else:
        remaining = {s: list(shapes[s]) for s in shape_list}
        for k, sv in assign:
            nodes = list(classes[k])
            for s_idx, (used, xs) in enumerate(sv):
                if not solver.value(used):
                    continue
                node = nodes[s_idx]
                for si, x in enumerate(xs):
                    for _ in range(int(solver.value(x))):
                        plan.append((remaining[shape_list[si]].pop(0), node))
    return plan, stats


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
