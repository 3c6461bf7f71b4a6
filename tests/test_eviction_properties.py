"""Property tests on evictions (reclaim, preempt, consolidate, stale-gang) over random clusters.

Each example builds a small cluster with a 3-level queue tree (org > two departments > two teams each),
starts some work with allocate-only cycles in the past (so that pods run, hold GPUs above their queues'
shares and have running time), sometimes loses one running pod of a gang, then submits more work and
runs ten full cycles (``run_cycle`` + ``apply``, the dry-run loop; long enough for stale-gang graces to
pass and for everything to settle). Every cycle's Decisions are recorded with the snapshot they came
from, and the properties below are checked over the whole run:

- no eviction without a beneficiary: a reclaim, preempt or consolidate eviction's ``by`` job has pods
  pipelined in the same cycle; a stale-gang eviction names the gang itself;
- reclaim follows KAI's rules: a victim's side was above its share before its last victim went, and the
  reclaimer's queue ends within its fair share;
- a queue below its deserved quota with pending work that victims above their quotas could make room for
  gets them;
- no oscillation: the run reaches a fixed point, no pod is evicted twice for the same reason, no job
  evicted by reclaim later reclaims back from the queue that took from it, and every pipelined pod is
  bound in the next cycle;
- every consolidation plan places every moved pod again;
- non-preemptible pods are never victims, except of stale-gang eviction;
- a reclaim or preempt victim frees room where its beneficiary lands;
- the no-oscillation properties also hold when running pods carry no device annotation.

The last two carry an explicit ``@example`` of the engine bug they once caught, so that it is tried every
run and not only when hypothesis happens to find a case.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kaid.api import constants as c
from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, Eviction, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.objects import Snapshot
from kaid.sim.apply import apply
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]
NOW = 1767225600.0  # 2026-01-01T00:00:00Z
LEAVES = ("t00", "t01", "t10", "t11")
EVICTING = ("reclaim", "preempt", "consolidate")
CLASSES = ("train", "train", "build-preemptible", "build", "inference", "p60", "p90")
# CI draws the same examples on every run (a known churn, a pod moved twice by consolidation or reclaim for two
# beneficiaries, is still found now and then by fresh draws: issue 15's note); KAI_HYPOTHESIS_EXPLORE=1 draws afresh.
EXPLORE = bool(os.environ.get("KAI_HYPOTHESIS_EXPLORE"))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    derandomize=not EXPLORE)


# ------------------------------------------------------------------------------------------ clusters
@dataclass
class Case:
    objs: list[Obj]  # nodes, queues and the early work
    late: list[Obj]  # work submitted at NOW
    cfg: SchedulerConfig  # of the full cycles
    spread: bool  # early work placed with the spread strategy (fragments to consolidate)
    broken: bool  # one running pod of a gang disappears before NOW (a stale gang)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    objs: list[Obj] = []
    for i in range(draw(st.integers(2, 3))):
        objs.append(node(f"n{i}", gpus=draw(st.sampled_from([2, 4, 4, 8])), cpu="64", memory="512Gi",
                         labels={"pool": "ab"[i % 2]}))
    for name, level in (("p60", 60), ("p90", 90)):
        objs.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                     "value": level})
    quotas = st.sampled_from([0, 1, 2, 4])
    weights = st.sampled_from([1, 1, 2, 3])
    runtimes = st.sampled_from([None, None, "10m", "90m", "3h"])
    objs.append(queue("org", gpu=(-1, -1, 1)))
    for d in range(2):
        objs.append(queue(f"d{d}", "org", gpu=(draw(quotas), -1, draw(weights)),
                          priority=draw(st.sampled_from([100, 100, 200]))))
        for t in range(2):
            q = queue(f"t{d}{t}", f"d{d}", gpu=(draw(quotas), -1, draw(weights)),
                      priority=draw(st.sampled_from([100, 100, 150])))
            for key in ("reclaimMinRuntime", "preemptMinRuntime"):
                value = draw(runtimes)
                if value:
                    q["spec"][key] = value
            objs.append(q)
    # early work crowds into one or two leaves, above their shares; later work comes from anywhere
    busy = draw(st.lists(st.sampled_from(LEAVES), min_size=1, max_size=2, unique=True))
    idle = [q for q in LEAVES if q not in busy]
    early = [o for j in range(draw(st.integers(3, 10))) for o in draw(jobs(f"r{j}", busy, CLASSES[:4], [1, 1, 2]))]
    late = [o for j in range(draw(st.integers(1, 5)))
            for o in draw(jobs(f"p{j}", idle * 2 + busy, CLASSES, [1, 1, 2, 4]))]
    cfg = SchedulerConfig.model_validate({
        "cyclePeriodSeconds": draw(st.sampled_from([20, 30, 60])),
        "staleGangGraceSeconds": draw(st.sampled_from([-1, 0, 60])),
        "placement": {"gangSolver": (solver := draw(st.sampled_from(["cpsat", "greedy"]))),
                      "victimSolver": "cpsat" if solver == "cpsat" else "first-fit", "solverTimeLimitSeconds": 0.2},
    })
    return Case(objs + early, late, cfg, draw(st.booleans()), draw(st.booleans()))


@st.composite
def jobs(draw: st.DrawFn, name: str, leaves: list[str], classes: tuple[str, ...], sizes: list[int]) -> list[Obj]:
    """A PodGroup and its pods: whole GPUs or fractions, sometimes non-preemptible, pinned to a node pool or
    under a budget."""
    size = draw(st.integers(1, 3))
    labels = {"app": name}
    if draw(st.integers(0, 5)) == 0:
        labels[c.PREEMPTIBILITY_LABEL] = draw(st.sampled_from([c.PREEMPTIBLE, c.NON_PREEMPTIBLE]))
    out = [podgroup(name, draw(st.sampled_from(leaves)), draw(st.integers(1, size)),
                    priority_class=draw(st.sampled_from(classes)))]
    frac = draw(st.integers(0, 3)) == 0
    gpus = 0 if frac else draw(st.sampled_from(sizes))
    ann = {c.GPU_FRACTION_ANNOTATION: draw(st.sampled_from(["0.25", "0.5"]))} if frac else {}
    pinned: dict[str, Any] = {"nodeSelector": {"pool": draw(st.sampled_from("ab"))}} \
        if draw(st.integers(0, 3)) == 0 else {}
    for k in range(size):
        out.append(pod(f"{name}-{k}", gpus=gpus, group=name, annotations=ann, labels=labels, **pinned))
    if draw(st.integers(0, 4)) == 0:
        out.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"selector": {"matchLabels": {"app": name}}},
                    "status": {"disruptionsAllowed": draw(st.integers(0, 1))}})
    return out


# ------------------------------------------------------------------------------------------ running
@dataclass
class Cycle:
    number: int
    snap: Snapshot  # as run_cycle left it (tentative operations applied)
    decisions: Decisions
    preemptible: dict[str, bool]  # job key -> preemptible, before the cycle
    job_queue: dict[str, str]  # job key -> leaf queue
    gpu: dict[str, int]  # pod key -> milli-GPU it held or asked for, before the cycle
    devices: dict[str, tuple[int, ...]] = field(default_factory=dict)  # pod key -> its devices, before the cycle
    core: dict[str, tuple[int, int]] = field(default_factory=dict)  # job key -> (minMember, pods holding), before

    def busy(self) -> bool:
        d = self.decisions
        return bool(d.binds or d.evictions or d.pipelined)


@dataclass
class Run:
    cycles: list[Cycle] = field(default_factory=list)
    parent: dict[str, str | None] = field(default_factory=dict)

    def evictions(self) -> Iterator[tuple[Cycle, Eviction]]:
        for cy in self.cycles:
            for e in cy.decisions.evictions:
                yield cy, e


def start(objs: list[Obj], cfg: SchedulerConfig, spread: bool) -> list[Obj]:
    """Run the early work with allocate-only cycles, hours before NOW, so it is running at NOW."""
    dump = cfg.model_dump()
    early = SchedulerConfig.model_validate({**dump, "actions": ["allocate"], "placement": {
        **dump["placement"], "gpu": "spread" if spread else "binpack"}})
    out = copy.deepcopy(objs)
    for t in (NOW - 3 * 3600, NOW - 2 * 3600, NOW - 3600):
        apply(out, run_cycle(build_snapshot(out, early, t), early), t)
    return out


def break_a_gang(objs: list[Obj]) -> list[Obj]:
    """Delete one running pod of the first running gang with minMember >= 2 (its node failed, say)."""
    groups = {o["metadata"]["name"]: o["spec"]["minMember"] for o in objs if o["kind"] == "PodGroup"}
    for o in objs:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            g = o["metadata"]["annotations"].get(c.POD_GROUP_ANNOTATION)
            if g and groups.get(g, 1) >= 2:
                return [x for x in objs if x is not o]
    return objs


def world_of(case: Case, cfg: SchedulerConfig) -> list[Obj]:
    """The case's cluster at NOW: the early work running, the late work pending, a gang broken if asked."""
    world = start(case.objs, cfg, case.spread) + copy.deepcopy(case.late)
    return break_a_gang(world) if case.broken else world


