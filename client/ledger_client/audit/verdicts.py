"""The verdict model every auditor's view renders: named checks, each with a status.

Pure: no I/O. docs/formats.md "Verdicts". A ``Check`` is one thing an auditor was told about a
record or a run: its ``name`` (``receipt``, ``run``, ``time``, ``lineage``, ...), its
``status`` (``ok``, ``warning``, ``failed``, ``pending``, ``not-checked``), a ``message`` for
people and where the verdict came from (``source``: ``verified now``, or ``index`` when a view
reuses what the index stored for the same file hash and trust inputs). A ``Verdict`` is the
checks of one record or one run; its status is the worst of them (``failed`` > ``pending`` >
``warning`` > ``ok``; ``not-checked`` never makes a verdict worse or better).

Two record checks are made here from the record and the log's leaf alone:

* ``time_check``: the log's leaf time beside the agent's claimed time (``record.time``). A
  claimed time later than the leaf time plus ``skew`` is *postdated* (failed): no record can
  be made after it was logged. A claimed time more than ``max_delay`` before the leaf time is
  *late by Δ*: a warning, or a failure under a policy that says so (``late_fails``). Nothing
  distinguishes a record re-sent late from a backdated one: both are late.
* ``lineage_check``: a record that took inputs (``ledger.records.links.takes_inputs``) but
  names no parent is ``inputs not linked`` (a warning: the SDK could not follow its data, or
  the agent dropped its links; nothing else can tell which); parents the record labels as
  inferred (``ledger.records.links.inferred_parents``) are named in the message.
* ``signature_check``: the agent's signature (``ledger.records.agent``): ``ok`` when it is a
  valid signature by one of the auditor's agent keys (``TimePolicy.agent_keys``), ``failed``
  when the record is unsigned, signed by another key or badly signed; without agent keys it
  is ``not-checked`` and names the key the record claims.
* ``chain_check``: a run's first record's place in its agent's chain (``chain C #n``, or
  ``chain C started/restarted: reason`` for run 0); gaps and forks need the log's tiles
  (``ledger_client.audit.chain``: ``ledger-verify chain``, or ``--tiles``/``--chain-key`` on
  ``run``, ``report`` and ``index``), which give the run its verdict (``TimePolicy.chains``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from ledger.core.jcs import Json
from ledger.core.note import Ed25519Verifier
from ledger.core.timefmt import from_epoch_ms, parse_rfc3339, rfc3339_millis
from ledger.records.agent import verify_record_signature
from ledger.records.decision import DecisionRecord
from ledger.records.links import inferred_parents, takes_inputs
from ledger.timestamp.policy import DEFAULT_SKEW
from ledger_client.audit.verify import PENDING as ANCHOR_PENDING
from ledger_client.audit.verify import RecordCheck, RunAudit

__all__ = [
    "DEFAULT_MAX_DELAY",
    "FAILED",
    "FROM_INDEX",
    "NOT_CHECKED",
    "OK",
    "PENDING",
    "STATUSES",
    "VERIFIED_NOW",
    "WARNING",
    "Check",
    "TimePolicy",
    "Verdict",
    "chain_check",
    "chain_position",
    "format_delta",
    "lineage_check",
    "receipt_check",
    "record_verdict",
    "run_checks",
    "signature_check",
    "time_check",
    "time_json",
    "time_text",
]

OK, WARNING, FAILED, PENDING, NOT_CHECKED = "ok", "warning", "failed", "pending", "not-checked"
STATUSES = (OK, WARNING, FAILED, PENDING, NOT_CHECKED)
_RANK = {NOT_CHECKED: 0, OK: 1, WARNING: 2, PENDING: 3, FAILED: 4}
VERIFIED_NOW, FROM_INDEX = "verified now", "index"
DEFAULT_MAX_DELAY = timedelta(hours=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One named check of a record or a run (module docstring)."""

    name: str
    status: str
    message: str = ""
    source: str = VERIFIED_NOW

    def __post_init__(self) -> None:
        if self.status not in _RANK:
            raise ValueError(f"check status {self.status!r}: want one of {STATUSES}")

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "source": self.source,
        }

    @property
    def text(self) -> str:
        """``name: message`` (or ``name: status``), for text views."""
        return f"{self.name}: {self.message or self.status}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The checks of one record or one run; ``status`` is the worst of them."""

    checks: tuple[Check, ...] = field(default=())

    @property
    def status(self) -> str:
        worst, rank = OK, -1
        for check in self.checks:  # the first worst (ranks differ by status)
            if _RANK[check.status] > rank:
                worst, rank = check.status, _RANK[check.status]
        return OK if worst == NOT_CHECKED else worst

    @property
    def ok(self) -> bool:
        """No check failed and none is pending (warnings allowed)."""
        return self.status in (OK, WARNING)

    def of(self, status: str) -> list[Check]:
        return [c for c in self.checks if c.status == status]

    def named(self, name: str) -> Check | None:
        for check in self.checks:
            if check.name == name:
                return check
        return None

    def notes(self) -> list[str]:
        """Text of every warning, pending or failed check, worst first."""
        shown = [c for c in self.checks if c.status in (WARNING, PENDING, FAILED)]
        return [c.text for c in sorted(shown, key=lambda c: -_RANK[c.status])]

    def to_json_obj(self) -> dict[str, Json]:
        return {"status": self.status, "checks": [c.to_json_obj() for c in self.checks]}


