"""How long this process has been running: kaid's start-up logs say where its first second goes."""

from __future__ import annotations

import os
import time
from pathlib import Path


def process_age() -> float:
    """Seconds since this process began (Linux: from /proc; elsewhere since this module was imported)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED


_IMPORTED = time.monotonic()
