"""Reading jobs: a PodGroup object, or the group a pod makes with its workload's other pods; then what the
job's queue, priority class and topology say about it. A problem becomes a Reason on the job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from pydantic import ValidationError

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.api.crds import PodGroupSpec, validation_message
from kaid.api.duration import parse_duration
from kaid.model.grouping import (
    WATCHED_OWNER_KINDS,
    OwnerIndex,
    annotated_durations,
    annotated_topology,
    group_for_pod,
    label_sources,
    labelled_preemptibility,
    labelled_priority,
    labelled_queue,
    podgrouper_skipped_by,
    top_owner,
)
from kaid.model.objects import NO_BACKOFF, Job, Pod, PriorityClass, Queue, Reason, own_errors, own_warnings
from kaid.model.pods import annotation_text, timestamp
from kaid.model.vocabulary import ReasonCode

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class _SpecReading:
    """What a valid PodGroup spec says."""

    min_member: int
    queue: str
    priority_class: str
    preemptibility: str | None
    subgroups: tuple[dict[str, Any], ...]
    min_subgroup: int | None
    topology: tuple[str | None, str | None, str | None] | None  # topology, required level, preferred level
    stale_grace: float | None
    preemption_delay: float | None
    mark_unschedulable: bool
    scheduling_backoff: int


_READINGS: dict[str, _SpecReading | str] = {}  # a spec as written -> its reading, or why it is invalid
_READINGS_KEPT = 4096


def _read_spec(spec: Any) -> _SpecReading | str:
    """A PodGroup spec read and validated, or the validation's message. The PodGroups of one kind of workload
    write the same spec, so readings are remembered by the spec's text (``repr`` tells 1, 1.0, True and "1" apart)."""
    key = repr(spec)
    known = _READINGS.get(key)
    if known is not None:
        return known
    try:
        valid = PodGroupSpec.model_validate(spec or {})
    except ValidationError as err:
        known = validation_message(err)
    else:
        tc = valid.topologyConstraint
        known = _SpecReading(
            valid.minMember, valid.queue or "", valid.priorityClassName or "", valid.preemptibility,
            tuple(s.model_dump() for s in valid.subGroups), valid.minSubGroup,
            None if tc is None else (tc.topology, tc.requiredTopologyLevel, tc.preferredTopologyLevel),
            None if valid.stalenessGracePeriod is None else parse_duration(valid.stalenessGracePeriod),
            None if valid.preemptionDelay is None else parse_duration(valid.preemptionDelay),
            valid.markUnschedulable is not False,
            NO_BACKOFF if valid.schedulingBackoff is None else valid.schedulingBackoff)
    if len(_READINGS) >= _READINGS_KEPT:
        _READINGS.clear()
    _READINGS[key] = known
    return known


def read_podgroup(obj: Obj, jobs: dict[str, Job]) -> None:
    """The job of a PodGroup object, into ``jobs``; an invalid spec leaves it with an error."""
    m = meta.meta(obj)
    job = Job(str(m.get("namespace") or meta.DEFAULT_NAMESPACE), str(m.get("name", "")))
    job.explicit = True
    job.raw = obj
    job.created = timestamp(m.get("creationTimestamp"))
    jobs[job.key] = job
    spec = _read_spec(obj.get("spec"))
    if isinstance(spec, str):
        own_errors(job).append(Reason(ReasonCode.INVALID_POD_GROUP, f"PodGroup {job.key} is invalid: {spec}"))
        named = meta.mapping(obj.get("spec")).get("queue")
        if named and isinstance(named, str):  # (its queue as written, where it names one: else the default queue
            job.queue = named  # was read, and a second reason said that queue did not exist)
        return
    job.min_member = spec.min_member
    job.queue = spec.queue
    job.priority_class = spec.priority_class
    if spec.preemptibility:
        job.preemptibility = spec.preemptibility
    if spec.subgroups:  # (else it stays ``UNWRITTEN``)
        job.subgroups = list(spec.subgroups)  # the sub-groups' mappings are read, never written
    job.min_subgroup = spec.min_subgroup
    if spec.topology is not None:
        job.topology, job.required_level, job.preferred_level = spec.topology
    if spec.stale_grace is not None:
        job.stale_grace = spec.stale_grace
    job.mark_unschedulable, job.scheduling_backoff = spec.mark_unschedulable, spec.scheduling_backoff
    if spec.preemption_delay is not None and spec.preemption_delay > 0:  # (KAI: none, or not positive, is no delay)
        job.preemption_delay = spec.preemption_delay
    anns = m.get("annotations")
    if isinstance(anns, dict):
        if c.STALE_SINCE_ANNOTATION in anns:
            job.stale_since = meta.parse_time(anns[c.STALE_SINCE_ANNOTATION]) or None
        if c.LAST_EVICTION_ANNOTATION in anns:  # (KAI: one it cannot parse is none)
            job.last_eviction = meta.parse_time(anns[c.LAST_EVICTION_ANNOTATION]) or None


