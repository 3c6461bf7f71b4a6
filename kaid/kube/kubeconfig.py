"""Reading a kubeconfig or the in-cluster service account without importing the ``kubernetes`` package
(whose import alone costs a scheduler a third of a second at start). Token files and exec plugins are
handed to ``kaid.kube.auth``, which reloads them; the legacy auth-provider plugins are left to that
package's loader. Certificates embedded as ``*-data`` are written to temporary files (listed in
``Credentials.temp_files``) for the TLS context to load; ``KubeClient`` removes them once loaded, and
whatever is left is removed at exit."""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kaid.kube.auth import Auth, ExecPlugin, TokenFile

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass
class Credentials:
    host: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    verify: bool = True
    token_file: str | None = None  # read again when it changes (and the token above is its first content)
    exec: dict[str, Any] | None = None  # user.exec of the kubeconfig
    base: Path = Path(".")  # the kubeconfig's directory (relative exec commands)
    temp_files: list[str] = field(default_factory=list)  # written here from *-data; remove_temp_files

    def auth(self) -> Auth:
        """Where the client's token comes from: an exec plugin, a token file, or a fixed token."""
        if self.exec is not None:
            return ExecPlugin(self.exec, self.base, {"server": self.host})
        if self.token_file:
            return TokenFile(self.token_file, self.token)
        return Auth(self.token)

    def remove_temp_files(self) -> None:
        remove_files(self.temp_files)
        self.temp_files.clear()


_TEMP_FILES: set[str] = set()  # every temporary file written and not removed yet: removed at exit


def remove_files(paths: list[str]) -> None:
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)
        _TEMP_FILES.discard(p)


def write_temp(data: bytes, suffix: str) -> str:
    """A private temporary file holding ``data`` (a key or certificate), removed at exit at the latest."""
    fd, name = tempfile.mkstemp(prefix="kai-", suffix=suffix)
    _TEMP_FILES.add(name)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return name


def _remove_left_over() -> None:
    remove_files(sorted(_TEMP_FILES))


atexit.register(_remove_left_over)


class NeedsPlugin(Exception):
    """The kubeconfig authenticates through an exec or auth-provider plugin."""


def _materialise(data: str | None, path: str | None, base: Path, suffix: str, temp: list[str]) -> str | None:
    if data:
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"its {suffix.lstrip('.')} data is not base64") from None
        name = write_temp(raw, suffix)
        temp.append(name)
        return name
    if path:
        p = Path(path)
        return str(p if p.is_absolute() else base / p)
    return None


def _named(items: Any, name: str | None, what: str) -> dict[str, Any]:
    if items is not None and not isinstance(items, list):
        raise ValueError(f"its {what}s must be a list, not {type(items).__name__}")
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            found = item.get(what) or {}
            if not isinstance(found, dict):
                raise ValueError(f"its {what} {name!r} must be a mapping, not {type(found).__name__}")
            return dict(found)
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
    if not isinstance(doc, dict):
        raise ValueError(f"{file} is not a kubeconfig: its YAML is a {type(doc).__name__}, not a mapping with "
                         "clusters, contexts and users")
    ctx_name = context or doc.get("current-context")
    ctx = _named(doc.get("contexts"), ctx_name, "context")
    cluster = _named(doc.get("clusters"), ctx.get("cluster"), "cluster")
    user = _named(doc.get("users"), ctx.get("user"), "user") if ctx.get("user") else {}
    if user.get("auth-provider"):
        raise NeedsPlugin(file)
    exec_spec = user.get("exec")
    if exec_spec is not None and not isinstance(exec_spec, dict):
        raise ValueError(f"user {ctx.get('user')!r} in {file}: exec must be a mapping")
    base = Path(file).resolve().parent
    token = user.get("token")
    token_file = None
    if not token and user.get("tokenFile"):
        token_file = str(Path(user["tokenFile"]) if Path(user["tokenFile"]).is_absolute()
                         else base / user["tokenFile"])
        token = Path(token_file).read_text().strip()
    if not cluster.get("server"):
        raise ValueError(f"cluster {ctx.get('cluster')!r} in {file} has no server")
    temp: list[str] = []
    try:
        ca = _materialise(cluster.get("certificate-authority-data"), cluster.get("certificate-authority"), base,
                          ".crt", temp)
        cert = _materialise(user.get("client-certificate-data"), user.get("client-certificate"), base, ".crt", temp)
        key = _materialise(user.get("client-key-data"), user.get("client-key"), base, ".key", temp)
    except ValueError as err:
        remove_files(temp)
        raise ValueError(f"context {ctx_name!r} in {file}: {err}") from None
    return Credentials(host=str(cluster["server"]), ca_file=ca, cert_file=cert, key_file=key, token=token,
                       verify=not cluster.get("insecure-skip-tls-verify", False), token_file=token_file,
                       exec=dict(exec_spec) if exec_spec else None, base=base, temp_files=temp)


def in_cluster() -> Credentials:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port or not (SA_DIR / "token").exists():
        raise FileNotFoundError("not running in a cluster")
    if ":" in host:
        host = f"[{host}]"
    return Credentials(host=f"https://{host}:{port}", ca_file=str(SA_DIR / "ca.crt"),
                       token=(SA_DIR / "token").read_text().strip(), token_file=str(SA_DIR / "token"))
