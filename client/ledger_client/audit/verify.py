"""Per-record verification for auditors, with checkpoint and token checks shared across runs.

Pure: no grpc, no rocksdict, no I/O. docs/design.md "Receipts"; the checks are those of
``ledger_client.receipt_verify.verify_receipt`` (record digest and disclosures, the v1 leaf,
the C2SP signed checkpoint, the RFC 9162 §2.1.3 inclusion proof, RFC 3161 anchors over SHA-256
of the checkpoint body), but instead of stopping at the first failure each record gets a
``RecordCheck`` with one status per part, so a timeline, a report or an index can show which
part failed for which record.

``VerifyCache`` verifies each distinct signed checkpoint note once (keyed by the exact note
text; the keys are fixed per cache) and each distinct anchor token once (keyed by the token
bytes and the checkpoint body it stamps); thousands of runs logged under a few checkpoints then
cost one signature and one token check per checkpoint, plus a digest and an inclusion proof per
record. A receipt with a ``previous`` checkpoint is checked whole by ``verify_receipt``.

``audit_run`` adds the run-level problems: those ``verify_run`` found when given (the report and
the timeline), else the same checks made here with the shared cache (the index):
``ledger.runs.check_run`` over the records in log order, and parents present in the run logged
before their children (``parent_logged_later``).
Witness cosignatures are counted when witness keys are given; otherwise ``not checked``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509

from ledger.core import merkle
from ledger.core.checkpoint import VerifiedCheckpoint, Verifier, open_checkpoint
from ledger.core.errors import FormatError, LedgerError, TimestampError, VerificationError
from ledger.core.types import decode_leaf
from ledger.records.commitments import check_disclosure_in
from ledger.records.decision import DecisionRecord, record_digest
from ledger.records.runs import RunProblem, RunReport, check_run
from ledger.timestamp.policy import DEFAULT_SKEW, check_gen_time
from ledger.timestamp.rfc3161 import imprint_for_checkpoint_body, verify_token
from ledger_client.receipts.receipt import Receipt, ReceiptAnchor
from ledger_client.receipts.run_verify import RunItem
from ledger_client.receipts.verify import NOT_CHECKED, UNTRUSTED, VALID, verify_receipt

__all__ = [
    "FAILED",
    "NONE",
    "RecordCheck",
    "RunAudit",
    "VerifyCache",
    "audit_run",
    "check_item",
    "iso_ms",
]

FAILED, NONE = "failed", "none"


def iso_ms(ms: int | None) -> str | None:
    """Milliseconds since the epoch as ``2026-01-02T03:04:05.678Z``."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


