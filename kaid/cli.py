"""``kaid``: the scheduler daemon. ``kaid run`` schedules a cluster; ``kaid simulate`` runs the engine on
the embedded simulated cluster."""

from __future__ import annotations

import logging
import sys
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
    import gc

    from kaid.kube.cache import WatchCache
    from kaid.kube.client import KubeClient
    from kaid.kube.process import process_age

    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.WARNING)  # one debug line per request drowns kaid's own
    log = logging.getLogger("kaid")
    try:
        client = KubeClient.from_config(str(kubeconfig) if kubeconfig else None, context)
    except ValueError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None
    # The lists go out first: the API server encodes them (a large cluster's pods are megabytes of JSON)
    # while the config and the engine load. The limits are the config's from the start (see configure).
    gc.disable()  # for the first list: see Daemon.run
    cache = WatchCache(client)
    log.debug("listing the cluster, %.0f ms after the process began", process_age() * 1000)
    cache.start()
    from kaid.api.config import SchedulerConfig, load_config

    try:
        cfg = load_config(config)
        overrides: dict[str, object] = {}
        if metrics_port is not None:
            overrides["metricsPort"] = metrics_port
        if metrics_address is not None:
            overrides["metricsAddress"] = metrics_address
        if leader_elect is not None:
            overrides["leaderElection"] = {**cfg.leaderElection.model_dump(), "enabled": leader_elect}
        if overrides:
            cfg = SchedulerConfig.model_validate({**cfg.model_dump(), **overrides})
    except ValueError as err:
        cache.close()
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None
    client.limiter.configure(cfg.clientQPS, cfg.clientBurst)
    from kaid.kube.daemon import Daemon

    daemon = Daemon(cfg, client, identity, cache)
    daemon.handle_signals()
    raise typer.Exit(daemon.run())


@app.command()
def version() -> None:
    """Print kaid's version."""
    typer.echo(f"kaid {__version__}")


def main() -> None:
    app()
