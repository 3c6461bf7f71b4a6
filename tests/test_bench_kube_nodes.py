"""bench_kube's watch on the nodes (``NodeWatcher``): which nodes a run saw NotReady, the way the controller manager
leaves a node whose fake kubelet fell behind (Ready Unknown, then the unreachable taint), or kwok before it is Ready.
The watch itself runs against the real control plane in tests/e2e/test_bench_kube_smoke.py."""

from __future__ import annotations

import pathlib
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # benchmarks/ is not an installed package

from benchmarks.kube_cluster import CONTROLLER_MANAGER_ARGS, NodeWatcher  # noqa: E402


def _node(name: str, ready: str | None, taints: tuple[str, ...] = ()) -> dict[str, Any]:
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready, "reason": "NodeStatusUnknown"})
    return {"metadata": {"name": name},
            "spec": {"taints": [{"key": k, "effect": "NoSchedule"} for k in taints]},
            "status": {"conditions": conditions}}


def test_nodes_seen_not_ready_at_any_moment_are_counted() -> None:
    watcher = NodeWatcher(client=None)  # type: ignore[arg-type]  # _see reads no API
    watcher._see(_node("fine", "True"))
    watcher._see(_node("fine-tainted-otherwise", "True", ("nvidia.com/gpu",)))
    watcher._see(_node("lost", "Unknown"))
    watcher._see(_node("lost", "True"))  # back again: it still counts, the run saw it gone
    watcher._see(_node("tainted", "True", ("node.kubernetes.io/unreachable",)))
    watcher._see(_node("starting", None))
    watcher._see(_node("not-ready", "False", ("node.kubernetes.io/not-ready",)))
    assert watcher.not_ready == {"lost", "tainted", "starting", "not-ready"}
    assert watcher.close() == 4  # never started: nothing to join


def test_the_benchmarks_controller_manager_waits_minutes_before_it_calls_a_node_lost() -> None:
    (grace,) = [a for a in CONTROLLER_MANAGER_ARGS if a.startswith("--node-monitor-grace-period=")]
    assert grace.endswith("m") and int(grace.split("=")[1][:-1]) >= 5
