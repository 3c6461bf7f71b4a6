"""The daemon's snapshots from watch events (kaid.kube.livesnap) against its cold path: the same objects, the same
assumptions (binds, evictions, pipelined pods not yet seen by the watch) and the PodGroups made from memory give
the same snapshot as ``build_snapshot`` of ``overlay.apply(objects)`` with ``podgroups_to_create`` of those."""

from __future__ import annotations

import copy
import random
import threading
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.cycle import Bind, Decisions, Eviction, run_cycle
from kaid.kube import livesnap
from kaid.kube.actuator import ApplyResult
from kaid.kube.cache import Subscriber
from kaid.kube.daemon import Daemon, Overlay
from kaid.kube.livesnap import LiveSnapshots
from kaid.kube.podgrouper import podgroup_for, podgroups_to_create
from kaid.kube.status import StatusWriter
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from kaid.model.objects import Snapshot
from kaid.model.pods import mark_bound, mark_pipelined
from kaid.model.vocabulary import PodStatus
from tests.objects import node, pod, queue
from tests.test_live_model import Cache, _make, describe

Obj = dict[str, Any]
NOW = 10_000.0


class FakeCache:
    """What LiveSnapshots needs of a watch cache: its subscribers, told by hand."""

    def __init__(self) -> None:
        self.subs: list[Subscriber] = []

    def subscribe(self, sub: Subscriber) -> None:
        self.subs.append(sub)


def listed(objs: list[Obj], cache: Cache, sub: Subscriber,
           kinds: tuple[str, ...] = ("Node", "Queue", "Pod", "PodGroup")) -> None:
    """The watches' first lists: ``objs`` of each kind into the watch cache, and told to the subscriber."""
    for kind in kinds:
        items = [o for o in objs if o["kind"] == kind]
        for o in items:
            cache.upsert(o)
        sub.listed(kind, items)


def _plain(snap: Snapshot) -> dict[str, Any]:
    """``describe``, less what differs by construction: the order of the jobs (the PodGroups made from memory come
    in another), and which dict an object is (assumed pods and PodGroups made from memory are made twice)."""
    d = describe(snap)
    d["jobs"] = sorted(d["jobs"])
    for _, q in d["queues"]:
        q["jobs"] = sorted(q["jobs"])
    for _, j in d["jobs"]:
        j["raw"] = j["raw"] is not None
    for p in d["pods"]:
        p["raw"] = None
    return d


def _cold(objects: list[Obj], overlay: Overlay, cfg: SchedulerConfig) -> dict[str, Any]:
    """The daemon's cold path (``Daemon.cycle`` with ``KAID_SNAPSHOT=cold``)."""
    objs = overlay.apply(objects, NOW)
    return _plain(build_snapshot(objs + podgroups_to_create(objs, cfg), cfg, NOW, wait_for_owners=True))


def _live(live: LiveSnapshots, overlay: Overlay) -> dict[str, Any]:
    return _plain(live.snapshot(overlay, NOW)[0])


