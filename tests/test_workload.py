"""Tests for kaid.sim.workload: the synthetic workload generator and trace files."""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import math
import pathlib
import re
import statistics
import tempfile
import time
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaid.sim import workload as wl
from kaid.sim.workload import (
    JobSpec,
    QueueLoad,
    WorkloadProfile,
    default_profile,
    dump_trace,
    generate,
    load_trace,
    trace_stats,
)

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _is_pow2(n: float) -> bool:
    return n >= 1 and float(n).is_integer() and (int(n) & (int(n) - 1)) == 0


def _expected_shares(profile: WorkloadProfile) -> tuple[float, float]:
    """Expected (single-GPU, fractional) job shares of a profile whose queues all allow gangs >= 4."""
    rate = single = fractional = 0.0
    for q in profile.queues:
        total = sum(q.mix.values())
        p = {k: w / total for k, w in q.mix.items()}
        rate += q.jobs_per_hour
        single_p = p.get("train", 0.0) * wl.TRAIN_SINGLE_GPU_P + p.get("interactive", 0.0) * 0.85
        single += q.jobs_per_hour * single_p
        fractional += q.jobs_per_hour * p.get("inference", 0.0)
    return single / rate, fractional / rate


@pytest.fixture(scope="module")
def big_profile() -> WorkloadProfile:
    return default_profile(seed=11, hours=350.0)


@pytest.fixture(scope="module")
def big_trace(big_profile: WorkloadProfile) -> list[JobSpec]:
    return generate(big_profile)


# --- determinism ------------------------------------------------------------------------------------


def test_same_seed_same_trace() -> None:
    assert generate(default_profile(seed=7)) == generate(default_profile(seed=7))


def test_different_seeds_differ() -> None:
    a, b = generate(default_profile(seed=1)), generate(default_profile(seed=2))
    assert a != b
    assert [j.arrival_s for j in a[:20]] != [j.arrival_s for j in b[:20]]


def test_does_not_touch_global_random() -> None:
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    generate(default_profile(seed=3))
    assert random.random() == expected


def test_queue_streams_are_independent() -> None:
    base = default_profile(seed=5)
    changed_queues = tuple(
        dataclasses.replace(q, jobs_per_hour=q.jobs_per_hour * 3) if q.queue == "team-b" else q for q in base.queues
    )
    changed = dataclasses.replace(base, queues=changed_queues)

    def team_a(jobs: list[JobSpec]) -> list[tuple[Any, ...]]:
        return [dataclasses.astuple(dataclasses.replace(j, name="x")) for j in jobs if j.queue == "team-a"]

    assert team_a(generate(base)) == team_a(generate(changed))
    assert len(generate(changed)) > len(generate(base))


# --- statistics of a large trace --------------------------------------------------------------------


def test_large_trace_shares(big_profile: WorkloadProfile, big_trace: list[JobSpec]) -> None:
    stats = trace_stats(big_trace)
    assert 18_000 <= stats["n_jobs"] <= 22_500
    exp_single, exp_fractional = _expected_shares(big_profile)
    # published bands: most jobs ask for one GPU, a sizeable share is fractional inference
    assert 0.60 <= stats["share_single_gpu"] <= 0.75
    assert 0.10 <= stats["share_fractional"] <= 0.25
    assert 0.10 <= stats["share_gang"] <= 0.30
    # and the model's own expectation, within ~6 standard deviations at n = 20k
    assert abs(stats["share_single_gpu"] - exp_single) < 0.02
    assert abs(stats["share_fractional"] - exp_fractional) < 0.02
    assert math.isclose(stats["share_single_gpu"] + stats["share_fractional"] + stats["share_gang"], 1.0)


def test_large_trace_train_durations(big_trace: list[JobSpec]) -> None:
    stats = trace_stats(big_trace)
    median, mean = stats["train_median_duration_s"], stats["train_mean_duration_s"]
    assert 10 * 60 <= median <= 20 * 60, median
    assert 3600 <= mean <= 3 * 3600, mean
    assert 4 <= mean / median <= 14
    train = [j.duration_s for j in big_trace if j.kind == "train"]
    assert min(train) >= wl.MIN_DURATION_S
    assert max(train) <= wl.MAX_DURATION_S
    assert max(train) > 2 * 86400  # the heavy tail is there


