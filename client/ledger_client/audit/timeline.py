"""A run's timeline: one row per record, in log order, with what was verified and what not.

Pure: no I/O. docs/design.md "Decision record (v1)" and "Receipts". A row holds the record's step,
the agent's claimed time beside the log's time (from the leaf) and their difference, kind, a
label (the tool, constraint, memory key, ... ``label_of``), its parents (as steps of this run, or
``ext:<digest prefix>`` for a record of another run; a parent the record labels as inferred is
shown ``(inferred)``), the log index, and the record's verdict (``ledger_client.audit.verdicts``:
receipt, run problems naming it, time, lineage): ``yes``, ``yes`` with its warnings (``late by
Δ``, ``inputs not linked``), or ``NO`` and why. Used by ``ledger-verify run --timeline`` (text
and ``--json``), ``ledger-verify report`` (HTML) and the index (``ledger_client.audit.index``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from cryptography import x509

from ledger.core.checkpoint import Verifier
from ledger.core.errors import RecordError
from ledger.core.jcs import Json
from ledger.records.commitments import Commitment, Kept, check_disclosure_in
from ledger.records.decision import DecisionRecord
from ledger.records.links import inferred_parents
from ledger.records.runs import RunProblem
from ledger_client.audit.decision import Decision, decision_of, outcome_status
from ledger_client.audit.verdicts import (
    NOT_CHECKED,
    TimePolicy,
    Verdict,
    chain_position,
    record_verdict,
    time_json,
    time_text,
)
from ledger_client.audit.verify import RecordCheck, RunAudit, audit_run, iso_ms
from ledger_client.receipts.cache import VerificationCache
from ledger_client.receipts.run_verify import RunItem, verify_run
from ledger_client.receipts.verify import ReceiptChecker

__all__ = [
    "TimelineRow",
    "format_timeline",
    "label_of",
    "opened_fields",
    "outcome_of",
    "run_timeline",
    "timeline",
    "trust_of",
]


def label_of(record: DecisionRecord) -> str:
    """The tool or decision a record is about, in a few words."""
    p: Any = record.payload
    kind = record.kind
    if kind in ("tool_call", "parameter_construction"):
        return str(p.tool)
    if kind == "constraint_check":
        return f"{p.constraint_id} {'passed' if p.passed else 'FAILED'}"
    if kind == "memory_write":
        return f"{p.key} <- {p.source}"
    if kind == "handoff":
        return f"to {p.to_agent}"
    if kind == "tool_selection":
        return f"selected {record.selected or '-'}"
    if kind == "termination":
        return str(p.reason)
    if kind in ("plan", "run_closed"):
        return f"{len(p.steps)} {'planned steps' if kind == 'plan' else 'steps listed'}"
    outcome = record.actual_outcome
    if isinstance(outcome, dict) and "error" in outcome:
        return f"error {outcome['error']}"
    return ""


def trust_of(record: DecisionRecord) -> str | None:
    """A ``memory_write``'s trust label (None for other kinds)."""
    return getattr(record.payload, "trust_label", None) if record.kind == "memory_write" else None


def outcome_of(record: DecisionRecord) -> str | None:
    """The outcome status (``decision.outcome_status``): ``error:<type>`` for a failed
    decision, ``passed``/``failed`` for a constraint check, ``met``/``not met``, ``committed``,
    an outcome's ``status`` or short outcome string (``schema_mismatch``)."""
    if record.actual_outcome is None and record.kind != "constraint_check":
        return None  # no outcome recorded (``outcome_status`` says so too)
    return outcome_status(record, _json(record.expected_outcome), _json(record.actual_outcome))


def _json(value: object) -> Json:
    """A record value as JSON (commitments as their record form)."""
    if isinstance(value, Commitment):
        return value.to_json_obj()  # type: ignore[return-value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return value  # type: ignore[return-value]


