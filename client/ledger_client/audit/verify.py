"""Per-record verification for auditors, with checkpoint and token checks shared across runs.

Pure: no grpc, no rocksdict, no I/O. docs/design.md "Receipts"; the checks are those of
``ledger_client.receipts.verify.verify_receipt`` (record digest and disclosures, the v1 leaf,
the C2SP signed checkpoint, the RFC 9162 §2.1.3 inclusion proof, RFC 3161 anchors over SHA-256
of the checkpoint body), but instead of stopping at the first failure each record gets a
``RecordCheck`` with one status per part, so a timeline, a report or an index can show which
part failed for which record.

Checks go through a ``ReceiptChecker`` (``ledger_client.receipts.verify``) and so through the
one ``VerificationCache`` (``ledger_client.receipts.cache``): each distinct signed checkpoint
note and each distinct anchor token (with the certificates it carries) is verified once per
set of trust inputs; thousands of runs logged under a few checkpoints then cost one signature
and one token check per checkpoint, plus a digest and an inclusion proof per record. A receipt
with a ``previous`` checkpoint is checked whole by ``verify_receipt``, and the previous
checkpoint's cosignatures like the current one's (``ReceiptChecker.open_previous``).

``audit_run`` adds the run-level problems: those ``verify_run`` found when given (the report and
the timeline), else the same checks made here with the shared cache (the index):
``ledger.records.runs.check_run`` over the records in log order, and parents present in the run
logged before their children (``parent_logged_later``).
Witness cosignatures are counted when witness keys are given; otherwise ``not checked``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger.core.checkpoint import Checkpoint, VerifiedCheckpoint
from ledger.core.errors import (
    AnchorsPendingError,
    DataLossError,
    FormatError,
    LedgerError,
    TimestampError,
    VerificationError,
)
from ledger.core.jcs import index_path
from ledger.core.timefmt import from_epoch_ms, rfc3339_millis
from ledger.core.types import decode_leaf
from ledger.records.commitments import check_disclosure_in
from ledger.records.decision import DecisionRecord, record_digest
from ledger.records.runs import RunProblem, RunReport, check_run
from ledger.timestamp.policy import check_not_before_leaf
from ledger.timestamp.rfc3161 import VerifiedTimestamp, imprint_for_checkpoint_body
from ledger_client.receipts.inclusion import verify_inclusion
from ledger_client.receipts.receipt import Receipt, ReceiptAnchor
from ledger_client.receipts.run_verify import RunItem, verify_run
from ledger_client.receipts.verify import (
    NOT_CHECKED,
    UNTRUSTED,
    VALID,
    ReceiptChecker,
    verify_receipt,
)

__all__ = [
    "FAILED",
    "NONE",
    "PENDING",
    "RecordCheck",
    "RunAudit",
    "audit_as_run",
    "audit_run",
    "check_item",
    "iso_ms",
]

FAILED, NONE, PENDING = "failed", "none", "pending"


def iso_ms(ms: int | None) -> str | None:
    """Milliseconds since the epoch as ``2026-01-02T03:04:05.678Z``."""
    if ms is None:
        return None
    return rfc3339_millis(from_epoch_ms(ms))


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordCheck:
    """One record's receipt, part by part; ``error`` says why it is not verified (None: it is).

    ``record_status``, ``checkpoint``, ``inclusion``: ``valid``, ``failed`` or ``not_checked``
    (an earlier part failed); ``witnesses``: ``not_checked`` or ``<n> cosigned``; ``anchor``:
    ``valid``, ``not_checked``, ``untrusted``, ``failed``, ``none`` or ``pending`` (TSA roots
    given, everything else verified, no anchor yet: not ``ok``, and not a failure either).
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


_SET = {f.name: getattr(RecordCheck, f.name).__set__ for f in fields(RecordCheck)}
(
    _SET_SOURCE, _SET_RECORD, _SET_DIGEST, _SET_INDEX, _SET_TREE_SIZE, _SET_LOGGED_AT_MS,
    _SET_RECORD_STATUS, _SET_CHECKPOINT, _SET_INCLUSION, _SET_WITNESSES, _SET_ANCHOR,
    _SET_ANCHORED_AT, _SET_DISCLOSED, _SET_ERROR,
) = (
    _SET[name] for name in (
        "source", "record", "digest", "index", "tree_size", "logged_at_ms", "record_status",
        "checkpoint", "inclusion", "witnesses", "anchor", "anchored_at", "disclosed", "error",
    )
)  # fmt: skip