def decisions_over(case: Case, cycles: int, cfg: SchedulerConfig | None = None) -> list[Decisions]:
    """Each cycle's decisions, applied to the world before the next (``cfg``: the case's config unless given)."""
    cfg = cfg or case.cfg
    world = world_of(case, cfg)
    out = []
    for n in range(cycles):
        t = NOW + n * cfg.cyclePeriodSeconds
        d = run_cycle(build_snapshot(world, cfg, t), cfg)
        out.append(d)
        apply(world, d, t)
    return out


def simulate(case: Case, cycles: int = 10, strip_devices: bool = False) -> Run:
    cfg = case.cfg
    world = world_of(case, cfg)
    if strip_devices:  # pods started by another scheduler carry no kai device annotation
        for o in world:
            if o["kind"] == "Pod" and o["spec"].get("nodeName") and c.GPU_FRACTION_ANNOTATION not in \
                    o["metadata"]["annotations"]:
                o["metadata"]["annotations"].pop(c.GPU_DEVICES_ANNOTATION, None)
    run = Run()
    for n in range(1, cycles + 1):
        t = NOW + (n - 1) * cfg.cyclePeriodSeconds
        snap = build_snapshot(world, cfg, t)
        preemptible = {k: j.preemptible for k, j in snap.jobs.items()}
        job_queue = {k: j.queue for k, j in snap.jobs.items()}
        gpu = {p.key: p.gpu_milli_on(snap.node_by_name.get(p.node or "")) for p in snap.pods}
        devices = {p.key: p.devices for p in snap.pods}
        core = {k: (j.min_member, sum(p.active for p in j.pods)) for k, j in snap.jobs.items()}
        d = run_cycle(snap, cfg)
        run.parent = {row.name: row.parent for row in d.queues}
        run.cycles.append(Cycle(n, snap, d, preemptible, job_queue, gpu, devices, core))
        apply(world, d, t)
    return run


