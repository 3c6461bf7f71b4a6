"""Compare scenario files of the integration folders (tests/conformance/kai/, kai-more/) with what ``go2yaml`` makes
of the Go case each names (``source``, ``source_line``, the category from the file name), everything but ``notes``.

    python -m tests.conformance.tools.check --kai-source /tmp/kai \
        tests/conformance/kai/*.yaml tests/conformance/kai-more/*.yaml      # 115 same, 3 skipped

Files that hold no scenario (fairshare.yaml) are skipped; kai-more/reclaim-50 and -51 are compared with
``builders``; other raw-session files restate a custom Go harness, not a table case, and are not compared.
Exit status 1 when a compared file differs or cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.conformance.tools.builders import INTEGRATION_HAND_WRITTEN
from tests.conformance.tools.go2yaml import convert, revision_warning


def differences(have: Any, want: Any, where: str = "") -> list[str]:
    """Where two loaded scenarios differ ('' is the top): one line per differing leaf, list or key."""
    if isinstance(have, dict) and isinstance(want, dict):
        return [d for k in sorted(set(have) | set(want), key=str)
                for d in differences(have.get(k), want.get(k), f"{where}.{k}")]
    if isinstance(have, list) and isinstance(want, list) and len(have) == len(want):
        return [d for i, (x, y) in enumerate(zip(have, want, strict=True)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if have == want else [f"{where or '.'}: file={have!r} tool={want!r}"[:300]]


def check_file(kai_source: Path, path: Path) -> tuple[str, list[str]]:
    """('same' | 'DIFFERS' | why it was not compared, the differences)."""
    have = yaml.safe_load(path.read_text())
    if not isinstance(have, dict) or "source_line" not in have:
        return "skipped: not a scenario file", []
    builder = INTEGRATION_HAND_WRITTEN.get((have["source"], have["source_line"]))
    if builder is not None:
        want = yaml.safe_load(builder())
    elif have.get("match_mode") == "raw_session":
        return "skipped: a custom harness (raw_session), not a table case", []
    else:
        want = yaml.safe_load(convert(kai_source, have["source"], have["source_line"], path.stem.rpartition("-")[0]))
    have.pop("notes", None)
    want.pop("notes", None)
    diffs = differences(have, want)
    return ("DIFFERS" if diffs else "same"), diffs


def main(argv: list[str] | None = None, out: Callable[[str], object] = sys.stdout.write) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.conformance.tools.check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kai-source", type=Path, required=True, help="a checkout of KAI-Scheduler at d5bc503a")
    ap.add_argument("files", nargs="+", type=Path, metavar="YAML")
    args = ap.parse_args(argv)
    if warning := revision_warning(args.kai_source):
        out(warning + "\n")
    counts: dict[str, int] = {}
    for path in args.files:
        try:
            verdict, diffs = check_file(args.kai_source, path)
        except Exception as e:  # report every file, then fail
            verdict, diffs = "DIFFERS", [f"tool cannot read: {type(e).__name__}: {str(e)[:150]}"]
        counts[verdict] = counts.get(verdict, 0) + 1
        out(f"{path.parent.name}/{path.name}: {verdict}\n" + "".join(f"  {d}\n" for d in diffs))
    out(", ".join(f"{n} {v}" for v, n in sorted(counts.items())) + "\n")
    return 1 if "DIFFERS" in counts else 0


if __name__ == "__main__":
    sys.exit(main())
