"""The actuator's SendPool: the outcome of each call sent (value or exception), in order, waited for by one or several
threads whichever finishes first, and every call done at close."""

from __future__ import annotations

import threading
import time

import pytest

from kaid.kube.actuator import SendPool


def _in_thread(fn: object, timeout: float = 5.0) -> list[object]:
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)  # type: ignore[operator]
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "a wait never ended"
    return out


def test_results_in_order_errors_raised_and_done() -> None:
    pool = SendPool(4, "t")
    try:
        def slow(x: int) -> int:
            time.sleep(0.002 * (x % 5))
            if x == 7:
                raise ValueError("seven")
            return x * x

        tickets = [pool.submit(slow, i) for i in range(40)]
        assert _in_thread(lambda: [t.result() if i != 7 else None for i, t in enumerate(tickets)]) == \
            [[i * i if i != 7 else None for i in range(40)]]
        assert all(t.done() for t in tickets)
        with pytest.raises(ValueError, match="seven"):
            tickets[7].result()
        assert list(pool.map(lambda x: x + 1, range(10))) == list(range(1, 11))
    finally:
        pool.close()


def test_a_waiter_wakes_when_its_call_ends_while_it_waits() -> None:
    """The waiter is asleep before the call ends (a worker that skipped the notification would leave it there)."""
    pool = SendPool(2, "t")
    try:
        gate = threading.Event()
        ticket = pool.submit(lambda _: gate.wait(5.0) and "out", None)
        other = pool.submit(lambda _: "other", None)
        assert other.result() == "other" and not ticket.done()
        threading.Timer(0.05, gate.set).start()
        assert _in_thread(ticket.result) == ["out"]
        # several threads waiting for several tickets, each woken by its own
        gates = [threading.Event() for _ in range(4)]
        tickets = [pool.submit(lambda i: gates[i].wait(5.0) and i, i) for i in range(2)]
        waits = [threading.Thread(target=t.result) for t in tickets]
        for w in waits:
            w.start()
        for g in gates:
            g.set()
        for w in waits:
            w.join(5.0)
            assert not w.is_alive()
    finally:
        pool.close()


def test_close_finishes_what_was_sent_and_refuses_more() -> None:
    pool = SendPool(3, "t")
    seen: list[int] = []
    lock = threading.Lock()

    def record(x: int) -> None:
        time.sleep(0.001)
        with lock:
            seen.append(x)

    tickets = [pool.submit(record, i) for i in range(30)]
    pool.close()
    assert sorted(seen) == list(range(30)) and all(t.done() for t in tickets)
    with pytest.raises(RuntimeError):
        pool.submit(record, 0)


def _pool_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"{name}_")]


def test_threads_start_with_the_calls_up_to_the_count() -> None:
    """No thread before the first call (a standby replica sends nothing and holds none); at most one more per call,
    never more than ``workers``; close ends them all."""
    pool = SendPool(3, "lazy-pool")
    gate = threading.Event()
    try:
        assert _pool_threads("lazy-pool") == []
        tickets = [pool.submit(lambda _: gate.wait(5.0), None)]
        assert len(_pool_threads("lazy-pool")) == 1
        tickets.append(pool.submit(lambda _: gate.wait(5.0), None))
        assert len(_pool_threads("lazy-pool")) == 2
        tickets += [pool.submit(lambda _: gate.wait(5.0), None) for _ in range(5)]
        assert len(_pool_threads("lazy-pool")) == 3
        gate.set()
        assert all(t.result() for t in tickets)
    finally:
        gate.set()
        pool.close()
    assert _pool_threads("lazy-pool") == []
