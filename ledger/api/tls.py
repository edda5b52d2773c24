"""TLS material: development certificates (``ledger tls dev-cert``) and loading PEM files.

``make_dev_certs`` writes a local CA and a server certificate (SANs: the given host names and
IP addresses) and, for mTLS, client certificates whose common name is the client's identity
(``[auth.mtls]`` maps it to scopes). Everything is ECDSA P-256; private keys are written 0600.
For development only: a real deployment uses certificates from its own PKI.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ledger.core.errors import FormatError
from ledger.fileio.durable import write_file
from ledger.fileio.private import read_private, write_private

__all__ = [
    "DevCerts",
    "ServerTls",
    "load_server_tls",
    "make_dev_certs",
    "read_pem",
    "server_ssl_context",
]

_VALID_DAYS = 365


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerTls:
    """PEM bytes a server needs: its chain and key, and the CA of clients (mTLS) if any."""

    cert_chain: bytes
    private_key: bytes
    client_ca: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DevCerts:
    """Files ``make_dev_certs`` wrote."""

    ca: Path
    server_cert: Path
    server_key: Path
    clients: tuple[tuple[Path, Path], ...]


def read_pem(path: Path, what: str) -> bytes:
    """A PEM file's bytes (a clear error for a missing, unreadable or non-PEM file)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FormatError(f"{what} {path}: {exc.strerror}") from None
    if b"-----BEGIN " not in data:
        raise FormatError(f"{what} {path} is not a PEM file")
    return data


def load_server_tls(cert: Path, key: Path, client_ca: Path | None) -> ServerTls:
    """Read and check the server's TLS files (the key must be private: mode 0600)."""
    chain = read_pem(cert, "TLS certificate")
    try:
        x509.load_pem_x509_certificates(chain)
    except ValueError as exc:
        raise FormatError(f"TLS certificate {cert}: {exc}") from None
    private = read_private(key, "TLS key")
    if b"-----BEGIN " not in private:
        raise FormatError(f"TLS key {key} is not a PEM file")
    ca = read_pem(client_ca, "TLS client CA") if client_ca is not None else None
    return ServerTls(cert_chain=chain, private_key=private, client_ca=ca)


def server_ssl_context(tls: ServerTls) -> ssl.SSLContext:
    """An ``ssl`` server context with the same chain, key and client CA (the HTTP endpoint)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as tmp:  # ssl loads chains from files only
        cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        _write(cert, tls.cert_chain, private=False)
        _write(key, tls.private_key, private=True)
        context.load_cert_chain(cert, key)
    if tls.client_ca is not None:
        context.load_verify_locations(cadata=tls.client_ca.decode())
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: Path, data: bytes, private: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if private:
        write_private(path, data)
    else:
        write_file(path, data, mode=0o644)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _issue(
    *,
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    now: dt.datetime,
    usage: x509.ObjectIdentifier | None = None,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    issuer_name = issuer[0].subject if issuer else _name(subject)
    signing_key = issuer[1] if issuer else key
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def make_dev_certs(
    out: Path, *, hosts: list[str], clients: list[str], now: dt.datetime
) -> DevCerts:
    """Write ``ca.pem``, ``server.pem``/``server.key`` and ``<client>.pem``/``<client>.key``."""
    pem = serialization.Encoding.PEM
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue(subject="Decision Ledger development CA", key=ca_key, issuer=None, now=now)
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "ca.pem", ca.public_bytes(pem), private=False)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _issue(
        subject=hosts[0],
        key=server_key,
        issuer=(ca, ca_key),
        now=now,
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        sans=[_san(h) for h in hosts],
    )
    _write(out / "server.pem", server.public_bytes(pem), private=False)
    _write(out / "server.key", _key_pem(server_key), private=True)
    written = []
    for client in clients:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _issue(
            subject=client,
            key=key,
            issuer=(ca, ca_key),
            now=now,
            usage=ExtendedKeyUsageOID.CLIENT_AUTH,
        )
        cert_path, key_path = out / f"{client}.pem", out / f"{client}.key"
        _write(cert_path, cert.public_bytes(pem), private=False)
        _write(key_path, _key_pem(key), private=True)
        written.append((cert_path, key_path))
    return DevCerts(
        ca=out / "ca.pem",
        server_cert=out / "server.pem",
        server_key=out / "server.key",
        clients=tuple(written),
    )
