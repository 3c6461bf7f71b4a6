"""Fixtures shared by the chart tests (tests/test_chart.py) and the end-to-end Helm install, and the garbage
collector's settings put back after every test."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kaid.model.build import freeze_builds

from .build_script import progress_shown
from .chart import Helm, ensure_helm, helm_cached


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    """A daemon started in the test process (tests/e2e) settles the collector as ``kaid run`` does
    (``kaid.kube.startup.settle_gc``: young thresholds, cold builds frozen until released): process-wide settings
    that must not reach the tests after it, whose snapshots are not released and would never be freed."""
    was_freezing = freeze_builds(False)
    freeze_builds(was_freezing)
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    yield
    freeze_builds(was_freezing)
    gc.set_threshold(*thresholds)
    if enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.fixture(scope="session")
def helm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """helm built from its Go module by .ci/helm/build.sh (a few minutes the first time, then cached)."""
    with progress_shown(request, helm_cached()):
        binary = ensure_helm()
    return Helm(binary, tmp_path_factory.mktemp("helm-home"))
