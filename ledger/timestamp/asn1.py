"""Read RFC 3161 responses and tokens (RFC 5652 CMS SignedData) into plain frozen values.

This is the only module that walks asn1crypto objects when *verifying*: every field the
verifier needs is copied out here into small dataclasses of ``str``/``int``/``bytes``, so the
checks in :mod:`ledger.timestamp` and :mod:`ledger.timestamp.certs` never touch an untyped
ASN.1 tree. Bytes that do not parse raise :class:`~ledger.core.errors.FormatError`; a token whose
CMS content type is not signedData carrying id-ct-TSTInfo raises
:class:`~ledger.core.errors.TimestampError` with check ``"content-type"``.

Names used for algorithms are asn1crypto's (``"sha256"``, ``"rsassa_pss"``, ...); an OID
asn1crypto does not know stays in dotted form and is then refused by the checks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from asn1crypto import cms, core, tsp
from asn1crypto import x509 as asn1_x509

from ledger.core.errors import FormatError, TimestampError

__all__ = [
    "OID_SIGNED_DATA",
    "OID_TST_INFO",
    "CertNames",
    "EssCertId",
    "ResponseStatus",
    "SignatureAlgorithm",
    "SignedToken",
    "SignerData",
    "TstInfo",
    "cert_names",
    "parse_response",
    "parse_signed_token",
    "parse_tst_info",
]

OID_SIGNED_DATA = "1.2.840.113549.1.7.2"
OID_TST_INFO = "1.2.840.113549.1.9.16.1.4"

_T = TypeVar("_T")


class TimeStampRespOptionalToken(core.Sequence):  # type: ignore[misc]
    """TimeStampResp as RFC 3161 §2.4.2 defines it: the token is OPTIONAL (absent on rejection).

    asn1crypto's own ``tsp.TimeStampResp`` marks it required, so it cannot read or write a
    rejection.
    """

    _fields = [  # noqa: RUF012 - asn1crypto's declaration style
        ("status", tsp.PKIStatusInfo),
        ("time_stamp_token", cms.ContentInfo, {"optional": True}),
    ]


@contextmanager
def _parsing(what: str) -> Iterator[None]:
    """Turn asn1crypto's lazy-parse exceptions into FormatError naming ``what``."""
    try:
        yield
    except (FormatError, TimestampError):
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError) as exc:
        raise FormatError(f"{what} does not parse: {exc}") from exc


def _parse(what: str, fn: Callable[[], _T]) -> _T:
    with _parsing(what):
        return fn()


# --- response ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseStatus:
    """PKIStatusInfo of a TimeStampResp, plus the token bytes when one is present."""

    status: str  # "granted", "granted_with_mods", "rejection", ... or the number as text
    status_text: str
    fail_info: tuple[str, ...]
    token_der: bytes | None


def parse_response(resp_der: bytes) -> ResponseStatus:
    """Parse a DER TimeStampResp (RFC 3161 §2.4.2)."""
    return _parse("TimeStampResp", lambda: _read_response(resp_der))


def _read_response(resp_der: bytes) -> ResponseStatus:
    resp = TimeStampRespOptionalToken.load(resp_der, strict=True)
    info = resp["status"]
    texts = info["status_string"].native or []
    fail = info["fail_info"].native or set()
    token = resp["time_stamp_token"]
    token_der = None if isinstance(token, core.Void) else token.dump()
    return ResponseStatus(
        status=str(info["status"].native),
        status_text="; ".join(str(t) for t in texts),
        fail_info=tuple(sorted(str(f) for f in fail)),
        token_der=token_der,
    )


# --- token: CMS SignedData --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class EssCertId:
    """One ESSCertID (RFC 2634 §5.4.1) or ESSCertIDv2 (RFC 5816 §2.2.1)."""

    hash_algorithm: str
    cert_hash: bytes
    issuer_keys: tuple[str, ...] | None  # normalised directoryName issuers, None if absent
    serial_number: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SignatureAlgorithm:
    """SignerInfo.signatureAlgorithm: kind, the hash it names (None: taken from digestAlgorithm)."""

    kind: str  # "rsassa_pkcs1v15" | "rsassa_pss" | "ecdsa" | other
    hash_algorithm: str | None
    pss_mgf1_hash: str | None = None
    pss_salt_length: int | None = None
    pss_trailer_ok: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class SignerData:
    """The parts of one SignerInfo (RFC 5652 §5.3) the verifier checks."""

    sid_issuer_key: str | None
    sid_serial: int | None
    sid_key_id: bytes | None
    digest_algorithm: str
    signature_algorithm: SignatureAlgorithm
    signed_attrs_der: bytes | None  # re-tagged as SET OF: the bytes the signature covers
    content_types: tuple[tuple[str, ...], ...]  # one tuple of values per attribute instance
    message_digests: tuple[tuple[bytes, ...], ...]
    ess_v1: tuple[tuple[EssCertId, ...], ...]  # one tuple of ESSCertIDs per SigningCertificate
    ess_v2: tuple[tuple[EssCertId, ...], ...]
    signature: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedToken:
    """A TimeStampToken's SignedData: eContent bytes, certificates, signers."""

    econtent: bytes
    certificates: tuple[bytes, ...]
    signers: tuple[SignerData, ...]


