"""The watch cache's copy of a PodGroup (``kaid.kube.strip.strip``) keeps the annotations kaid reads from PodGroups:
its own stale mark and KAI's last-eviction time, which a ``preemptionDelay`` counts from. A PodGroup read through
the cache must give the job the same times as the object itself."""

from __future__ import annotations

import copy

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.kube.strip import strip
from kaid.model.build import build_snapshot
from kaid.sim.cluster import EPOCH, NAMESPACE, Obj, gpu_node, job_objects, queue_obj
from kaid.sim.workload import JobSpec


def _objects() -> list[Obj]:
    spec = JobSpec(name="j", queue="q", arrival_s=0.0, duration_s=60.0, pods=1, min_member=1, gpus_per_pod=1,
                   cpu_milli_per_pod=1000, memory_mb_per_pod=1000, priority_class="train", kind="train")
    objs = [gpu_node("n0", 8), queue_obj("q", gpu_quota=8), *job_objects(spec, EPOCH)]
    for obj in objs:
        if obj["kind"] == "PodGroup":
            obj["metadata"].setdefault("annotations", {}).update({
                c.LAST_EVICTION_ANNOTATION: meta.format_time(EPOCH + 30),
                c.STALE_SINCE_ANNOTATION: meta.format_time(EPOCH + 40),
                "unrelated.example.com/note": "dropped"})
            obj["spec"]["preemptionDelay"] = "10m"
    return objs


def test_the_podgroup_times_kaid_reads_survive_the_cache() -> None:
    objs = _objects()
    kept = [s for s in (strip(copy.deepcopy(o)) for o in objs) if s is not None]
    (group,) = [o for o in kept if o["kind"] == "PodGroup"]
    assert set(group["metadata"]["annotations"]) == {c.LAST_EVICTION_ANNOTATION, c.STALE_SINCE_ANNOTATION}
    cfg = SchedulerConfig()
    (plain,) = build_snapshot(objs, cfg, EPOCH + 60).jobs.values()
    (cached,) = build_snapshot(kept, cfg, EPOCH + 60).jobs.values()
    assert plain.key == f"{NAMESPACE}/{plain.name}"
    assert (cached.last_eviction, cached.stale_since, cached.preemption_delay) == \
        (plain.last_eviction, plain.stale_since, plain.preemption_delay) == (EPOCH + 30, EPOCH + 40, 600.0)