def test_large_trace_other_kinds(big_trace: list[JobSpec]) -> None:
    inference = [j for j in big_trace if j.kind == "inference"]
    interactive = [j for j in big_trace if j.kind == "interactive"]
    assert statistics.median(j.duration_s for j in inference) > 2 * 3600  # long-running
    assert all(0 < j.gpus_per_pod < 1 and j.min_member == 1 for j in inference)
    assert {j.gpus_per_pod for j in inference} == {0.25, 0.5}
    assert sum(j.pods > 1 for j in inference) / len(inference) > 0.4  # often several replicas
    assert all(j.pods == 1 and j.duration_s <= wl.INTERACTIVE_MAX_S for j in interactive)
    assert 15 * 60 <= statistics.median(j.duration_s for j in interactive) <= 60 * 60


def test_large_trace_gang_shapes(big_profile: WorkloadProfile, big_trace: list[JobSpec]) -> None:
    caps = {q.queue: min(q.max_gang_gpus, big_profile.max_job_gpus) for q in big_profile.queues}
    sizes: collections.Counter[float] = collections.Counter()
    split = whole = 0
    for job in big_trace:
        assert 1 <= job.min_member <= job.pods
        if job.kind == "inference":
            continue
        total = job.total_gpus
        assert _is_pow2(total), job
        assert total <= caps[job.queue], job
        if job.kind != "train":
            continue
        sizes[total] += 1
        if total > 8:
            assert (job.pods, job.gpus_per_pod, job.min_member) == (total // 8, 8.0, total // 8)
        elif total > 1:
            if job.pods == 1:
                whole += 1
                assert job.gpus_per_pod == total and job.min_member == 1
            else:
                split += 1
                assert job.gpus_per_pod == 1 and job.min_member == job.pods == total
    # probability decays with size, roughly halving per doubling
    assert sizes[1] > sizes[2] > sizes[4] > sizes[8] > sizes[16] > sizes[32]
    for g in (2, 4, 8):
        assert 0.35 <= sizes[2 * g] / sizes[g] <= 0.65
    assert max(sizes) >= 64
    assert 0.45 <= split / (split + whole) <= 0.55


def test_resources_and_priorities(big_trace: list[JobSpec]) -> None:
    train_classes: collections.Counter[str] = collections.Counter()
    for job in big_trace:
        assert job.cpu_milli_per_pod == round(wl.CPU_MILLI_PER_GPU * job.gpus_per_pod)
        assert job.memory_mb_per_pod == round(wl.MEMORY_MB_PER_GPU * job.gpus_per_pod)
        assert job.priority_class in wl.PRIORITY_CLASSES
        if job.kind == "inference":
            assert job.priority_class == "inference"
        elif job.kind == "interactive":
            assert job.priority_class == "build"
        else:
            train_classes[job.priority_class] += 1
    n = sum(train_classes.values())
    assert 0.80 <= train_classes["train"] / n <= 0.90  # mostly preemptible "train"


def test_arrivals_sorted_within_horizon_and_names(big_profile: WorkloadProfile, big_trace: list[JobSpec]) -> None:
    arrivals = [j.arrival_s for j in big_trace]
    assert arrivals == sorted(arrivals)
    assert arrivals[0] >= 0 and arrivals[-1] < big_profile.hours * 3600
    names = [j.name for j in big_trace]
    assert len(set(names)) == len(names)
    assert all(
        DNS1123.match(n) and len(n) <= 63 and n.startswith(j.kind) for n, j in zip(names, big_trace, strict=True)
    )


def test_per_queue_arrival_counts(big_profile: WorkloadProfile, big_trace: list[JobSpec]) -> None:
    counts = collections.Counter(j.queue for j in big_trace)
    for q in big_profile.queues:
        expected = q.jobs_per_hour * big_profile.hours
        assert abs(counts[q.queue] - expected) <= 4 * math.sqrt(expected) + 1, (q.queue, counts[q.queue])


def test_arrivals_look_poisson(big_profile: WorkloadProfile, big_trace: list[JobSpec]) -> None:
    times = [j.arrival_s for j in big_trace if j.queue == "team-a"]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    mean_gap = 3600 / 24
    assert abs(statistics.fmean(gaps) / mean_gap - 1) < 0.05
    # exponential: coefficient of variation 1
    assert abs(statistics.pstdev(gaps) / statistics.fmean(gaps) - 1) < 0.08


def test_default_profile_is_fast() -> None:
    profile = default_profile()
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        jobs = generate(profile)
        best = min(best, time.perf_counter() - start)
    assert best < 0.1
    assert 200 <= len(jobs) <= 500
    assert {j.queue for j in jobs} == {"team-a", "team-b", "research", "inference"}


# --- caps, edge cases, profile validation -----------------------------------------------------------


def test_max_job_gpus_caps_the_tail() -> None:
    profile = WorkloadProfile((QueueLoad("q", 2000.0, {"train": 1.0}, 1024),), hours=5.0, seed=1, max_job_gpus=16)
    jobs = generate(profile)
    assert max(j.total_gpus for j in jobs) == 16
    assert abs(trace_stats(jobs)["share_single_gpu"] - wl.TRAIN_SINGLE_GPU_P) < 0.02


def test_non_power_of_two_cap_rounds_down() -> None:
    profile = WorkloadProfile((QueueLoad("q", 2000.0, {"train": 1.0, "interactive": 1.0}, 12),), 3.0, 2)
    assert max(j.total_gpus for j in generate(profile)) == 8


def test_cap_of_one_gives_single_gpu_jobs_only() -> None:
    profile = WorkloadProfile((QueueLoad("q", 500.0, {"train": 1.0, "interactive": 1.0}, 64),), 2.0, 3, max_job_gpus=1)
    jobs = generate(profile)
    assert jobs and all(j.pods == 1 and j.gpus_per_pod == 1 for j in jobs)


def test_zero_rate_queue_submits_nothing() -> None:
    profile = WorkloadProfile(
        (QueueLoad("idle", 0.0, {"train": 1.0}, 8), QueueLoad("busy", 100.0, {"train": 1.0}, 8)), 1.0, 0
    )
    jobs = generate(profile)
    assert jobs and {j.queue for j in jobs} == {"busy"}


def test_vanishing_rate_submits_nothing() -> None:
    profile = WorkloadProfile((QueueLoad("q", 5e-324, {"train": 1.0}, 8),), 1.0, 0)
    assert generate(profile) == []


def test_profile_accepts_a_list_of_queues() -> None:
    profile = WorkloadProfile([QueueLoad("q", 1.0, {"train": 1.0}, 8)], 1.0, 0)  # type: ignore[arg-type]
    assert isinstance(profile.queues, tuple)
    hash(profile)


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: QueueLoad("q", -1.0, {"train": 1.0}, 8), "jobs_per_hour"),
        (lambda: QueueLoad("q", math.inf, {"train": 1.0}, 8), "jobs_per_hour"),
        (lambda: QueueLoad("q", 1.0, {"batch": 1.0}, 8), "unknown kind 'batch'"),
        (lambda: QueueLoad("q", 1.0, {}, 8), "mix"),
        (lambda: QueueLoad("q", 1.0, {"train": 0.0}, 8), "must not all be 0"),
        (lambda: QueueLoad("q", 1.0, {"train": -1.0}, 8), "mix weight"),
        (lambda: QueueLoad("q", 1.0, {"train": 1.0}, 0), "max_gang_gpus"),
        (lambda: QueueLoad("Team A", 1.0, {"train": 1.0}, 8), "DNS-1123"),
        (lambda: WorkloadProfile((), 0.0, 0), "hours"),
        (lambda: WorkloadProfile((), 1.0, 0, max_job_gpus=0), "max_job_gpus"),
        (
            lambda: WorkloadProfile(
                (QueueLoad("q", 1.0, {"train": 1.0}, 8), QueueLoad("q", 2.0, {"train": 1.0}, 8)), 1.0, 0
            ),
            "unique",
        ),
    ],
)
def test_profile_validation(make: Any, needle: str) -> None:
    with pytest.raises(ValueError, match=re.escape(needle)):
        make()