def test_events_lists_assumptions_and_podgroups() -> None:
    cfg = SchedulerConfig()
    fake = FakeCache()
    live = LiveSnapshots(fake, cfg)
    overlay = Overlay()
    cache = Cache()
    sub = fake.subs[0]
    base = [node("n1"), node("n2", gpus=4), queue("default-queue"), queue("q1"),
            pod("a", gpus=1, queue="q1"), pod("b", gpus=2), pod("c", gpus=1, node_name="n1", phase="Running")]
    listed(base, cache, sub)
    assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg)
    _, made = live.snapshot(overlay, NOW)
    assert sorted(meta.object_key(pg) for pg in made) == ["default/pg-pod-a", "default/pg-pod-b", "default/pg-pod-c"]
    # kaid binds a, evicts c: assumed until the watch shows them
    bind = Bind("default/a", "n1", "default/pg-pod-a", "q1", (3,), None, 1000)
    overlay.record(Decisions(), ApplyResult(bound=[bind], evicted=[Eviction("default/c", "n1", "", "reclaim", None,
                                                                              "")]), NOW - 1)
    assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg)
    assert live.model.snapshot(NOW).node_by_name["n1"].used_pods == 2
    # the API server's PodGroup for a comes; the watch shows a bound
    pg = {"kind": "PodGroup", "metadata": {"name": "pg-pod-a", "namespace": "default"},
          "spec": {"minMember": 1, "queue": "q1"}}
    cache.upsert(pg)
    sub.event("PodGroup", False, pg)
    bound = copy.deepcopy(cache.items["Pod"]["default/a"])
    bound["spec"]["nodeName"] = "n1"
    cache.upsert(bound)
    sub.event("Pod", False, bound)
    assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg)
    assert "default/pg-pod-a" not in live.made
    # c deleted; a relist of the pods (410 Gone) with b gone and d new
    sub.event("Pod", True, cache.items["Pod"]["default/c"])
    cache.delete("Pod", "default/c")
    relisted = [copy.deepcopy(bound), pod("d", gpus=1)]
    cache.items["Pod"] = {meta.store_key(o): o for o in relisted}
    sub.listed("Pod", relisted)
    assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg)
    assert sorted(p.name for p in live.model.snapshot(NOW).pods) == ["a", "d"]


def test_an_event_the_model_cannot_hold_is_logged_and_the_others_are_applied(
        caplog: pytest.LogCaptureFixture) -> None:
    """A pod without a namespace (the API server gives every pod one: a watch that sends such an object is broken)
    is left out with a warning; the events and the list items after it are applied. Before, the model held it by
    one key and read its job by another, and every snapshot raised."""
    fake = FakeCache()
    live = LiveSnapshots(fake, SchedulerConfig())
    sub = fake.subs[0]
    nameless = pod("x", gpus=1)
    del nameless["metadata"]["namespace"]
    sub.listed("Node", [node("n1")])
    sub.listed("Queue", [queue("default-queue")])
    sub.listed("Pod", [pod("a", gpus=1), nameless, pod("b", gpus=1)])
    sub.event("Pod", False, nameless)
    sub.event("Pod", False, pod("c", gpus=1))
    with caplog.at_level("WARNING", logger="kaid.snapshot"):
        snap, _ = live.snapshot(Overlay(), NOW)
    assert sorted(p.name for p in snap.pods) == ["a", "b", "c"]
    assert sum("x without a namespace" in r.getMessage() for r in caplog.records) == 2
    assert {b.pod for b in run_cycle(snap, SchedulerConfig()).binds} == {"default/a", "default/b", "default/c"}


def test_a_pod_bound_before_its_pipelining_was_seen_keeps_its_own_devices() -> None:
    """A bind and then a pipelining assumed of a pod the watch shows bound (on a node the cluster may have lost): the
    watch has caught up with both, so no snapshot marks the pod with the assumed devices, the live path on its first
    reading included (it read the bind as caught up and left the pipelining for the next snapshot)."""
    cfg = SchedulerConfig()
    for nodes in ([node("n1", gpus=8)], []):
        fake = FakeCache()
        live = LiveSnapshots(fake, cfg)
        overlay = Overlay()
        cache = Cache()
        sub = fake.subs[0]
        base = [*nodes, queue("default-queue"),
                pod("c", gpus=2, node_name="n1", phase="Running", annotations={c.GPU_DEVICES_ANNOTATION: "2,6"})]
        listed(base, cache, sub)
        bind, pipelining = (Bind("default/c", name, "", "", (0, 1), None, 2000) for name in ("n1", "n2"))
        overlay.record(Decisions(), ApplyResult(bound=[bind]), NOW - 2)
        overlay.record(Decisions(pipelined=[pipelining]), ApplyResult(), NOW - 1)
        seen = _live(live, overlay)
        assert seen == _cold(cache.objects(), overlay, cfg), nodes
        assert [p["devices"] for p in seen["pods"]] == [(2, 6)], nodes
        assert not overlay.assumed_pods(NOW)


