"""Binds sent without waiting for their answers (``Actuator.send``, then ``collect``): a starting kaid's early
cycle sends its binds and the first full cycle snapshots and decides while they go out. The daemon's overlay
assumes them from the moment they are sent; the answers end the assumption of those that failed."""

from __future__ import annotations

import threading
from typing import Any

from kaid.cycle import Bind
from kaid.kube.actuator import Actuator
from kaid.kube.client import ApiError
from kaid.kube.daemon import ASSUME_TTL, Overlay
from tests.objects import pod


class GatedClient:
    """Answers no bind before ``gate`` opens; then binding ``refused`` pods fails (422), the others are taken."""

    def __init__(self, refused: set[str]) -> None:
        self.gate = threading.Event()
        self.refused = refused
        self.sent: list[str] = []
        self.lock = threading.Lock()

    def create(self, path: str, body: Any) -> dict[str, Any]:
        with self.lock:
            self.sent.append(path)
        assert self.gate.wait(10.0), "the test never opened the gate"
        if body["metadata"]["name"] in self.refused:
            raise ApiError(422, "Invalid", {"message": "refused"})
        return {}


def _bind(name: str) -> Bind:
    return Bind(f"default/{name}", "n1", f"default/pg-{name}", "q", (0,), None, 1000)


def _nodes(overlay: Overlay, now: float, *names: str) -> dict[str, str | None]:
    return {p["metadata"]["name"]: p["spec"].get("nodeName")
            for p in overlay.apply([pod(n, gpus=1) for n in names], now)}


def test_binds_sent_are_assumed_until_answered_and_the_failed_ones_then_no_more() -> None:
    client = GatedClient(refused={"b"})
    actuator = Actuator(client, workers=2)  # type: ignore[arg-type]
    overlay = Overlay()
    now = 1_000.0
    try:
        started = actuator.start_binds([_bind("a")])
        sending = actuator.send([_bind("a"), _bind("b"), _bind("c")], started)  # "a" is not sent twice
        assert [b.pod for b, _ in sending.pairs] == ["default/a", "default/b", "default/c"]
        assert not any(f.done() for _, f in sending.pairs), "send waited for answers"
        overlay.sent(sending, now)
        assert _nodes(overlay, now + 1, "a", "b", "c") == {"a": "n1", "b": "n1", "c": "n1"}
        client.gate.set()
        applied = actuator.collect(sending)
    finally:
        client.gate.set()
        actuator.close()
    assert sorted(client.sent) == [f"/api/v1/namespaces/default/pods/{n}/binding" for n in "abc"]
    assert [b.pod for b in applied.bound] == ["default/a", "default/c"]
    assert [(b.pod, reason) for b, reason in applied.failed] == [("default/b", "422 refused")]
    later = now + ASSUME_TTL - 1
    overlay.answered(applied, later)
    # "b" is pending again for the next cycle; the bound ones are assumed for ASSUME_TTL from their answer
    assert _nodes(overlay, later + 1, "a", "b", "c") == {"a": "n1", "b": None, "c": "n1"}
    assert _nodes(overlay, later + ASSUME_TTL - 1, "a", "c") == {"a": "n1", "c": "n1"}


def test_bind_is_send_then_collect() -> None:
    client = GatedClient(refused=set())
    client.gate.set()
    actuator = Actuator(client, workers=2)  # type: ignore[arg-type]
    try:
        applied = actuator.bind([_bind("a"), _bind("b")])
    finally:
        actuator.close()
    assert [b.pod for b in applied.bound] == ["default/a", "default/b"] and not applied.failed
