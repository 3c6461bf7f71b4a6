"""Queue limits and the non-preemptible-within-quota rule, at every level of the tree."""

from __future__ import annotations

from kaid.model.objects import RESOURCES, UNLIMITED, Job, Node, Pod, Queue, Reason
from kaid.model.vocabulary import ReasonCode

_FLAG = {"gpu": "--gpu-limit", "cpu": "--cpu-limit", "memory": "--memory-limit"}


def fmt(r: int, v: int) -> str:
    if v == UNLIMITED:
        return "unlimited"
    if r == 0:
        return f"{v / 1000:g} GPU" + ("" if v == 1000 else "s")
    if r == 1:
        return f"{v / 1000:g} cpu"
    return f"{v / 1e6:g} MB memory"


def _user(r: int, v: int) -> str:
    return f"{v / 1000:g}" if r == 0 else (str(v) if r == 1 else f"{v // 1_000_000}")


def limit_violation(queue: Queue, req: tuple[int, int, int], job: Job) -> Reason | None:
    """The first queue on the path from ``queue`` to the root that the request would push over a limit
    (or, for a non-preemptible job, over its quota)."""
    if not _crosses(queue, req, job.preemptible):  # most jobs: no reason to word (allocate asks for every job)
        return None
    return _first_violation(queue, req, job)


def _crosses(queue: Queue, req: tuple[int, int, int], preemptible: bool) -> bool:
    """Whether ``_first_violation`` finds one: its checks alone, without the words."""
    return _over(_path_limits(queue), req, preemptible)


_Path = tuple[tuple[tuple[Queue, int, int], ...], tuple[tuple[Queue, int, int], ...]]  # (limits, quotas) of a path


class PathLimits:
    """``_crosses`` for the jobs of an action, each queue's path read once: per leaf queue, the limits on its path
    that are not unlimited (with ``Queue.effective_limit``'s reading of 0) and the quotas that are not, by resource.
    A queue's limits and quotas stay put within an action; what it holds (``allocated``, ``alloc_np``) is read at
    each question. Most queues have none of either: a preemptible job of theirs crosses nothing."""

    __slots__ = ("_paths",)

    def __init__(self) -> None:
        self._paths: dict[int, _Path] = {}

    def violation(self, queue: Queue, req: tuple[int, int, int], job: Job) -> Reason | None:
        """``limit_violation``."""
        if not self.crosses(queue, req, job.preemptible):
            return None
        return _first_violation(queue, req, job)

    def crosses(self, queue: Queue, req: tuple[int, int, int], preemptible: bool) -> bool:
        """``_crosses``."""
        path = self._paths.get(id(queue))
        if path is None:
            path = self._paths[id(queue)] = _path_limits(queue)
        return _over(path, req, preemptible)


def _over(path: _Path, req: tuple[int, int, int], preemptible: bool) -> bool:
    """Whether the request pushes a queue of the path over a limit (a preemptible job) or over a limit or a quota
    (a non-preemptible one), by what each queue holds now."""
    limits, quotas = path
    for q, r, lim in limits:
        want = req[r]
        if want and q.allocated[r] + want > lim:
            return True
    if not preemptible:
        for q, r, quota in quotas:
            want = req[r]
            if want and q.alloc_np[r] + want > quota:
                return True
    return False


def _path_limits(queue: Queue) -> _Path:
    """Per resource, the limits on the path from ``queue`` to the root that are not unlimited (a limit of 0 is the
    quota: ``Queue.effective_limit``), and the quotas that are not."""
    limits: list[tuple[Queue, int, int]] = []
    quotas: list[tuple[Queue, int, int]] = []
    q: Queue | None = queue
    while q is not None:
        for r in (0, 1, 2):
            lim = q.limit[r]
            if lim == 0:
                lim = q.quota[r]
            if lim != UNLIMITED:
                limits.append((q, r, lim))
            if q.quota[r] != UNLIMITED:
                quotas.append((q, r, q.quota[r]))
        q = q.parent
    return tuple(limits), tuple(quotas)


def _first_violation(queue: Queue, req: tuple[int, int, int], job: Job) -> Reason | None:
    for anc in queue.path():
        for r, name in enumerate(RESOURCES):
            if not req[r]:
                continue
            lim = anc.effective_limit(r)
            if lim != UNLIMITED and anc.allocated[r] + req[r] > lim:
                implicit = anc.limit[r] == 0
                why = (f"queue {anc.name} has no {name} limit set, which means nothing beyond its quota of "
                       f"{fmt(r, anc.quota[r])}" if implicit
                       else f"queue {anc.name} has a {name} limit of {fmt(r, lim)}")
                fix_to = _user(r, anc.allocated[r] + req[r])
                return Reason(
                    ReasonCode.QUEUE_LIMIT,
                    f"{why}; it already uses {fmt(r, anc.allocated[r])} and this job needs {fmt(r, req[r])} more. "
                    f"Fits if the limit were {fix_to}: kaictl queue set {anc.name} {_FLAG[name]} {fix_to} "
                    "(or -1 for no limit)",
                    {"queue": anc.name, "resource": name, "limit": _user(r, lim),
                     "allocated": _user(r, anc.allocated[r]), "requested": _user(r, req[r]),
                     "implicitLimit": implicit})
            if not job.preemptible:
                quota = anc.quota[r]
                if quota != UNLIMITED and anc.alloc_np[r] + req[r] > quota:
                    return Reason(
                        ReasonCode.NON_PREEMPTIBLE_OVER_QUOTA,
                        f"non-preemptible jobs must fit within their queue's quota: queue {anc.name} has a {name} "
                        f"quota of {fmt(r, quota)}, non-preemptible jobs already use {fmt(r, anc.alloc_np[r])} and "
                        f"this job needs {fmt(r, req[r])}. Raise the quota or make the job preemptible "
                        "(a priority class below 100, or label kai.scheduler/preemptibility=preemptible)",
                        {"queue": anc.name, "resource": name, "quota": _user(r, quota),
                         "allocatedNonPreemptible": _user(r, anc.alloc_np[r]), "requested": _user(r, req[r])})
    return None


def above_limit(queue: Queue, req: tuple[int, int, int]) -> bool:
    """Whether a queue on the path from ``queue`` to the root holds more than its limit of a resource ``req``
    asks for: the check of a scenario as a whole, once it has charged what it placed and put back."""
    return any(req[r] and (lim := anc.effective_limit(r)) != UNLIMITED and anc.allocated[r] > lim
               for anc in queue.path() for r in range(len(RESOURCES)))


def charged_violation(queue: Queue, job: Job, placements: list[tuple[Pod, Node, tuple[int, ...]]]) -> Reason | None:
    """The limit check again with what the pods cost on the nodes they landed on (a gpu-memory request is a
    larger share of a smaller GPU than of the reference GPU the first check used)."""
    if not any(p.gpu_mem_mib for p, _, _ in placements):
        return None
    vec = (sum(p.gpu_milli_on(n) for p, n, _ in placements), sum(p.cpu for p, _, _ in placements),
           sum(p.mem for p, _, _ in placements))
    return limit_violation(queue, vec, job)
