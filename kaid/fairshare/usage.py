"""Usage history for time-based fair share: the one home of usage decay, for the daemon and the simulator.

What KAI-Scheduler does (v0.10 on, its ``usagedb`` and proportion plugin; kept there in Prometheus): per
queue and resource, the allocation integrated over a window (``windowSize``, default one week; ``windowType``
``sliding``, ``tumbling`` from ``tumblingWindowStartTime`` or ``cron``), each moment weighted by
``0.5 ** (age / halfLifePeriod)`` when a half-life is set (no decay otherwise); the cluster's capacity is
integrated the same way, and a queue's usage is its integral over the capacity's (the share of the cluster's
resource-time it used). Its over-quota weight share ``w`` then becomes ``max(0, w + kValue * (w - usage))``
(``kaid.fairshare.division``).

kai keeps the same numbers without a time-series database: the integrals are kept in slices of the window
(``SLICES`` per sliding window; one per tumbling window; one for ``cumulative``, kai's own type: every use
since the history began, only decay forgetting it), all decayed to the time they were last computed. The
oldest slice of a sliding window counts by the part of it still inside (as if its use were even across it).
The daemon writes each queue's slices to its status (``Queue.status.usage``, with the time they were computed
and the settings they were kept under), so that a new leader continues from them (``restore``): the time
between that moment and its first cycle is counted at the allocation it finds then. KAI's ``cron`` window is
not offered.

Units: the engine's (milli-GPU, millicores, bytes) times seconds inside; the status carries GPU-seconds,
millicore-seconds and megabyte-seconds.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kaid.api.config import UsageConfig
from kaid.model.objects import Snapshot

log = logging.getLogger("kaid.fairshare.usage")

WindowType = Literal["sliding", "tumbling", "cumulative"]
SLICES = 12  # slices of a sliding window
RESOURCES = ("gpu", "cpu", "memory")
TO_STATUS = (1e-3, 1.0, 1e-6)  # engine unit -> status unit: milli-GPU -> GPU, millicores, bytes -> MB


@dataclass(frozen=True)
class UsageParams:
    half_life_s: float = 0.0  # 0: no decay
    window_s: float = 7 * 86400.0
    window_type: WindowType = "sliding"
    window_start: float = 0.0  # a tumbling window's boundary (epoch seconds); windows every window_s from it

    @classmethod
    def of(cls, cfg: UsageConfig) -> UsageParams:
        start = dt.datetime.fromisoformat(cfg.tumblingWindowStart.replace("Z", "+00:00")).timestamp()
        return cls(cfg.halfLifeSeconds, cfg.windowSeconds, cfg.windowType, start)

    @property
    def slice_s(self) -> float:
        if self.window_type == "sliding":
            return self.window_s / SLICES
        if self.window_type == "tumbling":
            return self.window_s
        return math.inf


Vec = list[float]


class _Slice:
    __slots__ = ("capacity", "start", "used")

    def __init__(self, start: float) -> None:
        self.start = start
        self.used: dict[str, Vec] = {}
        self.capacity: Vec = [0.0, 0.0, 0.0]


class UsageHistory:
    """Per queue and resource, the decayed use over the window, and the cluster's capacity the same way."""

    def __init__(self, params: UsageParams) -> None:
        self.params = params
        self.t: float | None = None  # when the slices were last brought up to date (they are decayed to it)
        self.slices: list[_Slice] = []  # oldest first
        self.held: dict[str, tuple[float, float, float]] = {}  # each queue's allocation since ``t``
        self.capacity_held: tuple[float, float, float] | None = None

    # -------------------------------------------------------------------------------------------- keeping
    def _slice_index(self, t: float) -> float:
        p = self.params
        if p.window_type == "cumulative":
            return 0.0
        return math.floor((t - p.window_start) / p.slice_s)

    def _slice_at(self, t: float) -> _Slice:
        """The slice holding moment ``t`` (at or after the newest slice's start), made if missing."""
        p = self.params
        start = -math.inf if p.window_type == "cumulative" else p.window_start + self._slice_index(t) * p.slice_s
        if not self.slices or self.slices[-1].start < start:
            self.slices.append(_Slice(start))
        return self.slices[-1]

    def _weight(self, x: float, y: float, now: float) -> float:
        """The decayed length of [x, y] as seen at ``now``: the integral of 0.5 ** ((now - s) / half-life)."""
        h = self.params.half_life_s
        if h <= 0:
            return y - x
        return float(h / math.log(2) * (0.5 ** ((now - y) / h) - 0.5 ** ((now - x) / h)))

    def advance(self, now: float, allocated: Mapping[str, tuple[float, float, float]],
                capacity: tuple[float, float, float]) -> None:
        """Bring the history to ``now``: what each queue held since the last call (``allocated`` for a queue not
        seen before and for the time before the first call after a restore) added, the rest decayed, and slices
        gone out of the window dropped. Then ``allocated`` and ``capacity`` are what is held from ``now`` on."""
        if self.t is None or now <= self.t:
            self.t = now if self.t is None else self.t
            self.held = dict(allocated)
            self.capacity_held = capacity
            return
        t0, h = self.t, self.params.half_life_s
        if h > 0:
            f = 0.5 ** ((now - t0) / h)
            for s in self.slices:
                s.capacity = [v * f for v in s.capacity]
                for vec in s.used.values():
                    vec[:] = [v * f for v in vec]
        held = {**allocated, **{q: a for q, a in self.held.items() if q in allocated}}
        cap = self.capacity_held if self.capacity_held is not None else capacity
        x = t0
        while x < now:
            s = self._slice_at(x)
            end = min(now, s.start + self.params.slice_s)
            w = self._weight(x, end, now)
            for r in range(3):
                s.capacity[r] += cap[r] * w
            for q, a in held.items():
                vec = s.used.setdefault(q, [0.0, 0.0, 0.0])
                for r in range(3):
                    vec[r] += a[r] * w
            x = end
        self.t = now
        self._drop_old(now)
        self.held = dict(allocated)
        self.capacity_held = capacity

    def _drop_old(self, now: float) -> None:
        p = self.params
        if p.window_type == "sliding":
            self.slices = [s for s in self.slices if s.start + p.slice_s > now - p.window_s]
        elif p.window_type == "tumbling":
            current = p.window_start + self._slice_index(now) * p.slice_s
            self.slices = [s for s in self.slices if s.start >= current]

    # -------------------------------------------------------------------------------------------- reading
    def _inside(self, s: _Slice, now: float) -> float:
        """The part of slice ``s`` inside the window at ``now``."""
        p = self.params
        if p.window_type != "sliding":
            return 1.0
        return min(1.0, max(0.0, (s.start + p.slice_s - (now - p.window_s)) / p.slice_s))

    def totals(self) -> tuple[dict[str, Vec], Vec]:
        """Each queue's use over the window, and the capacity's, decayed to ``t`` (engine units times seconds)."""
        now = self.t or 0.0
        used: dict[str, Vec] = {}
        cap = [0.0, 0.0, 0.0]
        for s in self.slices:
            k = self._inside(s, now)
            for r in range(3):
                cap[r] += s.capacity[r] * k
            for q, vec in s.used.items():
                tot = used.setdefault(q, [0.0, 0.0, 0.0])
                for r in range(3):
                    tot[r] += vec[r] * k
        return used, cap

    def shares(self) -> dict[str, Vec]:
        """Each queue's use over the window as a share of the cluster's capacity over it (0 to 1 while a queue
        uses no more than the cluster has): what the fair share weighs."""
        used, cap = self.totals()
        return {q: [u / c if c > 0 else 0.0 for u, c in zip(vec, cap, strict=True)] for q, vec in used.items()}

    def observe(self, snap: Snapshot) -> None:
        """Advance to the snapshot's time at its queues' allocations and capacity, then give each of its queues
        its usage share (``Queue.usage``) for the fair share."""
        cap = snap.capacity()
        self.advance(snap.now, {q.name: (float(q.allocated[0]), float(q.allocated[1]), float(q.allocated[2]))
                                for q in snap.queues.values()}, (float(cap[0]), float(cap[1]), float(cap[2])))
        shares = self.shares()
        for q in snap.queues.values():
            q.usage = list(shares.get(q.name, [0.0, 0.0, 0.0]))

    # -------------------------------------------------------------------------------------------- status
    def status(self, queue: str) -> dict[str, Any] | None:
        """``Queue.status.usage`` of ``queue`` (None before the first advance)."""
        if self.t is None:
            return None
        p = self.params
        share = self.shares().get(queue, [0.0, 0.0, 0.0])
        return {
            "computedAt": _iso(self.t), "windowType": p.window_type, "windowSeconds": p.window_s,
            "halfLifeSeconds": p.half_life_s,
            "share": {r: round(v, 6) for r, v in zip(RESOURCES, share, strict=True)},
            # a cumulative history's one slice has no start (a null would remove the field: status is merge-patched)
            "slices": [{**({"start": _iso(s.start)} if math.isfinite(s.start) else {}),
                        "used": _amounts(s.used.get(queue, [0.0, 0.0, 0.0])), "capacity": _amounts(s.capacity)}
                       for s in self.slices],
        }

    def restore(self, statuses: Mapping[str, Any]) -> list[str]:
        """Continue from the queues' ``status.usage`` (queue name -> that field, as read): the newest one kept
        under these settings sets the time and the capacity; each queue takes its own slices. Malformed ones are
        left out with a log line each; returns the queues restored."""
        parsed: dict[str, UsageStatus] = {}
        for queue, raw in statuses.items():
            if raw is None:
                continue
            try:
                st = UsageStatus.model_validate(raw)
            except ValidationError as err:
                first = err.errors()[0]
                where = ".".join(str(x) for x in first.get("loc", ()))
                log.warning("Queue %s: status.usage is malformed (%s%s); its usage history starts afresh", queue,
                            f"{where}: " if where else "", first.get("msg"))
                continue
            if st.computedAt.tzinfo is None or any(sl.start is not None and sl.start.tzinfo is None
                                                   for sl in st.slices):
                log.warning("Queue %s: status.usage is malformed (a time without its zone); its usage history "
                            "starts afresh", queue)
                continue
            if not st.kept_under(self.params):
                log.info("Queue %s: status.usage was kept under other settings (%s window of %g s, half-life %g s); "
                         "its usage history starts afresh", queue, st.windowType, st.windowSeconds, st.halfLifeSeconds)
                continue
            parsed[queue] = st
        if not parsed:
            return []
        newest = max(parsed.values(), key=lambda s: s.computedAt)
        t = newest.computedAt.timestamp()
        self.t = t
        self.slices = []
        self.held, self.capacity_held = {}, None
        by_start: dict[float, _Slice] = {}
        for sl in newest.slices:
            start = sl.start.timestamp() if sl.start is not None else -math.inf
            s = by_start.setdefault(start, _Slice(start))
            s.capacity = _engine(sl.capacity)
        for queue, st in parsed.items():
            f = 0.5 ** ((t - st.computedAt.timestamp()) / self.params.half_life_s) \
                if self.params.half_life_s > 0 else 1.0
            for sl in st.slices:
                start = sl.start.timestamp() if sl.start is not None else -math.inf
                s = by_start.setdefault(start, _Slice(start))
                s.used[queue] = [v * f for v in _engine(sl.used)]
        self.slices = sorted(by_start.values(), key=lambda s: s.start)
        self._drop_old(t)
        return sorted(parsed)