def delay_end(job: Job) -> float | None:
    """When the job may first evict others (KAI's ``PreemptionDelayEnd``): its preemptionDelay after its creation or
    its last eviction, whichever is later; None without a delay."""
    if job.preemption_delay is None:
        return None
    anchor = job.created
    if job.last_eviction is not None and job.last_eviction > anchor:
        anchor = job.last_eviction
    return anchor + job.preemption_delay


def job_for_pod(obj: Obj, pod: Pod, jobs: dict[str, Job], owners: OwnerIndex, namespaces: Mapping[str, Obj],
                cfg: SchedulerConfig, wait_for_owners: bool = False, pg_name: str | None = None) -> Job:
    """The job a pod belongs to: the PodGroup it names, else its workload's (made on its first pod). ``pg_name``:
    the PodGroup annotation as text (``annotation_text``), where the caller has read it."""
    if pg_name is None:
        pg_name = annotation_text(obj, c.POD_GROUP_ANNOTATION)
    owner: Obj | None = None
    if pg_name:
        key = f"{pod.namespace}/{pg_name}"
        job = jobs.get(key)
        if job is None:
            job = Job(pod.namespace, pg_name)
            own_errors(job).append(Reason(
                ReasonCode.MISSING_POD_GROUP,
                f"pod {pod.key} names PodGroup {pg_name} (annotation {c.POD_GROUP_ANNOTATION}), "
                f"which does not exist in namespace {pod.namespace}: create the PodGroup or remove the annotation",
                {"podGroup": pg_name}))
            jobs[key] = job
    else:
        info = group_for_pod(obj, owners)
        owner = info.owner if info.owner is not obj else None
        key = f"{pod.namespace}/{info.name}"
        job = jobs.get(key)
        if job is None:
            job = Job(pod.namespace, info.name)
            job.min_member = info.min_member
            job.created = meta.parse_time(meta.meta(owner).get("creationTimestamp")) if owner else 0.0
            job.raw = owner
            jobs[key] = job
            skipped_by = podgrouper_skipped_by(obj, owners)
            if skipped_by is not None:
                own_errors(job).append(Reason(
                    ReasonCode.POD_GROUPER_SKIPPED,
                    f"{skipped_by} has annotation {c.SKIP_PODGROUPER_ANNOTATION}: \"true\", so no PodGroup is made "
                    f"for pod {pod.key}, and it names none: set its annotation {c.POD_GROUP_ANNOTATION} to the "
                    "PodGroup it belongs to, or remove the skip annotation", {"skippedBy": skipped_by}))
            elif wait_for_owners and info.owner is None and info.owner_kind in WATCHED_OWNER_KINDS:
                own_errors(job).append(Reason(
                    ReasonCode.OWNER_NOT_SEEN,
                    f"waiting to see its {info.owner_kind} {info.owner_name}, which decides how many "
                    "of its pods must start together", {"kind": info.owner_kind, "name": info.owner_name}))
    if not job.pods and _labels_may_tell(job, obj, owner):
        _labels_from(job, obj, owner, namespaces.get(pod.namespace), cfg)  # (the pod's namespace as read from obj)
    return job


