"""Fixtures shared by the chart tests (tests/test_chart.py) and the end-to-end Helm install."""

from __future__ import annotations

import contextlib

import pytest

from .chart import Helm, ensure_helm, helm_cached


@pytest.fixture(scope="session")
def helm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """helm built from its Go module by .ci/helm/build.sh (a few minutes the first time, then cached)."""
    capture: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is not None and not helm_cached():
        capture = capman.global_and_fixture_disabled()  # a cold build: let its progress reach the terminal
    with capture:
        binary = ensure_helm()
    return Helm(binary, tmp_path_factory.mktemp("helm-home"))