def opened_fields(
    record_obj: Json, disclosed: Sequence[tuple[str, Any]], private: Sequence[Kept] = ()
) -> dict[str, Json]:
    """Field path -> value opened by the receipt (``disclosed``, already checked) and by the
    auditor's disclosures file (``private``; each checked against the record, a mismatch
    left closed)."""
    opened: dict[str, Json] = {path: value for path, value in disclosed}
    for item in private:
        try:
            check_disclosure_in(record_obj, item)
        except RecordError:
            continue
        opened[item.field_path] = item.value
    return opened


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineRow:
    """One record of the timeline (module docstring)."""

    check: RecordCheck
    parents: tuple[tuple[str, int | None], ...]  # (digest, step in this run or None: external)
    problems: tuple[str, ...]  # "code: message" of run problems naming this record
    verdict: Verdict
    inferred: tuple[str, ...] = ()  # parents the record labels as inferred (content match)
    opened: Mapping[str, Json] | None = None  # field path -> value its disclosures open

    @property
    def decision(self) -> Decision:
        """What the record decided (``audit.decision``), committed values opened by
        ``opened``."""
        return decision_of(self.check.record, self.opened)

    @property
    def verified(self) -> bool:
        return self.verdict.ok

    @property
    def why_not(self) -> str | None:
        failed = [c.text for c in self.verdict.checks if c.status in ("failed", "pending")]
        return "; ".join(failed) or None

    @property
    def warnings(self) -> list[str]:
        return [c.message or c.name for c in self.verdict.of("warning")]

    def parent_text(self) -> str:
        return ", ".join(
            (f"#{step}" if step is not None else f"ext:{digest[:12]}")
            + (" (inferred)" if digest in self.inferred else "")
            for digest, step in self.parents
        )

    def verdict_text(self) -> str:
        """``yes``, ``yes (warning: ...)`` or ``NO: why``."""
        if not self.verified:
            return f"NO: {self.why_not}"
        warned = self.warnings
        return f"yes (warning: {'; '.join(warned)})" if warned else "yes"

    def to_json_obj(self) -> dict[str, Json]:
        c, record = self.check, self.check.record
        times = time_json(record, c.logged_at_ms)
        return {
            "step": record.step,
            "time": record.time,
            "logged_at": iso_ms(c.logged_at_ms),
            "time_difference_ms": times["difference_ms"],
            "kind": record.kind,
            "label": label_of(record),
            "trust_label": trust_of(record),
            "outcome": outcome_of(record),
            "parents": [
                {
                    "digest": d,
                    "step": s,
                    "derived_by": "content-match" if d in self.inferred else "declared",
                }
                for d, s in self.parents
            ],
            "index": c.index,
            "record_digest": c.digest,
            "source": c.source,
            "verified": self.verified,
            "why_not": self.why_not,
            "verdict": self.verdict.to_json_obj(),
            "checks": {
                "record": c.record_status,
                "checkpoint": c.checkpoint,
                "inclusion": c.inclusion,
                "witnesses": c.witnesses,
                "anchor": c.anchor,
                "anchored_at": c.anchored_at_text,
            },
            "disclosed": [{"field_path": p, "value": v} for p, v in c.disclosed],
            "decision": self.decision.to_json_obj(),
        }


def timeline(
    audit: RunAudit,
    policy: TimePolicy | None = None,
    private: Mapping[str, Sequence[Kept]] | None = None,
) -> list[TimelineRow]:
    """The rows of one audited run, in log order (``policy``: the auditor's time policy;
    ``private``: the auditor's disclosures by record digest, opening committed values)."""
    policy = TimePolicy() if policy is None else policy
    private = private or {}
    step_of = {c.digest: c.record.step for c in audit.checks}
    step = step_of.get
    rows = []
    for check in audit.checks:
        problems = (
            tuple(
                f"{p.code}: {p.message}"
                for p in audit.problems_of(check.digest)
                if p.code != "invalid_receipt"
            )
            if audit.problems
            else ()
        )
        parents = tuple([(d, step(d)) for d in check.record.parent_digests])
        found = inferred_parents(check.record)
        verdict = record_verdict(check, problems, policy, step_of, found)
        inferred = tuple(found)
        extra = private.get(check.digest, ())
        opened = (
            opened_fields(check.record.to_json_obj(), check.disclosed, extra)
            if extra or check.disclosed
            else None
        )
        rows.append(_new_row(check, parents, problems, verdict, inferred, opened))
    return rows


