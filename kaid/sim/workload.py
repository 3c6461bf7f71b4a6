"""Synthetic GPU-cluster workloads for the simulator, and trace files.

`generate` turns a `WorkloadProfile` (queues with Poisson arrival rates and job-kind mixes) into a
list of `JobSpec`, deterministic for a seed. `load_trace` / `dump_trace` read and write the same jobs
as YAML or JSON (``{"jobs": [{field: value, ...}, ...]}``); `trace_stats` summarises a trace so that a
generated one can be checked against the published statistics below.

What the public traces show (qualitative facts; the parameters below are our own choices made to
match them, not numbers copied from the papers):

- Microsoft Philly: Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training
  Workloads", USENIX ATC'19 (https://www.usenix.org/conference/atc19/presentation/jeon, arXiv
  1901.05758; trace: https://github.com/msr-fiddle/philly-traces).
- Alibaba PAI: Weng et al., "MLaaS in the Wild: Workload Analysis and Scheduling in Large-Scale
  Heterogeneous GPU Clusters", USENIX NSDI'22 (https://www.usenix.org/conference/nsdi22/presentation/weng;
  trace: https://github.com/alibaba/clusterdata/tree/master/cluster-trace-gpu-v2020).
- SenseTime Helios: Hu et al., "Characterization and Prediction of Deep Learning Workloads in
  Large-Scale GPU Datacenters", SC'21 (arXiv 2109.01313; trace:
  https://github.com/S-Lab-System-Group/HeliosData).

1. Most jobs ask for a single GPU (roughly 60-75% of jobs in these traces).
2. Multi-GPU jobs come in powers of two (2, 4, 8, 16, ... up to hundreds of GPUs), and their count
   falls with size: a heavy but thin tail.
3. A sizeable share of work (PAI especially) is inference or light jobs that ask for a fraction of a
   GPU, often as several replicas that run for hours.
4. Run times are heavy-tailed, close to lognormal: the median is minutes while the mean is hours,
   because a few jobs run for days. Larger jobs tend to run longer.

Model used by `generate` (all constants are module-level, named below):

- Arrivals: for each queue a homogeneous Poisson process of `jobs_per_hour`, over ``[0, hours*3600)``.
  Each queue draws from its own ``random.Random(f"{seed}/{queue}")`` stream, so a job stream depends
  only on the seed and that queue's settings; adding or changing another queue leaves it unchanged.
  The kind of each job is drawn from the queue's `mix`.
- train: total GPUs ``g`` is 1 with probability ``TRAIN_SINGLE_GPU_P = 0.75``; otherwise ``2**i``
  (i >= 1) with weight ``GANG_SIZE_DECAY**(i-1)`` (0.5: each doubling is half as likely), truncated at
  the largest power of two <= min(queue.max_gang_gpus, profile.max_job_gpus) and renormalised, so the
  single-GPU share stays 0.75 whatever the cap. Pods: ``g > 8`` gives ``g/8`` pods of 8 GPUs (whole
  DGX-like nodes) with min_member = pods; ``2 <= g <= 8`` gives, with probability
  ``SPLIT_SMALL_GANG_P = 0.5``, ``g`` pods of 1 GPU with min_member = g (a data-parallel gang) and
  otherwise one pod of ``g`` GPUs (min_member 1). Duration: lognormal with median
  ``TRAIN_MEDIAN_S = 900`` s (15 min) and ``TRAIN_SIGMA = 2.04``, so that mean/median =
  exp(sigma**2/2) ~ 8 and the untruncated mean is ~ 7200 s (2 h); multiplied by
  ``g**TRAIN_SIZE_EXPONENT`` (0.25: an 8-GPU job runs ~1.7x longer, a 64-GPU job ~2.8x) and clipped
  to ``[MIN_DURATION_S, MAX_DURATION_S] = [10 s, 7 days]``. Measured on 20k training jobs: median
  ~ 16 min, mean ~ 2.0 h. Priority class: "train" 85%, "build-preemptible" 10%, "build" 5%
  (``TRAIN_PRIORITY``; the traces carry no priorities, this is our choice).
- inference: ``INFERENCE_REPLICAS`` replicas (1: 40%, 2: 30%, 3: 15%, 4: 10%, 8: 5%), each a
  fractional pod of 0.25 or 0.5 GPU (50/50, ``INFERENCE_FRACTIONS``), min_member 1 (replicas are
  independent), priority "inference", long-running: lognormal median 4 h, sigma 1.0 (mean ~ 6.6 h).
- interactive (notebooks, debugging): one pod of 1 GPU (85%), 2 (10%) or 4 (5%) GPUs, capped like
  train, min_member 1, priority "build", lognormal median 30 min, sigma 1.0, at most 12 h.
- cpu and memory per pod are proportional to the pod's GPUs: ``CPU_MILLI_PER_GPU = 8000`` (8 cores)
  and ``MEMORY_MB_PER_GPU = 64000`` (64 GB) per GPU, so an 8-GPU pod asks for 64 cores and 512 GB,
  which fits a DGX A100 (128 cores, 1-2 TB) or DGX H100 (112 cores, 2 TB) with room for system pods.
  A 0.25-GPU pod asks for 2 cores and 16 GB.
- Arrival and duration are rounded to milliseconds, so traces round-trip through YAML/JSON exactly.

`default_profile` has four queues (58 jobs/hour in all, ~350 jobs in 6 hours); its expected shares
are single-GPU ~ 63%, fractional ~ 18%, multi-GPU ~ 19%, and its long-run offered load is ~ 280
GPU-hours per hour, so a 256-GPU cluster (32 nodes of 8) is slightly oversubscribed and queues must
compete: what a scheduler simulation wants. A 6-hour trace takes a few milliseconds to generate.
"""

