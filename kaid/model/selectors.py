"""Label selectors and node selector terms, matched the way the API server and kube-scheduler match them: the
one home for the rule (node affinity in ``kaid.placement.predicates``, PodDisruptionBudgets in ``Budget``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast


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


Terms = list[list[dict[str, Any]]]  # nodeSelectorTerms: OR of ANDs, a node field (``matchFields``) marked ``field``


def node_selector_terms(raw: Any) -> Terms:
    """``nodeSelectorTerms`` (a pod's required node affinity, a PersistentVolume's node affinity) as matched here
    (``matches_expression``). ValueError for a structure the API server would refuse (a term, a requirement or its
    values of another type): its object is malformed, not read as matching anything."""
    if not raw:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"nodeSelectorTerms is a {type(raw).__name__}, not a list")
    terms: Terms = []
    for term in raw:
        term = term or {}
        if not isinstance(term, Mapping):
            raise ValueError(f"a node selector term is a {type(term).__name__}, not a mapping")
        terms.append([*_requirements(term.get("matchExpressions")),
                      *({**f, "field": True} for f in _requirements(term.get("matchFields")))])
    return terms


def label_selector(raw: Any) -> Mapping[str, Any] | None:
    """A label selector as ``selector_matches`` reads it (None stays None: it selects nothing); ValueError for one of
    another structure."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError(f"a label selector is a {type(raw).__name__}, not a mapping")
    pairs = raw.get("matchLabels")
    if pairs is not None and not isinstance(pairs, Mapping):
        raise ValueError(f"matchLabels is a {type(pairs).__name__}, not a mapping")
    _requirements(raw.get("matchExpressions"))
    return raw


def _requirements(raw: Any) -> list[dict[str, Any]]:
    if not raw:
        return []
    if not isinstance(raw, list) or not all(isinstance(r, Mapping) for r in raw):
        raise ValueError("a selector's requirements are not a list of mappings")
    for r in raw:
        values = r.get("values")
        if values is not None and not isinstance(values, list):
            raise ValueError(f"a requirement's values are a {type(values).__name__}, not a list")
    return cast(list[dict[str, Any]], raw)
