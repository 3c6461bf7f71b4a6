"""Dry-run: N scheduling cycles over a set of objects, each applying the previous cycle's decisions in
memory. The JSON it returns is the contract of ``kaictl dry-run -o json``."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Snapshot
from kaid.model.vocabulary import BOUND_OR_RUNNING, PodStatus
from kaid.sim.apply import apply

Obj = dict[str, Any]


@dataclass
class DryRun:
    cycles: int
    pods: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
    last: Decisions | None = None
    snapshot: Snapshot | None = None

    def to_json(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "pods": self.pods, "actions": self.actions, "pending": self.pending,
                "problems": self.problems}


def dry_run(objects: Iterable[Obj], cfg: SchedulerConfig, cycles: int = 1, now: float = 0.0) -> DryRun:
    objs = copy.deepcopy(list(objects))
    result = DryRun(cycles)
    evicted: dict[str, tuple[str, str]] = {}
    decisions = Decisions()
    snap: Snapshot | None = None
    for cycle in range(1, cycles + 1):
        t = now + (cycle - 1) * cfg.cyclePeriodSeconds
        snap = build_snapshot(objs, cfg, t)
        decisions = run_cycle(snap, cfg)
        for b in decisions.binds:
            result.actions.append({"cycle": cycle, "type": "bind", "pod": b.pod, "node": b.node,
                                   "reason": b.action, "by": b.by})
        for e in decisions.evictions:
            result.actions.append({"cycle": cycle, "type": "evict", "pod": e.pod, "node": e.node,
                                   "reason": e.action, "by": e.by, "message": e.message})
        for p in decisions.pipelined:
            result.actions.append({"cycle": cycle, "type": "pipeline", "pod": p.pod, "node": p.node,
                                   "reason": p.action, "by": p.by})
        for key in apply(objs, decisions, t):
            evicted[key] = (next(e.job for e in decisions.evictions if e.pod == key), "")
        for e in decisions.evictions:
            if e.pod in evicted:
                evicted[e.pod] = (e.job, e.action)
        snap.release()  # (done with: the decisions hold what the rest reads)
    final = build_snapshot(objs, cfg, now + cycles * cfg.cyclePeriodSeconds)
    result.snapshot = final
    result.last = decisions
    for pod in sorted(final.pods, key=lambda p: p.key):
        job = pod.job
        result.pods.append({
            "namespace": pod.namespace, "name": pod.name, "podGroup": job.name if job else None,
            "queue": job.queue if job else None,
            "status": PodStatus.RUNNING if pod.status in BOUND_OR_RUNNING else pod.status,
            "node": pod.node, "gpus": _gpus(pod.gpu_milli_on(final.node_by_name.get(pod.node or ""))),
            "gpuDevices": list(pod.devices), "gpuGroup": pod.gpu_group if pod.frac_devices else None,
        })
    for key, (job_key, _) in sorted(evicted.items()):
        ns, name = key.split("/", 1)
        result.pods.append({"namespace": ns, "name": name, "podGroup": job_key.split("/", 1)[1], "queue": None,
                            "status": PodStatus.EVICTED, "node": None, "gpus": 0, "gpuDevices": [], "gpuGroup": None})
    for job_key, reasons in sorted(decisions.pending.items()):
        job = final.jobs.get(job_key)
        if job is None or not any(p.status == PodStatus.PENDING for p in job.pods):
            continue
        result.pending.append({"namespace": job.namespace, "podGroup": job.name, "queue": job.queue,
                               "reasons": [r.to_dict() for r in reasons]})
    result.queues = [row.to_dict() for row in decisions.queues]
    result.problems = [p.to_dict() for p in final.problems]
    return result


def _gpus(milli: int) -> float | int:
    return milli // 1000 if milli % 1000 == 0 else round(milli / 1000, 3)
