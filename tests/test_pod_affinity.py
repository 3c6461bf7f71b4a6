"""Inter-pod affinity and anti-affinity (required terms), as kube-scheduler's InterPodAffinity filter reads them:
replicas spread by anti-affinity, a pod kept next to the pods it wants, the first of a set that wants itself, an
existing pod's anti-affinity, the reason a pod waits, a victim search that places the preemptor where its
anti-affinity lets it, and the pod terms read and kept (``strip``)."""

from __future__ import annotations

from typing import Any

from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.kube.strip import strip
from kaid.model.build import build_snapshot
from kaid.model.pods import read_pod
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def cycle(objs: list[Obj], actions: tuple[str, ...] = ("allocate",), **cfg: Any) -> Decisions:
    config = SchedulerConfig.model_validate({"actions": actions, **cfg})
    return run_cycle(build_snapshot(objs, config, 0.0), config)


def nodes(*names_zones: tuple[str, str], gpus: int = 4) -> list[Obj]:
    return [node(n, gpus=gpus, labels={HOST: n, ZONE: z}) for n, z in names_zones]


def term(key: str, **match: str) -> Obj:
    return {"topologyKey": key, "labelSelector": {"matchLabels": match}}


def affinity(together: list[Obj] | None = None, apart: list[Obj] | None = None) -> Obj:
    out: Obj = {}
    if together:
        out["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": together}
    if apart:
        out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": apart}
    return out


def where(d: Decisions) -> dict[str, str]:
    return {b.pod.split("/")[1]: b.node for b in d.binds}


def test_anti_affinity_spreads_a_gang_one_replica_per_node() -> None:
    """Binpack would put the four one-GPU replicas on one node; their anti-affinity to each other (hostname) puts
    each on a node of its own, and a fifth has none left."""
    objs = [*nodes(("a", "z1"), ("b", "z1"), ("c", "z2"), ("d", "z2")), queue("q"), podgroup("g", "q", 4)]
    objs += [pod(f"g-{i}", gpus=1, group="g", labels={"app": "db"},
                 affinity=affinity(apart=[term(HOST, app="db")])) for i in range(4)]
    assert sorted(where(cycle(objs)).values()) == ["a", "b", "c", "d"]
    objs[-5]["spec"]["minMember"] = 5  # (the PodGroup; -6 once the fifth pod is in)
    objs.append(pod("g-4", gpus=1, group="g", labels={"app": "db"}, affinity=affinity(apart=[term(HOST, app="db")])))
    d = cycle(objs)
    assert d.binds == []
    why = next(r for r in d.pending["default/g"] if r.code == "PodAffinity")
    assert why.details == {"needed": 5, "placeable": 4}, why.message
    # one pod more of the set, alone: the fit summary counts the nodes its anti-affinity keeps it from
    objs[-6]["spec"]["minMember"] = 4
    placed = where(cycle(objs[:-1]))
    for name, at in placed.items():
        obj = next(o for o in objs if o["metadata"]["name"] == name)
        obj["spec"]["nodeName"], obj["status"] = at, {"phase": "Running"}
    objs[-6]["spec"]["minMember"] = 1
    d = cycle(objs)
    assert d.binds == []
    summary = next(r for r in d.pending["default/g"] if r.code == "NodeFit")
    assert summary.details["failures"] == {"PodAntiAffinity": 4}, summary.message
    assert "pod anti-affinity conflict" in summary.message


def test_affinity_follows_the_pods_it_wants_and_the_first_of_a_set_starts_anywhere() -> None:
    objs = [*nodes(("a", "z1"), ("b", "z2")), queue("q"),
            pod("cache", gpus=1, queue="q", labels={"app": "cache"}, node_name="b", phase="Running"),
            pod("web", gpus=1, queue="q", affinity=affinity(together=[term(ZONE, app="cache")]))]
    assert where(cycle(objs)) == {"web": "b"}  # binpack alone would not choose: both have 3 or 4 idle GPUs
    # nothing matches and the pod does not match its own term: it waits, and says why
    objs[-2]["metadata"]["labels"]["app"] = "other"
    d = cycle(objs)
    assert d.binds == []
    summary = next(r for r in d.pending["default/pg-web"] if r.code == "NodeFit") if "default/pg-web" in d.pending \
        else next(r for rs in d.pending.values() for r in rs if r.code == "NodeFit")
    assert summary.details["failures"] == {"PodAffinity": 2}
    # the first pod of a set that wants itself (it matches its own term, nothing else does): anywhere with the label
    first = pod("first", gpus=1, queue="q", labels={"app": "cache"},
                affinity=affinity(together=[term(ZONE, app="cache")]))
    assert where(cycle([*objs[:-1], first])) == {"first": "b"}  # (binpack: b has a GPU used)


