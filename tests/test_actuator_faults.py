"""The actuator under API faults (the fault tests on the real control plane, tests/e2e/test_faults.py, found
these): binds and evictions back off through throttling and server errors, within a deadline, and a replica
that no longer holds the lease sends nothing more, not even a retry."""

from __future__ import annotations

from typing import Any

import pytest

from kaid.cycle import Bind, Decisions, Eviction
from kaid.kube.actuator import LOST_LEASE, Actuator, retry_delay
from kaid.kube.client import ApiError


def _err(status: int, message: str = "", retry_after: Any = None) -> ApiError:
    body: dict[str, Any] = {"message": message}
    if retry_after is not None:
        body["details"] = {"retryAfterSeconds": retry_after}
    return ApiError(status, "x", body)


def test_retry_delay_backs_off_on_throttling_and_server_errors_only() -> None:
    assert retry_delay(_err(500), 0) == pytest.approx(0.2)
    assert retry_delay(_err(503), 3) == pytest.approx(1.6)
    assert retry_delay(_err(500), 10) == 2.0  # capped
    assert retry_delay(None, 1) == pytest.approx(0.4)  # the connection failed
    assert retry_delay(_err(429), 0) == pytest.approx(0.2)
    assert retry_delay(_err(429, retry_after=2), 0) == 2.0  # never sooner than the server asks
    assert retry_delay(_err(429, retry_after=600), 0) == 10.0  # but not for ages
    assert retry_delay(_err(429, retry_after="soon"), 0) == pytest.approx(0.2)
    assert retry_delay(_err(403), 0) == pytest.approx(0.2)  # an API server whose RBAC is not synced yet
    for status in (400, 404, 409, 422):
        assert retry_delay(_err(status), 0) is None
    pdb = _err(429, "Cannot evict pod as it would violate the pod's disruption budget.", retry_after=10)
    assert retry_delay(pdb, 0, eviction=True) is None  # the next cycle decides again
    assert retry_delay(_err(429, retry_after=1), 0, eviction=True) == 1.0


class ScriptedClient:
    """Answers each create (POST) with the next of ``answers`` (an ApiError or Exception is raised), then OK."""

    def __init__(self, answers: list[BaseException | None]) -> None:
        self.answers = list(answers)
        self.sent: list[str] = []

    def create(self, path: str, body: Any) -> dict[str, Any]:
        self.sent.append(path)
        answer = self.answers.pop(0) if self.answers else None
        if answer is not None:
            raise answer
        return {}

    def merge_patch(self, path: str, patch: Any) -> dict[str, Any]:
        return {}

    def strategic_patch(self, path: str, patch: Any) -> dict[str, Any]:
        return {}

    def get(self, path: str) -> dict[str, Any]:
        return {"spec": {}}


def _bind(pod: str = "ns/p") -> Bind:
    return Bind(pod, "node-0", "ns/job", "q", (), None, 1000, "allocate", None, ())


def test_a_bind_retries_through_429_and_500_until_it_is_taken() -> None:
    client = ScriptedClient([_err(429, retry_after=0), _err(500), ConnectionError("refused"), None])
    actuator = Actuator(client, workers=1)  # type: ignore[arg-type]
    try:
        assert actuator._bind_one(_bind()) is None
    finally:
        actuator.close()
    assert len(client.sent) == 4


def test_a_bind_gives_up_at_its_deadline_and_at_once_on_a_final_answer() -> None:
    client = ScriptedClient([_err(500, "boom")] * 100)
    actuator = Actuator(client, workers=1, retry_for=0.5)  # type: ignore[arg-type]
    try:
        assert actuator._bind_one(_bind()) == "500 boom"
        assert 2 <= len(client.sent) <= 4
        client2 = ScriptedClient([_err(422, "invalid")])
        actuator.client = client2  # type: ignore[assignment]
        assert actuator._bind_one(_bind()) == "422 invalid"
        assert len(client2.sent) == 1
    finally:
        actuator.close()


def test_a_replica_that_lost_the_lease_sends_no_bind_retry_or_eviction() -> None:
    leading = [True]
    client = ScriptedClient([_err(500), _err(500)])

    def create(path: str, body: Any) -> dict[str, Any]:
        leading[0] = False  # the lease goes while the first bind is out
        return ScriptedClient.create(client, path, body)

    client.create = create  # type: ignore[method-assign]
    actuator = Actuator(client, workers=1, may_act=lambda: leading[0])  # type: ignore[arg-type]
    try:
        assert actuator._bind_one(_bind()) == LOST_LEASE
        assert len(client.sent) == 1  # the retry was not sent
        out = actuator.evict([Eviction("ns/v", "node-0", "ns/job", "reclaim", "ns/other", "m")])
        assert out.evicted == [] and out.evict_failed[0][1] == LOST_LEASE
        assert len(client.sent) == 1
    finally:
        actuator.close()