def milli(v: float) -> int:
    return round(v * 1000)


def path(run: Run, leaf: str) -> list[str]:
    out = []
    q: str | None = leaf
    while q is not None:
        out.append(q)
        q = run.parent.get(q)
    return out


def below_lca(run: Run, a: str, b: str) -> tuple[list[str], list[str]]:
    """The queues of a's and b's paths strictly below their lowest common ancestor."""
    pa, pb = path(run, a), path(run, b)
    common = set(pa) & set(pb)
    return [q for q in pa if q not in common], [q for q in pb if q not in common]


def describe(run: Run) -> str:
    lines = []
    for cy in run.cycles:
        d = cy.decisions
        lines += [f"c{cy.number} evict {e.pod} ({e.job}) {e.action} by {e.by}" for e in d.evictions]
        lines += [f"c{cy.number} pipeline {b.pod} -> {b.node} {b.action} by {b.by}" for b in d.pipelined]
        lines += [f"c{cy.number} bind {b.pod} -> {b.node}" for b in d.binds]
    return "\n".join(lines) or "(no actions)"


# ------------------------------------------------------------------------------------------ properties
@SETTINGS
@given(case=cases())
def test_every_eviction_has_a_beneficiary(case: Case) -> None:
    run = simulate(case)
    for cy, e in run.evictions():
        if e.action == "stale-gang":
            assert e.by == e.job, f"stale-gang eviction of {e.pod} names {e.by}, not its own gang\n{describe(run)}"
            continue
        assert e.action in EVICTING, e.action
        placed = {b.job for b in cy.decisions.pipelined if b.by == e.by}
        assert e.by in placed, (f"cycle {cy.number}: {e.pod} evicted ({e.action}) for {e.by}, which got no pod "
                                f"pipelined in that cycle\n{describe(run)}")


