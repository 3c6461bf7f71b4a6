"""Inter-pod affinity and anti-affinity in placement: kube-scheduler's InterPodAffinity filter (which KAI's predicate
plugin wraps) over the pods placed as a cycle goes. Kept only in a cycle where some pod has a required term
(``NodeIndex``: None otherwise, and no pod is read for it); it follows every change of a node's accounting
(``NodeIndex.assign`` / ``release``), so a tentative placement, a victim scenario and its rollback all see the
pods where they are. A node takes a pod when:

- for each of the pod's affinity terms the node has the term's topology label, and some placed pod that matches all
  of them is in the node's domain of it (none anywhere, and the pod matches its own terms: any node with the labels,
  so that the first pod of a set that wants to be together can start);
- no placed pod that matches one of its anti-affinity terms is in the node's domain of that term;
- no placed pod has an anti-affinity term that matches the pod, in a domain the node is in;
- for each of the pod's topology spread constraints that must hold (kube-scheduler's PodTopologySpread filter), the
  node has the constraint's topology label, and the placed pods it selects in the node's domain, with the pod where it
  matches, exceed those of the least crowded domain by at most the constraint's ``maxSkew``. The domains are those of
  the nodes the pod's signature may go to (its node selector, node affinity, taints; ``NodeIndex.static_mask``), the
  pods counted those on any node.

The pods counted are this scheduler's (the snapshot's pods): pods of other schedulers are accounted on their nodes
by their resources only (docs/compatibility.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import compress
from operator import attrgetter

from kaid.model.objects import Node, Pod
from kaid.model.podterms import PodTerm
from kaid.model.vocabulary import NodeFailure, PodStatus

# the statuses of a pod accounted on its node (``kaid.model.build.place_pod``): what the index starts from
_ON_NODE = frozenset({PodStatus.RUNNING, PodStatus.BOUND, PodStatus.RELEASING, PodStatus.PIPELINED})

Domains = Callable[[str], dict[str, bytearray]]


class _Together:
    """One pod's set of affinity terms (all pods with the same set share it): per term, the placed pods that
    match every term of the set, per value of the term's topology label."""

    __slots__ = ("counts", "terms")

    def __init__(self, terms: tuple[PodTerm, ...]) -> None:
        self.terms = terms
        self.counts: list[dict[str, int]] = [{} for _ in terms]


def _joined(terms: tuple[PodTerm, ...]) -> str:
    return "\n".join(t.ident for t in terms)


def _step(counts: dict[str, int], value: str, step: int) -> None:
    left = counts.get(value, 0) + step
    if left:
        counts[value] = left
    else:
        del counts[value]


def has_terms(pods: Sequence[Pod]) -> bool:
    """Whether some pod has a required pod affinity or anti-affinity term or a topology spread constraint. Asked of
    every snapshot's pods once a cycle: only the pods with a signature are looked at (a pod with a term has one; most
    pods have none), found at C speed (17,400 pods without one: 0.5 ms, where looking at each was 0.8 ms)."""
    return any(p.pod_affinity or p.anti or p.spread for p in compress(pods, map(_SIG, pods)))


_SIG = attrgetter("sig")


class _ByLabel:
    """Things filed by the term they belong to, by one label the term's selector requires (its first ``matchLabels``
    pair), those of a selector without one apart: the ones a pod may match are found from its labels, not by trying
    every term (1,000 replicas of 200 anti-affine sets at 1,000 nodes: 12.9 million matches a cycle, where a pod of
    none of them now tries none). A term that selects no pod (no selector) is filed nowhere."""

    __slots__ = ("_by", "_rest")

    def __init__(self) -> None:
        self._by: dict[tuple[str, str], list[str]] = {}
        self._rest: list[str] = []

    def add(self, term: PodTerm, item: str) -> None:
        if term.selector is None:
            return
        pairs = term.selector.get("matchLabels") or {}
        if pairs:
            k, v = next(iter(pairs.items()))
            self._by.setdefault((str(k), str(v)), []).append(item)
        else:
            self._rest.append(item)

    def candidates(self, pod: Pod) -> list[str]:
        """The items whose term may select ``pod`` (each still to be matched)."""
        out = self._rest
        if self._by:
            for pair in pod.labels.items():
                got = self._by.get(pair)
                if got:
                    out = out + got
        return out


