"""``kaictl`` / ``kubectl kai``: the command-line face of kai.

Exit codes: 0 success, 1 a user error (the message says what to do), 2 a usage error."""

from __future__ import annotations

import typer

import kaictl.completion  # noqa: F401  (registers the shell completion classes)
from kaictl.commands import explain, queue, snapshot
from kaictl.commands.dryrun import dry_run_command
from kaictl.commands.fairshare import fairshare_command
from kaictl.commands.top import top_command
from kaid import __version__
from kaid.sim.command import simulate_command

app = typer.Typer(
    help="kai: queues, fair share, explanations, dry-runs and simulation for the kai GPU scheduler.\n\n"
         "Commands read the live cluster through your kubeconfig (or a --snapshot file) and write nothing, "
         "except queue create, set and delete.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(queue.app, name="queue")
app.add_typer(explain.app, name="explain")
app.add_typer(snapshot.app, name="snapshot")
app.command("fairshare", help=fairshare_command.__doc__)(fairshare_command)
app.command("dry-run", help=dry_run_command.__doc__)(dry_run_command)
app.command("top", help=top_command.__doc__)(top_command)
app.command("simulate", help=simulate_command.__doc__)(simulate_command)


@app.command("__complete", hidden=True, context_settings={"ignore_unknown_options": True,
                                                         "allow_extra_args": True})
def complete(ctx: typer.Context) -> None:
    """Completion for kubectl's plugin mechanism (kubectl_complete-kai)."""
    from kaictl.completion import cobra_complete

    for value in cobra_complete(list(ctx.args)):
        typer.echo(value)
    typer.echo(":4")


@app.command()
def version() -> None:
    """Print kaictl's version."""
    typer.echo(f"kaictl {__version__}")


def main() -> None:
    app()