queue_loads = st.builds(
    QueueLoad,
    queue=st.sampled_from(["a", "b", "team-c", "research", "inf"]),
    jobs_per_hour=st.floats(0.0, 300.0),
    mix=st.dictionaries(st.sampled_from(wl.KINDS), st.floats(0.0, 5.0), min_size=1).filter(
        lambda m: sum(m.values()) > 0
    ),
    max_gang_gpus=st.integers(1, 1000),
)
profiles = st.builds(
    WorkloadProfile,
    queues=st.lists(queue_loads, max_size=4, unique_by=lambda q: q.queue).map(tuple),
    hours=st.floats(0.01, 4.0),
    seed=st.integers(-(2**40), 2**40),
    max_job_gpus=st.integers(1, 512),
)


@settings(max_examples=60, deadline=None)
@given(profiles)
def test_generated_traces_are_well_formed(profile: WorkloadProfile) -> None:
    jobs = generate(profile)
    assert jobs == generate(profile)
    horizon = profile.hours * 3600
    caps = {q.queue: min(q.max_gang_gpus, profile.max_job_gpus) for q in profile.queues}
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    assert len({j.name for j in jobs}) == len(jobs)
    for job in jobs:
        assert 0 <= job.arrival_s < horizon
        assert DNS1123.match(job.name)
        assert job.kind in wl.KINDS and job.priority_class in wl.PRIORITY_CLASSES
        assert 1 <= job.min_member <= job.pods
        assert job.min_member in (1, job.pods)
        assert wl.MIN_DURATION_S <= job.duration_s <= wl.MAX_DURATION_S
        if 0 < job.gpus_per_pod < 1:
            assert job.kind == "inference"
        else:
            assert job.gpus_per_pod in (1, 2, 4, 8)
            assert _is_pow2(job.total_gpus) and job.total_gpus <= caps[job.queue]


