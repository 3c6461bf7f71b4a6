"""The webhook's certificates, made and rotated by kai itself (no cert-manager): a CA whose certificate and key
live in a Secret (shared by the webhook's replicas), and a serving certificate per replica, signed by it and
never stored. The API server trusts the CA through the ``caBundle`` of kai's webhook configurations.

Rotation: a serving certificate is made again when a third of its life is left; the CA when a tenth of its life
is left, and then the old CA stays in the bundle (``previous``) so that replicas still serving with a certificate
it signed are trusted until they make theirs again.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_NAME = "kai-webhook-ca"
CA_CERT, CA_KEY, CA_PREVIOUS = "ca.crt", "ca.key", "ca-previous.crt"  # keys of the Secret's data
SERVING_RENEW_LEFT = 1 / 3
CA_RENEW_LEFT = 1 / 10


@dataclass(frozen=True)
class Authority:
    cert: bytes  # PEM
    key: bytes  # PEM
    previous: bytes = b""  # PEM of the CA before the last rotation, trusted as well while it lasts

    @property
    def bundle(self) -> bytes:
        """What the API server must trust: this CA, and the one before it."""
        return self.cert + self.previous

    def secret_data(self) -> dict[str, str]:
        data = {CA_CERT: _b64(self.cert), CA_KEY: _b64(self.key)}
        if self.previous:
            data[CA_PREVIOUS] = _b64(self.previous)
        return data

    @classmethod
    def from_secret(cls, secret: dict[str, object]) -> Authority:
        """Raises ValueError when the Secret does not hold a CA."""
        data = secret.get("data") or {}
        if not isinstance(data, dict) or CA_CERT not in data or CA_KEY not in data:
            raise ValueError(f"the Secret has no {CA_CERT} and {CA_KEY}")
        ca = cls(base64.b64decode(data[CA_CERT]), base64.b64decode(data[CA_KEY]),
                 base64.b64decode(data.get(CA_PREVIOUS) or b""))
        x509.load_pem_x509_certificate(ca.cert)  # readable, or ValueError
        return ca


def _b64(pem: bytes) -> str:
    return base64.b64encode(pem).decode()


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _usage(*, sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                         data_encipherment=False, key_agreement=False, key_cert_sign=sign, crl_sign=sign,
                         encipher_only=False, decipher_only=False)


def new_authority(days: float, now: dt.datetime, previous: bytes = b"") -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_usage(sign=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return Authority(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key), previous)


def serving_certificate(ca: Authority, hosts: Sequence[str], hours: float, now: dt.datetime) -> tuple[bytes, bytes]:
    """(certificate chain PEM, key PEM) for ``hosts`` (DNS names or IP addresses), signed by ``ca``."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(hours=hours))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_usage(sign=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def due(cert_pem: bytes, left: float, now: dt.datetime) -> bool:
    """Whether less than ``left`` (a fraction) of the certificate's life remains."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return (end - now) < (end - start) * left


def signed_by(cert_pem: bytes, ca: Authority) -> bool:
    """Whether ``ca`` signed the certificate (by its key identifier)."""
    cert, ca_cert = x509.load_pem_x509_certificate(cert_pem), x509.load_pem_x509_certificate(ca.cert)
    try:
        issuer = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier
        subject = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    except x509.ExtensionNotFound:
        return False
    return bool(issuer == subject)


def service_hosts(service: str, namespace: str, extra: Sequence[str] = ()) -> list[str]:
    """The names the API server may use for the webhook's Service, and any others configured."""
    return [f"{service}.{namespace}.svc", service, f"{service}.{namespace}", f"{service}.{namespace}.svc.cluster.local",
            *extra]