def test_an_existing_pods_anti_affinity_keeps_others_out_of_its_domain() -> None:
    objs = [*nodes(("a", "z1"), ("b", "z1"), ("c", "z2")), queue("q"),
            pod("loner", gpus=1, queue="q", node_name="a", phase="Running",
                affinity=affinity(apart=[term(ZONE, app="noisy")])),
            pod("noisy", gpus=1, queue="q", labels={"app": "noisy"})]
    assert where(cycle(objs)) == {"noisy": "c"}  # binpack would take a (one GPU used); z1 is the loner's
    other_ns = pod("noisy", gpus=1, queue="q", ns="elsewhere", labels={"app": "noisy"})
    assert where(cycle([*objs[:-1], other_ns])) == {"noisy": "a"}  # the term covers the loner's namespace only


def test_a_pod_kept_out_by_anti_affinity_does_not_fail_another_of_its_shape() -> None:
    """Allocate remembers a failed placement by the pods' shape; one that failed by a placed pod's anti-affinity
    says nothing of a pod of the same shape that the term does not select."""
    objs = [*nodes(("a", "z1")), queue("q"),
            pod("loner", queue="q", node_name="a", phase="Running", affinity=affinity(apart=[term(HOST, app="noisy")])),
            pod("noisy", gpus=1, queue="q", labels={"app": "noisy"}, created="2026-01-01T00:00:00Z"),
            pod("quiet", gpus=1, queue="q", created="2026-01-01T00:01:00Z")]
    d = cycle(objs)
    assert where(d) == {"quiet": "a"}
    assert any(r.code == "NodeFit" and r.details["failures"] == {"PodAntiAffinity": 1}
               for rs in d.pending.values() for r in rs)


def test_preempt_places_the_preemptor_where_its_anti_affinity_lets_it() -> None:
    """Both nodes' GPUs are held by preemptible pods; the lowest-priority victim is on a, but the high-priority pod's
    anti-affinity excludes a (a pod it must not be with runs there, not preemptible): the victim is taken on b."""
    objs = [*nodes(("a", "z1"), ("b", "z1"), gpus=1), queue("q"),
            pod("keep", queue="q", node_name="a", phase="Running", labels={"app": "db"}, priorityClassName="inference"),
            pod("low-a", gpus=1, queue="q", node_name="a", phase="Running", priorityClassName="train"),
            pod("low-b", gpus=1, queue="q", node_name="b", phase="Running", priorityClassName="build-preemptible"),
            pod("high", gpus=1, queue="q", priorityClassName="inference",
                affinity=affinity(apart=[term(HOST, app="db")]))]
    d = cycle(objs, ("allocate", "preempt"))
    assert [e.pod for e in d.evictions] == ["default/low-b"]
    assert [(p.pod, p.node) for p in d.pipelined] == [("default/high", "b")]


def test_terms_are_read_and_kept() -> None:
    spec_aff = affinity(together=[{"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "x"}},
                                   "namespaces": ["n1", "n2"]}],
                        apart=[{"topologyKey": HOST, "labelSelector": {}, "namespaceSelector": {}},
                               {"labelSelector": {"matchLabels": {"app": "x"}}}])  # (no topologyKey: not valid)
    obj = pod("p", gpus=1, queue="q", ns="n0", affinity=spec_aff)
    kept = strip(obj)
    assert kept is not None and kept["spec"]["affinity"] == spec_aff
    p = read_pod(kept, [])
    assert [(t.key, t.namespaces) for t in p.pod_affinity] == [(ZONE, frozenset({"n1", "n2"}))]
    assert [(t.key, t.namespaces) for t in p.anti] == [(HOST, None)]
    plain = read_pod(pod("q", gpus=1, queue="q", ns="n0"), [])
    assert plain.sig == "" and not plain.pod_affinity and not plain.anti
    assert p.sig != read_pod(pod("r", gpus=1, queue="q", ns="n0", affinity={}), []).sig