class PodAffinity:
    """The placed pods that inter-pod affinity reads, as counts per topology domain (see the module)."""

    __slots__ = ("_anti", "_anti_by", "_domains", "_held", "_spread", "_spread_by", "_together", "_together_by",
                 "domains", "nodes")

    def __init__(self, nodes: Sequence[Node], pods: Iterable[Pod], domains: Domains) -> None:
        self.nodes = nodes
        self.domains = domains  # node label key -> value -> mask of its nodes (``NodeIndex.domains``)
        self._together: dict[str, _Together] = {}  # a set of affinity terms (their idents joined) -> its counts
        self._together_by = _ByLabel()  # the sets by their first term
        # anti term ident -> (the term, placed pods it selects per domain value, placed pods that have it per value)
        self._anti: dict[str, tuple[PodTerm, dict[str, int], dict[str, int]]] = {}
        self._anti_by = _ByLabel()
        self._held = 0  # placed pods with an anti-affinity term
        # a spread constraint's term ident -> (the term, the placed pods it selects per domain value)
        self._spread: dict[str, tuple[PodTerm, dict[str, int]]] = {}
        self._spread_by = _ByLabel()
        # (label key, id of a static mask) -> (that mask, its nodes with the label, per value: ``_eligible``)
        self._domains: dict[tuple[str, int], tuple[bytearray, bytes, dict[str, list[int]]]] = {}
        placed: list[Pod] = []
        for p in pods:
            for c in p.spread:
                if c.term.ident not in self._spread:
                    self._spread[c.term.ident] = (c.term, {})
                    self._spread_by.add(c.term, c.term.ident)
            if p.pod_affinity:
                key = _joined(p.pod_affinity)
                if key not in self._together:
                    self._together[key] = _Together(p.pod_affinity)
                    self._together_by.add(p.pod_affinity[0], key)
            for t in p.anti:
                if t.ident not in self._anti:
                    self._anti[t.ident] = (t, {}, {})
                    self._anti_by.add(t, t.ident)
            if p.node and p.status in _ON_NODE:
                placed.append(p)
        by_name = {n.name: n for n in nodes}
        for p in placed:
            node = by_name.get(p.node or "")
            if node is not None:
                self.add(node, p)

    def _count(self, node: Node, pod: Pod, step: int) -> None:
        labels = node.labels
        for key in self._together_by.candidates(pod):
            group = self._together[key]
            if all(t.matches(pod) for t in group.terms):
                for t, counts in zip(group.terms, group.counts, strict=True):
                    value = labels.get(t.key)
                    if value is not None:
                        _step(counts, value, step)
        for ident in self._anti_by.candidates(pod):
            t, counts, _ = self._anti[ident]
            value = labels.get(t.key)
            if value is not None and t.matches(pod):
                _step(counts, value, step)
        for ident in self._spread_by.candidates(pod):
            t, counts = self._spread[ident]
            value = labels.get(t.key)
            if value is not None and t.matches(pod):
                _step(counts, value, step)
        if pod.anti:
            self._held += step
            for t in pod.anti:
                value = labels.get(t.key)
                if value is not None:
                    _step(self._anti[t.ident][2], value, step)

    def add(self, node: Node, pod: Pod) -> None:
        """``pod`` is placed on ``node`` now."""
        self._count(node, pod, 1)

    def remove(self, node: Node, pod: Pod) -> None:
        """``pod`` left ``node``."""
        self._count(node, pod, -1)

    def _theirs(self, pod: Pod) -> list[tuple[str, str]]:
        """The domains placed pods' anti-affinity keeps ``pod`` out of."""
        out: list[tuple[str, str]] = []
        if self._held:
            for ident in self._anti_by.candidates(pod):
                t, _, holders = self._anti[ident]
                if holders and t.matches(pod):
                    out.extend((t.key, value) for value in holders)
        return out

    def concerns(self, pods: Iterable[Pod]) -> bool:
        """Whether a placement of ``pods`` depends on the pods placed (a term of theirs, or a placed pod's
        anti-affinity that matches one of them): such pods are placed one at a time, each seeing the ones before."""
        pods = list(pods)
        if any(p.pod_affinity or p.anti or p.spread for p in pods):
            return True
        return bool(self._held) and any(self._theirs(p) for p in pods)

    def forbidden(self, pod: Pod) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """The domains (label key, value) the pod may not go to: (by its own anti-affinity, by placed pods')."""
        own = [(t.key, value) for t in pod.anti for value in self._anti[t.ident][1]]
        return own, self._theirs(pod)

    def affinity_mask(self, pod: Pod) -> bytearray | None:
        """The nodes the pod's affinity terms let it go to (None: the pod has none)."""
        if not pod.pod_affinity:
            return None
        group = self._together[_joined(pod.pod_affinity)]
        size = len(self.nodes)
        out = (1 << size * 8) - 1 if size else 0  # (as an int: one byte per node, 0 or 1)
        ones = int.from_bytes(b"\x01" * size, "big")
        anywhere = not any(group.counts)
        if anywhere and not all(t.matches(pod) for t in group.terms):
            return bytearray(size)
        for t, counts in zip(group.terms, group.counts, strict=True):
            doms = self.domains(t.key)
            allowed = 0
            for value, mask in doms.items():
                if anywhere or value in counts:
                    allowed |= int.from_bytes(mask, "big")
            out &= allowed
        return bytearray((out & ones).to_bytes(size, "big"))

    def spread_mask(self, pod: Pod, static: bytearray) -> int | None:
        """The nodes the pod's topology spread constraints let it go to now, as an int of one byte per node (None:
        the pod has none); ``static``: the nodes its signature may go to, whose domains count. The domains with no
        pod of the constraint are never too crowded: only those counted are looked at, node by node (a spread over
        thousands of nodes reads the few that hold its pods)."""
        if not pod.spread:
            return None
        out: bytearray | None = None
        for c in pod.spread:
            t, counts = self._spread[c.term.ident]
            every, members = self._eligible(t.key, static)
            counted = [n for value, n in counts.items() if value in members]
            least = min(counted) if len(counted) == len(members) and len(members) >= c.min_domains else 0
            most = least + c.max_skew - (1 if t.matches(pod) else 0)  # (the pod counts where it goes)
            out = bytearray(every) if out is None else bytearray(a & b for a, b in zip(out, every, strict=True))
            for value, n in counts.items():
                if n > most:
                    for i in members.get(value, ()):
                        out[i] = 0
        assert out is not None
        return int.from_bytes(out, "big")

    def _eligible(self, key: str, static: bytearray) -> tuple[bytes, dict[str, list[int]]]:
        """The nodes of ``static`` that have the label ``key`` (a mask), and the indexes of its values' nodes there,
        kept per static mask (one per pod signature, alive as long as the index)."""
        kept = self._domains.get((key, id(static)))
        if kept is None or kept[0] is not static:
            every = bytearray(len(static))
            members: dict[str, list[int]] = {}
            nodes = self.nodes
            for i in compress(range(len(static)), static):
                value = nodes[i].labels.get(key)
                if value is not None:
                    members.setdefault(value, []).append(i)
                    every[i] = 1
            kept = self._domains[(key, id(static))] = (static, bytes(every), members)
        return kept[1], kept[2]

    def mask(self, pod: Pod, static: bytearray) -> bytearray:
        """``static`` (the nodes the pod's signature may go to) less the nodes inter-pod affinity and topology spread
        keep it from now."""
        own, theirs = self.forbidden(pod) if pod.anti or self._held else ((), ())
        allowed = self.affinity_mask(pod)
        if not own and not theirs and allowed is None and not pod.spread:
            return static
        size = len(static)
        out = int.from_bytes(static, "big")
        if allowed is not None:
            out &= int.from_bytes(allowed, "big")
        spread = self.spread_mask(pod, static)
        if spread is not None:
            out &= spread
        for key, value in (*own, *theirs):
            dom = self.domains(key).get(value)
            if dom is not None:
                out &= ~int.from_bytes(dom, "big")
        return bytearray(out.to_bytes(size, "big"))

    def failures(self, pod: Pod, candidates: bytearray, static: bytearray) -> dict[NodeFailure, tuple[int, int]]:
        """Of the nodes ``candidates`` sets (those the pod fits on otherwise), the ones inter-pod affinity and topology
        spread keep it from, per failure (anti-affinity first, as the filter checks it): (the first such node index,
        how many). ``static``: the nodes its signature may go to (whose domains a spread counts)."""
        own, theirs = self.forbidden(pod)
        anti = 0
        for key, value in (*own, *theirs):
            dom = self.domains(key).get(value)
            if dom is not None:
                anti |= int.from_bytes(dom, "big")
        size = len(candidates)
        cand = int.from_bytes(candidates, "big")
        allowed = self.affinity_mask(pod)
        blocked_anti = bytearray((cand & anti).to_bytes(size, "big"))
        rest = cand & ~anti
        blocked_aff = bytearray((rest & ~int.from_bytes(allowed, "big")).to_bytes(size, "big")) \
            if allowed is not None else bytearray(size)
        if allowed is not None:
            rest &= int.from_bytes(allowed, "big")
        spread = self.spread_mask(pod, static)
        blocked_spread = bytearray((rest & ~spread).to_bytes(size, "big")) if spread is not None else bytearray(size)
        out: dict[NodeFailure, tuple[int, int]] = {}
        for why, mask in ((NodeFailure.POD_ANTI_AFFINITY, blocked_anti), (NodeFailure.POD_AFFINITY, blocked_aff),
                          (NodeFailure.POD_TOPOLOGY_SPREAD, blocked_spread)):
            count = mask.count(1)
            if count:
                out[why] = (mask.find(1), count)
        return out
