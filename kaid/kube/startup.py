"""kaid's start, from the process's first instruction to its first binds: every trick that makes it fast is
here, with what it saves. A scheduler's start is on the path of every pod waiting for it (after an upgrade, a
failover, a crash), so kaid binds its first pods about as soon as kube-scheduler does on the same backlog.

The sequence: ``kaid run`` parses its options with argparse, not typer (``parse_run_args``), sends its list
requests (``run_daemon``) and loads the config and the engine while the API server encodes them; the pod list
is held once enough pending pods are in (``StartingCache``), so that an early cycle can bind those on a
complete picture of the nodes (``early_view``) while the rest of the list waits; the cyclic garbage collector
sleeps through the first list (``pause_gc``, ``settle_gc``); the solver loads once the first full cycle is over
(``warm_up_solver``).

    trick (switch)  where                         what it saves                                  measured at
    argv            parse_run_args (kaid.cli)     typer and pydantic's adapters: lists go out    e83bf0f
                                                  at 0.11 s instead of 0.2-0.3 s
    lists-first     run_daemon                    the API server encodes while kaid loads        926cbf0
    gc              pause_gc, settle_gc           parsing 8,000 pods 0.52 -> 0.18 s, first       e50e526
                                                  bind 1.76 -> 1.38 s (8,000 pods)
    hold            StartingCache._hold           the config and engine load without the list    2e9fce8
                                                  thread taking turns
    early-cycle     StartingCache.early_view,     first bind 0.61 -> 0.425 s (12 pairs)          32223ff
                    Daemon.early_cycle
    (none)          warm_up_solver                the solver's 0.4 s of CPU kept out of the      e50e526
                                                  first list and snapshot (now 1.1-1.4 s, loaded
                                                  once the first full cycle is over: neither it
                                                  nor its binds wait for the import)

"Measured" is ``python -m benchmarks.bench_kube --starts N --startup-off TRICK,...``: start to first bind on
4,000 pending one-GPU pods, 500 nodes, starts with and without the trick interleaved; the JSON of each run is
in ``benchmarks/results/``. ``KAID_STARTUP_OFF=trick,...`` in kaid's environment turns tricks off for such a
measurement; nothing else should set it. Dropped as inside run-to-run noise: reading the first list's pods
as they arrive (level, 0.93 against 0.95 s over 16 pairs, 59535df) and replaying the rate limiter's tokens
taken before the config was read (binding rate 104.9 against 105.2 pods/s, 0318618).
"""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kaid.api.meta import store_key
from kaid.kube.cache import API_RESOURCES, ApiResource, WatchCache
from kaid.kube.client import KubeClient
from kaid.model.vocabulary import FINISHED_PHASES

Obj = dict[str, Any]
log = logging.getLogger("kaid.startup")
TRICKS = ("argv", "lists-first", "gc", "hold", "early-cycle")


def enabled(trick: str) -> bool:
    """Whether a start-up trick is on: all are, unless ``KAID_STARTUP_OFF`` names it (to measure it)."""
    return trick not in os.environ.get("KAID_STARTUP_OFF", "").split(",")