# --- trace files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_dump_load_round_trip(tmp_path: pathlib.Path, suffix: str) -> None:
    jobs = generate(default_profile(seed=9, hours=24.0))
    path = tmp_path / f"trace{suffix}"
    dump_trace(jobs, path)
    assert load_trace(path) == jobs
    assert load_trace(str(path)) == jobs


def test_dump_writes_the_documented_shape(tmp_path: pathlib.Path) -> None:
    jobs = generate(default_profile(seed=9))[:3]
    dump_trace(jobs, tmp_path / "t.json")
    dump_trace(jobs, tmp_path / "t.yaml")
    from_json = json.loads((tmp_path / "t.json").read_text())
    from_yaml = yaml.safe_load((tmp_path / "t.yaml").read_text())
    assert from_json == from_yaml
    assert list(from_json) == ["jobs"] and len(from_json["jobs"]) == 3
    assert list(from_json["jobs"][0]) == [f.name for f in dataclasses.fields(JobSpec)]
    # one job per line
    assert len((tmp_path / "t.yaml").read_text().splitlines()) == 4


def test_empty_trace_round_trip(tmp_path: pathlib.Path) -> None:
    for name in ("e.yaml", "e.json"):
        dump_trace([], tmp_path / name)
        assert load_trace(tmp_path / name) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles, st.sampled_from([".yaml", ".json"]))
def test_round_trip_property(profile: WorkloadProfile, suffix: str) -> None:
    jobs = generate(profile)
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / f"trace{suffix}"
        dump_trace(jobs, path)
        assert load_trace(path) == jobs


def _good_job(**overrides: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": "job-1",
        "queue": "team-a",
        "arrival_s": 10.0,
        "duration_s": 60.0,
        "pods": 2,
        "min_member": 2,
        "gpus_per_pod": 1,
        "cpu_milli_per_pod": 8000,
        "memory_mb_per_pod": 64000,
        "priority_class": "train",
        "kind": "train",
    }
    job.update(overrides)
    return job


def _write(tmp_path: pathlib.Path, jobs: list[Any], suffix: str = ".yaml") -> pathlib.Path:
    path = tmp_path / f"bad{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps({"jobs": jobs}))
    else:
        path.write_text(yaml.safe_dump({"jobs": jobs}))
    return path


def _without(key: str) -> dict[str, Any]:
    job = _good_job(name="job-2")
    del job[key]
    return job


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize(
    ("bad", "field", "needle"),
    [
        (_without("duration_s"), "duration_s", "missing"),
        (_without("name"), "name", "missing"),
        (_without("gpus_per_pod"), "gpus_per_pod", "missing"),
        (_good_job(name="job-2", duration_s=-5), "duration_s", "-5"),
        (_good_job(name="job-2", duration_s=0), "duration_s", "> 0"),
        (_good_job(name="job-2", arrival_s=-1.0), "arrival_s", ">= 0"),
        (_good_job(name="job-2", min_member=3), "min_member", "<= pods"),
        (_good_job(name="job-2", min_member=0), "min_member", "integer >= 1"),
        (_good_job(name="job-2", gpus_per_pod=1.5), "gpus_per_pod", "whole number"),
        (_good_job(name="job-2", gpus_per_pod=-0.5), "gpus_per_pod", "fraction"),
        (_good_job(name="job-2", gpus_per_pod="one"), "gpus_per_pod", "finite number"),
        (_good_job(name="job-2", priority_class="urgent"), "priority_class", "build-preemptible"),
        (_good_job(name="job-2", kind="batch"), "kind", "interactive"),
        (_good_job(name="job-2", pods=0), "pods", "integer >= 1"),
        (_good_job(name="job-2", pods=1.5), "pods", "integer"),
        (_good_job(name="job-2", pods=True), "pods", "integer"),
        (_good_job(name="Job_2"), "name", "DNS-1123"),
        (_good_job(name="job-1"), "name", "already used by job 0"),
        (_good_job(name="job-2", queue=""), "queue", "queue name"),
        (_good_job(name="job-2", cpu_milli_per_pod=-1), "cpu_milli_per_pod", ">= 0"),
        (_good_job(name="job-2", memory_mb_per_pod=1.5), "memory_mb_per_pod", "integer"),
        (_good_job(name="job-2", gpu_per_pod=1), "gpu_per_pod", "did you mean 'gpus_per_pod'"),
    ],
)
def test_load_trace_errors_name_file_index_and_field(
    tmp_path: pathlib.Path, suffix: str, bad: dict[str, Any], field: str, needle: str
) -> None:
    path = _write(tmp_path, [_good_job(), bad], suffix)
    with pytest.raises(ValueError) as excinfo:
        load_trace(path)
    message = str(excinfo.value)
    assert str(path) in message
    assert "job 1" in message
    assert f"'{field}'" in message
    assert needle in message


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("jobs: [", "not valid YAML"),
        ("- a\n- b\n", '"jobs" list'),
        ("jobs: 3\n", "must be a list"),
        ("jobs:\n  - 3\n", "job 0: expected a mapping"),
    ],
)
def test_load_trace_structure_errors(tmp_path: pathlib.Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(needle)) as excinfo:
        load_trace(path)
    assert str(path) in str(excinfo.value)


