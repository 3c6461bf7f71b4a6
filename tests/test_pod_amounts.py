"""A pod's cpu, memory and GPUs are remembered by its lone container's requests and limits as written
(``kaid.model.pods._amounts``): pods that write the same read the same, and no pod reads what another wrote."""

from __future__ import annotations

from typing import Any

from kaid.api import constants as c
from kaid.model.objects import Reason
from kaid.model.pods import read_pod


def _pod(name: str, requests: dict[str, Any], limits: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": requests}
    if limits is not None:
        resources["limits"] = limits
    return {"metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"containers": [{"name": "main", "resources": resources}]}}


def _read(obj: dict[str, Any]) -> tuple[tuple[int, int, int], list[Reason]]:
    problems: list[Reason] = []
    pod = read_pod(obj, problems)
    return (pod.cpu, pod.mem, pod.gpu_whole), problems


def test_pods_asking_alike_read_alike() -> None:
    asks = {"cpu": "500m", "memory": "2Gi", c.GPU_RESOURCE: "2"}
    first, second = _read(_pod("a", asks)), _read(_pod("b", dict(asks)))
    assert first == second == ((500, 2 * 2**30, 2), [])


def test_limits_count_where_requests_say_nothing() -> None:
    assert _read(_pod("a", {"cpu": "1"}))[0] == (1000, 0, 0)
    assert _read(_pod("b", {"cpu": "1"}, {c.GPU_RESOURCE: "1", "cpu": "4"}))[0] == (1000, 0, 1)
    assert _read(_pod("c", {"cpu": "1"}, {}))[0] == (1000, 0, 0)


def test_a_number_written_otherwise_is_read_for_itself() -> None:
    # 1 == 1.0 == True in Python: a pod whose request is a bool must not read another's number
    assert _read(_pod("a", {"cpu": 1}))[0] == (1000, 0, 0)
    assert _read(_pod("b", {"cpu": 1.5}))[0] == (1500, 0, 0)
    amounts, problems = _read(_pod("c", {"cpu": True}))
    assert amounts == (0, 0, 0)
    assert [p.message for p in problems] == ["pod ns/c has an unreadable resource request: True is not a quantity"]


def test_an_unreadable_request_is_a_problem_every_time() -> None:
    for name in ("a", "b"):
        amounts, problems = _read(_pod(name, {"cpu": "lots"}))
        assert amounts == (0, 0, 0)
        assert len(problems) == 1 and "unreadable resource request" in problems[0].message


def test_a_fraction_of_a_gpu_is_a_problem_on_each_pod() -> None:
    for name in ("a", "b"):
        amounts, problems = _read(_pod(name, {c.GPU_RESOURCE: "0.5"}))
        assert amounts == (0, 0, 0)
        assert len(problems) == 1 and "whole devices only" in problems[0].message