def persisted(objects: Iterable[Mapping[str, Any]], cfg: UsageConfig) -> tuple[dict[str, Vec], float | None]:
    """Each queue's usage share as the leader last kept it in the Queues' ``status.usage`` (those kept under
    ``cfg``'s settings), and when it was computed (None: no Queue has one). What ``kaictl fairshare`` shows and
    weighs; nothing is advanced to now (kaictl does not know what was allocated since)."""
    history = UsageHistory(UsageParams.of(cfg))
    statuses = {str((o.get("metadata") or {}).get("name")): (o.get("status") or {}).get("usage") for o in objects
                if o.get("kind") == "Queue" and isinstance(o.get("status"), dict)}
    if not history.restore(statuses):
        return {}, None
    return history.shares(), history.t


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _amounts(vec: Vec) -> dict[str, float]:
    return {r: round(v * k, 3) for r, v, k in zip(RESOURCES, vec, TO_STATUS, strict=True)}


def _engine(a: Amounts) -> Vec:
    return [a.gpu / TO_STATUS[0], a.cpu / TO_STATUS[1], a.memory / TO_STATUS[2]]


class Amounts(BaseModel):
    model_config = ConfigDict(extra="ignore")
    gpu: float = Field(ge=0, allow_inf_nan=False)
    cpu: float = Field(ge=0, allow_inf_nan=False)
    memory: float = Field(ge=0, allow_inf_nan=False)


class UsageSlice(BaseModel):
    model_config = ConfigDict(extra="ignore")
    start: dt.datetime | None = None  # absent: a cumulative history's one slice
    used: Amounts
    capacity: Amounts


class UsageStatus(BaseModel):
    """``Queue.status.usage`` as read back (what ``UsageHistory.status`` writes)."""

    model_config = ConfigDict(extra="ignore")
    computedAt: dt.datetime
    windowType: WindowType
    windowSeconds: float = Field(gt=0, allow_inf_nan=False)
    halfLifeSeconds: float = Field(ge=0, allow_inf_nan=False)
    slices: list[UsageSlice] = Field(max_length=10 * SLICES)

    def kept_under(self, p: UsageParams) -> bool:
        return (self.windowType == p.window_type and math.isclose(self.windowSeconds, p.window_s)
                and math.isclose(self.halfLifeSeconds, p.half_life_s))