def _new_check(
    source: str, record: DecisionRecord, digest: str, index: int, tree_size: int,
    logged_at_ms: int | None, record_status: str, checkpoint: str, inclusion: str,
    witnesses: str, anchor: str, anchored_at: datetime | None,
    disclosed: tuple[tuple[str, Any], ...], error: str | None,
) -> RecordCheck:  # fmt: skip
    """``RecordCheck(...)`` of these values (in field order): each slot set by its own setter,
    without the frozen ``__init__``'s ``object.__setattr__`` per field (it checks nothing: a
    ``RecordCheck`` is made from the values ``_parts`` found; an index makes one per receipt).
    ``test_audit_verify_fast`` holds it equal to the plain constructor."""
    check = object.__new__(RecordCheck)
    _SET_SOURCE(check, source)
    _SET_RECORD(check, record)
    _SET_DIGEST(check, digest)
    _SET_INDEX(check, index)
    _SET_TREE_SIZE(check, tree_size)
    _SET_LOGGED_AT_MS(check, logged_at_ms)
    _SET_RECORD_STATUS(check, record_status)
    _SET_CHECKPOINT(check, checkpoint)
    _SET_INCLUSION(check, inclusion)
    _SET_WITNESSES(check, witnesses)
    _SET_ANCHOR(check, anchor)
    _SET_ANCHORED_AT(check, anchored_at)
    _SET_DISCLOSED(check, disclosed)
    _SET_ERROR(check, error)
    return check


def _anchor_result(
    checker: ReceiptChecker, anchor: ReceiptAnchor, digest: bytes, where: str
) -> tuple[str, VerifiedTimestamp | None, str | None]:
    """(status, the verified token or None, detail) of the anchor at ``where`` over an
    imprint; a certificate that does not parse is named ``anchors[i].certificates[j]``."""
    if not checker.tsa_roots:
        return NOT_CHECKED, None, None
    found = checker.token(anchor, digest)
    if isinstance(found, TimestampError):
        return (UNTRUSTED if found.check == "chain" else FAILED), None, f"{anchor.tsa}: {found}"
    if isinstance(found, FormatError):
        return FAILED, None, f"{where} ({anchor.tsa}): {found}"
    return VALID, found, None


_BODIES: dict[str, bytes] = {}  # a checkpoint note's body, written once
_IMPRINTS: dict[bytes, bytes] = {}  # checkpoint body -> its imprint (receipts share a few)


def _imprint(body: bytes) -> bytes:
    found = _IMPRINTS.get(body)
    if found is None:
        if len(_IMPRINTS) >= 256:
            _IMPRINTS.clear()
        found = _IMPRINTS[body] = imprint_for_checkpoint_body(body)
    return found


# (checker, token, imprint, certificates) -> the token verified, for a token found valid and not
# in the future (``check_anchor_time``) by this checker: its trust inputs and ``now`` are fixed,
# so both verdicts hold again (its cache would give them, looked up again); only the
# ``anchor-before-leaf`` check, which depends on each leaf's time, is made for each receipt.
_ANCHORED: dict[tuple[ReceiptChecker, bytes, bytes, tuple[bytes, ...]], VerifiedTimestamp] = {}


