"""The embedded development Time-Stamping Authority (RFC 3161, RFC 5816, RFC 5652).

``TsaAuthority`` answers DER TimeStampReq with DER TimeStampResp: a TSTInfo signed as CMS
SignedData whose signed attributes are contentType, signingTime, messageDigest and
signingCertificateV2 (ESSCertIDv2, SHA-256, with issuerSerial). It is a development stand-in
for a real TSA: its root is a self-signed CA it generated itself, so only verifiers configured
with that root accept its tokens.

Policy: every token carries ``TSA_POLICY_OID`` = 2.25.221608462983659319492590031559687071626,
an OID under the ITU-T X.667 UUID arc (2.25.<UUID as integer>; UUID
a6b83ccb-6c3e-4660-b3da-b84db9fae78a), which anyone may mint without registration. It names
"Decision Ledger development TSA: system clock, no accuracy guarantee beyond one second".

Serial numbers (``SerialNumbers``) never repeat: each is max(previous + 1, microseconds since
the Unix epoch), so a restart without state still moves past earlier serials unless the clock
went back; with a state file the highest reserved serial is written durably (in blocks) before
any serial in the block is issued, so restarts never reuse one even if the clock goes back.

Refused requests get status rejection with a failInfo and a statusString: badDataFormat (DER
that is not a TimeStampReq), badRequest (version not 1), badAlg (imprint not SHA-256 or not
32 bytes), unacceptedPolicy (reqPolicy other than ours), unacceptedExtension (any extension).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from asn1crypto import cms, core, tsp
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from ledger.core.limits import HASH_SIZE
from ledger.fileio.durable import write_file
from ledger.timestamp.asn1 import TimeStampRespOptionalToken
from ledger.tsa.pki import (
    PrivateKey,
    generate_key,
    issue_tsa_certificate,
    load_key,
    make_root,
    write_private,
)

__all__ = ["TSA_POLICY_OID", "SerialNumbers", "TsaAuthority"]

TSA_POLICY_OID = "2.25.221608462983659319492590031559687071626"
ROOT_CERT_FILE, ROOT_KEY_FILE = "root.pem", "root.key"
TSA_CERT_FILE, TSA_KEY_FILE = "tsa.pem", "tsa.key"
SERIAL_FILE = "serial"
Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _now_micros() -> int:
    return time.time_ns() // 1000


class SerialNumbers:
    """Thread-safe, never-repeating, increasing TSTInfo serial numbers (see module docstring)."""

    def __init__(
        self,
        *,
        state_file: Path | None = None,
        micros: Callable[[], int] = _now_micros,
        block: int = 4096,
    ) -> None:
        self._lock = threading.Lock()
        self._state_file = state_file
        self._micros = micros
        self._block = block
        self._reserved = _read_counter(state_file) if state_file is not None else 0
        self._last = self._reserved

    def next(self) -> int:
        """The next serial number; durable (with a state file) before it is returned."""
        with self._lock:
            serial = max(self._last + 1, self._micros())
            if self._state_file is not None and serial > self._reserved:
                self._reserved = serial + self._block
                _write_counter(self._state_file, self._reserved)
            self._last = serial
            return serial


def _read_counter(path: Path) -> int:
    try:
        return int(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        return 0


def _write_counter(path: Path, value: int) -> None:
    """Atomically replace ``path`` with ``value`` and make it durable (fsync file and dir)."""
    write_file(path, f"{value}\n")


class _Rejection(Exception):
    """A request the TSA refuses: failInfo bit name and statusString."""

    def __init__(self, fail_info: str, text: str) -> None:
        super().__init__(text)
        self.fail_info = fail_info
        self.text = text


@dataclass(frozen=True, slots=True, kw_only=True)
class _Request:
    digest: bytes
    nonce: int | None
    cert_req: bool


@dataclass(frozen=True, kw_only=True)
class TsaAuthority:
    """A TSA: root CA, TSA certificate (critical EKU timeStamping only) and its key."""

    root_cert: x509.Certificate
    tsa_cert: x509.Certificate
    tsa_key: PrivateKey
    root_key: PrivateKey | None = None
    serials: SerialNumbers = field(default_factory=SerialNumbers)
    clock: Clock = _utc_now
    policy: str = TSA_POLICY_OID
    accuracy: timedelta = timedelta(seconds=1)

    @classmethod
    def generate(cls, name: str, *, key_type: str = "ec", clock: Clock = _utc_now) -> TsaAuthority:
        """A fresh root CA ``"<name> Root"`` and TSA certificate ``name`` (key_type ec | rsa)."""
        now = clock()
        root_key, tsa_key = generate_key(key_type), generate_key(key_type)
        root = make_root(f"{name} Root", root_key, not_before=now - timedelta(hours=1))
        tsa = issue_tsa_certificate(
            name, tsa_key.public_key(), root, root_key, not_before=now - timedelta(hours=1)
        )
        return cls(root_cert=root, tsa_cert=tsa, tsa_key=tsa_key, root_key=root_key, clock=clock)

    def save(self, directory: Path) -> None:
        """Write root.pem, tsa.pem and the keys (root.key, tsa.key: mode 0600) to ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / ROOT_CERT_FILE).write_bytes(self.root_pem())
        (directory / TSA_CERT_FILE).write_bytes(self.tsa_pem())
        write_private(directory / TSA_KEY_FILE, self.tsa_key)
        if self.root_key is not None:
            write_private(directory / ROOT_KEY_FILE, self.root_key)

    @classmethod
    def load(cls, directory: Path, *, clock: Clock = _utc_now) -> TsaAuthority:
        """Load what ``save`` wrote; serial numbers persist in ``directory/serial``."""
        root_key_file = directory / ROOT_KEY_FILE
        return cls(
            root_cert=x509.load_pem_x509_certificate((directory / ROOT_CERT_FILE).read_bytes()),
            tsa_cert=x509.load_pem_x509_certificate((directory / TSA_CERT_FILE).read_bytes()),
            tsa_key=load_key(directory / TSA_KEY_FILE),
            root_key=load_key(root_key_file) if root_key_file.exists() else None,
            serials=SerialNumbers(state_file=directory / SERIAL_FILE),
            clock=clock,
        )

    @staticmethod
    def exists(directory: Path) -> bool:
        """Whether ``directory`` holds a saved authority."""
        return all((directory / f).is_file() for f in (ROOT_CERT_FILE, TSA_CERT_FILE, TSA_KEY_FILE))

    def root_pem(self) -> bytes:
        """The root CA certificate, PEM: what verifiers configure as the TSA root."""
        return self.root_cert.public_bytes(serialization.Encoding.PEM)

    def tsa_pem(self) -> bytes:
        """The TSA (signing) certificate, PEM."""
        return self.tsa_cert.public_bytes(serialization.Encoding.PEM)

    def respond(self, request_der: bytes) -> bytes:
        """DER TimeStampResp for a DER TimeStampReq: granted, or rejection with failInfo."""
        try:
            request = _parse_request(request_der, policy=self.policy)
        except _Rejection as refused:
            return _rejection(refused)
        token = _build_token(self, request, gen_time=_millis(self.clock()))
        resp = TimeStampRespOptionalToken(
            {"status": {"status": "granted"}, "time_stamp_token": token}
        )
        return bytes(resp.dump())


