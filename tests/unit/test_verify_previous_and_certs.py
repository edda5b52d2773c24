"""Issue 22 item 8, the verifier's share: a receipt's ``previous`` checkpoint has its witness
cosignatures checked like the current one's, and a certificate an anchor carries that does not
parse (a bad X.509 version byte) is a named failure of that receipt, never a crash, while
``run`` and ``index`` go on with the rest. Real receipts: the in-memory log of
tests/receipt_world.py, cosigned by a generated witness key, anchored by the embedded TSA."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from ledger.core.checkpoint import Checkpoint, CosignatureSigner
from ledger.core.errors import MalformedReceiptError, SignatureError, WitnessError
from ledger.core.note import SignedNote
from ledger.records.decision import record_digest
from ledger_client.audit.verify import check_item
from ledger_client.cli.main import main
from ledger_client.receipts.receipt import PreviousCheckpoint, Receipt
from ledger_client.receipts.run_verify import RunItem
from ledger_client.receipts.verify import ReceiptChecker, verify_receipt
from tests import processes
from tests.receipt_world import DISCLOSED, RECORDS, full_receipt, items, key, logged, tsa, world

WITNESS = CosignatureSigner.generate("witness.example/item8")
COSIGNED_AT = 1_750_000_100


def cosigned(note: str, *, flip: bool = False) -> str:
    """``note`` with the witness's cosignature line added; ``flip``: one byte of it altered."""
    signed = SignedNote.from_text(note)
    line = WITNESS.cosign(Checkpoint.from_text(signed.text), COSIGNED_AT)
    if flip:
        raw = bytearray(line.signature)
        raw[-1] ^= 0x01
        line = replace(line, signature=bytes(raw))
    return replace(signed, signatures=(*signed.signatures, line)).to_text()


def receipt_with_previous(*, flip: bool = False, previous_cosigned: bool = True) -> Receipt:
    """Index 11 of tests/receipt_world's log at size 20, its previous checkpoint at size 13;
    both cosigned by WITNESS (the previous one with a flipped byte when ``flip``)."""
    receipt = full_receipt()
    assert receipt.previous is not None
    old_note = receipt.previous.checkpoint
    if previous_cosigned:
        old_note = cosigned(old_note, flip=flip)
    previous: PreviousCheckpoint = replace(receipt.previous, checkpoint=old_note)
    return replace(receipt, checkpoint=cosigned(receipt.checkpoint), previous=previous)


def verify_with_witness(receipt: Receipt) -> None:
    verify_receipt(receipt, [world().key], witnesses=[WITNESS.verifier()], min_witnesses=1)


# --- previous cosignatures ------------------------------------------------------------------------


def test_previous_cosignatures_are_checked_like_the_current_ones() -> None:
    verify_with_witness(receipt_with_previous())  # untouched: accepted
    with pytest.raises(SignatureError, match=r"previous\.checkpoint: invalid signature by known"):
        verify_with_witness(receipt_with_previous(flip=True))
    with pytest.raises(WitnessError, match=r"previous\.checkpoint: 0 trusted witness"):
        verify_with_witness(receipt_with_previous(previous_cosigned=False))
    # without witness keys the flipped line is a line of an unknown key (c2sp signed-note)
    verify_receipt(receipt_with_previous(flip=True), [world().key])


def test_cli_receipt_refuses_a_flipped_previous_cosignature(tmp_path: Path) -> None:
    args = ["receipt", "-", "--key", world().key.key_string(), "--json"]
    args += ["--witness", WITNESS.verifier().key_string()]
    for flip, code in ((False, 0), (True, 1)):
        text = receipt_with_previous(flip=flip).to_json()
        result = CliRunner().invoke(main, args, input=text)
        assert isinstance(result.exception, SystemExit | None), result.exception
        assert result.exit_code == code, result.output
        out = json.loads(result.output)
        assert out["valid"] is (not flip)
        if flip:
            assert "previous.checkpoint" in out["error"] and WITNESS.name in out["error"]


