"""The daemon loop: watch the cluster, and while this replica leads, build a Snapshot, run a cycle,
apply its Decisions and write status, metrics and events. SIGTERM finishes the cycle in flight.

Binds and evictions are "assumed" until the watch shows them (as kube-scheduler does), so the next
cycle never hands the same GPUs out twice while the watch catches up. Shared-GPU binds (which wait for a
reservation, in the background) are assumed from the moment they are sent until their outcome comes; a job
whose shared-GPU bind failed waits (``reservationRetrySeconds``, doubling) with the reason on its PodGroup."""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from kaid.actions.memory import SearchMemory
from kaid.api import constants as c
from kaid.api import meta
from kaid.api.config import Action, SchedulerConfig
from kaid.cycle import Bind, Decisions, run_cycle
from kaid.fairshare import UsageHistory, UsageParams
from kaid.kube.actuator import RETRY_FOR, Actuator, ApplyResult, Sending, Ticket, bind_workers
from kaid.kube.client import ApiError, KubeClient
from kaid.kube.leader import LeaderElector
from kaid.kube.livesnap import LiveSnapshots
from kaid.kube.metrics import Metrics, serve
from kaid.kube.podgrouper import create_podgroups, podgroups_to_create
from kaid.kube.podmemo import PodMemo
from kaid.kube.reservations import NOT_SET_UP, SharedBinder, SharedOutcome
from kaid.kube.startup import (
    EarlyView,
    StartingCache,
    enabled,
    pause_gc,
    process_age,
    settle_gc,
    wait_for_early_view,
    warm_up_solver,
)
from kaid.kube.status import OutcomeEvent, StatusWriter, outcome_events
from kaid.model.build import build_snapshot
from kaid.model.journal import job_errors
from kaid.model.objects import Job, Reason, Snapshot
from kaid.model.pods import mark_bound, mark_pipelined
from kaid.model.vocabulary import PodPhase, PodStatus
from kaid.sharing.handoff import not_set_up

log = logging.getLogger("kaid")
Obj = dict[str, Any]
ASSUME_TTL = 30.0
UNWRITTEN_KEPT = 10_000  # binds, and outcome events, of cycles that found the status writer busy
MARK_RETRY_SECONDS = 300.0  # how long a last-eviction mark waits for its PodGroup to be made (a bare pod's)
SEEN_WAIT = 1.0  # seconds at most that a cycle's writes after its binds wait for the watch to show those binds


@dataclass
class Overlay:
    """What this replica did that the watch may not show yet."""

    bound: dict[str, tuple[Bind, float]] = field(default_factory=dict)
    evicted: dict[str, float] = field(default_factory=dict)
    pipelined: dict[str, tuple[Bind, float]] = field(default_factory=dict)

    def record(self, d: Decisions, applied: ApplyResult, now: float, reserving_for: float = 0.0) -> None:
        """``reserving_for``: how long a shared-GPU bind may take (its outcome ends the assumption sooner)."""
        for b in applied.bound:
            self.bound[b.pod] = (b, now + ASSUME_TTL)
            self.pipelined.pop(b.pod, None)
        for b in applied.reserving:
            self.bound[b.pod] = (b, now + reserving_for + ASSUME_TTL)
            self.pipelined.pop(b.pod, None)
        for e in applied.evicted:
            self.evicted[e.pod] = now + ASSUME_TTL
        evicted = {e.pod for e in applied.evicted}
        for b in d.pipelined:
            if b.pod not in evicted:
                self.pipelined[b.pod] = (b, now + ASSUME_TTL)

    def settle(self, outcome: SharedOutcome, now: float) -> None:
        """A shared-GPU job's outcome: bound pods are assumed for ASSUME_TTL from now, the others no more."""
        for b in outcome.bound:
            self.bound[b.pod] = (b, now + ASSUME_TTL)
        for b, _ in outcome.failed:
            self.bound.pop(b.pod, None)

    def apply(self, objects: list[Obj], now: float) -> list[Obj]:
        if not self.assumed_pods(now):
            return objects
        return [self.assumed(o) if o.get("kind") == "Pod" else o for o in objects]

    def assumed_pods(self, now: float) -> set[str]:
        """The pods assumed at ``now`` (the assumptions past their time are dropped)."""
        for table in (self.bound, self.pipelined):
            for k in [k for k, (_, exp) in table.items() if exp < now]:
                del table[k]
        for k in [k for k, exp in self.evicted.items() if exp < now]:
            del self.evicted[k]
        return {*self.bound, *self.evicted, *self.pipelined}

    def assumption(self, key: str) -> tuple[object, ...]:
        """What is assumed of one pod (equal while nothing new is)."""
        return self.bound.get(key), self.evicted.get(key), self.pipelined.get(key)

    def assumed(self, pod: Obj) -> Obj:
        """The pod as this replica's writes left it (a changed copy), until the watch shows them."""
        key = meta.object_key(pod)
        on_node = bool((pod.get("spec") or {}).get("nodeName"))
        if on_node:  # the watch caught up with a bind, or shows the pod bound since it was pipelined
            self.bound.pop(key, None)
            self.pipelined.pop(key, None)
        if key in self.bound:
            b = self.bound[key][0]
            pod = _writable(pod)
            mark_bound(pod, b.node, b.devices, b.groups)
            pod.setdefault("status", {})["phase"] = PodPhase.RUNNING.value
        elif key in self.evicted:
            if not meta.meta(pod).get("deletionTimestamp"):
                pod = _writable(pod)
                pod["metadata"]["deletionTimestamp"] = meta.format_time(0)
        elif key in self.pipelined:
            if meta.annotation(pod, c.PIPELINED_NODE_ANNOTATION):
                del self.pipelined[key]  # the watch caught up
                return pod
            b = self.pipelined[key][0]
            pod = _writable(pod)
            mark_pipelined(pod, b.node, b.action, b.devices, b.groups)
        return pod


