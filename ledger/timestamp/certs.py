"""Certificate checks for RFC 3161 tokens: who signed, is it a TSA, does it chain to a root.

Implements the certificate half of RFC 3161 §2.3 / §2.4.2 verification (with RFC 5816
ESSCertIDv2 and RFC 5035 signingCertificate binding) and a small RFC 5280 path builder:

- ``find_signer``: the certificate named by SignerInfo.sid (issuerAndSerialNumber or
  subjectKeyIdentifier) among the token's certificates and the caller's intermediates;
- ``check_ess_cert_id``: signingCertificate (SHA-1) / signingCertificateV2 binds that cert;
- ``check_eku``: extendedKeyUsage is critical and is exactly id-kp-timeStamping;
- ``check_key_usage``: keyUsage, if present, allows digitalSignature or nonRepudiation;
- ``check_tsa_name``: TSTInfo.tsa, when present, is one of the signer's names;
- ``build_chain``: signer -> untrusted CAs -> one configured root, each link a CA
  (basicConstraints, keyUsage keyCertSign, pathLenConstraint) whose signature verifies;
- ``check_validity``: every certificate of the chain is valid at the given instant.

Every failure raises :class:`~ledger.core.errors.TimestampError` naming the check. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.utils import CryptographyDeprecationWarning
from cryptography.x509.oid import ExtendedKeyUsageOID

from ledger.core.errors import FormatError, TimestampError
from ledger.core.timefmt import rfc3339
from ledger.timestamp.asn1 import CertNames, EssCertId, SignerData, cert_names

__all__ = [
    "PoolCert",
    "build_chain",
    "check_eku",
    "check_ess_cert_id",
    "check_key_usage",
    "check_tsa_name",
    "check_validity",
    "find_signer",
    "pool_from",
]

MAX_CHAIN_LENGTH = 8
MAX_LINK_CHECKS = 64
_ESS_HASHES = frozenset({"sha1", "sha256", "sha384", "sha512"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolCert:
    """A candidate certificate with the names CMS identifiers are matched against."""

    cert: x509.Certificate
    der: bytes
    names: CertNames

    @property
    def subject(self) -> str:
        """RFC 4514 subject, for messages."""
        return self.cert.subject.rfc4514_string()


def pool_from(ders: Sequence[bytes]) -> tuple[PoolCert, ...]:
    """Parse DER certificates into a pool (duplicates dropped, order kept)."""
    pool: dict[bytes, PoolCert] = {}
    for der in ders:
        if der not in pool:
            pool[der] = PoolCert(cert=_load(der), der=der, names=cert_names(der))
    return tuple(pool.values())


def _load(der: bytes) -> x509.Certificate:
    try:
        with warnings.catch_warnings():  # e.g. a negative serial: refused elsewhere or not used
            warnings.simplefilter("ignore", CryptographyDeprecationWarning)
            return x509.load_der_x509_certificate(der)
    except (ValueError, x509.InvalidVersion) as exc:
        raise FormatError(f"certificate does not parse: {exc}") from exc


# --- signer -----------------------------------------------------------------------------------


def find_signer(signer: SignerData, pool: Sequence[PoolCert]) -> PoolCert:
    """The certificate SignerInfo.sid names (RFC 5652 §5.3), or TimestampError("signer")."""
    for candidate in pool:
        if _sid_matches(signer, candidate):
            return candidate
    raise TimestampError(
        "signer", "no certificate in the token or the given intermediates matches SignerInfo.sid"
    )


def _sid_matches(signer: SignerData, candidate: PoolCert) -> bool:
    if signer.sid_key_id is not None:
        return _subject_key_id(candidate.cert) == signer.sid_key_id
    return (
        signer.sid_issuer_key == candidate.names.issuer_key
        and signer.sid_serial == candidate.names.serial_number
    )


def _subject_key_id(cert: x509.Certificate) -> bytes | None:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    except (x509.ExtensionNotFound, ValueError):
        return None
    return ext.value.digest


# --- ESSCertID / ESSCertIDv2 ------------------------------------------------------------------


def check_ess_cert_id(signer: SignerData, cert: PoolCert) -> None:
    """signingCertificate(V2) is present and its first ESSCertID(v2) identifies ``cert``."""
    instances = signer.ess_v1 + signer.ess_v2
    if not instances:
        raise TimestampError(
            "ess-cert-id", "neither signingCertificate nor signingCertificateV2 is signed"
        )
    for cert_ids in instances:
        if not cert_ids:
            raise TimestampError("ess-cert-id", "signingCertificate lists no certificate")
        _check_one_ess_id(cert_ids[0], cert)


def _check_one_ess_id(cert_id: EssCertId, cert: PoolCert) -> None:
    if cert_id.hash_algorithm not in _ESS_HASHES:
        raise TimestampError("ess-cert-id", f"unsupported hash {cert_id.hash_algorithm}")
    computed = hashlib.new(cert_id.hash_algorithm, cert.der).digest()
    if computed != cert_id.cert_hash:
        raise TimestampError(
            "ess-cert-id",
            f"{cert_id.hash_algorithm} certHash {cert_id.cert_hash.hex()} does not match the "
            f"signer certificate ({computed.hex()})",
        )
    if cert_id.serial_number is None:
        return
    issuer_ok = cert_id.issuer_keys is not None and cert.names.issuer_key in cert_id.issuer_keys
    if not issuer_ok or cert_id.serial_number != cert.names.serial_number:
        raise TimestampError(
            "ess-cert-id", "issuerSerial does not name the signer certificate's issuer and serial"
        )


# --- the TSA certificate ----------------------------------------------------------------------


def check_eku(cert: x509.Certificate) -> None:
    """RFC 3161 §2.3: extendedKeyUsage is critical and holds only id-kp-timeStamping."""
    subject = cert.subject.rfc4514_string()
    try:
        ext = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    except x509.ExtensionNotFound:
        raise TimestampError("eku", f"{subject} has no extendedKeyUsage extension") from None
    except ValueError as exc:  # e.g. a duplicated extension
        raise TimestampError("eku", f"{subject}: bad extensions: {exc}") from exc
    if not ext.critical:
        raise TimestampError("eku", f"{subject}: extendedKeyUsage is not marked critical")
    usages = list(ext.value)
    if usages != [ExtendedKeyUsageOID.TIME_STAMPING]:
        dotted = ", ".join(u.dotted_string for u in usages)
        raise TimestampError("eku", f"{subject}: extendedKeyUsage is [{dotted}], not timeStamping")


def check_key_usage(cert: x509.Certificate) -> None:
    """keyUsage, when present, allows digitalSignature or nonRepudiation (RFC 5280 §4.2.1.3)."""
    try:
        usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    except x509.ExtensionNotFound:
        return
    except ValueError as exc:
        raise TimestampError("key-usage", f"bad keyUsage: {exc}") from exc
    if not (usage.digital_signature or usage.content_commitment):
        raise TimestampError(
            "key-usage",
            f"{cert.subject.rfc4514_string()}: keyUsage allows neither digitalSignature "
            "nor nonRepudiation",
        )


def check_tsa_name(tsa_key: str | None, tsa_text: str | None, cert: PoolCert) -> None:
    """RFC 3161 §2.4.2: TSTInfo.tsa, if present, is a name of the signing certificate."""
    if tsa_key is not None and tsa_key not in cert.names.name_keys:
        raise TimestampError(
            "tsa-name", f"TSTInfo.tsa {tsa_text!r} is not a name of signer {cert.subject}"
        )


# --- chain ------------------------------------------------------------------------------------


def build_chain(
    leaf: PoolCert, untrusted: Sequence[PoolCert], roots: Sequence[x509.Certificate]
) -> tuple[x509.Certificate, ...]:
    """A verified path from ``leaf`` through ``untrusted`` CAs to one of ``roots``.

    Requires ``roots`` non-empty. Raises TimestampError("chain") when there is none, or when
    finding one would take more than ``MAX_LINK_CHECKS`` signature checks (a token can carry
    any number of certificates; the search must stay bounded).
    """
    if not roots:
        raise TimestampError("chain", "no TSA roots are configured")
    builder = _PathBuilder(tuple(p.cert for p in untrusted), tuple(roots))
    path = builder.extend((leaf.cert,))
    if path is None:
        raise TimestampError(
            "chain", f"signer {leaf.subject} does not chain to any configured TSA root"
        )
    for cert in path:
        _check_critical_extensions(cert)
    return path


class _PathBuilder:
    """Depth-first search for signer -> ... -> root, with a budget of signature checks."""

    def __init__(
        self, untrusted: tuple[x509.Certificate, ...], roots: tuple[x509.Certificate, ...]
    ) -> None:
        self.untrusted = untrusted
        self.roots = roots
        self.budget = MAX_LINK_CHECKS

    def extend(self, path: tuple[x509.Certificate, ...]) -> tuple[x509.Certificate, ...] | None:
        """``path`` extended to a root, or None."""
        tip = path[-1]
        if tip in self.roots:
            return path
        for root in self.roots:
            if self._issued_by(tip, root, below=len(path)):
                return (*path, root)
        if len(path) >= MAX_CHAIN_LENGTH:
            return None
        for ca in self.untrusted:
            if ca not in path and self._issued_by(tip, ca, below=len(path)):
                found = self.extend((*path, ca))
                if found is not None:
                    return found
        return None

    def _issued_by(self, child: x509.Certificate, issuer: x509.Certificate, *, below: int) -> bool:
        """``issuer`` is a CA allowed ``below - 1`` intermediates under it and signed ``child``."""
        if child.issuer != issuer.subject:
            return False
        if not _is_ca(issuer, intermediates_below=below - 1):
            return False
        self.budget -= 1
        if self.budget < 0:
            raise TimestampError("chain", f"path search exceeded {MAX_LINK_CHECKS} checks")
        try:
            child.verify_directly_issued_by(issuer)
        except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
            return False
        return True


def _is_ca(cert: x509.Certificate, *, intermediates_below: int) -> bool:
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except (x509.ExtensionNotFound, ValueError):
        return False
    if not constraints.ca:
        return False
    if constraints.path_length is not None and intermediates_below > constraints.path_length:
        return False
    try:
        usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    except x509.ExtensionNotFound:
        return True
    except ValueError:
        return False
    return usage.key_cert_sign


def _check_critical_extensions(cert: x509.Certificate) -> None:
    for ext in cert.extensions:
        if ext.critical and isinstance(ext.value, x509.UnrecognizedExtension):
            raise TimestampError(
                "chain",
                f"{cert.subject.rfc4514_string()} has an unrecognised critical extension "
                f"{ext.oid.dotted_string}",
            )


# --- validity ---------------------------------------------------------------------------------


def check_validity(chain: Sequence[x509.Certificate], at: datetime) -> None:
    """Every certificate of ``chain`` is within notBefore..notAfter at ``at`` (aware)."""
    for cert in chain:
        before, after = cert.not_valid_before_utc, cert.not_valid_after_utc
        if not before <= at <= after:
            raise TimestampError(
                "validity",
                f"{cert.subject.rfc4514_string()} is valid from {rfc3339(before)} to "
                f"{rfc3339(after)}, not at {rfc3339(at)}",
            )
