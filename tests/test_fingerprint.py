"""The fingerprint a live model keeps of its objects (``kaid.model.fingerprint``, ``LiveModel.parts``) for the memory
of vain victim searches (``kaid.actions.memory``): the parts it keeps are those of the objects it hands out, after
any sequence of events and of cycles on its own objects; its fingerprint changes whenever the plain reading of the
snapshot does; and cycles on its snapshots decide the same with the memory as without it."""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kaid.actions.memory import SearchMemory, fingerprint
from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import SchedulerConfig
from kaid.cycle import run_cycle
from kaid.model.fingerprint import ObjectParts, job_part, label_part, node_part, pod_part
from kaid.model.journal import job_errors
from kaid.model.live import LiveModel
from kaid.model.objects import Reason, Snapshot
from kaid.model.vocabulary import PodStatus
from kaid.sim.apply import apply
from tests.objects import node, pod, queue
from tests.test_eviction_properties import NOW, SETTINGS, Case, break_a_gang, cases, start
from tests.test_live_model import _event, _outcome, _scribble_journaled, busy_model
from tests.test_search_memory import CHANGES, _change, _digest

Obj = dict[str, Any]


def plain_parts(model: LiveModel, snap: Snapshot) -> ObjectParts:
    """The parts of a snapshot's objects worked out afresh (a pod's sequence number from the model)."""
    out = ObjectParts(order=hash(tuple(snap.jobs)))
    for n in snap.nodes:
        out.nodes += node_part(n)
    for p in snap.pods:
        seq = model.pods[p.key].seq
        out.pods += pod_part(p, seq)
        out.labels[p.namespace] = out.labels.get(p.namespace, 0) + label_part(p, seq)
    for j in snap.jobs.values():
        out.jobs += job_part(j, tuple(p.key for p in j.pods))
    return out


def _same(kept: ObjectParts, plain: ObjectParts) -> bool:
    spaces = set(kept.labels) | set(plain.labels)
    return kept.key(tuple(sorted(spaces))) == plain.key(tuple(sorted(spaces)))


def run_kept_parts(seed: int, steps: int) -> tuple[int, int]:
    """Random events and cycles on the model's own objects (their decisions sometimes coming back as events, some
    jobs held with an error as the daemon holds them): after every step the parts the snapshot carries are those of
    its objects, and two snapshots with the same fingerprint read the same. Returns (snapshots, distinct worlds)."""
    rng = random.Random(seed)
    cfg = SchedulerConfig()
    model, cache = busy_model(cfg, rng)
    now = 5000.0
    seen: dict[int, int] = {}  # the live fingerprint -> the plain one
    for _ in range(steps):
        if rng.random() < 0.6:  # (else the same objects again: the fingerprint must not move)
            _event(rng, model, cache)
        snap = model.snapshot(now)
        assert snap.parts is not None and _same(snap.parts, plain_parts(model, snap))
        if rng.random() < 0.2:
            for job in list(snap.jobs.values())[:2]:  # held by the daemon before the cycle
                job_errors(snap.journal, job).append(Reason("Held", "held"))
        live = fingerprint(snap, cfg)
        plain = fingerprint(dataclasses.replace(snap, parts=None), cfg)
        assert seen.setdefault(live, plain) == plain, "one fingerprint for two different worlds"
        r = rng.random()
        if r < 0.4:
            decisions = run_cycle(snap, cfg)
            if rng.random() < 0.5:
                _outcome(rng, decisions, model, cache, now)
        elif r < 0.5:
            _scribble_journaled(snap)
    return steps, len(seen)


@given(st.integers(0, 2**32))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_kept_parts_are_those_of_the_objects(seed: int) -> None:
    snaps, worlds = run_kept_parts(seed, 80)
    event(f"distinct worlds: {'some repeated' if worlds < snaps else 'all new'}")


def test_kept_parts_long() -> None:
    for seed in range(8):
        run_kept_parts(seed, 200)


def _feed(model: LiveModel, world: list[Obj], known: dict[str, set[str]]) -> None:
    """The world as a watch would report it: every object again as a new dict, and those gone deleted."""
    now: dict[str, set[str]] = {}
    for obj in world:
        model.upsert(copy.deepcopy(obj))
        now.setdefault(str(obj["kind"]), set()).add(meta.store_key(obj))
    for kind, keys in known.items():
        for key in keys - now.get(kind, set()):
            model.delete(kind, key)
    known.clear()
    known.update(now)


