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



@app.command("gpu-reservation")
def gpu_reservation(
    kubeconfig: Annotated[Path | None, typer.Option("--kubeconfig", help="kubeconfig file (default: the in-cluster "
                                                     "service account).")] = None,
    namespace: Annotated[str | None, typer.Option("--namespace", help="Its pod's namespace (default: "
                                                   "$POD_NAMESPACE).")] = None,
    pod: Annotated[str | None, typer.Option("--pod", help="Its pod's name (default: $POD_NAME).")] = None,
) -> None:
    """The process of a GPU reservation pod (kaid makes those for shared GPUs): write the UUID of the one GPU it
    sees (NVML) on its own pod, then hold the GPU until SIGTERM. Exit 1, with one line on stderr, when NVML is
    missing or shows no GPU or several."""
    from kaid.sharing.reservation_agent import run_reservation_agent

    raise typer.Exit(run_reservation_agent(kubeconfig, namespace, pod))


@app.command("node-agent")
def node_agent(
    kubeconfig: Annotated[Path | None, typer.Option("--kubeconfig", help="kubeconfig file (default: the in-cluster "
                                                     "service account).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="kai config file (YAML; its nodeAgent section).")]
    = None,
    node: Annotated[str | None, typer.Option("--node", help="This node's name (default: $NODE_NAME).")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
) -> None:
    """Measure the GPU memory each pod uses on this node (NVML, processes mapped to pods by their cgroup): serve it
    as metrics, flag shared-GPU pods over their share (event, PodGroup condition; evicted if nodeAgent.evictOverShare
    says so), and label the node nvidia.com/gpu.memory where GPU Feature Discovery has not. Runs until SIGTERM."""
    from kaid.sharing.node_agent import run_node_agent

    raise typer.Exit(run_node_agent(kubeconfig, config, node, log_level))


@app.command()
def webhook(
    kubeconfig: Annotated[Path | None, typer.Option("--kubeconfig", help="kubeconfig file (default: the in-cluster "
                                                     "service account).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="kai config file (YAML; schedulerName, gpuSharing, "
                                                 "webhook).")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
) -> None:
    """kai's admission webhook, over HTTPS with certificates it makes and rotates itself (CA in a Secret, caBundle
    patched): sets up shared-GPU pods of kai's scheduler, and refuses bad GPU annotations, Queues (missing parent,
    cycle, limit below quota) and PodGroups (minMember below 1), saying what to fix. Runs until SIGTERM."""
    from kaid.webhook.server import run_webhook

    raise typer.Exit(run_webhook(kubeconfig, config, log_level))
