"""A cycle's writes after its binds wait until the watch shows those binds (``Daemon._until_seen``), at most a
limit: the pods seen on their nodes, or gone, end the wait; a watch that never shows them does not hold it longer."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from kaid.cycle import Bind
from kaid.kube.daemon import Daemon
from tests.objects import pod

Obj = dict[str, Any]


def _daemon(items: dict[str, Obj]) -> Any:
    return SimpleNamespace(cache=SimpleNamespace(pods=SimpleNamespace(lock=threading.Lock(), items=items)),
                           stopping=threading.Event())


def _bind(name: str) -> Bind:
    return Bind(f"default/{name}", "n1", f"default/pg-pod-{name}", "q", (0,), None, 1000)


def test_the_wait_ends_once_the_watch_shows_every_bind() -> None:
    items = {"default/a": pod("a", gpus=1), "default/b": pod("b", gpus=1), "default/c": pod("c", gpus=1)}
    daemon = _daemon(items)

    def watch() -> None:
        time.sleep(0.1)
        items["default/a"] = pod("a", gpus=1, node_name="n1")
        time.sleep(0.1)
        del items["default/b"]  # deleted meanwhile: nothing to wait for
        items["default/c"] = pod("c", gpus=1, node_name="n1")

    thread = threading.Thread(target=watch)
    started = time.monotonic()
    thread.start()
    Daemon._until_seen(daemon, [_bind("a"), _bind("b"), _bind("c")], 10.0)
    took = time.monotonic() - started
    thread.join()
    assert 0.15 < took < 5.0


def test_a_watch_that_never_shows_the_binds_holds_the_writes_no_longer_than_the_limit() -> None:
    daemon = _daemon({"default/a": pod("a", gpus=1)})
    started = time.monotonic()
    Daemon._until_seen(daemon, [_bind("a")], 0.2)
    assert 0.2 <= time.monotonic() - started < 5.0
    daemon.stopping.set()  # a stop ends it at once
    started = time.monotonic()
    Daemon._until_seen(daemon, [_bind("a")], 10.0)
    assert time.monotonic() - started < 1.0
    started = time.monotonic()
    Daemon._until_seen(_daemon({}), [], 10.0)  # no binds: no wait
    assert time.monotonic() - started < 1.0
