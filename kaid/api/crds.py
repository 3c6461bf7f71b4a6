"""Pydantic models of kai's custom resources: the one source of truth for their schemas.

The CRD manifests in ``manifests/helm/kai/crds/`` are generated from these models (``kaid.api.crdgen``)
and a test checks that they are current. The engine validates incoming objects with them and turns every
validation error into a reason on the object, never an exception that stops the cycle.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kaid.api.duration import parse_duration


class _Spec(BaseModel):
    # (a number must be finite: "inf" or an integer beyond a float's range read from a file is no quota or weight)
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True, allow_inf_nan=False)


class QueueResource(_Spec):
    """One resource of a queue. Units: gpu in devices, cpu in millicores, memory in megabytes."""

    quota: float = Field(0, description="Deserved amount; -1 means unlimited deserved, 0 no guarantee.")
    limit: float = Field(0, description="Hard cap; -1 means no limit, 0 nothing beyond the quota.")
    overQuotaWeight: float = Field(1, ge=0, description="Share of the over-quota pool among siblings.")

    @field_validator("quota", "limit")
    @classmethod
    def _minus_one_or_positive(cls, value: float) -> float:
        if value < 0 and value != -1:
            raise ValueError(f"{value:g} is not allowed: use -1 for unlimited or a value >= 0")
        return value

    @model_validator(mode="after")
    def _limit_not_below_quota(self) -> QueueResource:
        if self.limit > 0 and self.quota > 0 and self.limit < self.quota:
            raise ValueError(
                f"limit {self.limit:g} is below quota {self.quota:g}: raise the limit to at least the quota, "
                "or set it to -1 for no limit"
            )
        return self


class QueueResources(_Spec):
    gpu: QueueResource | None = None
    cpu: QueueResource | None = None
    memory: QueueResource | None = None


class QueueSpec(_Spec):
    """``scheduling.run.ai/v2`` Queue spec."""

    displayName: str | None = None
    parentQueue: str | None = None
    priority: int = Field(100, description="Siblings with higher priority get over-quota resources first.")
    preemptMinRuntime: str | None = Field(None, description="Pods younger than this are not preempted.")
    reclaimMinRuntime: str | None = Field(None, description="Pods younger than this are not reclaimed.")
    resources: QueueResources | None = None

    @field_validator("preemptMinRuntime", "reclaimMinRuntime")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value


class TopologyConstraint(_Spec):
    topology: str | None = None
    requiredTopologyLevel: str | None = None
    preferredTopologyLevel: str | None = None


class SubGroup(_Spec):
    name: str
    minMember: int = Field(1, ge=0, description="Pods of this sub-group that must be placed together.")
    minSubGroup: int | None = Field(None, ge=0, description="For a sub-group with child sub-groups: how many of "
                                    "them must be satisfied (all when unset).")
    parent: str | None = None
    topologyConstraint: TopologyConstraint | None = Field(
        None, description="Where this sub-group's pods go inside the domain its parent (or the PodGroup) is placed "
                          "in: one domain of the required level, one of the preferred level where one holds them.")


MAX_SUBGROUP_DEPTH = 32
"""The most levels of sub-groups kai reads in a PodGroup (a workload nests two or three; the engine walks them
recursively, and a PodGroup of 400 sub-groups, each the parent of the next, failed every cycle)."""


class PodGroupSpec(_Spec):
    """``scheduling.run.ai/v2alpha2`` PodGroup spec."""

    minMember: int = Field(1, ge=0, description="Pods that must be placed together before any starts.")
    queue: str | None = None
    priorityClassName: str | None = None
    preemptibility: Literal["preemptible", "non-preemptible"] | None = None
    minSubGroup: int | None = Field(None, ge=0, description="With subGroups: how many top-level sub-groups must be "
                                    "satisfied for the PodGroup to run (all when unset).")
    subGroups: list[SubGroup] = Field(default_factory=list)
    topologyConstraint: TopologyConstraint | None = None
    stalenessGracePeriod: str | None = Field(
        None, description="How long a running gang may stay below minMember; negative means never evict."
    )
    preemptionDelay: str | None = Field(
        None, description="How long the PodGroup must wait, from its creation or its last eviction (whichever is "
                          "later), before it may evict other workloads (reclaim, preempt, consolidate)."
    )
    markUnschedulable: bool | None = Field(
        None, description="Whether the scheduler sets PodScheduled=False with the reasons on the PodGroup's pending "
                          "pods (default true); its status and events say them either way.")
    schedulingBackoff: int | None = Field(
        None, ge=-(2**31), lt=2**31, description="-1 (the default): the PodGroup is tried every cycle; any other "
        "value (KAI supports 1): once per node pool, then left alone while its last scheduling condition says it is "
        "unschedulable in the pool it is in.")

    @model_validator(mode="after")
    def _subgroup_tree(self) -> PodGroupSpec:
        """Sub-groups form a tree: each named, once, and no chain of parents comes back to where it began."""
        names = [s.name for s in self.subGroups]
        if any(not n for n in names):
            raise ValueError("every sub-group needs a name")
        twice = sorted(n for n, k in Counter(names).items() if k > 1)
        if twice:
            raise ValueError(f"sub-group names must be unique: {', '.join(twice)} repeated")
        parent = {s.name: s.parent or "" for s in self.subGroups}
        for name in names:
            seen: set[str] = set()
            at = name
            while at in parent:
                if at in seen:
                    raise ValueError(f"the parents of sub-group {name} form a cycle: set each parent to a sub-group "
                                     "above it, or leave it unset")
                if len(seen) == MAX_SUBGROUP_DEPTH:
                    raise ValueError(f"sub-group {name} is more than {MAX_SUBGROUP_DEPTH} levels deep: kai reads at "
                                     f"most {MAX_SUBGROUP_DEPTH} levels of sub-groups")
                seen.add(at)
                at = parent[at]
        return self

    @field_validator("stalenessGracePeriod", "preemptionDelay")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value


_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def is_label_key(key: str) -> bool:
    """A valid Kubernetes label key: an optional DNS-subdomain prefix and ``/``, then a name of at most 63
    characters (alphanumerics, ``-``, ``_``, ``.``; alphanumeric at both ends)."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _LABEL_PREFIX.fullmatch(prefix)):
        return False
    return bool(_LABEL_NAME.fullmatch(name))


