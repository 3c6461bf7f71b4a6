"""A throwaway Kubernetes control plane on loopback for the end-to-end tests.

``ControlPlane`` runs etcd, kube-apiserver, kube-controller-manager and kwok (which plays the kubelets
of fake nodes) as child processes, all listening on 127.0.0.1 only, with certificates made on the
fly. The binaries come from ``.ci/controlplane/build.sh`` (built from pinned Go modules, cached).

    with ControlPlane() as cp:
        cp.add_gpu_nodes(4, labels={"kai.scheduler/rack": "rack-0"})
        cp.kubectl("get", "nodes")

Environment:
    KAI_CONTROLPLANE_BIN   use binaries from this directory instead of running build.sh
    KAI_KUBECTL            kubectl to run (default: ``kubectl`` on PATH)
    KAI_E2E_KEEP=1         keep the work directory (certificates, logs, etcd data) after stop()
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import datetime as dt
import http.client
import importlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..build_script import is_built, run_build

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTROLPLANE_DIR = REPO_ROOT / ".ci" / "controlplane"
BUILD_SCRIPT = CONTROLPLANE_DIR / "build.sh"
KWOK_STAGES = CONTROLPLANE_DIR / "kwok" / "stages.yaml"

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

#: Annotation that makes kwok finish a (Job) pod this long after it started running, e.g. "3s".
COMPLETE_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
#: Optional upper bound: the delay is then uniform in [delay, jitter-delay].
COMPLETE_JITTER_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"

SERVICE_CIDR = "10.0.0.0/24"
POD_CIDR = "10.244.0.0/16"
NODE_IP_BASE = ipaddress.IPv4Address("10.200.0.1")
# How long ControlPlane.request asks again while the API server answers 429 "storage is (re)initializing".
REINITIALIZING_WAIT_S = 60.0
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
_WORKDIR_PREFIX = "kai-e2e-"
_KEEP_MARKER = "KEPT"
_PR_SET_PDEATHSIG = 1


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or queried."""


class ApiError(ControlPlaneError):
    """The API server answered with an unexpected HTTP status."""

    def __init__(self, method: str, path: str, status: int, body: str, retry_after: float = 0.0) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:2000]}")
        self.status = status
        self.body = body
        self.retry_after = retry_after  # seconds, from the answer's Retry-After (0: none)


def pinned_versions() -> dict[str, str]:
    """The versions pinned in the wrapper Go modules: keys ``kubernetes``, ``etcd``, ``kwok``."""
    wanted = {
        "kubernetes": ("k8s", "k8s.io/kubernetes"),
        "etcd": ("etcd", "go.etcd.io/etcd/server/v3"),
        "kwok": ("kwok", "sigs.k8s.io/kwok"),
    }
    versions: dict[str, str] = {}
    for name, (subdir, module) in wanted.items():
        text = (CONTROLPLANE_DIR / subdir / "go.mod").read_text()
        match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
        if match is None:
            raise ControlPlaneError(f"{module} is not required in {subdir}/go.mod")
        versions[name] = match.group(1)
    return versions


