"""Where a pod's bound volumes let it run: the node affinity of each PersistentVolume bound to one of its claims
(a local volume's node, a zonal disk's zone), which kube-scheduler's VolumeBinding filter checks ("volume node
affinity conflict"). A pod placed elsewhere cannot attach its volume and waits in ContainerCreating for ever: a
StatefulSet's pod recreated after an eviction must go back where its local volume is.

A volume is read from its PersistentVolume alone: bound (``status.phase: Bound``) to the claim its ``claimRef``
names, with ``spec.nodeAffinity.required`` terms. A pending pod waits for an unbound claim its StorageClass binds at
once (``unbound_at_once``); one of a class that waits for its first consumer is told its node at the bind
(``kaid.kube.volumes``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kaid.api import meta
from kaid.model.objects import Pod, Reason
from kaid.model.selectors import Terms, node_selector_terms
from kaid.model.vocabulary import ReasonCode

Obj = dict[str, Any]
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
    if not raw:
        return None
    try:
        terms = node_selector_terms(raw)
    except ValueError:  # (the API server refuses it: a hand-written file's; reachable from no node, not from all)
        terms = []
    return f"{ref.get('namespace') or meta.DEFAULT_NAMESPACE}/{ref['name']}", terms


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


# a claim's StorageClass binds it at once (the default), or waits for its first consumer
IMMEDIATE, WAIT_FOR_FIRST_CONSUMER = "Immediate", "WaitForFirstConsumer"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


class ClaimModes:
    """How each StorageClass binds its claims (``volumeBindingMode``), and the default class (the one annotated
    ``storageclass.kubernetes.io/is-default-class: "true"``): what says whether an unbound claim binds at once."""

    __slots__ = ("default", "modes")

    def __init__(self, classes: Iterable[Obj]) -> None:
        self.modes: dict[str, str] = {}
        self.default: str | None = None
        for sc in classes:
            m = sc.get("metadata")
            name = m.get("name") if isinstance(m, dict) else None
            if not isinstance(name, str) or not name:
                continue
            self.modes[name] = str(sc.get("volumeBindingMode") or IMMEDIATE)
            anns = m.get("annotations") if isinstance(m, dict) else None
            if isinstance(anns, dict) and str(anns.get(DEFAULT_CLASS_ANNOTATION)).lower() == "true":
                self.default = name

    def binds_at_once(self, claim: Obj) -> bool:
        """Whether an unbound claim is bound by its class as soon as it exists (kube-scheduler waits for that before
        it places the pod: the volume's node affinity then decides), as far as the classes known say: a class not
        known says nothing (a snapshot without StorageClasses)."""
        spec = claim.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        name = spec.get("storageClassName")
        if name == "":
            return True  # (no class: bound to a volume made by hand, whatever node the pod is on)
        if name is None:
            name = self.default
        mode = self.modes.get(name) if isinstance(name, str) else None
        return mode is not None and mode != WAIT_FOR_FIRST_CONSUMER


def unbound_at_once(claims: Sequence[str], namespace: str, known: Mapping[str, Obj], modes: ClaimModes) -> list[str]:
    """The pod's claims (``claims``, in ``namespace``) that exist, are bound to no volume yet, and whose class binds
    at once: the pod waits for them (kube-scheduler's VolumeBinding: "pod has unbound immediate
    PersistentVolumeClaims"). A claim that does not exist yet holds the bind back (``kaid.kube.volumes``)."""
    out: list[str] = []
    for name in claims:
        claim = known.get(f"{namespace}/{name}")
        if claim is None:
            continue
        spec = claim.get("spec")
        if isinstance(spec, dict) and spec.get("volumeName"):
            continue
        if modes.binds_at_once(claim):
            out.append(name)
    return out


def read_claims(pod: Pod, names: Sequence[str], bound: Mapping[str, Terms] | None, known: Mapping[str, Obj] | None,
                modes: ClaimModes | None) -> Reason | None:
    """What a pod's claims (``names``) say: the nodes its bound volumes reach (``bind_to_volumes``), and, for a
    pending pod, why it waits for claims bound at once (``unbound_at_once``), or None."""
    if bound:
        bind_to_volumes(pod, names, bound)
    if known and modes is not None and not pod.node:
        waiting = unbound_at_once(names, pod.namespace, known, modes)
        if waiting:
            return waiting_for_claims(pod, waiting)
    return None


def waiting_for_claims(pod: Pod, names: list[str]) -> Reason:
    """Why a pod waits for claims its class binds at once (``unbound_at_once``)."""
    return Reason(ReasonCode.UNBOUND_IMMEDIATE_CLAIM,
                  f"pod {pod.key} has unbound immediate PersistentVolumeClaims ({', '.join(names)}): their "
                  f"StorageClass binds them as soon as they exist, and the pod waits for that to know where their "
                  f"volumes can be reached; check the claims' events if it lasts",
                  {"claims": names})