def _labels_may_tell(job: Job, pod: Obj, owner: Obj | None) -> bool:
    """Whether ``_labels_from`` can tell the job anything: always for a workload's job or a PodGroup that leaves
    its queue or priority class unsaid; for a PodGroup that says both (as most do), only when its first pod carries
    the preemptibility label or the topology annotation and the PodGroup does not say that already. (Asked once per
    job of a cold snapshot: a few look-ups where the label readings are a dozen calls.)"""
    if owner is not None or not job.queue or not job.priority_class:
        return True
    m = pod.get("metadata")
    if not isinstance(m, dict):
        return False  # (no labels, no annotations: nothing to tell)
    if job.preemptibility is None:
        labels = m.get("labels")
        if isinstance(labels, dict) and c.PREEMPTIBILITY_LABEL in labels:
            return True
    if job.topology is None:
        anns = m.get("annotations")
        if isinstance(anns, dict) and c.TOPOLOGY_ANNOTATION in anns:
            return True
    return False


def _labels_from(job: Job, pod: Obj, owner: Obj | None, ns_obj: Obj | None, cfg: SchedulerConfig) -> None:
    """Queue, priority class, preemptibility and topology from the owner, then the pod, then the namespace
    (``grouping.workload_labels``); what an explicit PodGroup says wins, and is not looked for in the labels."""
    sources = label_sources(pod, owner)
    if not job.queue:
        job.queue = labelled_queue(sources, ns_obj, cfg.queueLabelKeys) or cfg.defaultQueue
    if not job.priority_class:
        priority_class, priority = labelled_priority(sources, pod)
        job.priority_class = priority_class or ""
        if priority is not None:
            job.priority = priority
    if job.preemptibility is None:
        job.preemptibility, bad = labelled_preemptibility(sources)
        if bad:
            own_warnings(job).append(Reason(
                ReasonCode.INVALID_PREEMPTIBILITY,
                f"label {c.PREEMPTIBILITY_LABEL}={bad!r} is neither "
                f"{c.PREEMPTIBLE} nor {c.NON_PREEMPTIBLE}; using the priority to decide"))
    if job.topology is None:
        topology, required, preferred = annotated_topology(pod, owner)
        if topology:
            job.topology, job.required_level, job.preferred_level = topology, required, preferred
    if not job.explicit:  # (a PodGroup's own fields win; KAI's pod grouper reads these for the PodGroups it makes)
        _durations_from(job, pod, owner)


def _durations_from(job: Job, pod: Obj, owner: Obj | None) -> None:
    """A workload's preemption delay and staleness grace period from its annotations (``annotated_durations``): what
    the PodGroup kaid makes for it will say (``kaid.kube.podgrouper``)."""
    fields, problems = annotated_durations(pod, owner)
    for problem in problems:
        own_warnings(job).append(Reason(ReasonCode.INVALID_ANNOTATION, problem))
    if "stalenessGracePeriod" in fields:
        job.stale_grace = parse_duration(fields["stalenessGracePeriod"])
    if "preemptionDelay" in fields and (delay := parse_duration(fields["preemptionDelay"])) > 0:
        job.preemption_delay = delay  # (KAI: a zero delay is none)


_NAME = attrgetter("name")


Aliases = Mapping[str, Mapping[str, str]]  # topology name -> alias of a level -> the level's node label