class TopologyLevel(_Spec):
    nodeLabel: str = Field(min_length=1)
    alias: str | None = Field(None, min_length=1, description="A name for this level that a workload's topology "
                              "constraint may use in place of its nodeLabel (e.g. rack).")

    @field_validator("nodeLabel")
    @classmethod
    def _label_key(cls, value: str) -> str:
        if not is_label_key(value):
            raise ValueError(f"{value!r} is not a node label key (such as topology.kubernetes.io/zone)")
        return value

    @field_validator("alias")
    @classmethod
    def _alias_key(cls, value: str | None) -> str | None:
        if value is not None and not is_label_key(value):
            raise ValueError(f"alias {value!r} is not a label key: letters, digits, '-', '_' and '.', at most 63, with "
                             "an optional DNS prefix and '/' (such as rack)")
        return value


class TopologySpec(_Spec):
    """``kai.scheduler/v1alpha1`` Topology spec: levels from the widest (e.g. zone) to the narrowest."""

    levels: list[TopologyLevel] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> TopologySpec:
        labels = [lvl.nodeLabel for lvl in self.levels]
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise ValueError(f"a node label may be one level only: {', '.join(twice)} repeated")
        aliases = [lvl.alias for lvl in self.levels if lvl.alias is not None]
        twice = sorted({a for a in aliases if aliases.count(a) > 1})
        if twice:
            raise ValueError(f"an alias may name one level only: {', '.join(twice)} repeated")
        clash = sorted(set(aliases) & set(labels))
        if clash:
            raise ValueError(f"an alias may not be a level's node label: {', '.join(clash)}")
        return self

    def aliases(self) -> dict[str, str]:
        """Alias -> the node label of its level."""
        return {lvl.alias: lvl.nodeLabel for lvl in self.levels if lvl.alias is not None}


def validation_message(error: Exception) -> str:
    """A one-line, user-facing form of a pydantic ValidationError."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        parts = []
        for item in errors():
            loc = ".".join(str(p) for p in item.get("loc", ()))
            msg = str(item.get("msg", "")).removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}" if loc else msg)
        return "; ".join(parts)
    return str(error)
