"""Shuffling a run set's receipts never changes a verdict.

Runs from ``tests/audit_world.py`` (real receipts, Ed25519 checkpoints, RFC 3161 tokens) whose
anchors all stamp the same checkpoint, so every receipt shares one token or two, but carry
different certificate lists: the TSA certificate the token lacks, none, the root and the TSA
certificate, a certificate of another TSA, bytes that are no certificate. Each verdict depends
on the receipt's own bytes only: the audit's record checks (``audit_run``, what ``report``,
``lineage`` and ``index`` show) and ``verify_run``'s problems, both through one shared
``VerificationCache``, equal the same checks made with a fresh cache per receipt, whatever
the order of the runs and of the receipts in them.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache

from cryptography.hazmat.primitives.serialization import Encoding
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.checkpoint import Checkpoint
from ledger.records.decision import DecisionRecord
from ledger.timestamp.rfc3161 import build_request, imprint_for_checkpoint_body, token_from_response
from ledger_client.audit.verify import RecordCheck, audit_run, check_item
from ledger_client.receipts.cache import VerificationCache
from ledger_client.receipts.receipt import ReceiptAnchor
from ledger_client.receipts.run_verify import RunItem, verify_run
from ledger_client.receipts.verify import ReceiptChecker
from tests.audit_world import Runs, build
from tests.receipt_world import tsa

NOW = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=30)  # after every token
RUNS = build()
SIZE = len(RUNS.world.leaves)


@cache
def anchors() -> list[ReceiptAnchor]:
    """Anchors over the one checkpoint: a token without its signer certificate and one with
    it, each with several certificate lists (good, missing, foreign, not DER)."""
    authority, other = tsa(), tsa("Shuffle Other TSA")
    note = RUNS.world.note(SIZE)
    body = Checkpoint.from_text(note.split("\n\n")[0] + "\n").body_bytes()
    request = build_request(imprint_for_checkpoint_body(body), cert_req=False)
    bare = token_from_response(authority.respond(request.der))
    embedded = RUNS.world.anchor(SIZE).token
    own, root = (c.public_bytes(Encoding.DER) for c in (authority.tsa_cert, authority.root_cert))
    foreign = other.tsa_cert.public_bytes(Encoding.DER)
    lists = [(), (own,), (root, own), (foreign,), (b"not a certificate",)]
    name = authority.tsa_cert.subject.rfc4514_string()
    return [
        *(ReceiptAnchor(tsa=name, token=bare, certificates=c) for c in lists),
        *(ReceiptAnchor(tsa=name, token=embedded, certificates=c) for c in lists[::2]),
    ]


def _items(run: int, records: list[DecisionRecord], choices: list[list[int]]) -> list[RunItem]:
    items = []
    for step, (record, chosen) in enumerate(zip(records, choices, strict=True)):
        base = RUNS.world.receipt(RUNS.world.leaves.index(_leaf(RUNS, record)), SIZE, record=record)
        receipt = replace(base, anchors=tuple(anchors()[i] for i in chosen))
        items.append(RunItem(source=f"run{run}:{step}", record=record, receipt=receipt))
    return items


def _leaf(runs: Runs, record: DecisionRecord) -> bytes:
    digest = bytes.fromhex(runs.digest(record))
    return next(leaf for leaf in runs.world.leaves if leaf[9:41] == digest)


@st.composite
def run_sets(draw: st.DrawFn) -> list[list[RunItem]]:
    """2 to 4 runs (the support or the review run), each receipt with 1 or 2 anchors."""
    out = []
    for run in range(draw(st.integers(2, 4))):
        records = draw(st.sampled_from([RUNS.support, RUNS.review]))
        picks = st.lists(st.integers(0, len(anchors()) - 1), min_size=1, max_size=2)
        out.append(_items(run, records, [draw(picks) for _ in records]))
    return out


def _checker(shared: VerificationCache) -> ReceiptChecker:
    roots = [tsa().root_cert]
    return ReceiptChecker([RUNS.world.key], tsa_roots=roots, now=NOW, cache=shared)


def _verdicts(runs: list[list[RunItem]]) -> tuple[dict[str, RecordCheck], dict[str, object]]:
    """Every record check and every run's problems, all through one shared cache."""
    shared = VerificationCache()
    checks: dict[str, RecordCheck] = {}
    problems: dict[str, object] = {}
    for items in runs:
        audit = audit_run(items, _checker(shared))
        checks.update((c.source, c) for c in audit.checks)
        verdict = verify_run(items, (), checker=_checker(shared))
        name = items[0].source.split(":")[0]
        problems[name] = sorted((p.code, p.message, s or "") for p, s in verdict.problems)
    return checks, problems


@settings(max_examples=20, deadline=None)
@given(run_sets(), st.randoms(use_true_random=False))
def test_shuffling_receipts_never_changes_a_verdict(
    runs: list[list[RunItem]], rnd: random.Random
) -> None:
    checks, problems = _verdicts(runs)
    alone = {
        i.source: check_item(i, _checker(VerificationCache())) for items in runs for i in items
    }
    assert checks == alone  # no verdict borrowed from another receipt
    shuffled = [rnd.sample(items, len(items)) for items in rnd.sample(runs, len(runs))]
    assert _verdicts(shuffled) == (checks, problems)


def test_the_certificates_decide_a_bare_token() -> None:
    """The fixture's point: the same token is valid or not by the certificates it carries."""
    statuses = {}
    for n in range(len(anchors())):
        (item,) = _items(0, RUNS.review[:1], [[n]])
        statuses[n] = check_item(item, _checker(VerificationCache())).anchor
    assert statuses == {0: "failed", 1: "valid", 2: "valid", 3: "failed", 4: "failed",
                        5: "valid", 6: "valid", 7: "failed"}  # fmt: skip
