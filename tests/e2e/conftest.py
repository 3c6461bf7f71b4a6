"""Fixtures for the end-to-end tests: one real control plane per test session.

The first run builds the binaries with .ci/controlplane/build.sh (tens of minutes; its progress is
shown live); later runs reuse the cache. ``KAI_SKIP_E2E=1`` skips every test in this directory.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..build_script import progress_shown
from .controlplane import ControlPlane, binaries_cached, ensure_binaries

E2E_DIR = Path(__file__).resolve().parent
SKIP_REASON = "end-to-end tests skipped: KAI_SKIP_E2E=1"


def _skip_requested() -> bool:
    return os.environ.get("KAI_SKIP_E2E") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: end-to-end tests against a real control plane built by .ci/controlplane/build.sh"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/e2e is marked ``e2e``; all are skipped when KAI_SKIP_E2E=1."""
    for item in items:
        if E2E_DIR not in item.path.parents:
            continue
        item.add_marker(pytest.mark.e2e)
        if _skip_requested():
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A running control plane shared by the whole session; stopped at the end, whatever happens."""
    if _skip_requested():
        pytest.skip(SKIP_REASON)
    with progress_shown(request, binaries_cached()):
        bindir = ensure_binaries()
    cp = ControlPlane(bindir=bindir)
    cp.start()  # stops whatever it started if it fails
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, usable for pods (its default ServiceAccount exists)."""
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    control_plane.ensure_namespace(name)
    control_plane.wait_for_default_serviceaccount(name)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)
