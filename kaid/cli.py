"""``kaid``, the console script: the scheduler daemon. The commands and their help are in ``kaid.commands``
(typer). ``kaid run`` with options that need no explaining starts here, without typer: typer and what it
loads to read arguments (pydantic's type adapters among them) cost a tenth of a second before the first
request, and a scheduler's start is on the path of every pod waiting for it. Anything else, ``--help``, a
mistyped option or a bad number included, goes to typer, which parses and explains as for any command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# ``kaid run``'s options, as ``kaid.commands.run`` declares them (tests/test_cli.py keeps the two equal):
# option -> (parameter, type of its value; None: a flag, whose value is in RUN_FLAGS)
RUN_OPTIONS: dict[str, tuple[str, type | None]] = {
    "--kubeconfig": ("kubeconfig", Path), "--context": ("context", str), "--config": ("config", Path),
    "--identity": ("identity", str), "--metrics-port": ("metrics_port", int),
    "--metrics-address": ("metrics_address", str), "--log-level": ("log_level", str),
    "--leader-elect": ("leader_elect", None), "--no-leader-elect": ("leader_elect", None),
}
RUN_FLAGS: dict[str, bool] = {"--leader-elect": True, "--no-leader-elect": False}


def parse_run_args(args: list[str]) -> dict[str, Any] | None:
    """The parameters of ``kaid run`` given ``args`` (what follows ``run``), as typer would pass them; None
    for anything that is not plainly well-formed (typer then parses it, and explains what is wrong)."""
    params: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        known = RUN_OPTIONS.get(name)
        if known is None:
            return None  # -h, --help, a positional argument, a typo: typer's to say
        param, kind = known
        if kind is None:
            if eq:
                return None
            params[param] = RUN_FLAGS[name]
            i += 1
            continue
        if eq:
            value = inline
            i += 1
        elif i + 1 < len(args):
            value = args[i + 1]
            i += 2
        else:
            return None  # an option without its value
        try:
            params[param] = kind(value)
        except ValueError:
            return None
    return params


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["run"]:
        params = parse_run_args(args[1:])
        if params is not None:
            from kaid.kube.run import run_daemon

            sys.exit(run_daemon(**params))
    from kaid.commands import app

    app()
