"""The daemon's overlay: binds and evictions it made are assumed until the watch shows them, for ASSUME_TTL
from when they were made (a cycle that binds a large backlog lasts longer than that)."""

from __future__ import annotations

from kaid.cycle import Bind, Decisions
from kaid.kube.actuator import ApplyResult
from kaid.kube.daemon import ASSUME_TTL, Overlay
from tests.objects import pod


def _bind(name: str) -> Bind:
    return Bind(f"default/{name}", "n1", f"default/pg-{name}", "q", (0,), None, 1000)


def test_a_bind_is_assumed_until_the_watch_shows_it_or_its_time_is_up() -> None:
    overlay = Overlay()
    made = 1_000.0
    overlay.record(Decisions(), ApplyResult(bound=[_bind("a")]), made)
    (seen,) = overlay.apply([pod("a", gpus=1)], made + ASSUME_TTL - 1)
    assert seen["spec"]["nodeName"] == "n1" and seen["status"]["phase"] == "Running"
    watched = pod("a", gpus=1)
    watched["spec"]["nodeName"] = "n1"
    assert overlay.apply([watched], made + 1) == [watched]  # the watch caught up: nothing more assumed
    overlay.record(Decisions(), ApplyResult(bound=[_bind("b")]), made)
    (late,) = overlay.apply([pod("b", gpus=1)], made + ASSUME_TTL + 1)
    assert not late["spec"].get("nodeName"), "after its time, the watch decides alone"
