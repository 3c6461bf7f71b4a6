"""Running the repository's cached builds (.ci/controlplane, .ci/helm, .ci/image) from the tests.

Each ``build.sh`` returns at once when its cache is complete, else builds (minutes) with its progress on
stderr, and prints what it built as its last stdout line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import pytest


class BuildError(RuntimeError):
    """A build script failed, printed nothing, or ran past its time."""


def is_built(script: Path, flag: str) -> bool:
    """Whether ``script flag`` (its --print-... option) says the build is cached."""
    proc = subprocess.run(["bash", str(script), flag], capture_output=True, check=False, timeout=60)
    return proc.returncode == 0


def run_build(
    script: Path, *, output: IO[str] | None = None, timeout: float = 7200.0, error: type[Exception] = BuildError
) -> Path:
    """Run ``script`` and return the path on its last stdout line; ``error`` when it fails.

    It runs in its own process group, so a timeout or an interrupt stops its compilers too (the script
    removes its temporary directory on SIGTERM).
    """
    proc = subprocess.Popen(
        ["bash", str(script)], stdout=subprocess.PIPE, stderr=output, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        if isinstance(exc, subprocess.TimeoutExpired):
            raise error(f"{script} did not finish within {timeout:.0f}s") from exc
        raise
    if proc.returncode != 0:
        raise error(f"{script} failed with exit status {proc.returncode} (see its output above)")
    lines = stdout.strip().splitlines()
    if not lines:
        raise error(f"{script} printed nothing")
    return Path(lines[-1])


@contextlib.contextmanager
def progress_shown(request: pytest.FixtureRequest, cached: bool) -> Iterator[None]:
    """Around a build in a fixture: when it is not ``cached`` (a long build), let its progress reach the
    terminal instead of pytest's capture."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is None or cached:
        yield
        return
    with capman.global_and_fixture_disabled():
        yield
