"""Credentials that rotate, on the real control plane (issue 16): kaid reads its ServiceAccount token from a
file (a kubeconfig's ``tokenFile``, as the in-cluster token is read); the file is replaced by a new valid token
while kaid runs, and the old token is then made invalid (its bound Secret deleted, so the API server refuses
it); kaid keeps scheduling without a restart."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import yaml

from .controlplane import ApiError, ControlPlane
from .kaid_helpers import KAI_NAMESPACE, Kaid, KaiInstall, bound, pod, pods_of, queue, suffix, wait_for

SA = "kai-scheduler"


def bound_token(cp: ControlPlane, secret: str) -> str:
    """A token of ServiceAccount kai-scheduler bound to a new Secret ``secret``: valid until it is deleted."""
    made = cp.create(f"/api/v1/namespaces/{KAI_NAMESPACE}/secrets",
                     {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret}})
    review = cp.request("POST", f"/api/v1/namespaces/{KAI_NAMESPACE}/serviceaccounts/{SA}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600, "boundObjectRef": {
            "kind": "Secret", "apiVersion": "v1", "name": secret, "uid": made["metadata"]["uid"]}}})
    return str(review["status"]["token"])


def refused(cp: ControlPlane, token: str) -> bool:
    try:
        cp.request("GET", f"/api/v1/namespaces/{KAI_NAMESPACE}/pods?limit=1", token=token)
    except ApiError as err:
        return err.status == 401
    return False


def test_kaid_keeps_scheduling_when_its_token_file_rotates(
    control_plane: ControlPlane, kai: KaiInstall, namespace: str, make_pool: Any, make_queues: Any, tmp_path: Path
) -> None:
    cp = control_plane
    pool, _ = make_pool(1, gpus=8)
    (q,) = make_queues(queue(f"creds-{suffix()}", 0))
    old_secret, new_secret = f"kai-token-a-{suffix()}", f"kai-token-b-{suffix()}"
    token_file = tmp_path / "token"
    old_token = bound_token(cp, old_secret)
    token_file.write_text(old_token)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "e2e", "cluster": {"server": cp.server, "certificate-authority": str(cp.ca_file)}}],
        "users": [{"name": "sa", "user": {"tokenFile": str(token_file)}}],
        "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": "sa"}}]}))
    kaid = Kaid(kubeconfig, tmp_path, "kaid-creds", f"kai-e2e-creds-{suffix()}", lease_duration=4.0,
                renew_interval=0.5)
    try:
        kaid.start().wait_ready()
        cp.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod("before", pool, q, 1))
        wait_for(lambda: len(bound(pods_of(cp, namespace))) == 1, 20, "the first pod bound")

        new = token_file.with_suffix(".new")  # as the kubelet rotates a projected token: renamed over the old
        new.write_text(bound_token(cp, new_secret))
        os.replace(new, token_file)
        cp.request("DELETE", f"/api/v1/namespaces/{KAI_NAMESPACE}/secrets/{old_secret}")
        # the API server caches a token's authentication for a few seconds: wait until it refuses the old one
        wait_for(lambda: refused(cp, old_token), 30, "the API server to refuse the old token", interval=0.5)
        wait_for(lambda: f"the token file {token_file} changed" in kaid.full_log(), 10, "kaid to read the new token")

        for i in range(3):
            cp.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod(f"after-{i}", pool, q, 1))
        wait_for(lambda: len(bound(pods_of(cp, namespace))) == 4, 30, "the pods made after the rotation bound")
        assert kaid.running() and kaid.starts == 1, kaid.log()
        assert kaid.get("/healthz")[0] == 200
    finally:
        kaid.stop()
        for s in (old_secret, new_secret):
            with contextlib.suppress(ApiError):
                cp.request("DELETE", f"/api/v1/namespaces/{KAI_NAMESPACE}/secrets/{s}")
        print(f"===== kaid {kaid.identity} =====\n{kaid.log(100)}")
