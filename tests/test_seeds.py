"""The fair shares the seeds' walk-throughs show, computed from their scenario files (tests/scenarios/seed-*)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kaid.api.config import SchedulerConfig
from kaid.fairshare import compute_fair_share
from kaid.model.build import build_snapshot
from kaid.model.objects import GPU

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def fair_shares(name: str, cfg: SchedulerConfig | None = None) -> dict[str, float]:
    docs = [d for d in yaml.safe_load_all((SCENARIOS / name).read_text()) if d and d.get("kind") != "Scenario"]
    snap = build_snapshot(docs, cfg or SchedulerConfig())
    compute_fair_share(snap)
    return {q.name: q.fair[GPU] / 1000 for q in snap.queues.values()}


def test_seed_000_fair_shares_of_gpu_only_queues() -> None:
    """18.29 / 9.14 / 4.57 of 32 GPUs: the three queues' gpu quotas, which add up to the cluster."""
    s = fair_shares("seed-000-gpu-only-queue-tree.yaml")
    assert (s["research"], s["product"], s["interns"]) == (18.29, 9.14, 4.57)
    assert s["company"] == 32


def test_seed_000_cpu_and_memory_are_unmanaged() -> None:
    """The queues do not mention cpu or memory: no guarantee and no limit, so a share of what is asked for; with
    KAI's reading they would get nothing (and their pods would wait forever)."""
    docs = [d for d in yaml.safe_load_all((SCENARIOS / "seed-000-gpu-only-queue-tree.yaml").read_text())
            if d and d.get("kind") != "Scenario"]
    for reading, runs in (("unmanaged", True), ("kai", False)):
        snap = build_snapshot(docs, SchedulerConfig(unmentionedQueueResources=reading))
        research = snap.queues["research"]
        assert (research.effective_limit(1) == -1) is runs and (research.effective_limit(2) == -1) is runs


@pytest.mark.parametrize(("queue", "share"), [("research", 14), ("product", 2), ("nlp", 10), ("vision", 4),
                                              ("search", 2)])
def test_seed_002_department_tree(queue: str, share: float) -> None:
    assert fair_shares("seed-002-department-tree.yaml")[queue] == share
