"""Reading kubeconfigs without the kubernetes package."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from kaid.kube.client import KubeClient
from kaid.kube.kubeconfig import NeedsPlugin, from_kubeconfig


def write(tmp_path: Path, user: dict[str, object], cluster: dict[str, object] | None = None) -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "a",
           "clusters": [{"name": "c", "cluster": cluster or {"server": "https://127.0.0.1:6443",
                                                            "certificate-authority-data":
                                                                base64.b64encode(b"CA").decode()}}],
           "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}},
                        {"name": "b", "context": {"cluster": "c", "user": "v"}}],
           "users": [{"name": "u", "user": user}, {"name": "v", "user": {"token": "tok-b"}}]}
    p = tmp_path / "kubeconfig"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_embedded_certificates_and_context(tmp_path: Path) -> None:
    p = write(tmp_path, {"client-certificate-data": base64.b64encode(b"CERT").decode(),
                         "client-key-data": base64.b64encode(b"KEY").decode()})
    creds = from_kubeconfig(str(p), None)
    assert creds.host == "https://127.0.0.1:6443"
    assert creds.ca_file and Path(creds.ca_file).read_bytes() == b"CA"
    assert creds.cert_file and Path(creds.cert_file).read_bytes() == b"CERT"
    assert from_kubeconfig(str(p), "b").token == "tok-b"


def test_relative_files_and_token_file(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("secret\n")
    p = write(tmp_path, {"tokenFile": str(tmp_path / "t")},
              {"server": "https://h:1", "certificate-authority": "ca.crt", "insecure-skip-tls-verify": True})
    creds = from_kubeconfig(str(p), None)
    assert creds.token == "secret" and creds.ca_file == str(tmp_path / "ca.crt") and creds.verify is False


def test_plugins_and_errors(tmp_path: Path) -> None:
    p = write(tmp_path, {"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}})
    assert from_kubeconfig(str(p), None).exec == {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}
    with pytest.raises(NeedsPlugin):  # legacy auth providers: the kubernetes package's loader
        from_kubeconfig(str(write(tmp_path, {"auth-provider": {"name": "oidc"}})), None)
    with pytest.raises(ValueError, match="no context named 'nope'"):
        from_kubeconfig(str(p), "nope")
    with pytest.raises(ValueError, match="cannot load kubeconfig"):
        KubeClient.from_config(str(tmp_path / "missing"), None)


def test_missing_or_broken_tls_files_are_a_clear_error(tmp_path: Path) -> None:
    """The client loads its CA and client certificate once, when it is made: a path that is gone or a file that
    is not a certificate is a ValueError naming the file (``kaid run`` and kaictl print it), not a traceback."""
    for ca in (tmp_path / "gone.crt", tmp_path / "junk.crt"):
        if ca.name == "junk.crt":
            ca.write_text("not a certificate\n")
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
               "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443",
                                                      "certificate-authority": str(ca)}}],
               "users": [{"name": "u", "user": {"token": "t"}}],
               "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(cfg))
        with pytest.raises(ValueError, match=f"cannot load the TLS files of the kubeconfig \\({ca}\\)"):
            KubeClient.from_config(str(path))
