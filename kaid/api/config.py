"""kai's configuration file, validated with pydantic; every bad value gets a message that says the fix."""

from __future__ import annotations

import difflib
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kaid.api import constants as c
from kaid.api.crds import validation_message

Strategy = Literal["binpack", "spread"]


class Action(StrEnum):
    """The scheduling actions, in the order a cycle runs them (the config's ``actions`` turns each on or off); a
    Bind or an Eviction names the one that caused it."""

    ALLOCATE = "allocate"
    CONSOLIDATE = "consolidate"
    RECLAIM = "reclaim"
    PREEMPT = "preempt"
    STALE_GANG = "stale-gang"


class PlacementConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    gpu: Strategy = "binpack"
    cpu: Strategy = "binpack"
    # "cpsat": greedy first, CP-SAT when greedy fails or spreads a gang wider than needed.
    # "greedy": the greedy path alone (for comparison).
    gangSolver: Literal["cpsat", "greedy"] = "cpsat"
    solverTimeLimitSeconds: float = Field(0.5, gt=0, le=60)
    solverWorkers: int = Field(1, ge=1, le=16)


class LeaderElectionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = True
    namespace: str = "kai-scheduler"
    name: str = "kai-scheduler"
    leaseDurationSeconds: float = Field(15.0, gt=1, le=600)
    renewIntervalSeconds: float = Field(2.0, gt=0, le=60)


class SchedulerConfig(BaseModel):
    """Everything the engine and the daemon read from the config file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    schedulerName: str = c.DEFAULT_SCHEDULER_NAME
    queueLabelKeys: tuple[str, ...] = (c.QUEUE_LABEL, c.LEGACY_QUEUE_LABEL)
    defaultQueue: str = c.DEFAULT_QUEUE
    placement: PlacementConfig = PlacementConfig()
    actions: tuple[Action, ...] = tuple(Action)
    cyclePeriodSeconds: float = Field(1.0, gt=0, le=600)
    clientQPS: float = Field(50.0, gt=0)
    clientBurst: int = Field(100, ge=1)
    usageHalfLifeSeconds: float = Field(0.0, ge=0, description="0 turns usage history off.")
    staleGangGraceSeconds: float = Field(60.0, description="Negative means never evict stale gangs.")
    maxConsolidationMoves: int = Field(8, ge=0)
    maxVictimSearches: int = Field(64, ge=0, description="Pending jobs each of reclaim and preempt may try per "
                                   "cycle; the rest wait for the next cycle (bounds the cycle on deep backlogs).")
    leaderElection: LeaderElectionConfig = LeaderElectionConfig()
    metricsPort: int = Field(8080, ge=0, le=65535, description="0 turns the metrics and health server off.")
    metricsAddress: str = Field("0.0.0.0", description="Address the metrics and health server listens on.")
    createPodGroups: bool = Field(True, description="Make a PodGroup for every workload that names none.")
    earlyFirstCycle: bool = Field(True, description="At start, bind pending pods while the pod list still arrives "
                                  "(allocate only, on the pods on nodes listed apart); see kaid.kube.startup.")


def load_config(path: str | Path | None) -> SchedulerConfig:
    """Read and validate a YAML config; raise ValueError naming the file, field and fix."""
    if path is None:
        return SchedulerConfig()
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except OSError as err:
        raise ValueError(f"cannot read config file {p}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"config file {p} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"config file {p} must be a mapping of settings, got {type(data).__name__}")
    try:
        return SchedulerConfig.model_validate(data)
    except ValidationError as err:
        hints = []
        for item in err.errors():
            if item.get("type") == "extra_forbidden" and item.get("loc"):
                *parent, key = [str(x) for x in item["loc"]]
                model: Any = SchedulerConfig
                for part in parent:
                    model = getattr(model.model_fields.get(part), "annotation", None)
                fields = list(getattr(model, "model_fields", {}))
                close = difflib.get_close_matches(key, fields, n=1)
                if close:
                    hints.append(f"did you mean {'.'.join([*parent, close[0]])}?")
        raise ValueError(f"config file {p}: {validation_message(err)}" + (f" ({'; '.join(hints)})" if hints else "")
                         ) from None
