"""Reading a kubeconfig or the in-cluster service account without importing the ``kubernetes`` package
(whose import alone costs a scheduler a third of a second at start). Exec and auth-provider plugins are
left to that package's loader."""

from __future__ import annotations

import base64
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass
class Credentials:
    host: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    verify: bool = True


class NeedsPlugin(Exception):
    """The kubeconfig authenticates through an exec or auth-provider plugin."""


def _materialise(data: str | None, path: str | None, base: Path, suffix: str) -> str | None:
    if data:
        fd, name = tempfile.mkstemp(prefix="kai-", suffix=suffix)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(data))
        return name
    if path:
        p = Path(path)
        return str(p if p.is_absolute() else base / p)
    return None


def _named(items: list[dict[str, Any]] | None, name: str | None, what: str) -> dict[str, Any]:
    for item in items or []:
        if item.get("name") == name:
            return dict(item.get(what) or {})
    raise ValueError(f"the kubeconfig has no {what} named {name!r}")


def from_kubeconfig(path: str | None, context: str | None) -> Credentials:
    files = [path] if path else (os.environ.get("KUBECONFIG", "").split(os.pathsep) if os.environ.get("KUBECONFIG")
                                 else [str(Path.home() / ".kube" / "config")])
    file = next((f for f in files if f and Path(f).exists()), None)
    if file is None:
        raise FileNotFoundError(f"no kubeconfig at {', '.join(f for f in files if f)}")
    try:
        doc = yaml.safe_load(Path(file).read_text()) or {}
    except yaml.YAMLError as err:
        raise ValueError(f"{file} is not valid YAML: {err}") from None
    ctx_name = context or doc.get("current-context")
    ctx = _named(doc.get("contexts"), ctx_name, "context")
    cluster = _named(doc.get("clusters"), ctx.get("cluster"), "cluster")
    user = _named(doc.get("users"), ctx.get("user"), "user") if ctx.get("user") else {}
    if user.get("exec") or user.get("auth-provider"):
        raise NeedsPlugin(file)
    base = Path(file).resolve().parent
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = Path(user["tokenFile"]).read_text().strip()
    if not cluster.get("server"):
        raise ValueError(f"cluster {ctx.get('cluster')!r} in {file} has no server")
    return Credentials(
        host=str(cluster["server"]),
        ca_file=_materialise(cluster.get("certificate-authority-data"), cluster.get("certificate-authority"), base,
                             ".crt"),
        cert_file=_materialise(user.get("client-certificate-data"), user.get("client-certificate"), base, ".crt"),
        key_file=_materialise(user.get("client-key-data"), user.get("client-key"), base, ".key"),
        token=token, verify=not cluster.get("insecure-skip-tls-verify", False))


def in_cluster() -> Credentials:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port or not (SA_DIR / "token").exists():
        raise FileNotFoundError("not running in a cluster")
    if ":" in host:
        host = f"[{host}]"
    return Credentials(host=f"https://{host}:{port}", ca_file=str(SA_DIR / "ca.crt"),
                       token=(SA_DIR / "token").read_text().strip())