from __future__ import annotations

import bisect
import difflib
import json
import math
import pathlib
import random
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final

import yaml

__all__ = [
    "KINDS",
    "PRIORITY_CLASSES",
    "JobSpec",
    "QueueLoad",
    "WorkloadProfile",
    "default_profile",
    "dump_trace",
    "generate",
    "load_trace",
    "trace_stats",
]

# --- vocabulary -------------------------------------------------------------------------------------

KINDS: Final[tuple[str, ...]] = ("train", "inference", "interactive")
PRIORITY_CLASSES: Final[Mapping[str, int]] = {
    "train": 50,
    "build-preemptible": 75,
    "build": 100,
    "inference": 125,
}
DEFAULT_PRIORITY_CLASS: Final[Mapping[str, str]] = {
    "train": "train",
    "inference": "inference",
    "interactive": "build",
}

# --- model parameters (see the module docstring for the sources) ------------------------------------

CPU_MILLI_PER_GPU: Final = 8000
MEMORY_MB_PER_GPU: Final = 64000
GPUS_PER_NODE: Final = 8

TRAIN_SINGLE_GPU_P: Final = 0.75
GANG_SIZE_DECAY: Final = 0.5
SPLIT_SMALL_GANG_P: Final = 0.5
TRAIN_MEDIAN_S: Final = 900.0
TRAIN_SIGMA: Final = 2.04
TRAIN_SIZE_EXPONENT: Final = 0.25
TRAIN_PRIORITY: Final[tuple[tuple[str, float], ...]] = (
    ("train", 0.85),
    ("build-preemptible", 0.10),
    ("build", 0.05),
)

INFERENCE_FRACTIONS: Final[tuple[tuple[float, float], ...]] = ((0.25, 0.5), (0.5, 0.5))
INFERENCE_REPLICAS: Final[tuple[tuple[int, float], ...]] = (
    (1, 0.40),
    (2, 0.30),
    (3, 0.15),
    (4, 0.10),
    (8, 0.05),
)
INFERENCE_MEDIAN_S: Final = 4 * 3600.0
INFERENCE_SIGMA: Final = 1.0

INTERACTIVE_GPUS: Final[tuple[tuple[int, float], ...]] = ((1, 0.85), (2, 0.10), (4, 0.05))
INTERACTIVE_MEDIAN_S: Final = 1800.0
INTERACTIVE_SIGMA: Final = 1.0
INTERACTIVE_MAX_S: Final = 12 * 3600.0

