"""``fewest_domains`` groups the nodes of each domain as the index keeps them (``Rooms.groups``, caught up from its log
of changed nodes; in a region, from the index's buckets as they are) and splits the gang over the domains with as
many columns as each domain has room for: the same plan, pod for pod and node for node, as the plain reading it
replaced (every candidate node sorted, every domain's columns up to the gang's size), kept here as the reference, on
random indexes with nodes partly used, regions and levels, over rounds of pods placed and released between the
questions, and at every call of a benchmark cycle."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pytest

from benchmarks.bench_allocate import build_workload, config_for
from kaid.cycle import run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Node, Pod
from kaid.placement import fewest, gang
from kaid.placement.fewest import Plan, _cheapest, _items, _nodes_for
from kaid.placement.index import Devices, NodeIndex
from kaid.sim.cluster import EPOCH


def plain_fewest_domains(pods: list[Pod], index: NodeIndex, region: bytearray | None,
                         preferred: str | None) -> Plan | None:
    pod, need = pods[0], len(pods)
    rooms = index.rooms(pod).room
    by_domain: dict[str | None, dict[tuple[int, int], list[Node]]] = defaultdict(lambda: defaultdict(list))
    least = pod.gpu_whole
    if least:
        candidates = [index.nodes[i] for k in range(least, index.max_gpus + 1) for i in index.buckets[k]]
        candidates.sort(key=lambda n: n.index)
    else:
        candidates = index.nodes
    total = count = 0
    for n in candidates:
        room = rooms[n.index]
        if room > 0 and (region is None or region[n.index]):
            room = min(room, need)
            by_domain[n.labels.get(preferred) if preferred else None][(room, n.idle)].append(n)
            total += room
            count += 1
    if total < need:
        return None
    max_nodes = min(need, count)
    w_nodes = max(1, index.max_gpus * max_nodes) + 1
    w_dom = w_nodes * (max_nodes + 1)
    domains = sorted(by_domain, key=str)
    if len(domains) == 1:
        split: list[int] | None = [need]
    else:
        split = plain_split([np.asarray(_cheapest(_items(by_domain[d]), need, w_nodes)[0]) for d in domains], need,
                            w_dom)
    if split is None:
        return None
    plan: Plan = []
    rest = list(pods)
    for d, k in zip(domains, split, strict=True):
        if k:
            for node, j in _nodes_for(by_domain[d], k, w_nodes):
                plan.extend((rest.pop(0), node) for _ in range(j))
    return plan


def plain_split(costs: list[np.ndarray], need: int, w_dom: int) -> list[int] | None:
    none = fewest._NONE
    best = np.full(need + 1, none, dtype=np.int64)
    best[0] = 0
    ks = np.arange(need + 1)
    behind = ks[:, None] - ks[None, :]
    valid = behind >= 0
    behind = np.where(valid, behind, 0)
    picks = []
    for cost in costs:
        here = np.where(cost[None, :] >= none, none, cost[None, :] + w_dom)
        here[:, 0] = 0
        cand = np.where(valid, best[behind] + here, none)
        cand = np.minimum(cand, none)
        pick = cand.argmin(axis=1)
        best = cand[ks, pick]
        picks.append(pick)
    if best[need] >= none:
        return None
    split = [0] * len(costs)
    k = need
    for i in range(len(costs) - 1, -1, -1):
        j = int(picks[i][k])
        split[i] = j
        k -= j
    return split


def _index(rng: random.Random) -> NodeIndex:
    nodes = []
    for i in range(rng.randint(1, 24)):
        labels = {"rack": f"r{rng.randint(0, 4)}"} if rng.random() < 0.85 else {}
        n = Node(f"n{i:02d}", labels, [], False, True, rng.choice([8000, 64000]), 10**12, rng.choice([3, 110]),
                 rng.choice([0, 4, 8, 8]), 81920)
        n.index = i
        nodes.append(n)
    index = NodeIndex(nodes)
    for n in nodes:  # some devices and cpu in use, through the index (its buckets kept)
        busy = rng.randint(0, n.gpus)
        if busy or rng.random() < 0.3:
            bg = Pod("ns", f"bg-{n.name}", "")
            bg.gpu_whole, bg.cpu = busy, rng.choice([0, 1000, 6000])
            index.assign(n, bg, tuple(range(busy)))
    return index


def _gang(rng: random.Random) -> list[Pod]:
    whole, cpu = rng.choice([0, 1, 1, 2, 3, 8]), rng.choice([0, 500, 2000])
    pods = []
    for k in range(rng.randint(2, 40)):
        p = Pod("ns", f"g-{k:02d}", "")
        p.gpu_whole, p.cpu = whole, cpu
        pods.append(p)
    return pods


def _same(pods: list[Pod], index: NodeIndex, region: bytearray | None, preferred: str | None) -> None:
    got = fewest.fewest_domains(pods, index, region, preferred)
    want = plain_fewest_domains(pods, index, region, preferred)
    assert (None if got is None else [(p.name, n.name) for p, n in got]) == \
        (None if want is None else [(p.name, n.name) for p, n in want])


@pytest.mark.parametrize("seed", range(30))
def test_plans_are_the_plain_readings(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(15):
        index = _index(rng)
        pods = _gang(rng)
        region = bytearray(rng.random() < 0.6 for _ in index.nodes) if rng.random() < 0.3 else None
        _same(pods, index, region, rng.choice(["rack", "rack", None, "zone"]))


@pytest.mark.parametrize("seed", range(30))
def test_kept_groups_stay_the_plain_readings_as_pods_come_and_go(seed: int) -> None:
    """One index over rounds: the gangs' shapes come back, so their groups were kept from an earlier round and caught
    up since (nodes whose room changed, and nodes whose idle GPUs moved under the same room)."""
    rng = random.Random(seed)
    index = _index(rng)
    gangs = [_gang(rng) for _ in range(3)]
    placed: list[tuple[Node, Pod, Devices]] = []
    for turn in range(12):
        for pods in gangs:
            for preferred in ("rack", None, "zone"):
                _same(pods, index, None, preferred)
                _groups_are_read(pods[0], index, preferred)
        for k in range(rng.randint(1, 8)):
            if placed and rng.random() < 0.4:
                node, pod, devs = placed.pop(rng.randrange(len(placed)))
                index.release(node, pod, devs, planning=rng.random() < 0.5)
                continue
            node = rng.choice(index.nodes)
            pod = Pod("ns", f"m-{turn}-{k}", "")
            pod.gpu_whole, pod.cpu = rng.choice([0, 1, 1, 2]), rng.choice([0, 0, 1000, 3000])
            chosen = index.devices_for(node, pod)
            if chosen is not None:
                index.assign(node, pod, chosen)
                placed.append((node, pod, chosen))


def _groups_are_read(pod: Pod, index: NodeIndex, key: str | None) -> None:
    """The groups the index keeps for the shape are those of every node read now: (room, idle GPUs) per domain."""
    rooms = index.rooms(pod)
    want: dict[str | None, dict[tuple[int, int], list[str]]] = defaultdict(lambda: defaultdict(list))
    for n in index.nodes:
        if rooms.room[n.index]:
            want[n.labels.get(key) if key else None][(rooms.room[n.index], n.idle)].append(n.name)
    kept = rooms.groups(index.nodes, key)
    got = {d: {k: [n.name for n in g] for k, g in groups.items()} for d, groups in kept.items()}
    assert got == {d: dict(groups) for d, groups in want.items()}


def test_every_call_of_a_benchmark_cycle_is_the_plain_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    wl = build_workload(200, 2000, 18)
    cfg = config_for("cpsat")
    snap = build_snapshot(wl.objects, cfg, EPOCH + 3600.0)
    kept = fewest.fewest_domains
    calls: list[bytearray | None] = []

    def both(pods: list[Pod], index: NodeIndex, region: bytearray | None, preferred: str | None) -> Plan | None:
        got = kept(pods, index, region, preferred)
        want = plain_fewest_domains(pods, index, region, preferred)
        assert (None if got is None else [(p.name, n.name) for p, n in got]) == \
            (None if want is None else [(p.name, n.name) for p, n in want])
        calls.append(region)
        return got

    monkeypatch.setattr(gang, "fewest_domains", both)
    run_cycle(snap, cfg)
    assert sum(region is None for region in calls) >= 3
