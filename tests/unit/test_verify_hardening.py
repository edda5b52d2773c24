"""Verifier hardening: hostile tokens never crash, anchor time policy, labels, a TSA's garbage.

Real components: tokens from the embedded TSA (``TsaAuthority``) served over real HTTP
(``TsaServer`` on port 0), the verifying ``TsaClient``, the ``Anchorer`` over a ``Log`` on the
in-memory store, and the ``ledger-verify`` CLI run in process (``CliRunner``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ledger.core.checkpoint import Checkpoint, Ed25519Signer
from ledger.core.errors import FormatError, SignatureError, TimestampError
from ledger.log.anchoring import Anchorer, TsaTarget
from ledger.log.facade import Log
from ledger.store.contract import MemoryStore
from ledger.timestamp.policy import DEFAULT_SKEW, check_gen_time
from ledger.timestamp.rfc3161 import build_request, token_from_response, verify_token
from ledger.tsa.authority import TsaAuthority
from ledger.tsa.client import TsaClient, TsaServer
from ledger_client.cli.main import main
from ledger_client.receipts.receipt import Receipt, ReceiptAnchor
from ledger_client.receipts.verify import ReceiptChecker, verify_receipt
from tests.log_items import items
from tests.receipt_world import T0, World, filler, roots, stamp, tsa
from tests.receipt_world import items as run_items
from tests.receipt_world import key as run_key

# Verification time: after every token the tests mint with the real clock (the suite may run
# for minutes), so that only the tests that move it see a future token.
NOW = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=30)
DIGEST = hashlib.sha256(b"hardening").digest()


def spki(authority: TsaAuthority) -> bytes:
    return authority.tsa_cert.public_key().public_bytes(
        Encoding.DER, PublicFormat.SubjectPublicKeyInfo
    )


def garble_signer_key(token: bytes, authority: TsaAuthority) -> bytes:
    """The token with the EC point marker (0x04) of its signer certificate's key flipped: the
    key no longer loads (``cert.public_key()`` raised uncaught before the fix)."""
    key = spki(authority)
    at = token.index(key) + len(key) - 65  # uncompressed P-256 point: 0x04 || X || Y
    assert token[at] == 0x04
    return token[:at] + b"\x05" + token[at + 1 :]


@cache
def token_and_authority() -> tuple[bytes, TsaAuthority]:
    authority = tsa()
    return token_from_response(authority.respond(build_request(DIGEST).der)), authority


# --- no crash on a hostile token --------------------------------------------------------------


def test_unusable_signer_key_is_a_named_failure() -> None:
    token, authority = token_and_authority()
    with pytest.raises(TimestampError) as failed:
        verify_token(garble_signer_key(token, authority), digest=DIGEST, roots=roots())
    assert failed.value.check == "signature"


@pytest.mark.parametrize("command", ["receipt", "run"])
def test_cli_keeps_json_and_exit_code_on_a_garbled_key(tmp_path: Any, command: str) -> None:
    w = World(filler(4))
    receipt = w.receipt(2, 4)
    anchor = receipt.anchors[0]
    bad = replace(receipt, anchors=(replace(anchor, token=garble_signer_key(anchor.token, tsa())),))
    (tmp_path / "root.pem").write_bytes(tsa().root_pem())
    if command == "receipt":
        (tmp_path / "r.json").write_text(bad.to_json())
        target = str(tmp_path / "r.json")
    else:
        entries = run_items()
        entries[1] = garbled_entry(entries[1])
        target = str(tmp_path / "run.jsonl")
        (tmp_path / "run.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    key = w.key.key_string() if command == "receipt" else run_key()
    result = CliRunner().invoke(
        main, [command, target, "--key", key, "--tsa-root", str(tmp_path / "root.pem"), "--json"]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit)
    out = json.loads(result.stdout)
    assert result.exit_code == 1 and out["valid"] is False
    if command == "receipt":
        assert out["failed_check"] == "signature"
    else:  # one bad receipt is named; the rest of the run is still checked
        assert [p["code"] for p in out["problems"]] == ["invalid_receipt"]
        assert out["receipts_valid"] == out["records"] - 1


def garbled_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` with its anchor's signer key garbled."""
    receipt = Receipt.from_json_obj(entry["receipt"])
    anchor = receipt.anchors[0]
    garbled = replace(anchor, token=garble_signer_key(anchor.token, tsa()))
    return {**entry, "receipt": replace(receipt, anchors=(garbled,)).to_json_obj()}