MIN_DURATION_S: Final = 10.0
MAX_DURATION_S: Final = 7 * 86400.0

_DNS1123_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# --- data -------------------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class JobSpec:
    """One job of a trace: `pods` identical pods, started together once `min_member` of them fit."""

    name: str  # unique, DNS-1123 label (e.g. "train-000123")
    queue: str  # leaf queue name
    arrival_s: float  # seconds since trace start
    duration_s: float  # run time once all min_member pods run
    pods: int  # number of pods (>= 1)
    min_member: int  # gang size (== pods for gangs, 1 for singles); <= pods
    gpus_per_pod: float  # whole number (0, 1, 2, 4, 8, ...) or a fraction 0 < f < 1
    cpu_milli_per_pod: int
    memory_mb_per_pod: int  # megabytes (10^6 bytes)
    priority_class: str  # "train" (50), "build-preemptible" (75), "build" (100), "inference" (125)
    kind: str  # "train" | "inference" | "interactive"

    @property
    def total_gpus(self) -> float:
        """GPUs the whole job asks for (pods x gpus_per_pod)."""
        return self.pods * self.gpus_per_pod


@dataclass(slots=True, frozen=True)
class QueueLoad:
    """Work submitted to one leaf queue."""

    queue: str
    jobs_per_hour: float  # Poisson arrival rate
    mix: dict[str, float] = field(hash=False)  # weights over KINDS; need not sum to 1
    max_gang_gpus: int  # largest job (in GPUs) this queue submits

    def __post_init__(self) -> None:
        where = f"queue {self.queue!r}"
        if not isinstance(self.queue, str) or not _DNS1123_SUBDOMAIN.match(self.queue):
            raise ValueError(f"{where}: queue name must be a DNS-1123 name (lowercase letters, digits, '-')")
        if not _is_number(self.jobs_per_hour) or not math.isfinite(self.jobs_per_hour) or self.jobs_per_hour < 0:
            raise ValueError(f"{where}: jobs_per_hour must be a finite number >= 0, got {self.jobs_per_hour!r}")
        if not isinstance(self.mix, Mapping) or not self.mix:
            raise ValueError(f"{where}: mix must be a non-empty mapping of kind -> weight over {KINDS}")
        for kind, weight in self.mix.items():
            if kind not in KINDS:
                raise ValueError(f"{where}: mix has unknown kind {kind!r}; use one of {KINDS}")
            if not _is_number(weight) or not math.isfinite(weight) or weight < 0:
                raise ValueError(f"{where}: mix weight of {kind!r} must be a finite number >= 0, got {weight!r}")
        if sum(self.mix.values()) <= 0:
            raise ValueError(f"{where}: mix weights must not all be 0")
        if isinstance(self.max_gang_gpus, bool) or not isinstance(self.max_gang_gpus, int) or self.max_gang_gpus < 1:
            raise ValueError(f"{where}: max_gang_gpus must be an integer >= 1, got {self.max_gang_gpus!r}")