# Checks most records get (frozen values: shared, never built per record).
_TIME_OK = Check(name="time", status=OK)
_RUN_OK = Check(name="run", status=OK)
_LINEAGE_OK = Check(name="lineage", status=OK)
_LINEAGE_NONE = Check(name="lineage", status=NOT_CHECKED)
_LINEAGE_UNLINKED = Check(
    name="lineage", status=WARNING, message="inputs not linked (took inputs, names no parent)"
)
_NO_CHAIN_LINK = Check(name="chain", status=NOT_CHECKED, message="no chain link")
_RECEIPT_VALID = Check(name="receipt", status=OK, message="valid")
_RECEIPT_UNANCHORED = Check(name="receipt", status=OK, message="valid; anchors not checked")
_UNCHECKED_SIGNATURES: dict[str, Check] = {}  # by claimed key, without agent keys


@lru_cache(maxsize=4096)
def _claimed_time(text: str) -> datetime | None:
    """A claimed time parsed (None: unread); records of a run often claim the same few."""
    try:
        return parse_rfc3339(text)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class TimePolicy:
    """The auditor's time policy: ``skew`` (log clock vs agent clock), ``max_delay`` (a
    claimed time this much before the leaf time is late) and whether late fails; and the
    agent keys the auditor trusts (``agent_keys``: every record must be signed by one); and
    the chain verdicts the log's tiles gave the presented runs (``chains``: run id -> check,
    from ``ledger_client.audit.chain``; empty when the tiles were not read)."""

    skew: timedelta = DEFAULT_SKEW
    max_delay: timedelta = DEFAULT_MAX_DELAY
    late_fails: bool = False
    agent_keys: tuple[Ed25519Verifier, ...] = ()
    chains: Mapping[str, Check] = field(default_factory=dict)


def format_delta(delta: timedelta) -> str:
    """A duration in its largest unit and the next: ``1 d``, ``1 d 2 h``, ``3 h 5 min``,
    ``10 min``, ``42 s`` (the rest dropped)."""
    seconds = int(abs(delta).total_seconds())
    units = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))
    for i, (name, size) in enumerate(units):
        if seconds >= size or size == 1:
            big, rest = divmod(seconds, size)
            text = f"{big} {name}"
            if i + 1 < len(units):
                small_name, small_size = units[i + 1]
                small = rest // small_size
                if small and name != "min":
                    text += f" {small} {small_name}"
            return text
    raise AssertionError("unreachable")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_FIRST_US = (datetime.min.replace(tzinfo=UTC) - _EPOCH) // _US  # what ``datetime`` can hold
_LAST_US = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // _US


@lru_cache(maxsize=4096)
def _claimed_us(text: str) -> int | None:
    """``_claimed_time(text)`` in microseconds since the epoch (exact: datetimes hold whole
    microseconds)."""
    claimed = _claimed_time(text)
    return None if claimed is None else (claimed - _EPOCH) // _US