def finish_job(job: Job, queues: Mapping[str, Queue], pcs: Mapping[str, PriorityClass],
               topologies: Mapping[str, list[str]], aliases: Aliases | None = None) -> None:
    """Once every pod is in: the job's order, age, priority, preemptibility, the levels its topology constraints
    name by alias read as their node labels, and what is wrong with its queue or topology."""
    if len(job.pods) > 1:
        job.pods.sort(key=_NAME)
    if not job.created:
        job.created = min((p.created for p in job.pods), default=0.0)
    if job.priority_class:
        pc = pcs.get(job.priority_class)
        if pc is None:
            own_warnings(job).append(Reason(
                ReasonCode.UNKNOWN_PRIORITY_CLASS,
                f"priority class {job.priority_class!r} does not exist; using priority 0 "
                f"(preemptible). Create it, or use one of {', '.join(sorted(pcs))}",
                {"priorityClass": job.priority_class}))
            job.priority = 0
        else:
            job.priority = pc.value
            job.preempt_never = pc.preempt_never
    job.preemptible = (job.preemptibility == c.PREEMPTIBLE) if job.preemptibility else \
        job.priority < c.PREEMPTIBLE_BELOW
    q = queues.get(job.queue)
    if q is None:
        own_errors(job).append(Reason(
            ReasonCode.UNKNOWN_QUEUE, f"queue {job.queue!r} does not exist: create it (kaictl queue create {job.queue} "
            f"--gpu-quota N) or label the workload with an existing queue ({c.QUEUE_LABEL}=NAME)",
            {"queue": job.queue}))
    elif q.errors:
        own_errors(job).append(Reason(ReasonCode.INVALID_QUEUE, f"its queue {q.name} is invalid: {q.errors[0].message}",
                                 {"queue": q.name}))
    elif q.children:
        own_errors(job).append(Reason(
            ReasonCode.NOT_LEAF_QUEUE,
            f"queue {q.name} has child queues ({', '.join(ch.name for ch in q.children)}); only "
            "leaf queues hold workloads: submit to one of its children", {"queue": q.name}))
    if aliases:
        resolve_aliases(job, aliases)
    if job.topology is not None:
        levels = topologies.get(job.topology)
        if levels is None:
            own_errors(job).append(Reason(
                ReasonCode.UNKNOWN_TOPOLOGY,
                f"topology {job.topology!r} does not exist: create the Topology object or fix the "
                f"{c.TOPOLOGY_ANNOTATION} annotation (known: {', '.join(sorted(topologies)) or 'none'})",
                {"topology": job.topology}))
        else:
            for lvl in (job.required_level, job.preferred_level):
                if lvl is not None and lvl not in levels:
                    own_errors(job).append(Reason(
                        ReasonCode.UNKNOWN_TOPOLOGY_LEVEL,
                        f"{lvl!r} is not a level of topology {job.topology} (its levels: "
                        f"{', '.join(levels)})", {"topology": job.topology, "level": lvl}))
    elif job.required_level or job.preferred_level:
        own_errors(job).append(Reason(
            ReasonCode.INVALID_TOPOLOGY, "a topology level is set without a topology name: set "
            f"spec.topologyConstraint.topology or the {c.TOPOLOGY_ANNOTATION} annotation"))
    for sub in job.subgroups:
        if sub.get("topologyConstraint"):
            _check_sub_topology(job, sub, topologies)
    if job.subgroups:
        _check_pod_subgroups(job)


def resolve_aliases(job: Job, aliases: Aliases) -> None:
    """The levels of the job's topology constraints, and of its sub-groups', that name a level by its alias, read as
    the level's node label (KAI's ``PodGroupInfo.ResolveTopologyAliases`` at d5bc503a; an alias is never a node
    label of its Topology, so a node label reads as itself). Sub-groups are copied where one changes: their
    mappings are shared with the spec's reading."""
    if job.topology is not None:
        own = aliases.get(job.topology)
        if own:
            job.required_level = own.get(job.required_level or "", job.required_level)
            job.preferred_level = own.get(job.preferred_level or "", job.preferred_level)
    if not job.subgroups:
        return
    subgroups = []
    for sub in job.subgroups:
        tc = sub.get("topologyConstraint")
        named = aliases.get(str(tc.get("topology"))) if isinstance(tc, dict) else None
        if tc and named and any(tc.get(k) in named for k in _LEVEL_FIELDS):
            tc = {**tc, **{k: named[tc[k]] for k in _LEVEL_FIELDS if tc.get(k) in named}}
            sub = {**sub, "topologyConstraint": tc}
        subgroups.append(sub)
    job.subgroups = subgroups


_LEVEL_FIELDS = ("requiredTopologyLevel", "preferredTopologyLevel")
_POD_NAMES_SHOWN = 3


