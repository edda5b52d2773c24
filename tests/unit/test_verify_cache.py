"""The one verification cache (``ledger_client.receipts.cache``): a verdict is reused only for
the same bytes under the same trust inputs, and one that depends on the current time only
inside the interval in which it holds. Real receipts: an in-memory log with Ed25519
checkpoints and RFC 3161 tokens from generated TSAs (``tests/unit/test_receipt.py``)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ledger.core.checkpoint import Checkpoint, CosignatureSigner, Ed25519Signer
from ledger.core.errors import (
    OriginMismatchError,
    SignatureError,
    TimestampError,
    WitnessError,
)
from ledger.timestamp.policy import DEFAULT_SKEW
from ledger.tsa.authority import TsaAuthority
from ledger_client.receipts.cache import Interval, TrustInputs, VerificationCache
from ledger_client.receipts.receipt import Receipt, ReceiptAnchor
from ledger_client.receipts.verify import VALID, ReceiptChecker, verify_receipt
from tests.receipt_world import ORIGIN, World, filler, stamp, tsa

NOW = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=30)  # after every token
WORLD = World(filler(3, "cache"))
GEN_TIME = datetime(2030, 1, 1, tzinfo=UTC)


def _stamped_by(authority: TsaAuthority) -> Receipt:
    receipt = WORLD.receipt(1, 3, anchored=False)
    body = Checkpoint.from_text(receipt.checkpoint.split("\n\n")[0] + "\n").body_bytes()
    name = authority.tsa_cert.subject.rfc4514_string()
    return replace(receipt, anchors=(ReceiptAnchor(tsa=name, token=stamp(authority, body)),))


def test_the_same_note_under_other_trust_inputs_is_verified_again() -> None:
    cache = VerificationCache()
    note = WORLD.note(3)
    trusted = ReceiptChecker([WORLD.key], cache=cache, now=NOW)
    assert trusted.open_note(note).checkpoint.size == 3
    impostor = Ed25519Signer(name=ORIGIN, seed=hashlib.sha256(b"impostor").digest()).verifier()
    with pytest.raises(SignatureError):  # same name, another key: not the trusted verdict
        ReceiptChecker([impostor], cache=cache, now=NOW).open_note(note)
    with pytest.raises(OriginMismatchError):
        ReceiptChecker([WORLD.key], origin="other.example/log", cache=cache).open_note(note)
    witness = CosignatureSigner.generate("witness.example/w1").verifier()
    quorum = ReceiptChecker([WORLD.key], witnesses=[witness], min_witnesses=1, cache=cache)
    with pytest.raises(WitnessError):
        quorum.open_note(note)
    assert cache.stats["checkpoints"] == 4  # one verdict per set of trust inputs
    for again in (trusted, ReceiptChecker([WORLD.key], cache=cache, now=NOW + timedelta(days=9))):
        assert again.open_note(note).checkpoint.size == 3  # same inputs: reused
    with pytest.raises(WitnessError):
        quorum.open_note(note)  # a refusal is reused too, raised again
    assert cache.stats["checkpoints"] == 4


def test_the_same_token_under_other_roots_or_skew_is_verified_again() -> None:
    cache = VerificationCache()
    receipt = WORLD.receipt(1, 3)  # anchored by tsa()
    own = verify_receipt(receipt, [WORLD.key], tsa_roots=[tsa().root_cert], now=NOW, cache=cache)
    assert own.anchors[0].status == VALID
    other_root = tsa("Cache Test Other TSA").root_cert
    with pytest.raises(TimestampError, match="none chains to a given root"):
        verify_receipt(receipt, [WORLD.key], tsa_roots=[other_root], now=NOW, cache=cache)
    wider = DEFAULT_SKEW * 2
    roots = [tsa().root_cert]
    verify_receipt(receipt, [WORLD.key], tsa_roots=roots, now=NOW, skew=wider, cache=cache)
    assert cache.stats["tokens"] == 3
    verify_receipt(receipt, [WORLD.key], tsa_roots=roots, now=NOW, skew=wider, cache=cache)
    assert cache.stats["tokens"] == 3 and cache.stats["checkpoints"] == 3


def test_trust_fingerprints_differ_in_every_input() -> None:
    key, witness = WORLD.key, CosignatureSigner.generate("witness.example/w2").verifier()
    base = TrustInputs.of([key])
    variants = [
        TrustInputs.of([key], origin=ORIGIN),
        TrustInputs.of([key], witnesses=[witness]),
        TrustInputs.of([key], witnesses=[witness], min_witnesses=1),
        TrustInputs.of([key], tsa_roots=[tsa().root_cert]),
        TrustInputs.of([key], skew=timedelta(minutes=1)),
        TrustInputs.of([key, witness]),
    ]
    prints = {t.fingerprint for t in [base, *variants]}
    assert len(prints) == len(variants) + 1
    assert TrustInputs.of([key]).fingerprint == base.fingerprint  # equal inputs: equal prints


def test_a_time_dependent_verdict_is_reused_only_inside_its_interval() -> None:
    authority = TsaAuthority.generate("Cache Future TSA", clock=lambda: GEN_TIME)
    receipt = _stamped_by(authority)
    roots = [authority.root_cert]
    cache = VerificationCache()

    def check(now: datetime) -> str:
        try:
            report = verify_receipt(receipt, [WORLD.key], tsa_roots=roots, now=now, cache=cache)
        except TimestampError as exc:
            assert exc.check == "anchor-in-future"
            assert now.isoformat().replace("+00:00", "Z") in str(exc)  # this check's own now
            return "future"
        assert report.anchors[0].status == VALID
        return "valid"

    bound = GEN_TIME - authority.accuracy - DEFAULT_SKEW  # the earliest now it is not future
    assert check(datetime(2029, 12, 1, tzinfo=UTC)) == "future"
    assert check(datetime(2030, 2, 1, tzinfo=UTC)) == "valid"  # outside: computed again
    assert (cache.stats["tokens"], cache.stats["anchor_times"]) == (1, 2)
    assert check(datetime(2029, 12, 2, tzinfo=UTC)) == "future"  # inside each: reused
    assert check(bound) == "valid"
    assert check(bound - timedelta(microseconds=1)) == "future"
    assert check(datetime(2031, 1, 1, tzinfo=UTC)) == "valid"
    assert (cache.stats["tokens"], cache.stats["anchor_times"]) == (1, 2)


def test_a_verdict_is_stored_with_an_interval_holding_when_it_was_computed() -> None:
    cache = VerificationCache()
    trust = TrustInputs.of([WORLD.key])
    early, late = datetime(2030, 1, 1, tzinfo=UTC), datetime(2031, 1, 1, tzinfo=UTC)
    computed: list[datetime] = []

    def verdict(now: datetime) -> str:
        def compute() -> tuple[str, Interval]:
            computed.append(now)
            if now < late:
                return "before", Interval(end=late)
            return "after", Interval(start=late)

        return cache.verdict("probe", trust, b"bytes", compute, now=now)

    assert [verdict(early), verdict(late), verdict(early), verdict(late)] == [
        "before", "after", "before", "after",
    ]  # fmt: skip
    assert computed == [early, late]
    other = TrustInputs.of([WORLD.key], origin=ORIGIN)
    assert cache.verdict("probe", other, b"bytes", lambda: ("other", Interval()), now=early) == (
        "other"
    )