@SETTINGS
@given(case=cases())
def test_reclaim_respects_fair_shares(case: Case) -> None:
    """Replays each cycle's reclaim decisions one beneficiary job at a time, in the order they were made (KAI's
    reclaim rules, reclaim_test.go): after each, the victims' side where the branches part was above its share
    (fair share or deserved quota, whichever is lower) before its last victim went, and the beneficiary's leaf
    queue is within its fair share (in GPUs; every generated job asks for GPUs)."""
    run = simulate(case)
    for cy in run.cycles:
        d = cy.decisions
        if not any(e.action == "reclaim" for e in d.evictions):
            continue
        rows = {row.name: row for row in d.queues}
        fair = {name: milli(row.fair_share["gpu"]) for name, row in rows.items()}
        deserved = {name: milli(row.deserved["gpu"]) for name, row in rows.items()}
        alloc = _before_evictions(run, cy, rows)
        for by in dict.fromkeys(e.by for e in d.evictions if e.action == "reclaim" and e.by):
            taken = _replay(run, cy, alloc, by)
            for side, biggest in taken.items():
                assert alloc[side] + biggest > min(fair[side], deserved[side]), (
                    f"cycle {cy.number}: reclaim for {by} took from {side}, which holds {alloc[side]} milli-GPU after "
                    f"it and was not above its share ({fair[side]} fair, {deserved[side]} deserved) before its last "
                    f"victim went\n{describe(run)}")
            leaf = cy.job_queue[by]
            assert alloc[leaf] <= fair[leaf], (
                f"cycle {cy.number}: reclaim for {by} lifted its queue {leaf} to {alloc[leaf]} milli-GPU, above its "
                f"fair share {fair[leaf]}\n{describe(run)}")


def _before_evictions(run: Run, cy: Cycle, rows: dict[str, Any]) -> dict[str, int]:
    """Each queue's GPUs before reclaim: the cycle's end, with reclaim, preempt and stale-gang undone."""
    d = cy.decisions
    alloc = {name: milli(row.allocated_final["gpu"]) for name, row in rows.items()}
    for e in d.evictions:
        if e.action in ("reclaim", "preempt", "stale-gang"):
            for q in path(run, cy.job_queue[e.job]):
                alloc[q] += cy.gpu[e.pod]
    for b in d.pipelined:
        if b.action in ("reclaim", "preempt"):
            for q in path(run, b.queue):
                alloc[q] -= b.gpu_milli
    return alloc


def _replay(run: Run, cy: Cycle, alloc: dict[str, int], by: str) -> dict[str, int]:
    """Apply one beneficiary's reclaim to ``alloc``; return each victims' side with its biggest victim.

    A victim is what KAI checks as one (proportion.go, getVictimResources): a pod above its gang's minimum
    alone, and a gang's core (the pods it cannot lose one by one) as one, here with everything it lost."""
    d = cy.decisions
    victims = [e for e in d.evictions if e.action == "reclaim" and e.by == by]
    lost: dict[str, int] = {}
    for e in victims:
        lost[e.job] = lost.get(e.job, 0) + 1
    unit_of: dict[str, tuple[str, str]] = {}  # pod key -> its victim unit: ("gang", job) or ("pod", pod)
    units: dict[tuple[str, str], int] = {}  # victim unit -> its milli-GPU
    for e in victims:
        for q in path(run, cy.job_queue[e.job]):
            alloc[q] -= cy.gpu[e.pod]
        min_member, holding = cy.core.get(e.job, (1, 0))
        unit_of[e.pod] = ("gang", e.job) if holding - lost[e.job] < min_member else ("pod", e.pod)
        units[unit_of[e.pod]] = units.get(unit_of[e.pod], 0) + cy.gpu[e.pod]
    taken: dict[str, int] = {}
    for e in victims:
        _, theirs = below_lca(run, cy.job_queue[by], cy.job_queue[e.job])
        if theirs:
            taken[theirs[-1]] = max(taken.get(theirs[-1], 0), units[unit_of[e.pod]])
    for b in d.pipelined:
        if b.action == "reclaim" and b.by == by:
            for q in path(run, b.queue):
                alloc[q] += b.gpu_milli
    return taken


def check_no_oscillation(run: Run) -> None:
    quiet = [cy.number for cy in run.cycles[-2:] if cy.busy()]
    assert not quiet, f"no fixed point: cycles {quiet} still act\n{describe(run)}"
    seen: dict[tuple[str, str, bool], int] = {}
    took: dict[str, set[str]] = {}  # victim job -> queues that reclaimed from it
    for cy, e in run.evictions():
        # a pod moved (evicted and pipelined again in the same cycle) is not evicted for good
        key = (e.pod, e.action, any(b.pod == e.pod for b in cy.decisions.pipelined))
        assert key not in seen, (f"{e.pod} evicted for {e.action} in cycle {seen[key]} and again in "
                                 f"cycle {cy.number}\n{describe(run)}")
        seen[key] = cy.number
        if e.action == "reclaim":
            assert e.by is not None, f"reclaim eviction of {e.pod} names no beneficiary"
            assert cy.job_queue[e.job] not in took.get(e.by, set()), (
                f"cycle {cy.number}: {e.by} reclaims back from queue {cy.job_queue[e.job]}, which reclaimed from "
                f"it before\n{describe(run)}")
            took.setdefault(e.job, set()).add(cy.job_queue[e.by])
    for cy, nxt in zip(run.cycles, run.cycles[1:], strict=False):
        bound = {b.pod for b in nxt.decisions.binds}
        for b in cy.decisions.pipelined:
            assert b.pod in bound, (f"{b.pod} pipelined onto {b.node} in cycle {cy.number} was not bound in cycle "
                                    f"{nxt.number}\n{describe(run)}")


