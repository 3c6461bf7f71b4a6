"""Credentials that rotate (issue 16): a token file read again when it changes and after a 401, an exec plugin
run again when its credential expires and after a 401 (the request then sent once more), and no temporary key
or certificate file left behind. Against a real HTTPS server on loopback that accepts only the tokens (and
client certificates) it is told are valid now."""

from __future__ import annotations

import datetime as dt
import json
import os
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kaid.kube import kubeconfig
from kaid.kube.auth import ExecPlugin, TokenFile
from kaid.kube.client import ApiError, KubeClient
from kaid.kube.kubeconfig import from_kubeconfig
from kaid.webhook.certs import Authority, new_authority, serving_certificate

NOW = dt.datetime.now(dt.UTC)


class ApiServer:
    """An HTTPS server on loopback: 401 for a bearer token not in ``valid`` (unless a client certificate whose
    common name is in ``valid_users`` was presented), else a small list or a watch event. ``seen`` records
    (path, token or user, status) per request."""

    def __init__(self, ca: Authority, tmp: Path) -> None:
        self.valid: set[str] = set()
        self.valid_users: set[str] = set()
        self.seen: list[tuple[str, str | None, int]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                auth = self.headers.get("Authorization", "")
                token = auth.removeprefix("Bearer ") if auth else None
                peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
                subject: Any = (peer or {}).get("subject", ())
                user = next((v for rdn in subject for k, v in rdn if k == "commonName"), None)
                ok = (token is not None and token in server.valid) or (user is not None and user in server.valid_users)
                server.seen.append((self.path.split("?")[0], token or user, 200 if ok else 401))
                if not ok:
                    body = json.dumps({"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401})
                    self._send(401, body.encode())
                elif "watch=1" in self.path:
                    self._send(200, json.dumps({"type": "ADDED", "object": {"metadata": {"name": "q"}}}).encode()
                               + b"\n")
                else:
                    self._send(200, json.dumps({"kind": "List", "metadata": {"resourceVersion": "7"},
                                                "items": [{"metadata": {"name": "a"}}]}).encode())

            def _send(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        cert, key = serving_certificate(ca, ["127.0.0.1"], 1, NOW)
        (tmp / "srv.crt").write_bytes(cert)
        (tmp / "srv.key").write_bytes(key)
        (tmp / "ca.crt").write_bytes(ca.cert)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tmp / "srv.crt", tmp / "srv.key")
        ctx.load_verify_locations(tmp / "ca.crt")
        ctx.verify_mode = ssl.CERT_OPTIONAL
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def statuses(self) -> list[tuple[str | None, int]]:
        return [(who, code) for _, who, code in self.seen]


@pytest.fixture(scope="module")
def ca() -> Authority:
    return new_authority(1, NOW)


@pytest.fixture
def server(ca: Authority, tmp_path: Path) -> Iterator[ApiServer]:
    srv = ApiServer(ca, tmp_path)
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def client_pair(ca: Authority, user: str) -> tuple[bytes, bytes]:
    """A client certificate for ``user`` signed by ``ca`` (PEM cert, PEM key)."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(NOW - dt.timedelta(minutes=5)).not_valid_after(NOW + dt.timedelta(hours=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def write_kubeconfig(path: Path, server: str, ca: bytes, user: dict[str, Any]) -> Path:
    import base64

    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "k", "cluster": {"server": server,
                                                  "certificate-authority-data": base64.b64encode(ca).decode()}}],
           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
           "users": [{"name": "u", "user": user}]}
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the client writes its temporary files in this test (to see that none is left)."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def replace_file(path: Path, text: str) -> None:
    """As the kubelet rotates a projected token: a new file renamed over the old one."""
    new = path.with_suffix(".new")
    new.write_text(text)
    os.replace(new, path)


# ------------------------------------------------------------------------------------------------ token files

def test_token_file_is_read_again_when_it_changes(server: ApiServer, ca: Authority, tmp_path: Path,
                                                  temp_dir: Path) -> None:
    token = tmp_path / "token"
    token.write_text("token-a\n")
    cfg = write_kubeconfig(tmp_path / "kubeconfig", server.url, ca.cert, {"tokenFile": str(token)})
    client = KubeClient.from_config(str(cfg))
    assert list(temp_dir.iterdir()) == []  # the CA written from certificate-authority-data is gone once loaded
    server.valid = {"token-a"}
    assert client.get("/api/v1/pods")["items"]
    replace_file(token, "token-b\n")
    server.valid = {"token-b"}  # the old token is refused from now on
    writer = client.with_limits(10, 10)  # status and events: the same credentials
    assert client.get("/api/v1/pods")["items"] and writer.get("/api/v1/pods")["items"]
    assert server.statuses() == [("token-a", 200), ("token-b", 200), ("token-b", 200)]  # never a 401


def test_token_file_is_read_again_after_401(server: ApiServer, tmp_path: Path) -> None:
    """A token that changed without the file looking changed (same inode, size and time): the 401 makes the
    client read it again and send the request once more; list and watch too."""
    token = tmp_path / "token"
    token.write_text("token-1")
    client = KubeClient(server.url, ca_file=str(tmp_path / "ca.crt"), auth=TokenFile(token))
    server.valid = {"token-1"}
    client.get("/api/v1/pods")
    for n, call in enumerate(("get", "list", "watch"), start=2):
        st = token.stat()
        with token.open("r+") as f:  # in place, same length
            f.write(f"token-{n}")
        os.utime(token, ns=(st.st_atime_ns, st.st_mtime_ns))
        server.valid = {f"token-{n}"}
        if call == "get":
            assert client.get("/api/v1/pods")["items"]
        elif call == "list":
            items: list[Any] = []
            assert client.list("/api/v1/pods", items.append)["metadata"]["resourceVersion"] == "7" and items
        else:
            assert [e["type"] for e in client.watch("/api/v1/pods", "7")] == ["ADDED"]
        assert server.statuses()[-2:] == [(f"token-{n - 1}", 401), (f"token-{n}", 200)]


def test_401_with_nothing_new_is_an_error(server: ApiServer, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("revoked")
    client = KubeClient(server.url, ca_file=str(tmp_path / "ca.crt"), auth=TokenFile(token))
    with pytest.raises(ApiError) as err:
        client.request("GET", "/api/v1/pods")
    assert err.value.status == 401
    assert server.statuses() == [("revoked", 401)]  # the same token is not sent twice


# ------------------------------------------------------------------------------------------------ exec plugins

PLUGIN = '''
import datetime as dt, json, os, sys
state = sys.argv[1]
n = int(open(state).read()) + 1 if os.path.exists(state) else 1
open(state, "w").write(str(n))
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
status = {"token": f"exec-{n}"}
if os.environ.get("EXPIRES_IN"):
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=float(os.environ["EXPIRES_IN"]))
    status["expirationTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
if os.environ.get("CERT_DIR"):
    status = {"clientCertificateData": open(os.path.join(os.environ["CERT_DIR"], f"{n}.crt")).read(),
              "clientKeyData": open(os.path.join(os.environ["CERT_DIR"], f"{n}.key")).read()}
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}))
'''


def exec_spec(tmp_path: Path, **env: str) -> dict[str, Any]:
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    return {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
            "args": [str(script), str(tmp_path / "runs")], "env": [{"name": k, "value": v} for k, v in env.items()]}


def test_exec_plugin_runs_again_when_its_token_expires(server: ApiServer, tmp_path: Path) -> None:
    now = [time.time()]
    plugin = ExecPlugin(exec_spec(tmp_path, EXPIRES_IN="3600"), tmp_path, clock=lambda: now[0])
    client = KubeClient(server.url, ca_file=str(tmp_path / "ca.crt"), auth=plugin)
    server.valid = {"exec-1"}
    client.get("/api/v1/pods")
    client.get("/api/v1/pods")
    assert plugin.runs == 1  # cached while it lasts
    now[0] += 3600  # past its expirationTimestamp: run again before the next request
    server.valid = {"exec-2"}
    client.get("/api/v1/pods")
    assert plugin.runs == 2 and server.statuses() == [("exec-1", 200), ("exec-1", 200), ("exec-2", 200)]


def test_exec_plugin_runs_again_after_401_and_the_request_is_retried(server: ApiServer, ca: Authority, tmp_path: Path,
                                                                     temp_dir: Path) -> None:
    cfg = write_kubeconfig(tmp_path / "kubeconfig", server.url, ca.cert, {"exec": exec_spec(tmp_path)})
    client = KubeClient.from_config(str(cfg))  # no expiry: kept until a 401
    server.valid = {"exec-1"}
    client.get("/api/v1/pods")
    server.valid = {"exec-2"}  # revoked on the server's side
    assert client.request("GET", "/api/v1/pods")["items"]
    assert server.statuses() == [("exec-1", 200), ("exec-1", 401), ("exec-2", 200)]
    assert list(temp_dir.iterdir()) == []


def test_exec_plugin_client_certificate_rotates(server: ApiServer, ca: Authority, tmp_path: Path,
                                               temp_dir: Path) -> None:
    """A plugin that hands out client certificates: after a 401 the new one is loaded (new connections), and
    the key files written for OpenSSL are gone at once."""
    certs = tmp_path / "certs"
    certs.mkdir()
    for n in (1, 2):
        cert, key = client_pair(ca, f"user-{n}")
        (certs / f"{n}.crt").write_bytes(cert)
        (certs / f"{n}.key").write_bytes(key)
    cfg = write_kubeconfig(tmp_path / "kubeconfig", server.url, ca.cert,
                           {"exec": exec_spec(tmp_path, CERT_DIR=str(certs))})
    client = KubeClient.from_config(str(cfg))
    server.valid_users = {"user-1"}
    client.get("/api/v1/pods")
    server.valid_users = {"user-2"}
    client.request("GET", "/api/v1/pods")
    assert server.statuses() == [("user-1", 200), ("user-1", 401), ("user-2", 200)]
    assert list(temp_dir.iterdir()) == []


def test_exec_plugin_errors_are_clear(tmp_path: Path) -> None:
    spec = exec_spec(tmp_path)
    with pytest.raises(ValueError, match="kai speaks"):
        ExecPlugin({**spec, "apiVersion": "client.authentication.k8s.io/v1alpha1"}, tmp_path)
    missing = ExecPlugin({**spec, "command": "no-such-plugin-kai", "installHint": "install it"}, tmp_path)
    with pytest.raises(ValueError, match="not installed: install it"):
        missing.token()
    failing = ExecPlugin({**spec, "command": sys.executable, "args": ["-c", "import sys; sys.exit('denied')"]},
                         tmp_path)
    with pytest.raises(ValueError, match="exited with 1: denied"):
        failing.token()


# ------------------------------------------------------------------------------------------------ kubeconfig files

@pytest.mark.parametrize("text", ["- a\n- b\n", "just words\n", "42\n"])
def test_kubeconfig_that_is_not_a_mapping_is_a_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    with pytest.raises(ValueError, match="is not a kubeconfig: its YAML is a"):
        from_kubeconfig(str(path), None)
    with pytest.raises(ValueError, match="cannot load kubeconfig"):
        KubeClient.from_config(str(path))


def test_kubeconfig_with_malformed_sections_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({"current-context": "c", "contexts": {"c": 1}}))
    with pytest.raises(ValueError, match="contexts must be a list"):
        from_kubeconfig(str(path), None)
    path.write_text(yaml.safe_dump({"current-context": "c", "contexts": [{"name": "c", "context": "x"}]}))
    with pytest.raises(ValueError, match="context 'c' must be a mapping"):
        from_kubeconfig(str(path), None)


def test_temporary_files_are_removed_at_exit(tmp_path: Path, temp_dir: Path) -> None:
    """What is written from *-data and not loaded (a failure between) goes at exit at the latest."""
    name = kubeconfig.write_temp(b"KEY", ".key")
    assert Path(name).parent == temp_dir and oct(Path(name).stat().st_mode & 0o777) == "0o600"
    kubeconfig._remove_left_over()
    assert list(temp_dir.iterdir()) == []
