"""RFC 3161 requests and verification (ledger.timestamp) against the embedded TSA, in process.

Every refusal is a systematic mutation of a good token or PKI and must fail the named check.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from asn1crypto import algos, cms, core, tsp
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID

from ledger.core.errors import FormatError, MalformedHashError, TimestampError
from ledger.timestamp.asn1 import parse_response
from ledger.timestamp.rfc3161 import (
    TimestampRequest,
    VerifiedTimestamp,
    build_request,
    imprint_for_checkpoint_body,
    token_from_response,
    verify_response,
    verify_token,
)
from ledger.tsa.authority import TSA_POLICY_OID, SerialNumbers, TsaAuthority
from tests import processes
from tests.tsa_openssl import Pki, make_ca, make_pki

BODY = b"example.com/decision-ledger\n42\nq1ZbY3Fb9nRNsWsRN0mgkNvyVU4FnKgX1bNDHJsqkuo=\n"
DIGEST = imprint_for_checkpoint_body(BODY)
NOW = datetime.now(UTC).replace(microsecond=0)


def _authority(pki: Pki, *, at: datetime = NOW) -> TsaAuthority:
    return TsaAuthority(
        root_cert=pki.root_cert, tsa_cert=pki.tsa_cert, tsa_key=pki.tsa_key, clock=lambda: at
    )


def _stamp(authority: TsaAuthority, *, cert_req: bool = True) -> tuple[TimestampRequest, bytes]:
    request = build_request(DIGEST, cert_req=cert_req)
    return request, authority.respond(request.der)


def _verify(pki: Pki, response: bytes, request: TimestampRequest, **kw: Any) -> VerifiedTimestamp:
    return verify_response(
        response, digest=request.digest, nonce=request.nonce, roots=[pki.root_cert], **kw
    )


def _refused(check: str, fn: Callable[[], object]) -> TimestampError:
    with pytest.raises(TimestampError) as info:
        fn()
    assert info.value.check == check, str(info.value)
    return info.value


@pytest.fixture(scope="module")
def ec_pki() -> Pki:
    return make_pki(key_type="ec")


@pytest.fixture(scope="module")
def rsa_pki() -> Pki:
    return make_pki(key_type="rsa")


@pytest.fixture(scope="module")
def good(ec_pki: Pki) -> tuple[TimestampRequest, bytes]:
    return _stamp(_authority(ec_pki))


# --- requests ---------------------------------------------------------------------------------


def test_imprint_is_sha256_of_the_checkpoint_body() -> None:
    assert hashlib.sha256(BODY).digest() == DIGEST


def test_build_request_is_a_v1_sha256_request_with_a_fresh_64_bit_nonce() -> None:
    first, second = build_request(DIGEST), build_request(DIGEST)
    req = tsp.TimeStampReq.load(first.der)
    assert req["version"].native == "v1"
    assert req["message_imprint"]["hash_algorithm"]["algorithm"].native == "sha256"
    assert req["message_imprint"]["hashed_message"].native == DIGEST
    assert req["nonce"].native == first.nonce and req["cert_req"].native is True
    assert first.nonce is not None and 0 <= first.nonce < 2**64
    assert first.nonce != second.nonce


def test_build_request_keeps_an_explicit_nonce_and_cert_req() -> None:
    request = build_request(DIGEST, nonce=7, cert_req=False)
    req = tsp.TimeStampReq.load(request.der)
    assert (request.nonce, req["nonce"].native, req["cert_req"].native) == (7, 7, False)


def test_build_request_refuses_a_digest_that_is_not_sha256() -> None:
    with pytest.raises(MalformedHashError):
        build_request(b"\x00" * 20)
    with pytest.raises(FormatError):
        build_request(DIGEST, nonce=-1)


# --- round trips ------------------------------------------------------------------------------


@pytest.mark.parametrize("key_type", ["ec", "ec384", "rsa"])
def test_round_trip_with_the_embedded_tsa(key_type: str) -> None:
    pki = make_pki(key_type=key_type)
    request, response = _stamp(_authority(pki))
    verified = _verify(pki, response, request)
    assert verified.gen_time == NOW
    assert verified.policy == TSA_POLICY_OID
    assert verified.accuracy == timedelta(seconds=1)
    assert verified.signer_subject == "CN=Test TSA"
    assert verified.tsa_name is not None and "Test TSA" in verified.tsa_name
    assert verified.chain_ders[-1] == pki.root_cert.public_bytes(Encoding.DER)
    assert (verified.digest, verified.nonce) == (DIGEST, request.nonce)
    assert verified.token_der == token_from_response(response)


def test_round_trip_through_an_intermediate_ca() -> None:
    pki = make_pki(intermediate=True)
    request, response = _stamp(_authority(pki))
    _refused("chain", lambda: _verify(pki, response, request))
    verified = _verify(pki, response, request, intermediates=pki.intermediates)
    assert len(verified.chain_ders) == 3


def test_generated_authority_round_trip() -> None:
    authority = TsaAuthority.generate("Dev TSA")
    request = build_request(DIGEST)
    verified = verify_response(
        authority.respond(request.der),
        digest=DIGEST,
        nonce=request.nonce,
        roots=[authority.root_cert],
    )
    assert verified.signer_subject == "CN=Dev TSA"


def test_token_without_certificates_needs_the_tsa_cert_as_intermediate(ec_pki: Pki) -> None:
    request, response = _stamp(_authority(ec_pki), cert_req=False)
    _refused("signer", lambda: _verify(ec_pki, response, request))
    assert _verify(ec_pki, response, request, intermediates=[ec_pki.tsa_cert])


def test_verify_token_without_a_nonce(good: tuple[TimestampRequest, bytes], ec_pki: Pki) -> None:
    token = token_from_response(good[1])
    verified = verify_token(token, digest=DIGEST, roots=[ec_pki.root_cert])
    assert verified.nonce == good[0].nonce


def test_rsa_pss_signatures_verify(rsa_pki: Pki) -> None:
    request, response = _stamp(_authority(rsa_pki))
    token = _resign(token_from_response(response), rsa_pki.tsa_key, pss_salt=32)
    assert verify_token(token, digest=DIGEST, nonce=request.nonce, roots=[rsa_pki.root_cert])


# --- refusals ---------------------------------------------------------------------------------


def test_refuses_a_token_for_another_checkpoint(good: tuple[TimestampRequest, bytes]) -> None:
    other = imprint_for_checkpoint_body(BODY.replace(b"42", b"43"))
    _refused("imprint", lambda: verify_response(good[1], digest=other, nonce=None, roots=[]))


def test_refuses_a_wrong_nonce(good: tuple[TimestampRequest, bytes], ec_pki: Pki) -> None:
    request, response = good
    assert request.nonce is not None
    wrong = TimestampRequest(digest=DIGEST, nonce=request.nonce + 1, cert_req=True, der=b"")
    _refused("nonce", lambda: _verify(ec_pki, response, wrong))


def test_refuses_a_token_missing_the_requested_nonce(ec_pki: Pki) -> None:
    response = _authority(ec_pki).respond(_request_der(cert_req=True))
    error = _refused(
        "nonce",
        lambda: verify_response(response, digest=DIGEST, nonce=5, roots=[ec_pki.root_cert]),
    )
    assert "no nonce" in str(error)


def test_refuses_a_flipped_signature_byte(
    good: tuple[TimestampRequest, bytes], ec_pki: Pki
) -> None:
    token = token_from_response(good[1])
    signature = cms.ContentInfo.load(token)["content"]["signer_infos"][0]["signature"].native
    at = token.index(signature) + len(signature) - 1
    tampered = token[:at] + bytes([token[at] ^ 0x01]) + token[at + 1 :]
    _refused("signature", lambda: verify_token(tampered, digest=DIGEST, roots=[ec_pki.root_cert]))


def test_refuses_tampered_tst_info(good: tuple[TimestampRequest, bytes], ec_pki: Pki) -> None:
    token = token_from_response(good[1])
    tst_der = bytes(cms.ContentInfo.load(token)["content"]["encap_content_info"]["content"])
    serial = tsp.TSTInfo.load(tst_der)["serial_number"].native
    new_tst = tst_der.replace(core.Integer(serial).dump(), core.Integer(serial ^ 1).dump())
    tampered = token.replace(tst_der, new_tst)
    assert tampered != token
    _refused(
        "message-digest", lambda: verify_token(tampered, digest=DIGEST, roots=[ec_pki.root_cert])
    )


@pytest.mark.parametrize(
    ("pki_args", "check"),
    [
        ({"eku": []}, "eku"),
        ({"eku_critical": False}, "eku"),
        ({"eku": [ExtendedKeyUsageOID.TIME_STAMPING, ExtendedKeyUsageOID.CODE_SIGNING]}, "eku"),
        ({"digital_signature": False}, "key-usage"),
        (
            {"validity": (NOW - timedelta(days=900), NOW - timedelta(days=400))},
            "validity",
        ),
    ],
    ids=["no-eku", "eku-not-critical", "eku-not-only-timestamping", "no-signing", "expired"],
)
def test_refuses_bad_tsa_certificates(pki_args: dict[str, Any], check: str) -> None:
    pki = make_pki(**pki_args)
    request, response = _stamp(_authority(pki))
    _refused(check, lambda: _verify(pki, response, request))


def test_refuses_an_untrusted_root(good: tuple[TimestampRequest, bytes]) -> None:
    stranger = make_pki(name="Other TSA")
    request, response = good
    _refused("chain", lambda: _verify(stranger, response, request))


def test_chain_search_is_bounded() -> None:
    pki = make_pki(intermediate=True)
    request, response = _stamp(_authority(pki))
    decoys = [make_ca("Test TSA Intermediate") for _ in range(70)]
    error = _refused(
        "chain",
        lambda: _verify(pki, response, request, intermediates=[*decoys, *pki.intermediates]),
    )
    assert "exceeded" in str(error)


def test_refuses_a_chain_invalid_at_the_requested_time(
    good: tuple[TimestampRequest, bytes], ec_pki: Pki
) -> None:
    request, response = good
    later = NOW + timedelta(days=365)
    _refused("validity", lambda: _verify(ec_pki, response, request, at_time=later))


def test_refuses_gen_time_outside_the_signer_validity(ec_pki: Pki) -> None:
    request, response = _stamp(_authority(ec_pki, at=NOW - timedelta(days=3)))
    _refused("validity", lambda: _verify(ec_pki, response, request, at_time=NOW))


def test_refuses_a_rejection_with_its_status_text(ec_pki: Pki) -> None:
    response = _authority(ec_pki).respond(b"\x30\x03\x02\x01\x01")
    error = _refused("status", lambda: verify_response(response, digest=DIGEST, nonce=1, roots=[]))
    assert "rejection" in str(error) and "bad_data_format" in str(error)


def test_refuses_a_token_that_is_not_signed_data() -> None:
    data = cms.ContentInfo({"content_type": "data", "content": b"hello"}).dump()
    _refused("content-type", lambda: verify_token(data, digest=DIGEST, roots=[]))


def test_refuses_malformed_bytes() -> None:
    with pytest.raises(FormatError):
        verify_response(b"junk", digest=DIGEST, nonce=None, roots=[])
    with pytest.raises(FormatError):
        verify_token(b"\x30\x00", digest=DIGEST, roots=[])
    with pytest.raises(MalformedHashError):
        verify_token(b"", digest=b"short", roots=[])


def _replace_attr(attr_type: str, edit: Callable[[Any], None] | None) -> Callable[[Any], None]:
    def apply(signer_info: Any) -> None:
        kept = []
        for attr in signer_info["signed_attrs"]:
            if attr["type"].native == attr_type:
                if edit is None:
                    continue
                edit(attr["values"])
            kept.append(attr)
        signer_info["signed_attrs"] = cms.CMSAttributes(kept)

    return apply


def _zero_ess_hash(values: Any) -> None:
    values[0]["certs"][0]["cert_hash"] = b"\x00" * 32


def _other_content_type(values: Any) -> None:
    values[0] = cms.ContentType("data")


@pytest.mark.parametrize(
    ("edit", "check"),
    [
        (_replace_attr("signing_certificate_v2", _zero_ess_hash), "ess-cert-id"),
        (_replace_attr("signing_certificate_v2", None), "ess-cert-id"),
        (_replace_attr("content_type", _other_content_type), "content-type"),
        (_replace_attr("message_digest", None), "message-digest"),
    ],
    ids=["ess-hash", "no-ess", "content-type-attr", "no-message-digest"],
)
def test_refuses_re_signed_bad_attributes(
    rsa_pki: Pki, edit: Callable[[Any], None], check: str
) -> None:
    _request, response = _stamp(_authority(rsa_pki))
    token = _resign(token_from_response(response), rsa_pki.tsa_key, edit=edit)
    _refused(check, lambda: verify_token(token, digest=DIGEST, roots=[rsa_pki.root_cert]))


def test_refuses_rsa_pss_with_the_wrong_salt_length(rsa_pki: Pki) -> None:
    _request, response = _stamp(_authority(rsa_pki))
    token = _resign(token_from_response(response), rsa_pki.tsa_key, pss_salt=32, claim_salt=20)
    _refused("signature", lambda: verify_token(token, digest=DIGEST, roots=[rsa_pki.root_cert]))


# --- the embedded TSA -------------------------------------------------------------------------


def _request_der(**fields: Any) -> bytes:
    base: dict[str, Any] = {
        "version": "v1",
        "message_imprint": {"hash_algorithm": {"algorithm": "sha256"}, "hashed_message": DIGEST},
    }
    return bytes(tsp.TimeStampReq({**base, **fields}).dump())


@pytest.mark.parametrize(
    ("request_der", "fail_info"),
    [
        (b"not DER at all", "bad_data_format"),
        (b"", "bad_data_format"),
        (_request_der() + b"trailing", "bad_data_format"),
        (_request_der(version=2), "bad_request"),
        (
            _request_der(
                message_imprint={
                    "hash_algorithm": {"algorithm": "sha1"},
                    "hashed_message": b"a" * 20,
                }
            ),
            "bad_alg",
        ),
        (_request_der(req_policy="1.2.3.4"), "unaccepted_policy"),
    ],
    ids=["garbage", "empty", "trailing", "version", "sha1", "policy"],
)
def test_embedded_tsa_rejects_bad_requests(ec_pki: Pki, request_der: bytes, fail_info: str) -> None:
    status = parse_response(_authority(ec_pki).respond(request_der))
    assert status.status == "rejection"
    assert status.fail_info == (fail_info,)
    assert status.status_text and status.token_der is None


def test_serials_never_repeat_in_one_process(ec_pki: Pki) -> None:
    authority = _authority(ec_pki)
    serials = [
        verify_token(
            token_from_response(authority.respond(build_request(DIGEST).der)),
            digest=DIGEST,
            roots=[ec_pki.root_cert],
        ).serial_number
        for _ in range(50)
    ]
    assert serials == sorted(set(serials))


def test_serials_never_repeat_across_restarts(tmp_path: Path) -> None:
    TsaAuthority.generate("Dev TSA").save(tmp_path)
    seen: list[int] = []
    for _ in range(3):
        authority = TsaAuthority.load(tmp_path)
        seen.extend(authority.serials.next() for _ in range(100))
    assert seen == sorted(set(seen))


def test_serials_survive_a_clock_that_goes_back(tmp_path: Path) -> None:
    state = tmp_path / "serial"
    first = SerialNumbers(state_file=state, micros=lambda: 10**15, block=8)
    issued = [first.next() for _ in range(20)]
    second = SerialNumbers(state_file=state, micros=lambda: 5, block=8)
    issued += [second.next() for _ in range(20)]
    assert issued == sorted(set(issued))


def test_save_and_load_keep_keys_private(tmp_path: Path) -> None:
    authority = TsaAuthority.generate("Dev TSA")
    authority.save(tmp_path)
    for key_file in ("root.key", "tsa.key"):
        assert (tmp_path / key_file).stat().st_mode & 0o777 == 0o600
    loaded = TsaAuthority.load(tmp_path)
    assert loaded.root_pem() == authority.root_pem()
    request = build_request(DIGEST)
    roots = [x509.load_pem_x509_certificate((tmp_path / "root.pem").read_bytes())]
    assert verify_response(
        loaded.respond(request.der), digest=DIGEST, nonce=request.nonce, roots=roots
    )


def test_pure_core_imports_no_network_stack() -> None:
    network = {"rfc3161ng", "requests", "grpc", "urllib.request", "http.client"}
    code = (
        "import sys, ledger.timestamp.rfc3161; "
        f"bad = {network!r} & set(sys.modules); assert not bad, bad"
    )
    processes.run([sys.executable, "-c", code], check=True)


# --- helpers ----------------------------------------------------------------------------------


def _resign(
    token: bytes,
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    *,
    edit: Callable[[Any], None] | None = None,
    pss_salt: int | None = None,
    claim_salt: int | None = None,
) -> bytes:
    """Apply ``edit`` to the SignerInfo and sign its attributes again (RSA; PSS if salted)."""
    assert isinstance(key, rsa.RSAPrivateKey)
    info = cms.ContentInfo.load(token)
    signer_info = info["content"]["signer_infos"][0]
    if edit is not None:
        edit(signer_info)
    data = b"\x31" + signer_info["signed_attrs"].dump(force=True)[1:]
    if pss_salt is None:
        signer_info["signature"] = key.sign(data, padding.PKCS1v15(), hashes.SHA256())
        return bytes(info.dump(force=True))
    pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=pss_salt)
    signer_info["signature"] = key.sign(data, pss, hashes.SHA256())
    signer_info["signature_algorithm"] = algos.SignedDigestAlgorithm(
        {
            "algorithm": "rsassa_pss",
            "parameters": {
                "hash_algorithm": {"algorithm": "sha256"},
                "mask_gen_algorithm": {"algorithm": "mgf1", "parameters": {"algorithm": "sha256"}},
                "salt_length": pss_salt if claim_salt is None else claim_salt,
            },
        }
    )
    return bytes(info.dump(force=True))
