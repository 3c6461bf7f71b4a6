"""Restate KAI-Scheduler's per-action table tests (pkg/scheduler/actions/<action>/*_test.go) as the files of
tests/conformance/kai-actions/, reading the Go files from a checkout of KAI at d5bc503a.

The per-action harness (e.g. reclaim_test.go TestHandleReclaim) is test_utils.BuildSession(case), one action's
Execute(ssn), test_utils.MatchExpectedAndRealTasks on the raw session. So every file has match_mode raw_session,
actions [<action>], rounds 1, rounds_after_match 0. Numbering: plan.py. A case the tool cannot restate (an unknown
Go field, an assertion the format cannot hold) is reported and skipped: its number stays free.

  git -C <KAI clone> worktree add /tmp/kai d5bc503a
  python -m tests.conformance.tools.act2yaml --kai-source /tmp/kai --out /tmp/kai-actions [--only allocate-49]
  diff -r /tmp/kai-actions tests/conformance/kai-actions      # only README.md differs
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conformance.tools.builders import HAND_WRITTEN, LITERAL_AT
from tests.conformance.tools.go2yaml import case_at, dump, read_go, restate, revision_warning
from tests.conformance.tools.plan import PLAN, entries

CATEGORIES = tuple(PLAN)


def convert(src: str, path: str, line: int, category: str, literal_line: int | None = None) -> str:
    """One case of the Go file text ``src`` (``path`` in KAI) as a kai-actions file; ``line`` is its source_line (the
    table element's opening '{'), ``literal_line`` where the TestTopologyBasic literal starts for a builder test whose
    case is one literal inside its func (source_line is then the func's line). The action is the category."""
    case = case_at(src, literal_line or line)
    ignored = {k: case.pop(k) for k in ("RoundsUntilMatch", "RoundsAfterMatch") if k in case}
    sc, notes = restate(case, path, line, category)
    if ignored:
        notes.append(f"The case sets {', '.join(f'{k} {v}' for k, v in ignored.items())}: the integration harness's "
                     "fields, which this per-action test does not read (one session, one action).")
    notes = [n for n in notes if not n.startswith("rounds: RoundsUntilMatch")]
    sc.update({"actions": [category], "match_mode": "raw_session", "rounds": 1, "rounds_after_match": 0})
    if category == "stalegangeviction":  # TestStaleGangEviction: ssn.OverrideGlobalDefaultStalenessGracePeriod(60s)
        sc["stale_gang_grace_seconds"] = 60
        notes.append("The source sets the session's default staleness grace period to 60 s "
                     "(ssn.OverrideGlobalDefaultStalenessGracePeriod(60 * time.Second)): stale_gang_grace_seconds.")
    notes.insert(0, f"Per-action test: the source builds one session (test_utils.BuildSession), runs only "
                    f"{category}.New().Execute(ssn) and checks the raw session (MatchExpectedAndRealTasks).")
    if literal_line:
        notes.insert(1, f"Builder test: source_line is its func; the case is the TestTopologyBasic literal at line "
                        f"{literal_line}.")
    return dump(sc, notes)


def generate(kai_source: Path, only: set[str] | None = None) -> tuple[dict[str, str], list[str]]:
    """Every kai-actions file (name -> text) that the KAI checkout gives, or those named in ``only`` (file stems
    such as 'allocate-49'); and one line per case that cannot be restated."""
    files: dict[str, str] = {}
    skipped: list[str] = []
    for category in CATEGORIES:
        for e in entries(kai_source, category):
            name = e.file_name(category)
            if only is not None and name.removesuffix(".yaml") not in only:
                continue
            where = f"{e.path.rpartition('/')[2]}:{e.line}"
            try:
                if (category, e.line) in HAND_WRITTEN and e.kind == "builder":
                    files[name] = HAND_WRITTEN[category, e.line]()
                else:
                    files[name] = convert(read_go(kai_source, e.path), e.path, e.line, category,
                                          LITERAL_AT.get((category, e.line)) if e.kind == "builder" else None)
            except Exception as ex:  # a case the format cannot hold: report, go on
                skipped.append(f"{name.removesuffix('.yaml')} {where} SKIP {type(ex).__name__}: {str(ex)[:150]}")
    return files, skipped


def main(argv: list[str] | None = None, out: Callable[[str], object] = sys.stdout.write) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.conformance.tools.act2yaml", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kai-source", type=Path, required=True,
                    help="a checkout of KAI-Scheduler at d5bc503a (the Go test files are read from it)")
    ap.add_argument("--out", type=Path, required=True, help="folder to write <category>-<nn>.yaml into")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="only these files, e.g. allocate-49 (repeat, or separate by commas)")
    args = ap.parse_args(argv)
    if not (args.kai_source / "pkg/scheduler/actions").is_dir():
        ap.error(f"{args.kai_source} is not a KAI-Scheduler checkout (no pkg/scheduler/actions)")
    if warning := revision_warning(args.kai_source):
        out(warning + "\n")
    only = {n.strip() for o in args.only for n in o.split(",") if n.strip()} if args.only else None
    files, skipped = generate(args.kai_source, only)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text)
    for s in skipped:
        out(s + "\n")
    out(f"{len(files)} files written to {args.out}, {len(skipped)} cases skipped\n")
    if only is not None and (missing := only - {n.removesuffix(".yaml") for n in files}):
        out(f"not written: {', '.join(sorted(missing))}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