class VerifyCache:
    """Keys, roots and the outcomes of checks already made (module docstring)."""

    def __init__(
        self,
        log_keys: Sequence[Verifier],
        *,
        tsa_roots: Sequence[x509.Certificate] | None = None,
        origin: str | None = None,
        witnesses: Sequence[Verifier] = (),
        now: datetime | None = None,
        skew: timedelta = DEFAULT_SKEW,
    ) -> None:
        self.log_keys, self.tsa_roots, self.origin = list(log_keys), tsa_roots, origin
        self.witnesses = list(witnesses)
        self.now, self.skew = now or datetime.now(UTC), skew  # the anchor time policy
        self._accuracy: dict[tuple[bytes, bytes], timedelta | None] = {}
        self._notes: dict[str, VerifiedCheckpoint | VerificationError] = {}
        self._anchors: dict[tuple[bytes, bytes], tuple[str, datetime | None, str | None]] = {}
        self.stats = {"checkpoints": 0, "tokens": 0}

    def checkpoint(self, note: str) -> VerifiedCheckpoint:
        """The verified checkpoint of ``note``; raises its ``VerificationError`` every time."""
        found = self._notes.get(note)
        if found is None:
            self.stats["checkpoints"] += 1
            try:
                found = open_checkpoint(
                    note, self.log_keys, origin=self.origin, witnesses=self.witnesses
                )
            except VerificationError as exc:
                found = exc
            self._notes[note] = found
        if isinstance(found, VerificationError):
            raise found
        return found

    def anchor(self, anchor: ReceiptAnchor, body: bytes) -> tuple[str, datetime | None, str | None]:
        """(status, genTime, detail) of one anchor over a checkpoint body."""
        if not self.tsa_roots:
            return NOT_CHECKED, None, None
        key = (anchor.token, body)
        found = self._anchors.get(key)
        if found is None:
            self.stats["tokens"] += 1
            found = self._verify_anchor(anchor, body)
            self._anchors[key] = found
        return found

    def _verify_anchor(
        self, anchor: ReceiptAnchor, body: bytes
    ) -> tuple[str, datetime | None, str | None]:
        assert self.tsa_roots is not None
        try:
            untrusted = [x509.load_der_x509_certificate(c) for c in anchor.certificates]
            stamp = verify_token(
                anchor.token,
                digest=imprint_for_checkpoint_body(body),
                roots=self.tsa_roots,
                intermediates=untrusted,
            )
        except TimestampError as exc:
            status = UNTRUSTED if exc.check == "chain" else FAILED
            return status, None, f"{anchor.tsa}: {exc}"
        except (FormatError, ValueError) as exc:
            return FAILED, None, f"{anchor.tsa}: {exc}"
        self._accuracy[(anchor.token, body)] = stamp.accuracy
        return VALID, stamp.gen_time, None

    def check_time(self, anchor: ReceiptAnchor, body: bytes, leaf_time: datetime) -> None:
        """The anchor time policy (``ledger.timestamp_policy``) for a valid anchor of a leaf
        logged at ``leaf_time``: the same named failures as ``ledger-verify``."""
        status, gen_time, _ = self.anchor(anchor, body)
        if status == VALID and gen_time is not None:
            accuracy = self._accuracy.get((anchor.token, body))
            check_gen_time(gen_time, accuracy, now=self.now, not_before=leaf_time, skew=self.skew)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordCheck:
    """One record's receipt, part by part; ``error`` says why it is not verified (None: it is).

    ``record_status``, ``checkpoint``, ``inclusion``: ``valid``, ``failed`` or ``not_checked``
    (an earlier part failed); ``witnesses``: ``not_checked`` or ``<n> cosigned``; ``anchor``:
    ``valid``, ``not_checked``, ``untrusted``, ``failed`` or ``none``.
    """

    source: str
    record: DecisionRecord
    digest: str
    index: int
    tree_size: int
    logged_at_ms: int | None
    record_status: str
    checkpoint: str
    inclusion: str
    witnesses: str
    anchor: str
    anchored_at: datetime | None
    disclosed: tuple[tuple[str, Any], ...]
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def anchored_at_text(self) -> str | None:
        when = self.anchored_at
        return None if when is None else iso_ms(int(when.timestamp() * 1000))


def _anchor_status(
    receipt: Receipt, body: bytes, cache: VerifyCache, leaf_time: datetime
) -> tuple[str, datetime | None]:
    if not receipt.anchors:
        if cache.tsa_roots:
            raise TimestampError("anchor", "the receipt carries no anchor, TSA roots were given")
        return NONE, None
    results = [cache.anchor(a, body) for a in receipt.anchors]
    for anchor in receipt.anchors:
        cache.check_time(anchor, body, leaf_time)
    times = [t for status, t, _ in results if status == VALID and t is not None]
    if times:
        return VALID, min(times)
    statuses = {status for status, _, _ in results}
    if FAILED in statuses:
        detail = next(d for s, _, d in results if s == FAILED)
        raise TimestampError("anchor", detail or "an anchor failed")
    if UNTRUSTED in statuses:
        raise TimestampError("anchor", "no anchor chains to a given TSA root")
    return NOT_CHECKED, None


def _parts(item: RunItem, digest: bytes, cache: VerifyCache, got: dict[str, Any]) -> None:
    """Check in order, recording in ``got`` how far we got; raises on the first failure."""
    receipt = item.receipt
    got["record_status"] = FAILED
    leaf = decode_leaf(receipt.index, receipt.leaf)  # its time is shown even if checks fail
    got["logged_at_ms"] = leaf.timestamp_ms
    if receipt.previous is not None:
        verify_receipt(receipt, cache.log_keys, tsa_roots=cache.tsa_roots, origin=cache.origin)
    if digest != receipt.record_digest:
        raise VerificationError(f"the record hashes to {digest.hex()}, not the receipt's digest")
    inner = receipt.record
    if inner is not None and inner is not item.record and record_digest(inner) != digest:
        raise VerificationError("the receipt carries a different record")
    for disclosure in receipt.disclosures:
        check_disclosure_in(item.record.to_json_obj(), disclosure)
    if leaf.record_digest != digest:
        raise VerificationError(f"leaf {receipt.index} logs another record digest")
    got.update(record_status=VALID, checkpoint=FAILED)
    verified = cache.checkpoint(receipt.checkpoint)
    checkpoint = verified.checkpoint
    if checkpoint.size != receipt.tree_size:
        raise VerificationError(f"tree_size {receipt.tree_size} != checkpoint {checkpoint.size}")
    got.update(checkpoint=VALID, inclusion=FAILED)
    if cache.witnesses:
        got["witnesses"] = f"{len(verified.cosignatures)} cosigned"
    merkle.verify_inclusion(
        merkle.leaf_hash(receipt.leaf),
        receipt.index,
        checkpoint.size,
        receipt.inclusion_proof,
        checkpoint.root_hash,
    )
    got.update(inclusion=VALID, anchor=FAILED)
    leaf_time = datetime.fromtimestamp(leaf.timestamp_ms / 1000, UTC)
    got["anchor"], got["anchored_at"] = _anchor_status(
        receipt, checkpoint.body_bytes(), cache, leaf_time
    )