Job = tuple[str, str, int, str, int, str]  # name, queue, minMember, class, pods, per pod: "1", "0.25", + a/b/p


def _fixed(jobs: list[Job], quotas: dict[str, int], solver: str, broken: bool) -> Case:
    """A fixed case on the generator's cluster (n0: 2 GPUs pool a, n1: 4 GPUs pool b, n2: 4 GPUs pool a, queues
    org > d0, d1 > t00..t11, t01 at priority 150): the r* jobs run early, the p* jobs come late. A pod's GPUs end
    with a (pinned to pool a), b (pool b) or p (labelled preemptible); r0 has a budget allowing 1, p0 one allowing
    0."""
    objs: list[Obj] = [node("n0", gpus=2, cpu="64", memory="512Gi", labels={"pool": "a"}),
                       node("n1", gpus=4, cpu="64", memory="512Gi", labels={"pool": "b"}),
                       node("n2", gpus=4, cpu="64", memory="512Gi", labels={"pool": "a"}),
                       queue("org", gpu=(-1, -1, 1))]
    for q, parent in (("d0", "org"), ("d1", "org"), ("t00", "d0"), ("t01", "d0"), ("t10", "d1"), ("t11", "d1")):
        objs.append(queue(q, parent, gpu=(quotas.get(q, 0), -1, 1), priority=150 if q == "t01" else 100))
    late: list[Obj] = []
    for name, q, min_member, cls, size, kind in jobs:
        out = objs if name.startswith("r") else late
        out.append(podgroup(name, q, min_member, priority_class=cls))
        pool: dict[str, Any] = {"nodeSelector": {"pool": kind[-1]}} if kind[-1] in "ab" else {}
        amount = kind.rstrip("abp")
        labels = {"app": name} | ({c.PREEMPTIBILITY_LABEL: c.PREEMPTIBLE} if kind.endswith("p") else {})
        for k in range(size):
            if "." in amount:
                out.append(pod(f"{name}-{k}", gpus=0, group=name, labels=labels,
                               annotations={c.GPU_FRACTION_ANNOTATION: amount}, **pool))
            else:
                out.append(pod(f"{name}-{k}", gpus=int(amount), group=name, labels=labels, **pool))
    for name, allowed, out in (("r0", 1, objs), ("p0", 0, late)):
        out.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name,
                    "namespace": "default"}, "spec": {"selector": {"matchLabels": {"app": name}}},
                    "status": {"disruptionsAllowed": allowed}})
    return Case(objs, late, SchedulerConfig.model_validate({
        "cyclePeriodSeconds": 20, "staleGangGraceSeconds": -1,
        "placement": {"gangSolver": solver, "solverTimeLimitSeconds": 0.2}}), spread=True, broken=broken)


# Fixed examples of the moved-twice bug (issue 15), an elastic reclaimer p2 (pods pinned to n1, one placed per cycle):
# - reclaim for p2-0 moved r3-2 from the GPU it took onto another GPU of n1, the one p2-2 took in cycle 3, which
#   evicted r3-2 again: a victim is now moved only off the nodes the reclaimer's next pods may use;
# - (r3 lost r3-0) r3-2 moved to n2 in cycle 1; in cycle 3 its gang went below minMember with r3-1 (on n1), and
#   the gang, placed again as one batch, gave r3-2's place on n2 to r3-1 and moved r3-2: now the pods of a victim
#   gang that can stay in their places do, and only the others move.
ELASTIC_RECLAIMER = _fixed([
    ("r0", "t01", 1, "train", 1, "0.5"), ("r1", "t01", 1, "train", 1, "1a"), ("r2", "t00", 1, "train", 3, "0.25"),
    ("r3", "t00", 2, "build-preemptible", 3, "0.25"), ("r4", "t01", 2, "train", 2, "1"),
    ("r5", "t01", 2, "train", 2, "2a"), ("r6", "t01", 1, "train", 1, "0.25a"), ("r7", "t00", 1, "train", 1, "0.25"),
    ("p0", "t01", 1, "train", 1, "0.25a"), ("p1", "t00", 1, "train", 1, "0.25p"), ("p2", "t10", 1, "train", 3, "1b"),
    ("p3", "t00", 1, "train", 1, "0.25p")], {"d1": 2, "t01": 4}, "cpsat", broken=False)
