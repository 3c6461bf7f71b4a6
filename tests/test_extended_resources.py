"""Extended resources (``rdma/ib``, ``nvidia.com/mig-1g.10gb``, huge pages): a pod goes only where a node has what it
asks of them free, as kube-scheduler's NodeResourcesFit and KAI's scalar resources have it; kai ignored them and bound
pods that the kubelet then refused (``OutOfrdma/ib``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kaid.api.config import SchedulerConfig
from kaid.cycle import Decisions, run_cycle
from kaid.model.build import build_snapshot
from kaid.model.live import LiveModel
from kaid.model.nodes import read_node
from kaid.model.objects import MOST_AMOUNT, Snapshot
from kaid.model.pods import extended, is_extended, pod_requests, read_pod
from tests.objects import node, pod, podgroup, queue

Obj = dict[str, Any]
IB = "rdma/ib"
STORAGE = "ephemeral-storage"
NOW = 1_000_000.0


def _asks(obj: Obj, amounts: dict[str, str], limits_only: bool = False) -> Obj:
    """``obj`` (a pod) asking for ``amounts`` too (as limits alone: the API server makes them the requests)."""
    res = obj["spec"]["containers"][0]["resources"]
    res.setdefault("limits", {}).update(amounts)
    if not limits_only:
        res["requests"].update(amounts)
    return obj


def _ib_node(name: str, ib: int | None, gpus: int = 4) -> Obj:
    n = node(name, gpus=gpus)
    if ib is not None:
        n["status"]["allocatable"][IB] = str(ib)
    return n


def _ib_pod(name: str, ib: int = 1, **kw: Any) -> Obj:
    return _asks(pod(name, **kw), {IB: str(ib)})


def _snapshots(objs: list[Obj], cfg: SchedulerConfig) -> list[Snapshot]:
    """The cold build's snapshot and the daemon's live model's, of the same objects."""
    model = LiveModel(cfg)
    for obj in copy.deepcopy(objs):
        model.upsert(obj)
    return [build_snapshot(objs, cfg, NOW), model.snapshot(NOW)]


def _binds(d: Decisions) -> list[tuple[str, str]]:
    return sorted((b.pod.split("/")[1], b.node) for b in d.binds)


CFGS = [SchedulerConfig(), SchedulerConfig.model_validate({"placement": {"gangSolver": "greedy"}}),
        SchedulerConfig.model_validate({"placement": {"gpu": "spread"}})]


# ----------------------------------------------------------------------------------------------------- reading
@pytest.mark.parametrize("name,extended_one", [
    (IB, True), ("nvidia.com/mig-1g.10gb", True), ("hugepages-2Mi", True), ("example.com/foo", True),
    ("nvidia.com/gpu", False), ("cpu", False), ("memory", False), ("ephemeral-storage", True), ("pods", False),
    ("kubernetes.io/batteries", False), ("node.kubernetes.io/x", False), ("requests.example.com/foo", False),
])
def test_which_resources_are_extended(name: str, extended_one: bool) -> None:
    assert is_extended(name) is extended_one