def time_check(record: DecisionRecord, leaf_ms: int | None, policy: TimePolicy) -> Check:
    """The log's leaf time beside the claimed time (module docstring)."""
    if leaf_ms is not None:  # the usual verdict, ``_time_verdict``'s comparisons on integers
        claimed = _claimed_us(record.time)
        logged = leaf_ms * 1000
        latest = logged + policy.skew // _US
        if (
            claimed is not None
            and _FIRST_US <= logged <= _LAST_US
            and _FIRST_US <= latest <= _LAST_US
            and claimed <= latest
            and logged - claimed <= policy.max_delay // _US
        ):
            return _TIME_OK
    return _time_check(record, leaf_ms, policy)


def _time_check(record: DecisionRecord, leaf_ms: int | None, policy: TimePolicy) -> Check:
    """``time_check`` on datetimes."""
    if leaf_ms is None:
        return Check(name="time", status=NOT_CHECKED, message="no leaf time (receipt unread)")
    logged = from_epoch_ms(leaf_ms)
    claimed = _claimed_time(record.time)
    if claimed is None:
        return Check(name="time", status=FAILED, message=f"claimed time {record.time!r} unread")
    return _time_verdict(claimed, logged, policy)


def _time_verdict(claimed: datetime, logged: datetime, policy: TimePolicy) -> Check:
    delta = logged - claimed
    if claimed > logged + policy.skew:
        return Check(
            name="time",
            status=FAILED,
            message=f"postdated: claimed {format_delta(delta)} after the log's leaf time",
        )
    if delta > policy.max_delay:
        return Check(
            name="time",
            status=FAILED if policy.late_fails else WARNING,
            message=f"late by {format_delta(delta)} (max delay {format_delta(policy.max_delay)})",
        )
    return _TIME_OK


def time_json(record: DecisionRecord, leaf_ms: int | None) -> dict[str, Json]:
    """Claimed time, leaf time and their difference (leaf minus claimed), for ``--json``."""
    if leaf_ms is None:
        return {"claimed": record.time, "logged": None, "difference_ms": None}
    claimed = _claimed_time(record.time)
    if claimed is None:
        return {"claimed": record.time, "logged": _iso(leaf_ms), "difference_ms": None}
    claimed_ms = int(claimed.timestamp() * 1000)
    return {"claimed": record.time, "logged": _iso(leaf_ms), "difference_ms": leaf_ms - claimed_ms}


def time_text(record: DecisionRecord, leaf_ms: int | None) -> str:
    """``+2 s`` / ``-3 min`` (leaf minus claimed), or ``?`` without a leaf time."""
    got = time_json(record, leaf_ms)["difference_ms"]
    if not isinstance(got, int):
        return "?"
    sign = "-" if got < 0 else "+"
    return sign + format_delta(timedelta(milliseconds=got))


def _iso(ms: int) -> str:
    return rfc3339_millis(from_epoch_ms(ms))


def lineage_check(
    record: DecisionRecord,
    step_of: dict[str, int] | None = None,
    inferred: Mapping[str, str] | None = None,
) -> Check:
    """``inputs not linked`` or the inferred parents (module docstring); ``inferred``: the
    record's ``inferred_parents``, when the caller has them."""
    if record.kind == "run_closed":
        return _LINEAGE_NONE
    if not record.parent_digests and takes_inputs(record):
        return _LINEAGE_UNLINKED
    inferred = inferred_parents(record) if inferred is None else inferred
    if inferred:
        steps = step_of or {}
        named = ", ".join(
            f"#{steps[d]}" if d in steps else f"ext:{d[:12]}" for d in sorted(inferred)
        )
        how = ", ".join(sorted(set(inferred.values())))
        return Check(name="lineage", status=OK, message=f"parents {named} inferred ({how})")
    return _LINEAGE_OK


