"""Output helpers shared by every kaictl command: formats, consoles (colour only on a terminal), errors."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console

from kaid.api.serialize import to_yaml

FORMATS = ("table", "wide", "json", "yaml")


def console() -> Console:
    """stdout; on a terminal it wraps to the terminal, in a pipe tables keep their full width."""
    out = Console(highlight=False)
    if not out.is_terminal:
        out = Console(highlight=False, width=250)
    return out


def err_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 1) -> NoReturn:
    """A user error: one line that says what is wrong and what to do, then exit 1."""
    err_console().print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


def check_format(output: str, allowed: tuple[str, ...] = FORMATS) -> str:
    if output not in allowed:
        fail(f"unknown output format {output!r}: use one of {', '.join(allowed)}")
    return output


def emit_data(data: Any, output: str) -> None:
    if output == "json":
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    else:
        sys.stdout.write(to_yaml(data))


def fmt_resource(value: float | int, resource: str) -> str:
    """A queue value in the units people read: GPUs, cores, GB; -1 is unlimited."""
    if value == -1:
        return "∞"
    if resource == "gpu":
        return f"{value:g}"
    if resource == "cpu":
        return f"{value / 1000:g}"
    return f"{value / 1000:g}G"
