"""Go-style durations ("90s", "5m", "1h30m", "250ms") as seconds."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_SCALE = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: object) -> float:
    """Seconds in a Go duration string; a bare number is seconds. Raises ValueError with a hint."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration (expected for example 90s, 5m or 1h30m)")
    text = value.strip()
    sign = 1.0
    if text.startswith("-"):
        sign, text = -1.0, text[1:]
    if text in ("0", ""):
        if value.strip() in ("", "-"):
            raise ValueError(f"{value!r} is not a duration (expected for example 90s, 5m or 1h30m)")
        return 0.0
    try:
        return sign * float(text)
    except ValueError:
        pass
    pos = 0
    total = 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _SCALE[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"{value!r} is not a duration (expected for example 90s, 5m or 1h30m)")
    return sign * total
