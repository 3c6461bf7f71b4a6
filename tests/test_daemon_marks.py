"""kaid's annotations on PodGroups (the last-eviction and stale marks) are written on the background writer, where an
exception would go unseen: a write that cannot reach the API server says so in the log and reports that nothing was
written, so that the mark is tried again. (The write itself is checked on the real control plane:
tests/e2e/test_kaid.py, test_preempted_job_podgroup_carries_its_last_eviction.)"""

from __future__ import annotations

import logging
import socket

import pytest

from kaid.api import constants as c
from kaid.kube.client import KubeClient
from kaid.kube.daemon import Daemon
from kaid.model.objects import Job


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_a_mark_the_api_server_never_got_is_not_written_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    client = KubeClient(f"http://127.0.0.1:{_closed_port()}")
    with caplog.at_level(logging.INFO, logger="kaid"):
        job = Job("team-a", "pg-train")
        written = Daemon._annotate(client, job, c.LAST_EVICTION_ANNOTATION, "2026-11-28T03:00:00Z")
    assert written is False
    assert any("team-a/pg-train not written" in r.getMessage() for r in caplog.records), caplog.records
