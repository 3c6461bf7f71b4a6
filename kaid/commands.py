"""``kaid``'s commands: ``kaid run`` schedules a cluster; ``kaid simulate`` runs the engine on the embedded
simulated cluster. (The console script is ``kaid.cli:main``, which starts ``kaid run`` without this module.)"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kaid import __version__
from kaid.sim.command import simulate_command

app = typer.Typer(help="kai scheduler daemon: runs the scheduling loop (and its simulated cluster).",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})
app.command("simulate", help=simulate_command.__doc__)(simulate_command)


@app.command()
def run(
    kubeconfig: Annotated[Path | None, typer.Option("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, "
                                                     "~/.kube/config, else the in-cluster service account).")] = None,
    context: Annotated[str | None, typer.Option("--context", help="kubeconfig context.")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="kai config file (YAML).")] = None,
    identity: Annotated[str | None, typer.Option("--identity", help="Leader-election identity "
                                                  "(default: hostname-pid).")] = None,
    metrics_port: Annotated[int | None, typer.Option("--metrics-port", help="Port of /metrics, /healthz and "
                                                      "/readyz (0: off; default from the config).")] = None,
    metrics_address: Annotated[str | None, typer.Option("--metrics-address", help="Address of that server "
                                                         "(default from the config: 0.0.0.0).")] = None,
    leader_elect: Annotated[bool | None, typer.Option("--leader-elect/--no-leader-elect",
                                                      help="Override leaderElection.enabled.")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
) -> None:
    """Schedule the pods of the configured scheduler name on a cluster, until SIGTERM."""
    from kaid.kube.startup import run_daemon

    raise typer.Exit(run_daemon(kubeconfig, context, config, identity, metrics_port, metrics_address, leader_elect,
                                log_level))


@app.command()
def version() -> None:
    """Print kaid's version."""
    typer.echo(f"kaid {__version__}")

