"""The client's token bucket, and limits set after requests went out (``kaid run`` lists before it has read
its config): the requests already made count against the new burst, no more and no less."""

from __future__ import annotations

import pytest

from kaid.kube import client as client_module
from kaid.kube.client import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(client_module, "time", c)  # the client module's clock only
    return c


def test_burst_then_qps(clock: Clock) -> None:
    limiter = RateLimiter(qps=10, burst=3)
    for _ in range(3):
        limiter.take()
    assert clock.slept == []
    limiter.take()
    assert clock.slept == [pytest.approx(0.1)]


@pytest.mark.parametrize(("taken", "qps", "burst", "free"), [(12, 100, 200, 188), (0, 100, 200, 200),
                                                              (12, 5, 10, 0), (3, 50, 20, 17)])
def test_new_limits_count_what_was_taken(clock: Clock, taken: int, qps: float, burst: int, free: int) -> None:
    limiter = RateLimiter(qps=50, burst=100)
    for _ in range(taken):
        limiter.take()
    limiter.configure(qps, burst)
    for _ in range(free):
        limiter.take()
    assert clock.slept == [], "a token the new burst leaves was not given"
    limiter.take()
    assert clock.slept == [pytest.approx(1 / qps)], "more tokens were given than the new burst leaves"