def test_random_events_against_the_cold_path() -> None:
    cfg = SchedulerConfig()
    for seed in range(150):  # (25 missed a bind and a pipelining assumed at once: 17 of seeds 25-199 hit it)
        rng = random.Random(seed)
        fake = FakeCache()
        live = LiveSnapshots(fake, cfg)
        sub = fake.subs[0]
        overlay = Overlay()
        cache = Cache()
        for q in (queue("default-queue"), queue("q-0"), queue("q-1")):
            cache.upsert(q)
            sub.event("Queue", False, q)
        for step in range(200):
            kind = rng.choice(("Pod", "Pod", "Pod", "Node", "PodGroup", "ReplicaSet", "Job"))
            have = cache.items.get(kind, {})
            r = rng.random()
            if r < 0.2 and have:
                key = rng.choice(list(have))
                sub.event(kind, True, have[key])
                cache.delete(kind, key)
            elif r < 0.23 and have:
                kept = [copy.deepcopy(o) for o in have.values() if rng.random() < 0.8]
                rng.shuffle(kept)
                cache.items[kind] = {meta.store_key(o): o for o in kept}
                sub.listed(kind, kept)
            else:
                obj = _make(rng, kind)
                cache.upsert(obj)
                sub.event(kind, False, obj)
            if rng.random() < 0.1 and cache.items.get("Pod"):
                key = rng.choice(list(cache.items["Pod"]))
                b = Bind(key, f"node-{rng.randint(0, 6)}", "", "", (0,), None, 1000)
                if rng.random() < 0.5:
                    overlay.record(Decisions(), ApplyResult(bound=[b]), NOW - 5)
                else:
                    overlay.record(Decisions(pipelined=[b]), ApplyResult(), NOW - 5)
            if rng.random() < 0.2 or step == 199:
                assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg), (seed, step)


def test_a_standby_applies_each_periods_events_and_leads_from_a_current_model() -> None:
    """A replica that stands by takes no snapshot; each period it applies the events queued since the last
    (``catch_up``), so its queue holds one period's events at most however long it stands by, and the snapshot it
    takes once it leads is the cold path's."""
    cfg = SchedulerConfig()
    fake = FakeCache()
    live = LiveSnapshots(fake, cfg)
    sub = fake.subs[0]
    overlay = Overlay()
    cache = Cache()
    base = [node("n1"), node("n2"), queue("default-queue")]
    listed(base, cache, sub)
    rng = random.Random(7)
    sent = 4  # the lists
    for period in range(30):
        for i in range(10):  # a pod made, another bound, another deleted
            made = pod(f"p{period}-{i}", gpus=1)
            cache.upsert(made)
            sub.event("Pod", False, made)
            pods = list(cache.items["Pod"].values())
            on_node = copy.deepcopy(rng.choice(pods))
            on_node["spec"]["nodeName"] = rng.choice(("n1", "n2"))
            on_node["status"]["phase"] = "Running"
            cache.upsert(on_node)
            sub.event("Pod", False, on_node)
            sent += 2
            if rng.random() < 0.6:
                gone = rng.choice(pods)
                cache.delete("Pod", meta.store_key(gone))
                sub.event("Pod", True, gone)
                sent += 1
        assert live.queued == sent  # this period's events only
        live.catch_up()
        assert live.queued == 0
        sent = 0
    assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg)


