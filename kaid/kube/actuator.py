"""Applying a cycle's Decisions to the cluster: binds through the ``pods/binding`` subresource
(concurrently, within the client's QPS), evictions through the Eviction API with a ``DisruptionTarget``
condition, pipelined reservations and stale-gang marks as annotations.

A bind or eviction that fails for a passing reason (throttling, a server error, a dropped connection, an API
server whose authorizer is not ready yet) is tried again with backoff for up to ``RETRY_FOR`` seconds; none is
sent once this replica has lost its lease, and no bind to a node the watch shows gone or NotReady. When a pod of
a gang still cannot be bound, the pods of it that were bound stay bound (deleting them would lose bare pods and
fail Jobs): the next cycle places the rest, and the stale-gang grace evicts a gang that stays below its minimum.

A job with a shared-GPU pod goes to the ``SharedBinder`` (``kaid.kube.reservations``) when there is one: it
hands the device over before it binds, in the background, so that the cycle and whole-GPU binds never wait
for a reservation. Those binds are listed in ``ApplyResult.reserving``; their outcome comes later.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kaid.api import constants as c
from kaid.cycle import Bind, Decisions, Eviction
from kaid.kube.auth import AuthError
from kaid.kube.client import ApiError, KubeClient, _error, dumps, pod_path
from kaid.kube.reservations import SharedBinder
from kaid.kube.sender import RequestLoop
from kaid.kube.volumes import Claims
from kaid.model.pods import group_labels

log = logging.getLogger("kaid.actuator")
RETRY_FOR = 30.0  # seconds a bind or an eviction keeps trying through throttling and server errors
LOST_LEASE = "not sent: this replica no longer holds the lease"


def retry_delay(err: ApiError | None, attempt: int, eviction: bool = False) -> float | None:
    """How long to wait before sending a failed bind or eviction again (``attempt``: 0 for the first failure);
    None when trying again would not change the answer. ``err`` None: the connection failed. Throttling (429) and
    server errors (5xx) back off exponentially from 0.2 s to 2 s, never sooner than the server's Retry-After
    (``details.retryAfterSeconds``, at most 10 s); an eviction a PodDisruptionBudget refuses waits for the next
    cycle's decision instead. 401 and 403 are tried again too: an API server that has just started answers 403
    until its RBAC caches are filled (seen in the fault tests), and a token may be being replaced."""
    base: float = min(0.2 * 2.0 ** attempt, 2.0)
    if err is None:
        return base
    if not (err.status in (401, 403, 429) or err.status >= 500):
        return None  # (401 and 403: an API server just restarted refuses until its authorizer has synced)
    if eviction and err.status == 429 and "disruption budget" in err.message:
        return None
    hinted = (err.body.get("details") or {}).get("retryAfterSeconds") if isinstance(err.body, dict) else None
    try:
        return max(base, min(float(hinted), 10.0)) if hinted else base
    except (TypeError, ValueError):
        return base


def bind_workers(burst: int) -> int:
    """Threads that send binds for a client of this burst: a quarter of it, 4 to 32. The daemon's actuator and
    bench_kube's raw bind loop both take their count from here."""
    return min(32, max(4, burst // 4))


@dataclass
class ApplyResult:
    bound: list[Bind] = field(default_factory=list)
    failed: list[tuple[Bind, str]] = field(default_factory=list)
    partly_bound: list[str] = field(default_factory=list)  # jobs some of whose binds failed and some did not
    evicted: list[Eviction] = field(default_factory=list)
    evict_failed: list[tuple[Eviction, str]] = field(default_factory=list)
    pipelined: int = 0
    reserving: list[Bind] = field(default_factory=list)  # sent to the SharedBinder: bound (or not) later
    shared_bound: list[Bind] = field(default_factory=list)  # shared-GPU binds of earlier cycles done since

    def failures(self, shown: int = 3) -> str:
        """The failed binds in one line, for the cycle's log: how many, and the commonest reasons with their counts
        (a single pod's failed bind is otherwise told only by its BindingError event, the pod left pending)."""
        counts: dict[str, int] = defaultdict(int)
        for _, reason in self.failed:
            counts[reason] += 1
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])  # stable: equal counts in the order they came
        text = "; ".join(f"{n} x {reason}" for reason, n in ranked[:shown])
        more = f"; {len(ranked) - shown} other reasons" if len(ranked) > shown else ""
        return f"{len(self.failed)} binds failed: {text}{more}"


