"""Verifying receipts (``ledger_client.receipt``) offline, part by part, and whole runs.

Pure: no grpc, no rocksdict, no I/O. Each part is checked with the project's core: records and
disclosures (``ledger.records``: RFC 8785 digest, salted commitments), the v1 leaf
(``ledger.types``), the signed checkpoint (C2SP signed-note / tlog-checkpoint,
``ledger.checkpoint.open_checkpoint``), the inclusion and consistency proofs (RFC 9162 §2.1.3 and
§2.1.4, ``ledger.merkle``) and the RFC 3161 anchors over SHA-256 of the checkpoint body
(``ledger.timestamp.verify_token``).

Authenticated (``verify_receipt`` rejects any change): record digest, record, disclosures,
leaf, index, tree size, every proof hash, both checkpoints' bodies and the log's signatures on
them, and each anchor token's signed content when TSA roots are given. Not authenticated, by
the formats themselves: signature lines of keys the verifier does not know (c2sp signed-note
says to ignore them), an anchor's ``tsa`` label and ``certificates`` (helpers: the token's own
signature and a configured root decide), and every anchor when no TSA root is given (reported
``not_checked``, never valid). With roots, an anchor that chains to none of them is reported
``untrusted`` and ignored; any other anchor failure rejects the receipt, and at least one
anchor must verify.

``verify_run`` checks a run of records with their receipts: each receipt, then parents logged
before children (by receipt index) and ``ledger.runs.check_run`` in log order. The log order is
the order the receipts prove; the order in which items are given does not matter.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509

from ledger import merkle
from ledger.checkpoint import Checkpoint, Cosignature, Verifier, open_checkpoint
from ledger.errors import (
    BoundsError,
    FormatError,
    OriginMismatchError,
    RecordError,
    StorageError,
    TimestampError,
    VerificationError,
)
from ledger.jcs import Json, index_path
from ledger.records import DecisionRecord, record_digest, verify_disclosure
from ledger.runs import RunProblem, RunReport, check_run
from ledger.timestamp import imprint_for_checkpoint_body, verify_token
from ledger.types import decode_leaf
from ledger_client.receipt import MalformedReceiptError, Receipt, ReceiptAnchor

__all__ = [
    "NOT_CHECKED",
    "UNTRUSTED",
    "VALID",
    "AnchorCheck",
    "ReceiptReport",
    "RunItem",
    "RunVerdict",
    "verify_receipt",
    "verify_run",
]

VALID, NOT_CHECKED, UNTRUSTED = "valid", "not_checked", "untrusted"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _iso(moment: datetime | None) -> str | None:
    """``2026-01-02T03:04:05.678Z`` (UTC), or None."""
    return None if moment is None else moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class AnchorCheck:
    """What one anchor showed: ``status`` is ``valid``, ``not_checked`` or ``untrusted``."""

    tsa: str  # the receipt's label: unauthenticated
    checkpoint_size: int
    status: str
    gen_time: datetime | None = None
    signer: str | None = None  # the verified signer certificate's subject (RFC 4514)
    tsa_name: str | None = None  # TSTInfo.tsa, when present
    detail: str | None = None

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "tsa": self.tsa,
            "checkpoint_size": self.checkpoint_size,
            "status": self.status,
            "gen_time": _iso(self.gen_time),
            "signer": self.signer,
            "tsa_name": self.tsa_name,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiptReport:
    """What a receipt proves once ``verify_receipt`` accepted it."""

    record_digest: bytes
    index: int
    tree_size: int
    origin: str
    root_hash: bytes
    logged_at_ms: int  # the log's receive time, from the leaf
    signed_by: tuple[str, ...]
    cosigned_by: tuple[Cosignature, ...]  # valid lines of the witnesses given (tlog-cosignature)
    record: DecisionRecord | None
    disclosed: tuple[str, ...]
    anchors_checked: bool
    anchors: tuple[AnchorCheck, ...]
    previous_size: int | None

    @property
    def logged_at(self) -> datetime:
        """The log's receive time (the leaf's milliseconds), UTC."""
        seconds, millis = divmod(self.logged_at_ms, 1000)
        return datetime.fromtimestamp(seconds, UTC) + timedelta(milliseconds=millis)

    @property
    def anchored(self) -> AnchorCheck | None:
        """The earliest valid anchor: the record existed by its genTime."""
        valid = [a for a in self.anchors if a.status == VALID and a.gen_time is not None]
        return min(valid, key=lambda a: a.gen_time or self.logged_at, default=None)

    @property
    def anchored_at(self) -> datetime | None:
        """genTime of the earliest valid anchor (None: no anchor was checked and valid)."""
        first = self.anchored
        return None if first is None else first.gen_time

    def to_json_obj(self) -> dict[str, Json]:
        first = self.anchored
        return {
            "record_digest": self.record_digest.hex(),
            "index": self.index,
            "tree_size": self.tree_size,
            "origin": self.origin,
            "root_hash": _b64(self.root_hash),
            "logged_at": _iso(self.logged_at),
            "logged_at_ms": self.logged_at_ms,
            "signed_by": list(self.signed_by),
            "cosigned_by": [
                {"witness": f"{c.name}+{c.key_id.hex()}", "time": c.timestamp}
                for c in self.cosigned_by
            ],
            "record": _record_summary(self.record),
            "disclosed": list(self.disclosed),
            "anchors_checked": self.anchors_checked,
            "anchors": [a.to_json_obj() for a in self.anchors],
            "anchored_at": _iso(self.anchored_at),
            "anchored_by": None if first is None else first.signer,
            "previous_size": self.previous_size,
        }


def _record_summary(record: DecisionRecord | None) -> Json:
    if record is None:
        return None
    return {
        "kind": record.kind,
        "run_id": record.run_id,
        "step": record.step,
        "record_id": record.record_id,
    }


def _check_record(receipt: Receipt, given: DecisionRecord | None) -> DecisionRecord | None:
    for where, record in (("receipt's", receipt.record), ("given", given)):
        if record is not None and record_digest(record) != receipt.record_digest:
            raise RecordError(
                f"the {where} record hashes to {record_digest(record).hex()}, "
                f"the receipt is for {receipt.record_digest.hex()}"
            )
    record = given if given is not None else receipt.record
    for disclosure in receipt.disclosures:
        assert record is not None  # Receipt refuses disclosures without a record
        verify_disclosure(record, disclosure, receipt.record_digest)
    return record


def _check_leaf(receipt: Receipt) -> int:
    try:
        entry = decode_leaf(receipt.index, receipt.leaf)
    except StorageError as exc:
        raise RecordError(f"leaf: {exc}") from None
    if entry.record_digest != receipt.record_digest:
        raise RecordError(
            f"leaf {receipt.index} logs record digest {entry.record_digest.hex()}, "
            f"the receipt is for {receipt.record_digest.hex()}"
        )
    return entry.timestamp_ms


def _intermediates(anchor: ReceiptAnchor, where: str) -> list[x509.Certificate]:
    try:
        return [x509.load_der_x509_certificate(der) for der in anchor.certificates]
    except ValueError as exc:
        raise MalformedReceiptError(f"{where}.certificates", f"not DER: {exc}") from None


def _check_anchor(
    anchor: ReceiptAnchor, checkpoint: Checkpoint, roots: Sequence[x509.Certificate], where: str
) -> AnchorCheck:
    digest = imprint_for_checkpoint_body(checkpoint.body_bytes())
    common: dict[str, Any] = {"tsa": anchor.tsa, "checkpoint_size": checkpoint.size}
    try:
        stamp = verify_token(
            anchor.token, digest=digest, roots=roots, intermediates=_intermediates(anchor, where)
        )
    except TimestampError as exc:
        message = str(exc).removeprefix(f"{exc.check}: ")
        if exc.check == "chain":
            return AnchorCheck(status=UNTRUSTED, detail=message, **common)
        raise TimestampError(exc.check, f"{where} ({anchor.tsa}): {message}") from None
    except FormatError as exc:
        raise MalformedReceiptError(f"{where}.token", str(exc)) from None
    return AnchorCheck(
        status=VALID,
        gen_time=stamp.gen_time,
        signer=stamp.signer_subject,
        tsa_name=stamp.tsa_name,
        **common,
    )


def _check_anchors(
    groups: Sequence[tuple[str, Sequence[ReceiptAnchor], Checkpoint]],
    roots: Sequence[x509.Certificate] | None,
) -> tuple[AnchorCheck, ...]:
    """Every anchor over its checkpoint; with roots, at least one must be valid."""
    checks = []
    for where, anchors, checkpoint in groups:
        for i, anchor in enumerate(anchors):
            if not roots:
                checks.append(
                    AnchorCheck(tsa=anchor.tsa, checkpoint_size=checkpoint.size, status=NOT_CHECKED)
                )
            else:
                checks.append(_check_anchor(anchor, checkpoint, roots, index_path(where, i)))
    if roots and not any(c.status == VALID for c in checks):
        why = "the receipt carries no anchor" if not checks else "none chains to a given root"
        raise TimestampError("anchor", f"no anchor verifies against the given TSA roots: {why}")
    return tuple(checks)


def _check_previous(
    receipt: Receipt, current: Checkpoint, keys: Sequence[Verifier], origin: str | None
) -> Checkpoint | None:
    """The old checkpoint is signed, covers the entry, and the current one extends it."""
    previous = receipt.previous
    if previous is None:
        return None
    old = open_checkpoint(previous.checkpoint, keys, origin=origin).checkpoint
    if old.origin != current.origin:
        raise OriginMismatchError(
            f"previous checkpoint origin {old.origin!r} != current {current.origin!r}"
        )
    if receipt.index >= old.size:
        raise BoundsError(f"previous checkpoint of size {old.size} does not hold {receipt.index}")
    merkle.verify_consistency(
        old.size, current.size, old.root_hash, current.root_hash, previous.consistency_proof
    )
    return old


def verify_receipt(
    receipt: Receipt,
    log_keys: Sequence[Verifier],
    *,
    tsa_roots: Sequence[x509.Certificate] | None = None,
    origin: str | None = None,
    record: DecisionRecord | None = None,
    witnesses: Sequence[Verifier] = (),
    min_witnesses: int = 0,
) -> ReceiptReport:
    """Check every part of ``receipt``; raise a ``VerificationError`` at the first failure.

    In order: the records (the receipt's and ``record``) hash to the record digest and the
    disclosures open their commitments; the v1 leaf logs that digest; the checkpoint is signed
    by one of ``log_keys`` (its origin is ``origin`` when given) and its size is ``tree_size``;
    the inclusion proof leads from the leaf hash at ``index`` to its root; the previous
    checkpoint (if any) is signed, covers ``index`` and is consistent with the current one; the
    anchors verify against ``tsa_roots`` (none given: reported ``not_checked``). At least
    ``min_witnesses`` of ``witnesses`` (tlog-cosignature keys) must have cosigned the checkpoint
    (``WitnessError``); the previous checkpoint needs only the log's signature.
    """
    used = _check_record(receipt, record)
    logged_ms = _check_leaf(receipt)
    verified = open_checkpoint(
        receipt.checkpoint,
        log_keys,
        origin=origin,
        witnesses=witnesses,
        min_witnesses=min_witnesses,
    )
    checkpoint = verified.checkpoint
    if checkpoint.size != receipt.tree_size:
        raise BoundsError(f"tree_size {receipt.tree_size} != checkpoint size {checkpoint.size}")
    leaf_hash = merkle.leaf_hash(receipt.leaf)
    merkle.verify_inclusion(
        leaf_hash, receipt.index, checkpoint.size, receipt.inclusion_proof, checkpoint.root_hash
    )
    old = _check_previous(receipt, checkpoint, log_keys, origin)
    groups = [("anchors", receipt.anchors, checkpoint)]
    if old is not None and receipt.previous is not None:
        groups.append(("previous.anchors", receipt.previous.anchors, old))
    return ReceiptReport(
        record_digest=receipt.record_digest,
        index=receipt.index,
        tree_size=checkpoint.size,
        origin=checkpoint.origin,
        root_hash=checkpoint.root_hash,
        logged_at_ms=logged_ms,
        signed_by=tuple(f"{s.name}+{s.key_id.hex()}" for s in verified.log_signatures),
        cosigned_by=verified.cosignatures,
        record=used,
        disclosed=tuple(d.field_path for d in receipt.disclosures),
        anchors_checked=bool(tsa_roots),
        anchors=_check_anchors(groups, tsa_roots),
        previous_size=None if old is None else old.size,
    )


# --- runs ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunItem:
    """One record of a run with its receipt; ``source`` names where it came from (a file)."""

    source: str
    record: DecisionRecord
    receipt: Receipt

    @property
    def digest(self) -> str:
        return record_digest(self.record).hex()


@dataclass(frozen=True, slots=True, kw_only=True)
class RunVerdict:
    """``verify_run``'s answer: every problem with the source of its record (None: absent)."""

    run: RunReport  # ``check_run`` over the records in log order
    problems: tuple[tuple[RunProblem, str | None], ...]
    records: int
    receipts_valid: int
    anchors_checked: bool

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "run_id": self.run.run_id,
            "records": self.records,
            "receipts_valid": self.receipts_valid,
            "anchors_checked": self.anchors_checked,
            "closed_by": self.run.closed_by,
            "problems": [{**p.to_json_obj(), "source": source} for p, source in self.problems],
        }


