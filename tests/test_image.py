"""The kaid image, built without a container engine by .ci/image/build.sh (Debian root file system by
debootstrap, kai installed into it, packed by umoci): its OCI config says what the chart relies on, and
``kaid --help`` / ``kaictl version`` run inside it as the non-root user on a read-only root.

The first build takes a few minutes (cached afterwards; a change to kai's code rebuilds only kai's own
layer, a couple of minutes). It needs root, for debootstrap and chroot; elsewhere the tests are skipped
and say why, as they are in quick loops (``KAI_SKIP_E2E=1``, or ``KAI_SKIP_IMAGE=1`` alone).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .build_script import is_built, progress_shown, run_build

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD = REPO_ROOT / ".ci" / "image" / "build.sh"
VERSION = "0.1.0"

pytestmark = [
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("chroot") is None or shutil.which("unshare") is None,
        reason="the image build needs root, chroot and unshare (debootstrap); run `sudo bash .ci/image/build.sh`",
    ),
    pytest.mark.skipif(
        "1" in (os.environ.get("KAI_SKIP_E2E"), os.environ.get("KAI_SKIP_IMAGE")),
        reason="image build skipped: KAI_SKIP_E2E=1 or KAI_SKIP_IMAGE=1",
    ),
]


@pytest.fixture(scope="module")
def layout(request: pytest.FixtureRequest) -> Path:
    with progress_shown(request, is_built(BUILD, "--print-layout")):
        return run_build(BUILD, timeout=3600)


def blob(layout: Path, descriptor: dict[str, Any]) -> Any:
    algorithm, digest = descriptor["digest"].split(":")
    return json.loads((layout / "blobs" / algorithm / digest).read_text())


def test_image_config_is_what_the_chart_runs(layout: Path) -> None:
    index = json.loads((layout / "index.json").read_text())
    refs = [m for m in index["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == VERSION]
    assert len(index["manifests"]) == 1 and len(refs) == 1, index
    manifest = blob(layout, refs[0])
    config = blob(layout, manifest["config"])["config"]
    assert config["User"] == "65532:65532"  # the chart's runAsUser / runAsGroup
    assert config["Entrypoint"] == ["kaid"] and config["Cmd"] == ["run", "--config", "/etc/kai/config.yaml"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["PATH"].startswith("/opt/kai/bin:") and env["PYTHONDONTWRITEBYTECODE"] == "1"
    # Debian with kai's dependencies, then kai itself: a change to kai's code changes only the small layer.
    assert len(manifest["layers"]) == 2 and manifest["layers"][1]["size"] < 5_000_000, manifest["layers"]


def test_kaid_and_kaictl_run_in_the_image_as_non_root_on_a_read_only_root(layout: Path) -> None:
    proc = subprocess.run(["bash", str(BUILD), "--check"], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Usage: kaid" in proc.stdout and f"kaictl {VERSION}" in proc.stdout
    assert "uid=65532" in proc.stdout and "Read-only file system" in proc.stdout