def parse_signed_token(token_der: bytes) -> SignedToken:
    """Parse a TimeStampToken: ContentInfo(signedData) whose eContentType is id-ct-TSTInfo."""
    signed = _parse("TimeStampToken", lambda: _signed_data(token_der))
    return _parse("SignedData", lambda: _read_signed_data(signed))


def _signed_data(token_der: bytes) -> Any:
    info = cms.ContentInfo.load(token_der, strict=True)
    content_type = info["content_type"].dotted
    if content_type != OID_SIGNED_DATA:
        raise TimestampError(
            "content-type", f"token content type is {content_type}, not signedData"
        )
    return info["content"]


def _read_signed_data(signed: Any) -> SignedToken:
    encap = signed["encap_content_info"]
    if not isinstance(encap, cms.EncapsulatedContentInfo):
        raise TimestampError("content-type", "SignedData v1 cannot carry id-ct-TSTInfo")
    econtent_type = encap["content_type"].dotted
    if econtent_type != OID_TST_INFO:
        raise TimestampError("content-type", f"eContentType is {econtent_type}, not id-ct-TSTInfo")
    content = encap["content"]
    if isinstance(content, core.Void):
        raise FormatError("SignedData has no eContent (detached TSTInfo)")
    certs = signed["certificates"]
    cert_ders = () if isinstance(certs, core.Void) else tuple(_certificate_ders(certs))
    return SignedToken(
        econtent=bytes(content),
        certificates=cert_ders,
        signers=tuple(_read_signer(si) for si in signed["signer_infos"]),
    )


def _certificate_ders(certs: Any) -> Iterator[bytes]:
    for choice in certs:
        if choice.name == "certificate":
            yield choice.chosen.dump()


def _read_signer(si: Any) -> SignerData:
    sid = si["sid"]
    by_issuer = sid.name == "issuer_and_serial_number"
    attrs = si["signed_attrs"]
    has_attrs = not isinstance(attrs, core.Void)
    return SignerData(
        sid_issuer_key=sid.chosen["issuer"].hashable if by_issuer else None,
        sid_serial=int(sid.chosen["serial_number"].native) if by_issuer else None,
        sid_key_id=None if by_issuer else bytes(sid.chosen.native),
        digest_algorithm=str(si["digest_algorithm"]["algorithm"].native),
        signature_algorithm=_read_signature_algorithm(si["signature_algorithm"]),
        signed_attrs_der=_as_set_of(attrs.dump()) if has_attrs else None,
        content_types=_attr_values(attrs, "content_type", lambda v: str(v.dotted)),
        message_digests=_attr_values(attrs, "message_digest", lambda v: bytes(v.native)),
        ess_v1=_signing_certificates(attrs, "signing_certificate"),
        ess_v2=_signing_certificates(attrs, "signing_certificate_v2"),
        signature=bytes(si["signature"].native),
    )


def _as_set_of(implicit_der: bytes) -> bytes:
    """RFC 5652 §5.4: the signature covers the signed attributes with the SET OF tag (0x31)."""
    if not implicit_der or implicit_der[0] != 0xA0:
        raise FormatError("signedAttrs is not tagged [0] IMPLICIT")
    return b"\x31" + implicit_der[1:]


def _attr_values(
    attrs: Any, attr_type: str, read: Callable[[Any], _T]
) -> tuple[tuple[_T, ...], ...]:
    if isinstance(attrs, core.Void):
        return ()
    return tuple(
        tuple(read(value) for value in attr["values"])
        for attr in attrs
        if attr["type"].native == attr_type
    )


def _signing_certificates(attrs: Any, attr_type: str) -> tuple[tuple[EssCertId, ...], ...]:
    """One tuple of ESSCertID(v2)s per SigningCertificate(V2) value, over all instances."""
    return tuple(value for values in _attr_values(attrs, attr_type, _ess_ids) for value in values)


def _ess_ids(signing_certificate: Any) -> tuple[EssCertId, ...]:
    return tuple(_ess_id(cert_id) for cert_id in signing_certificate["certs"])


def _ess_id(cert_id: Any) -> EssCertId:
    is_v2 = isinstance(cert_id, tsp.ESSCertIDv2)
    algorithm = str(cert_id["hash_algorithm"]["algorithm"].native) if is_v2 else "sha1"
    issuer_serial = cert_id["issuer_serial"]
    if isinstance(issuer_serial, core.Void):
        return EssCertId(
            hash_algorithm=algorithm,
            cert_hash=bytes(cert_id["cert_hash"].native),
            issuer_keys=None,
            serial_number=None,
        )
    return EssCertId(
        hash_algorithm=algorithm,
        cert_hash=bytes(cert_id["cert_hash"].native),
        issuer_keys=tuple(
            name.chosen.hashable
            for name in issuer_serial["issuer"]
            if name.name == "directory_name"
        ),
        serial_number=int(issuer_serial["serial_number"].native),
    )