def test_no_podgroup_for_a_pending_pod_being_deleted_or_a_reservation_pod() -> None:
    """Neither is in a job of the snapshot, on either path: the cold path made a PodGroup for each (a job with no
    pods, written to the API server), the live path none."""
    cfg = SchedulerConfig()
    deleting = pod("going", gpus=1)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    reservation = pod("gpu-reservation-n1-abc", ns=c.RESERVATION_NAMESPACE, node_name="n1",
                      labels={c.RESERVATION_APP_LABEL: c.RESERVATION_APP, c.GPU_GROUP_LABEL: "g-1"})
    running_deleting = pod("stopping", gpus=1, node_name="n1")
    running_deleting["metadata"]["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    objects = [node("n1"), queue("default-queue"), deleting, reservation, running_deleting, pod("waiting", gpus=1)]
    made = sorted(meta.object_key(pg) for pg in podgroups_to_create(objects, cfg))
    assert made == ["default/pg-pod-stopping", "default/pg-pod-waiting"]  # a pod still on its node is in its job
    fake = FakeCache()
    live = LiveSnapshots(fake, cfg)
    for kind in ("Node", "Queue", "Pod", "PodGroup"):
        fake.subs[0].listed(kind, [o for o in objects if o["kind"] == kind])
    overlay = Overlay()
    _, made_live = live.snapshot(overlay, NOW)
    assert sorted(meta.object_key(pg) for pg in made_live) == made
    assert _live(live, overlay) == _cold(objects, overlay, cfg)


def test_a_podgroup_made_from_memory_is_made_again_only_when_what_it_is_made_from_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod bound and running since reads the same to ``podgroup_for``: its PodGroup is the one made before (not
    made again each snapshot until the API server's comes); a label of the pod, or a Namespace or owner event, makes
    it again; the snapshot is the cold path's throughout."""
    made_for: list[str] = []

    def counted(pods: list[Obj], *args: Any) -> Obj | None:
        made_for.append(meta.object_key(pods[0]))
        return podgroup_for(pods, *args)

    monkeypatch.setattr(livesnap, "podgroup_for", counted)
    cfg = SchedulerConfig()
    fake = FakeCache()
    live = LiveSnapshots(fake, cfg)
    sub = fake.subs[0]
    overlay = Overlay()
    cache = Cache()
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
    for o in (node("n1"), queue("default-queue"), queue("q1"), ns, pod("a", gpus=1), pod("b", gpus=1)):
        cache.upsert(o)
        sub.event(str(o["kind"]), False, o)
    _, made = live.snapshot(overlay, NOW)
    first = {meta.object_key(pg): pg for pg in made}
    assert sorted(made_for) == ["default/a", "default/b"]
    running = copy.deepcopy(cache.items["Pod"]["default/a"])
    running["spec"]["nodeName"] = "n1"
    running["status"]["phase"] = "Running"
    running["metadata"]["resourceVersion"] = "7"
    cache.upsert(running)
    sub.event("Pod", False, running)
    made_for.clear()
    _, made = live.snapshot(overlay, NOW)
    assert made_for == [] and all(pg is first[meta.object_key(pg)] for pg in made)  # not made again
    assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg)
    moved = copy.deepcopy(running)
    moved["metadata"]["labels"]["kai.scheduler/queue"] = "q1"
    cache.upsert(moved)
    sub.event("Pod", False, moved)
    _, made = live.snapshot(overlay, NOW)
    assert made_for == ["default/a"]
    again = {meta.object_key(pg): pg for pg in made}
    assert again["default/pg-pod-a"]["spec"]["queue"] == "q1" and again["default/pg-pod-b"] is first["default/pg-pod-b"]
    assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg)
    labelled = {**ns, "metadata": {"name": "default", "labels": {"kai.scheduler/queue": "q1"}}}
    cache.upsert(labelled)
    sub.event("Namespace", False, labelled)
    made_for.clear()
    _, made = live.snapshot(overlay, NOW)
    assert sorted(made_for) == ["default/a", "default/b"]
    assert {meta.object_key(pg): pg["spec"]["queue"] for pg in made} == \
        {"default/pg-pod-a": "q1", "default/pg-pod-b": "q1"}
    assert _live(live, overlay) == _cold(cache.objects(), overlay, cfg)