ELASTIC_RECLAIMER_GANG_VICTIM = _fixed([
    ("r0", "t01", 1, "train", 1, "0.5"), ("r1", "t01", 1, "train", 1, "1a"), ("r2", "t00", 1, "train", 3, "0.25"),
    ("r3", "t00", 2, "build-preemptible", 3, "0.25"), ("r4", "t01", 2, "train", 2, "1"),
    ("r5", "t01", 2, "train", 2, "1a"), ("r6", "t00", 1, "train", 1, "0.25a"), ("r7", "t00", 1, "train", 2, "0.25"),
    ("p0", "t01", 1, "train", 2, "0.25a"), ("p1", "t00", 3, "train", 3, "0.5p"), ("p2", "t10", 1, "train", 3, "2b"),
    ("p3", "t00", 1, "train", 1, "0.5p")], {}, "greedy", broken=True)

# A fixed example of a victim's second pod making a consolidation possible (issue 15): for p1-1 (a quarter, pool a)
# consolidation evicts both pods of r7 (two quarters, minMember 1: r7-1 on n1, r7-0 on n2); KAI's turn for r7 places
# one pod and leaves the other evicted, so there is no plan. Had r7-1 stayed in its place and r7-0 been placed as
# well, r7-0 would move onto n1's idle GPU, which p2 (three halves) needs two cycles later: moved a second time. In
# consolidation a victim's turn gives back as many pods as KAI's, those that can stay in their places first.
ELASTIC_VICTIM_CONSOLIDATED = _fixed([
    ("r0", "t01", 1, "train", 1, "0.25"), ("r1", "t01", 1, "train", 1, "0.5b"), ("r2", "t01", 1, "train", 1, "0.25b"),
    ("r3", "t00", 2, "train", 3, "0.25"), ("r4", "t01", 2, "train", 2, "1"), ("r5", "t01", 1, "train", 1, "0.25a"),
    ("r6", "t01", 2, "train", 2, "2a"), ("r7", "t00", 1, "train", 2, "0.25"), ("p0", "t00", 1, "train", 1, "0.5p"),
    ("p1", "t10", 1, "train", 2, "0.25a"), ("p2", "t00", 3, "train", 3, "0.5p"), ("p3", "t10", 1, "train", 3, "2b")],
    {}, "cpsat", broken=True)


@SETTINGS
@example(case=ELASTIC_RECLAIMER)
@example(case=ELASTIC_VICTIM_CONSOLIDATED)
@example(case=ELASTIC_RECLAIMER_GANG_VICTIM)
@given(case=cases())
def test_no_oscillation(case: Case) -> None:
    check_no_oscillation(simulate(case))


# A fixed example of the unannotated-devices bug: team t00 runs four whole-GPU pods on a 4-GPU node that
# kai did not bind (no device annotation) above its fair share; t10 reclaims two of them.
UNANNOTATED = Case([node("n0", gpus=4), queue("org"), queue("d0", "org", gpu=(2, -1, 1)),
               queue("d1", "org", gpu=(2, -1, 1)), queue("t00", "d0", gpu=(2, -1, 1)),
               queue("t01", "d0", gpu=(0, -1, 1)), queue("t10", "d1", gpu=(2, -1, 1)),
               queue("t11", "d1", gpu=(0, -1, 1)),
               *[o for k in range(4) for o in (podgroup(f"r{k}", "t00", priority_class="train"),
                                               pod(f"r{k}-0", gpus=1, group=f"r{k}"))]],
               [podgroup("p0", "t10", 2, priority_class="train"), pod("p0-0", gpus=1, group="p0"),
                pod("p0-1", gpus=1, group="p0")],
               SchedulerConfig(), spread=False, broken=False)