def _millis(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(microsecond=moment.microsecond // 1000 * 1000)


def _rejection(refused: _Rejection) -> bytes:
    status = {
        "status": "rejection",
        "status_string": [refused.text],
        "fail_info": {refused.fail_info},
    }
    return bytes(TimeStampRespOptionalToken({"status": status}).dump())


# --- request ----------------------------------------------------------------------------------


def _parse_request(der: bytes, *, policy: str) -> _Request:
    try:
        req = tsp.TimeStampReq.load(der, strict=True)
        version = int(req["version"])
        imprint = req["message_imprint"]
        algorithm = str(imprint["hash_algorithm"]["algorithm"].native)
        digest = bytes(imprint["hashed_message"].native)
        req_policy = req["req_policy"]
        asked_policy = None if isinstance(req_policy, core.Void) else str(req_policy.dotted)
        nonce = req["nonce"].native
        cert_req = bool(req["cert_req"].native)
        has_extensions = not isinstance(req["extensions"], core.Void)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError) as exc:
        raise _Rejection("bad_data_format", f"not a DER TimeStampReq: {exc}") from exc
    if version != 1:
        raise _Rejection("bad_request", f"TimeStampReq version {version} is not 1")
    if algorithm != "sha256" or len(digest) != HASH_SIZE:
        raise _Rejection("bad_alg", f"only sha256 imprints are accepted, got {algorithm}")
    if asked_policy is not None and asked_policy != policy:
        raise _Rejection("unaccepted_policy", f"policy {asked_policy} is not {policy}")
    if has_extensions:
        raise _Rejection("unaccepted_extensions", "no request extensions are supported")
    return _Request(digest=digest, nonce=None if nonce is None else int(nonce), cert_req=cert_req)


# --- token ------------------------------------------------------------------------------------


def _build_token(tsa: TsaAuthority, request: _Request, *, gen_time: datetime) -> Any:
    tst_der = _tst_info(tsa, request, gen_time=gen_time)
    attrs = _signed_attributes(tsa.tsa_cert, tst_der, gen_time=gen_time)
    signature, algorithm = _sign(tsa.tsa_key, attrs.dump())
    cert_der = tsa.tsa_cert.public_bytes(serialization.Encoding.DER)
    signer_info = _frozen(
        cms.SignerInfo(
            {
                "version": "v1",
                "sid": cms.SignerIdentifier(
                    name="issuer_and_serial_number", value=_issuer_and_serial(cert_der)
                ),
                "digest_algorithm": {"algorithm": "sha256"},
                "signed_attrs": attrs,
                "signature_algorithm": {"algorithm": algorithm},
                "signature": signature,
            }
        )
    )
    signed = {
        "version": "v3",
        "digest_algorithms": [{"algorithm": "sha256"}],
        "encap_content_info": {
            "content_type": "tst_info",
            "content": core.ParsableOctetString(tst_der),
        },
        "signer_infos": [signer_info],
    }
    if request.cert_req:
        signed["certificates"] = [asn1_x509.Certificate.load(cert_der)]
    content = _frozen(cms.SignedData(signed))
    return cms.ContentInfo({"content_type": "signed_data", "content": content})


def _tst_info(tsa: TsaAuthority, request: _Request, *, gen_time: datetime) -> bytes:
    subject = asn1_x509.Name.load(tsa.tsa_cert.subject.public_bytes())
    fields: dict[str, Any] = {
        "version": "v1",
        "policy": tsa.policy,
        "message_imprint": {
            "hash_algorithm": {"algorithm": "sha256"},
            "hashed_message": request.digest,
        },
        "serial_number": tsa.serials.next(),
        "gen_time": gen_time,
        "accuracy": _accuracy(tsa.accuracy),
        "tsa": asn1_x509.GeneralName(name="directory_name", value=subject),
    }
    if request.nonce is not None:
        fields["nonce"] = request.nonce
    return bytes(tsp.TSTInfo(fields).dump())


def _accuracy(accuracy: timedelta) -> dict[str, int]:
    micros = accuracy // timedelta(microseconds=1)
    seconds, rest = divmod(micros, 1_000_000)
    millis, micros = divmod(rest, 1000)
    parts = {"seconds": seconds, "millis": millis, "micros": micros}
    return {k: v for k, v in parts.items() if v}


def _signed_attributes(cert: x509.Certificate, tst_der: bytes, *, gen_time: datetime) -> Any:
    cert_der = cert.public_bytes(serialization.Encoding.DER)
    ess = tsp.SigningCertificateV2(
        {
            "certs": [
                {
                    "cert_hash": hashlib.sha256(cert_der).digest(),
                    "issuer_serial": {
                        "issuer": [_directory_name(cert.issuer.public_bytes())],
                        "serial_number": cert.serial_number,
                    },
                }
            ]
        }
    )
    attrs = cms.CMSAttributes(
        [
            _attribute("content_type", "tst_info"),
            _attribute("signing_time", _cms_time(gen_time)),
            _attribute("message_digest", hashlib.sha256(tst_der).digest()),
            _attribute("signing_certificate_v2", _frozen(ess)),
        ]
    )
    return _frozen(attrs)


def _cms_time(moment: datetime) -> Any:
    """RFC 5652 §11.3: UTCTime through 2049, GeneralizedTime from 2050."""
    kind = "utc_time" if moment.year < 2050 else "generalized_time"
    return cms.Time(name=kind, value=moment)


def _attribute(attr_type: str, value: object) -> Any:
    return _frozen(cms.CMSAttribute({"type": attr_type, "values": [value]}))


def _frozen(value: Any) -> Any:
    """Re-load ``value`` from its DER: asn1crypto re-encodes constructed (mutated) values on
    every enclosing ``dump()``, which turns nesting quadratic; a loaded value is copied as is."""
    return type(value).load(value.dump())


def _directory_name(name_der: bytes) -> Any:
    return asn1_x509.GeneralName(name="directory_name", value=asn1_x509.Name.load(name_der))


def _issuer_and_serial(cert_der: bytes) -> Any:
    cert = asn1_x509.Certificate.load(cert_der)
    return cms.IssuerAndSerialNumber({"issuer": cert.issuer, "serial_number": cert.serial_number})


def _sign(key: PrivateKey, data: bytes) -> tuple[bytes, str]:
    """Sign DER signed attributes: ECDSA or RSA PKCS#1 v1.5, both with SHA-256."""
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(data, ec.ECDSA(hashes.SHA256())), "sha256_ecdsa"
    if isinstance(key, rsa.RSAPrivateKey):
        return key.sign(data, padding.PKCS1v15(), hashes.SHA256()), "sha256_rsa"
    raise TypeError(f"unsupported TSA key {type(key).__name__}")
