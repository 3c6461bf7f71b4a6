"""The snapshot's readings of pods, PodGroups and workload labels, written for speed (a cold snapshot reads tens of
thousands of each), read what the plain readings below read, field by field, on objects written every which way:
missing or malformed metadata, labels and annotations that are not text, timestamps that do not parse, devices
with empty parts. The plain readings are the code these replaced, kept here as the reference."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.api.quantity import QuantityError, to_int, to_milli
from kaid.model import build, jobs, pods
from kaid.model.objects import MAX_NODE_GPUS, MOST_AMOUNT, Job, Pod, Reason, own_warnings
from kaid.model.vocabulary import PodPhase, ReasonCode

Obj = dict[str, Any]

_TIMES = ["2026-01-01T00:00:00Z", "2026-01-01T00:00:07Z", "1960-01-01T00:00:00Z", "2026-13-01T00:00:00Z", "soon",
          "", None, 5, 1.5, "2026-01-01T00:00:00+02:00"]
_TEXTS = ["a", "b", "", None, 3, 2.5, True, ["x"]]


def _pick(rng: random.Random, values: list[Any]) -> Any:
    return rng.choice(values)


def _mapping(rng: random.Random, keys: list[str], values: list[Any]) -> Any:
    if rng.random() < 0.1:
        return rng.choice([None, [], "labels", {}])
    return {k: _pick(rng, values) for k in keys if rng.random() < 0.5}


def _pod_object(rng: random.Random, i: int) -> Obj:
    if rng.random() < 0.03:
        return {"spec": {}, "metadata": rng.choice([None, "x", []])}
    m: Obj = {"name": f"p{i}"}
    for key, values in (("namespace", ["ns", "", None, 7]), ("uid", [f"u{i}", "", None]),
                        ("creationTimestamp", _TIMES), ("deletionTimestamp", _TIMES)):
        if rng.random() < 0.6:
            m[key] = _pick(rng, values)
    m["labels"] = _mapping(rng, [c.GPU_GROUP_LABEL, "app", c.QUEUE_LABEL, c.PREEMPTIBILITY_LABEL], _TEXTS)
    anns = _mapping(rng, [c.GPU_DEVICES_ANNOTATION, c.GPU_FRACTION_ANNOTATION, c.GPU_MEMORY_ANNOTATION,
                          c.GPU_FRACTION_NUM_DEVICES_ANNOTATION, c.POD_GROUP_ANNOTATION, "other"],
                    ["0", "0,1", " 2 , 3", "0,,1", "1,", ",", "x", "", None, 3, "0.5", "1.5", "2000", "0", "2"])
    if isinstance(anns, dict) and rng.random() < 0.2:
        anns[7] = "a key that is not text"
    m["annotations"] = anns
    requests = {k: _pick(rng, ["1", "500m", "2Gi", 1, 1.5, True, "lots", "0.5"])
                for k in ("cpu", "memory", c.GPU_RESOURCE) if rng.random() < 0.6}
    resources: Obj = {"requests": requests}
    if rng.random() < 0.3:
        resources["limits"] = {c.GPU_RESOURCE: _pick(rng, ["1", "2", 1])}
    spec: Obj = {"containers": [{"name": "main", "resources": resources}]}
    if rng.random() < 0.1:
        spec["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "2"}}}]
    if rng.random() < 0.5:
        spec["nodeName"] = _pick(rng, ["n1", "", None])
    if rng.random() < 0.2:
        spec["nodeSelector"] = {"zone": _pick(rng, ["a", 1])}
    if rng.random() < 0.1:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
    if rng.random() < 0.1:
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists"}, "not a toleration"]
    status: Obj = {}
    if rng.random() < 0.7:
        status["phase"] = _pick(rng, ["Pending", "Running", "", None])
    if rng.random() < 0.5:
        status["startTime"] = _pick(rng, _TIMES)
    return {"kind": "Pod", "metadata": m, "spec": spec, "status": status}


# ------------------------------------------------------------------------------------- the plain readings
def plain_read_pod(obj: Obj, problems: list[Reason]) -> Pod:
    m = meta.meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    pod = Pod(str(m.get("namespace") or meta.DEFAULT_NAMESPACE), str(m.get("name", "")), str(m.get("uid") or ""))
    labels = meta.string_map(meta.mapping(m.get("labels")))
    pod.labels = labels
    pod.phase = str(status.get("phase") or PodPhase.PENDING)
    pod.node = spec.get("nodeName") or None
    pod.created = meta.parse_time(m.get("creationTimestamp"))
    pod.started = meta.parse_time(status.get("startTime")) or pod.created
    deletion = m.get("deletionTimestamp")
    pod.releasing = bool(deletion)
    pod.deleted = meta.parse_time(deletion)
    try:
        req = pods.pod_requests(spec)
    except QuantityError as err:
        problems.append(Reason(ReasonCode.INVALID_SPEC, f"pod {pod.key} has an unreadable resource request: {err}"))
        req = {}
    pod.cpu, pod.mem = int(to_milli(req.get("cpu", 0))), int(to_int(req.get("memory", 0)))
    gpu = req.get(c.GPU_RESOURCE, Decimal(0))
    if gpu != gpu.to_integral_value():
        problems.append(Reason(
            ReasonCode.INVALID_SPEC, f"pod {pod.key} requests {gpu} {c.GPU_RESOURCE}; whole devices only. "
            f"Use the annotation {c.GPU_FRACTION_ANNOTATION} for a share of one GPU"))
    pod.gpu_whole = int(gpu)
    if not (0 <= pod.gpu_whole <= MAX_NODE_GPUS and 0 <= pod.cpu <= MOST_AMOUNT and 0 <= pod.mem <= MOST_AMOUNT):
        pods._impossible_amounts(pod, problems)  # (refused and bounded, as read_parts does)
    ann = meta.string_map(meta.mapping(m.get("annotations")))
    pods._read_sharing(pod, ann, problems)
    selector = spec.get("nodeSelector")
    if selector:
        pod.node_selector = {str(k): str(v) for k, v in selector.items()}
    if spec.get("affinity"):
        pod.affinity = pods._required_terms(spec)
    tolerations = spec.get("tolerations")
    if tolerations:
        pod.tolerations = [t for t in tolerations if isinstance(t, dict)]
    if pod.node_selector or pod.affinity or pod.tolerations:
        pod.sig = repr((sorted(pod.node_selector.items()), pod.affinity, pod.tolerations))
    devs = ann.get(c.GPU_DEVICES_ANNOTATION)
    if devs:
        try:
            pod.devices = tuple(int(x) for x in devs.split(",") if x.strip())
        except ValueError:
            pod.devices = ()
    pod.gpu_group = labels.get(c.GPU_GROUP_LABEL)
    pod.raw = obj
    return pod


def plain_labels_from(job: Job, pod: Obj, owner: Obj | None, ns_obj: Obj | None, cfg: SchedulerConfig) -> None:
    """The workload's labels read whole (the owner's, then the pod's, then the namespace's), then used where the job
    says nothing."""
    sources = (meta.labels_of(owner), meta.labels_of(pod))
    queue: str | None = None
    for labels in sources:
        for key in cfg.queueLabelKeys:
            queue = _text(labels.get(key))
            if queue:
                break
        if queue:
            break
    else:
        ns_labels = meta.labels_of(ns_obj)
        queue = next((q for q in (_text(ns_labels.get(k)) for k in cfg.queueLabelKeys) if q), None)
    spec = pod.get("spec") or {}
    priority: int | None = None
    for labels in sources:
        priority_class = _text(labels.get(c.PRIORITY_CLASS_LABEL))
        if priority_class:
            break
    else:
        priority_class = str(spec.get("priorityClassName") or "") or None
        if priority_class is None and "priority" in spec:
            priority = meta.as_int(spec.get("priority"), 0)
    preemptibility = bad = None
    for labels in sources:
        value = _text(labels.get(c.PREEMPTIBILITY_LABEL))
        if value in (c.PREEMPTIBLE, c.NON_PREEMPTIBLE):
            preemptibility = value
            break
        if value:
            bad = value
            break
    topology = required = preferred = None
    for anns in (meta.annotations_of(owner), meta.annotations_of(pod)):
        topology = _text(anns.get(c.TOPOLOGY_ANNOTATION))
        if topology:
            required = _text(anns.get(c.TOPOLOGY_REQUIRED_ANNOTATION))
            preferred = _text(anns.get(c.TOPOLOGY_PREFERRED_ANNOTATION))
            break
    if not job.queue:
        job.queue = queue or cfg.defaultQueue
    if not job.priority_class:
        job.priority_class = priority_class or ""
        if priority is not None:
            job.priority = priority
    if job.preemptibility is None:
        job.preemptibility = preemptibility
        if bad:
            own_warnings(job).append(Reason(
                ReasonCode.INVALID_PREEMPTIBILITY,
                f"label {c.PREEMPTIBILITY_LABEL}={bad!r} is neither "
                f"{c.PREEMPTIBLE} nor {c.NON_PREEMPTIBLE}; using the priority to decide"))
    if job.topology is None and topology:
        job.topology, job.required_level, job.preferred_level = topology, required, preferred


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def plain_stale_since(job: Job) -> float | None:
    marks = [meta.parse_time(meta.annotation(p.raw, c.STALE_SINCE_ANNOTATION)) for p in job.pods if p.raw]
    return max(marks, default=0.0) or None


# ------------------------------------------------------------------------------------- the comparisons
def _pod_fields(pod: Pod) -> dict[str, Any]:
    out = {s: getattr(pod, s) for s in Pod.__slots__ if s != "raw"}
    out["raw"] = id(pod.raw)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_pods_read_as_the_plain_reading_reads_them(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    monkeypatch.setattr(pods, "_SHARES", {})  # (the GPU shares other tests read left aside)
    if seed % 2:  # the memories of timestamps and GPU shares forget as they go
        monkeypatch.setattr(pods, "_TIMES_KEPT", 3)
        monkeypatch.setattr(pods, "_SHARES_KEPT", 2)
    objects = [_pod_object(rng, i) for i in range(400)]
    for obj in objects + objects:  # the second time through: from the memories
        fast: list[Reason] = []
        plain: list[Reason] = []
        assert _pod_fields(pods.read_pod(obj, fast)) == _pod_fields(plain_read_pod(obj, plain)), obj
        assert [r.to_dict() for r in fast] == [r.to_dict() for r in plain], obj


def test_timestamps_read_as_meta_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pods, "_TIMES", {})  # (other tests' timestamps left aside)
    monkeypatch.setattr(pods, "_TIMES_KEPT", 4)
    values = [*_TIMES, *(f"2026-01-01T00:00:{s:02d}Z" for s in range(10)), "2026-01-01T00:00:00Z"]
    for value in values + values:
        assert pods.timestamp(value) == meta.parse_time(value), value
    assert len(pods._TIMES) <= 4


def _labelled(rng: random.Random) -> Obj | None:
    if rng.random() < 0.2:
        return None
    labels = _mapping(rng, [c.QUEUE_LABEL, "runai/queue", c.PRIORITY_CLASS_LABEL, c.PREEMPTIBILITY_LABEL],
                      ["q1", "q2", "", None, c.PREEMPTIBLE, c.NON_PREEMPTIBLE, "maybe", "train", 3])
    anns = _mapping(rng, [c.TOPOLOGY_ANNOTATION, c.TOPOLOGY_REQUIRED_ANNOTATION, c.TOPOLOGY_PREFERRED_ANNOTATION],
                    ["racks", "rack", "zone", "", None])
    spec = {k: _pick(rng, ["train", "", None, 5, "7"]) for k in ("priorityClassName", "priority")
            if rng.random() < 0.4}
    return {"metadata": {"labels": labels, "annotations": anns}, "spec": spec}


@pytest.mark.parametrize("seed", range(4))
def test_workload_labels_read_only_where_the_job_says_nothing(seed: int) -> None:
    rng = random.Random(seed)
    cfg = SchedulerConfig(queueLabelKeys=(c.QUEUE_LABEL, "runai/queue"))
    for _ in range(500):
        pod, owner, ns = _labelled(rng) or {}, _labelled(rng), _labelled(rng)
        preset = {"queue": _pick(rng, ["", "pg-queue"]), "priority_class": _pick(rng, ["", "pg-class"]),
                  "preemptibility": _pick(rng, [None, c.PREEMPTIBLE]),
                  "topology": _pick(rng, [None, "pg-topology"])}
        fast, plain = Job("ns", "j"), Job("ns", "j")
        for job in (fast, plain):
            for k, v in preset.items():
                setattr(job, k, v)
        jobs._labels_from(fast, pod, owner, ns, cfg)
        plain_labels_from(plain, pod, owner, ns, cfg)
        seen = ("queue", "priority_class", "priority", "preemptibility", "topology", "required_level",
                "preferred_level")
        assert [getattr(fast, k) for k in seen] == [getattr(plain, k) for k in seen], (pod, owner, ns, preset)
        assert [r.to_dict() for r in fast.warnings] == [r.to_dict() for r in plain.warnings]


def test_stale_marks_of_pods_read_as_the_plain_reading() -> None:
    rng = random.Random(3)
    marks = ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "1960-01-01T00:00:00Z", "soon", "", None, 5]
    for _ in range(400):
        job = Job("ns", "j")
        for i in range(rng.randint(0, 4)):
            p = Pod("ns", f"p{i}", "")
            if rng.random() < 0.9:
                anns = {c.STALE_SINCE_ANNOTATION: _pick(rng, marks)} if rng.random() < 0.6 else {}
                p.raw = _pick(rng, [{"metadata": {"annotations": anns}}, {"metadata": None}, {}])
            job.pods.append(p)
        expected = plain_stale_since(job)
        build.complete_job(job, {}, {}, {})
        assert job.stale_since == expected


def test_podgroups_read_their_metadata_as_before() -> None:
    rng = random.Random(5)
    for i in range(300):
        m: Obj = {"name": f"pg{i}"}
        for key, values in (("namespace", ["ns", "", None]), ("creationTimestamp", _TIMES)):
            if rng.random() < 0.7:
                m[key] = _pick(rng, values)
        if rng.random() < 0.5:
            m["annotations"] = _mapping(rng, [c.STALE_SINCE_ANNOTATION, "other"], _TIMES)
        obj = {"kind": "PodGroup", "metadata": _pick(rng, [m, m, m, None]), "spec": {"minMember": 1, "queue": "q"}}
        found: dict[str, Job] = {}
        jobs.read_podgroup(obj, found)
        (job,) = found.values()
        mm = meta.meta(obj)
        assert (job.namespace, job.name, job.created) == (
            meta.namespace(obj), meta.name(obj), meta.parse_time(mm.get("creationTimestamp")))
        assert job.stale_since == (meta.parse_time(meta.annotations_of(obj).get(c.STALE_SINCE_ANNOTATION)) or None)


@pytest.mark.parametrize("seed", range(3))
def test_one_annotation_reads_as_meta_reads_it(seed: int) -> None:
    rng = random.Random(seed)
    for i in range(400):
        obj = _pod_object(rng, i)
        for key in (c.GPU_DEVICES_ANNOTATION, c.POD_GROUP_ANNOTATION, "other", "absent"):
            assert pods.annotation_text(obj, key) == meta.annotation(obj, key), obj