def ensure_binaries(*, output: IO[str] | None = None, timeout: float = 7200.0) -> Path:
    """Return the directory holding the control-plane binaries, building them first if needed.

    ``KAI_CONTROLPLANE_BIN`` short-cuts the build. Otherwise ``build.sh`` runs; it returns at once when
    its cache is complete. Its progress lines go to ``output`` (default: this process's stderr).
    """
    override = os.environ.get("KAI_CONTROLPLANE_BIN")
    bindir = Path(override) if override else run_build(BUILD_SCRIPT, output=output, timeout=timeout,
                                                        error=ControlPlaneError)
    missing = [b for b in BINARIES if not os.access(bindir / b, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"missing control-plane binaries in {bindir}: {', '.join(missing)}")
    return bindir


def binaries_cached() -> bool:
    """Whether ``build.sh`` would return without building (or ``KAI_CONTROLPLANE_BIN`` is set)."""
    return bool(os.environ.get("KAI_CONTROLPLANE_BIN")) or is_built(BUILD_SCRIPT, "--print-bindir")


# --------------------------------------------------------------------------------------------------
# Certificates


@dataclass(frozen=True)
class _KeyPair:
    cert: Path
    key: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


class _CertificateAuthority:
    """One CA that signs every serving and client certificate of the cluster."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kai-e2e-ca")])
        self._name = name
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.pair = _KeyPair(directory / "ca.crt", directory / "ca.key")
        _write_cert(self.pair.cert, self._cert)
        _write_key(self.pair.key, self._key)

    def issue(
        self,
        name: str,
        *,
        common_name: str,
        organizations: Sequence[str] = (),
        server: bool = False,
        client: bool = False,
        dns_names: Sequence[str] = (),
        ips: Sequence[str] = (),
    ) -> _KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )
        if dns_names or ips:
            alt_names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
            alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = _KeyPair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        _write_cert(pair.cert, cert)
        _write_key(pair.key, key)
        return pair


def _write_service_account_keys(directory: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = directory / "sa.key", directory / "sa.pub"
    _write_key(private, key)
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public


# --------------------------------------------------------------------------------------------------
# Processes


def _free_ports(count: int) -> list[int]:
    """Distinct free TCP ports on 127.0.0.1 (held open together so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _load_prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


# Resolved here, not in the forked child: symbol lookup after fork() may deadlock.
_PRCTL = _load_prctl()


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL the child when the thread that started it dies (Linux PR_SET_PDEATHSIG).

    So no etcd or apiserver outlives a test run that was killed before it could clean up. Start
    ControlPlane from a thread that lives as long as it should (pytest's main thread does).
    """
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _insecure_context() -> ssl.SSLContext:
    """For the self-signed /healthz endpoints of the controller manager and scheduler (loopback only)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_workdirs(parent: Path) -> None:
    """Remove work directories left by earlier runs whose Python process is gone (e.g. SIGKILLed)."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            match = re.fullmatch(rf"{_WORKDIR_PREFIX}(\d+)-\w+", entry.name)
            kept = (entry / _KEEP_MARKER).exists()
            if match and entry.is_dir() and not kept and not _pid_alive(int(match.group(1))):
                shutil.rmtree(entry, ignore_errors=True)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(data.splitlines()[-lines:])


@dataclass
class Component:
    """One running child process of the control plane."""

    name: str
    args: list[str]
    log: Path
    process: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)

    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log, lines)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL whatever is left after ``grace`` seconds."""
        pgid = self.process.pid  # start_new_session=True: the child leads its own process group
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            # Not reaped yet, so the group id cannot have been reused.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            self.process.wait(timeout=10)


# --------------------------------------------------------------------------------------------------
# The control plane


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager + kwok on 127.0.0.1, in a temporary directory."""

    def __init__(
        self,
        *,
        bindir: Path | None = None,
        start_timeout: float = 120.0,
        keep_workdir: bool | None = None,
        apiserver_args: Sequence[str] = (),
        controller_manager_args: Sequence[str] = (),
        kwok_args: Sequence[str] = (),
    ) -> None:
        self._bindir = bindir
        self.start_timeout = start_timeout
        self.keep_workdir = os.environ.get("KAI_E2E_KEEP") == "1" if keep_workdir is None else keep_workdir
        self._extra_args = {
            "kube-apiserver": list(apiserver_args),
            "kube-controller-manager": list(controller_manager_args),
            "kwok": list(kwok_args),
        }
        self.components: dict[str, Component] = {}
        self.workdir: Path | None = None
        self.ports: dict[str, int] = {}
        self.startup_seconds: float | None = None
        self._node_counters: dict[str, int] = {}
        self._nodes_created = 0
        self._ssl: ssl.SSLContext | None = None
        self._ca: _CertificateAuthority | None = None
        self._kubectl = os.environ.get("KAI_KUBECTL", "kubectl")

    # -- lifecycle ---------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def bindir(self) -> Path:
        if self._bindir is None:
            self._bindir = ensure_binaries()
        return self._bindir

    @property
    def dir(self) -> Path:
        if self.workdir is None:
            raise ControlPlaneError("the control plane is not started")
        return self.workdir

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (client certificate in group system:masters)."""
        return self.dir / "admin.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def ca_file(self) -> Path:
        return self.dir / "pki" / "ca.crt"

    def start(self) -> Self:
        """Start everything and wait until it is ready; on any failure, stop what was started."""
        if self.workdir is not None:
            raise ControlPlaneError("already started")
        begin = time.monotonic()
        bindir = self.bindir
        shm = Path("/dev/shm")
        parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
        _remove_stale_workdirs(parent)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{_WORKDIR_PREFIX}{os.getpid()}-", dir=parent))
        # Belt and braces: children also die with this process (PR_SET_PDEATHSIG).
        atexit.register(self.stop)
        try:
            self._start(bindir)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - begin
        return self

    def _start(self, bindir: Path) -> None:
        work = self.dir
        pki = work / "pki"
        (work / "logs").mkdir()
        pki.mkdir()
        names = ["etcd", "etcd-peer", "apiserver", "controller-manager", "kwok", "scheduler"]
        self.ports = dict(zip(names, _free_ports(len(names)), strict=True))

        ca = self._ca = _CertificateAuthority(pki)
        serving = ca.issue(
            "apiserver",
            common_name="kube-apiserver",
            server=True,
            dns_names=[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ips=["127.0.0.1", str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))],
        )
        admin = ca.issue("admin", common_name="kai-e2e-admin", organizations=["system:masters"], client=True)
        kcm = ca.issue("controller-manager", common_name="system:kube-controller-manager", client=True)
        sched = ca.issue("scheduler", common_name="system:kube-scheduler", client=True)
        # Identity the API server uses towards aggregated API servers; they trust its request headers.
        front_proxy = ca.issue("front-proxy-client", common_name="front-proxy-client", client=True)
        sa_key, sa_pub = _write_service_account_keys(pki)

        self._write_kubeconfig(work / "admin.kubeconfig", "kai-e2e-admin", client=admin)
        self._write_kubeconfig(work / "controller-manager.kubeconfig", "controller-manager", client=kcm)
        self._write_kubeconfig(work / "scheduler.kubeconfig", "scheduler", client=sched)

        ctx = ssl.create_default_context(cafile=str(ca.pair.cert))
        ctx.load_cert_chain(str(admin.cert), str(admin.key))
        self._ssl = ctx

        deadline = time.monotonic() + self.start_timeout

        # etcd ----------------------------------------------------------------------------------
        etcd_url = f"http://127.0.0.1:{self.ports['etcd']}"
        peer_url = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        self._spawn(
            "etcd",
            [
                str(bindir / "etcd"),
                "--name=kai-e2e",
                f"--data-dir={work / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=kai-e2e={peer_url}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._wait(lambda: self._http_ok(f"{etcd_url}/health"), deadline, "etcd /health", ["etcd"])

        # kube-apiserver ------------------------------------------------------------------------
        self._spawn(
            "kube-apiserver",
            [
                str(bindir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.ports['apiserver']}",
                f"--cert-dir={work / 'apiserver-certs'}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={ca.pair.cert}",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={sa_pub}",
                f"--service-account-signing-key-file={sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=RBAC",
                f"--requestheader-client-ca-file={ca.pair.cert}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={front_proxy.cert}",
                f"--proxy-client-key-file={front_proxy.key}",
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                # A test bed for a scheduler: no API priority and fairness queueing in the way.
                "--enable-priority-and-fairness=false",
                "--max-requests-inflight=2000",
                "--max-mutating-requests-inflight=1000",
                "--profiling=false",
                *self._extra_args["kube-apiserver"],
            ],
        )
        self._wait(self._apiserver_ready, deadline, "kube-apiserver /readyz", ["kube-apiserver", "etcd"])

        # kube-controller-manager and kwok, started together ----------------------------------------
        kcm_kubeconfig = work / "controller-manager.kubeconfig"
        self._spawn(
            "kube-controller-manager",
            [
                str(bindir / "kube-controller-manager"),
                f"--kubeconfig={kcm_kubeconfig}",
                f"--authentication-kubeconfig={kcm_kubeconfig}",
                f"--authorization-kubeconfig={kcm_kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports['controller-manager']}",
                f"--cert-dir={work / 'controller-manager-certs'}",
                f"--root-ca-file={ca.pair.cert}",
                f"--service-account-private-key-file={sa_key}",
                "--use-service-account-credentials=true",
                f"--cluster-signing-cert-file={ca.pair.cert}",
                f"--cluster-signing-key-file={ca.pair.key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                *self._extra_args["kube-controller-manager"],
            ],
        )
        kwok_home = work / "kwok-home"
        kwok_home.mkdir()
        self._spawn(
            "kwok",
            [
                str(bindir / "kwok"),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={KWOK_STAGES}",
                "--manage-all-nodes=true",
                f"--cidr={POD_CIDR}",
                f"--node-ip={NODE_IP_BASE}",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{self.ports['kwok']}",
                *self._extra_args["kwok"],
            ],
            env={"HOME": str(kwok_home)},
        )
        self._wait(
            lambda: self._http_ok(f"https://127.0.0.1:{self.ports['controller-manager']}/healthz", verify=False),
            deadline,
            "kube-controller-manager /healthz",
            ["kube-controller-manager"],
        )
        self._wait(
            lambda: self._http_ok(f"http://127.0.0.1:{self.ports['kwok']}/healthz"), deadline, "kwok /healthz", ["kwok"]
        )
        # The ServiceAccount controller is running once `default` has its ServiceAccount.
        self._wait(
            lambda: self._exists("/api/v1/namespaces/default/serviceaccounts/default"),
            deadline,
            "ServiceAccount default/default (made by kube-controller-manager)",
            ["kube-controller-manager"],
        )

    def stop(self) -> None:
        """Stop every process this object started (reverse order) and remove the work directory."""
        atexit.unregister(self.stop)
        for component in reversed(list(self.components.values())):
            component.stop()
        self.components.clear()
        if self.workdir is not None:
            if self.keep_workdir:
                (self.workdir / _KEEP_MARKER).write_text("kept by KAI_E2E_KEEP=1 / keep_workdir=True; remove by hand\n")
                print(f"control plane work directory kept: {self.workdir}", file=sys.stderr)
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def _spawn(self, name: str, args: list[str], env: Mapping[str, str] | None = None) -> Component:
        log = self.dir / "logs" / f"{name}.log"
        child_env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "ETCD"))}
        child_env.update(env or {})
        with log.open("wb") as out:
            process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                env=child_env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        component = Component(name, args, log, process)
        self.components[name] = component
        return component

    def _wait(self, ready: Callable[[], bool], deadline: float, what: str, watch: Sequence[str]) -> None:
        """Poll ``ready`` until it returns True; fail early if a component exits, or at the deadline."""
        began = time.monotonic()
        delay = 0.05
        while True:
            for component in self.components.values():
                if not component.running():
                    raise ControlPlaneError(
                        f"{component.name} exited with status {component.process.returncode} while waiting for "
                        f"{what}; last lines of {component.log}:\n{component.log_tail()}"
                    )
            if ready():
                return
            if time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- last lines of {self.components[n].log}:\n{self.components[n].log_tail()}"
                    for n in watch
                    if n in self.components
                )
                raise ControlPlaneError(f"timed out after {time.monotonic() - began:.0f}s waiting for {what}\n{tails}")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _http_ok(self, url: str, *, verify: bool = True) -> bool:
        parsed = urllib.parse.urlsplit(url)
        conn: http.client.HTTPConnection
        if parsed.scheme == "https":
            ctx = self._ssl if verify else _insecure_context()
            conn = http.client.HTTPSConnection(parsed.hostname or "127.0.0.1", parsed.port, context=ctx, timeout=5)
        else:
            conn = http.client.HTTPConnection(parsed.hostname or "127.0.0.1", parsed.port, timeout=5)
        try:
            conn.request("GET", parsed.path or "/")
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def _apiserver_ready(self) -> bool:
        return self._http_ok(f"{self.server}/readyz")

    def _exists(self, path: str) -> bool:
        try:
            self.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        except OSError:
            return False
        return True

    # -- kubeconfigs -------------------------------------------------------------------------------

    def _write_kubeconfig(
        self, path: Path, user: str, *, client: _KeyPair | None = None, token: str | None = None
    ) -> Path:
        credentials: dict[str, str] = {}
        if client is not None:
            credentials = {"client-certificate": str(client.cert), "client-key": str(client.key)}
        if token is not None:
            credentials = {"token": token}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "kai-e2e",
                    "cluster": {"server": self.server, "certificate-authority": str(self.dir / "pki" / "ca.crt")},
                }
            ],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": user, "context": {"cluster": "kai-e2e", "user": user}}],
            "current-context": user,
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def user_kubeconfig(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig authenticating as ``user`` (member of ``groups``) by a client certificate.

        For RBAC tests of identities that are not ServiceAccounts; nothing is bound here.
        """
        if self._ca is None:
            raise ControlPlaneError("the control plane is not started")
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", user)
        pair = self._ca.issue(f"user-{slug}", common_name=user, organizations=groups, client=True)
        return self._write_kubeconfig(self.dir / f"user-{slug}.kubeconfig", user, client=pair)

    def serviceaccount_kubeconfig(
        self, namespace: str, name: str, *, expiration_seconds: int = 3600, create: bool = True
    ) -> Path:
        """A kubeconfig authenticating as ServiceAccount ``namespace/name`` with a TokenRequest token.

        With ``create`` the namespace and ServiceAccount are made first if missing. The account has
        whatever RBAC grants it; nothing is bound here.
        """
        if create:
            self.ensure_namespace(namespace)
            self.create(
                f"/api/v1/namespaces/{namespace}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
                exist_ok=True,
            )
        review = self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_seconds},
            },
        )
        token = review["status"]["token"]
        user = f"system:serviceaccount:{namespace}:{name}"
        return self._write_kubeconfig(self.dir / f"sa-{namespace}-{name}.kubeconfig", user, token=token)

    # -- API access --------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | Sequence[Any] | None = None,
        *,
        content_type: str = "application/json",
        token: str | None = None,
        timeout: float = 30.0,
    ) -> Any:
        """One call to the API server as admin (or with a bearer ``token``); returns the decoded JSON. A 429
        "storage is (re)initializing" (the API server's answer while its watch cache fills again, e.g. after etcd
        restarted) is asked again, as Retry-After says, for up to ``REINITIALIZING_WAIT_S``: the request was not
        served, and the test's question is about kaid, not about that moment."""
        deadline = time.monotonic() + REINITIALIZING_WAIT_S
        while True:
            try:
                return self._request_once(method, path, body, content_type=content_type, token=token, timeout=timeout)
            except ApiError as exc:
                if not (exc.status == 429 and "initializing" in exc.body) or time.monotonic() >= deadline:
                    raise
                time.sleep(min(max(exc.retry_after, 0.1), 1.0, max(deadline - time.monotonic(), 0.0)))

    def _request_once(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | Sequence[Any] | None,
        *,
        content_type: str,
        token: str | None,
        timeout: float,
    ) -> Any:
        if self._ssl is None:
            raise ControlPlaneError("the control plane is not started")
        ctx = self._ssl
        headers = {"Accept": "application/json"}
        if token is not None:
            ctx = ssl.create_default_context(cafile=str(self.ca_file))
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        conn = http.client.HTTPSConnection("127.0.0.1", self.ports["apiserver"], context=ctx, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read().decode("utf-8", errors="replace")
        finally:
            conn.close()
        if response.status >= 300:
            retry_after = response.getheader("Retry-After") or ""
            raise ApiError(method, path, response.status, raw, float(retry_after) if retry_after.isdigit() else 0.0)
        return json.loads(raw) if raw else None

    def create(self, collection_path: str, obj: Mapping[str, Any], *, exist_ok: bool = False) -> Any:
        """POST ``obj`` to ``collection_path``; with ``exist_ok`` a 409 Conflict is not an error."""
        try:
            return self.request("POST", collection_path, obj)
        except ApiError as exc:
            if exist_ok and exc.status == 409:
                return None
            raise

    def ensure_namespace(self, name: str) -> None:
        self.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, exist_ok=True
        )

    def wait_for_default_serviceaccount(self, namespace: str, timeout: float = 30.0) -> None:
        """Wait until the controller manager has made ``namespace``'s default ServiceAccount.

        Until then the ServiceAccount admission plugin rejects pods in that namespace.
        """
        wait_until(
            lambda: self._exists(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"),
            timeout,
            f"ServiceAccount {namespace}/default",
        )

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120.0,
        kubeconfig: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster (admin unless ``kubeconfig``); raise on failure if ``check``."""
        cmd = [self._kubectl, f"--kubeconfig={kubeconfig or self.kubeconfig}", *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise ControlPlaneError(
                f"{' '.join(cmd)} failed with status {proc.returncode}:\n{proc.stderr.strip()}\n{proc.stdout.strip()}"
            )
        return proc

    def apply(self, manifest: str | Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> str:
        """``kubectl apply`` a YAML string, one object, or a list of objects; returns kubectl's output."""
        if isinstance(manifest, str):
            text = manifest
        elif isinstance(manifest, Mapping):
            text = yaml.safe_dump(dict(manifest))
        else:
            text = yaml.safe_dump_all([dict(m) for m in manifest])
        return self.kubectl("apply", "-f", "-", input=text).stdout

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` for the admin kubeconfig (imported lazily)."""
        k8s_config: Any = importlib.import_module("kubernetes.config")
        return k8s_config.new_client_from_config(config_file=str(self.kubeconfig))

    # -- fake GPU nodes ----------------------------------------------------------------------------

    def add_gpu_nodes(
        self,
        count: int,
        gpus: int = 8,
        gpu_memory_mib: int = 81920,
        product: str = "NVIDIA-H100-80GB-HBM3",
        labels: Mapping[str, str] | None = None,
        name_prefix: str = "gpu-node",
        *,
        zone: str | None = "zone-a",
        node_labels: Callable[[int], Mapping[str, str]] | None = None,
        cpu: str = "128",
        memory: str = "2Ti",
        pods: int = 110,
        annotations: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] = (),
        extended: Mapping[str, str] | None = None,
        wait: bool = False,
        timeout: float = 60.0,
    ) -> list[str]:
        """Create ``count`` fake GPU nodes played by kwok; returns their names.

        Names are ``{name_prefix}-{i}``, numbered on from earlier calls with the same prefix. Every node
        gets the NVIDIA GPU labels, ``topology.kubernetes.io/zone`` (unless ``zone`` is None), the extra
        ``labels`` (e.g. ``{"kai.scheduler/rack": "rack-0"}``) and ``node_labels(i)`` for its index ``i``
        within this call (e.g. ``lambda i: {"kai.scheduler/rack": f"rack-{i // 4}"}``); ``extended``: extended
        resources in their capacity and allocatable (e.g. ``{"rdma/ib": "1"}``). With ``wait`` it returns once all
        are Ready and untainted (see ``wait_nodes_ready``).
        """
        start = self._node_counters.get(name_prefix, 0)
        names: list[str] = []
        for i in range(count):
            name = f"{name_prefix}-{start + i}"
            node_ip = str(NODE_IP_BASE + self._nodes_created)
            self._nodes_created += 1
            node_labels_all = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.memory": str(gpu_memory_mib),
                "nvidia.com/gpu.count": str(gpus),
            }
            if zone is not None:
                node_labels_all["topology.kubernetes.io/zone"] = zone
            node_labels_all.update(labels or {})
            if node_labels is not None:
                node_labels_all.update(node_labels(i))
            resources = {
                "cpu": cpu,
                "memory": memory,
                "pods": str(pods),
                "ephemeral-storage": "1Ti",
                "nvidia.com/gpu": str(gpus),
                **(extended or {}),
            }
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": node_labels_all,
                    "annotations": {
                        "kwok.x-k8s.io/node": "fake",
                        "node.alpha.kubernetes.io/ttl": "0",
                        **(annotations or {}),
                    },
                },
                "spec": {"taints": [dict(t) for t in taints]} if taints else {},
                "status": {
                    "capacity": resources,
                    "allocatable": dict(resources),
                    "addresses": [{"type": "InternalIP", "address": node_ip}, {"type": "Hostname", "address": name}],
                },
            }
            self.create("/api/v1/nodes", node)
            names.append(name)
        self._node_counters[name_prefix] = start + count
        if wait:
            self.wait_nodes_ready(names, timeout=timeout)
        return names

    def node_problems(self, names: Iterable[str] | None = None) -> dict[str, str]:
        """For each node (all, or ``names``) that is not yet usable, why: not Ready, or a not-ready taint."""
        nodes = {n["metadata"]["name"]: n for n in self.request("GET", "/api/v1/nodes")["items"]}
        wanted = list(nodes) if names is None else list(names)
        problems: dict[str, str] = {}
        for name in wanted:
            node = nodes.get(name)
            if node is None:
                problems[name] = "missing"
                continue
            conditions = {c["type"]: c for c in node.get("status", {}).get("conditions", [])}
            ready = conditions.get("Ready", {}).get("status")
            taints = [
                f"{t['key']}:{t['effect']}"
                for t in node.get("spec", {}).get("taints", []) or []
                if t["key"] in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
            ]
            if ready != "True":
                problems[name] = f"Ready={ready}"
            elif taints:
                problems[name] = f"tainted {', '.join(taints)}"
        return problems

    def wait_nodes_ready(self, names: Iterable[str] | None = None, timeout: float = 60.0) -> None:
        """Wait until the nodes (all, or ``names``) are Ready and carry no not-ready/unreachable taint."""
        wanted = None if names is None else list(names)
        last: dict[str, str] = {}

        def done() -> bool:
            nonlocal last
            last = self.node_problems(wanted)
            return not last

        try:
            wait_until(done, timeout, "nodes to become Ready")
        except ControlPlaneError as exc:
            shown = dict(list(last.items())[:10])
            raise ControlPlaneError(
                f"{exc}; {len(last)} not ready, e.g. {shown}\n--- kwok log:\n{self._log_tail('kwok')}"
            ) from exc

    def _log_tail(self, name: str) -> str:
        component = self.components.get(name)
        return component.log_tail() if component else "(not running)"

    # -- faults ------------------------------------------------------------------------------------

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send ``sig`` to a component's process group and, for a fatal signal, reap it (it stays listed)."""
        component = self.components[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(component.process.pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            component.process.wait(timeout=30)

    def restart(self, name: str, timeout: float = 120.0) -> float:
        """Start a stopped (or killed) component again with the same arguments and wait until it serves;
        returns the seconds that took. etcd: until the API server is ready again too."""
        old = self.components[name]
        if old.running():
            old.stop()
        began = time.monotonic()
        log = old.log
        with log.open("ab") as out:
            out.write(f"\n--- restarted by the test at {time.time():.3f} ---\n".encode())
        env = {"HOME": str(self.dir / "kwok-home")} if name == "kwok" else None
        with log.open("ab") as out:
            child_env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "ETCD"))}
            child_env.update(env or {})
            process = subprocess.Popen(
                old.args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                env=child_env, start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip
        self.components[name] = Component(name, old.args, log, process)
        deadline = time.monotonic() + timeout
        if name == "etcd":
            etcd_url = f"http://127.0.0.1:{self.ports['etcd']}"
            self._wait(lambda: self._http_ok(f"{etcd_url}/health"), deadline, "etcd /health", ["etcd"])
        self._wait(self._apiserver_ready, deadline, "kube-apiserver /readyz", ["kube-apiserver", "etcd"])
        return time.monotonic() - began

    def etcd_call(self, method: str, body: Mapping[str, Any]) -> Any:
        """One call to etcd's JSON gateway (``/v3/kv/range``, ``/v3/kv/compaction``, ...)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.ports["etcd"], timeout=30)
        try:
            conn.request("POST", method, body=json.dumps(body), headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            raw = response.read().decode()
        finally:
            conn.close()
        if response.status != 200:
            raise ControlPlaneError(f"etcd {method}: HTTP {response.status}: {raw[:500]}")
        return json.loads(raw)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (physically); returns that revision. Watches from
        an older resourceVersion can no longer be served from etcd."""
        head = self.etcd_call("/v3/kv/range", {"key": base64.b64encode(b"/registry/").decode(), "count_only": True})
        revision = int(head["header"]["revision"])
        self.etcd_call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    # -- kube-scheduler (baseline for benchmarks) ---------------------------------------------------

    def start_kube_scheduler(self, extra_args: Sequence[str] = (), timeout: float = 60.0) -> Component:
        """Start the default kube-scheduler (``schedulerName: default-scheduler``) and wait for /healthz."""
        if "kube-scheduler" in self.components:
            raise ControlPlaneError("kube-scheduler is already running")
        kubeconfig = self.dir / "scheduler.kubeconfig"
        component = self._spawn(
            "kube-scheduler",
            [
                str(self.bindir / "kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports['scheduler']}",
                f"--cert-dir={self.dir / 'scheduler-certs'}",
                *extra_args,
            ],
        )
        self._wait(
            lambda: self._http_ok(f"https://127.0.0.1:{self.ports['scheduler']}/healthz", verify=False),
            time.monotonic() + timeout,
            "kube-scheduler /healthz",
            ["kube-scheduler"],
        )
        return component

    def stop_kube_scheduler(self) -> None:
        component = self.components.pop("kube-scheduler", None)
        if component is not None:
            component.stop()


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    """Poll ``predicate`` until it is true; raise ControlPlaneError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
