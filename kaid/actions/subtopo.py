"""A PodGroup's sub-groups that carry a topology constraint of their own (KAI's v2alpha2 SubGroup.topologyConstraint),
as the tree ``gang.place_nested`` places a batch of the job's pods by (KAI's hierarchical topology,
actions/common/allocate.go allocateSubGroupSet at d5bc503a)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaid.actions.gangs import is_active
from kaid.model.objects import Job, Pod
from kaid.placement import gang as placement

if TYPE_CHECKING:
    from kaid.actions.session import Session


def constrained(job: Job) -> bool:
    """Whether a sub-group of the job carries a topology constraint of its own (``nest`` reads them)."""
    return any(_sub_topo(s) is not None for s in job.subgroups)


def _sub_topo(sub: dict[str, object], topologies: dict[str, list[str]] | None = None) -> placement.Topo | None:
    """A sub-group's own topology constraint (KAI: one without a topology name is none, topology_plugin's
    getJobTopology), as the placement reads it."""
    tc = sub.get("topologyConstraint")
    if not isinstance(tc, dict) or not tc.get("topology"):
        return None
    required, preferred = tc.get("requiredTopologyLevel"), tc.get("preferredTopologyLevel")
    levels = tuple((topologies or {}).get(str(tc["topology"])) or ())
    return placement.Topo(required, preferred, levels) if required or preferred else None


def _above(session: Session, topology: str | None, required: str | None, preferred: str | None) -> tuple[str, ...]:
    """The levels of ``topology`` above ``preferred``, nearest first, up to ``required`` (not it: its domain is the
    region already) or the top."""
    levels = session.snap.topologies.get(topology or "") or []
    if not preferred or preferred not in levels:
        return ()
    up = levels[:levels.index(preferred)][::-1]
    return tuple(up[:up.index(required)] if required in up else up)


def nest(session: Session, job: Job, batch: list[Pod]) -> placement.Nest | None:
    """The job's sub-groups that carry a topology constraint of their own (KAI's v2alpha2
    SubGroup.topologyConstraint), as the tree ``gang.place_nested`` places the batch by, the job's own constraint at
    its root; None when none does (the job is placed as one set, ``gang.place``)."""
    if not job.subgroups:
        return None
    topologies = session.snap.topologies
    topos = {str(s["name"]): t for s in job.subgroups if (t := _sub_topo(s, topologies)) is not None}
    if not topos:
        return None
    names = {str(s["name"]): str(s["topologyConstraint"]["topology"]) for s in job.subgroups if str(s["name"]) in topos}
    parent = {str(s["name"]): str(s.get("parent") or "") for s in job.subgroups}

    def chain(name: str) -> list[str]:  # the constrained sub-groups from ``name`` up, nearest first
        out: list[str] = []
        seen: set[str] = set()
        while name in parent and name not in seen:
            seen.add(name)
            if name in topos:
                out.append(name)
            name = parent[name]
        return out

    own = placement.Topo(job.required_level, job.preferred_level, tuple(topologies.get(job.topology) or ())) \
        if job.topology is not None else None
    root = placement.Nest(own, above=_above(session, job.topology, job.required_level, job.preferred_level))
    nests = {name: placement.Nest(topo, above=_above(session, names[name], topo.required, topo.preferred))
             for name, topo in topos.items()}
    for name in parent:  # (in the PodGroup's order of sub-groups)
        if name in nests:
            up = chain(parent[name])
            (nests[up[0]] if up else root).children.append(nests[name])
    for pod in batch:
        up = chain(pod.subgroup)
        (nests[up[0]] if up else root).pods.append(pod)
    index = session.index
    for pod in job.pods:  # a required domain the group's running pods hold already
        if pod.node and is_active(pod):
            node = session.snap.node_by_name.get(pod.node)
            for name in chain(pod.subgroup):
                nest = nests[name]
                key = nest.topo.required if nest.topo else None
                if key and node is not None and nest.fixed is None and (value := node.labels.get(key)) is not None:
                    nest.fixed = index.domains(key).get(value)
    return root