def _live_run(case: Case, changes: list[tuple[str, int]], remember: bool) -> tuple[list[Any], int]:
    cfg = case.cfg.model_copy(update={"placement": case.cfg.placement.model_copy(update={"gangSolver": "greedy"})})
    world = start(case.objs, cfg, case.spread) + copy.deepcopy(case.late)
    if case.broken:
        world = break_a_gang(world)
    model = LiveModel(cfg)
    known: dict[str, set[str]] = {}
    memory: SearchMemory | None = SearchMemory() if remember else None
    digests: list[Any] = []
    hits = 0
    t = NOW
    for change, n in changes:
        _feed(model, world, known)
        snap = model.snapshot(t)
        before = memory
        d = run_cycle(snap, cfg, memory=memory)
        if remember:
            assert d.memory is not None and before is not None
            hits += sum(len(m) for a, m in d.memory.misses.items()
                        if before.worlds.get(a) == d.memory.worlds.get(a) and t < before.until)
            memory = d.memory
        digests.append(_digest(d))
        apply(world, d, t)
        t = _change(world, change, n, t)
    return digests, hits


@SETTINGS
@given(case=cases(), changes=st.lists(st.tuples(st.sampled_from(CHANGES), st.integers(0, 50)), min_size=4,
                                      max_size=10))
def test_memory_on_live_snapshots_changes_no_decision(case: Case, changes: list[tuple[str, int]]) -> None:
    """The memory over a live model's snapshots (every object reported again each cycle, as new dicts): the same
    decisions as without it, cycle by cycle."""
    without, _ = _live_run(case, changes, remember=False)
    with_memory, hits = _live_run(case, changes, remember=True)
    event(f"vain searches skipped: {'some' if hits else 'none'}")
    for k, (a, b) in enumerate(zip(without, with_memory, strict=True)):
        assert a == b, f"cycle {k + 1} differs"


def test_holders_read_again_with_their_node() -> None:
    """A node read again makes its pods' templates again, and the model hashes again only those whose accounting
    changed (``fingerprint.accounted``): a shared-GPU pod whose group's opener left opens a group of its own on the
    same device, a whole-GPU pod gets the device it recorded once the pod that held it left, and the pods of a node
    gone are NODE_GONE. The kept parts stay those of the objects (mutants that leave the group, the devices or the
    status out of ``accounted`` fail here)."""
    model = LiveModel(SchedulerConfig())
    objs = [node("n0", gpus=1), node("n1", gpus=2), queue("q")]
    half = {c.GPU_FRACTION_ANNOTATION: "0.5"}
    for i, (on, amounts) in enumerate([("n0", half), ("n0", half), ("n0", None), ("n1", 1), ("n1", 1)]):
        p = pod(f"p{i}", gpus=amounts if isinstance(amounts, int) else 0, queue="q", node_name=on,
                annotations={**(amounts if isinstance(amounts, dict) else {}),
                             **({c.GPU_DEVICES_ANNOTATION: "0"} if amounts else {})},
                created=f"2026-01-01T00:00:0{i}Z")  # (the GPU pods all recorded device 0)
        p["metadata"]["uid"] = f"uid-{i}"
        objs.append(p)
    for obj in objs:
        model.upsert(obj)
    seen = [{p.key: (p.gpu_group, p.devices, p.status) for p in model.snapshot(NOW).pods}]
    for change in ("default/p0", "default/p3", "/n0"):
        model.delete("Node" if change.startswith("/") else "Pod", change)
        snap = model.snapshot(NOW)
        assert snap.parts is not None and _same(snap.parts, plain_parts(model, snap))
        seen.append({p.key: (p.gpu_group, p.devices, p.status) for p in snap.pods})
    assert [s["default/p1"][0] for s in seen[:2]] == ["uid-0", "uid-1"]  # its group, then one of its own
    assert [s["default/p4"][1] for s in seen[1:3]] == [(1,), (0,)]  # the next device, then the one it recorded
    assert seen[3]["default/p2"][2] == PodStatus.NODE_GONE
