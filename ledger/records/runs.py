"""Run-level checks over decision records: the ``run_closed`` record and ``check_run``.

Pure: no I/O. docs/design.md "Decision record (v1)": a run's records link by
``parent_digests`` into a DAG, and a ``run_closed`` record commits to the ordered list of
(step, record digest) of the whole run, so an auditor can prove a run is complete and in order.

``check_run`` never raises on a bad run; it returns a ``RunReport`` whose ``problems`` name each
fault with the record's step, id and digest (``PROBLEM_CODES``):

* ``foreign_run``: a record of another run (the run id is the ``run_closed`` record's);
* ``duplicate_record`` / ``duplicate_step``: the same record twice / two records at one step;
* ``missing_parent`` / ``parent_not_before``: a parent digest absent / not at an earlier step;
  a parent that is absent *and* not listed in the ``run_closed`` record is a link to a record
  of another run (data-flow lineage, by digest): not a problem, it is in
  ``RunReport.external_parents`` for cross-run checks (``ledger-verify lineage``);
* ``not_closed`` / ``multiple_run_closed``: no ``run_closed`` record / more than one;
* ``missing``: a listed (step, digest) with no record; ``altered``: a record at a listed step
  whose digest differs (the listed record being absent); ``extra``: a record not listed;
  ``step_mismatch``: a listed digest found at another step;
* ``reordered``: with ``check_order``, records not in the committed order (all but one longest
  in-order subsequence are named) or a ``run_closed`` that is not last;
* ``after_close``: a record at a step at or after the ``run_closed`` record's step (a run has
  exactly one closure and it is its last step);
* ``step_gap``: a step below the closure's that neither a given record nor the closure's list
  holds (steps run 0, 1, 2, ... without holes). Entries the closure lists but the presenter left
  out count as held (they are named ``missing``), so the check covers them too.

A closure that lists steps 0 and 2 at step 4 therefore fails with ``step_gap`` at 1 and 3 even
when the presenter shows only steps 0, 2 and that closure.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from ledger.core.errors import InvalidRecordError
from ledger.core.jcs import Json
from ledger.core.limits import HASH_SIZE
from ledger.records.decision import DecisionRecord, RunClosed, RunStep, new_record_id, record_digest

__all__ = [
    "PROBLEM_CODES",
    "RunProblem",
    "RunReport",
    "check_run",
    "run_closed_record",
    "run_steps",
]

PROBLEM_CODES = (
    "foreign_run",
    "duplicate_record",
    "duplicate_step",
    "missing_parent",
    "parent_not_before",
    "not_closed",
    "multiple_run_closed",
    "missing",
    "extra",
    "altered",
    "step_mismatch",
    "reordered",
    "after_close",
    "step_gap",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunProblem:
    """One thing wrong with a run; ``code`` is one of ``PROBLEM_CODES``."""

    code: str
    message: str
    step: int | None = None
    record_id: str | None = None
    record_digest: str | None = None

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "code": self.code,
            "message": self.message,
            "step": self.step,
            "record_id": self.record_id,
            "record_digest": self.record_digest,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """The result of ``check_run``: ``ok`` when there are no problems."""

    run_id: str | None
    records: int
    closed_by: str | None
    problems: tuple[RunProblem, ...]
    external_parents: tuple[str, ...] = ()  # parents in other runs (module docstring)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "ok": self.ok,
            "run_id": self.run_id,
            "records": self.records,
            "closed_by": self.closed_by,
            "problems": [p.to_json_obj() for p in self.problems],
            "external_parents": list(self.external_parents),
        }


def run_steps(records: Sequence[DecisionRecord]) -> list[tuple[int, bytes]]:
    """The (step, record digest) list of ``records`` in step order, for ``run_closed_record``."""
    return sorted((r.step, record_digest(r)) for r in records)


def run_closed_record(
    run_id: str,
    steps: Sequence[tuple[int, bytes]],
    *,
    agent: str,
    time: str,
    step: int | None = None,
    parent_digests: Sequence[bytes] | None = None,
    record_id: str | None = None,
    model: str | None = None,
) -> DecisionRecord:
    """A ``run_closed`` record committing to ``steps`` (ordered, steps strictly increasing).

    ``step`` defaults to one past the last listed step; ``parent_digests`` to the last listed
    record, so the closure is part of the run's DAG.
    """
    entries = tuple(RunStep(step=s, record_digest=_hex32(d, i)) for i, (s, d) in enumerate(steps))
    if step is None:
        step = entries[-1].step + 1 if entries else 0
    if parent_digests is None:
        parent_digests = [steps[-1][1]] if steps else []
    return DecisionRecord(
        record_id=new_record_id() if record_id is None else record_id,
        run_id=run_id,
        step=step,
        time=time,
        agent=agent,
        model=model,
        parent_digests=tuple(_hex32(d, i, "parent_digests") for i, d in enumerate(parent_digests)),
        payload=RunClosed(steps=entries),
    )


def _hex32(digest: bytes, index: int, where: str = "payload.steps") -> str:
    if not isinstance(digest, bytes) or len(digest) != HASH_SIZE:
        raise InvalidRecordError(f"{where}[{index}]", "expected a 32-byte SHA-256 digest")
    return digest.hex()


def check_run(
    records: Sequence[DecisionRecord],
    *,
    check_order: bool = True,
    digests: Sequence[str] | None = None,
) -> RunReport:
    """Check one run: parents exist and come earlier, and ``run_closed`` lists exactly the run.

    Pure and total: every problem is reported (``RunReport.problems``), nothing is raised.
    ``records`` are all the run's records including its ``run_closed``; with ``check_order``
    their order must be the committed one (step order, ``run_closed`` last). ``digests`` (hex,
    one per record) saves recomputing them when the caller has them.
    """
    if digests is None:
        digests = [record_digest(r).hex() for r in records]
    elif len(digests) != len(records):
        raise ValueError("check_run: one digest per record")
    digests = list(digests)
    closers = [i for i, r in enumerate(records) if isinstance(r.payload, RunClosed)]
    run_id = records[closers[0] if closers else 0].run_id if records else None
    listed = {e.record_digest for i in closers[:1] for e in _closing(records[i]).steps}
    external = _external(records, digests, listed) if closers else set()  # in other runs
    problems = [
        *_foreign(records, digests, run_id),
        *_duplicates(records, digests),
        *_parents(records, digests, external),
    ]
    if not closers:
        problems.append(RunProblem(code="not_closed", message="the run has no run_closed record"))
    else:
        problems += _extra_closers(records, digests, closers[1:])
        problems += _against_closure(records, digests, closers[0], check_order)
        problems += _after_close(records, digests, closers[0])
        problems += _step_gaps(records, closers[0])
    closed_by = digests[closers[0]] if closers else None
    return RunReport(
        run_id=run_id, records=len(records), closed_by=closed_by, problems=tuple(problems),
        external_parents=tuple(sorted(external)),
    )  # fmt: skip


def _closing(record: DecisionRecord) -> RunClosed:
    assert isinstance(record.payload, RunClosed)
    return record.payload


def _external(records: Sequence[DecisionRecord], digests: list[str], listed: set[str]) -> set[str]:
    present = set(digests)
    return {p for r in records for p in r.parent_digests if p not in present and p not in listed}


def _problem(code: str, message: str, record: DecisionRecord, digest: str) -> RunProblem:
    return RunProblem(
        code=code,
        message=message,
        step=record.step,
        record_id=record.record_id,
        record_digest=digest,
    )


def _foreign(
    records: Sequence[DecisionRecord], digests: list[str], run_id: str | None
) -> list[RunProblem]:
    return [
        _problem("foreign_run", f"record belongs to run {r.run_id!r}, not {run_id!r}", r, d)
        for r, d in zip(records, digests, strict=True)
        if r.run_id != run_id
    ]


def _duplicates(records: Sequence[DecisionRecord], digests: list[str]) -> list[RunProblem]:
    problems: list[RunProblem] = []
    seen_digest: set[str] = set()
    step_owner: dict[int, str] = {}
    for r, d in zip(records, digests, strict=True):
        if d in seen_digest:
            problems.append(_problem("duplicate_record", "record appears twice", r, d))
            continue
        seen_digest.add(d)
        if r.step in step_owner:
            message = f"step {r.step} also holds record {step_owner[r.step]}"
            problems.append(_problem("duplicate_step", message, r, d))
        step_owner.setdefault(r.step, d)
    return problems


def _parents(
    records: Sequence[DecisionRecord], digests: list[str], external: set[str]
) -> list[RunProblem]:
    step_of = {d: r.step for r, d in zip(records, digests, strict=True)}
    problems: list[RunProblem] = []
    for r, d in zip(records, digests, strict=True):
        for parent in r.parent_digests:
            if parent in external:
                continue
            if parent not in step_of:
                problems.append(_problem("missing_parent", f"parent {parent} is absent", r, d))
            elif step_of[parent] >= r.step:
                message = f"parent {parent} has step {step_of[parent]}, not before {r.step}"
                problems.append(_problem("parent_not_before", message, r, d))
    return problems


def _extra_closers(
    records: Sequence[DecisionRecord], digests: list[str], extra: list[int]
) -> list[RunProblem]:
    message = "a second run_closed record"
    return [_problem("multiple_run_closed", message, records[i], digests[i]) for i in extra]


def _against_closure(
    records: Sequence[DecisionRecord], digests: list[str], closer: int, check_order: bool
) -> list[RunProblem]:
    closing = records[closer].payload
    assert isinstance(closing, RunClosed)
    listed: dict[str, int] = {}  # digest -> the first step listing it
    listed_at: dict[int, str] = {}  # step -> the first digest listed there
    for entry in closing.steps:
        listed.setdefault(entry.record_digest, entry.step)
        listed_at.setdefault(entry.step, entry.record_digest)
    body = [i for i, r in enumerate(records) if not isinstance(r.payload, RunClosed)]
    present = {digests[i]: i for i in body}
    unlisted_steps = {records[i].step for i in body if digests[i] not in listed}
    problems = [_unlisted(records[i], digests[i], listed, listed_at, present) for i in body]
    problems += [_absent(entry, present, unlisted_steps) for entry in closing.steps]
    if check_order:
        problems.append(_closer_last(records, digests, closer))
        problems += _order(records, digests, [i for i in body if digests[i] in listed])
    return [p for p in problems if p is not None]


def _unlisted(
    record: DecisionRecord,
    digest: str,
    listed: Mapping[str, int],
    listed_at: Mapping[int, str],
    present: Mapping[str, int],
) -> RunProblem | None:
    """A present record that run_closed does not list as it is: altered, extra or misplaced."""
    step = listed.get(digest)
    if step is not None:
        if step == record.step:
            return None
        message = f"run_closed lists this record at step {step}"
        return _problem("step_mismatch", message, record, digest)
    expected = listed_at.get(record.step)
    if expected is not None and expected not in present:
        message = f"record differs from the one run_closed lists ({expected})"
        return _problem("altered", message, record, digest)
    return _problem("extra", "record is not listed in run_closed", record, digest)


def _absent(
    entry: RunStep, present: Mapping[str, int], unlisted_steps: set[int]
) -> RunProblem | None:
    """A listed entry with no record at all (an altered record is reported by ``_unlisted``)."""
    if entry.record_digest in present or entry.step in unlisted_steps:
        return None
    return RunProblem(
        code="missing",
        message=f"step {entry.step} is listed in run_closed but absent",
        step=entry.step,
        record_digest=entry.record_digest,
    )


def _after_close(
    records: Sequence[DecisionRecord], digests: list[str], closer: int
) -> list[RunProblem]:
    """Records at or after the closure's step: the closure is the run's last step. (The
    closure's own list cannot name such a step: ``ledger.records`` refuses that record.)"""
    close_step = records[closer].step
    return [
        _problem("after_close", f"step {r.step} is not before run_closed (step {close_step})", r, d)
        for i, (r, d) in enumerate(zip(records, digests, strict=True))
        if i != closer and r.step >= close_step
    ]


def _step_gaps(records: Sequence[DecisionRecord], closer: int) -> list[RunProblem]:
    """Steps below the closure's that no given record and no listed entry holds."""
    closing = records[closer].payload
    assert isinstance(closing, RunClosed)
    close_step = records[closer].step
    held = {r.step for r in records} | {e.step for e in closing.steps}
    return [
        RunProblem(
            code="step_gap",
            message=f"no record holds step {step} (the run is closed at step {close_step})",
            step=step,
        )
        for step in range(close_step)
        if step not in held
    ]


def _closer_last(
    records: Sequence[DecisionRecord], digests: list[str], closer: int
) -> RunProblem | None:
    if closer == len(records) - 1:
        return None
    message = "run_closed is not the last record"
    return _problem("reordered", message, records[closer], digests[closer])


def _order(
    records: Sequence[DecisionRecord], digests: list[str], listed: list[int]
) -> list[RunProblem | None]:
    """Records out of step order: all but one longest in-order subsequence are named."""
    steps = [records[i].step for i in listed]
    if all(a < b for a, b in pairwise(steps)):  # in order: the whole run is that one
        return []
    keep = set(_longest_increasing(steps))
    message = "record is out of the committed order"
    return [
        _problem("reordered", message, records[i], digests[i])
        for pos, i in enumerate(listed)
        if pos not in keep
    ]


def _longest_increasing(values: list[int]) -> list[int]:
    """Positions of one longest strictly increasing subsequence (patience sorting, n log n)."""
    tails: list[int] = []  # tails[k]: position ending the best run of length k + 1
    tail_values: list[int] = []
    back: list[int] = []
    for pos, value in enumerate(values):
        k = bisect.bisect_left(tail_values, value)
        back.append(tails[k - 1] if k else -1)
        tails[k : k + 1] = [pos]
        tail_values[k : k + 1] = [value]
    out: list[int] = []
    pos = tails[-1] if tails else -1
    while pos != -1:
        out.append(pos)
        pos = back[pos]
    return out[::-1]