T = TypeVar("T")
R = TypeVar("R")


class Ticket(Generic[R]):
    """The outcome of one call sent to a ``SendPool``: ``done()``, and ``result()`` (waits; raises what the call
    raised)."""

    __slots__ = ("_error", "_finished", "_pool", "_value", "_waited")

    def __init__(self, pool: SendPool) -> None:
        self._pool = pool
        self._value: R | None = None
        self._error: BaseException | None = None
        self._finished = False
        self._waited = False  # someone waits for it (``SendPool.wait``)

    def done(self) -> bool:
        return self._finished

    def result(self) -> R:
        if not self._finished:
            self._pool.wait(self)
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


class SendPool:
    """Threads that send calls (binds, evictions, marks) and the outcome of each: a ``ThreadPoolExecutor`` without
    its Future per call (a Condition and an RLock each, two locks to submit, a semaphore per worker's turn): a
    streamed cycle hands its binds over one job at a time from its deciding thread (bench_kube's backlog: 3,548
    binds, about 15 us each on that thread before). A call is a tuple put on one queue; a ticket is waited for
    through one condition, notified when a ticket someone waits for is done. A thread starts with each of the first
    ``workers`` calls, not before: a standby replica, which sends nothing, holds none."""

    def __init__(self, workers: int, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[Ticket[Any], Callable[[Any], Any], Any] | None] = queue.SimpleQueue()
        self._cond = threading.Condition(threading.Lock())
        self._workers = workers
        self._name = name
        self._threads: list[threading.Thread] = []
        self._starting = threading.Lock()  # (starting a thread, and close)
        self._closed = False

    def submit(self, fn: Callable[[T], R], arg: T) -> Ticket[R]:
        if self._closed:
            raise RuntimeError("the pool is closed")
        ticket: Ticket[R] = Ticket(self)
        self._queue.put((ticket, fn, arg))
        if len(self._threads) < self._workers:
            self._start_one()
        return ticket

    def _start_one(self) -> None:
        with self._starting:
            if len(self._threads) >= self._workers or self._closed:
                return
            t = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True)
            t.start()
            self._threads.append(t)

    def map(self, fn: Callable[[T], R], args: Iterable[T]) -> Iterator[R]:
        """``fn`` of each, sent at once; the results in the order of ``args``."""
        tickets = [self.submit(fn, a) for a in args]
        return (t.result() for t in tickets)

    def settle(self, ticket: Ticket[R], value: R) -> None:
        """``ticket`` done with ``value``, settled elsewhere (the actuator's ``RequestLoop``)."""
        ticket._value = value
        ticket._finished = True
        if ticket._waited:
            with self._cond:
                self._cond.notify_all()

    def hand_on(self, ticket: Ticket[R], fn: Callable[[T], R], arg: T) -> None:
        """``ticket`` to be settled by ``fn(arg)`` on one of the threads (what another sender could not finish)."""
        self._queue.put((ticket, fn, arg))
        if len(self._threads) < self._workers:
            self._start_one()

    def wait(self, ticket: Ticket[Any]) -> None:
        with self._cond:
            ticket._waited = True  # (before it looks: a worker that finishes it after the look sees this, and notifies)
            while not ticket._finished:
                self._cond.wait()

    def _work(self) -> None:
        get = self._queue.get
        while (item := get()) is not None:
            ticket, fn, arg = item
            try:
                ticket._value = fn(arg)
            except BaseException as err:  # (handed to whoever waits for the result, as a Future does)
                ticket._error = err
            ticket._finished = True
            if ticket._waited:
                with self._cond:
                    self._cond.notify_all()
            del item, ticket, arg

    def close(self) -> None:
        """Every call sent is done, the threads end."""
        with self._starting:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        for t in threads:
            t.join()


