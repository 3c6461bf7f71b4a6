"""Credentials that change while kaid runs, as client-go reloads them.

- A token file (the in-cluster service account's, or a kubeconfig's ``tokenFile``): bound service-account
  tokens rotate (the kubelet rewrites the projected file well before expiry), so the file is read again
  whenever it changes (its inode, size or modification time, looked at before each request) and after a 401.
- A kubeconfig ``exec`` plugin (``client.authentication.k8s.io/v1`` or ``v1beta1``): run again when its
  credential expires (``status.expirationTimestamp``) and after a 401.
- A fixed token: never refreshed.

``KubeClient`` asks ``token()`` before each request and, on a 401, ``refresh(token_that_failed)``: True when
the credentials now differ from those that failed, so that the request is worth sending once more. An exec
plugin may also hand out a client certificate (``tls()``); ``generation`` grows whenever it changes, so that
the client makes its connections anew.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kaid.api.meta import parse_time

log = logging.getLogger("kaid.kube.auth")

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXPIRY_MARGIN_S = 10.0  # an exec credential this close to its expiry is renewed before it is used
EXEC_TIMEOUT_S = 60.0


class AuthError(ValueError):
    """Credentials that cannot be had: the message says which and what to do."""


class Auth:
    """A fixed bearer token (or none); the base of the others."""

    def __init__(self, token: str | None = None) -> None:
        self._token = token
        self.generation = 0  # grows when tls() changes
        self.lock = threading.Lock()

    def token(self) -> str | None:
        return self._token

    def tls(self) -> tuple[bytes, bytes] | None:
        """A client certificate and key (PEM) that replace the kubeconfig's, or None."""
        return None

    def refresh(self, failed: str | None) -> bool:
        """After a 401 for the token ``failed``: get fresh credentials; whether they differ from what failed."""
        return False


class TokenFile(Auth):
    """A bearer token read from a file, again whenever the file changes and after a 401."""

    def __init__(self, path: str | Path, token: str | None = None) -> None:
        super().__init__(token)
        self.path = Path(path)
        self._seen: tuple[int, int, int] | None = None
        if token is None:
            self._read()
        else:
            self._seen = self._stat()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()  # follows the kubelet's ..data symlink: a rotation changes the inode
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _read(self) -> None:
        seen = self._stat()
        try:
            token = self.path.read_text().strip()
        except OSError as err:
            if self._token is None:
                raise AuthError(f"cannot read the token file {self.path}: {err.strerror}") from None
            log.warning("cannot read the token file %s (%s); the token read before is used", self.path, err.strerror)
            return
        if not token:
            log.warning("the token file %s is empty; the token read before is used", self.path)
            return
        if self._token is not None and token != self._token:
            log.info("the token file %s changed: its new token is used from now on", self.path)
        self._token, self._seen = token, seen

    def token(self) -> str | None:
        with self.lock:
            if self._stat() != self._seen:
                self._read()
            return self._token

    def refresh(self, failed: str | None) -> bool:
        with self.lock:
            self._read()
            return self._token != failed


class ExecPlugin(Auth):
    """A kubeconfig's ``user.exec``: the command's ExecCredential, run again once it expires and after a 401."""

    def __init__(self, spec: Mapping[str, Any], base: Path, cluster: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(None)
        command = spec.get("command")
        if not isinstance(command, str) or not command:
            raise AuthError("the kubeconfig's exec plugin has no command")
        self.api_version = str(spec.get("apiVersion") or "")
        if self.api_version not in EXEC_API_VERSIONS:
            raise AuthError(f"the kubeconfig's exec plugin {command!r} has apiVersion {self.api_version!r}; kai "
                            f"speaks {' and '.join(EXEC_API_VERSIONS)}")
        # a relative path with a directory in it is relative to the kubeconfig (as client-go resolves it)
        self.command = str(base / command) if os.sep in command and not os.path.isabs(command) else command
        self.args = [str(a) for a in spec.get("args") or []]
        self.env = {str(e.get("name")): str(e.get("value", "")) for e in spec.get("env") or [] if isinstance(e, dict)}
        self.hint = str(spec.get("installHint") or "")
        self.cluster = dict(cluster) if spec.get("provideClusterInfo") and cluster else None
        self.clock = clock
        self.expires: float | None = None
        self._tls: tuple[bytes, bytes] | None = None
        self.runs = 0

    def _expired(self) -> bool:
        return self.runs == 0 or (self.expires is not None and self.clock() >= self.expires - EXPIRY_MARGIN_S)

    def _run(self) -> None:
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = self.cluster
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        what = f"the kubeconfig's exec plugin {self.command!r}"
        try:
            out = subprocess.run([self.command, *self.args], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                 timeout=EXEC_TIMEOUT_S, check=False)
        except FileNotFoundError:
            raise AuthError(f"{what} is not installed" + (f": {self.hint}" if self.hint else "")) from None
        except (OSError, subprocess.TimeoutExpired) as err:
            raise AuthError(f"{what} could not run: {err}") from None
        self.runs += 1
        if out.returncode != 0:
            raise AuthError(f"{what} exited with {out.returncode}: "
                            f"{out.stderr.decode(errors='replace').strip()[-500:] or '(no message)'}")
        try:
            cred = json.loads(out.stdout)
        except ValueError:
            raise AuthError(f"{what} printed no ExecCredential JSON: {out.stdout[:200]!r}") from None
        if not isinstance(cred, dict) or cred.get("kind") != "ExecCredential":
            raise AuthError(f"{what} printed something other than an ExecCredential")
        if cred.get("apiVersion") != self.api_version:
            raise AuthError(f"{what} answered in {cred.get('apiVersion')!r}, not the kubeconfig's {self.api_version}")
        status = cred.get("status")
        if not isinstance(status, dict):
            raise AuthError(f"{what} printed an ExecCredential without status")
        token = status.get("token") or None
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if not token and not (cert and key):
            raise AuthError(f"{what} gave neither a token nor a client certificate and key")
        when = status.get("expirationTimestamp")
        self.expires = parse_time(when) if when else None
        if when and not self.expires:
            raise AuthError(f"{what} gave an unreadable expirationTimestamp {when!r}")
        tls = (str(cert).encode(), str(key).encode()) if cert and key else None
        if tls != self._tls:
            self._tls = tls
            self.generation += 1
        if self._token is not None and token != self._token:
            log.info("%s gave a new token%s", what, "" if self.expires is None else
                     f" (valid until {time.strftime('%H:%M:%S UTC', time.gmtime(self.expires))})")
        self._token = token

    def token(self) -> str | None:
        with self.lock:
            if self._expired():
                self._run()
            return self._token

    def tls(self) -> tuple[bytes, bytes] | None:
        with self.lock:
            if self._expired():
                self._run()
            return self._tls

    def refresh(self, failed: str | None) -> bool:
        with self.lock:
            if self._token != failed and self.runs:
                return True  # another request has renewed it since
            generation = self.generation
            self._run()
            return self._token != failed or self.generation != generation
