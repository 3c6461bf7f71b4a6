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


def test_time_before_new_limits_refills_at_the_new_rate(clock: Clock) -> None:
    """As if set from the start: 50 tokens taken at once, 2 s ago; at 100/s, 200 saved at most, the bucket would
    be full again (the old limits, 10/s, would have given 20 of them back)."""
    limiter = RateLimiter(qps=10, burst=100)
    for _ in range(50):
        limiter.take()
    clock.now += 2.0
    limiter.configure(100, 200)
    for _ in range(200):
        limiter.take()
    assert clock.slept == []
    limiter.take()
    assert clock.slept == [pytest.approx(0.01)]


def test_takes_are_replayed_at_the_times_they_were_taken(clock: Clock) -> None:
    """100 tokens at once, 25 more 0.5 s later, configured 0.3 s after that: under 100/s and 200 at most,
    200 - 100 + 50 - 25 + 30 = 155 remain."""
    limiter = RateLimiter(qps=50, burst=100)
    for _ in range(100):
        limiter.take()
    clock.now += 0.5  # 25 back at the old rate
    for _ in range(25):
        limiter.take()
    clock.now += 0.3
    limiter.configure(100, 200)
    free = 0
    while not clock.slept:
        limiter.take()
        free += 1
    assert free - 1 == 155  # the take that slept was the 156th


def test_too_many_takes_to_remember_are_counted_against_the_new_burst(clock: Clock) -> None:
    limiter = RateLimiter(qps=10_000, burst=5_000)
    for _ in range(RateLimiter.REMEMBER + 10):
        limiter.take()
    assert limiter.taken is None
    limiter.configure(100, 200)
    assert limiter.tokens == 0.0, "3,990 of 5,000 left, and the new burst is 4,800 smaller: none left"