def test_the_next_snapshot_waits_for_a_reader_of_the_last() -> None:
    """A live snapshot is the model's own objects as its cycle changed them: a reader on another thread (the status
    writer) holds it, and the next snapshot waits until it lets go; the cycle's changes are undone only then."""
    cfg = SchedulerConfig()
    fake = FakeCache()
    live = LiveSnapshots(fake, cfg)
    overlay = Overlay()
    objects = [node("n1"), queue("default-queue"), pod("a", gpus=1)]
    for kind in ("Node", "Queue", "Pod", "PodGroup"):
        fake.subs[0].listed(kind, [o for o in objects if o["kind"] == kind])
    snap, _ = live.snapshot(overlay, NOW)
    assert [b.pod for b in run_cycle(snap, cfg).binds] == ["default/a"]
    (a,) = snap.pods
    n1 = snap.node_by_name["n1"]
    done_reading = live.hold()
    taken: list[Snapshot] = []
    later = threading.Thread(target=lambda: taken.append(live.snapshot(overlay, NOW)[0]))
    later.start()
    later.join(0.3)
    assert later.is_alive() and not taken
    assert a.status == PodStatus.ALLOCATED and n1.used_pods == 1  # as the cycle left them, for the reader
    done_reading()
    later.join(10)
    assert not later.is_alive()
    assert a.status == PodStatus.PENDING and n1.used_pods == 0 and taken[0].pods == [a]
    assert _plain(taken[0]) == _cold(objects, overlay, cfg)


