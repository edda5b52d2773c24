"""Verifying a whole run offline: every record's receipt, parents, and the run's closure.

Pure: no grpc, no rocksdict, no I/O. docs/design.md "Decision record (v1)": a run's records link by
``parent_digests`` and a ``run_closed`` record commits to the ordered list of (step, record
digest) of the whole run. ``verify_run`` checks, never raising on a bad run:

* every receipt (``ledger_client.receipts.verify``; one ``ReceiptChecker`` for the whole run, so
  a checkpoint or token many receipts share is verified once): ``invalid_receipt``, also for a
  receipt part that does not parse (a malformed token), so one bad receipt never hides the rest;
  with TSA roots, a receipt that verifies but carries no anchor yet is ``anchors_pending``;
* parents logged before their children, by receipt index: ``parent_logged_later``;
* ``ledger.records.runs.check_run`` over the records in log order: ``missing``, ``extra``,
  ``altered``, ``reordered``, ``after_close``, ``step_gap``, ``multiple_run_closed``, ... (its
  docstring).

The log order is the order the receipts prove; the order in which items are given does not
matter. ``RunVerdict.status`` is ``verified`` (no problem), ``anchors_pending`` (the only
problems are anchors not issued yet: upgrade the file after the next anchor; never OK, never
altered) or ``invalid``. Each record's digest is computed once. ``RunVerdict.timeline`` is one
``RecordResult`` per step (records given, records the closure lists but the presenter left
out, and gaps), each ``verified`` or carrying the named failures: the base for timelines and
reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cryptography import x509

from ledger.core.checkpoint import Verifier
from ledger.core.errors import AnchorsPendingError, FormatError, VerificationError
from ledger.core.jcs import Json
from ledger.core.timefmt import rfc3339
from ledger.records.decision import DecisionRecord, record_digest, record_digest_of_plain
from ledger.records.runs import RunProblem, RunReport, check_run
from ledger.timestamp.policy import DEFAULT_SKEW
from ledger_client.receipts.receipt import Receipt
from ledger_client.receipts.verify import ReceiptChecker, ReceiptReport

__all__ = [
    "ANCHORS_PENDING",
    "INVALID",
    "VERIFIED",
    "RecordResult",
    "RunItem",
    "RunVerdict",
    "verify_run",
]

VERIFIED, ANCHORS_PENDING, INVALID = "verified", "anchors_pending", "invalid"


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else rfc3339(moment)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunItem:
    """One record of a run with its receipt; ``source`` names where it came from (a file)."""

    source: str
    record: DecisionRecord
    receipt: Receipt
    digest: str = field(init=False)  # hex record digest, computed once

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", record_digest(self.record).hex())

    @classmethod
    def read(
        cls, source: str, record: DecisionRecord, receipt: Receipt, plain: Json, *, exact: bool
    ) -> RunItem:
        """The item of a record just read from ``plain`` (``DecisionRecord.from_json_obj(plain,
        checked=True)`` gave ``record``): its digest is SHA-256 of ``plain``'s RFC 8785 bytes,
        the bytes of ``record.to_json_obj()`` (reading and writing a record are exact inverses,
        ``ledger.records.decision``; ``record_digest_of_plain``), without building them again.
        ``exact``: ``plain`` is inside what ``ledger.core.jcs.loads_exact`` read exactly."""
        item = object.__new__(cls)
        _SET_SOURCE(item, source)  # each slot's own setter (what ``object.__setattr__`` finds)
        _SET_RECORD(item, record)
        _SET_RECEIPT(item, receipt)
        _SET_DIGEST(item, record_digest_of_plain(plain, exact=exact).hex())
        return item


_SET_SOURCE, _SET_RECORD, _SET_RECEIPT, _SET_DIGEST = (
    getattr(RunItem, name).__set__ for name in ("source", "record", "receipt", "digest")
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordResult:
    """One step of the run as verified: a given record, a listed-but-absent one, or a gap.

    ``kind`` is None when no record was given for the step; ``problems`` are the codes of the
    named failures concerning it (empty: ``verified``).
    """

    step: int | None
    kind: str | None
    record_id: str | None
    record_digest: str | None
    source: str | None
    index: int | None  # log index, from the verified receipt
    logged_at_ms: int | None
    anchored_at: datetime | None
    problems: tuple[str, ...]

    @property
    def verified(self) -> bool:
        return self.kind is not None and not self.problems

    @property
    def status(self) -> str:
        """``verified`` or the first named failure."""
        return VERIFIED if self.verified else (self.problems or ("missing",))[0]

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "step": self.step,
            "kind": self.kind,
            "record_id": self.record_id,
            "record_digest": self.record_digest,
            "source": self.source,
            "index": self.index,
            "logged_at_ms": self.logged_at_ms,
            "anchored_at": _iso(self.anchored_at),
            "status": self.status,
            "problems": list(self.problems),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RunVerdict:
    """``verify_run``'s answer: every problem with the source of its record (None: absent)."""

    run: RunReport  # ``check_run`` over the records in log order
    problems: tuple[tuple[RunProblem, str | None], ...]
    records: int
    receipts_valid: int
    anchors_checked: bool
    timeline: tuple[RecordResult, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def anchors_pending(self) -> int:
        """Records whose receipt verified but carries no anchor yet (TSA roots given)."""
        return sum(1 for p, _ in self.problems if p.code == ANCHORS_PENDING)

    @property
    def status(self) -> str:
        """``verified``, ``anchors_pending`` (nothing else wrong) or ``invalid``."""
        if not self.problems:
            return VERIFIED
        return ANCHORS_PENDING if self.anchors_pending == len(self.problems) else INVALID

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "status": self.status,
            "anchors_pending": self.anchors_pending,
            "run_id": self.run.run_id,
            "records": self.records,
            "receipts_valid": self.receipts_valid,
            "anchors_checked": self.anchors_checked,
            "closed_by": self.run.closed_by,
            "problems": [{**p.to_json_obj(), "source": source} for p, source in self.problems],
            "timeline": [r.to_json_obj() for r in self.timeline],
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


def _timeline(
    ordered: Sequence[RunItem],
    reports: dict[str, ReceiptReport],
    problems: Sequence[tuple[RunProblem, str | None]],
) -> tuple[RecordResult, ...]:
    by_digest: dict[str, list[str]] = {}
    absent: dict[tuple[int | None, str | None], list[str]] = {}
    given = {item.digest for item in ordered}
    for problem, _ in problems:
        if problem.record_digest in given:
            by_digest.setdefault(problem.record_digest or "", []).append(problem.code)
        elif problem.step is not None:
            absent.setdefault((problem.step, problem.record_digest), []).append(problem.code)
    out = [
        _result_of(item, reports.get(item.digest), by_digest.get(item.digest, ()))
        for item in ordered
    ]
    out += [_absent_result(step, digest, codes) for (step, digest), codes in absent.items()]
    return tuple(sorted(out, key=lambda r: (r.step if r.step is not None else -1, r.index or 0)))


def _absent_result(step: int | None, digest: str | None, codes: Sequence[str]) -> RecordResult:
    return RecordResult(
        step=step, kind=None, record_id=None, record_digest=digest, source=None, index=None,
        logged_at_ms=None, anchored_at=None, problems=tuple(codes),
    )  # fmt: skip


def _result_of(item: RunItem, report: ReceiptReport | None, codes: Sequence[str]) -> RecordResult:
    return RecordResult(
        step=item.record.step,
        kind=item.record.kind,
        record_id=item.record.record_id,
        record_digest=item.digest,
        source=item.source,
        index=None if report is None else report.index,
        logged_at_ms=None if report is None else report.logged_at_ms,
        anchored_at=None if report is None else report.anchored_at,
        problems=tuple(codes),
    )


def verify_run(
    items: Sequence[RunItem],
    log_keys: Sequence[Verifier],
    *,
    tsa_roots: Sequence[x509.Certificate] | None = None,
    origin: str | None = None,
    now: datetime | None = None,
    skew: timedelta = DEFAULT_SKEW,
    witnesses: Sequence[Verifier] = (),
    min_witnesses: int = 0,
    checker: ReceiptChecker | None = None,
) -> RunVerdict:
    """Check a run (module docstring); never raises on a bad run or a bad receipt.

    ``checker`` (optional) carries keys, roots, origin, ``now``, the witness quorum and its
    caches across runs; when given, the other settings are its own.
    """
    if checker is None:
        checker = ReceiptChecker(
            log_keys,
            tsa_roots=tsa_roots,
            origin=origin,
            now=now,
            skew=skew,
            witnesses=witnesses,
            min_witnesses=min_witnesses,
        )
    ordered = sorted(items, key=lambda item: item.receipt.index)
    problems: list[tuple[RunProblem, str | None]] = []
    pending: list[tuple[RunProblem, str | None]] = []
    reports: dict[str, ReceiptReport] = {}
    for item in ordered:
        try:
            reports[item.digest] = checker.verify(
                item.receipt, record=item.record, record_digest_known=bytes.fromhex(item.digest)
            )
        except AnchorsPendingError as exc:
            if isinstance(exc.report, ReceiptReport):
                reports[item.digest] = exc.report  # verified but for the anchor: index, time
            pending.append(_item_problem(ANCHORS_PENDING, str(exc), item))
        except (VerificationError, FormatError) as exc:
            problems.append(_item_problem("invalid_receipt", str(exc), item))
    invalid = len(problems)
    problems += pending
    problems += _parents_logged_later(ordered)
    report = check_run([item.record for item in ordered], digests=[i.digest for i in ordered])
    source = {item.digest: item.source for item in ordered}
    problems += [(p, source.get(p.record_digest or "")) for p in report.problems]
    return RunVerdict(
        run=report,
        problems=tuple(problems),
        records=len(items),
        receipts_valid=len(items) - invalid,
        anchors_checked=bool(checker.tsa_roots),
        timeline=_timeline(ordered, reports, problems),
    )