_SET = {f.name: getattr(TimelineRow, f.name).__set__ for f in fields(TimelineRow)}
_SET_CHECK, _SET_PARENTS, _SET_PROBLEMS, _SET_VERDICT, _SET_INFERRED, _SET_OPENED = (
    _SET[name] for name in ("check", "parents", "problems", "verdict", "inferred", "opened")
)


def _new_row(
    check: RecordCheck,
    parents: tuple[tuple[str, int | None], ...],
    problems: tuple[str, ...],
    verdict: Verdict,
    inferred: tuple[str, ...],
    opened: Mapping[str, Json] | None,
) -> TimelineRow:
    """``TimelineRow(...)`` of these values, each slot set by its own setter (the frozen
    ``__init__`` checks nothing; a timeline makes one row per record):
    ``test_audit_verify_fast`` holds it equal to the constructor."""
    row = object.__new__(TimelineRow)
    _SET_CHECK(row, check)
    _SET_PARENTS(row, parents)
    _SET_PROBLEMS(row, problems)
    _SET_VERDICT(row, verdict)
    _SET_INFERRED(row, inferred)
    _SET_OPENED(row, opened)
    return row


_HEAD = (
    "step", "time", "logged", "log-agent", "kind", "tool/decision", "parents", "index",
    "key/chain", "verified",
)  # fmt: skip


def key_chain_text(row: TimelineRow) -> str:
    """The agent key that signed the record (``unsigned``) and, on a run's first record, its
    chain position and chain verdict (``chain 1a2b3c4d #3 ok``)."""
    record = row.check.record
    signed = "unsigned" if record.signature is None else record.signature.key
    chain = row.verdict.named("chain")
    where = chain_position(record)
    if where is None:
        return signed
    return f"{signed}, {where} {chain.status if chain is not None else NOT_CHECKED}"


def format_timeline(rows: list[TimelineRow]) -> list[str]:
    """The rows as an aligned text table (the last column: ``yes``, ``yes (warning: ...)`` or
    ``NO: why``); ``log-agent`` is the leaf time minus the claimed time."""
    table = [_HEAD] + [
        (
            str(r.check.record.step),
            r.check.record.time,
            iso_ms(r.check.logged_at_ms) or "?",
            time_text(r.check.record, r.check.logged_at_ms),
            r.check.record.kind,
            label_of(r.check.record)[:40],
            r.parent_text() or "-",
            str(r.check.index),
            key_chain_text(r),
            r.verdict_text(),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(_HEAD) - 1)]
    out = []
    for n, row in enumerate(table):
        cells = zip(row[:-1], widths, strict=True)
        out.append("  ".join(cell.ljust(w) for cell, w in cells) + "  " + row[-1])
        if n:
            out += [f"      {line}" for line in rows[n - 1].decision.lines()]
    return out


def run_timeline(
    items: Sequence[RunItem],
    verifiers: Sequence[Verifier],
    roots: Sequence[x509.Certificate] | None,
    origin: str | None,
    *,
    problems: Sequence[tuple[RunProblem, str | None]] | None = None,
    witnesses: Sequence[Verifier] = (),
    cache: VerificationCache | None = None,
    policy: TimePolicy | None = None,
    private: Mapping[str, Sequence[Kept]] | None = None,
) -> tuple[list[Json], list[str]]:
    """One run's timeline rows as JSON and as a text table (``ledger-verify run --timeline``),
    with the problems ``verify_run`` finds (``problems``: already found by the caller).
    ``cache``: the verification cache the caller's checks used (shared, trust inputs apart)."""
    cache = VerificationCache() if cache is None else cache
    if problems is None:
        base = ReceiptChecker(verifiers, tsa_roots=roots, origin=origin, cache=cache)
        problems = verify_run(items, (), checker=base).problems
    checker = ReceiptChecker(
        verifiers, tsa_roots=roots, origin=origin, witnesses=witnesses, cache=cache
    )
    rows = timeline(audit_run(items, checker, run_problems=problems), policy, private)
    return [r.to_json_obj() for r in rows], ["timeline:", *format_timeline(rows)]