def test_load_trace_bad_json(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"jobs": [}')
    with pytest.raises(ValueError, match="not valid JSON"):
        load_trace(path)


def test_load_trace_defaults_and_sorting(tmp_path: pathlib.Path) -> None:
    jobs = [
        {"name": "late", "queue": "q", "arrival_s": 50, "duration_s": 5, "pods": 4, "gpus_per_pod": 1},
        {"name": "serve", "queue": "q", "arrival_s": 0, "duration_s": 5, "pods": 3, "gpus_per_pod": 0.5,
         "kind": "inference"},
        {"name": "nb", "queue": "q", "arrival_s": 20, "duration_s": 5, "pods": 1, "gpus_per_pod": 2,
         "kind": "interactive"},
    ]  # fmt: skip
    loaded = load_trace(_write(tmp_path, jobs))
    assert [j.name for j in loaded] == ["serve", "nb", "late"]
    serve, nb, late = loaded
    assert (late.min_member, late.priority_class, late.kind) == (4, "train", "train")
    assert (late.cpu_milli_per_pod, late.memory_mb_per_pod) == (8000, 64000)
    assert isinstance(late.gpus_per_pod, float) and isinstance(late.arrival_s, float)
    assert (serve.min_member, serve.priority_class, serve.cpu_milli_per_pod) == (1, "inference", 4000)
    assert (nb.min_member, nb.priority_class, nb.memory_mb_per_pod) == (1, "build", 128000)


def test_load_trace_accepts_cpu_only_pods(tmp_path: pathlib.Path) -> None:
    (job,) = load_trace(_write(tmp_path, [_good_job(gpus_per_pod=0, cpu_milli_per_pod=500)]))
    assert job.gpus_per_pod == 0.0 and job.cpu_milli_per_pod == 500


# --- trace_stats ------------------------------------------------------------------------------------


def test_trace_stats_small_trace() -> None:
    def job(name: str, pods: int, min_member: int, gpp: float, duration: float, kind: str = "train") -> JobSpec:
        return JobSpec(name, "q", 0.0, duration, pods, min_member, gpp, 0, 0, "train", kind)

    jobs = [
        job("a", 1, 1, 1.0, 100.0),
        job("b", 1, 1, 1.0, 300.0),
        job("c", 2, 1, 0.5, 3600.0, "inference"),
        job("d", 4, 4, 8.0, 3600.0),
    ]
    stats = trace_stats(jobs)
    assert stats["n_jobs"] == 4
    assert stats["share_single_gpu"] == 0.5
    assert stats["share_fractional"] == 0.25
    assert stats["share_gang"] == 0.25
    assert stats["median_duration_s"] == (300 + 3600) / 2
    assert stats["mean_duration_s"] == pytest.approx((100 + 300 + 3600 + 3600) / 4)
    assert stats["train_median_duration_s"] == 300
    assert stats["max_gang_gpus"] == 32
    assert stats["gpu_hours"] == pytest.approx((100 + 300 + 3600 + 32 * 3600) / 3600)


def test_trace_stats_empty() -> None:
    stats = trace_stats([])
    assert stats["n_jobs"] == 0
    assert all(v == 0 for v in stats.values())
    assert set(stats) >= {
        "n_jobs",
        "share_single_gpu",
        "share_fractional",
        "share_gang",
        "median_duration_s",
        "mean_duration_s",
        "max_gang_gpus",
        "gpu_hours",
    }
