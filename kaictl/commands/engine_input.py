"""Where a command's cluster comes from: a snapshot file, or the live cluster through a kubeconfig.
Also the options every cluster-reading command shares, the kubectl way."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kaictl.output import err_console, fail
from kaid.api.config import SchedulerConfig, load_config
from kaid.sim.files import SnapshotFileError, load_objects

Obj = dict[str, Any]

Kubeconfig = Annotated[Path | None, typer.Option("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG "
                                                 "or ~/.kube/config).", envvar="KUBECONFIG")]
Context = Annotated[str | None, typer.Option("--context", help="kubeconfig context to use.")]
Snapshot = Annotated[Path | None, typer.Option("--snapshot", help="Read this snapshot file instead of the live "
                                               "cluster (save one with `kaictl snapshot save`).")]
Namespace = Annotated[str | None, typer.Option("-n", "--namespace", help="Namespace (default: the context's, "
                                               "else default).")]
Output = Annotated[str, typer.Option("-o", "--output", help="table, wide, json or yaml.")]
ConfigFile = Annotated[Path | None, typer.Option("--config", help="kai config file (YAML) for the engine.")]


def read_config(path: Path | None, solver: str | None = None) -> SchedulerConfig:
    try:
        cfg = load_config(path)
    except ValueError as e:
        fail(str(e))
    if solver is not None:
        if solver not in ("cpsat", "greedy"):
            fail(f"unknown solver {solver!r}: use cpsat or greedy")
        cfg = SchedulerConfig.model_validate({**cfg.model_dump(), "placement": {
            **cfg.placement.model_dump(), "gangSolver": solver}})
    return cfg


def client(kubeconfig: Path | None, context: str | None, offline: bool = True) -> Any:
    """A client for the kubeconfig's cluster; ``offline``: the command also reads a --snapshot file instead,
    which the error then says."""
    from kaid.kube.client import KubeClient

    try:
        return KubeClient.from_config(str(kubeconfig) if kubeconfig else None, context)
    except ValueError as e:
        why = str(e)
        if offline:
            why += ", or --snapshot FILE to work offline" if why.endswith("--kubeconfig") else \
                "; or pass --snapshot FILE to work offline"
        fail(why)


def current_namespace(kubeconfig: Path | None, context: str | None) -> str:
    try:
        from kubernetes import config as kconfig

        contexts, active = kconfig.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig) if kubeconfig else None)
        ctx = next((c for c in contexts if c["name"] == context), active) if context else active
        return str((ctx or {}).get("context", {}).get("namespace") or "default")
    except Exception:
        return "default"


def read_live(kubeconfig: Path | None, context: str | None) -> list[Obj]:
    from kaid.kube.read import ReadError, read_cluster

    c = client(kubeconfig, context)
    con = err_console()
    status = con.status("reading the cluster") if con.is_terminal else None
    try:
        if status is not None:
            with status:
                return read_cluster(c, progress=lambda kind: status.update(f"reading {kind}s"))
        return read_cluster(c)
    except ReadError as e:
        fail(str(e))


def read_objects(snapshot: Path | None, extra: list[Path] | None, kubeconfig: Path | None = None,
                 context: str | None = None, live: bool = False) -> list[Obj]:
    if snapshot is None and not live:
        fail("no cluster to read: pass --snapshot FILE (save one with `kaictl snapshot save -o FILE`)")
    objs: list[Obj] = read_live(kubeconfig, context) if snapshot is None else []
    for path in [*([snapshot] if snapshot else []), *(extra or [])]:
        try:
            objs.extend(load_objects(path))
        except SnapshotFileError as e:
            fail(str(e))
    return objs
