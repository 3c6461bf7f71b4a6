"""Inter-pod affinity and anti-affinity: the required terms of a pod (``spec.affinity.podAffinity`` /
``podAntiAffinity``, ``requiredDuringSchedulingIgnoredDuringExecution``), read the way kube-scheduler's
InterPodAffinity filter reads them (KAI's predicate plugin wraps that filter). Preferred terms are not read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kaid.model.selectors import label_selector, selector_matches

if TYPE_CHECKING:
    from kaid.model.objects import Pod


class PodTerm:
    """One required term: the pods its ``labelSelector`` selects in ``namespaces`` (None: every namespace), within
    the domain of the node label ``key`` (``topologyKey``). ``ident`` is the term as text (equal terms, equal
    idents): what the placement counts are kept by."""

    __slots__ = ("ident", "key", "namespaces", "selector")

    def __init__(self, key: str, namespaces: frozenset[str] | None, selector: Mapping[str, Any] | None) -> None:
        self.key = key
        self.namespaces = namespaces
        self.selector = label_selector(selector)  # (ValueError for one of another structure: its pod is malformed)
        self.ident = repr((key, sorted(namespaces) if namespaces is not None else None, _canonical(selector)))

    def matches(self, pod: Pod) -> bool:
        """Whether the term selects ``pod``: its namespace is one of the term's, and its labels match the selector
        (no selector matches no pod, an empty one every pod)."""
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        return self.selector is not None and selector_matches(self.selector, pod.labels)

    def __repr__(self) -> str:
        return f"PodTerm{self.ident}"


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return sorted((str(k), _canonical(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def required_pod_terms(affinity: Mapping[str, Any], kind: str, namespace: str) -> tuple[PodTerm, ...]:
    """The required terms of ``affinity[kind]`` (``podAffinity`` or ``podAntiAffinity``) of a pod in ``namespace``.
    A term's namespaces: those it lists, every namespace when it has an empty ``namespaceSelector`` (``{}``), the
    pod's own when it names none. A non-empty ``namespaceSelector`` is not read (kai does not keep namespaces'
    labels): the term then covers the namespaces it lists, or the pod's own (docs/compatibility.md). A term without
    a ``topologyKey`` is not valid in the API: skipped."""
    part = affinity.get(kind)
    if not isinstance(part, Mapping):
        return ()
    out: list[PodTerm] = []
    for term in part.get("requiredDuringSchedulingIgnoredDuringExecution") or []:
        if not isinstance(term, Mapping) or not term.get("topologyKey"):
            continue
        listed = frozenset(str(n) for n in term.get("namespaces") or [])
        ns_selector = term.get("namespaceSelector")
        namespaces: frozenset[str] | None
        if isinstance(ns_selector, Mapping) and not ns_selector.get("matchLabels") and \
                not ns_selector.get("matchExpressions"):
            namespaces = None
        else:
            namespaces = listed or frozenset((namespace,))
        selector = term.get("labelSelector")
        out.append(PodTerm(str(term["topologyKey"]), namespaces, selector if isinstance(selector, Mapping) else None))
    return tuple(out)


class Spread:
    """One topology spread constraint that must hold (``whenUnsatisfiable: DoNotSchedule``; kube-scheduler's
    PodTopologySpread filter, which KAI's predicate plugin wraps): in the node's domain of ``term.key``, the pods the
    term selects (in the pod's namespace), the pod itself included where it matches, may exceed those of the least
    crowded domain by at most ``max_skew``; fewer domains than ``min_domains`` count the least as 0. A
    ``ScheduleAnyway`` constraint is a preference: not read."""

    __slots__ = ("ident", "max_skew", "min_domains", "term")

    def __init__(self, term: PodTerm, max_skew: int, min_domains: int) -> None:
        self.term = term
        self.max_skew = max_skew
        self.min_domains = min_domains
        self.ident = repr(("spread", term.ident, max_skew, min_domains))

    def __repr__(self) -> str:
        return f"Spread{self.ident}"


def spread_constraints(spec: Mapping[str, Any], labels: Mapping[str, str], namespace: str) -> tuple[Spread, ...]:
    """The ``DoNotSchedule`` constraints of a pod spec's ``topologySpreadConstraints`` (``matchLabelKeys``: the pod's
    own values of those labels added to the selector). One without a topology key or a positive ``maxSkew`` is not
    valid in the API: skipped."""
    out: list[Spread] = []
    for c in spec.get("topologySpreadConstraints") or ():
        if not isinstance(c, Mapping) or c.get("whenUnsatisfiable") != "DoNotSchedule" or not c.get("topologyKey"):
            continue
        skew, least = c.get("maxSkew"), c.get("minDomains")
        if type(skew) is not int or skew < 1:
            continue
        selector = c.get("labelSelector")
        selector = dict(selector) if isinstance(selector, Mapping) else None
        keys = c.get("matchLabelKeys")
        if selector is not None and isinstance(keys, list):
            extra = [{"key": k, "operator": "In", "values": [labels[k]]} for k in keys if k in labels]
            if extra:
                selector["matchExpressions"] = [*(selector.get("matchExpressions") or ()), *extra]
        term = PodTerm(str(c["topologyKey"]), frozenset((namespace,)), selector)
        out.append(Spread(term, skew, least if type(least) is int and least > 1 else 1))
    return tuple(out)