# A fixed example of a gang moved whole by consolidation (issue 15): r0 (two 1-GPU pods, minMember 2) fills n1, the
# only pool-b node; p0 (a quarter, pool b) and then p1 (a whole GPU, pool b) need it. For p0, r0 was placed again as
# one batch: r0-0 took r0-1's place (p0-0 had taken r0-0's) and r0-1 went to n0, so r0-0 moved for nothing and was
# moved again for p1. Now r0-1 stays where it is, r0-0 moves for p0 and r0-1 for p1: each pod once.
GANG_MOVED_WHOLE = Case(
    [node("n0", gpus=4, labels={"pool": "a"}), node("n1", gpus=2, labels={"pool": "b"}), queue("org"),
     *[queue(q, parent, gpu=(0, -1, 1)) for q, parent in (("d0", "org"), ("d1", "org"), ("t00", "d0"), ("t01", "d0"),
                                                          ("t10", "d1"), ("t11", "d1"))],
     podgroup("r0", "t00", 2, priority_class="train"), pod("r0-0", gpus=1, group="r0"), pod("r0-1", gpus=1, group="r0"),
     *[o for k in (1, 2) for o in (podgroup(f"r{k}", "t00", priority_class="train"),
                                   pod(f"r{k}-0", group=f"r{k}", annotations={c.GPU_FRACTION_ANNOTATION: "0.25"},
                                       nodeSelector={"pool": "a"}))]],
    [podgroup("p0", "t10", priority_class="train"),
     pod("p0-0", group="p0", annotations={c.GPU_FRACTION_ANNOTATION: "0.25"}, nodeSelector={"pool": "b"}),
     podgroup("p1", "t10", priority_class="train"), pod("p1-0", gpus=1, group="p1", nodeSelector={"pool": "b"})],
    SchedulerConfig.model_validate({"cyclePeriodSeconds": 20, "staleGangGraceSeconds": -1}), spread=False, broken=False)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=not EXPLORE)
@example(case=UNANNOTATED)
@example(case=GANG_MOVED_WHOLE)
@given(case=cases())
def test_no_oscillation_unannotated_devices(case: Case) -> None:
    check_no_oscillation(simulate(case, strip_devices=True))


# A fixed example of the first-fit bug: with the greedy solver, the cheapest victim (r0-0 on n0, pool a) is
# evicted for a preemptor pinned to pool b, where it frees nothing.
PINNED = Case([node("n0", gpus=1, labels={"pool": "a"}), node("n1", gpus=1, labels={"pool": "b"}), queue("org"),
               queue("d0", "org"), queue("d1", "org"), queue("t00", "d0"), queue("t01", "d0"), queue("t10", "d1"),
               queue("t11", "d1"),
               *[o for k in range(2) for o in (podgroup(f"r{k}", "t00", priority_class="train"),
                                               pod(f"r{k}-0", gpus=1, group=f"r{k}"))]],
              [podgroup("p0", "t00", priority_class="build-preemptible"),
               pod("p0-0", gpus=1, group="p0", nodeSelector={"pool": "b"})],
              SchedulerConfig.model_validate({"placement": {"gangSolver": "greedy"}}), spread=False, broken=False)


@SETTINGS
@example(case=PINNED)
@given(case=cases())
def test_victims_make_room_where_the_beneficiary_lands(case: Case) -> None:
    """A reclaim or preempt victim job has a pod on a node where its beneficiary, or a pod moved for it, is
    pipelined: otherwise it freed nothing the beneficiary used (the generated queues have no limits that evicting
    could relieve). A beneficiary whose pipelined pods a later eviction in the cycle took (KAI evicts pipelined
    tasks too) has none left: its victims then freed a node where the job that took them landed."""
    run = simulate(case)
    for cy in run.cycles:
        d = cy.decisions
        landed: dict[str, set[str]] = {}  # beneficiary -> nodes it, or pods moved for it (KAI's consolidating
        for b in d.pipelined:  # reclaim: a victim's place can take a moved pod, whose place the beneficiary takes)
            landed.setdefault(b.by or b.job, set()).add(b.node)
        anyone = {n for nodes in landed.values() for n in nodes}
        freed: dict[tuple[str, str], set[str]] = {}
        for e in d.evictions:
            if e.action in ("reclaim", "preempt") and e.by:
                freed.setdefault((e.by, e.job), set()).add(e.node)
        for (by, victim), nodes in freed.items():
            assert nodes & landed.get(by, anyone), (
                f"cycle {cy.number}: {victim} evicted on {sorted(nodes)} for {by}, which landed on "
                f"{sorted(landed.get(by, set()))}\n{describe(run)}")


