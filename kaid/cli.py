"""``kaid``, the console script: the scheduler daemon. The commands and their help are in ``kaid.commands``
(typer). ``kaid run`` with well-formed options starts without typer (``kaid.kube.startup.parse_run_args``):
a scheduler's start is on the path of every pod waiting for it. Anything else, ``--help``, a mistyped option
or a bad number included, goes to typer, which parses and explains as for any command."""

from __future__ import annotations

import sys


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["run"]:
        from kaid.kube import startup

        params = startup.parse_run_args(args[1:]) if startup.enabled("argv") else None
        if params is not None:
            sys.exit(startup.run_daemon(**params))
    from kaid.commands import app

    app()
