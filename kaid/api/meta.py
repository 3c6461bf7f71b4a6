"""Reading a Kubernetes object's metadata from its plain dict: one home for the keys every layer uses.

Objects come from the API server, from snapshot files and from people, so nothing here trusts a field's
type: a missing or malformed ``metadata`` reads as empty, never as an error.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from typing import Any

Obj = dict[str, Any]
DEFAULT_NAMESPACE = "default"
_EMPTY: Obj = {}


def meta(obj: Obj) -> Obj:
    """``metadata`` as it is (read, never copied); empty when absent or not a mapping."""
    m = obj.get("metadata")
    return m if isinstance(m, dict) else _EMPTY


def name(obj: Obj) -> str:
    """``metadata.name``; empty when absent."""
    return str(meta(obj).get("name", ""))


def namespace(obj: Obj) -> str:
    """The object's namespace; ``default`` when it has none (as the API server defaults it)."""
    return str(meta(obj).get("namespace") or DEFAULT_NAMESPACE)


def object_key(obj: Obj) -> str:
    """``namespace/name``, the key of pods and jobs everywhere in kai (``Pod.key``, ``Decisions``)."""
    return f"{namespace(obj)}/{name(obj)}"


def store_key(obj: Obj) -> str:
    """``namespace/name`` with an empty namespace for cluster-scoped objects: the watch cache's key."""
    m = meta(obj)
    return f"{m.get('namespace') or ''}/{m.get('name', '')}"


def labels_of(obj: Obj | None) -> Obj:
    """``metadata.labels`` as they are (read, never copied: pods are read by the thousand); a value may be
    other than a string in a snapshot file."""
    return mapping(meta(obj).get("labels")) if obj is not None else _EMPTY


def annotations_of(obj: Obj | None) -> Obj:
    """``metadata.annotations`` as they are (see ``labels_of``)."""
    return mapping(meta(obj).get("annotations")) if obj is not None else _EMPTY


def mapping(value: Any) -> Obj:
    """A field that should be a mapping (labels, annotations), as it is; empty when absent or not one."""
    return value if isinstance(value, dict) else _EMPTY


def string_map(values: Obj) -> dict[str, str]:
    """A copy of labels or annotations with every key and value as text."""
    return {str(k): str(v) for k, v in values.items()}


def annotation(obj: Obj, key: str, default: str = "") -> str:
    """One annotation as text, ``default`` when absent."""
    value = annotations_of(obj).get(key)
    return default if value is None else str(value)


def as_int(value: Any, default: int = 0) -> int:
    """A count from a field that people write (``"3"``, ``3``, garbage): ``default`` when unreadable."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # (OverflowError: an infinite float, which a file may hold)
        return default


def parse_time(value: Any) -> float:
    """RFC 3339 timestamp -> epoch seconds (0 when absent or unreadable)."""
    if not isinstance(value, str) or not value:
        return 0.0
    return _parse_timestamp(value)


@lru_cache(maxsize=4096)  # pods made together share their timestamps (they have whole seconds)
def _parse_timestamp(value: str) -> float:
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def format_time(ts: float) -> str:
    """Epoch seconds -> RFC 3339 (UTC, whole seconds), as kai writes its annotations."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