@dataclass(slots=True, frozen=True)
class WorkloadProfile:
    """Queues, trace length and seed: everything `generate` needs."""

    queues: tuple[QueueLoad, ...]
    hours: float
    seed: int
    max_job_gpus: int = 256  # cap for the heavy tail

    def __post_init__(self) -> None:
        if not isinstance(self.queues, tuple):
            object.__setattr__(self, "queues", tuple(self.queues))
        names = [q.queue for q in self.queues]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"workload profile: queue names must be unique, repeated: {duplicates}")
        if not _is_number(self.hours) or not math.isfinite(self.hours) or self.hours <= 0:
            raise ValueError(f"workload profile: hours must be a finite number > 0, got {self.hours!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"workload profile: seed must be an integer, got {self.seed!r}")
        if isinstance(self.max_job_gpus, bool) or not isinstance(self.max_job_gpus, int) or self.max_job_gpus < 1:
            raise ValueError(f"workload profile: max_job_gpus must be an integer >= 1, got {self.max_job_gpus!r}")


# --- generation -------------------------------------------------------------------------------------


def default_profile(seed: int = 0, hours: float = 6.0) -> WorkloadProfile:
    """Four queues of a mid-size shared cluster: two product teams, research (big gangs), inference."""
    return WorkloadProfile(
        queues=(
            QueueLoad("team-a", 24.0, {"train": 0.75, "interactive": 0.20, "inference": 0.05}, 64),
            QueueLoad("team-b", 16.0, {"train": 0.70, "interactive": 0.25, "inference": 0.05}, 32),
            QueueLoad("research", 8.0, {"train": 0.95, "interactive": 0.05}, 256),
            QueueLoad("inference", 10.0, {"inference": 0.85, "train": 0.15}, 8),
        ),
        hours=hours,
        seed=seed,
    )


# (kind, duration_s, pods, min_member, gpus_per_pod, priority_class)
_Draft = tuple[str, float, int, int, float, str]


class _Table:
    """A discrete distribution sampled with one uniform draw and a bisect."""

    __slots__ = ("_cum", "_total", "_values")

    def __init__(self, pairs: Sequence[tuple[Any, float]]) -> None:
        self._values = [v for v, _ in pairs]
        self._cum: list[float] = []
        total = 0.0
        for _, w in pairs:
            total += w
            self._cum.append(total)
        self._total = total

    def draw(self, rng: random.Random) -> Any:
        i = bisect.bisect_right(self._cum, rng.random() * self._total)
        return self._values[min(i, len(self._values) - 1)]


def _pow2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def _train_sizes(cap: int) -> _Table:
    top = _pow2_floor(cap).bit_length() - 1  # largest i with 2**i <= cap
    if top == 0:
        return _Table([(1, 1.0)])
    multi = [(1 << i, GANG_SIZE_DECAY ** (i - 1)) for i in range(1, top + 1)]
    z = sum(w for _, w in multi)
    return _Table([(1, TRAIN_SINGLE_GPU_P)] + [(g, (1.0 - TRAIN_SINGLE_GPU_P) * w / z) for g, w in multi])


class _QueueSampler:
    __slots__ = ("_interactive", "_kinds", "_train_sizes")

    _train_priority: Final = _Table(TRAIN_PRIORITY)
    _fractions: Final = _Table(INFERENCE_FRACTIONS)
    _replicas: Final = _Table(INFERENCE_REPLICAS)

    def __init__(self, load: QueueLoad, max_job_gpus: int) -> None:
        cap = min(load.max_gang_gpus, max_job_gpus)
        self._kinds = _Table([(k, w) for k, w in sorted(load.mix.items()) if w > 0])
        self._train_sizes = _train_sizes(cap)
        self._interactive = _Table([(g, w) for g, w in INTERACTIVE_GPUS if g <= cap])

    def draw(self, rng: random.Random) -> _Draft:
        kind: str = self._kinds.draw(rng)
        if kind == "train":
            gpus: int = self._train_sizes.draw(rng)
            base = rng.lognormvariate(math.log(TRAIN_MEDIAN_S), TRAIN_SIGMA)
            duration = _clip(base * gpus**TRAIN_SIZE_EXPONENT, MAX_DURATION_S)
            priority: str = self._train_priority.draw(rng)
            if gpus > GPUS_PER_NODE:
                pods = gpus // GPUS_PER_NODE
                return kind, duration, pods, pods, float(GPUS_PER_NODE), priority
            if gpus > 1 and rng.random() < SPLIT_SMALL_GANG_P:
                return kind, duration, gpus, gpus, 1.0, priority
            return kind, duration, 1, 1, float(gpus), priority
        if kind == "inference":
            replicas: int = self._replicas.draw(rng)
            fraction: float = self._fractions.draw(rng)
            duration = _clip(rng.lognormvariate(math.log(INFERENCE_MEDIAN_S), INFERENCE_SIGMA), MAX_DURATION_S)
            return kind, duration, replicas, 1, fraction, "inference"
        gpus = self._interactive.draw(rng)
        duration = _clip(rng.lognormvariate(math.log(INTERACTIVE_MEDIAN_S), INTERACTIVE_SIGMA), INTERACTIVE_MAX_S)
        return kind, duration, 1, 1, float(gpus), "build"


def _clip(duration: float, upper: float) -> float:
    return round(min(max(duration, MIN_DURATION_S), upper), 3)


def generate(profile: WorkloadProfile) -> list[JobSpec]:
    """Jobs of `profile`, sorted by arrival, named ``<kind>-<index>``; the same seed gives the same list."""
    horizon = profile.hours * 3600.0
    drafts: list[tuple[float, int, int, _Draft]] = []
    for qi, load in enumerate(profile.queues):
        if load.jobs_per_hour <= 0:
            continue
        mean_gap_s = 3600.0 / load.jobs_per_hour
        if not math.isfinite(mean_gap_s):  # a subnormal rate: no arrival within any horizon
            continue
        rng = random.Random(f"{profile.seed}/{load.queue}")
        sampler = _QueueSampler(load, profile.max_job_gpus)
        t = 0.0
        seq = 0
        while True:
            t -= mean_gap_s * math.log(1.0 - rng.random())  # exponential gap: a Poisson process
            arrival = round(t, 3)
            if arrival >= horizon:
                break
            drafts.append((arrival, qi, seq, sampler.draw(rng)))
            seq += 1
    drafts.sort(key=lambda d: (d[0], d[1], d[2]))
    jobs: list[JobSpec] = []
    for index, (arrival, qi, _, (kind, duration, pods, min_member, gpp, priority)) in enumerate(drafts):
        jobs.append(
            JobSpec(
                name=f"{kind}-{index:06d}",
                queue=profile.queues[qi].queue,
                arrival_s=arrival,
                duration_s=duration,
                pods=pods,
                min_member=min_member,
                gpus_per_pod=gpp,
                cpu_milli_per_pod=round(CPU_MILLI_PER_GPU * gpp),
                memory_mb_per_pod=round(MEMORY_MB_PER_GPU * gpp),
                priority_class=priority,
                kind=kind,
            )
        )
    return jobs


# --- statistics -------------------------------------------------------------------------------------


def trace_stats(jobs: Sequence[JobSpec]) -> dict[str, float]:
    """Summary of a trace.

    - share_single_gpu: jobs of one pod with exactly 1 whole GPU.
    - share_fractional: jobs whose pods ask for a fraction of a GPU (0 < gpus_per_pod < 1).
    - share_gang: multi-GPU jobs (more than 1 whole GPU in total), which must start whole: several pods
      with min_member == pods, or one pod holding several GPUs.
    - median_duration_s / mean_duration_s over all jobs; train_median_duration_s /
      train_mean_duration_s over kind "train" only (0 when there is none).
    - max_gang_gpus: largest total GPU request of one job.
    - gpu_hours: sum of pods x gpus_per_pod x duration, in hours.
    """
    n = len(jobs)
    if n == 0:
        return {
            "n_jobs": 0.0,
            "share_single_gpu": 0.0,
            "share_fractional": 0.0,
            "share_gang": 0.0,
            "median_duration_s": 0.0,
            "mean_duration_s": 0.0,
            "train_median_duration_s": 0.0,
            "train_mean_duration_s": 0.0,
            "max_gang_gpus": 0.0,
            "gpu_hours": 0.0,
        }
    single = fractional = gang = 0
    gpu_seconds = 0.0
    max_gpus = 0.0
    durations: list[float] = []
    train_durations: list[float] = []
    for job in jobs:
        gpp = job.gpus_per_pod
        total = job.pods * gpp
        if 0 < gpp < 1:
            fractional += 1
        elif job.pods == 1 and gpp == 1:
            single += 1
        elif total > 1:
            gang += 1
        gpu_seconds += total * job.duration_s
        max_gpus = max(max_gpus, total)
        durations.append(job.duration_s)
        if job.kind == "train":
            train_durations.append(job.duration_s)
    return {
        "n_jobs": float(n),
        "share_single_gpu": single / n,
        "share_fractional": fractional / n,
        "share_gang": gang / n,
        "median_duration_s": float(statistics.median(durations)),
        "mean_duration_s": math.fsum(durations) / n,
        "train_median_duration_s": float(statistics.median(train_durations)) if train_durations else 0.0,
        "train_mean_duration_s": math.fsum(train_durations) / max(len(train_durations), 1),
        "max_gang_gpus": float(max_gpus),
        "gpu_hours": gpu_seconds / 3600.0,
    }


# --- trace files ------------------------------------------------------------------------------------

_FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in fields(JobSpec))
_REQUIRED: Final[tuple[str, ...]] = ("name", "queue", "arrival_s", "duration_s", "pods", "gpus_per_pod")

_YamlLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YamlDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _is_json(path: pathlib.Path) -> bool:
    return path.suffix.lower() == ".json"


def _job_to_dict(job: JobSpec) -> dict[str, Any]:
    out: dict[str, Any] = {name: getattr(job, name) for name in _FIELDS}
    gpp = job.gpus_per_pod
    if float(gpp).is_integer():
        out["gpus_per_pod"] = int(gpp)
    return out


def dump_trace(jobs: Sequence[JobSpec], path: str | pathlib.Path) -> None:
    """Write `jobs` to `path`: JSON if it ends in ``.json``, YAML otherwise; one job per line."""
    p = pathlib.Path(path)
    rows = [_job_to_dict(job) for job in jobs]
    if _is_json(p):
        body = ",\n".join("  " + json.dumps(row) for row in rows)
        text = '{"jobs": [\n' + body + "\n]}\n" if rows else '{"jobs": []}\n'
    else:
        text = yaml.dump({"jobs": rows}, Dumper=_YamlDumper, sort_keys=False, default_flow_style=None, width=4096)
    p.write_text(text, encoding="utf-8")


def load_trace(path: str | pathlib.Path) -> list[JobSpec]:
    """Read a trace written by `dump_trace` or by hand, sorted by arrival (stable).

    Required fields: name, queue, arrival_s, duration_s, pods, gpus_per_pod. Optional, with defaults:
    kind ("train"), min_member (pods for train, else 1), priority_class (by kind: train -> "train",
    inference -> "inference", interactive -> "build"), cpu_milli_per_pod and memory_mb_per_pod
    (8000 millicores and 64000 MB per GPU of the pod). Bad input raises ValueError naming the file, the
    job index and the field.
    """
    p = pathlib.Path(path)
    text = p.read_text(encoding="utf-8")
    try:
        data: Any = json.loads(text) if _is_json(p) else yaml.load(text, Loader=_YamlLoader)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        fmt = "JSON" if _is_json(p) else "YAML"
        raise ValueError(f"{p}: not valid {fmt}: {exc}") from exc
    if not isinstance(data, dict) or "jobs" not in data:
        raise ValueError(f'{p}: expected a mapping with a "jobs" list at the top, like {{"jobs": [{{...}}]}}')
    raw_jobs = data["jobs"]
    if raw_jobs is None:
        raw_jobs = []
    if not isinstance(raw_jobs, list):
        raise ValueError(f'{p}: "jobs" must be a list of jobs, got {type(raw_jobs).__name__}')
    jobs: list[JobSpec] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_jobs):
        job = _parse_job(raw, f"{p}: job {index}")
        if job.name in seen:
            raise ValueError(
                f"{p}: job {index}: field 'name': {job.name!r} is already used by job {seen[job.name]}; "
                "job names must be unique"
            )
        seen[job.name] = index
        jobs.append(job)
    jobs.sort(key=lambda j: j.arrival_s)
    return jobs


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Fields:
    """A trace job's fields, each read with its type checked; a bad one is a ValueError naming the job and field."""

    def __init__(self, raw: dict[str, Any], where: str) -> None:
        self.raw = raw
        self.where = where

    def bad(self, key: str, expected: str) -> ValueError:
        return ValueError(f"{self.where}: field {key!r} must be {expected}, got {self.raw[key]!r}")

    def text(self, key: str, pattern: re.Pattern[str], max_len: int, expected: str) -> str:
        value = self.raw[key]
        if not isinstance(value, str) or len(value) > max_len or not pattern.match(value):
            raise self.bad(key, expected)
        return value

    def number(self, key: str) -> float:
        value = self.raw[key]
        if not _is_number(value) or not math.isfinite(value):
            raise self.bad(key, "a finite number")
        return float(value)

    def integer(self, key: str, minimum: int) -> int:
        value = self.raw[key]
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if not _is_number(value) or not whole or value < minimum:
            raise self.bad(key, f"an integer >= {minimum}")
        return int(value)