class _Recorder:
    """A client that records the status writer's writes."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def merge_patch(self, path: str, body: Obj) -> Obj:
        self.writes.append(path)
        return body

    def strategic_patch(self, path: str, body: Obj) -> Obj:
        return self.merge_patch(path, body)

    def create(self, path: str, body: Obj) -> Obj:
        return self.merge_patch(path, body)


def test_the_status_writer_lets_go_of_the_snapshot_before_it_waits_and_writes() -> None:
    """The daemon's status writer reads the cycle's snapshot, lets go of it (the next cycle's snapshot may be taken),
    then waits for the PodGroups the cycle creates before it writes their status."""
    cfg = SchedulerConfig()
    snap = build_snapshot([node("n1"), queue("default-queue"), pod("a", gpus=1), _podgroup("pg-pod-a")], cfg, NOW)
    decisions = run_cycle(snap, cfg)
    client = _Recorder()
    writer = StatusWriter(client, cfg.schedulerName)  # type: ignore[arg-type]
    released = threading.Event()
    made: Future[list[Obj]] = Future()
    daemon = SimpleNamespace(status=writer)
    job = threading.Thread(target=Daemon._write_status,
                           args=(daemon, snap, decisions, ApplyResult(), [], [], released.set, [made]))
    job.start()
    assert released.wait(10)
    job.join(0.3)
    assert job.is_alive() and client.writes == []  # read, let go, waiting for the PodGroups
    made.set_result([])
    job.join(10)
    writer.close()
    assert not job.is_alive() and any("podgroups/pg-pod-a/status" in w for w in client.writes)


def test_the_status_writer_lets_go_of_the_snapshot_even_when_reading_it_fails() -> None:
    released: list[bool] = []
    writer = StatusWriter(None, "kai-scheduler")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        Daemon._write_status(SimpleNamespace(status=writer), None, Decisions(), ApplyResult(),  # type: ignore[arg-type]
                             [], [], lambda: released.append(True), [])
    writer.close()
    assert released == [True]


def _podgroup(name: str) -> Obj:
    return {"kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": 1, "queue": "default-queue"}}


def _exact(snap: Snapshot) -> dict[str, Any]:
    """``describe`` in the snapshot's own order (nothing sorted), the raw objects left out: two models fed the same
    events make their PodGroups from memory and their assumed pods each as new dicts."""
    d = describe(snap)
    for p in d["pods"]:
        p["raw"] = None
    for _, j in d["jobs"]:
        j["raw"] = j["raw"] is not None
    return d


def test_a_starting_leader_reading_its_lists_early_changes_no_snapshot_nor_decision() -> None:
    """A starting leader reads its lists while its early cycle's binds go out (``catch_up``,
    ``Daemon._read_lists_while``); the watch then brings those binds and other changes. Its first full snapshot, in
    the model's own order, and that cycle's decisions are those of a model that read it all at the snapshot: the
    PodGroups made from memory come in the order of their jobs' first pods, whichever order the reads fell in (a
    set's)."""
    cfg = SchedulerConfig()
    for seed in range(60):
        rng = random.Random(seed)
        fake = FakeCache()
        early, plain = LiveSnapshots(fake, cfg), LiveSnapshots(fake, cfg)
        overlay = Overlay()
        cache = Cache()
        for kind, items in (("Node", [node(f"node-{n}", gpus=4) for n in range(4)]),
                            ("Queue", [queue("default-queue"), queue("q-0"), queue("q-1")])):
            for o in items:
                cache.upsert(o)
            for sub in fake.subs:
                sub.listed(kind, items)
        for _ in range(rng.randint(20, 80)):
            obj = _make(rng, rng.choice(("Pod", "Pod", "Pod", "Pod", "PodGroup", "ReplicaSet", "Job")))
            cache.upsert(obj)
        for kind in ("Pod", "PodGroup", "ReplicaSet", "Job"):
            for sub in fake.subs:
                sub.listed(kind, list(cache.items.get(kind, {}).values()))
        early.catch_up()
        pods = list(cache.items.get("Pod", {}).values())
        for p in rng.sample(pods, min(len(pods), rng.randint(0, 10))):  # the early cycle's binds
            b = Bind(meta.store_key(p), f"node-{rng.randint(0, 3)}", "", "", (0,), None, 1000)
            overlay.record(Decisions(), ApplyResult(bound=[b]), NOW - 5)
            if rng.random() < 0.7:  # and the watch has shown some
                seen = copy.deepcopy(p)
                seen["spec"]["nodeName"] = b.node
                cache.upsert(seen)
                for sub in fake.subs:
                    sub.event("Pod", False, seen)
        for _ in range(rng.randint(0, 5)):  # other changes meanwhile
            obj = _make(rng, rng.choice(("Pod", "Pod", "PodGroup", "ReplicaSet", "Job")))
            cache.upsert(obj)
            for sub in fake.subs:
                sub.event(str(obj["kind"]), False, obj)
        snaps = [live.snapshot(overlay, NOW) for live in (early, plain)]
        assert _exact(snaps[0][0]) == _exact(snaps[1][0]), seed
        assert snaps[0][0].parts == snaps[1][0].parts, seed  # (the fingerprint: a pod's part names its job)
        assert [meta.object_key(pg) for pg in snaps[0][1]] == [meta.object_key(pg) for pg in snaps[1][1]], seed
        binds = [[(b.pod, b.node, b.devices) for b in run_cycle(snap, cfg).binds] for snap, _ in snaps]
        assert binds[0] == binds[1], seed


