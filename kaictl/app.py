"""``kaictl`` / ``kubectl kai``: the command-line face of kai."""

from __future__ import annotations

import typer

from kaictl.commands.dryrun import dry_run_command
from kaictl.commands.fairshare import fairshare_command
from kaid import __version__
from kaid.sim.command import simulate_command

app = typer.Typer(
    help="kai: queues, fair share, explanations, dry-runs and simulation for the kai GPU scheduler.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("dry-run", help=dry_run_command.__doc__)(dry_run_command)
app.command("fairshare", help=fairshare_command.__doc__)(fairshare_command)
app.command("simulate", help=simulate_command.__doc__)(simulate_command)


@app.command()
def version() -> None:
    """Print kaictl's version."""
    typer.echo(f"kaictl {__version__}")


def main() -> None:
    app()