def _check_keys(raw: dict[str, Any], where: str) -> None:
    for key in raw:
        if key not in _FIELDS:
            close = difflib.get_close_matches(str(key), _FIELDS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known fields: {', '.join(_FIELDS)}"
            raise ValueError(f"{where}: unknown field {key!r}{hint}")
    for key in _REQUIRED:
        if key not in raw:
            raise ValueError(f"{where}: field {key!r} is missing (required: {', '.join(_REQUIRED)})")


def _parse_job(raw: object, where: str) -> JobSpec:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a mapping of field: value, got {type(raw).__name__}")
    if isinstance(raw.get("name"), str):
        where = f"{where} ({raw['name']})"
    _check_keys(raw, where)
    f = _Fields(raw, where)
    bad, text, number, integer = f.bad, f.text, f.number, f.integer
    name = text("name", _DNS1123_LABEL, 63, "a DNS-1123 label (lowercase letters, digits and '-', at most 63)")
    queue = text("queue", _DNS1123_SUBDOMAIN, 253, "a queue name (lowercase letters, digits, '-' and '.')")
    arrival_s = number("arrival_s")
    if arrival_s < 0:
        raise bad("arrival_s", "seconds since the trace start, >= 0")
    duration_s = number("duration_s")
    if duration_s <= 0:
        raise bad("duration_s", "a run time in seconds, > 0")
    pods = integer("pods", 1)
    gpus_per_pod = number("gpus_per_pod")
    if gpus_per_pod < 0 or (gpus_per_pod >= 1 and not gpus_per_pod.is_integer()):
        raise bad("gpus_per_pod", "a whole number of GPUs (0, 1, 2, 4, 8, ...) or a fraction 0 < f < 1 (0.25, 0.5)")
    kind = raw.get("kind", "train")
    if not isinstance(kind, str) or kind not in KINDS:
        raise bad("kind", f"one of {', '.join(KINDS)}")
    min_member = integer("min_member", 1) if "min_member" in raw else (pods if kind == "train" else 1)
    if min_member > pods:
        raise ValueError(
            f"{where}: field 'min_member' ({min_member}) must be <= pods ({pods}); lower min_member or add pods"
        )
    priority_class = raw.get("priority_class", DEFAULT_PRIORITY_CLASS[kind])
    if not isinstance(priority_class, str) or priority_class not in PRIORITY_CLASSES:
        known = ", ".join(f"{k} ({v})" for k, v in PRIORITY_CLASSES.items())
        raise bad("priority_class", f"a known priority class: {known}")
    cpu = integer("cpu_milli_per_pod", 0) if "cpu_milli_per_pod" in raw else round(CPU_MILLI_PER_GPU * gpus_per_pod)
    memory = integer("memory_mb_per_pod", 0) if "memory_mb_per_pod" in raw else round(MEMORY_MB_PER_GPU * gpus_per_pod)
    return JobSpec(
        name=name,
        queue=queue,
        arrival_s=arrival_s,
        duration_s=duration_s,
        pods=pods,
        min_member=min_member,
        gpus_per_pod=gpus_per_pod,
        cpu_milli_per_pod=cpu,
        memory_mb_per_pod=memory,
        priority_class=priority_class,
        kind=kind,
    )