# --- anchor time policy -----------------------------------------------------------------------


def test_policy_bounds() -> None:
    leaf = NOW - timedelta(hours=1)
    second = timedelta(seconds=1)
    check_gen_time(leaf, None, now=NOW, not_before=leaf)
    check_gen_time(leaf - DEFAULT_SKEW, None, now=NOW, not_before=leaf)
    check_gen_time(leaf - DEFAULT_SKEW - second, second, now=NOW, not_before=leaf)  # accuracy
    with pytest.raises(TimestampError) as early:
        check_gen_time(leaf - DEFAULT_SKEW - second, None, now=NOW, not_before=leaf)
    assert early.value.check == "anchor-before-leaf"
    check_gen_time(NOW + DEFAULT_SKEW, None, now=NOW)
    check_gen_time(NOW + DEFAULT_SKEW + second, second, now=NOW)
    with pytest.raises(TimestampError) as future:
        check_gen_time(NOW + DEFAULT_SKEW + second, None, now=NOW)
    assert future.value.check == "anchor-in-future"
    check_gen_time(leaf, None, now=NOW, not_before=leaf + timedelta(minutes=1), skew=DEFAULT_SKEW)
    with pytest.raises(TimestampError):
        check_gen_time(leaf, None, now=NOW, not_before=leaf + second, skew=timedelta(0))
    with pytest.raises(FormatError):
        check_gen_time(leaf, None, now=NOW.replace(tzinfo=None))
    with pytest.raises(FormatError):
        check_gen_time(leaf, None, now=NOW, skew=-second)


def authority_at(moment: datetime) -> TsaAuthority:
    return TsaAuthority.generate(f"Clock TSA {moment.year}", clock=lambda: moment)


def receipt_stamped_by(authority: TsaAuthority) -> Receipt:
    w = World(filler(3, "t"))
    receipt = w.receipt(1, 3, anchored=False)
    body = Checkpoint.from_text(receipt.checkpoint.split("\n\n")[0] + "\n").body_bytes()
    name = authority.tsa_cert.subject.rfc4514_string()
    return replace(receipt, anchors=(ReceiptAnchor(tsa=name, token=stamp(authority, body)),))


def test_token_older_than_the_leaf_is_refused() -> None:
    authority = authority_at(datetime(2020, 1, 1, tzinfo=UTC))  # the leaf is from 2025 (T0)
    receipt = receipt_stamped_by(authority)
    keys = [World(filler(3, "t")).key]
    with pytest.raises(TimestampError) as failed:
        verify_receipt(receipt, keys, tsa_roots=[authority.root_cert], now=NOW)
    assert failed.value.check == "anchor-before-leaf"
    assert "2020-01-01" in str(failed.value)


def test_token_from_the_future_is_refused() -> None:
    authority = authority_at(NOW + timedelta(days=365))
    receipt = receipt_stamped_by(authority)
    keys = [World(filler(3, "t")).key]
    with pytest.raises(TimestampError) as failed:
        verify_receipt(receipt, keys, tsa_roots=[authority.root_cert], now=NOW)
    assert failed.value.check == "anchor-in-future"
    later = NOW + timedelta(days=366)  # the same token verifies once its time has come
    assert verify_receipt(receipt, keys, tsa_roots=[authority.root_cert], now=later).anchored


def test_token_from_the_future_via_the_cli(tmp_path: Any) -> None:
    authority = authority_at(datetime.now(UTC) + timedelta(days=365))
    receipt = receipt_stamped_by(authority)
    (tmp_path / "r.json").write_text(receipt.to_json())
    (tmp_path / "root.pem").write_bytes(authority.root_pem())
    key = World(filler(3, "t")).key.key_string()
    args = ["receipt", str(tmp_path / "r.json"), "--key", key, "--tsa-root"]
    result = CliRunner().invoke(main, [*args, str(tmp_path / "root.pem"), "--json"])
    out = json.loads(result.stdout)
    assert result.exit_code == 1 and out["failed_check"] == "anchor-in-future"
    assert datetime.now(UTC).timestamp() * 1000 > T0


