"""Fixtures shared by the chart tests (tests/test_chart.py) and the end-to-end Helm install."""

from __future__ import annotations

import pytest

from .build_script import progress_shown
from .chart import Helm, ensure_helm, helm_cached


@pytest.fixture(scope="session")
def helm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """helm built from its Go module by .ci/helm/build.sh (a few minutes the first time, then cached)."""
    with progress_shown(request, helm_cached()):
        binary = ensure_helm()
    return Helm(binary, tmp_path_factory.mktemp("helm-home"))
