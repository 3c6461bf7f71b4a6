"""End to end: a pod that asks for an extended resource (``rdma/ib``) is bound only where a node has it free; kaid
bound it anywhere its GPUs fit, and a real kubelet then refuses the pod (``OutOfrdma/ib``). kwok's nodes admit any
pod, so what is bound is kaid's choice alone."""

from __future__ import annotations

from functools import partial
from typing import Any

from .controlplane import ControlPlane
from .kaid_helpers import bound, create_object, pod, pod_condition, pods_of, queue, suffix, wait_for

IB = "rdma/ib"
Obj = dict[str, Any]


def _asking(obj: Obj, amount: str = "1") -> Obj:
    obj["spec"]["containers"][0].setdefault("resources", {}).setdefault("limits", {})[IB] = amount
    return obj


def test_pods_asking_for_an_extended_resource_are_bound_only_where_it_is_free(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    with_ib, _ = make_pool(1, gpus=4, extended={IB: "1"})  # room for four one-GPU pods, one rdma/ib
    without, _ = make_pool(1, gpus=8)
    (q,) = make_queues(queue(f"ext-{suffix()}", 0))
    kaid = start_kaid("ext")
    for name in ("first", "second"):
        create_object(cp, namespace, _asking(pod(name, with_ib, q, 1)))
    create_object(cp, namespace, _asking(pod("elsewhere", without, q, 1)))
    create_object(cp, namespace, pod("plain", with_ib, q, 1))

    def placed() -> list[str] | None:
        names = sorted(p["metadata"]["name"] for p in bound(pods_of(cp, namespace)))
        return names if len(names) == 2 else None

    got = wait_for(placed, 40, "one rdma/ib pod and the plain one bound")
    assert got[1] == "plain" and got[0] in ("first", "second"), got

    waiting = "second" if got[0] == "first" else "first"
    for name in (waiting, "elsewhere"):
        cond = wait_for(partial(_says, cp, namespace, name, "insufficient extended resource"), 40,
                        f"pod {name} to say what it lacks")
        assert cond["status"] == "False" and "1 rdma/ib" in cond["message"], cond
    kaid.wait_cycles(3)
    assert sorted(p["metadata"]["name"] for p in bound(pods_of(cp, namespace))) == got


def test_pods_taking_one_host_port_are_bound_to_different_nodes(
    control_plane: ControlPlane, namespace: str, make_pool: Any, make_queues: Any, start_kaid: Any
) -> None:
    cp = control_plane
    pool, _ = make_pool(2, gpus=8)
    (q,) = make_queues(queue(f"port-{suffix()}", 0))
    start_kaid("port")
    for i in range(3):
        obj = pod(f"rank-{i}", pool, q, 1)
        obj["spec"]["containers"][0]["ports"] = [{"containerPort": 29500, "hostPort": 29500}]
        create_object(cp, namespace, obj)

    def two() -> list[Obj] | None:
        got = bound(pods_of(cp, namespace))
        return got if len(got) == 2 else None

    placed = wait_for(two, 40, "two of the three pods bound")
    assert len({p["spec"]["nodeName"] for p in placed}) == 2, [p["spec"]["nodeName"] for p in placed]
    (left,) = {f"rank-{i}" for i in range(3)} - {p["metadata"]["name"] for p in placed}
    cond = wait_for(partial(_says, cp, namespace, left, "host port in use"), 40, f"pod {left} to say why it waits")
    assert "host port TCP/29500" in cond["message"], cond


def _says(cp: ControlPlane, namespace: str, name: str, words: str) -> Obj | None:
    (obj,) = [p for p in pods_of(cp, namespace) if p["metadata"]["name"] == name]
    cond = pod_condition(obj, "PodScheduled")
    return cond if cond and words in str(cond.get("message")) else None
