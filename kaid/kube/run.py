"""``kaid run``'s body: list the cluster, load the config and the engine meanwhile, then run the daemon. No
command-line library here: ``kaid.cli`` calls it straight from the process's arguments (a scheduler's
start is on the critical path of every pod waiting for it), ``kaid.commands`` from typer."""

from __future__ import annotations

import gc
import logging
import sys
from pathlib import Path

from kaid.kube.cache import WatchCache
from kaid.kube.client import KubeClient
from kaid.kube.process import process_age


def run_daemon(kubeconfig: Path | None = None, context: str | None = None, config: Path | None = None,
               identity: str | None = None, metrics_port: int | None = None, metrics_address: str | None = None,
               leader_elect: bool | None = None, log_level: str = "info") -> int:
    """Schedule until SIGTERM; the exit code (1: a bad kubeconfig or config, said on stderr)."""
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.WARNING)  # one debug line per request drowns kaid's own
    log = logging.getLogger("kaid")
    try:
        client = KubeClient.from_config(str(kubeconfig) if kubeconfig else None, context)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    # The lists go out first: the API server encodes them (a large cluster's pods are megabytes of JSON)
    # while the config and the engine load. The limits are the config's from the start (see configure).
    gc.disable()  # for the first list: see Daemon.run
    cache = WatchCache(client, early=True)  # the config may say no early cycle: the daemon lets it go then
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
        print(f"error: {err}", file=sys.stderr)
        return 1
    client.limiter.configure(cfg.clientQPS, cfg.clientBurst)
    if not cfg.earlyFirstCycle:
        cache.release_pods()
    from kaid.kube.daemon import Daemon

    daemon = Daemon(cfg, client, identity, cache)
    daemon.handle_signals()
    return daemon.run()