def test_audit_check_refuses_a_flipped_previous_cosignature() -> None:
    checker = ReceiptChecker([world().key], witnesses=[WITNESS.verifier()], min_witnesses=1)
    for flip in (False, True):
        receipt = receipt_with_previous(flip=flip)
        check = check_item(RunItem(source="r.json", record=DISCLOSED, receipt=receipt), checker)
        if flip:
            assert check.error is not None and "previous.checkpoint" in check.error
        else:
            assert check.error is None, check.error


# --- a certificate that does not parse -----------------------------------------------------------

V3 = b"\xa0\x03\x02\x01\x02"  # tbsCertificate's version: [0] EXPLICIT INTEGER 2 (v3)


def bad_version(der: bytes) -> bytes:
    assert der.count(V3) == 1
    altered = der.replace(V3, b"\xa0\x03\x02\x01\x07")
    with pytest.raises(x509.InvalidVersion):  # the library's own refusal, not a ValueError
        x509.load_der_x509_certificate(altered)
    return altered


def run_with_bad_certificate() -> list[dict[str, Any]]:
    """tests/receipt_world's run; step 1's anchor carries the TSA certificate and, second, a
    copy of it with its version byte altered."""
    good = tsa().tsa_cert.public_bytes(Encoding.DER)
    w, index = logged()
    receipt = w.receipt(index[record_digest(RECORDS[1])], len(w.leaves))
    anchor = replace(receipt.anchors[0], certificates=(good, bad_version(good)))
    entries = items()
    entries[1] = {
        "record": RECORDS[1].to_json_obj(),
        "receipt": replace(receipt, anchors=(anchor,)).to_json_obj(),
    }
    return entries


def test_a_bad_version_certificate_is_named_not_a_crash() -> None:
    entry = run_with_bad_certificate()[1]
    receipt = Receipt.from_json_obj(entry["receipt"])
    with pytest.raises(MalformedReceiptError, match="version") as caught:
        verify_receipt(receipt, [logged()[0].key], tsa_roots=[tsa().root_cert])
    assert caught.value.field == "anchors[0].certificates[1]"
    checker = ReceiptChecker([logged()[0].key], tsa_roots=[tsa().root_cert])
    item = RunItem(source="r.json", record=RECORDS[1], receipt=receipt)
    check = check_item(item, checker)
    assert check.error is not None and "anchors[0]" in check.error
    assert "certificates[1]" in check.error


def test_run_json_names_the_certificate_and_reports_the_rest(tmp_path: Path) -> None:
    run_file = tmp_path / "run.jsonl"
    run_file.write_text("".join(json.dumps(e) + "\n" for e in run_with_bad_certificate()))
    root = tmp_path / "root.pem"
    root.write_bytes(tsa().root_pem())
    probe = "import sys; from ledger_client.cli.entry import main; sys.exit(main())"
    args = ["run", str(run_file), "--key", key(), "--tsa-root", str(root), "--json"]
    proc = processes.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "unexpected" not in proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["valid"] is False and out["receipts_valid"] == len(RECORDS) - 1
    [problem] = out["problems"]
    assert (problem["code"], problem["step"], problem["source"]) == (
        "invalid_receipt",
        1,
        "run.jsonl:2",
    )
    assert problem["message"].startswith("anchors[0].certificates[1]: ")
    assert "version" in problem["message"].lower()
    statuses = {row["step"]: row["status"] for row in out["timeline"]}
    assert statuses == {0: "verified", 1: "invalid_receipt", 2: "verified", 3: "verified",
                        4: "verified"}  # fmt: skip


def test_index_goes_on_past_a_bad_certificate(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "bad.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in run_with_bad_certificate())
    )
    root = tmp_path / "root.pem"
    root.write_bytes(tsa().root_pem())
    db = str(tmp_path / "audit.sqlite")
    args = ["index", str(folder), "--db", db, "--key", key(), "--tsa-root", str(root), "--json"]
    result = CliRunner().invoke(main, args)
    assert isinstance(result.exception, SystemExit | None), result.exception
    out = json.loads(result.output)
    assert (out["indexed"], out["records"], out["failed_runs"]) == (1, len(RECORDS), 1), out
    result = CliRunner().invoke(main, ["query", "--db", db, "--status", "failed", "--json"])
    [row] = json.loads(result.output)["records"]
    assert row["step"] == 1