def _item_problem(code: str, message: str, item: RunItem) -> tuple[RunProblem, str]:
    record = item.record
    problem = RunProblem(
        code=code, message=message, step=record.step, record_id=record.record_id,
        record_digest=item.digest,
    )  # fmt: skip
    return problem, item.source


def _parents_logged_later(ordered: Sequence[RunItem]) -> list[tuple[RunProblem, str]]:
    """A parent that is present must have a lower log index than its child."""
    index_of = {item.digest: item.receipt.index for item in ordered}
    problems = []
    for item in ordered:
        for parent in item.record.parent_digests:
            logged = index_of.get(parent)
            if logged is not None and logged >= item.receipt.index:
                message = f"parent {parent} has log index {logged}, not below {item.receipt.index}"
                problems.append(_item_problem("parent_logged_later", message, item))
    return problems


def verify_run(
    items: Sequence[RunItem],
    log_keys: Sequence[Verifier],
    *,
    tsa_roots: Sequence[x509.Certificate] | None = None,
    origin: str | None = None,
    witnesses: Sequence[Verifier] = (),
    min_witnesses: int = 0,
) -> RunVerdict:
    """Check a run: every receipt (``invalid_receipt``), parents logged earlier
    (``parent_logged_later``), and ``check_run`` over the records in log order (receipt index):
    ``missing``, ``extra``, ``altered``, ``reordered``, ... Never raises on a bad run; malformed
    input (``FormatError``) still raises."""
    ordered = sorted(items, key=lambda item: item.receipt.index)
    problems: list[tuple[RunProblem, str | None]] = []
    for item in ordered:
        try:
            verify_receipt(
                item.receipt,
                log_keys,
                tsa_roots=tsa_roots,
                origin=origin,
                record=item.record,
                witnesses=witnesses,
                min_witnesses=min_witnesses,
            )
        except VerificationError as exc:
            problems.append(_item_problem("invalid_receipt", str(exc), item))
    invalid = len(problems)
    problems += _parents_logged_later(ordered)
    report = check_run([item.record for item in ordered])
    source = {item.digest: item.source for item in ordered}
    problems += [(p, source.get(p.record_digest or "")) for p in report.problems]
    return RunVerdict(
        run=report,
        problems=tuple(problems),
        records=len(items),
        receipts_valid=len(items) - invalid,
        anchors_checked=bool(tsa_roots),
    )