def signature_check(record: DecisionRecord, keys: Sequence[Ed25519Verifier]) -> Check:
    """The agent's signature (module docstring)."""
    signature = record.signature
    if not keys:
        claimed = "unsigned" if signature is None else f"by {signature.key}+{signature.key_id}"
        found = _UNCHECKED_SIGNATURES.get(claimed)
        if found is None:
            if len(_UNCHECKED_SIGNATURES) >= 4096:
                _UNCHECKED_SIGNATURES.clear()
            found = _UNCHECKED_SIGNATURES[claimed] = Check(
                name="signature", status=NOT_CHECKED, message=f"{claimed} (no agent key)"
            )
        return found
    problem, key = verify_record_signature(record, keys)
    if problem is not None:
        return Check(name="signature", status=FAILED, message=problem)
    assert signature is not None and key is not None
    return Check(name="signature", status=OK, message=f"by {signature.key}+{signature.key_id}")


def chain_position(record: DecisionRecord) -> str | None:
    """``chain 1a2b3c4d #17`` (or ``... #0 started: reason``) for a run's first record."""
    link = record.chain
    if link is None:
        return None
    text = f"chain {link.id[:8]} #{link.seq}"
    return text if link.genesis is None else f"{text} started: {link.genesis}"


def chain_check(record: DecisionRecord, policy: TimePolicy | None = None) -> Check | None:
    """A run's first record's chain position: the verdict the log's tiles gave it
    (``policy.chains``) or, without them, not checked (module docstring); None for a record
    that is not a run's first."""
    if record.step != 0:
        return None
    scanned = None if policy is None else policy.chains.get(record.run_id)
    if scanned is not None:
        return scanned
    where = chain_position(record)
    if where is None:
        return _NO_CHAIN_LINK
    return Check(name="chain", status=NOT_CHECKED, message=f"{where} (gaps: ledger-verify chain)")


def receipt_check(check: RecordCheck) -> Check:
    """The receipt's parts (record digest, leaf, checkpoint, inclusion, anchors) as one check."""
    if check.error is not None:
        waiting = check.anchor == ANCHOR_PENDING
        return Check(name="receipt", status=PENDING if waiting else FAILED, message=check.error)
    if check.anchor in ("none", "not_checked"):
        return _RECEIPT_UNANCHORED
    return _RECEIPT_VALID


def record_verdict(
    check: RecordCheck,
    problems: Sequence[str],
    policy: TimePolicy,
    step_of: dict[str, int] | None = None,
    inferred: Mapping[str, str] | None = None,
) -> Verdict:
    """Every check of one record: its receipt, the run problems naming it (``code:
    message``), its time and its lineage (``inferred``: as ``lineage_check`` takes it)."""
    run = Check(name="run", status=FAILED, message="; ".join(problems)) if problems else _RUN_OK
    chain = chain_check(check.record, policy)
    checks = (
        receipt_check(check),
        run,
        time_check(check.record, check.logged_at_ms, policy),
        lineage_check(check.record, step_of, inferred),
        signature_check(check.record, policy.agent_keys),
    )
    return _verdict_of(checks if chain is None else (*checks, chain))


# Verdicts by the identities of their checks, each with its checks, kept alive so that no other
# object takes their ids while they are keys: most records get the very same shared checks
# (``_TIME_OK``, ``_RUN_OK``, ...) and so one verdict (a frozen value), made once.
_VERDICTS: dict[tuple[int, ...], tuple[tuple[Check, ...], Verdict]] = {}


def _verdict_of(checks: tuple[Check, ...]) -> Verdict:
    """``Verdict(checks=checks)``, the one made before of these very checks."""
    ids = tuple(map(id, checks))
    kept = _VERDICTS.get(ids)
    if kept is not None:
        return kept[1]
    verdict = Verdict(checks=checks)
    if len(_VERDICTS) >= 4096:
        _VERDICTS.clear()
    _VERDICTS[ids] = (checks, verdict)
    return verdict