def check_item(item: RunItem, cache: VerifyCache, digest: bytes | None = None) -> RecordCheck:
    """Verify one record's receipt part by part (never raises on a failed check)."""
    digest = record_digest(item.record) if digest is None else digest
    got: dict[str, Any] = {}
    error = None
    try:
        _parts(item, digest, cache, got)
    except (LedgerError, ValueError) as exc:
        error = str(exc) or type(exc).__name__
    return _record_check(item, digest, got, error)


def _record_check(
    item: RunItem, digest: bytes, got: dict[str, Any], error: str | None
) -> RecordCheck:
    return RecordCheck(
        source=item.source,
        record=item.record,
        digest=digest.hex(),
        index=item.receipt.index,
        tree_size=item.receipt.tree_size,
        logged_at_ms=got.get("logged_at_ms"),
        record_status=got.get("record_status", FAILED if error else NOT_CHECKED),
        checkpoint=got.get("checkpoint", NOT_CHECKED),
        inclusion=got.get("inclusion", NOT_CHECKED),
        witnesses=got.get("witnesses", NOT_CHECKED),
        anchor=got.get("anchor", NOT_CHECKED),
        anchored_at=got.get("anchored_at"),
        disclosed=tuple((d.field_path, d.value) for d in item.receipt.disclosures),
        error=error,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunAudit:
    """One run: its records' checks in log order and the run-level problems."""

    run_id: str | None
    agent: str | None
    checks: tuple[RecordCheck, ...]
    problems: tuple[tuple[RunProblem, str | None], ...]
    external_parents: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems and all(c.ok for c in self.checks)

    def problems_of(self, digest: str) -> list[RunProblem]:
        return [p for p, _ in self.problems if p.record_digest == digest]


def audit_run(
    items: Sequence[RunItem],
    cache: VerifyCache,
    *,
    run_problems: Sequence[tuple[RunProblem, str | None]] | None = None,
) -> RunAudit:
    """Every record checked (``check_item``), then the run checks (module docstring).

    ``run_problems``: the problems ``receipt_verify.verify_run`` found for these items (the
    report and the timeline pass them, so they show exactly what ``ledger-verify run``
    reports); without them the same checks are made here, sharing the cache (the index)."""
    ordered = sorted(items, key=lambda item: item.receipt.index)
    digests = [_digest_of(item) for item in ordered]
    checks = [check_item(item, cache, d) for item, d in zip(ordered, digests, strict=True)]
    report = check_run([item.record for item in ordered], digests=[d.hex() for d in digests])
    if run_problems is None:
        run_problems = _run_problems(checks, report)
    return RunAudit(
        run_id=report.run_id,
        agent=ordered[0].record.agent if ordered else None,
        checks=tuple(checks),
        problems=tuple(run_problems),
        external_parents=report.external_parents,
    )


def _run_problems(
    checks: Sequence[RecordCheck], report: RunReport
) -> list[tuple[RunProblem, str | None]]:
    """``verify_run``'s checks over already checked records: invalid receipts, parents logged
    later than their children, and ``check_run``'s problems."""
    problems: list[tuple[RunProblem, str | None]] = []
    for check in checks:
        if check.error is not None:
            problems.append((_problem("invalid_receipt", check.error, check), check.source))
    index_of = {c.digest: c.index for c in checks}
    for check in checks:
        for parent in check.record.parent_digests:
            logged = index_of.get(parent)
            if logged is not None and logged >= check.index:
                message = f"parent {parent} is logged at index {logged}, not before {check.index}"
                problems.append((_problem("parent_logged_later", message, check), check.source))
    source = {c.digest: c.source for c in checks}
    problems += [(p, source.get(p.record_digest or "")) for p in report.problems]
    return problems


def _digest_of(item: RunItem) -> bytes:
    """The record digest (``audit_load.LoadedItem`` computed it while reading)."""
    known = getattr(item, "known_digest", None)
    return known if isinstance(known, bytes) else record_digest(item.record)


def _problem(code: str, message: str, check: RecordCheck) -> RunProblem:
    record = check.record
    return RunProblem(
        code=code,
        message=message,
        step=record.step,
        record_id=record.record_id,
        record_digest=check.digest,
    )