def _anchor_status(
    receipt: Receipt, body: bytes, checker: ReceiptChecker, leaf_time: datetime
) -> tuple[str, datetime | None]:
    if not receipt.anchors:
        if checker.tsa_roots:
            raise AnchorsPendingError("anchors pending: the receipt carries no anchor yet")
        return NONE, None
    digest = _imprint(body)
    if len(receipt.anchors) == 1:  # the usual receipt: the loop below for one anchor
        anchor = receipt.anchors[0]
        key = (checker, anchor.token, digest, anchor.certificates)
        kept = _ANCHORED.get(key)
        if kept is not None:  # this token valid over this imprint and not in the future
            check_not_before_leaf(
                kept.gen_time, kept.accuracy, not_before=leaf_time, skew=checker.skew
            )  # fmt: skip
            return VALID, kept.gen_time
        status, stamp, detail = _anchor_result(checker, anchor, digest, "anchors[0]")
        if stamp is not None:
            checker.check_anchor_time(anchor, stamp, leaf_time)
            if len(_ANCHORED) >= 256:
                _ANCHORED.clear()
            _ANCHORED[key] = stamp
            return VALID, stamp.gen_time
        if status == FAILED:
            raise TimestampError("anchor", detail or "an anchor failed")
        if status == UNTRUSTED:
            raise TimestampError("anchor", "no anchor chains to a given TSA root")
        return NOT_CHECKED, None
    results = [
        _anchor_result(checker, a, digest, index_path("anchors", i))
        for i, a in enumerate(receipt.anchors)
    ]
    for anchor, (_, stamp, _) in zip(receipt.anchors, results, strict=True):
        if stamp is not None:
            checker.check_anchor_time(anchor, stamp, leaf_time)
    statuses = {status for status, _, _ in results}
    if FAILED in statuses:  # as ``verify_receipt``: even beside a valid anchor
        detail = next(d for s, _, d in results if s == FAILED)
        raise TimestampError("anchor", detail or "an anchor failed")
    times = [stamp.gen_time for _, stamp, _ in results if stamp is not None]
    if times:
        return VALID, min(times)
    if UNTRUSTED in statuses:
        raise TimestampError("anchor", "no anchor chains to a given TSA root")
    return NOT_CHECKED, None


def _parts(item: RunItem, digest: bytes, checker: ReceiptChecker, got: dict[str, Any]) -> None:
    """Check in order, recording in ``got`` how far we got; raises on the first failure."""
    receipt = item.receipt
    got["record_status"] = FAILED
    leaf = decode_leaf(receipt.index, receipt.leaf)  # its time is shown even if checks fail
    got["logged_at_ms"] = leaf.timestamp_ms
    if receipt.previous is not None:  # checked whole, then its cosignatures like the current's
        verify_receipt(
            receipt, checker.log_keys, tsa_roots=checker.tsa_roots, origin=checker.origin,
            now=checker.now, skew=checker.skew, cache=checker.cache,
        )  # fmt: skip
        checker.open_previous(receipt.previous.checkpoint)
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
    verified = _open_note(checker, receipt.checkpoint)
    checkpoint = verified.checkpoint
    if checkpoint.size != receipt.tree_size:
        raise VerificationError(f"tree_size {receipt.tree_size} != checkpoint {checkpoint.size}")
    got.update(checkpoint=VALID, inclusion=FAILED)
    if checker.witnesses:
        got["witnesses"] = f"{len(verified.cosignatures)} cosigned"
    verify_inclusion(  # once per shared subtree (ledger_client.receipts.inclusion)
        leaf.leaf_hash,  # RFC 6962 SHA-256(0x00 || leaf), hashed once by ``decode_leaf``
        receipt.index,
        checkpoint.size,
        receipt.inclusion_proof,
        checkpoint.root_hash,
    )
    got.update(inclusion=VALID, anchor=FAILED)
    leaf_time = datetime.fromtimestamp(leaf.timestamp_ms / 1000, UTC)
    body = _checkpoint_body(receipt.checkpoint, checkpoint)
    got["anchor"], got["anchored_at"] = _anchor_status(receipt, body, checker, leaf_time)
    if len(receipt.anchors) == 1 and got["anchor"] == VALID:
        _keep_quick(receipt, body, checker)


_OPENED: dict[tuple[ReceiptChecker, str], VerifiedCheckpoint] = {}


def _open_note(checker: ReceiptChecker, note: str) -> VerifiedCheckpoint:
    """``checker.open_note(note)``, kept for this checker: its trust inputs and ``now`` are
    fixed, so a note it opened opens again the same (its cache would give the same verdict,
    looked up again). A note that fails is not kept: it raises each time, as ``open_note``
    does."""
    key = (checker, note)
    found = _OPENED.get(key)
    if found is None:
        found = checker.open_note(note)
        if len(_OPENED) >= 256:
            _OPENED.clear()
        _OPENED[key] = found
    return found