def test_anchor_command_refuses_a_future_token(tmp_path: Any) -> None:
    authority = authority_at(datetime.now(UTC) + timedelta(days=30))
    body = Checkpoint(origin="ledger.test/future", size=3, root_hash=bytes(32)).body_bytes()
    (tmp_path / "cp.txt").write_bytes(body)
    (tmp_path / "token.der").write_bytes(stamp(authority, body))
    (tmp_path / "root.pem").write_bytes(authority.root_pem())
    result = CliRunner().invoke(main, [
        "anchor", "--checkpoint", str(tmp_path / "cp.txt"), "--token", str(tmp_path / "token.der"),
        "--tsa-root", str(tmp_path / "root.pem"), "--json",
    ])  # fmt: skip
    out = json.loads(result.stdout)
    assert result.exit_code == 1 and out["failed_check"] == "anchor-in-future"


# --- labels -----------------------------------------------------------------------------------


def test_an_unauthenticated_label_is_never_shown_as_who_stamped(tmp_path: Any) -> None:
    w = World(filler(4))
    receipt = w.receipt(2, 4)
    lying = replace(receipt, anchors=(replace(receipt.anchors[0], tsa="DigiCert Qualified TSA"),))
    (tmp_path / "r.json").write_text(lying.to_json())
    (tmp_path / "root.pem").write_bytes(tsa().root_pem())
    args = ["receipt", str(tmp_path / "r.json"), "--key", w.key.key_string()]
    checked = CliRunner().invoke(main, [*args, "--tsa-root", str(tmp_path / "root.pem")])
    assert checked.exit_code == 0
    anchor_lines = [line for line in checked.output.splitlines() if "anchor" in line]
    assert anchor_lines and not any("DigiCert" in line for line in anchor_lines)
    assert any(f"signed by {tsa().tsa_cert.subject.rfc4514_string()}" in x for x in anchor_lines)
    unchecked = CliRunner().invoke(main, args)
    line = next(x for x in unchecked.output.splitlines() if "anchor:" in x)
    assert "not checked" in line and "'DigiCert Qualified TSA', unauthenticated" in line
    as_json = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    assert as_json["anchors"][0]["unauthenticated_label"] == "DigiCert Qualified TSA"
    assert "tsa" not in as_json["anchors"][0]


# --- the batch checker's caches are keyed by the exact bytes ---------------------------------


def test_checker_caches_never_accept_different_bytes() -> None:
    w = World(filler(6, "c"))
    checker = ReceiptChecker([w.key], tsa_roots=roots(), now=NOW)
    good = w.receipt(1, 6)
    assert checker.verify(good).anchored
    token = bytearray(good.anchors[0].token)
    token[-5] ^= 0x01  # inside the signature
    bad_token = replace(good, anchors=(replace(good.anchors[0], token=bytes(token)),))
    with pytest.raises(TimestampError):
        checker.verify(bad_token)
    note = good.checkpoint.replace("\n\n— ", "\n\n— x", 1)
    with pytest.raises(SignatureError):
        checker.verify(replace(good, checkpoint=note))
    assert checker.verify(w.receipt(4, 6)).anchored  # a shared token: verified from the cache


# --- the server: one TSA's garbage is that TSA's failure --------------------------------------


class GarblingAuthority(TsaAuthority):
    """A TSA whose tokens carry a signer certificate with an unusable public key."""

    def respond(self, request_der: bytes) -> bytes:
        reply = super().respond(request_der)
        return garble_signer_key_in(reply, self)


def garble_signer_key_in(reply: bytes, authority: TsaAuthority) -> bytes:
    key = spki(authority)
    at = reply.index(key) + len(key) - 65
    return reply[:at] + b"\x05" + reply[at + 1 :]


class RaisingSource:
    def timestamp(self, digest: bytes, *, at_time: datetime | None = None) -> Any:
        raise ValueError("a library broke on this TSA's answer")


