"""Fixtures for the end-to-end tests: one real control plane per test session.

The first run builds the binaries with .ci/controlplane/build.sh (tens of minutes; its progress is
shown live); later runs reuse the cache. ``KAI_SKIP_E2E=1`` skips every test in this directory.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..build_script import progress_shown
from .controlplane import ApiError, ControlPlane, binaries_cached, ensure_binaries
from .kaid_helpers import KAI_NAMESPACE, POOL_LABEL, Kaid, KaiInstall, Obj, WebhookProcess, install_kai, suffix

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


@pytest.fixture(scope="module")
def kai(control_plane: ControlPlane) -> KaiInstall:
    """kai installed from ``manifests/`` (once per module), with the default queues."""
    return install_kai(control_plane)


@pytest.fixture
def make_pool(control_plane: ControlPlane) -> Iterator[Callable[..., tuple[str, list[str]]]]:
    """Fake GPU nodes for one test, labelled with a pool name its pods select; cordoned afterwards so they
    add nothing to later tests' capacity."""
    made: list[str] = []

    def make(count: int = 1, gpus: int = 8, **node_args: Any) -> tuple[str, list[str]]:
        pool = f"p{suffix()}"
        names = control_plane.add_gpu_nodes(
            count, gpus=gpus, name_prefix=f"kaid-{pool}", labels={POOL_LABEL: pool}, wait=True, **node_args
        )
        made.extend(names)
        return pool, names

    yield make
    for name in made:
        try:
            control_plane.request(
                "PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}},
                content_type="application/merge-patch+json",
            )  # fmt: skip
        except ApiError as err:
            if err.status != 404:  # a test may delete a node (tests/e2e/test_faults.py)
                raise


@pytest.fixture
def make_queues(control_plane: ControlPlane) -> Iterator[Callable[..., list[str]]]:
    """Create Queues (children after parents); they are deleted after the test."""
    made: list[str] = []

    def make(*queues: Obj) -> list[str]:
        control_plane.apply(list(queues))
        names = [q["metadata"]["name"] for q in queues]
        made.extend(names)
        return names

    yield make
    if made:
        control_plane.kubectl("delete", "queues.scheduling.run.ai", *reversed(made), "--wait=false", check=False)


@pytest.fixture
def start_kaid(kai: KaiInstall, tmp_path: Path) -> Iterator[Callable[..., Kaid]]:
    """Start ``kaid run`` processes (ServiceAccount token, own Lease); all are stopped after the test and
    their logs printed (shown by pytest when the test fails)."""
    started: list[Kaid] = []
    lease = f"kai-e2e-{suffix()}"

    def start(identity: str, *, ready: bool = True, **kwargs: Any) -> Kaid:
        kaid = Kaid(kai.kubeconfig, tmp_path, identity, kwargs.pop("lease", lease), **kwargs)
        started.append(kaid)
        kaid.start()
        if ready:
            kaid.wait_ready()
        return kaid

    yield start
    for kaid in started:
        kaid.stop()
    for kaid in started:
        print(f"===== kaid {kaid.identity} (log {kaid.log_path}) =====\n{kaid.log(200)}")


@pytest.fixture(scope="module")
def kai_webhook(control_plane: ControlPlane, kai: KaiInstall,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    """``kaid webhook`` running here as ServiceAccount kai-webhook and registered with the API server by URL;
    unregistered and stopped after the module."""
    kubeconfig = control_plane.serviceaccount_kubeconfig(KAI_NAMESPACE, "kai-webhook", create=False)
    hook = WebhookProcess(control_plane, kubeconfig, tmp_path_factory.mktemp("webhook"))
    hook.register()
    try:
        hook.start().wait_ready()
        yield hook
    finally:
        hook.stop()
        hook.unregister()
        print(f"===== kaid webhook (log {hook.log_path}) =====\n{hook.log(100)}")