def _checkpoint_body(note: str, checkpoint: Checkpoint) -> bytes:
    """The body of ``checkpoint``, opened from ``note`` (the note text names it: receipts
    sharing a checkpoint carry equal notes, found without hashing the checkpoint)."""
    body = _BODIES.get(note)
    if body is None:
        if len(_BODIES) >= 256:
            _BODIES.clear()
        body = _BODIES[note] = checkpoint.body_bytes()
    return body


def _accepted(item: RunItem, digest: bytes, checker: ReceiptChecker) -> RecordCheck | None:
    """``check_item`` for a receipt already accepted whole under these log keys, origin and
    TSA roots (``verify_run``, or the index's stored verdict for the same file): the parts that
    proved nothing new (digests, leaf, signature, size, inclusion) are taken as valid; the
    witnesses and anchors are read again (each checkpoint and token once, ``VerificationCache``)
    for what they show. None when it cannot be shown so (a previous checkpoint, disclosures, or
    a part that fails now, an anchor beside a valid one included): then ``check_item`` checks it
    in full."""
    receipt = item.receipt
    if receipt.previous is not None or receipt.disclosures:
        return None
    got: dict[str, Any] = {}
    try:
        leaf = decode_leaf(receipt.index, receipt.leaf)
        got["logged_at_ms"] = leaf.timestamp_ms
        verified = checker.open_note(receipt.checkpoint)
        if checker.witnesses:
            got["witnesses"] = f"{len(verified.cosignatures)} cosigned"
        leaf_time = datetime.fromtimestamp(leaf.timestamp_ms / 1000, UTC)
        body = _checkpoint_body(receipt.checkpoint, verified.checkpoint)
        got["anchor"], got["anchored_at"] = _anchor_status(receipt, body, checker, leaf_time)
    except (LedgerError, ValueError):
        return None
    got.update(record_status=VALID, checkpoint=VALID, inclusion=VALID)
    return _record_check(item, digest, got, None)


# (checker, checkpoint note, token, certificates) -> (the token's genTime, the latest leaf time
# in microseconds since the epoch its ``anchor-before-leaf`` check passes with a millisecond to
# spare): for a note this checker opened and a lone anchor that ``_parts`` found valid over its
# body. ``_quick_check`` takes a receipt of that note and anchor whose every other part checks
# as ``_parts`` checks it, on integers; anything else (a part that fails or is not known yet, a
# leaf time near the limit) is left to ``_parts``, which names the problem.
_QUICK: dict[tuple[ReceiptChecker, str, bytes, tuple[bytes, ...]], tuple[datetime, int]] = {}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_LATEST_MS = 253402300799999  # 9999-12-31T23:59:59.999Z: ``datetime`` reads every leaf time below


def _quick_check(item: RunItem, digest: bytes, checker: ReceiptChecker) -> RecordCheck | None:
    """``check_item`` of a receipt that verifies in full as its checkpoint's earlier receipts
    did (``_QUICK``; ``test_audit_verify_fast`` holds it equal to ``_parts``), else None."""
    receipt = item.receipt
    inner = receipt.record
    if (
        receipt.previous is not None
        or receipt.disclosures
        or (inner is not None and inner is not item.record)
        or digest != receipt.record_digest
    ):
        return None
    try:  # the leaf read by ``decode_leaf``, as ``_parts`` reads it (hashed there once)
        leaf = decode_leaf(receipt.index, receipt.leaf)
    except DataLossError:
        return None
    if leaf.record_digest != digest:
        return None
    note = receipt.checkpoint
    verified = _OPENED.get((checker, note))
    if verified is None or verified.checkpoint.size != receipt.tree_size:
        return None
    leaf_ms = leaf.timestamp_ms
    if leaf_ms > _LATEST_MS:
        return None
    anchors = receipt.anchors
    anchored: tuple[str, datetime | None]
    if not checker.tsa_roots:  # ``_anchor_status`` without roots: no token is checked
        anchored = (NOT_CHECKED, None) if anchors else (NONE, None)
    elif len(anchors) == 1:
        anchor = anchors[0]
        found = _QUICK.get((checker, note, anchor.token, anchor.certificates))
        if found is None or leaf_ms * 1000 + 1000 > found[1]:
            return None
        anchored = (VALID, found[0])
    else:
        return None
    checkpoint = verified.checkpoint
    try:
        verify_inclusion(
            leaf.leaf_hash, receipt.index, checkpoint.size, receipt.inclusion_proof,
            checkpoint.root_hash,
        )  # fmt: skip
    except (LedgerError, ValueError):
        return None
    return _new_check(
        item.source, item.record, digest.hex(), receipt.index, receipt.tree_size, leaf_ms,
        VALID, VALID, VALID,
        f"{len(verified.cosignatures)} cosigned" if checker.witnesses else NOT_CHECKED,
        anchored[0], anchored[1], (), None,
    )  # fmt: skip


