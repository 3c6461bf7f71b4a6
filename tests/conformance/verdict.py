"""Run one scenario the way KAI's harness does and say how it falls short of KAI's expectations."""

from __future__ import annotations

from collections import defaultdict

from kaid.model.objects import Snapshot
from tests.conformance.harness import Run, start
from tests.conformance.matching import Mismatch, expected_per_task, match, over_limits
from tests.conformance.scenario import MatchMode, Scenario


def _gpus_required(sc: Scenario, snap: Snapshot) -> list[Mismatch]:
    """KAI asserts each expected job's requested GPUs; here it checks that the translation read them right."""
    per_job: dict[str, float] = defaultdict(float)
    for pod in snap.pods:
        if pod.job is not None:
            per_job[pod.job.name] += pod.gpu_whole + pod.gpu_frac * pod.frac_devices / 1000
    out = []
    for job, exp in sc.expected_jobs.items():
        if abs(per_job[job] - exp.gpus_required) > 1e-9:
            out.append(Mismatch(f"{job}: requests {per_job[job]:g} GPUs, KAI says {exp.gpus_required:g}"))
    return out


def _round(run: Run, label: str, raw: bool) -> list[Mismatch]:
    rnd = run.step()
    found = over_limits(run.scenario, rnd.binds, rnd.evictions, rnd.pipelines)
    if raw:
        found += match(run.scenario, rnd.raw)
    return [Mismatch(f"{label}: {m}") for m in found]


def verdict(sc: Scenario) -> list[Mismatch]:
    """Every mismatch with KAI's expectations (empty: the scenario passes)."""
    run = start(sc)
    found = _gpus_required(sc, run.snapshot())
    if sc.match_mode == MatchMode.RAW_SESSION:
        return found + _round(run, "round 1 (raw session)", raw=True)
    for i in range(1, sc.rounds + 1):
        found += _round(run, f"round {i}", raw=False)
    found += [Mismatch(f"after round {sc.rounds}: {m}") for m in match(sc, run.state)]
    for i in range(sc.rounds + 1, sc.rounds + sc.rounds_after_match + 1):
        found += _round(run, f"round {i} (after match)", raw=True)
    return found


def describe(sc: Scenario) -> str:
    """The rounds of a run, for a failure message: what each round decided."""
    run = start(sc)
    lines = []
    wanted = expected_per_task(sc)
    total = sc.rounds + sc.rounds_after_match if sc.match_mode == MatchMode.PROJECTED else 1
    for i in range(1, total + 1):
        rnd = run.step()
        d = rnd.decisions
        acts = [f"bind {b.pod.split('/')[1]}->{b.node}" for b in d.binds]
        acts += [f"evict {e.pod.split('/')[1]} ({e.action} by {e.by})" for e in d.evictions]
        acts += [f"pipeline {p.pod.split('/')[1]}->{p.node} ({p.action})" for p in d.pipelined]
        lines.append(f"  round {i}: " + (", ".join(acts) or "nothing"))
        for job, reasons in sorted(d.pending.items()):
            if any(t.split("/")[-1] in wanted for t in [job]) or i == 1:
                lines.append(f"    pending {job}: " + "; ".join(r.message for r in reasons)[:400])
    return "\n".join(lines)
