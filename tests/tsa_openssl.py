"""Test helpers: a small PKI for TSAs, and OpenSSL's ``openssl ts -reply`` as an HTTP TSA.

``openssl_tsa(tmp_path)`` proves the project's client against a TSA it did not write: it
writes a CA, a TSA certificate and an ``openssl ts`` config, and serves
``openssl ts -reply -config ... -queryfile ... -out ...`` behind a stdlib HTTP server bound
to port 0. ``make_pki`` builds (odd) certificate sets for the verifier's negative tests.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import cast

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests import processes

__all__ = [
    "OPENSSL",
    "OPENSSL_POLICY",
    "Pki",
    "make_ca",
    "make_pki",
    "openssl_tsa",
    "pem",
    "run_openssl",
]

OPENSSL = shutil.which("openssl")
OPENSSL_POLICY = "1.2.3.4.1"
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def pem(cert: x509.Certificate) -> bytes:
    """PEM encoding of a certificate."""
    return cert.public_bytes(serialization.Encoding.PEM)


def _key(key_type: str) -> PrivateKey:
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    curve = ec.SECP384R1() if key_type == "ec384" else ec.SECP256R1()
    return ec.generate_private_key(curve)


def _usage(*, ca: bool, signs: bool = True) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=signs and not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _issue(
    cn: str,
    key: PrivateKey,
    issuer: tuple[x509.Certificate, PrivateKey] | None,
    *,
    validity: tuple[datetime, datetime],
    eku: list[x509.ObjectIdentifier] | None = None,
    eku_critical: bool = True,
    signs: bool = True,
) -> x509.Certificate:
    """A CA certificate when ``eku`` is None, else an end-entity certificate with that EKU."""
    ca = eku is None
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    issuer_name, signing_key = (subject, key) if issuer is None else (issuer[0].subject, issuer[1])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity[0])
        .not_valid_after(validity[1])
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(_usage(ca=ca, signs=signs), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    )
    if eku:
        builder = builder.add_extension(x509.ExtendedKeyUsage(eku), critical=eku_critical)
    return builder.sign(signing_key, hashes.SHA256())


def make_ca(common_name: str) -> x509.Certificate:
    """A self-signed P-256 CA certificate valid now (its key is thrown away)."""
    now = datetime.now(UTC)
    return _issue(common_name, _key("ec"), None, validity=(now - timedelta(days=1), now))


@dataclass(frozen=True)
class Pki:
    """root -> (intermediate ->) TSA certificate, with keys."""

    root_cert: x509.Certificate
    root_key: PrivateKey
    tsa_cert: x509.Certificate
    tsa_key: PrivateKey
    intermediates: tuple[x509.Certificate, ...] = ()


def make_pki(
    *,
    key_type: str = "ec",
    name: str = "Test TSA",
    eku: list[x509.ObjectIdentifier] | None = None,
    eku_critical: bool = True,
    validity: tuple[datetime, datetime] | None = None,
    intermediate: bool = False,
    digital_signature: bool = True,
) -> Pki:
    """A PKI for tests; defaults are a valid TSA: critical EKU timeStamping only, valid now."""
    now = datetime.now(UTC)
    valid = validity or (now - timedelta(days=1), now + timedelta(days=30))
    root_key = _key(key_type)
    root = _issue(f"{name} Root", root_key, None, validity=valid)
    issuer: tuple[x509.Certificate, PrivateKey] = (root, root_key)
    chain: tuple[x509.Certificate, ...] = ()
    if intermediate:
        mid_key = _key(key_type)
        mid = _issue(f"{name} Intermediate", mid_key, issuer, validity=valid)
        issuer, chain = (mid, mid_key), (mid,)
    tsa_key = _key(key_type)
    usage = [ExtendedKeyUsageOID.TIME_STAMPING] if eku is None else eku
    tsa = _issue(
        name,
        tsa_key,
        issuer,
        validity=valid,
        eku=usage,
        eku_critical=eku_critical,
        signs=digital_signature,
    )
    return Pki(root, root_key, tsa, tsa_key, chain)


def run_openssl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``openssl`` with ``args``; never raises on a non-zero exit."""
    assert OPENSSL is not None, "openssl is not installed"
    return processes.run(
        [OPENSSL, *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False
    )


# --- OpenSSL as a TSA -------------------------------------------------------------------------


def _write_private(path: Path, key: PrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_config(workdir: Path, *, ess_cert_id_alg: str) -> Path:
    config = workdir / "openssl-tsa.cnf"
    config.write_text(
        f"""[ tsa ]
default_tsa = tsa_config

[ tsa_config ]
serial = {workdir}/tsaserial
crypto_device = builtin
signer_cert = {workdir}/tsa.pem
certs = {workdir}/tsa.pem
signer_key = {workdir}/tsa.key
signer_digest = sha256
default_policy = {OPENSSL_POLICY}
digests = sha256, sha384, sha512
accuracy = secs:1, millisecs:500, microsecs:100
clock_precision_digits = 3
ordering = no
tsa_name = yes
ess_cert_id_chain = no
ess_cert_id_alg = {ess_cert_id_alg}
"""
    )
    (workdir / "tsaserial").write_text("01\n")
    return config


class _OpenSslHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        server = cast(_OpenSslServer, self.server)
        query = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with server.lock, tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "q.tsq").write_bytes(query)
            result = run_openssl(
                "ts", "-reply", "-config", str(server.config),
                "-queryfile", f"{tmp}/q.tsq", "-out", f"{tmp}/r.tsr",
            )  # fmt: skip
            reply = (Path(tmp) / "r.tsr").read_bytes() if result.returncode == 0 else b""
        status = 200 if reply else 500
        self.send_response(status)
        self.send_header("Content-Type", "application/timestamp-reply")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class _OpenSslServer(ThreadingHTTPServer):
    daemon_threads = True
    config: Path
    lock: threading.Lock


@contextmanager
def openssl_tsa(
    tmp_path: Path, *, key_type: str = "rsa", ess_cert_id_alg: str = "sha256"
) -> Iterator[tuple[str, bytes, bytes]]:
    """Serve ``openssl ts -reply`` on 127.0.0.1:0; yields (url, root PEM, TSA cert PEM).

    ``key_type``: "rsa" (PKCS#1 v1.5), "ec" (P-256) or "ec384". (``openssl ts`` signs through
    PKCS7, which cannot do RSA-PSS.) ``ess_cert_id_alg``: "sha1" gives ESSCertID (v1),
    anything else ESSCertIDv2.
    """
    workdir = tmp_path / "openssl-tsa"
    workdir.mkdir()
    pki = make_pki(key_type=key_type, name="OpenSSL TSA")
    (workdir / "root.pem").write_bytes(pem(pki.root_cert))
    _write_private(workdir / "root.key", pki.root_key)
    (workdir / "tsa.pem").write_bytes(pem(pki.tsa_cert))
    _write_private(workdir / "tsa.key", pki.tsa_key)
    httpd = _OpenSslServer(("127.0.0.1", 0), _OpenSslHandler)
    httpd.config = _write_config(workdir, ess_cert_id_alg=ess_cert_id_alg)
    httpd.lock = threading.Lock()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/"
        yield url, (workdir / "root.pem").read_bytes(), (workdir / "tsa.pem").read_bytes()
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