@dataclass
class Sending:
    """Binds sent and not waited for (``Actuator.send_binds``): each with its ticket, and those handed to the
    SharedBinder (their outcome comes from it)."""

    pairs: list[tuple[Bind, Ticket[str | None]]]
    reserving: list[Bind]


def _split(key: str) -> tuple[str, str]:
    ns, name = key.split("/", 1)
    return ns, name


def binding(ns: str, name: str, node: str, annotations: dict[str, str]) -> dict[str, Any]:
    """The ``Binding`` of pod ``ns/name`` to ``node``."""
    return {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


class _FirstTry:
    """A plain bind's first try, sent by the actuator's ``RequestLoop`` (on its thread): settled there when it
    binds, when it may not be sent (the lease lost, the node gone) and on an answer that a retry would not change;
    else handed to the pool's threads with its failure (``Actuator._bind_one``'s ``first``), which back off and try
    again, ask whether a 409's pod is bound already, or send again with fresh credentials after a 401."""

    __slots__ = ("actuator", "bind", "ticket")

    def __init__(self, actuator: Actuator, b: Bind, ticket: Ticket[str | None]) -> None:
        self.actuator = actuator
        self.bind = b
        self.ticket = ticket

    def prepare(self) -> bytes | None:
        act, b = self.actuator, self.bind
        if not act.may_act():
            act.pool.settle(self.ticket, LOST_LEASE)
            return None
        problem = act.node_problem(b.node)
        if problem is not None:
            act.pool.settle(self.ticket, problem)
            return None
        client = act.client
        try:
            token = client.auth.token()
            client._current_tls()
        except AuthError:  # (the pool's try says so, as a 401)
            act.pool.hand_on(self.ticket, act._bind_again, (b, None))
            return None
        ns, name = _split(b.pod)
        annotations = {c.GPU_DEVICES_ANNOTATION: ",".join(str(d) for d in b.devices)} if b.devices else {}
        body = dumps(binding(ns, name, b.node, annotations))
        return client._head("POST", pod_path(ns, name, "binding"), body, "application/json", token) + body

    def answered(self, status: int, reason: str, body: bytes) -> None:
        act = self.actuator
        if status < 300:
            act.pool.settle(self.ticket, None)
            return
        if status == 401:  # sent again by the pool's try, with fresh credentials if there are
            act.pool.hand_on(self.ticket, act._bind_again, (self.bind, None))
            return
        err = _error(status, reason, body)
        if retry_delay(err, 0) is None and not (status == 409 and "already" in err.message):
            act.pool.settle(self.ticket, f"{status} {err.message}")  # final: as _bind_one's answer
            return
        act.pool.hand_on(self.ticket, act._bind_again, (self.bind, err))

    def failed(self, error: BaseException) -> None:
        act = self.actuator
        if not isinstance(error, Exception):
            act.pool.settle(self.ticket, str(error) or type(error).__name__)
            return
        act.pool.hand_on(self.ticket, act._bind_again, (self.bind, error))


class Actuator:
    def __init__(self, client: KubeClient, workers: int = 16, retry_for: float = RETRY_FOR,
                 may_act: Callable[[], bool] | None = None,
                 node_problem: Callable[[str], str | None] | None = None) -> None:
        """``may_act``: asked before every bind and eviction sent, first tries and retries alike (the daemon's
        "this replica holds the lease"): what was decided on a view that is no longer this replica's to act on
        is dropped, however long it waited in the pool or backed off. ``node_problem``: why a node may no longer
        take a bind decided for it (gone, NotReady), or None; asked before each try."""
        self.client = client
        self.node_problem = node_problem or (lambda _node: None)
        self.pool = SendPool(workers, "bind")
        # a plain bind's first try goes through one thread over ``workers`` connections (kaid.kube.sender); what it
        # cannot finish at once (a retry, a patch, a 401, a 409) goes to the pool's threads
        self.sender: RequestLoop | None = RequestLoop(client, workers, "bind-loop") \
            if isinstance(client, KubeClient) else None
        self.retry_for = retry_for
        self.may_act = may_act or (lambda: True)
        self.shared: SharedBinder | None = None  # set by the daemon when shared-GPU pods get their device
        self.claims = Claims(client)  # a pod's PersistentVolumeClaims told its node before it is bound
        self._reserving: list[Bind] = []  # sent to ``shared`` since the last ``bind``

    def close(self) -> None:
        if self.shared is not None:
            self.shared.close()
        if self.sender is not None:
            self.sender.close()
        self.pool.close()

    # ------------------------------------------------------------------------------------------ binds
    def _bind_one(self, b: Bind, patch: dict[str, Any] | None = None,
                  first: Exception | None = None) -> str | None:
        """Bind one pod, after the merge ``patch`` of its metadata (default: its GPU group labels and the end of
        a pipelined mark, where it has either). ``first``: how a first try sent elsewhere failed (the sender
        loop's, ``_FirstTry``): taken as this call's first try."""
        ns, name = _split(b.pod)
        annotations = {}
        if b.devices:
            annotations[c.GPU_DEVICES_ANNOTATION] = ",".join(str(d) for d in b.devices)
        if patch is None and (b.groups or b.action != "allocate" or b.set_labels):
            meta: dict[str, Any] = {}
            if b.groups or b.action != "allocate":
                meta["annotations"] = {c.PIPELINED_NODE_ANNOTATION: None, c.PIPELINED_ACTION_ANNOTATION: None}
            labels = {**group_labels(b.groups), **dict(b.set_labels)}
            if labels:
                meta["labels"] = labels
            patch = {"metadata": meta}
        deadline = time.monotonic() + self.retry_for
        claims_ready = not b.claims
        for attempt in itertools.count():
            failure, first = first, None
            if failure is None:
                if not self.may_act():
                    return LOST_LEASE
                problem = self.node_problem(b.node)
                if problem is not None:  # the node went away (or NotReady) since the cycle decided: not there
                    return problem
                try:
                    if not claims_ready:  # (once: a retry after a failed bind does not ask again)
                        problem = self.claims.prepare(ns, b.claims, b.node)
                        if problem is not None:
                            return problem
                        claims_ready = True
                    if patch is not None:
                        self.client.merge_patch(pod_path(ns, name), patch)
                    self.client.create(pod_path(ns, name, "binding"), binding(ns, name, b.node, annotations))
                    return None
                except Exception as err:
                    failure = err
            error: ApiError | None = None
            if isinstance(failure, ApiError):
                last = f"{failure.status} {failure.message}"
                if failure.status == 409 and "already" in failure.message:
                    return None if self._bound_to(ns, name, b.node) else last
                error = failure
            else:  # connection trouble: retry
                last = str(failure) or type(failure).__name__
            delay = retry_delay(error, attempt)
            if delay is None or time.monotonic() + delay > deadline:
                return last
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _bound_to(self, ns: str, name: str, node: str) -> bool:
        try:
            pod = self.client.get(pod_path(ns, name))
        except ApiError:
            return False
        return bool((pod.get("spec") or {}).get("nodeName") == node)

    def start_binds(self, binds: list[Bind]) -> list[tuple[Bind, Ticket[str | None]]]:
        """Send binds now, without waiting: a cycle streams each job's binds as soon as it is placed. The jobs
        with a shared-GPU pod go to the SharedBinder, if there is one (and are not in what is returned)."""
        if self.shared is not None:
            by_job: dict[str, list[Bind]] = defaultdict(list)
            for b in binds:
                by_job[b.job].append(b)
            plain: list[Bind] = []
            for job_binds in by_job.values():
                if any(b.gpu_groups for b in job_binds):
                    self.shared.submit(job_binds)
                    self._reserving.extend(job_binds)
                else:
                    plain.extend(job_binds)
            binds = plain
        if self.sender is None:
            return [(b, self.pool.submit(self._bind_one, b)) for b in binds]
        out: list[tuple[Bind, Ticket[str | None]]] = []
        for b in binds:
            if b.groups or b.action != "allocate" or b.set_labels or b.claims:  # a patch or claims first: on the
                # pool's threads
                out.append((b, self.pool.submit(self._bind_one, b)))
            else:
                ticket: Ticket[str | None] = Ticket(self.pool)
                self.sender.send(_FirstTry(self, b, ticket))
                out.append((b, ticket))
        return out

    def _bind_again(self, args: tuple[Bind, Exception | None]) -> str | None:
        return self._bind_one(args[0], None, args[1])

    def bind(self, binds: list[Bind], started: list[tuple[Bind, Ticket[str | None]]] | None = None) -> ApplyResult:
        """Bind, then check every job as a whole; ``started``: binds already sent by ``start_binds``."""
        return self.answers(self.send_binds(binds, started))

    def send_binds(self, binds: list[Bind], started: list[tuple[Bind, Ticket[str | None]]] | None = None) -> Sending:
        """Send ``binds`` (``started``: those sent already by ``start_binds``) without waiting: what ``answers``
        waits for, with the shared-GPU binds handed to the SharedBinder since the last call."""
        pairs = list(started or []) + self.start_binds(binds)
        reserving, self._reserving = self._reserving, []
        return Sending(pairs, reserving)

    def send_rest(self, binds: list[Bind], started: list[tuple[Bind, Ticket[str | None]]]) -> Sending:
        """``send_binds`` of those of ``binds`` not sent yet (``started``: those a streamed cycle sent, besides the
        shared-GPU binds handed to the SharedBinder)."""
        sent = {b.pod for b, _ in started} | {b.pod for b in self._reserving}
        return self.send_binds([b for b in binds if b.pod not in sent], started)

    def answers(self, sending: Sending) -> ApplyResult:
        """The binds sent answered (waits), every job checked as a whole."""
        out = ApplyResult()
        pairs, out.reserving = sending.pairs, sending.reserving
        binds = [b for b, _ in pairs]
        for _, ticket in reversed(pairs):  # the last sent first: it ends about last, one wake-up for them all
            if not ticket.done():
                self.pool.wait(ticket)
        results = [f.result() for _, f in pairs]
        by_job: dict[str, list[tuple[Bind, str | None]]] = defaultdict(list)
        for b, err in zip(binds, results, strict=True):
            by_job[b.job].append((b, err))
        for job, items in by_job.items():
            failed = [(b, e) for b, e in items if e is not None]
            ok = [b for b, e in items if e is None]
            out.failed.extend((b, e) for b, e in failed if e is not None)
            if failed and ok and len(items) > 1:
                # The gang is partly bound. Its bound pods stay: deleting them loses a pod that nothing makes again,
                # and counts as a failure of a Job's pod (its backoffLimit, often 0 for a gang, fails the Job; its
                # backoff delays the new pods for minutes). The next cycle places the rest of the gang; one that
                # stays below its minimum is evicted whole after the stale-gang grace.
                log.warning("%d of %d binds of %s failed (%s); its %d bound pods stay, the rest is placed again",
                            len(failed), len(items), job, failed[0][1], len(ok))
                out.partly_bound.append(job)
            out.bound.extend(ok)
        return out

    # ------------------------------------------------------------------------------------------ evictions
    def _evict_one(self, e: Eviction) -> str | None:
        ns, name = _split(e.pod)
        cond = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                "message": f"kai {e.action}: {e.message}"[:1000],
                "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if not self.may_act():
            return LOST_LEASE
        try:
            self.client.strategic_patch(pod_path(ns, name, "status"), {"status": {"conditions": [cond]}})
        except ApiError as err:
            if err.status == 404:
                return None  # already gone
        except Exception as err:  # connection trouble: the eviction below says what it is
            log.info("DisruptionTarget condition of %s not written: %s", e.pod, err)
        deadline = time.monotonic() + self.retry_for
        for attempt in itertools.count():
            if not self.may_act():
                return LOST_LEASE
            error: ApiError | None = None
            try:
                self.client.create(pod_path(ns, name, "eviction"), {
                    "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}})
                return None
            except ApiError as err:
                if err.status == 404:
                    return None
                last = f"{err.status} {err.message}"  # 429: a PodDisruptionBudget says not now
                error = err
            except Exception as err:  # connection trouble
                last = str(err) or type(err).__name__
            delay = retry_delay(error, attempt, eviction=True)
            if delay is None or time.monotonic() + delay > deadline:
                return last
            time.sleep(delay)
        raise AssertionError("unreachable")

    def evict(self, evictions: list[Eviction]) -> ApplyResult:
        out = ApplyResult()
        for e, err in zip(evictions, self.pool.map(self._evict_one, evictions), strict=True):
            if err is None:
                out.evicted.append(e)
            else:
                out.evict_failed.append((e, err))
        return out

    # ------------------------------------------------------------------------------------------ marks
    def pipeline(self, pipelined: list[Bind]) -> int:
        def one(b: Bind) -> bool:
            if not self.may_act():
                return False
            ns, name = _split(b.pod)
            anns = {c.PIPELINED_NODE_ANNOTATION: b.node, c.PIPELINED_ACTION_ANNOTATION: b.action,
                    c.GPU_DEVICES_ANNOTATION: ",".join(str(d) for d in b.devices) or None}
            try:
                self.client.merge_patch(pod_path(ns, name), {"metadata": {"annotations": anns}})
                return True
            except ApiError as err:
                log.warning("could not mark %s pipelined: %s", b.pod, err.message)
                return False
        return sum(1 for ok in self.pool.map(one, pipelined) if ok)

    def apply(self, d: Decisions, started: list[tuple[Bind, Ticket[str | None]]] | None = None) -> ApplyResult:
        """Evictions, then the binds not sent yet (``started``: those a streamed cycle sent), then pipelined marks.
        A pod both bound and evicted by the decisions (a victim that allocate placed earlier in the cycle, as KAI
        takes them): if its bind has not been sent, neither goes out (it stays pending, as the two would leave it,
        without the churn; a bind sent after the eviction would fail); if it has, it is evicted once its bind is
        answered, and only if it bound."""
        sent = {b.pod for b, _ in started or []} | {b.pod for b in self._reserving}
        binding = {b.pod for b in d.binds}
        evicting = {e.pod for e in d.evictions}
        unsent = binding - sent
        plain = [e for e in d.evictions if e.pod not in binding]
        after = [e for e in d.evictions if e.pod in binding and e.pod in sent]
        ev = self.evict(plain)
        out = self.bind([b for b in d.binds if b.pod not in sent and b.pod not in evicting], started)
        bound = {b.pod for b in out.bound}
        late = [e for e in after if e.pod in bound]
        if late:
            more = self.evict(late)
            ev.evicted.extend(more.evicted)
            ev.evict_failed.extend(more.evict_failed)
        out.evicted, out.evict_failed = ev.evicted, ev.evict_failed
        evicted = {e.pod for e in plain} | {e.pod for e in late}
        skipped = evicting & unsent
        if skipped:
            log.info("%d pods bound and evicted in the same decisions were neither (their binds had not gone out)",
                     len(skipped))
        # a pod moved by consolidation is recreated by its controller under a new name: nothing to mark
        out.pipelined = self.pipeline([b for b in d.pipelined if b.pod not in evicted])
        return out