def run_checks(
    audit: RunAudit,
    records: Sequence[tuple[RecordCheck, Verdict]],
    *,
    examined: str = "",
    chain: Check | None = None,
) -> Verdict:
    """One run's checks from its records' verdicts: receipts, completeness and order (the
    run problems), time, lineage, the agent's signatures and the run's chain position
    (``chain``: the verdict ``ledger_client.audit.chain`` gave it, when the tiles were read).

    A run whose records have the very verdicts (most share one: ``_verdict_of``), failures
    and steps of a run checked before, with its problem codes and chain, gets that run's
    verdict (a frozen value), made once."""
    codes = sorted({p.code for p, _ in audit.problems})
    key = (
        tuple(
            (id(v), c.error is not None, c.anchor == ANCHOR_PENDING, c.record.step)
            for c, v in records
        ),
        len(audit.problems),
        tuple(codes),
        id(chain),
    )
    kept = _RUNS.get(key)
    if kept is not None:
        return kept[1]
    made = _run_checks(audit, records, chain)
    if len(_RUNS) >= 1024:
        _RUNS.clear()
    _RUNS[key] = ((tuple(v for _, v in records), chain), made)  # their ids stay theirs
    return made


# Run verdicts by their inputs (``run_checks``), each kept with the verdicts and chain check
# whose identities its key holds.
_RUNS: dict[tuple[Any, ...], tuple[tuple[tuple[Verdict, ...], Check | None], Verdict]] = {}


def _run_checks(
    audit: RunAudit, records: Sequence[tuple[RecordCheck, Verdict]], chain: Check | None
) -> Verdict:
    """``run_checks`` made from its inputs."""
    bad = [c for c, _ in records if c.error is not None]
    waiting = [c for c in bad if c.anchor == ANCHOR_PENDING]
    receipts = Check(
        name="receipts",
        status=(PENDING if len(waiting) == len(bad) else FAILED) if bad else OK,
        message=f"{len(records) - len(bad)} of {len(records)} valid"
        + (f", {len(waiting)} with anchors pending" if waiting else ""),
    )
    codes = sorted({p.code for p, _ in audit.problems})
    only_pending = codes == ["anchors_pending"]
    run = Check(
        name="run",
        status=(PENDING if only_pending else FAILED) if audit.problems else OK,
        message=f"{len(audit.problems)} problem(s): {', '.join(codes)}" if codes else "complete",
    )
    if chain is None:
        first = next((v.named("chain") for _, v in records if v.named("chain")), None)
        chain = first or Check(name="chain", status=NOT_CHECKED, message="no first record")
    return Verdict(
        checks=(
            receipts,
            run,
            _summary(records, "time"),
            _summary(records, "lineage"),
            _signatures(records),
            chain,
        )
    )


def _signatures(records: Sequence[tuple[RecordCheck, Verdict]]) -> Check:
    """The run's signature check: every record's, summarised."""
    found = [(c, v.named("signature")) for c, v in records]
    checks = [(c, k) for c, k in found if k is not None]
    bad = [(c, k) for c, k in checks if k.status == FAILED]
    if bad:
        steps = ", ".join(f"#{c.record.step}" for c, _ in bad)
        return Check(name="signature", status=FAILED, message=f"{bad[0][1].message} at {steps}")
    keys = sorted({k.message.split(" (", 1)[0] for _, k in checks})
    if checks and all(k.status == OK for _, k in checks):
        return Check(
            name="signature",
            status=OK,
            message=f"{len(checks)} signed {keys[0]}"
            if len(keys) == 1
            else f"{len(checks)} signed by {len(keys)} keys",
        )
    return Check(name="signature", status=NOT_CHECKED, message=", ".join(keys))


def _summary(records: Sequence[tuple[RecordCheck, Verdict]], name: str) -> Check:
    noted = [(c, v.named(name)) for c, v in records]
    flagged = [(c, k) for c, k in noted if k is not None and k.status in (WARNING, FAILED)]
    status = max((k.status for _, k in flagged), key=_RANK.__getitem__, default=OK)
    if not flagged:
        return Check(name=name, status=OK)
    first = {k.message.split(" (", 1)[0].split(":", 1)[0] for _, k in flagged}
    steps = ", ".join(f"#{c.record.step}" for c, _ in flagged)
    return Check(name=name, status=status, message=f"{', '.join(sorted(first))} at {steps}")