def _keep_quick(receipt: Receipt, body: bytes, checker: ReceiptChecker) -> None:
    """After ``_parts`` found ``receipt`` valid: its lone anchor's verdict for ``_QUICK``."""
    anchor = receipt.anchors[0]
    stamp = _ANCHORED.get((checker, anchor.token, _imprint(body), anchor.certificates))
    if stamp is None:
        return
    slack = stamp.accuracy or timedelta(0)
    latest = stamp.gen_time + slack + checker.skew  # as ``check_not_before_leaf`` adds them
    if len(_QUICK) >= 256:
        _QUICK.clear()
    _QUICK[(checker, receipt.checkpoint, anchor.token, anchor.certificates)] = (
        stamp.gen_time, (latest - _EPOCH) // _MICROSECOND
    )  # fmt: skip


def check_item(item: RunItem, checker: ReceiptChecker, digest: bytes | None = None) -> RecordCheck:
    """Verify one record's receipt part by part (never raises on a failed check)."""
    digest = record_digest(item.record) if digest is None else digest
    return _quick_check(item, digest, checker) or _full_check(item, digest, checker)


def _full_check(item: RunItem, digest: bytes, checker: ReceiptChecker) -> RecordCheck:
    """``check_item`` part by part (``_parts``)."""
    got: dict[str, Any] = {}
    error = None
    try:
        _parts(item, digest, checker, got)
    except AnchorsPendingError as exc:
        got["anchor"], error = PENDING, str(exc)
    except (LedgerError, ValueError) as exc:
        error = str(exc) or type(exc).__name__
    return _record_check(item, digest, got, error)