def test_a_pods_extended_requests_sum_its_containers_and_take_the_largest_init_step() -> None:
    obj = _asks(pod("p", gpus=1), {IB: "2", "hugepages-2Mi": "1Gi", "example.com/zero": "0"})
    obj["spec"]["containers"].append({"name": "d", "resources": {"limits": {IB: "1"}}})
    obj["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {IB: "5"}}}]
    assert extended(pod_requests(obj["spec"])) == (("hugepages-2Mi", 2**30), (IB, 5))
    read = read_pod(obj, [])
    assert read.ext == (("hugepages-2Mi", 2**30), (IB, 5)) and read.gpu_whole == 1
    huge = _asks(pod("h", gpus=1), {IB: "1e30"})  # read within the bound: more than any node has (CP-SAT's numbers)
    assert extended(pod_requests(huge["spec"])) == ((IB, MOST_AMOUNT + 1),)
    plain = read_pod(pod("q", gpus=1), [])
    assert plain.ext == () and plain.sig == ""
    assert read_pod(_asks(pod("r", gpus=1), {IB: "1"}, limits_only=True), []).ext == ((IB, 1),)


def test_a_nodes_extended_allocatable_is_read() -> None:
    n = _ib_node("n0", 8)
    n["status"]["allocatable"].update({"hugepages-1Gi": "4Gi", "ephemeral-storage": "100Gi"})
    assert dict(read_node(n).ext_alloc) == {IB: 8, "hugepages-1Gi": 4 * 2**30, STORAGE: 100 * 2**30}
    assert dict(read_node(node("n1", gpus=1)).ext_alloc) == {}


# --------------------------------------------------------------------------------------------------- placing
@pytest.mark.parametrize("cfg", CFGS)
def test_a_pod_goes_only_where_a_node_offers_what_it_asks(cfg: SchedulerConfig) -> None:
    objs = [_ib_node("bare", None, gpus=8), _ib_node("ib", 1), queue("default-queue"), _ib_pod("p", gpus=1)]
    for snap in _snapshots(objs, cfg):
        assert _binds(run_cycle(snap, cfg)) == [("p", "ib")]
    objs = [_ib_node("bare", None, gpus=8), queue("default-queue"), _ib_pod("p", gpus=1)]
    for snap in _snapshots(objs, cfg):
        d = run_cycle(snap, cfg)
        assert not d.binds
        (why,) = [r.message for r in d.pending["default/pg-pod-p"]]
        assert why == "0/1 nodes can take a pod of 1 GPU, 1 cpu, 1.07 GB memory, 1 rdma/ib: 1 insufficient " \
                      "extended resource", why


@pytest.mark.parametrize("cfg", CFGS)
def test_what_running_pods_hold_and_what_the_cycle_places_count(cfg: SchedulerConfig) -> None:
    # one rdma/ib on n0: the running pod holds it; on n1 two, for three pending pods
    objs = [_ib_node("n0", 1), _ib_node("n1", 2), queue("default-queue"),
            _ib_pod("running", gpus=1, node_name="n0"), *(_ib_pod(f"p{i}", gpus=1) for i in range(3))]
    for snap in _snapshots(objs, cfg):
        d = run_cycle(snap, cfg)
        assert [n for _, n in _binds(d)] == ["n1", "n1"]
        assert list(d.pending) == ["default/pg-pod-p2"]


@pytest.mark.parametrize("cfg", CFGS)
def test_a_gang_spreads_over_the_nodes_its_extended_resources_allow(cfg: SchedulerConfig) -> None:
    # room for four one-GPU pods on each node by GPUs, for one by rdma/ib: the gang of three takes three nodes
    objs = [*(_ib_node(f"n{i}", 1) for i in range(3)), _ib_node("bare", None, gpus=8), queue("default-queue"),
            podgroup("g", "default-queue", 3), *(_ib_pod(f"g-{i}", gpus=1, group="g") for i in range(3))]
    for snap in _snapshots(objs, cfg):
        assert sorted(n for _, n in _binds(run_cycle(snap, cfg))) == ["n0", "n1", "n2"]
    fewer = [o for o in objs if o["metadata"]["name"] != "n2"]
    for snap in _snapshots(fewer, cfg):
        d = run_cycle(snap, cfg)
        assert not d.binds and "default/g" in d.pending


def _disk_node(name: str, storage: str | None) -> Obj:
    n = node(name, gpus=8)
    if storage is not None:
        n["status"]["allocatable"][STORAGE] = storage
    return n


@pytest.mark.parametrize("cfg", CFGS)
def test_ephemeral_storage_is_checked_where_a_node_reports_it(cfg: SchedulerConfig) -> None:
    """A pod asking 300Gi of local disk (a model cache) goes where that much is free, what running pods hold counted:
    a kubelet refuses it elsewhere (OutOfephemeral-storage); kai ignored it and bound such pods side by side."""
    def asks(name: str, **kw: Any) -> Obj:
        return _asks(pod(name, gpus=1, **kw), {STORAGE: "300Gi"})

    objs = [_disk_node("small", "200Gi"), _disk_node("big", "500Gi"), queue("default-queue"),
            asks("running", node_name="big"), asks("a"), pod("plain", gpus=1)]
    for snap in _snapshots(objs, cfg):
        d = run_cycle(snap, cfg)
        assert ("plain", "small") in _binds(d) or ("plain", "big") in _binds(d)
        assert "default/pg-pod-a" in d.pending and all(p != "a" for p, _ in _binds(d))
        (why,) = [r.message for r in d.pending["default/pg-pod-a"]]
        assert why.endswith("322 GB ephemeral-storage: 2 insufficient extended resource"), why
    objs = [_disk_node("small", "200Gi"), _disk_node("big", "700Gi"), queue("default-queue"),
            podgroup("g", "default-queue", 2), *(asks(f"g-{i}", group="g") for i in range(2))]
    for snap in _snapshots(objs, cfg):
        assert _binds(run_cycle(snap, cfg)) == [("g-0", "big"), ("g-1", "big")]


def test_a_node_that_does_not_report_ephemeral_storage_takes_what_pods_ask_of_it() -> None:
    objs = [_disk_node("kwok", None), queue("default-queue"),
            *(_asks(pod(f"p{i}", gpus=1), {STORAGE: "10Ti"}) for i in range(3))]
    for snap in _snapshots(objs, CFGS[0]):
        assert [n for _, n in _binds(run_cycle(snap, CFGS[0]))] == ["kwok"] * 3


def test_a_pod_without_them_is_placed_as_before() -> None:
    objs = [_ib_node("ib", 1), queue("default-queue"), _ib_pod("holder", gpus=1, node_name="ib"), pod("plain", gpus=1)]
    for snap in _snapshots(objs, CFGS[0]):
        assert _binds(run_cycle(snap, CFGS[0])) == [("plain", "ib")]


def test_preempt_frees_the_extended_resource_a_victim_holds() -> None:
    # the only rdma/ib is held by a preemptible pod; a pod of the same queue with a higher priority takes it
    cfg = SchedulerConfig()
    objs = [_ib_node("n0", 1), queue("q", gpu=(8, -1, 1)),
            podgroup("low", "q", 1, priority_class="train"),
            _ib_pod("low-0", gpus=1, group="low", node_name="n0"),
            podgroup("high", "q", 1, priority_class="build", created="2026-01-01T00:05:00Z"),
            _ib_pod("high-0", gpus=1, group="high", created="2026-01-01T00:05:00Z")]
    for snap in _snapshots(objs, cfg):
        d = run_cycle(snap, cfg)
        assert [e.pod for e in d.evictions] == ["default/low-0"]
        assert [(p.pod, p.node) for p in d.pipelined] == [("default/high-0", "n0")]


@pytest.mark.parametrize("ib", [1, 2])
def test_cpsat_places_a_gang_of_two_shapes_within_each_nodes_extended_resources(ib: int) -> None:
    # two shapes (1 and 2 GPUs), each pod one rdma/ib: by GPUs one node of 8 takes all three, by rdma/ib ``ib`` of them
    from kaid.placement.cpsat import solve_gang
    from kaid.placement.index import NodeIndex

    objs = [_ib_node(f"n{i}", ib, gpus=8) for i in range(3)]
    objs += [queue("default-queue"), podgroup("g", "default-queue", 3),
             _ib_pod("g-0", gpus=1, group="g"), _ib_pod("g-1", gpus=2, group="g"), _ib_pod("g-2", gpus=2, group="g")]
    snap = build_snapshot(objs, SchedulerConfig(), NOW)
    index = NodeIndex(snap.nodes)
    plan, stats = solve_gang(snap.jobs["default/g"].pods, index, None, None, None, None, 10.0)
    assert plan is not None, stats
    per_node: dict[str, int] = {}
    for _, n in plan:
        per_node[n.name] = per_node.get(n.name, 0) + 1
    assert max(per_node.values()) <= ib and sum(per_node.values()) == 3, per_node


# ------------------------------------------------------------------------------------------------- host ports
def _port(obj: Obj, port: int, protocol: str | None = None, host: bool = True) -> Obj:
    entry: Obj = {"containerPort": port, **({"hostPort": port} if host else {})}
    if protocol:
        entry["protocol"] = protocol
    obj["spec"]["containers"][0].setdefault("ports", []).append(entry)
    return obj


def test_a_pods_host_ports_are_read_and_the_watch_cache_keeps_them() -> None:
    from kaid.kube.strip import slim_pod

    obj = _port(_port(_port(pod("p", gpus=1), 29500), 53, "UDP"), 8080, host=False)
    read = read_pod(obj, [])
    assert read.ext == (("hostPort:TCP/29500", 1), ("hostPort:UDP/53", 1))
    assert slim_pod(obj)["spec"]["containers"][0]["ports"] == [{"hostPort": 29500}, {"hostPort": 53, "protocol": "UDP"}]
    assert "ports" not in slim_pod(_port(pod("q"), 8080, host=False))["spec"]["containers"][0]


@pytest.mark.parametrize("cfg", CFGS)
def test_pods_that_take_the_same_host_port_go_to_different_nodes(cfg: SchedulerConfig) -> None:
    # torch's rendezvous port on the host network: a gang of three on two nodes with room for all by GPUs
    objs = [node("n0", gpus=8), node("n1", gpus=8), queue("default-queue"),
            _port(pod("running", gpus=1, node_name="n0"), 29500),
            podgroup("g", "default-queue", 2), *(_port(pod(f"g-{i}", gpus=1, group="g"), 29500) for i in range(2)),
            _port(pod("other-port", gpus=1), 29501), _port(pod("udp", gpus=1), 29500, "UDP")]
    for snap in _snapshots(objs, cfg):
        d = run_cycle(snap, cfg)
        assert not any(b.pod.startswith("default/g-") for b in d.binds)  # one node has the port free: not two
        (why,) = [r.message for r in d.pending["default/g"] if r.code == "NodeFit"]
        assert why.endswith("host port TCP/29500: 1 host port in use"), why
        assert {b.pod for b in d.binds} == {"default/other-port", "default/udp"}
    three = [*objs, node("n2", gpus=8)]
    for snap in _snapshots(three, cfg):
        placed = {b.pod: b.node for b in run_cycle(snap, cfg).binds if b.pod.startswith("default/g-")}
        assert sorted(placed.values()) == ["n1", "n2"], placed
