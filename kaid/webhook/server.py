"""``kaid webhook``: serve ``kaid.webhook.admission`` over HTTPS with certificates kai makes and rotates itself.

Every minute (and at start) it makes sure that: the CA exists in its Secret (made by the first replica; the
others read it), the CA is not near its end (else a new one, the old one still trusted), this replica's serving
certificate is signed by the current CA and not near its end (else a new one, loaded for new connections), and
the ``caBundle`` of kai's Mutating- and ValidatingWebhookConfiguration trusts the CA (patched when not: after an
install, a rotation, or a reinstall that dropped it). ``/readyz`` answers 200 once the bundle is in place.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import os
import random
import signal
import ssl
import sys
import tempfile
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kaid.api.config import SchedulerConfig, WebhookConfig
from kaid.kube.client import ApiError, KubeClient
from kaid.kube.metrics import PlainHandler
from kaid.webhook import certs
from kaid.webhook.admission import review

log = logging.getLogger("kaid.webhook")
Obj = dict[str, Any]
SYNC_PERIOD = 60.0
CONFIGURATIONS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
_ADMISSION = "/apis/admissionregistration.k8s.io/v1"
MAX_BODY = 8 << 20


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Certificates:
    """The CA (in its Secret) and this replica's serving certificate, kept current by ``sync``."""

    def __init__(self, client: KubeClient, cfg: WebhookConfig, workdir: Path) -> None:
        self.client = client
        self.cfg = cfg
        self.hosts = certs.service_hosts(cfg.serviceName, cfg.namespace, cfg.hosts)
        self.secret_path = f"/api/v1/namespaces/{quote(cfg.namespace)}/secrets"
        self.ca: certs.Authority | None = None
        self.serving: bytes = b""
        self.cert_file, self.key_file = workdir / "tls.crt", workdir / "tls.key"
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.bundle_ok = threading.Event()

    def sync(self) -> None:
        """One pass over the CA, the serving certificate and the caBundles (ApiError when the API fails)."""
        self.ca = self._authority()
        if not self.serving or not certs.signed_by(self.serving, self.ca) or \
                certs.due(self.serving, certs.SERVING_RENEW_LEFT, _now()):
            cert, key = certs.serving_certificate(self.ca, self.hosts, self.cfg.certificateHours, _now())
            self.cert_file.write_bytes(cert)
            self.key_file.write_bytes(key)
            self.key_file.chmod(0o600)
            self.context.load_cert_chain(self.cert_file, self.key_file)  # new connections get the new one
            self.serving = cert
            log.info("serving certificate made for %s, valid %g h", ", ".join(self.hosts), self.cfg.certificateHours)
        if self._patch_bundles(self.ca.bundle):
            self.bundle_ok.set()

    def _authority(self) -> certs.Authority:
        path = f"{self.secret_path}/{quote(self.cfg.secretName)}"
        try:
            secret = self.client.get(path)
        except ApiError as err:
            if err.status != 404:
                raise
            return self._create_authority()
        try:
            ca = certs.Authority.from_secret(secret)
        except ValueError as err:
            log.warning("Secret %s/%s holds no usable CA (%s): making a new one", self.cfg.namespace,
                        self.cfg.secretName, err)
            ca = certs.Authority(b"", b"")
        if ca.cert and not certs.due(ca.cert, certs.CA_RENEW_LEFT, _now()):
            return ca
        rotated = certs.new_authority(self.cfg.caDays, _now(), previous=ca.cert)
        data: dict[str, str | None] = {certs.CA_PREVIOUS: None, **rotated.secret_data()}
        try:  # with the Secret's resourceVersion: a replica rotating at the same time makes this one fail
            self.client.merge_patch(path, {"metadata": {"resourceVersion": secret["metadata"]["resourceVersion"]},
                                           "data": data})
            log.info("webhook CA rotated (the old one stays trusted until the next rotation)")
            return rotated
        except ApiError as err:
            if err.status != 409:
                raise
            return certs.Authority.from_secret(self.client.get(path))

    def _create_authority(self) -> certs.Authority:
        ca = certs.new_authority(self.cfg.caDays, _now())
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": self.cfg.secretName, "namespace": self.cfg.namespace,
                             "labels": {"app.kubernetes.io/name": "kai-webhook"}},
                "data": ca.secret_data()}
        try:
            self.client.create(self.secret_path, body)
            log.info("webhook CA made in Secret %s/%s", self.cfg.namespace, self.cfg.secretName)
            return ca
        except ApiError as err:
            if err.status != 409:
                raise
            return certs.Authority.from_secret(self.client.get(f"{self.secret_path}/{quote(self.cfg.secretName)}"))

    def _patch_bundles(self, bundle: bytes) -> bool:
        """Make both webhook configurations trust ``bundle``; False while either is missing."""
        want = base64.b64encode(bundle).decode()
        found = 0
        for kind in CONFIGURATIONS:
            path = f"{_ADMISSION}/{kind}/{quote(self.cfg.configurationName)}"
            try:
                conf = self.client.get(path, retries=1)
            except ApiError as err:
                if err.status != 404:
                    raise
                log.warning("no %s %s yet: install kai's manifests (kubectl apply -k manifests/)", kind[:-1],
                            self.cfg.configurationName)
                continue
            found += 1
            ops = [{"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": want}
                   for i, hook in enumerate(conf.get("webhooks") or [])
                   if (hook.get("clientConfig") or {}).get("caBundle") != want]
            if ops:
                self.client.request("PATCH", path, ops, content_type="application/json-patch+json")
                log.info("caBundle of %s %s brought up to date", kind[:-1], self.cfg.configurationName)
        return found == len(CONFIGURATIONS)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that goes away or fails the handshake is logged in a line, not a traceback."""
        log.debug("connection from %s failed: %s", client_address, sys.exc_info()[1])


class WebhookServer:
    def __init__(self, client: KubeClient, cfg: SchedulerConfig, workdir: Path) -> None:
        self.client = client
        self.cfg = cfg
        self.certs = Certificates(client, cfg.webhook, workdir)
        self.stop = threading.Event()
        self.rng = random.SystemRandom()
        self.httpd: ThreadingHTTPServer | None = None

    def list_queues(self) -> list[Obj]:
        items: list[Obj] = self.client.get("/apis/scheduling.run.ai/v2/queues").get("items") or []
        return items

    def start(self) -> None:
        """Certificates first (serving needs one), then the server, then the rotation loop."""
        self.certs.sync()
        server = self

        class Handler(PlainHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                self.request.settimeout(10.0)
                self.request.do_handshake()  # in this request's thread (see wrap_socket below)
                super().setup()

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path == "/healthz":
                    self.reply(200, b"ok", "text/plain")
                elif path == "/readyz":
                    ok = server.certs.bundle_ok.is_set()
                    self.reply(200 if ok else 503, b"ok" if ok else b"caBundle not in place yet", "text/plain")
                else:
                    self.reply(404, b"not found", "text/plain")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length <= 0 or length > MAX_BODY:
                    self.reply(400, b"an AdmissionReview body is needed", "text/plain")
                    return
                try:
                    body = json.loads(self.rfile.read(length))
                    answer = review(self.path.split("?")[0], body, server.cfg, server.list_queues, server.rng)
                except (ValueError, ApiError) as err:
                    log.warning("admission request on %s failed: %s", self.path, err)
                    self.reply(500, str(err).encode()[:500], "text/plain")
                    return
                response = answer["response"]
                if not response.get("allowed"):
                    log.info("refused on %s: %s", self.path, response.get("status", {}).get("message"))
                self.reply(200, json.dumps(answer).encode(), "application/json")

        httpd = _QuietServer((self.cfg.webhook.address, self.cfg.webhook.port), Handler)
        httpd.daemon_threads = True
        # the handshake happens in each request's thread, so a slow client never holds up accepting the next
        httpd.socket = self.certs.context.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        self.httpd = httpd
        threading.Thread(target=httpd.serve_forever, name="webhook-https", daemon=True).start()
        threading.Thread(target=self._sync_loop, name="webhook-certificates", daemon=True).start()
        log.info("kai webhook serving on %s:%d", self.cfg.webhook.address, self.cfg.webhook.port)

    def _sync_loop(self) -> None:
        while not self.stop.wait(SYNC_PERIOD if self.certs.bundle_ok.is_set() else 5.0):
            try:
                self.certs.sync()
            except (ApiError, OSError, ValueError) as err:
                log.warning("certificate sync failed (%s); trying again", err)

    def shutdown(self) -> None:
        self.stop.set()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()


def run_webhook(kubeconfig: Path | None, config: Path | None, log_level: str = "info") -> int:
    """Serve until SIGTERM; the exit status (1: a bad kubeconfig or config, or no certificate)."""
    from kaid.api.config import load_config

    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    try:
        cfg = load_config(config)
        client = KubeClient.from_config(str(kubeconfig) if kubeconfig else None)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="kai-webhook-", dir=os.environ.get("TMPDIR")))
    server = WebhookServer(client, cfg, workdir)
    try:
        server.start()
    except (ApiError, OSError) as err:
        print(f"error: cannot start the webhook: {err}", file=sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    return 0