def _record_check(
    item: RunItem, digest: bytes, got: dict[str, Any], error: str | None
) -> RecordCheck:
    receipt = item.receipt
    get = got.get
    return _new_check(
        item.source,
        item.record,
        digest.hex(),
        receipt.index,
        receipt.tree_size,
        get("logged_at_ms"),
        get("record_status", FAILED if error else NOT_CHECKED),
        get("checkpoint", NOT_CHECKED),
        get("inclusion", NOT_CHECKED),
        get("witnesses", NOT_CHECKED),
        get("anchor", NOT_CHECKED),
        get("anchored_at"),
        tuple((d.field_path, d.value) for d in receipt.disclosures) if receipt.disclosures else (),
        error,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunAudit:
    """One run: its records' checks in log order and the run-level problems."""

    run_id: str | None
    agent: str | None
    checks: tuple[RecordCheck, ...]
    problems: tuple[tuple[RunProblem, str | None], ...]
    external_parents: tuple[str, ...] = field(default=())
    stored: bool = False  # taken with the index's stored verdict (``audit_as_run``)

    @property
    def ok(self) -> bool:
        return not self.problems and all(c.ok for c in self.checks)

    @property
    def status(self) -> str:
        """``verified``, ``anchors_pending`` (the only thing missing is anchors the log has not
        issued yet) or ``invalid``: the verdict ``ledger-verify run`` gives."""
        if self.ok:
            return "verified"
        pending = all(c.ok or c.anchor == PENDING for c in self.checks)
        if pending and all(p.code == "anchors_pending" for p, _ in self.problems):
            return "anchors_pending"
        return "invalid"

    def problems_of(self, digest: str) -> list[RunProblem]:
        return [p for p, _ in self.problems if p.record_digest == digest]


def audit_run(
    items: Sequence[RunItem],
    checker: ReceiptChecker,
    *,
    run_problems: Sequence[tuple[RunProblem, str | None]] | None = None,
) -> RunAudit:
    """Every record checked (``check_item``), then the run checks (module docstring).

    ``run_problems``: the problems ``receipt_verify.verify_run`` found for these items (the
    report and the timeline pass them, so they show exactly what ``ledger-verify run``
    reports); without them the same checks are made here, sharing the checker's cache (the
    index)."""
    ordered = sorted(items, key=lambda item: item.receipt.index)
    digests = [bytes.fromhex(item.digest) for item in ordered]
    checks = [check_item(item, checker, d) for item, d in zip(ordered, digests, strict=True)]
    report = check_run([item.record for item in ordered], digests=[i.digest for i in ordered])
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
            code = "anchors_pending" if check.anchor == PENDING else "invalid_receipt"
            problems.append((_problem(code, check.error, check), check.source))
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


def _problem(code: str, message: str, check: RecordCheck) -> RunProblem:
    record = check.record
    return RunProblem(
        code=code,
        message=message,
        step=record.step,
        record_id=record.record_id,
        record_digest=check.digest,
    )


def audit_as_run(
    items: Sequence[RunItem], checker: ReceiptChecker, *, stored: bool = False
) -> RunAudit:
    """The run audited with the problems ``ledger-verify run`` reports (``verify_run`` under
    its trust inputs: no witnesses; sharing the cache, never a verdict under other inputs).

    Each receipt is checked once: ``verify_run``'s check, then for the receipts it accepted
    the parts shown (``_accepted``: witnesses and anchors, from the cache); a receipt it
    refused is checked part by part (``check_item``), to show which part failed.
    ``stored``: the auditor's index holds a passing verdict for this very file under these
    trust inputs (``audit.lineage_index.stored_files``): its receipts are taken as accepted
    (``RunAudit.stored``) unless one cannot be shown so or the run checks find a problem, and
    then the run is checked as above."""
    ordered = sorted(items, key=lambda item: item.receipt.index)
    digests = [bytes.fromhex(item.digest) for item in ordered]
    if stored:
        found = _stored_audit(ordered, digests, checker)
        if found is not None:
            return found
    as_run = ReceiptChecker(
        checker.log_keys, tsa_roots=checker.tsa_roots, origin=checker.origin, now=checker.now,
        cache=checker.cache,
    )  # fmt: skip
    verdict = verify_run(items, (), checker=as_run)
    refused = {
        p.record_digest
        for p, _ in verdict.problems
        if p.code in ("invalid_receipt", "anchors_pending")
    }
    checks = [
        (None if item.digest in refused else _accepted(item, digest, checker))
        or check_item(item, checker, digest)
        for item, digest in zip(ordered, digests, strict=True)
    ]
    return RunAudit(
        run_id=verdict.run.run_id,
        agent=ordered[0].record.agent if ordered else None,
        checks=tuple(checks),
        problems=tuple(verdict.problems),
        external_parents=verdict.run.external_parents,
    )


def _stored_audit(
    ordered: Sequence[RunItem], digests: Sequence[bytes], checker: ReceiptChecker
) -> RunAudit | None:
    """The run from its stored passing verdict (``audit_as_run``), or None."""
    checks = []
    for item, digest in zip(ordered, digests, strict=True):
        check = _accepted(item, digest, checker)
        if check is None:
            return None
        checks.append(check)
    report = check_run([item.record for item in ordered], digests=[d.hex() for d in digests])
    if _run_problems(checks, report):
        return None
    return RunAudit(
        run_id=report.run_id,
        agent=ordered[0].record.agent if ordered else None,
        checks=tuple(checks),
        problems=(),
        external_parents=report.external_parents,
        stored=True,
    )
