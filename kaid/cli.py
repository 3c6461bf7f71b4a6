"""``kaid``: the scheduler daemon. ``kaid simulate`` runs the engine on the embedded simulated cluster."""

from __future__ import annotations

import typer

from kaid import __version__
from kaid.sim.command import simulate_command

app = typer.Typer(help="kai scheduler daemon: runs the scheduling loop (and its simulated cluster).",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
app.command("simulate", help=simulate_command.__doc__)(simulate_command)


@app.command()
def version() -> None:
    """Print kaid's version."""
    typer.echo(f"kaid {__version__}")


def main() -> None:
    app()