def _read_signature_algorithm(alg: Any) -> SignatureAlgorithm:
    name = str(alg["algorithm"].native)
    try:
        kind = str(alg.signature_algo)
    except ValueError:
        return SignatureAlgorithm(kind=name, hash_algorithm=None)
    if kind == "rsassa_pss":
        params = alg["parameters"]
        mgf = params["mask_gen_algorithm"]
        return SignatureAlgorithm(
            kind=kind,
            hash_algorithm=str(params["hash_algorithm"]["algorithm"].native),
            pss_mgf1_hash=(
                str(mgf["parameters"]["algorithm"].native)
                if mgf["algorithm"].native == "mgf1"
                else None
            ),
            pss_salt_length=int(params["salt_length"].native),
            pss_trailer_ok=params["trailer_field"].native == "trailer_field_bc",
        )
    # rsaEncryption / bare ecdsa name no hash: CMS then uses SignerInfo.digestAlgorithm.
    bare = name in ("rsassa_pkcs1v15", "ecdsa")
    return SignatureAlgorithm(kind=kind, hash_algorithm=None if bare else str(alg.hash_algo))


# --- TSTInfo ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TstInfo:
    """TSTInfo (RFC 3161 §2.4.2) as plain values."""

    version: int
    policy: str
    imprint_algorithm: str
    imprint: bytes
    serial_number: int
    gen_time: datetime
    accuracy: timedelta | None
    nonce: int | None
    tsa_key: str | None  # comparable with CertNames keys
    tsa_text: str | None  # for people
    critical_extensions: tuple[str, ...]


def parse_tst_info(econtent: bytes) -> TstInfo:
    """Parse the eContent octets of a token as DER TSTInfo."""
    return _parse("TSTInfo", lambda: _read_tst_info(econtent))


def _read_tst_info(econtent: bytes) -> TstInfo:
    tst = tsp.TSTInfo.load(econtent, strict=True)
    imprint = tst["message_imprint"]
    tsa = tst["tsa"]
    no_tsa = isinstance(tsa, core.Void)
    extensions = tst["extensions"]
    critical = () if isinstance(extensions, core.Void) else _critical_oids(extensions)
    nonce = tst["nonce"]
    return TstInfo(
        version=int(tst["version"]),
        policy=str(tst["policy"].dotted),
        imprint_algorithm=str(imprint["hash_algorithm"]["algorithm"].native),
        imprint=bytes(imprint["hashed_message"].native),
        serial_number=int(tst["serial_number"].native),
        gen_time=tst["gen_time"].native,
        accuracy=_accuracy(tst["accuracy"]),
        nonce=None if isinstance(nonce, core.Void) else int(nonce.native),
        tsa_key=None if no_tsa else _general_name_key(tsa),
        tsa_text=None if no_tsa else _general_name_text(tsa),
        critical_extensions=critical,
    )


def _critical_oids(extensions: Any) -> tuple[str, ...]:
    return tuple(str(e["extn_id"].dotted) for e in extensions if e["critical"].native)


def _accuracy(accuracy: Any) -> timedelta | None:
    if isinstance(accuracy, core.Void):
        return None
    parts = accuracy.native
    return timedelta(
        seconds=parts["seconds"] or 0,
        milliseconds=parts["millis"] or 0,
        microseconds=parts["micros"] or 0,
    )


def _general_name_key(name: Any) -> str:
    if name.name == "directory_name":
        return "dn:" + str(name.chosen.hashable)
    return f"{name.name}:{name.chosen.dump().hex()}"


def _general_name_text(name: Any) -> str:
    if name.name == "directory_name":
        return str(name.chosen.human_friendly)
    return f"{name.name}:{name.native}"


# --- certificates -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CertNames:
    """Normalised (RFC 5280 §7.1) names of a certificate, for matching CMS identifiers."""

    issuer_key: str
    serial_number: int
    name_keys: frozenset[str]  # subject and subjectAltName entries, as ``_general_name_key``


@functools.lru_cache(maxsize=256)
def cert_names(cert_der: bytes) -> CertNames:
    """Names of a DER certificate as keys comparable with SignerData / EssCertId / TstInfo
    (kept for the last 256 certificates: a verifier meets the same few again and again, and the
    answer is frozen; a refusal is not kept)."""
    return _parse("certificate", lambda: _read_cert_names(cert_der))


def _read_cert_names(cert_der: bytes) -> CertNames:
    cert = asn1_x509.Certificate.load(cert_der, strict=True)
    keys = {"dn:" + str(cert.subject.hashable)}
    alt_names = cert.subject_alt_name_value
    if alt_names is not None:
        keys.update(_general_name_key(name) for name in alt_names)
    return CertNames(
        issuer_key=str(cert.issuer.hashable),
        serial_number=int(cert.serial_number),
        name_keys=frozenset(keys),
    )