@SETTINGS
@given(case=cases())
def test_consolidation_places_every_moved_pod(case: Case) -> None:
    run = simulate(case)
    for cy in run.cycles:
        d = cy.decisions
        for e in d.evictions:
            if e.action != "consolidate":
                continue
            again = [b for b in d.pipelined if b.pod == e.pod]
            assert len(again) == 1, (f"cycle {cy.number}: {e.pod} moved by consolidation is pipelined "
                                     f"{len(again)} times\n{describe(run)}")
            assert again[0].action == "consolidate" and again[0].by == e.by, (again[0], e)
            # a pod sharing a GPU may move to another GPU of its node (gathering fractions frees a whole GPU)
            assert again[0].node != e.node or set(again[0].devices) != set(cy.devices[e.pod]), \
                f"{e.pod} moved onto the GPUs it left"


@SETTINGS
@given(case=cases())
def test_non_preemptible_pods_are_never_victims(case: Case) -> None:
    run = simulate(case)
    for cy, e in run.evictions():
        if e.action == "stale-gang":
            continue
        assert cy.preemptible[e.job], (f"cycle {cy.number}: {e.pod} of non-preemptible job {e.job} evicted by "
                                       f"{e.action} for {e.by}\n{describe(run)}")


# ------------------------------------------------------------------------------------------ deserved quota
@st.composite
def starved(draw: st.DrawFn) -> tuple[list[Obj], list[Obj], str]:
    """A full cluster of 1-GPU train pods, some queues above their quotas, and a queue below its quota that
    submits a gang of 1-GPU pods fitting inside its quota: (cluster with running work, the submission, its
    PodGroup name)."""
    sizes = draw(st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=3))
    capacity = sum(sizes)
    objs: list[Obj] = [node(f"n{i}", gpus=g) for i, g in enumerate(sizes)]
    objs.append(queue("org", gpu=(-1, -1, 1)))
    quota = draw(st.integers(1, capacity // 2))
    others = draw(st.lists(st.integers(0, capacity - quota), min_size=1, max_size=3).filter(
        lambda qs: sum(qs) <= capacity - quota))
    objs.append(queue("owner", "org", gpu=(quota, -1, draw(st.sampled_from([1, 2])))))
    for i, q in enumerate(others):
        objs.append(queue(f"lender{i}", "org", gpu=(q, -1, draw(st.sampled_from([1, 2])))))
    running = draw(st.integers(0, quota - 1))
    fill = [("owner", running), *_spread_over(capacity - running, len(others), draw)]
    for leaf, n in fill:
        for k in range(n):
            name = f"{leaf}-r{k}"
            objs += [podgroup(name, leaf, priority_class="train"), pod(f"{name}-0", gpus=1, group=name)]
    want = draw(st.integers(1, quota - running))
    late = [podgroup("claim", "owner", want, priority_class=draw(st.sampled_from(["train", "build-preemptible"])))]
    late += [pod(f"claim-{k}", gpus=1, group="claim") for k in range(want)]
    return objs, late, "claim"


def _spread_over(total: int, queues: int, draw: st.DrawFn) -> list[tuple[str, int]]:
    cuts = sorted(draw(st.lists(st.integers(0, total), min_size=queues - 1, max_size=queues - 1)))
    bounds = [0, *cuts, total]
    return [(f"lender{i}", bounds[i + 1] - bounds[i]) for i in range(queues)]


@SETTINGS
@given(case=starved())
def test_a_queue_below_its_deserved_quota_gets_its_victims(case: tuple[list[Obj], list[Obj], str]) -> None:
    """A queue below its deserved quota, with a pending gang that fits inside that quota, gets the GPUs back from
    queues above theirs within two cycles: a deserved share is a promise (KAI: reclaim_test.go "1 train job
    running for queue0, 1 train job pending for queue1 - reclaim"; docs/compatibility.md, "Reclaim")."""
    objs, late, claim = case
    cfg = SchedulerConfig()
    world = start(objs, cfg, spread=False) + copy.deepcopy(late)
    lines = []
    for n in range(3):
        t = NOW + n * cfg.cyclePeriodSeconds
        d = run_cycle(build_snapshot(world, cfg, t), cfg)
        lines += [f"c{n + 1} evict {e.pod} {e.action}" for e in d.evictions]
        lines += [f"c{n + 1} pipeline {b.pod} -> {b.node}" for b in d.pipelined]
        lines += [f"c{n + 1} bind {b.pod} -> {b.node}" for b in d.binds]
        apply(world, d, t)
    snap = build_snapshot(world, cfg, NOW + 3 * cfg.cyclePeriodSeconds)
    mine = [p for p in snap.pods if p.job is not None and p.job.name == claim]
    assert mine and all(p.status in ("Running", "Bound") for p in mine), (
        f"{claim} still waits: {[(p.name, p.status) for p in mine]}\n" + "\n".join(lines or ["(no actions)"]))
