"""Label selectors and node selector terms, matched the way the API server and kube-scheduler match them: the
one home for the rule (node affinity in ``kaid.placement.predicates``, PodDisruptionBudgets in ``Budget``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def matches_expression(expr: Mapping[str, Any], labels: Mapping[str, str], node_name: str | None = None) -> bool:
    """One ``matchExpressions`` (or node ``matchFields``, marked ``field``) requirement: ``In``, ``NotIn``,
    ``Exists``, ``DoesNotExist``, and for node selectors ``Gt``/``Lt``; an unknown operator matches nothing."""
    key = str(expr.get("key", ""))
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    if expr.get("field"):
        present, value = key == "metadata.name" and node_name is not None, node_name or ""
    else:
        present, value = key in labels, str(labels.get(key, ""))
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        try:
            a, b = int(value), int(values[0])
        except (ValueError, IndexError):
            return False
        return present and (a > b if op == "Gt" else a < b)
    return False


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector (``matchLabels`` and ``matchExpressions``, all of them); an empty one matches everything."""
    match_labels = selector.get("matchLabels") or {}
    if any(labels.get(k) != str(v) for k, v in match_labels.items()):
        return False
    return all(matches_expression(e, labels) for e in selector.get("matchExpressions") or [])
