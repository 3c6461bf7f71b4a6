"""Reading the cluster's policy objects: PriorityClasses, Topologies and PodDisruptionBudgets."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.crds import TopologySpec, validation_message
from kaid.model.objects import Budget, ObjectProblem, PriorityClass, Reason, malformed
from kaid.model.vocabulary import ReasonCode

Obj = dict[str, Any]


def read_priority_classes(objs: list[Obj], problems: list[ObjectProblem]) -> dict[str, PriorityClass]:
    """KAI's default classes, then the cluster's (which win); a class without an integer value is a problem."""
    pcs = {name: PriorityClass(name, value) for name, value in c.DEFAULT_PRIORITY_CLASSES.items()}
    for obj in objs:
        name = meta.name(obj)
        try:
            value = int(obj.get("value", 0))
        except (TypeError, ValueError):
            problems.append(ObjectProblem("PriorityClass", name, None, Reason(
                ReasonCode.INVALID_PRIORITY_CLASS,
                f"priority class {name} has a non-integer value {obj.get('value')!r}")))
            continue
        pcs[name] = PriorityClass(name, value, obj.get("preemptionPolicy") == "Never")
    return pcs


def read_topologies(objs: list[Obj], problems: list[ObjectProblem],
                    aliases: dict[str, dict[str, str]] | None = None) -> dict[str, list[str]]:
    """Topology name -> the node label of each level, top level first (``aliases``: filled with topology name ->
    each alias of a level -> its node label)."""
    topologies: dict[str, list[str]] = {}
    for obj in objs:
        name = meta.name(obj)
        try:
            tspec = TopologySpec.model_validate(obj.get("spec") or {})
        except ValidationError as err:
            problems.append(ObjectProblem("Topology", name, None, Reason(
                ReasonCode.INVALID_TOPOLOGY, f"topology {name} is invalid: {validation_message(err)}")))
            continue
        topologies[name] = [lvl.nodeLabel for lvl in tspec.levels]
        if aliases is not None and tspec.aliases():
            aliases[name] = tspec.aliases()
    return topologies


def read_budgets(objs: list[Obj], problems: list[ObjectProblem]) -> list[Budget]:
    """The PodDisruptionBudgets, each with the disruptions its status allows (absent: none). An allowance that is
    not a whole number of at least 0 (the API server accepts no other; a hand-written snapshot may have one) is a
    problem and reads as none allowed, so the budget still protects the pods it covers and no others."""
    budgets = []
    for obj in objs:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if not isinstance(spec, dict) or not isinstance(status, dict):
            problems.append(malformed("PodDisruptionBudget", obj, TypeError("its spec and status must be mappings")))
            continue
        sel = spec.get("selector") or {}
        allowed = status.get("disruptionsAllowed")
        allowed_i = _allowance(0 if allowed is None else allowed)
        if allowed_i is None:
            name = meta.name(obj)
            problems.append(ObjectProblem("PodDisruptionBudget", name, meta.namespace(obj), Reason(
                ReasonCode.INVALID_DISRUPTION_BUDGET,
                f"PodDisruptionBudget {name} allows {allowed!r} disruptions: read as 0 (none) until its "
                "status.disruptionsAllowed is a whole number of at least 0")))
        budgets.append(Budget(meta.namespace(obj), meta.name(obj), sel, allowed_i or 0))
    return budgets


def _allowance(value: Any) -> int | None:
    """A disruption allowance as a count of at least 0, or None where it is not one."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
