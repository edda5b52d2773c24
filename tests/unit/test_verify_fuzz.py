"""Byte-flip fuzzing of the offline verifier over a real anchored, cosigned receipt and tokens.

Every byte of the receipt's JSON (XOR 0x01) and every byte of RFC 3161 tokens (XOR 0x01, and
0x80 too for EC; from the embedded TSA with EC and RSA keys, and ``openssl ts`` when present) goes
through ``ledger-verify receipt`` / ``ledger-verify anchor --json`` in process. Each run must
end with exit code 0, 1 or 2 and one JSON object whose ``valid`` agrees with the code, never a
traceback; and whatever is accepted must assert exactly what the original asserts (only the
labels that nothing authenticates may differ).

The receipt carries what a fetched, upgraded receipt carries: the record with a disclosure,
a previous anchored checkpoint with its consistency proof, the tokens' certificates, and a
witness cosignature line (tlog-cosignature) the verifier is not asked to check, so c2sp
signed-note says to ignore it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography import x509

from ledger.core.checkpoint import Checkpoint, CosignatureSigner, Ed25519Signer
from ledger.core.note import SignedNote, add_signatures
from ledger.timestamp.rfc3161 import (
    build_request,
    imprint_for_checkpoint_body,
    token_certificates,
    token_from_response,
)
from ledger.tsa.authority import TsaAuthority
from ledger_client.cli.main import main
from ledger_client.receipts.receipt import Receipt, ReceiptAnchor
from tests.receipt_world import full_receipt, tsa, world
from tests.tsa_openssl import OPENSSL, openssl_tsa

pytestmark = pytest.mark.slow

_LABELS = ("unauthenticated_label", "detail")


def cosigned(note: str) -> str:
    witness = CosignatureSigner.generate("witness.example/w1")
    checkpoint = Checkpoint.from_text(SignedNote.from_text(note).text)
    return add_signatures(note, [witness.cosign(checkpoint, 1_767_000_000)])


def with_certificates(anchor: ReceiptAnchor) -> ReceiptAnchor:
    return replace(anchor, certificates=tuple(token_certificates(anchor.token)))


def fuzz_receipt() -> Receipt:
    receipt = full_receipt()
    assert receipt.previous is not None and receipt.record is not None and receipt.disclosures
    previous = replace(
        receipt.previous, anchors=tuple(with_certificates(a) for a in receipt.previous.anchors)
    )
    return replace(
        receipt,
        checkpoint=cosigned(receipt.checkpoint),
        anchors=tuple(with_certificates(a) for a in receipt.anchors),
        previous=previous,
    )


def invoke(args: list[str], data: bytes) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(main, [*args, "--json"], input=data)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"crash: {result.exception!r}") from result.exception
    out: dict[str, Any] = json.loads(result.stdout)
    # 4: a flip of the schema digit ("ledger.decision/v3" -> "v2" or "v7") may name a newer one
    assert result.exit_code in (0, 1, 2, 4), result.exit_code
    if result.exit_code == 4:
        assert out["status"] == "unsupported_schema_version", out
    assert out["valid"] is (result.exit_code == 0), (result.exit_code, out)
    return result.exit_code, out


def asserted(out: dict[str, Any]) -> dict[str, Any]:
    """What an accepted receipt asserts: everything but the unauthenticated labels."""
    anchors = [{k: v for k, v in a.items() if k not in _LABELS} for a in out.get("anchors", [])]
    return {**out, "anchors": anchors}


def flips(data: bytes, masks: tuple[int, ...]) -> Iterator[tuple[int, int, bytes]]:
    for at in range(len(data)):
        for mask in masks:
            yield at, mask, data[:at] + bytes([data[at] ^ mask]) + data[at + 1 :]


def fuzz(
    args: list[str], original: bytes, masks: tuple[int, ...], same: Callable[[Any], Any]
) -> Counter[int]:
    code, baseline = invoke(args, original)
    assert code == 0, baseline
    codes: Counter[int] = Counter()
    for at, mask, data in flips(original, masks):
        code, out = invoke(args, data)
        codes[code] += 1
        if code == 0:
            assert same(out) == same(baseline), f"byte {at} ^ {mask:#x} changed what is asserted"
    return codes


def test_every_byte_of_an_anchored_cosigned_receipt(tmp_path: Path) -> None:
    receipt = fuzz_receipt()
    (tmp_path / "root.pem").write_bytes(tsa().root_pem())
    key = world().key.key_string()
    args = ["receipt", "-", "--key", key, "--tsa-root", str(tmp_path / "root.pem")]
    codes = fuzz(args, receipt.to_json().encode(), (0x01,), asserted)
    # most flips break the JSON or a proof; some land in what nothing authenticates
    # (labels, helper certificates, the witness line) and are accepted unchanged
    assert codes[1] > 0 and codes[2] > 0 and codes[0] > 0, codes


def _token_args(tmp_path: Path, root_pem: bytes, body: bytes) -> list[str]:
    (tmp_path / "root.pem").write_bytes(root_pem)
    (tmp_path / "checkpoint.txt").write_bytes(body)
    return ["anchor", "--checkpoint", str(tmp_path / "checkpoint.txt"), "--token", "-",
            "--tsa-root", str(tmp_path / "root.pem")]  # fmt: skip


def _body() -> bytes:
    signer = Ed25519Signer.generate("ledger.example.com/fuzz")
    return Checkpoint(origin=signer.name, size=7, root_hash=bytes(range(32))).body_bytes()


@pytest.mark.parametrize("key_type", ["ec", "rsa"])
def test_every_byte_of_an_embedded_tsa_token(tmp_path: Path, key_type: str) -> None:
    authority = TsaAuthority.generate(f"Fuzz TSA {key_type}", key_type=key_type)
    body = _body()
    request = build_request(imprint_for_checkpoint_body(body))
    token = token_from_response(authority.respond(request.der))
    args = _token_args(tmp_path, authority.root_pem(), body)
    masks = (0x01, 0x80) if key_type == "ec" else (0x01,)  # an RSA token is twice as long
    codes = fuzz(args, token, masks, lambda out: out)
    assert codes[1] > 0 and codes[2] > 0, codes


@pytest.mark.skipif(OPENSSL is None, reason="needs the openssl binary (openssl ts -reply)")
def test_every_byte_of_an_openssl_token(tmp_path: Path) -> None:
    from ledger.tsa.client import TsaClient

    body = _body()
    with openssl_tsa(tmp_path) as (url, root_pem, _):
        client = TsaClient(url, timeout=10, roots=x509.load_pem_x509_certificates(root_pem))
        token, _ = client.timestamp(imprint_for_checkpoint_body(body))
    args = _token_args(tmp_path, root_pem, body)
    codes = fuzz(args, token, (0x01,), lambda out: out)
    assert codes[1] > 0 and codes[2] > 0, codes
