"""Topology spread constraints that must hold (``whenUnsatisfiable: DoNotSchedule``), as kube-scheduler's
PodTopologySpread filter reads them (KAI's predicate plugin wraps it): replicas kept within ``maxSkew`` of each other
per zone or per node, the pods running counted, the pod that waits and why, ``minDomains``, ``matchLabelKeys``;
``ScheduleAnyway`` is a preference and is not read. kai ignored them: binpack stacked a Deployment's replicas on one
node of one zone, which its owner had asked to spread."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.kube.strip import slim_pod, strip
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from kaid.model.pods import read_pod
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def nodes(*names_zones: tuple[str, str], gpus: int = 4) -> list[Obj]:
    return [node(n, gpus=gpus, labels={HOST: n, ZONE: z}) for n, z in names_zones]


def spread(key: str, skew: int = 1, when: str = "DoNotSchedule", **extra: Any) -> Obj:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": "web"}}, **extra}


def web(name: str, *constraints: Obj, **kw: Any) -> Obj:
    return pod(name, gpus=1, labels={"app": "web", **kw.pop("labels", {})},
               topologySpreadConstraints=list(constraints), **kw)


def cycles(objs: list[Obj], **cfg: Any) -> list[Decisions]:
    """The cycle on the cold build's snapshot and on the daemon's live model's."""
    config = SchedulerConfig.model_validate({"actions": ("allocate",), **cfg})
    model = LiveModel(config)
    for obj in copy.deepcopy(objs):
        model.upsert(obj)
    return [run_cycle(build_snapshot(objs, config, 0.0), config), run_cycle(model.snapshot(0.0), config)]


def where(d: Decisions) -> dict[str, str]:
    return {b.pod.split("/")[1]: b.node for b in d.binds}


def zone_of(n: str) -> str:
    return {"a": "z1", "b": "z1", "c": "z2", "d": "z2"}[n]


GANG_SOLVERS = [{}, {"placement": {"gangSolver": "greedy"}}, {"placement": {"gpu": "spread"}}]


@pytest.mark.parametrize("cfg", GANG_SOLVERS)
def test_a_gangs_replicas_spread_over_zones_and_nodes(cfg: Obj) -> None:
    """Binpack puts four one-GPU replicas on one node; spread by zone (max skew 1) two go to each zone, spread by
    node one goes to each node."""
    base = [*nodes(("a", "z1"), ("b", "z1"), ("c", "z2"), ("d", "z2")), queue("q"), podgroup("g", "q", 4)]
    by_zone = [web(f"g-{i}", spread(ZONE), group="g") for i in range(4)]
    for d in cycles([*base, *by_zone], **cfg):
        placed = where(d)
        assert len(placed) == 4 and sorted(zone_of(n) for n in placed.values()) == ["z1", "z1", "z2", "z2"], placed
    by_node = [web(f"g-{i}", spread(HOST), group="g") for i in range(4)]
    for d in cycles([*base, *by_node], **cfg):
        assert sorted(where(d).values()) == ["a", "b", "c", "d"]


def test_the_pods_running_count_and_a_pod_goes_to_the_least_crowded_zone() -> None:
    """Two replicas run in z1 (on a, the fullest node: binpack's choice): the next goes to z2."""
    objs = [*nodes(("a", "z1"), ("b", "z1"), ("c", "z2")), queue("q"),
            *(web(f"r-{i}", spread(ZONE), queue="q", node_name="a", phase="Running") for i in range(2)),
            web("new", spread(ZONE), queue="q")]
    for d in cycles(objs):
        assert where(d) == {"new": "c"}


def test_a_pod_waits_where_only_the_crowded_zone_has_room_and_says_why() -> None:
    objs = [*nodes(("a", "z1"), ("c", "z2"), gpus=2), queue("q"),
            web("r-0", spread(ZONE), queue="q", node_name="a", phase="Running"),
            pod("other", gpus=2, queue="q", node_name="c", phase="Running"),
            web("new", spread(ZONE), queue="q")]
    for d in cycles(objs):
        assert d.binds == []
        (why,) = [r for r in d.pending["default/pg-pod-new"] if r.code == "NodeFit"]
        assert why.details["failures"] == {"InsufficientGPU": 1, "PodTopologySpread": 1}, why.message
        assert "pod topology spread: max skew reached" in why.message
    # a preference only: placed where binpack puts it
    objs[-1] = web("new", spread(ZONE, when="ScheduleAnyway"), queue="q")
    for d in cycles(objs):
        assert where(d) == {"new": "a"}


def test_min_domains_counts_missing_zones_as_empty() -> None:
    """Three zones asked for, two exist: the least crowded counts as 0, so each zone holds at most maxSkew."""
    objs = [*nodes(("a", "z1"), ("c", "z2")), queue("q"), podgroup("g", "q", 1),
            *(web(f"g-{i}", spread(ZONE, minDomains=3), group="g") for i in range(3))]
    for d in cycles(objs):
        assert sorted(zone_of(n) for n in where(d).values()) == ["z1", "z2"]


def test_match_label_keys_spread_each_revision_apart_and_other_pods_do_not_count() -> None:
    """matchLabelKeys (the pod-template-hash of a rollout): only the pods of the same revision count; pods the
    selector does not match never count."""
    c = spread(ZONE, matchLabelKeys=["pod-template-hash"])
    objs = [*nodes(("a", "z1"), ("c", "z2")), queue("q"),
            *(web(f"old-{i}", c, queue="q", labels={"pod-template-hash": "v1"}, node_name="a", phase="Running")
              for i in range(3)),
            pod("db", gpus=1, queue="q", labels={"app": "db"}, node_name="c", phase="Running"),
            web("new-0", c, queue="q", labels={"pod-template-hash": "v2"})]
    for d in cycles(objs):
        assert where(d) == {"new-0": "a"}  # (binpack: a is the fuller node; no v2 pod runs anywhere)
    for obj in objs:  # without matchLabelKeys the old revision's three in z1 count: the new pod goes to z2
        if obj["metadata"]["name"] != "db":
            obj["spec"]["topologySpreadConstraints"] = [spread(ZONE)]
    for d in cycles(objs):
        assert where(d) == {"new-0": "c"}


def test_constraints_are_read_and_kept() -> None:
    obj = web("p", spread(ZONE, 2), spread(HOST, when="ScheduleAnyway"), {"maxSkew": 0, "topologyKey": ZONE,
                                                                        "whenUnsatisfiable": "DoNotSchedule"})
    read = read_pod(obj, [])
    (only,) = read.spread
    assert (only.term.key, only.max_skew, only.min_domains) == (ZONE, 2, 1) and read.sig
    assert read_pod(web("q"), []).spread == ()
    written = obj["spec"]["topologySpreadConstraints"]
    for kept in (strip(copy.deepcopy(obj)), slim_pod(copy.deepcopy(obj))):
        assert kept is not None and kept["spec"]["topologySpreadConstraints"] == written
