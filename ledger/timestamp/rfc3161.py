"""RFC 3161 time-stamp anchors for checkpoints: build requests, verify responses and tokens.

Pure: no network, no files. A checkpoint is anchored by asking a Time-Stamping Authority
(RFC 3161) to sign SHA-256 of the checkpoint *body* (origin, size, root lines), so that
cosignatures added later do not change the stamped bytes. The token is CMS SignedData
(RFC 5652) over a TSTInfo; its signing certificate is bound by ESSCertID (RFC 2634/5035) or
ESSCertIDv2 (RFC 5816).

Verification recomputes and compares, strictly and in this order; the first failure raises
:class:`~ledger.core.errors.TimestampError` whose ``.check`` names it:

    status          PKIStatus is granted or grantedWithMods (RFC 3161 §2.4.2)
    content-type    ContentInfo is signedData, eContentType is id-ct-TSTInfo
    version         TSTInfo version is 1
    imprint         messageImprint is sha256 and equals the expected digest
    nonce           the token echoes the request's nonce (when the request had one)
    extensions      TSTInfo carries no critical extension
    signed-attrs    the SignerInfo has signed attributes (exactly one SignerInfo)
    content-type    signed contentType attribute is id-ct-TSTInfo (exactly one value)
    message-digest  signed messageDigest == hash(eContent) with SignerInfo.digestAlgorithm
    signer          SignerInfo.sid names a certificate in the token or the intermediates
    signature       the signature over the DER SET OF signed attributes verifies
                    (RSA PKCS#1 v1.5 / RSA-PSS >= 2048 bits, ECDSA P-256/P-384/P-521;
                    digest SHA-256/384/512)
    ess-cert-id     signingCertificate(V2) binds the signer certificate
    eku             extendedKeyUsage is critical and exactly id-kp-timeStamping
    key-usage       keyUsage, if present, allows digitalSignature or nonRepudiation
    tsa-name        TSTInfo.tsa, when present, names the signer certificate
    chain           signer -> (token certs + intermediates) -> a configured root; each
                    issuer a CA (basicConstraints, keyCertSign, pathLen) whose signature
                    verifies; no unknown critical extension; a bounded search
    validity        every chain certificate is valid at ``at_time`` (default genTime),
                    and genTime lies inside the signer certificate's validity

Bytes that do not parse raise :class:`~ledger.core.errors.FormatError`.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from asn1crypto import tsp
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.serialization import Encoding

from ledger.core.errors import FormatError, LedgerError, MalformedHashError, TimestampError
from ledger.core.limits import HASH_SIZE
from ledger.timestamp.asn1 import (
    OID_TST_INFO,
    SignedToken,
    SignerData,
    TstInfo,
    parse_response,
    parse_signed_token,
    parse_tst_info,
)
from ledger.timestamp.certs import (
    PoolCert,
    build_chain,
    check_eku,
    check_ess_cert_id,
    check_key_usage,
    check_tsa_name,
    check_validity,
    find_signer,
    pool_from,
)

__all__ = [
    "OID_TST_INFO",
    "TimestampRequest",
    "VerifiedTimestamp",
    "build_request",
    "imprint_for_checkpoint_body",
    "token_certificates",
    "token_from_response",
    "token_imprint",
    "verify_response",
    "verify_token",
]

NONCE_BITS = 64
_GRANTED = ("granted", "granted_with_mods")
_SIGNER_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
}
_CURVES = (ec.SECP256R1, ec.SECP384R1, ec.SECP521R1)
_MIN_RSA_BITS = 2048


@dataclass(frozen=True, slots=True, kw_only=True)
class TimestampRequest:
    """A DER TimeStampReq (RFC 3161 §2.4.1) and what its response must echo."""

    digest: bytes
    nonce: int | None
    cert_req: bool
    der: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedTimestamp:
    """What a token proves once every check passed."""

    gen_time: datetime  # aware, UTC
    accuracy: timedelta | None
    serial_number: int
    policy: str  # dotted OID
    tsa_name: str | None
    signer_subject: str  # RFC 4514
    signer_certificate_der: bytes
    chain_ders: tuple[bytes, ...]  # signer first, the configured root last
    digest: bytes
    nonce: int | None  # the token's (equal to the request's when one was given)
    token_der: bytes


def imprint_for_checkpoint_body(body: bytes) -> bytes:
    """SHA-256 of a C2SP checkpoint body (origin, size and root lines, no signatures)."""
    return hashlib.sha256(body).digest()


def build_request(
    digest: bytes, *, nonce: int | None = None, cert_req: bool = True
) -> TimestampRequest:
    """TimeStampReq v1 over a SHA-256 ``digest`` with a nonce (fresh 64-bit when None).

    Requires ``len(digest) == HASH_SIZE`` and ``nonce >= 0``.
    """
    _require_sha256(digest)
    if nonce is None:
        nonce = secrets.randbits(NONCE_BITS)
    if nonce < 0:
        raise FormatError(f"nonce must be >= 0, got {nonce}")
    req = tsp.TimeStampReq(
        {
            "version": "v1",
            "message_imprint": {
                "hash_algorithm": {"algorithm": "sha256"},
                "hashed_message": digest,
            },
            "nonce": nonce,
            "cert_req": cert_req,
        }
    )
    return TimestampRequest(digest=digest, nonce=nonce, cert_req=cert_req, der=req.dump())


def _require_sha256(digest: bytes) -> None:
    if len(digest) != HASH_SIZE:
        raise MalformedHashError(f"digest must be 32 bytes (SHA-256), got {len(digest)}")


def token_from_response(resp_der: bytes) -> bytes:
    """The TimeStampToken of a granted TimeStampResp; TimestampError("status") otherwise."""
    status = parse_response(resp_der)
    if status.status not in _GRANTED:
        fail = ", ".join(status.fail_info) or "none"
        raise TimestampError(
            "status",
            f"TSA answered {status.status} (failInfo: {fail}): {status.status_text or 'no text'}",
        )
    if status.token_der is None:
        raise FormatError(f"TimeStampResp is {status.status} but carries no token")
    return status.token_der


def verify_response(
    resp_der: bytes,
    *,
    digest: bytes,
    nonce: int | None,
    roots: Sequence[x509.Certificate],
    intermediates: Sequence[x509.Certificate] = (),
    at_time: datetime | None = None,
) -> VerifiedTimestamp:
    """Verify a DER TimeStampResp answering a request for ``digest`` with ``nonce``."""
    token = token_from_response(resp_der)
    return verify_token(
        token,
        digest=digest,
        nonce=nonce,
        roots=roots,
        intermediates=intermediates,
        at_time=at_time,
    )


def verify_token(
    token_der: bytes,
    *,
    digest: bytes,
    nonce: int | None = None,
    roots: Sequence[x509.Certificate],
    intermediates: Sequence[x509.Certificate] = (),
    at_time: datetime | None = None,
) -> VerifiedTimestamp:
    """Verify a DER TimeStampToken over ``digest``; see the module docstring for the checks.

    ``at_time`` (aware) is when the chain must be valid; by default the token's genTime, so a
    token stays verifiable after its TSA certificate expires.
    """
    _require_sha256(digest)
    if at_time is not None and at_time.tzinfo is None:
        raise FormatError("at_time must be timezone-aware")
    try:
        return _verify_token(
            token_der, digest=digest, nonce=nonce, roots=roots, intermediates=intermediates,
            at_time=at_time,
        )  # fmt: skip
    except LedgerError:
        raise
    except (ValueError, TypeError, OverflowError, UnsupportedAlgorithm, x509.InvalidVersion) as exc:
        # A safety net: the checks above name every failure they know; anything a library
        # still raises on hostile bytes is reported as input that does not parse, never a crash.
        raise FormatError(f"token does not parse: {type(exc).__name__}: {exc}") from None


def _verify_token(
    token_der: bytes,
    *,
    digest: bytes,
    nonce: int | None,
    roots: Sequence[x509.Certificate],
    intermediates: Sequence[x509.Certificate],
    at_time: datetime | None,
) -> VerifiedTimestamp:
    token = parse_signed_token(token_der)
    tst = parse_tst_info(token.econtent)
    _check_tst_info(tst, digest=digest, nonce=nonce)
    signer = _single_signer(token)
    _check_signed_attributes(signer, token.econtent)
    pool = _token_pool(token.certificates, intermediates)
    cert = find_signer(signer, pool)
    _check_signature(signer, cert.cert)
    check_ess_cert_id(signer, cert)
    check_eku(cert.cert)
    check_key_usage(cert.cert)
    check_tsa_name(tst.tsa_key, tst.tsa_text, cert)
    chain = build_chain(cert, [p for p in pool if p is not cert], roots)
    check_validity(chain, at_time or tst.gen_time)
    check_validity(chain[:1], tst.gen_time)
    return _verified(tst, cert, chain, token_der=token_der, digest=digest)


def _token_pool(
    carried: Sequence[bytes], intermediates: Sequence[x509.Certificate]
) -> tuple[PoolCert, ...]:
    """The token's certificates and the caller's intermediates as one pool. Each certificate the
    token carries must parse (one that does not is named: ``certificates[j]``); beyond that, the
    ones the chain does not use are ignored by design: the SignedData ``certificates`` field is
    not covered by the signature (RFC 5652 §5.1), so anyone can add or alter them without
    touching the token, and only the signer (bound by ESSCertID) and the chain to a configured
    root are evidence (docs/formats.md "RFC 3161 anchors")."""
    pool: dict[bytes, PoolCert] = {}
    for j, der in enumerate(carried):
        try:
            pool.update((p.der, p) for p in pool_from((der,)))
        except FormatError as exc:
            raise FormatError(f"the token's certificates[{j}]: {exc}") from None
    fresh = tuple(der for der in (_der(c) for c in intermediates) if der not in pool)
    pool.update((p.der, p) for p in pool_from(fresh))
    return tuple(pool.values())


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(Encoding.DER)


def _verified(
    tst: TstInfo,
    cert: PoolCert,
    chain: Sequence[x509.Certificate],
    *,
    token_der: bytes,
    digest: bytes,
) -> VerifiedTimestamp:
    return VerifiedTimestamp(
        gen_time=tst.gen_time,
        accuracy=tst.accuracy,
        serial_number=tst.serial_number,
        policy=tst.policy,
        tsa_name=tst.tsa_text,
        signer_subject=cert.subject,
        signer_certificate_der=cert.der,
        chain_ders=tuple(_der(c) for c in chain),
        digest=digest,
        nonce=tst.nonce,
        token_der=token_der,
    )


# --- TSTInfo ----------------------------------------------------------------------------------


def _check_tst_info(tst: TstInfo, *, digest: bytes, nonce: int | None) -> None:
    if tst.version != 1:
        raise TimestampError("version", f"TSTInfo version is {tst.version}, not 1")
    if tst.imprint_algorithm != "sha256":
        raise TimestampError("imprint", f"messageImprint uses {tst.imprint_algorithm}, not sha256")
    if tst.imprint != digest:
        raise TimestampError(
            "imprint",
            f"token stamps {tst.imprint.hex()}, expected {digest.hex()}",
        )
    if nonce is not None and tst.nonce != nonce:
        got = "no nonce" if tst.nonce is None else f"nonce {tst.nonce}"
        raise TimestampError("nonce", f"token has {got}, the request sent nonce {nonce}")
    if tst.critical_extensions:
        raise TimestampError(
            "extensions", f"unsupported critical TSTInfo extensions {tst.critical_extensions}"
        )


# --- SignerInfo -------------------------------------------------------------------------------


def _single_signer(token: SignedToken) -> SignerData:
    if len(token.signers) != 1:
        raise TimestampError(
            "signed-attrs", f"a token has exactly one SignerInfo, found {len(token.signers)}"
        )
    signer = token.signers[0]
    if signer.signed_attrs_der is None:
        raise TimestampError("signed-attrs", "SignerInfo has no signed attributes")
    return signer


def _signer_hash(signer: SignerData) -> hashes.HashAlgorithm:
    algorithm = _SIGNER_HASHES.get(signer.digest_algorithm)
    if algorithm is None:
        raise TimestampError(
            "message-digest", f"unsupported SignerInfo digest algorithm {signer.digest_algorithm}"
        )
    return algorithm()


def _check_signed_attributes(signer: SignerData, econtent: bytes) -> None:
    if [list(values) for values in signer.content_types] != [[OID_TST_INFO]]:
        raise TimestampError(
            "content-type",
            f"signed contentType attribute is {signer.content_types}, not one id-ct-TSTInfo",
        )
    if len(signer.message_digests) != 1 or len(signer.message_digests[0]) != 1:
        raise TimestampError("message-digest", "expected exactly one signed messageDigest")
    hasher = hashes.Hash(_signer_hash(signer))
    hasher.update(econtent)
    computed = hasher.finalize()
    signed = signer.message_digests[0][0]
    if computed != signed:
        raise TimestampError(
            "message-digest",
            f"messageDigest {signed.hex()} != {signer.digest_algorithm}(TSTInfo) {computed.hex()}",
        )


def _check_signature(signer: SignerData, cert: x509.Certificate) -> None:
    """RFC 5652 §5.4: the signature covers the DER SET OF signed attributes."""
    algorithm = signer.signature_algorithm
    named = algorithm.hash_algorithm
    if named is not None and named != signer.digest_algorithm:
        raise TimestampError(
            "signature",
            f"signatureAlgorithm hash {named} != SignerInfo digestAlgorithm "
            f"{signer.digest_algorithm}",
        )
    data = signer.signed_attrs_der or b""
    try:
        key = cert.public_key()
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise TimestampError(
            "signature", f"the signer certificate's public key is unusable: {exc}"
        ) from None
    try:
        _verify_signature(signer, key, data)
    except InvalidSignature:
        raise TimestampError(
            "signature",
            f"CMS signature does not verify with {cert.subject.rfc4514_string()}",
        ) from None


def _verify_signature(signer: SignerData, key: object, data: bytes) -> None:
    kind = signer.signature_algorithm.kind
    hash_ = _signer_hash(signer)
    if kind == "ecdsa" and isinstance(key, ec.EllipticCurvePublicKey):
        if not isinstance(key.curve, _CURVES):
            raise TimestampError("signature", f"unsupported curve {key.curve.name}")
        key.verify(signer.signature, data, ec.ECDSA(hash_))
    elif kind in ("rsassa_pkcs1v15", "rsassa_pss") and isinstance(key, rsa.RSAPublicKey):
        if key.key_size < _MIN_RSA_BITS:
            raise TimestampError("signature", f"RSA key of {key.key_size} bits is too small")
        key.verify(signer.signature, data, _rsa_padding(signer, hash_), hash_)
    else:
        raise TimestampError(
            "signature", f"signature algorithm {kind} does not fit a {type(key).__name__}"
        )


def _rsa_padding(signer: SignerData, hash_: hashes.HashAlgorithm) -> padding.AsymmetricPadding:
    algorithm = signer.signature_algorithm
    if algorithm.kind == "rsassa_pkcs1v15":
        return padding.PKCS1v15()
    if algorithm.pss_mgf1_hash != signer.digest_algorithm or not algorithm.pss_trailer_ok:
        raise TimestampError("signature", "RSA-PSS parameters must use MGF1 with the same hash")
    salt = algorithm.pss_salt_length
    if salt is None or salt < 0:
        raise TimestampError("signature", f"bad RSA-PSS salt length {salt}")
    return padding.PSS(mgf=padding.MGF1(hash_), salt_length=salt)


def token_imprint(token: bytes) -> bytes:
    """The messageImprint digest a token carries (unverified: for display and transport)."""
    return parse_tst_info(parse_signed_token(token).econtent).imprint


def token_certificates(token: bytes) -> list[bytes]:
    """DER certificates carried in a token (unverified: for display and transport)."""
    return list(parse_signed_token(token).certificates)
