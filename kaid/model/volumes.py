"""Where a pod's bound volumes let it run: the node affinity of each PersistentVolume bound to one of its claims
(a local volume's node, a zonal disk's zone), which kube-scheduler's VolumeBinding filter checks ("volume node
affinity conflict"). A pod placed elsewhere cannot attach its volume and waits in ContainerCreating for ever: a
StatefulSet's pod recreated after an eviction must go back where its local volume is.

A volume is read from its PersistentVolume alone: bound (``status.phase: Bound``) to the claim its ``claimRef``
names, with ``spec.nodeAffinity.required`` terms. Claims that are not bound yet (a class that waits for its first
consumer: ``kaid.kube.volumes``) constrain nothing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kaid.model.objects import Pod

Obj = dict[str, Any]
Terms = list[list[dict[str, Any]]]  # nodeSelectorTerms as ``Pod.affinity`` holds them: OR of ANDs
BOUND = "Bound"


def bound_claim(pv: Obj) -> tuple[str, Terms] | None:
    """The claim (``namespace/name``) a PersistentVolume is bound to and its required node affinity terms, or None
    for a volume that is not bound or reachable from every node."""
    spec, status = pv.get("spec"), pv.get("status")
    if not isinstance(spec, dict) or not isinstance(status, dict) or status.get("phase") != BOUND:
        return None
    ref, affinity = spec.get("claimRef"), spec.get("nodeAffinity")
    if not isinstance(ref, dict) or not ref.get("name") or not isinstance(affinity, dict):
        return None
    required = affinity.get("required")
    raw = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    if not isinstance(raw, list) or not raw:
        return None
    terms: Terms = []
    for term in raw:
        term = term if isinstance(term, dict) else {}
        exprs = [e for e in term.get("matchExpressions") or () if isinstance(e, dict)]
        exprs += [{**f, "field": True} for f in term.get("matchFields") or () if isinstance(f, dict)]
        terms.append(exprs)
    return f"{ref.get('namespace') or 'default'}/{ref['name']}", terms


def bound_volumes(pvs: Iterable[Obj]) -> dict[str, Terms]:
    """Claim key -> the node affinity terms of the volume bound to it (``bound_claim``), for every such volume."""
    out: dict[str, Terms] = {}
    for pv in pvs:
        found = bound_claim(pv)
        if found is not None:
            out[found[0]] = found[1]
    return out


def bind_to_volumes(pod: Pod, claims: Sequence[str], bound: Mapping[str, Terms]) -> None:
    """Keep ``pod`` (read, with claims named ``claims`` in its namespace) to the nodes its bound volumes reach."""
    terms = tuple(t for name in claims if (t := bound.get(f"{pod.namespace}/{name}")) is not None)
    if terms:
        pod.volume_terms = terms
        pod.sig = repr((pod.sig, "volumes", terms))  # (which nodes take it: a signature of its own)