def _writable(pod: Obj) -> Obj:
    """A copy of ``pod`` of which the parts an assumption writes are its own (the object, its metadata, annotations
    and labels, its spec and status; ``mark_bound``, ``mark_pipelined``), the rest shared with the watch cache's,
    read only: a deep copy cost 4 times as much (3,548 pods assumed after bench_kube's first full cycle)."""
    out = dict(pod)
    m = out["metadata"] = dict(pod.get("metadata") or {})
    for part in ("annotations", "labels"):
        if isinstance(m.get(part), dict):
            m[part] = dict(m[part])
    for part in ("spec", "status"):
        if isinstance(pod.get(part), dict):
            out[part] = dict(pod[part])
    return out


def release_when_read(snap: Snapshot, reading: Future[None] | None) -> None:
    """Let go of a cold snapshot (``Snapshot.release``) the cycle is done with, once the status writer is too
    (``reading``: its task on this snapshot, if it has one). Under kaid's collector settings a cold build is frozen
    out of the collector's sight (``kaid.model.build.freeze_builds``): its pods and jobs, which refer to each other,
    are freed only this way."""
    if reading is None:
        snap.release()
    else:
        reading.add_done_callback(lambda _: snap.release())


class Daemon:
    def __init__(self, cfg: SchedulerConfig, client: KubeClient, identity: str | None = None,
                 cache: StartingCache | None = None) -> None:
        """``cache``: one over ``client`` that may already be listing (``kaid run`` starts it first)."""
        self.cfg = cfg
        self.client = client
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        self.cache = cache or StartingCache(client, early=cfg.earlyFirstCycle and enabled("early-cycle"))
        self.pod_memo = PodMemo()  # pods unchanged since the last cycle are copied, not read again
        # the engine's model kept up to date from the watch events (KAID_SNAPSHOT=cold: a cold build each cycle)
        self.live = LiveSnapshots(self.cache, cfg) if os.environ.get("KAID_SNAPSHOT") != "cold" else None
        self.actuator = Actuator(client, workers=bind_workers(cfg.clientBurst), may_act=self.leading,
                                 node_problem=self._node_problem)
        self.shared: SharedBinder | None = None
        if cfg.gpuSharing.enabled:  # shared-GPU pods get their device, through reservation pods
            self.shared = SharedBinder(client, cfg.gpuSharing, self._cached_pod, self.actuator._bind_one)
            self.actuator.shared = self.shared
            self.cache.on_change("Pod", self.shared.notify)
        self.backoff: dict[str, tuple[float, int, Reason]] = {}  # job -> (retry after, failures, why)
        # status, events and PodGroups go through their own client: they never wait behind binds
        self.writer = client.with_limits(cfg.clientQPS, cfg.clientBurst)
        self.status = StatusWriter(self.writer, cfg.schedulerName, may_act=self.leading,
                                   pool_label=cfg.nodePoolLabelKey)
        self.background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="writer")
        # the status writer's own thread: it reads a cycle's snapshot as soon as the cycle is done (the next snapshot
        # waits for that), not behind the PodGroups being created on ``background``
        self.status_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="status-writer")
        self.status_busy: Future[None] | None = None
        # what cycles that found the writer busy leave to the next write (``_leave_unwritten``)
        self.unwritten_binds: list[Bind] = []
        # last-eviction marks whose PodGroup did not exist yet: job key -> (job, mark, given up after); the
        # background writer's alone
        self.unmarked: dict[str, tuple[Job, str, float]] = {}
        self.unwritten_events: list[OutcomeEvent] = []
        self.creating: dict[str, float] = {}  # PodGroups being created -> when asked
        self.metrics: Metrics | None = None  # made by _metrics() once the first binds are out
        self.overlay = Overlay()
        self.stopping = threading.Event()
        self.lead_changed = threading.Event()  # this replica began or ceased to lead (or is stopping)
        self.elector = LeaderElector(client, cfg.leaderElection, self.identity, self._lead_changed) \
            if cfg.leaderElection.enabled else None
        # usage history: continued from the Queues' status.usage whenever this replica starts to lead
        self.usage = UsageHistory(UsageParams.of(cfg.usage)) if cfg.usage.enabled else None
        self.usage_restored = False
        self.usage_written = -math.inf  # when the history last went to the Queues' status (time.time())
        self.last_cycle = 0.0
        self.heartbeat = time.monotonic()
        self.cycles = 0
        self.search_memory = SearchMemory()  # the last cycle's vain victim searches (kaid.actions.memory)
        self.server: Any = None
        # an early cycle's figures, observed with the next cycle's (the metrics are made once its binds are out)
        self.early_observed: tuple[Snapshot, Decisions, ApplyResult, dict[str, float], float] | None = None
        # the cold path's snapshot until the cycle lets go of it (``release_when_read``); set at the next cycle's
        # start only when a cycle failed before it did
        self.cold_snap: Snapshot | None = None
        self.early_bound: list[str] = []  # the pods the early cycle bound
        self.early_sending: _EarlySending | None = None  # its binds, until answered (``_settle_early``)

    def _cached_pod(self, namespace: str, name: str) -> Obj | None:
        return self.cache.get("Pod", namespace, name)

    def _node_problem(self, name: str) -> str | None:
        """Why a bind decided for node ``name`` must not go out now (the watch shows it deleted, or NotReady)."""
        node = self.cache.get("Node", None, name)
        if node is None:
            return f"node {name} no longer exists"
        conditions = [cond for cond in (node.get("status") or {}).get("conditions") or [] if isinstance(cond, dict)]
        if conditions and not any(cond.get("type") == "Ready" and cond.get("status") == "True" for cond in conditions):
            return f"node {name} is not Ready"
        return None

    def _lead_changed(self) -> None:
        self.lead_changed.set()
        self.cache.changed.set()

    def leading(self) -> bool:
        return self.elector is None or self.elector.holds()

    def ready(self) -> bool:
        return self.cache.synced

    def healthy(self) -> bool:
        return time.monotonic() - self.heartbeat < max(60.0, self.cfg.cyclePeriodSeconds * 10)

    def handle_signals(self) -> None:
        def stop(signum: int, _frame: Any) -> None:
            log.info("signal %d: finishing the cycle in flight, then exiting", signum)
            self.stopping.set()
            self._lead_changed()  # wakes a standby too
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

    def run(self, sync_timeout: float = 120.0) -> int:
        """Start (list, an early cycle while the pod list arrives), then one cycle per period while this replica
        leads, until a stop; the exit code (1: the cluster could not be listed)."""
        if not self._start(sync_timeout):
            self.shutdown()
            return 1
        log.info("kaid %s started as %s, scheduling pods of %s (%.2f s after the process began, %.2f s of CPU)",
                 "leader election on" if self.elector else "alone", self.identity, self.cfg.schedulerName,
                 process_age(), time.process_time())
        solver_loading = False
        while not self.stopping.is_set():
            self.heartbeat = time.monotonic()
            self.cache.changed.clear()  # changes from here on wake the next cycle
            if self.leading():
                try:
                    self.cycle()
                except Exception:
                    log.exception("cycle failed; retrying next period")
            else:
                self._settle_early()  # (not leading: those not sent yet are dropped at once)
                self.usage_restored = False  # another leader keeps it meanwhile: read it back on leading again
                if self.live is not None:  # the watch events of the period: the queue stays short, the model warm
                    try:
                        self.live.catch_up()
                    except Exception:
                        log.exception("applying the watch events to the snapshot failed; retrying next period")
            if not solver_loading:
                # after the first full cycle, its binds out (a standby: at once), so that neither waits for the
                # solver's import nor shares the interpreter with it; a cycle that needs it first imports it then
                warm_up_solver()
                solver_loading = True
            self._metrics().leader.set(1 if self.leading() else 0)
            if not self.leading():  # stand by for a period, or until this replica leads
                self.lead_changed.wait(self.cfg.cyclePeriodSeconds)
                self.lead_changed.clear()
                continue
            self.cache.changed.wait(self.cfg.cyclePeriodSeconds)
            # do not run cycles back to back when the cluster is busy: at most one per period
            rest = self.cfg.cyclePeriodSeconds - (time.monotonic() - self.last_cycle)
            if rest > 0 and not self.stopping.is_set():
                self.stopping.wait(rest)
        self.shutdown()
        return 0

    def _start(self, sync_timeout: float) -> bool:
        """List the cluster (``kaid run`` started it already), with an early cycle meanwhile; False when the lists
        did not end within ``sync_timeout``. See kaid.kube.startup."""
        pause_gc()
        if not self.cache.started:
            log.debug("listing the cluster, %.0f ms after the process began", process_age() * 1000)
            self.cache.start()
        if self.cfg.metricsPort:
            self.server = serve(lambda: self.metrics, self.cfg.metricsPort, self.ready, self.healthy,
                                self.cfg.metricsAddress)
        if self.elector is not None:
            self.elector.start()  # before the lists end: an early first cycle needs the lease too
        try:
            if self.cfg.earlyFirstCycle:
                self._early_cycle_when_ready(sync_timeout)
            self.cache.release_pods()
            return self._wait_synced(sync_timeout)
        finally:
            settle_gc()

    def _early_cycle_when_ready(self, timeout: float) -> None:
        """One early cycle, if the pod list is long enough to leave time for one (``StartingCache.early_view``):
        on at most twice the client's burst of pending pods, so that its binds go on while the rest is listed."""
        def lead_known() -> bool:
            return self.elector is None or self.elector.tried.is_set()

        view = wait_for_early_view(self.cache, self.cfg.schedulerName, 2 * self.cfg.clientBurst, lead_known,
                                   self.stopping, timeout)
        if view is not None and view.pending and self.leading():
            try:
                self.early_cycle(view)
            except Exception:  # the full cycles to come do it all again, on the whole cache
                log.exception("the early cycle failed; the first full cycle schedules its pods")

    def _wait_synced(self, timeout: float) -> bool:
        """Until every informer has listed (True), or a stop (True: the loop sees it), or ``timeout`` (False)."""
        deadline = time.monotonic() + timeout
        while not self.cache.synced and not self.stopping.is_set():
            if time.monotonic() > deadline:
                missing = [inf.res.kind for inf in self.cache.informers if not inf.synced.is_set()]
                log.error("could not list %s from the API server: are kai's CRDs installed "
                          "(kubectl apply -k manifests/) and may this identity list them?", ", ".join(missing))
                return False
            self.cache.wait_synced(1.0)
        return True

    def shutdown(self) -> None:
        if self.elector is not None:
            self.elector.release()
        self.cache.close()
        self.actuator.close()
        self.background.shutdown(wait=True)
        self.status_thread.shutdown(wait=True)
        self.status.close()
        if self.server is not None:
            self.server.shutdown()

    def early_cycle(self, view: EarlyView) -> Decisions:
        """A first cycle while the pod list still arrives (kaid.kube.startup): allocate only, on ``view``, binds only.
        Fair shares, reasons and gangs seen on part of the pods would be wrong, so status, PodGroups and the
        other actions wait for the next cycle, on the whole cache."""
        started = time.monotonic()
        c0 = time.thread_time()
        self.last_cycle = started
        objs = view.objects
        if self.cfg.createPodGroups:
            objs = objs + podgroups_to_create(objs, self.cfg)  # from memory; the next cycle writes them
        snap = build_snapshot(objs, self.cfg, time.time(), None, wait_for_owners=True)
        self._hold(snap, time.time())
        t1 = time.monotonic()
        stream = _BindStream(self, "early cycle", started)
        decisions = run_cycle(snap, self.cfg.model_copy(update={"actions": (Action.ALLOCATE,)}), on_bind=stream)
        self.cache.release_pods()  # the rest of the pod list comes in while these binds go out
        t2 = time.monotonic()
        log.debug("early cycle: snapshot %.0f ms, decided in %.0f ms (%.0f ms CPU in all)", (t1 - started) * 1000,
                  (t2 - t1) * 1000, (time.thread_time() - c0) * 1000)
        binding = Decisions(binds=decisions.binds if self.leading() else [b for b, _ in stream.sent])
        # every bind sent, none waited for: the first full cycle runs while they are answered (``_settle_early``),
        # assumed bound meanwhile (on bench_kube's backlog, that cycle waited for the last of 452 answers, and no
        # bind was in flight while it read the lists' jobs and decided, 0.15-0.2 s)
        sending = self.actuator.send_rest(binding.binds, stream.sent)
        now = time.time()
        self.overlay.record(binding, ApplyResult(bound=[b for b, _ in sending.pairs]), now + RETRY_FOR)
        self.overlay.record(Decisions(), ApplyResult(reserving=sending.reserving), now,
                            self.cfg.gpuSharing.reservationTimeoutSeconds)
        self.cycles += 1
        self.early_sending = _EarlySending(sending, binding, snap, decisions, self.cycles, started,
                                           {"snapshot": t1 - started, "decide": t2 - t1}, t2, view)
        self._read_lists_while(sending.pairs)
        return decisions

    def _settle_early(self) -> None:
        """The early cycle's binds, answered (the first full cycle ran meanwhile): those bound assumed from now on as
        any cycle's, those that failed no longer (the next cycle places them again); its figures observed with the
        next cycle's."""
        early, self.early_sending = self.early_sending, None
        if early is None:
            return
        applied = self.actuator.answers(early.sending)
        # (the shared-GPU binds were assumed when sent, until the SharedBinder's outcome, which may have come)
        self.overlay.record(early.binding, ApplyResult(bound=applied.bound), time.time())
        for b, _ in applied.failed:
            self.overlay.bound.pop(b.pod, None)
        self.early_bound = [b.pod for b in applied.bound]
        t3 = time.monotonic()
        if applied.failed:
            log.warning("cycle %d: %s", early.cycle, applied.failures())
        self.early_observed = (early.snap, early.decisions, applied, {**early.phases, "apply": t3 - early.decided},
                               t3 - early.started)
        view = early.view
        log.info("cycle %d: %d bound, 0 evicted, 0 pipelined, %d pending (%.0f ms); early, while the pod list "
                 "arrived (%d pods in): on the %d pods on nodes and the first %d pending", early.cycle,
                 len(applied.bound), len(early.decisions.pending), (t3 - early.started) * 1000, view.arrived,
                 view.on_nodes, view.pending)

    def _read_lists_while(self, sent: list[tuple[Bind, Ticket[str | None]]]) -> None:
        """While the early cycle's binds go out: once every list is in, the live model reads them, so that the first
        full cycle's snapshot reads only what changed since (on bench_kube's backlog it read the 4,000 pods then,
        0.5-0.7 s of CPU with no bind out; the early cycle's binds take 1-3 s)."""
        if self.live is None:
            return
        futures = [f for _, f in sent]
        while not self.stopping.is_set() and not all(f.done() for f in futures):
            if self.cache.wait_synced(0.05):
                t0, c0 = time.monotonic(), time.thread_time()
                self.live.catch_up()
                log.debug("the lists read into the live model in %.0f ms (%.0f ms CPU), the early binds out",
                          (time.monotonic() - t0) * 1000, (time.thread_time() - c0) * 1000)
                return

    def cycle(self) -> Decisions:
        """One cycle on the whole cache: snapshot, decide (binds streamed as each job is placed), apply, then
        status, metrics and usage."""
        started = time.monotonic()
        self.last_cycle = started
        settled = self._settle_shared(time.time())
        now = time.time()
        t0 = time.monotonic()
        c0 = time.thread_time()
        if self.live is not None:  # from the watch events since the last cycle
            snap, made = self.live.snapshot(self.overlay, now)
            fresh = self._fresh(made, now)
            if self.shared is not None:
                self.shared.collect(self.live.objects(), now)
        else:
            # the PodGroups missing for the jobs as the snapshot sees them: with this replica's assumptions
            objs, fresh = self._with_podgroups(self.overlay.apply(self.cache.objects(), now), now)
            if self.shared is not None:
                self.shared.collect(objs, now)
            if self.cold_snap is not None:  # the last cycle failed before it let go of its snapshot
                release_when_read(self.cold_snap, self.status_busy)
            snap = self.cold_snap = build_snapshot(objs, self.cfg, now, wait_for_owners=True,
                                                   pod_reader=self.pod_memo.read)
            self.pod_memo.next_cycle()
        self._observe_usage(snap)
        self._hold(snap, now)
        t1 = time.monotonic()
        log.debug("cycle %d: snapshot of %d pods in %.0f ms (%.0f ms CPU)", self.cycles + 1, len(snap.pods),
                  (t1 - t0) * 1000, (time.thread_time() - c0) * 1000)
        c1 = time.thread_time()

        creating: list[Future[list[Obj]]] = []
        reading: Future[None] | None = None  # the status writer's, when it reads this cycle's snapshot

        def after_first_binds() -> None:
            """Work that would compete with the first binds for the interpreter starts once they are out."""
            self._metrics().leader.set(1)

        stream = _BindStream(self, f"cycle {self.cycles + 1}", started, after_first_binds)
        decisions = run_cycle(snap, self.cfg, on_bind=stream, memory=self.search_memory)
        self.search_memory = decisions.memory or SearchMemory()
        stream.first_out()
        t2 = time.monotonic()
        log.debug("cycle %d: decided in %.0f ms (%.0f ms CPU)", self.cycles + 1, (t2 - t1) * 1000,
                  (time.thread_time() - c1) * 1000)
        if not self.leading():  # the lease may have gone while deciding: act on nothing more
            log.warning("lost the lease during a cycle; its remaining decisions are dropped")
            decisions = Decisions(binds=[b for b, _ in stream.sent])
        # the early cycle's binds (sent before this cycle's: answered by now, as a rule) before this one's evictions
        self._settle_early()
        applied = self.actuator.apply(decisions, stream.sent)
        t_seen = time.monotonic()
        self._until_seen(applied.bound, SEEN_WAIT)
        t_seen = time.monotonic() - t_seen
        if fresh:  # the engine used them from memory; created in the background once the binds are seen, so that
            # the API server serves the binds first (bench_kube's backlog: 2,141 creates beside 4,000 binds)
            creating.append(self.background.submit(create_podgroups, self.writer, fresh, self.status.pool))
        for out in settled:  # shared-GPU jobs sent in earlier cycles, finished since
            applied.shared_bound.extend(out.bound)
            applied.failed.extend((b, r.message) for b, r in out.failed)
            if out.bound and out.failed:
                applied.partly_bound.append(out.job)
        # assumed from now on, not from the cycle's start: binds stream for as long as the rate limit makes the
        # cycle last (38 s for a 4,000-pod backlog at 100 QPS), longer than the assumption lives
        self.overlay.record(decisions, applied, time.time(), self.cfg.gpuSharing.reservationTimeoutSeconds)
        t3 = time.monotonic()
        self._mark_stale(snap, decisions)
        self._mark_evicted(snap, applied)
        # binds this cycle's own do not count but its status tells: the early cycle's, shared-GPU binds done since
        earlier = [*(self.early_observed[2].bound if self.early_observed is not None else ()), *applied.shared_bound]
        if self.status_busy is None or self.status_busy.done():
            # written while the next cycle runs; a cycle that finds it still busy leaves its status to the next, but
            # hands on what only it can tell: its binds (Scheduled) and its outcome events (Evicted, BindingError)
            earlier = [*self.unwritten_binds, *earlier]
            carried, self.unwritten_binds, self.unwritten_events = self.unwritten_events, [], []
            # a live snapshot is the model's own objects: the next snapshot waits until the writer has read it
            done_reading = self.live.hold() if self.live is not None else None
            try:
                self.status_busy = reading = self.status_thread.submit(self._write_status, snap, decisions, applied,
                                                                       earlier, carried, done_reading, creating)
            except BaseException:
                if done_reading is not None:
                    done_reading()
                raise
        else:
            self._leave_unwritten(snap, applied, earlier)
        t4 = time.monotonic()
        if self.early_observed is not None:
            self._observe(*self.early_observed, queues=False)
            release_when_read(self.early_observed[0], None)  # (a cold snapshot too, frozen with the lists' objects)
            self.early_observed = None
        self._observe(snap, decisions, applied, {"snapshot": t1 - t0, "decide": t2 - t1, "apply": t3 - t2 - t_seen,
                                                 "seen": t_seen, "status": t4 - t3}, t4 - started)
        if self.live is None:
            release_when_read(snap, reading)
            self.cold_snap = None
        self.cycles += 1
        if decisions.binds or decisions.evictions:
            log.info("cycle %d: %d bound, %d evicted, %d pipelined, %d pending (%.0f ms)", self.cycles,
                     len(applied.bound), len(applied.evicted), len(decisions.pipelined), len(decisions.pending),
                     (t4 - started) * 1000)
        if applied.failed:  # their pods stay pending: the next cycles place them again
            log.warning("cycle %d: %s", self.cycles, applied.failures())
        return decisions

    def _until_seen(self, bound: list[Bind], limit: float) -> None:
        """Until the watch shows the pods just bound on their nodes (or gone), ``limit`` seconds at most: what a cycle
        writes after its binds (the PodGroups it made from memory, status, events; then the solver's import and the
        next cycle's reads) would compete with the API server's delivery of those binds to their kubelets, which
        see them through the same watch (bench_kube's backlog: 2,141 PodGroup creates and as many status writes
        beside the last of 3,548 binds)."""
        pods = self.cache.pods
        if pods is None or not bound:
            return
        deadline = time.monotonic() + limit
        waiting = bound
        while not self.stopping.is_set():
            with pods.lock:
                items = pods.items
                waiting = [b for b in waiting if not _seen_bound(items.get(b.pod))]
            if not waiting or time.monotonic() >= deadline:
                break
            self.stopping.wait(0.01)
        if waiting:
            log.debug("the watch has not shown %d of %d binds after %.1f s; writing on", len(waiting), len(bound),
                      limit)

    def _leave_unwritten(self, snap: Snapshot, applied: ApplyResult, earlier: list[Bind]) -> None:
        """A cycle that found the status writer busy: its binds and outcome events wait for the next write (at most
        ``UNWRITTEN_KEPT`` of each: a writer stuck that long has lost its API server, and the oldest go first)."""
        self.unwritten_binds.extend([*earlier, *applied.bound])
        self.unwritten_events.extend(outcome_events(snap, applied))
        for kept in (self.unwritten_binds, self.unwritten_events):
            if len(kept) > UNWRITTEN_KEPT:
                log.warning("status writer busy for many cycles: %d events of earlier cycles dropped",
                            len(kept) - UNWRITTEN_KEPT)
                del kept[:len(kept) - UNWRITTEN_KEPT]

    def _write_status(self, snap: Snapshot, d: Decisions, applied: ApplyResult, earlier: list[Bind],
                      carried: list[OutcomeEvent], done_reading: Callable[[], None] | None,
                      creating: list[Future[list[Obj]]]) -> None:
        """On the status writer's thread: read what to write from the cycle's snapshot, let go of the snapshot
        (``done_reading``, whatever happens), then write, once the PodGroups the cycle creates are made."""
        try:
            self.status.read(snap, d, applied, earlier, carried)
        finally:
            if done_reading is not None:
                done_reading()
        wait(creating)
        self.status.send()

    def _observe_usage(self, snap: Snapshot) -> None:
        """Usage history up to this cycle, into the snapshot's queues; on the first cycle as leader it continues
        from the Queues' status.usage (a malformed one is skipped with a log line). Every writeIntervalSeconds the
        history goes to the status writer, which puts it in each Queue's status."""
        if self.usage is None:
            return
        if not self.usage_restored:
            statuses = {meta.name(q): (q.get("status") or {}).get("usage") for q in self.cache.objects()
                        if q.get("kind") == "Queue" and isinstance(q.get("status"), dict)}
            restored = self.usage.restore(statuses)
            self.usage_restored = True
            if restored:
                log.info("usage history continued from the status of %d queues (computed at %s)", len(restored),
                         time.strftime("%H:%M:%S UTC", time.gmtime(self.usage.t or 0)))
        self.usage.observe(snap)
        if snap.now - self.usage_written >= self.cfg.usage.writeIntervalSeconds:
            self.status.usage = {name: st for name in snap.queues if (st := self.usage.status(name)) is not None}
            self.usage_written = snap.now

    def _with_podgroups(self, objs: list[Obj], now: float) -> tuple[list[Obj], list[Obj]]:
        """The objects with the PodGroups missing for pending pods (scheduled at once, from memory), and those of
        them to create now (not asked for in the last minute)."""
        if not self.cfg.createPodGroups:
            return objs, []
        missing = podgroups_to_create(objs, self.cfg)
        return objs + missing, self._fresh(missing, now)

    def _fresh(self, missing: list[Obj], now: float) -> list[Obj]:
        """Of the PodGroups missing, those to create now (not asked for in the last minute)."""
        if not self.cfg.createPodGroups:
            return []
        fresh = [pg for pg in missing if meta.object_key(pg) not in self.creating]
        for k in [k for k, t in self.creating.items() if now - t > 60]:
            del self.creating[k]
        for pg in fresh:
            self.creating[meta.object_key(pg)] = now
        return fresh

    def _settle_shared(self, now: float) -> list[SharedOutcome]:
        """The shared-GPU jobs finished since the last cycle: their binds assumed or forgotten; a job that failed
        waits before it is placed again (``reservationRetrySeconds``, doubling per failure, at most ten times)."""
        if self.shared is None:
            return []
        outcomes = self.shared.drain()
        base = self.cfg.gpuSharing.reservationRetrySeconds
        for out in outcomes:
            self.overlay.settle(out, now)
            if out.failed:
                reason = out.failed[0][1]
                failures = self.backoff.get(out.job, (0.0, 0, reason))[1]
                delay = min(base * 2 ** failures, base * 10)
                self.backoff[out.job] = (now + delay, failures + 1, reason)
                log.warning("shared-GPU binds of %s failed: %s; it is placed again in %.0f s", out.job, reason.message,
                            delay)
            elif out.bound:
                self.backoff.pop(out.job, None)
        return outcomes

    def _hold(self, snap: Snapshot, now: float) -> None:
        """Keep from this cycle the jobs that must wait: a shared-GPU bind of theirs failed a moment ago, or a
        shared-GPU pod of theirs cannot be given its device (admission did not set it up). The reason goes on
        their PodGroup like any other."""
        if not self.cfg.gpuSharing.enabled:
            return
        forget = 10 * self.cfg.gpuSharing.reservationRetrySeconds + 600
        for key in [k for k, (until, _, _) in self.backoff.items() if until + forget < now]:
            del self.backoff[key]
        for job in snap.jobs.values():
            pending = [p for p in job.pods if p.status == PodStatus.PENDING]
            if not pending:
                continue
            held = self.backoff.get(job.key)
            if held is not None and held[0] > now:
                when = time.strftime("%H:%M:%S UTC", time.gmtime(held[0]))
                job_errors(snap.journal, job).append(
                    Reason(held[2].code, f"{held[2].message}; kai places it again after {when}"))
            for p in pending:
                problem = not_set_up(p.raw) if p.frac_devices and p.raw is not None else None
                if problem is not None:
                    job_errors(snap.journal, job).append(Reason(NOT_SET_UP, problem))
                    break

    def _metrics(self) -> Metrics:
        if self.metrics is None:
            self.metrics = Metrics()
            live = self.live
            if live is not None:
                self.metrics.events_queued.set_function(lambda: live.queued)
        return self.metrics

    def _mark_stale(self, snap: Snapshot, d: Decisions) -> None:
        for key, since in d.stale.items():
            job = snap.jobs.get(key)
            if job is None or not job.explicit:
                continue
            value = None if since is None else meta.format_time(since)
            if value == meta.annotations_of(job.raw).get(c.STALE_SINCE_ANNOTATION):
                continue
            self._annotate(self.client, job, c.STALE_SINCE_ANNOTATION, value)

    def _mark_evicted(self, snap: Snapshot, applied: ApplyResult) -> None:
        """KAI's last-eviction time on the PodGroup of each job some of whose pods this cycle evicted: a
        ``preemptionDelay`` counts from it (the job may not evict others until the delay has passed again). Written
        by the background writer; a bare pod bound a moment before can be evicted before kaid has made its PodGroup,
        so a mark whose PodGroup is not there yet is tried again with the next cycles (``MARK_RETRY_SECONDS``). (A bare
        pod's PodGroup is owned by the pod: the garbage collector deletes it with the evicted pod.)"""
        now = time.time()
        jobs = [job for key in dict.fromkeys(e.job for e in applied.evicted) if (job := snap.jobs.get(key)) is not None]
        if jobs or self.unmarked:
            self.background.submit(self._write_marks, jobs, meta.format_time(now), now)

    def _write_marks(self, jobs: list[Job], mark: str, now: float) -> None:
        for job in jobs:
            self.unmarked[job.key] = (job, mark, now + MARK_RETRY_SECONDS)
        for key, (job, value, until) in list(self.unmarked.items()):
            if self._annotate(self.writer, job, c.LAST_EVICTION_ANNOTATION, value, quiet=now <= until) or now > until:
                del self.unmarked[key]

    @staticmethod
    def _annotate(client: KubeClient, job: Job, annotation: str, value: str | None, quiet: bool = False) -> bool:
        """Write (None: remove) one of kai's annotations on a job's PodGroup; whether it was written. A failure (the
        API's answer or a dropped connection) is logged (``quiet``: not a missing PodGroup), not raised: it may run
        on the background writer, where nothing would see it."""
        try:
            client.merge_patch(f"/apis/{c.SCHEDULING_GROUP}/{c.PODGROUP_VERSION}/namespaces/"
                               f"{quote(job.namespace)}/podgroups/{quote(job.name)}",
                               {"metadata": {"annotations": {annotation: value}}})
            return True
        except ApiError as err:
            if not (quiet and err.status == 404):
                log.info("%s on %s not written: %s", annotation, job.key, err.message)
            return False
        except OSError as err:
            log.info("%s on %s not written: %s", annotation, job.key, err)
            return False

    def _observe(self, snap: Snapshot, d: Decisions, applied: ApplyResult, phases: dict[str, float],
                 total: float, queues: bool = True) -> None:
        """``queues``: set the queues' gauges too (not from an early cycle, which saw part of the pods)."""
        m = self._metrics()
        m.cycle.observe(total * 1000)
        for name, secs in phases.items():
            m.phase.labels(name).observe(secs * 1000)
        m.binds.labels("ok").inc(len(applied.bound) + len(applied.shared_bound))
        m.binds.labels("failed").inc(len(applied.failed))
        for e in applied.evicted:
            m.evictions.labels(e.action).inc()
        pods = {p.key: p for p in snap.pods}
        for b in [*applied.bound, *applied.shared_bound]:
            p = pods.get(b.pod)
            if p is not None and p.created:
                m.wait.observe(max(0.0, snap.now - p.created))
        m.gangs.labels("placed").inc(sum(1 for n in d.stats.gang_nodes if n))
        m.gangs.labels("partly_bound").inc(len(applied.partly_bound))
        for inf in self.cache.informers:
            m.lists.labels(inf.res.kind).set(inf.relists)
        if not queues:
            return
        depth: dict[str, int] = {}
        for key in d.pending:
            job = snap.jobs.get(key)
            if job is not None:
                depth[job.queue] = depth.get(job.queue, 0) + 1
        for row in d.queues:
            m.fair_share.labels(row.name).set(row.fair_share["gpu"])
            m.fair_share_cpu.labels(row.name).set(row.fair_share["cpu"])
            m.allocated.labels(row.name).set(row.allocated_final["gpu"])
            m.requested.labels(row.name).set(row.requested["gpu"])
            m.depth.labels(row.name).set(depth.get(row.name, 0))