def process_age() -> float:
    """Seconds since this process began (Linux: from /proc; elsewhere since this module was imported): kaid's
    debug log says where its first second goes."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED


_IMPORTED = time.monotonic()


# ------------------------------------------------------------------------------------- argv: kaid run's options
# ``kaid run``'s options, as ``kaid.commands.run`` declares them for typer (tests/test_cli.py keeps the two equal):
# option -> (parameter, type of its value; None: a flag, whose value is in RUN_FLAGS)
RUN_OPTIONS: dict[str, tuple[str, type | None]] = {
    "--kubeconfig": ("kubeconfig", Path), "--context": ("context", str), "--config": ("config", Path),
    "--identity": ("identity", str), "--metrics-port": ("metrics_port", int),
    "--metrics-address": ("metrics_address", str), "--log-level": ("log_level", str),
    "--leader-elect": ("leader_elect", None), "--no-leader-elect": ("leader_elect", None),
}
RUN_FLAGS: dict[str, bool] = {"--leader-elect": True, "--no-leader-elect": False}


def parse_run_args(args: list[str]) -> dict[str, Any] | None:
    """The parameters of ``kaid run`` given ``args`` (what follows ``run``), as typer would pass them; None for
    anything that is not plainly well-formed (``--help`` included): typer then parses it and explains."""
    parser = argparse.ArgumentParser(prog="kaid run", add_help=False, allow_abbrev=False, exit_on_error=False,
                                     argument_default=argparse.SUPPRESS)
    for option, (param, kind) in RUN_OPTIONS.items():
        if kind is None:
            parser.add_argument(option, dest=param, action="store_const", const=RUN_FLAGS[option])
        else:
            parser.add_argument(option, dest=param, type=kind)
    try:
        params, rest = parser.parse_known_args(args)
    except argparse.ArgumentError:
        return None
    return None if rest else vars(params)


# ------------------------------------------------------------------------------------- lists first
def run_daemon(kubeconfig: Path | None = None, context: str | None = None, config: Path | None = None,
               identity: str | None = None, metrics_port: int | None = None, metrics_address: str | None = None,
               leader_elect: bool | None = None, log_level: str = "info") -> int:
    """``kaid run``: schedule until SIGTERM; the exit code (1: a bad kubeconfig or config, said on stderr).

    The lists go out first: the API server encodes them (a large cluster's pods are megabytes of JSON) while
    the config and the engine load. The client's limits are the config's from the start (``RateLimiter``)."""
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.WARNING)  # one debug line per request drowns kaid's own
    try:
        client = KubeClient.from_config(str(kubeconfig) if kubeconfig else None, context)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    pause_gc()
    cache = StartingCache(client, early=enabled("early-cycle"))  # the config may say no: the daemon lets it go
    if enabled("lists-first"):
        log.debug("listing the cluster, %.0f ms after the process began", process_age() * 1000)
        cache.start()
    from kaid.api.config import SchedulerConfig, load_config

    try:
        cfg = load_config(config)
        overrides: dict[str, object] = {}
        if metrics_port is not None:
            overrides["metricsPort"] = metrics_port
        if metrics_address is not None:
            overrides["metricsAddress"] = metrics_address
        if leader_elect is not None:
            overrides["leaderElection"] = {**cfg.leaderElection.model_dump(), "enabled": leader_elect}
        if overrides:
            cfg = SchedulerConfig.model_validate({**cfg.model_dump(), **overrides})
    except ValueError as err:
        cache.close()
        print(f"error: {err}", file=sys.stderr)
        return 1
    client.limiter.configure(cfg.clientQPS, cfg.clientBurst)
    if not cfg.earlyFirstCycle:
        cache.release_pods()
    from kaid.kube.daemon import Daemon

    daemon = Daemon(cfg, client, identity, cache)
    daemon.handle_signals()
    return daemon.run()


# ------------------------------------------------------------------------------------- gc
GC_THRESHOLDS = (50_000, 20, 20)


def pause_gc() -> None:
    """No cyclic collection while the first lists are parsed. The cache holds every object of the cluster as
    parsed JSON: millions of small, long-lived, acyclic objects, which CPython's default thresholds rescan again
    and again while they arrive."""
    if enabled("gc"):
        gc.disable()


def settle_gc() -> None:
    """Once listed: what the cache holds is frozen out of the collector's sight (reference counting still frees
    it), young collections run every 50,000 allocations instead of 700, and each cold snapshot is frozen once built
    (``kaid.model.build.freeze_builds``; the daemon's cold path releases each one, ``release_when_read``)."""
    if enabled("gc"):
        from kaid.model.build import freeze_builds  # (the engine loads after the lists went out: not at import)

        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        freeze_builds(True)
        gc.enable()


@functools.cache
def warm_up_solver() -> threading.Thread:
    """Load the solver in the background, once (``ortools.sat`` brings numpy and pandas: 1.1-1.4 s of CPU and about
    90 MB). ``Daemon.run`` starts it once its first full cycle as leader is over, that cycle's binds out (a starting
    scheduler's backlog: the import would hold it up, or share the interpreter with its binds), and a standby while
    it stands by, so that its first cycle as leader does not pay it. A cycle that needs the solver before it is
    loaded imports it then, as kaictl and the simulator do when a search first needs it."""
    thread = threading.Thread(target=lambda: __import__("ortools.sat.python.cp_model"), name="warm-up", daemon=True)
    thread.start()
    return thread


# ------------------------------------------------------------------------------------- hold, early view
HOLD_PODS_AFTER = 512  # pods without a node in the first pod list before it is held (the early cycle takes fewer)
HOLD_LIMIT = 1.0  # seconds the pod list is held at most, should nobody release it
ON_NODES = "spec.nodeName!="  # field selector of the pods that hold resources on a node


@dataclass
class EarlyView:
    """The cluster as a scheduler may see it before its pod list has ended (see ``StartingCache.early_view``)."""

    objects: list[Obj]  # every listed object of the other kinds, the pods on nodes, the first pending pods
    on_nodes: int  # pods that hold resources on a node (all of them, from their own list)
    pending: int  # pending pods of this scheduler among the objects
    arrived: int  # pods of the whole list in so far


class StartingCache(WatchCache):
    """A starting scheduler's cache. With ``early``, the pods on nodes are listed apart too, and the pod list is
    held (its bytes left unread, at most ``HOLD_LIMIT`` seconds) once ``HOLD_PODS_AFTER`` pods without a node
    are in, until ``release_pods``: an early cycle binds those (``early_view``) meanwhile."""

    def __init__(self, client: KubeClient, resources: tuple[ApiResource, ...] = API_RESOURCES,
                 early: bool = False) -> None:
        super().__init__(client, resources)
        self.early = early and self.pods is not None
        self.on_nodes: list[Obj] | None = None  # every pod on a node, listed apart at the start
        self.early_thread = threading.Thread(target=self._list_on_nodes, name="list-pods-on-nodes", daemon=True)
        self.held = threading.Event()  # the pod list is held (see release_pods)
        self.released = threading.Event()
        self._without_node = 0
        if self.pods is not None and self.early and enabled("hold"):
            self.pods.arrival = self._hold
        else:
            self.released.set()
        self._scanning: list[Obj] = []  # the pods arrived that early_view looks through, and how far it got
        self._scanned = 0
        self._pending: list[Obj] = []

    def start(self) -> None:
        first = not self.started
        super().start()
        if first and self.early:
            self.early_thread.start()

    def close(self) -> None:
        super().close()
        self.release_pods()

    def release_pods(self) -> None:
        """Let the pod list go on (the early cycle has decided, or will not run)."""
        self.released.set()

    def _list_on_nodes(self) -> None:
        pods: list[Obj] = []
        assert self.pods is not None
        try:
            self.client.list(self.pods.res.path, pods.append, fieldSelector=ON_NODES)
        except Exception as err:  # only the early view is lost: the informers go on as ever
            log.info("listing the pods on nodes failed (%s): the first cycle waits for the whole pod list", err)
            self.release_pods()
            return
        slim = self.pods.slim
        for pod in pods:
            pod.setdefault("kind", "Pod")
            if slim is not None:
                slim(pod)
        self.on_nodes = pods
        log.debug("listed the %d pods on nodes", len(pods))

    def _hold(self, pod: Obj) -> None:
        """In the pod list's thread, for each pod of the first list: hold it once enough pods wait for a node."""
        if self.released.is_set() or _on_node(pod):
            return
        self._without_node += 1
        if self._without_node >= HOLD_PODS_AFTER:
            self.held.set()
            if not self.released.wait(HOLD_LIMIT):
                log.info("the pod list was held %.1f s and nobody released it; going on", HOLD_LIMIT)
            self.released.set()

    def early_view(self, scheduler: str, wanted: int) -> EarlyView | None:
        """What a first cycle may schedule while the pod list still arrives, once ``wanted`` pending pods of
        ``scheduler`` are in or the list is held; None until then, and once the pods are listed (then the cache
        is the view).

        The nodes' picture comes from a second list of the pods on nodes (``spec.nodeName!=``), or from the big
        list where it shows a pod bound since; every other kind must be listed. Two lists at two resourceVersions
        are as stale as a watch that lags by the time between them, which the kubelet's admission settles."""
        pods = self.pods
        if self.on_nodes is None or pods is None or pods.synced.is_set() or self.stop.is_set():
            return None
        if not all(inf.synced.is_set() for inf in self.informers if inf is not pods):
            return None
        arrived = pods.arrived  # the list's thread appends to it; this reads a prefix
        n = len(arrived)
        if arrived is not self._scanning:  # the first list (re)started
            self._scanning, self._scanned, self._pending = arrived, 0, []
        self._pending.extend(p for p in arrived[self._scanned:n] if _pending_for(p, scheduler))
        self._scanned = n
        if len(self._pending) < wanted and not self.held.is_set():
            return None
        placed = {store_key(p): p for p in arrived[:n] if _on_node(p)}
        placed.update((store_key(p), p) for p in self.on_nodes)  # the list of pods on nodes is the reference
        pending = [p for p in self._pending if store_key(p) not in placed][:wanted]
        objects: list[Obj] = []
        for inf in self.informers:
            if inf is not pods:
                with inf.lock:
                    objects.extend(inf.items.values())
        objects.extend(placed.values())
        objects.extend(pending)
        return EarlyView(objects, len(placed), len(pending), n)


def wait_for_early_view(cache: StartingCache, scheduler: str, wanted: int, may_decide: Callable[[], bool],
                        stopping: threading.Event, timeout: float, poll: float = 0.005) -> EarlyView | None:
    """Poll for the early view until it comes, the pod list ends, a stop, or ``timeout`` (then None).
    ``may_decide``: whether this replica knows yet if it leads (a view is taken only then)."""
    deadline = time.monotonic() + timeout
    pods = cache.pods
    log.debug("waiting for an early view, %.0f ms after the process began", process_age() * 1000)
    while pods is not None and cache.early and not stopping.is_set() and time.monotonic() < deadline:
        view = cache.early_view(scheduler, wanted) if may_decide() else None
        if view is not None:
            log.debug("early view: %d pods in, %d on nodes, %d pending taken (%.2f s after the process began)",
                      view.arrived, view.on_nodes, view.pending, process_age())
            return view
        if pods.synced.wait(poll):
            return None
    return None


def _on_node(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _pending_for(pod: Obj, scheduler: str) -> bool:
    spec = pod.get("spec") or {}
    return not spec.get("nodeName") and spec.get("schedulerName") == scheduler and \
        not (pod.get("metadata") or {}).get("deletionTimestamp") and \
        (pod.get("status") or {}).get("phase") not in FINISHED_PHASES