def _check_pod_subgroups(job: Job) -> None:
    """Every pod of a job with sub-groups names one of its pod sets, the sub-groups with none under them (KAI leaves
    out a pod that does not, "Pod references subgroup X, which does not exist in PodGroup": job_info.go AddTaskInfo /
    addInvalidSubGroupTask at d5bc503a; a pod without the label names ``default``). kai holds the job and says which
    pods, as for any pod it cannot read (docs/compatibility.md)."""
    parents = {s.get("parent") for s in job.subgroups}
    pod_sets = sorted(str(s["name"]) for s in job.subgroups if s["name"] not in parents)
    named = set(pod_sets)
    wrong: dict[str, list[str]] = {}
    for pod in job.pods:
        name = pod.subgroup
        if name not in named:
            wrong.setdefault(name, []).append(pod.name)
    for name, pods in wrong.items():
        shown = ", ".join(pods[:_POD_NAMES_SHOWN]) + (f" and {len(pods) - _POD_NAMES_SHOWN} more"
                                                      if len(pods) > _POD_NAMES_SHOWN else "")
        said = (f"sub-group {name!r} (label {c.SUBGROUP_LABEL})" if name != c.DEFAULT_SUBGROUP
                else f"no sub-group (no label {c.SUBGROUP_LABEL})")
        own_errors(job).append(Reason(
            ReasonCode.UNKNOWN_SUBGROUP,
            f"{'pods' if len(pods) > 1 else 'pod'} {shown} of PodGroup {job.key} "
            f"{'name' if len(pods) > 1 else 'names'} {said}, which is not one of its pod sets "
            f"({', '.join(pod_sets)}: the sub-groups with no sub-group under them): label the pod with one of "
            "them, or add the sub-group to the PodGroup's spec.subGroups", {"subGroup": name, "pods": pods}))


def _check_sub_topology(job: Job, sub: Mapping[str, Any], topologies: Mapping[str, list[str]]) -> None:
    """A sub-group's own topology constraint names a Topology and levels of it (KAI: a topology that does not exist
    fails the job, "Requested topology X does not exist"; a level not in it is a configuration error; a constraint
    without a topology name is none, which kai says)."""
    tc, name = sub["topologyConstraint"], sub["name"]
    topology, levels = tc.get("topology"), (tc.get("requiredTopologyLevel"), tc.get("preferredTopologyLevel"))
    if not topology:
        if any(levels):
            own_warnings(job).append(Reason(
                ReasonCode.INVALID_TOPOLOGY, f"sub-group {name} sets a topology level without a topology name, so "
                "its constraint is ignored (as KAI does): set its topologyConstraint.topology",
                {"subGroup": name}))
        return
    known = topologies.get(topology)
    if known is None:
        own_errors(job).append(Reason(
            ReasonCode.UNKNOWN_TOPOLOGY,
            f"topology {topology!r} of sub-group {name} does not exist: create the Topology object or fix the "
            f"sub-group's topologyConstraint (known: {', '.join(sorted(topologies)) or 'none'})",
            {"topology": topology, "subGroup": name}))
        return
    for lvl in levels:
        if lvl and lvl not in known:
            own_errors(job).append(Reason(
                ReasonCode.UNKNOWN_TOPOLOGY_LEVEL,
                f"{lvl!r} (sub-group {name}) is not a level of topology {topology} (its levels: {', '.join(known)})",
                {"topology": topology, "level": lvl, "subGroup": name}))


def _owner_capacity(owner: Obj | None) -> int | None:
    """How many pods an owner will ever run at once, when it says so."""
    if owner is None:
        return None
    kind = owner.get("kind")
    spec = owner.get("spec") or {}
    try:
        if kind == "Job":
            return int(spec.get("parallelism", 1))
        if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
            return int(spec.get("replicas", 1))
    except (TypeError, ValueError):
        return None
    return None


def check_min_member(jobs: Mapping[str, Job], owners: OwnerIndex) -> None:
    """A gang whose minMember its workload can never reach (a Job of parallelism 2 with minMember 4) says so."""
    for job in jobs.values():
        if not job.pods or job.min_member <= len(job.pods):
            continue
        for p in job.pods:
            if p.raw is not None:
                _, _, o = top_owner(p.raw, owners)
                if o is not None and o is not p.raw:
                    cap = _owner_capacity(o)
                    if cap is not None and cap < job.min_member:
                        own_errors(job).append(Reason(
                            ReasonCode.MIN_MEMBER_TOO_LARGE,
                            f"PodGroup {job.key} needs minMember={job.min_member} pods at once "
                            f"but its {o.get('kind')} {meta.name(o)} runs at most {cap}: lower minMember to "
                            f"{cap} or raise the workload's replicas", {"minMember": job.min_member, "max": cap}))
                        break