@dataclass
class _EarlySending:
    """The early cycle, its binds sent and not yet answered."""

    sending: Sending
    binding: Decisions
    snap: Snapshot
    decisions: Decisions
    cycle: int
    started: float
    phases: dict[str, float]
    decided: float
    view: EarlyView


def _seen_bound(pod: Obj | None) -> bool:
    """The watch shows this pod bound (or gone)."""
    return pod is None or bool((pod.get("spec") or {}).get("nodeName"))


class _BindStream:
    """A cycle's binds, sent as soon as allocate commits each job (``run_cycle``'s ``on_bind``) while this replica
    leads; ``then`` runs once, when the first are out (or the cycle ends)."""

    def __init__(self, daemon: Daemon, cycle: str, started: float, then: Callable[[], None] | None = None) -> None:
        self.daemon = daemon
        self.cycle = cycle
        self.started = started
        self.then = then
        self.sent: list[tuple[Bind, Ticket[str | None]]] = []

    def __call__(self, binds: list[Bind]) -> None:
        if not self.daemon.leading():
            return
        if not self.sent:
            log.debug("%s: first binds after %.0f ms (%.2f s after the process began)", self.cycle,
                      (time.monotonic() - self.started) * 1000, process_age())
        self.sent.extend(self.daemon.actuator.start_binds(binds))
        self.first_out()

    def first_out(self) -> None:
        if self.then is not None:
            then, self.then = self.then, None
            then()
