"""Reading snapshot files: a ``v1`` ``List`` or several YAML documents, in YAML or JSON."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from kaid.model.build import READ_KINDS

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when the wheel has it: 5x faster


class SnapshotFileError(ValueError):
    """A snapshot file that cannot be read; the message says which file and what to do."""


def load_objects(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise SnapshotFileError(f"{p}: no such file; save one with `kaictl snapshot save -o {p}`") from None
    except OSError as err:
        raise SnapshotFileError(f"{p}: cannot read it ({err.strerror})") from None
    return parse_objects(text, str(p))


def parse_objects(text: str, origin: str = "<input>") -> list[dict[str, Any]]:
    docs: list[Any]
    stripped = text.lstrip()
    try:
        if stripped.startswith("{") or stripped.startswith("["):
            loaded = json.loads(text)
            docs = loaded if isinstance(loaded, list) else [loaded]
        else:
            docs = list(yaml.load_all(text, Loader=_LOADER))
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SnapshotFileError(f"{origin}: not valid YAML or JSON{where}: {str(err).splitlines()[0]}") from None
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise SnapshotFileError(f"{origin}: document {i + 1} is a {type(doc).__name__}, not a Kubernetes object")
        if doc.get("kind") == "List" or (isinstance(doc.get("items"), list) and "kind" not in doc):
            for j, item in enumerate(doc.get("items") or []):
                if not isinstance(item, dict) or "kind" not in item:
                    raise SnapshotFileError(f"{origin}: item {j + 1} of the List has no kind")
                out.append(_named(item, origin, f"item {j + 1} of the List"))
        elif "kind" not in doc:
            raise SnapshotFileError(f"{origin}: document {i + 1} has no kind; every object needs apiVersion and kind")
        else:
            out.append(_named(doc, origin, f"document {i + 1}"))
    return out


def _named(obj: dict[str, Any], origin: str, where: str) -> dict[str, Any]:
    """The object with a ``metadata.name``: one with only ``generateName`` gets a name made from it, as the API
    server would on create (the suffix is derived from the file and the object's place in it, so the same file
    gives the same names). An object of a kind kai reads with neither is an error; other kinds are kept as
    they are (kai skips them)."""
    m = obj.get("metadata")
    name = m.get("name") if isinstance(m, dict) else None
    generate = m.get("generateName") if isinstance(m, dict) else None
    if isinstance(name, str) and name:
        return obj
    if isinstance(m, dict) and name is None and isinstance(generate, str) and generate:
        suffix = hashlib.sha256(f"{origin}#{where}".encode()).hexdigest()[:5]
        return {**obj, "metadata": {**m, "name": f"{generate}{suffix}"}}
    if obj["kind"] not in READ_KINDS:
        return obj
    raise SnapshotFileError(f"{origin}: {where} ({obj['kind']}) has no metadata.name; give it a name "
                            "(or a metadata.generateName, for a workload to add)")
