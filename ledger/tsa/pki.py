"""Keys and certificates for the embedded development TSA (RFC 5280 profile, RFC 3161 §2.3).

A self-signed root CA (basicConstraints CA, pathLen 0; keyUsage keyCertSign/cRLSign) and
a TSA certificate issued by it whose extendedKeyUsage is critical and holds only
id-kp-timeStamping, with keyUsage digitalSignature: what RFC 3161 and ``openssl ts -verify``
require. Keys are ECDSA P-256 (default) or RSA-3072, stored as unencrypted PKCS#8 PEM files
with mode 0600.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ledger.fileio import private

__all__ = [
    "PrivateKey",
    "generate_key",
    "issue_tsa_certificate",
    "load_key",
    "make_root",
    "write_private",
]

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
PublicKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey
ROOT_LIFETIME = timedelta(days=3650)
TSA_LIFETIME = timedelta(days=1825)


def generate_key(key_type: str = "ec") -> PrivateKey:
    """A new ECDSA P-256 (``"ec"``) or RSA-3072 (``"rsa"``) private key."""
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=3072)
    raise ValueError(f"key_type must be 'ec' or 'rsa', got {key_type!r}")


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: PublicKey, not_before: datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def make_root(common_name: str, key: PrivateKey, *, not_before: datetime) -> x509.Certificate:
    """A self-signed CA certificate valid for ten years from ``not_before``."""
    name = _name(common_name)
    usage = x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    builder = (
        _builder(name, name, key.public_key(), not_before)
        .not_valid_after(not_before + ROOT_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
    )
    return builder.sign(key, hashes.SHA256())


def issue_tsa_certificate(
    common_name: str,
    public_key: PublicKey,
    issuer: x509.Certificate,
    issuer_key: PrivateKey,
    *,
    not_before: datetime,
) -> x509.Certificate:
    """A TSA certificate: critical EKU id-kp-timeStamping only, keyUsage digitalSignature."""
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    not_after = min(not_before + TSA_LIFETIME, issuer.not_valid_after_utc)
    builder = (
        _builder(_name(common_name), issuer.subject, public_key, not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
    )
    return builder.sign(issuer_key, hashes.SHA256())


def write_private(path: Path, key: PrivateKey) -> None:
    """Write ``key`` as PKCS#8 PEM to ``path``, created with mode 0600 (never group-readable)."""
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    private.write_private(path, pem)


def load_key(path: Path) -> PrivateKey:
    """Load a PEM private key written by ``write_private`` (ECDSA or RSA only); refused when
    group or others may access the file (``ledger.fileio.private``)."""
    key = serialization.load_pem_private_key(private.read_private(path, "TSA key"), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"{path}: unsupported key type {type(key).__name__}")
    return key
