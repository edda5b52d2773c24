"""Issue 22 item 8: certificates a token carries that the chain does not use. By design
(docs/formats.md "RFC 3161 anchors") each must parse (one that does not is named), and beyond
that they are ignored: the SignedData certificate set is not signed, so a flipped byte in an
unused certificate that still parses leaves the verdict exactly as it was. A flip in the
certificate the chain does use is refused, which shows the flips below reach the verifier."""

from __future__ import annotations

from dataclasses import replace

import pytest
from asn1crypto import cms
from asn1crypto import x509 as asn1_x509
from cryptography.hazmat.primitives.serialization import Encoding

from ledger.core.checkpoint import Checkpoint
from ledger.core.errors import FormatError, MalformedReceiptError, TimestampError
from ledger.records.decision import record_digest
from ledger.timestamp.asn1 import parse_signed_token
from ledger.timestamp.rfc3161 import imprint_for_checkpoint_body, verify_token
from ledger_client.receipts.receipt import Receipt
from ledger_client.receipts.verify import VALID, verify_receipt
from tests.receipt_world import RECORDS, logged, tsa

V3 = b"\xa0\x03\x02\x01\x02"  # tbsCertificate's version: [0] EXPLICIT INTEGER 2 (v3)


def other_cert() -> bytes:
    """A well-formed certificate no chain of the test TSA uses: another TSA's."""
    return tsa("Unrelated TSA").tsa_cert.public_bytes(Encoding.DER)


def with_extra_certificate(token: bytes, extra: bytes) -> bytes:
    """``token`` with ``extra`` appended to its SignedData certificates (outside the signature:
    the signed attributes and the signature keep their bytes)."""
    info = cms.ContentInfo.load(token)
    signed = info["content"]
    carried = list(signed["certificates"])
    extra_choice = cms.CertificateChoices(
        name="certificate", value=asn1_x509.Certificate.load(extra)
    )
    signed["certificates"] = cms.CertificateSet([*carried, extra_choice])
    dumped: bytes = cms.ContentInfo({"content_type": "signed_data", "content": signed}).dump()
    return dumped


def flip_last_byte_of(token: bytes, cert: bytes) -> bytes:
    """Flip the last byte of ``cert`` (its signature value) where ``token`` carries it."""
    at = token.index(cert) + len(cert) - 1
    return token[:at] + bytes([token[at] ^ 0x01]) + token[at + 1 :]


def receipt_and_digest() -> tuple[Receipt, bytes]:
    w, index = logged()
    receipt = w.receipt(index[record_digest(RECORDS[1])], len(w.leaves))
    body = Checkpoint.from_text(receipt.checkpoint.split("\n\n")[0] + "\n").body_bytes()
    return receipt, imprint_for_checkpoint_body(body)


def test_a_flip_inside_an_unused_token_certificate_changes_nothing() -> None:
    receipt, digest = receipt_and_digest()
    roots = [tsa().root_cert]
    plain = verify_token(receipt.anchors[0].token, digest=digest, roots=roots)
    extra = other_cert()
    carrying = with_extra_certificate(receipt.anchors[0].token, extra)
    flipped = flip_last_byte_of(carrying, extra)
    assert flipped != carrying
    for token in (carrying, flipped):
        verified = verify_token(token, digest=digest, roots=roots)
        assert (verified.gen_time, verified.serial_number, verified.chain_ders) == (
            plain.gen_time,
            plain.serial_number,
            plain.chain_ders,
        )
        assert extra not in verified.chain_ders
        anchor = replace(receipt.anchors[0], token=token)
        report = verify_receipt(
            replace(receipt, anchors=(anchor,)), [logged()[0].key], tsa_roots=roots
        )
        assert [a.status for a in report.anchors] == [VALID]


def test_a_flip_inside_the_signer_certificate_is_refused() -> None:
    receipt, digest = receipt_and_digest()
    used = tsa().tsa_cert.public_bytes(Encoding.DER)
    flipped = flip_last_byte_of(receipt.anchors[0].token, used)
    with pytest.raises(TimestampError):
        verify_token(flipped, digest=digest, roots=[tsa().root_cert])


def test_an_unused_token_certificate_that_does_not_parse_is_named() -> None:
    receipt, digest = receipt_and_digest()
    extra = other_cert()
    assert extra.count(V3) == 1
    token = with_extra_certificate(receipt.anchors[0].token, extra)
    j = parse_signed_token(token).certificates.index(extra)  # a SET OF: DER order
    broken = token.replace(extra, extra.replace(V3, b"\xa0\x03\x02\x01\x07"))
    with pytest.raises(FormatError, match=rf"the token's certificates\[{j}\]: .*version"):
        verify_token(broken, digest=digest, roots=[tsa().root_cert])
    anchor = replace(receipt.anchors[0], token=broken)
    with pytest.raises(MalformedReceiptError, match=rf"certificates\[{j}\]") as caught:
        verify_receipt(
            replace(receipt, anchors=(anchor,)), [logged()[0].key], tsa_roots=[tsa().root_cert]
        )
    assert caught.value.field == "anchors[0].token"


def test_a_flip_inside_an_unused_helper_certificate_changes_nothing() -> None:
    """The anchor's own ``certificates`` list (helpers beside the token) follows the same rule."""
    receipt, _ = receipt_and_digest()
    extra = other_cert()
    flipped = extra[:-1] + bytes([extra[-1] ^ 0x01])
    for helpers in ((extra,), (flipped,)):
        anchor = replace(receipt.anchors[0], certificates=helpers)
        report = verify_receipt(
            replace(receipt, anchors=(anchor,)), [logged()[0].key], tsa_roots=[tsa().root_cert]
        )
        assert [a.status for a in report.anchors] == [VALID]