def test_garbage_from_one_tsa_does_not_stop_the_others() -> None:
    good = TsaAuthority.generate("Good TSA")
    base = TsaAuthority.generate("Garbling TSA")
    garbling = GarblingAuthority(**{f.name: getattr(base, f.name) for f in fields(base)})
    log = Log(store=MemoryStore(), signer=Ed25519Signer.generate("ledger.test/anchor"),
              origin="ledger.test/anchor")  # fmt: skip
    log.append(items(5))
    log.publish()
    with TsaServer(garbling) as bad_server, TsaServer(good) as good_server:
        targets = [
            TsaTarget("raising", RaisingSource()),
            TsaTarget("garbling", TsaClient(bad_server.url, timeout=5, roots=[base.root_cert])),
            TsaTarget("good", TsaClient(good_server.url, timeout=5, roots=[good.root_cert])),
        ]
        outcome = Anchorer(log=log, tsas=targets, attempts=2, sleep=lambda s: None).anchor_latest()
    assert [a.tsa for a in outcome.anchors] == ["good"]
    assert [f.split(":")[0] for f in outcome.failures] == ["raising", "garbling"]
    assert "ValueError" in outcome.failures[0] and "signature" in outcome.failures[1]
    assert [a.tsa for a in log.anchors(5)] == ["good"]


def test_the_audit_index_applies_the_same_anchor_time_policy() -> None:
    """``ledger-verify index``/``report`` check records part by part (``audit_verify``); an
    anchor older than its leaf is the same named failure there as in ``verify_receipt``."""
    from ledger.core.types import decode_leaf
    from ledger.timestamp.rfc3161 import VerifiedTimestamp, imprint_for_checkpoint_body
    from ledger_client.audit.verify import check_item
    from ledger_client.receipts.run_verify import RunItem
    from tests.receipt_world import make_record

    authority = authority_at(datetime(2020, 1, 1, tzinfo=UTC))
    receipt = receipt_stamped_by(authority)
    body = Checkpoint.from_text(receipt.checkpoint.split("\n\n")[0] + "\n").body_bytes()
    leaf_ms = decode_leaf(receipt.index, receipt.leaf).timestamp_ms
    leaf_time = datetime.fromtimestamp(leaf_ms / 1000, UTC)
    checker = ReceiptChecker([World(filler(3, "t")).key], tsa_roots=[authority.root_cert], now=NOW)
    (anchor,) = receipt.anchors
    stamped = checker.token(anchor, imprint_for_checkpoint_body(body))
    assert isinstance(stamped, VerifiedTimestamp)  # the token itself is fine
    with pytest.raises(TimestampError) as failed:
        checker.check_anchor_time(anchor, stamped, leaf_time)
    assert failed.value.check == "anchor-before-leaf"
    checker.check_anchor_time(anchor, stamped, datetime(2019, 12, 31, tzinfo=UTC))  # earlier leaf
    item = RunItem(source="r", record=make_record(1), receipt=receipt)
    check = check_item(item, checker, receipt.record_digest)  # the audit's path: the same failure
    assert check.anchor == "failed" and "anchor-before-leaf" in (check.error or "")


def test_a_token_kept_valid_for_one_leaf_is_still_checked_against_each_later_leaf() -> None:
    """The audit keeps a token found valid (and not in the future) for its checker, so receipts
    sharing it do not look it up again; the ``anchor-before-leaf`` check is still made for
    each leaf: with no skew, a token stamped 0.5 s after the first leaf (accuracy 1 s) passes
    the first two leaves (1 s apart) and fails the third, in any order, as
    ``check_anchor_time`` says."""
    from ledger_client.audit.verify import check_item
    from ledger_client.receipts.run_verify import RunItem
    from tests.receipt_world import make_record

    moment = datetime.fromtimestamp((T0 + 500) / 1000, UTC)
    authority = authority_at(moment)
    w = World(filler(3, "t"))
    first = w.receipt(0, 3, anchored=False)
    body = Checkpoint.from_text(first.checkpoint.split("\n\n")[0] + "\n").body_bytes()
    anchor = ReceiptAnchor(tsa="clock", token=stamp(authority, body))
    receipts = [replace(w.receipt(i, 3, anchored=False), anchors=(anchor,)) for i in range(3)]
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0, 2, 1]):
        checker = ReceiptChecker(
            [w.key], tsa_roots=[authority.root_cert], now=NOW, skew=timedelta(0)
        )  # fmt: skip
        for i in order:
            item = RunItem(source="r", record=make_record(i), receipt=receipts[i])
            check = check_item(item, checker, receipts[i].record_digest)
            if i < 2:
                assert check.ok and check.anchor == "valid"
                assert check.anchored_at is not None and check.anchored_at <= moment
            else:
                assert check.anchor == "failed" and "anchor-before-leaf" in (check.error or "")