def test_a_gang_partly_bound_keeps_its_bound_pods() -> None:
    """Deleting them would lose bare pods and fail Jobs (their pods' deletion counts against backoffLimit): they
    stay bound, and the next cycle places the rest of the gang."""
    client = ScriptedClient([None, None, _err(422, "node gone"), None])
    deleted: list[str] = []

    def delete(method: str, path: str, body: Any = None) -> dict[str, Any]:
        deleted.append(path)
        return {}

    client.request = delete  # type: ignore[attr-defined]
    actuator = Actuator(client, workers=1)  # type: ignore[arg-type]
    try:
        out = actuator.bind([_bind("ns/a"), _bind("ns/b"), _bind("ns/c"), _bind("ns/d")])
    finally:
        actuator.close()
    assert [b.pod for b, _ in out.failed] == ["ns/c"]
    assert [b.pod for b in out.bound] == ["ns/a", "ns/b", "ns/d"]
    assert out.partly_bound == ["ns/job"] and deleted == []  # counted in kai_gang_outcomes_total{partly_bound}


def test_a_bind_for_a_node_that_went_away_is_not_sent() -> None:
    client = ScriptedClient([])
    gone = {"node-0"}
    actuator = Actuator(client, workers=1,  # type: ignore[arg-type]
                        node_problem=lambda n: f"node {n} no longer exists" if n in gone else None)
    try:
        assert actuator._bind_one(_bind()) == "node node-0 no longer exists"
        assert client.sent == []
        gone.clear()
        assert actuator._bind_one(_bind()) is None
        assert len(client.sent) == 1
    finally:
        actuator.close()


def test_failed_binds_of_single_pods_are_summed_up_for_the_cycle_log() -> None:
    """A single pod's failed bind raises no gang warning: the cycle's log line says it (bench_kube's tail of pods
    left by the first full cycle was binds refused for nodes gone NotReady, seen nowhere but in events)."""
    sick = {"node-1": "node node-1 is not Ready", "node-2": "node node-2 is not Ready"}
    client = ScriptedClient([_err(422, "invalid")])
    actuator = Actuator(client, workers=1, node_problem=sick.get)  # type: ignore[arg-type]

    def single(pod: str, node: str) -> Bind:
        return Bind(f"ns/{pod}", node, f"ns/{pod}-job", "q", (), None, 1000, "allocate", None, ())

    try:
        out = actuator.bind([single("a", "node-0"), *(single(f"b{i}", "node-1") for i in range(3)),
                             single("c", "node-0"), *(single(f"d{i}", "node-2") for i in range(2))])
    finally:
        actuator.close()
    assert [b.pod for b in out.bound] == ["ns/c"] and out.partly_bound == []
    assert out.failures() == ("6 binds failed: 3 x node node-1 is not Ready; 2 x node node-2 is not Ready; "
                              "1 x 422 invalid")
    assert out.failures(shown=1) == "6 binds failed: 3 x node node-1 is not Ready; 2 other reasons"


class OrderedClient(ScriptedClient):
    """Records every write in order, and fails the binds of ``refused`` pods (409: not this pod's to bind)."""

    def __init__(self, refused: tuple[str, ...] = ()) -> None:
        super().__init__([])
        self.refused = refused

    def create(self, path: str, body: Any) -> dict[str, Any]:
        self.sent.append(path)
        if path.endswith("/binding") and any(f"/pods/{p}/" in path for p in self.refused):
            raise ApiError(422, "x", {"message": "refused"})
        return {}


def test_a_pod_bound_and_evicted_in_the_same_decisions() -> None:
    """A victim that allocate placed earlier in the cycle (KAI's rule): a bind not sent yet goes out neither, nor its
    eviction (before, the eviction went first and the bind after it); a bind already streamed is answered before its
    pod's eviction goes out, and a pod whose bind failed is not evicted (it is pending)."""
    client = OrderedClient(refused=("failed",))
    actuator = Actuator(client, workers=2)  # type: ignore[arg-type]
    try:
        streamed = [_bind("ns/streamed"), _bind("ns/failed")]
        started = actuator.start_binds(streamed)
        d = Decisions(binds=[*streamed, _bind("ns/unsent"), _bind("ns/kept")],
                      evictions=[Eviction(p, "node-0", "ns/job", "reclaim", "ns/other", "")
                                 for p in ("ns/unsent", "ns/streamed", "ns/failed", "ns/victim")],
                      pipelined=[_bind("ns/unsent")])
        out = actuator.apply(d, started)
    finally:
        actuator.close()
    binds = [p for p in client.sent if p.endswith("/binding")]
    evictions = [p for p in client.sent if p.endswith("/eviction")]
    assert not any("/unsent/" in p for p in binds + evictions)
    assert sorted(p.split("/")[-2] for p in evictions) == ["streamed", "victim"]
    assert client.sent.index("/api/v1/namespaces/ns/pods/streamed/eviction") > \
        client.sent.index("/api/v1/namespaces/ns/pods/streamed/binding")
    assert sorted(b.pod for b in out.bound) == ["ns/kept", "ns/streamed"]
    assert sorted(e.pod for e in out.evicted) == ["ns/streamed", "ns/victim"] and out.evict_failed == []
    assert [b.pod for b, _ in out.failed] == ["ns/failed"]
    assert out.pipelined == 1  # the pod that stays pending keeps its place where it was pipelined