def test_a_job_whose_podgroup_is_made_from_memory_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that no PodGroup names is read once its PodGroup is made from memory, not before as well: a starting
    leader's ``catch_up`` of its lists leaves it to the first snapshot, which makes the PodGroup first (bench_kube's
    backlog: 2,141 single pods, each job read twice before). The snapshot and its fingerprint stay those of a model
    that read everything at the snapshot, and the cold path's."""
    reads: list[str] = []
    read_job = LiveModel._read_job

    def counted(self: LiveModel, key: str) -> None:
        reads.append(key)
        read_job(self, key)

    monkeypatch.setattr(LiveModel, "_read_job", counted)
    cfg = SchedulerConfig()
    fake = FakeCache()
    early, plain = LiveSnapshots(fake, cfg), LiveSnapshots(fake, cfg)
    overlay = Overlay()
    cache = Cache()
    gang = {"kind": "PodGroup", "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    singles = [pod(f"s{i}", gpus=1, node_name="n1" if i == 0 else None) for i in range(6)]
    members = [pod(f"g{i}", gpus=1, group="g") for i in range(2)]
    for kind, items in (("Node", [node("n1"), node("n2")]), ("Queue", [queue("default-queue")]),
                        ("PodGroup", [gang]), ("Pod", singles + members)):
        for o in items:
            cache.upsert(o)
        for sub in fake.subs:
            sub.listed(kind, items)
    early.catch_up()
    assert reads == ["default/g"]  # the single pods' jobs wait for their PodGroups
    reads.clear()
    snap, made = early.snapshot(overlay, NOW)
    assert sorted(reads) == [f"default/pg-pod-s{i}" for i in range(6)]  # each once, with its PodGroup
    assert len(made) == 6
    other, _ = plain.snapshot(overlay, NOW)
    assert _exact(snap) == _exact(other) and snap.parts == other.parts
    assert _plain(snap) == _cold(cache.objects(), overlay, cfg)
    reads.clear()
    early.catch_up()  # nothing changed: nothing read
    assert reads == []


_small = st.text(alphabet="abc-/", max_size=6)
_maybe_dict = st.one_of(st.none(), st.dictionaries(_small, _small, max_size=3))


@st.composite
def _watched_pods(draw: st.DrawFn) -> Obj:
    """A pod as the watch cache holds it, any of the parts an assumption writes present or not."""
    m: Obj = {"name": draw(_small), "namespace": "ns"}
    for part in ("annotations", "labels"):
        value = draw(_maybe_dict)
        if value is not None:
            m[part] = value
    if draw(st.booleans()):
        m["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    out: Obj = {"kind": "Pod", "metadata": m}
    if draw(st.booleans()):
        out["spec"] = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                       **({"nodeName": "n0"} if draw(st.booleans()) else {})}
    if draw(st.booleans()):
        out["status"] = {"phase": draw(st.sampled_from(["Pending", "Running"])), "conditions": [{"type": "X"}]}
    return out


@settings(max_examples=300, deadline=None)
@given(_watched_pods(), st.sampled_from(["bound", "evicted", "pipelined"]),
       st.lists(st.integers(0, 7), max_size=2, unique=True).map(tuple), st.lists(_small, max_size=2).map(tuple))
def test_an_assumed_pod_reads_as_a_deep_copy_marked_and_leaves_the_cache_s_alone(
        watched: Obj, kind: str, devices: tuple[int, ...], groups: tuple[str, ...]) -> None:
    """``Overlay.assumed`` copies only the parts it writes: the pod it returns equals the plain reading (a deep copy,
    marked), and the watch cache's pod, every part of it, is as it was."""
    key = meta.object_key(watched)
    b = Bind(key, "n1", "ns/j", "q", devices, None, 1000, action="reclaim", gpu_groups=groups)
    overlay = Overlay()
    if kind == "bound":
        overlay.bound[key] = (b, NOW)
    elif kind == "evicted":
        overlay.evicted[key] = NOW
    else:
        overlay.pipelined[key] = (b, NOW)
    before = copy.deepcopy(watched)
    plain = copy.deepcopy(watched)
    got = overlay.assumed(watched)
    assert watched == before
    if kind == "bound" and not (plain.get("spec") or {}).get("nodeName"):
        mark_bound(plain, b.node, b.devices, b.groups)
        plain.setdefault("status", {})["phase"] = "Running"
    elif kind == "evicted" and not plain["metadata"].get("deletionTimestamp"):
        plain["metadata"]["deletionTimestamp"] = meta.format_time(0)
    elif kind == "pipelined" and not meta.annotation(plain, c.PIPELINED_NODE_ANNOTATION) and \
            not (plain.get("spec") or {}).get("nodeName"):  # (bound since: the pipelining is over)
        mark_pipelined(plain, b.node, b.action, b.devices, b.groups)
    assert got == plain
