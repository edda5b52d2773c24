"""The index's per-receipt checks made with fewer steps (``ledger_client.audit.verify``) answer
as the plain steps do: a ``RecordCheck`` set slot by slot equals the one the constructor makes,
and a checkpoint note kept for a checker opens as ``open_note`` opens it, a failing one raising
each time and never taken for another checker's verdict."""

from __future__ import annotations

import json
import time
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core import merkle
from ledger.core.errors import LedgerError
from ledger.core.note import Ed25519Signer
from ledger.core.timefmt import rfc3339
from ledger.core.types import encode_leaf
from ledger.records.decision import DecisionRecord, record_digest
from ledger.records.runs import RunProblem
from ledger_client.audit import verdicts, verify
from ledger_client.audit.timeline import TimelineRow, timeline
from ledger_client.audit.verify import RecordCheck, audit_run, check_item
from ledger_client.receipts.run_load import load_run
from ledger_client.receipts.run_verify import RunItem
from ledger_client.receipts.verify import ReceiptChecker
from tests.audit_world import build, write_runs
from tests.receipt_world import World, make_record, tsa

RUNS = build()
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def test_a_check_set_slot_by_slot_is_the_constructors(tmp_path: Path) -> None:
    files = write_runs(tmp_path / "runs", RUNS)
    audit = audit_run(load_run(files["support"]), ReceiptChecker([RUNS.world.key]))
    assert audit.checks
    for check in audit.checks:
        made = RecordCheck(**{f.name: getattr(check, f.name) for f in fields(RecordCheck)})
        assert made == check and repr(made) == repr(check)


def test_a_timeline_row_set_slot_by_slot_is_the_constructors(tmp_path: Path) -> None:
    files = write_runs(tmp_path / "runs", RUNS)
    rows = timeline(audit_run(load_run(files["support"]), ReceiptChecker([RUNS.world.key])))
    assert rows
    for row in rows:
        made = TimelineRow(**{f.name: getattr(row, f.name) for f in fields(TimelineRow)})
        assert made == row and repr(made) == repr(row)


def _note(files: dict[str, Path]) -> str:
    line = files["support"].read_text().splitlines()[0]
    note: str = json.loads(line)["receipt"]["checkpoint"]
    return note


def test_a_note_kept_for_a_checker_opens_as_open_note(tmp_path: Path) -> None:
    note = _note(write_runs(tmp_path / "runs", RUNS))
    checker = ReceiptChecker([RUNS.world.key])
    assert verify._open_note(checker, note) == checker.open_note(note)
    assert verify._open_note(checker, note) is verify._open_note(checker, note)  # kept
    other = ReceiptChecker([Ed25519Signer.generate("other.example/log").verifier()])
    for _ in range(2):  # not the first checker's verdict, and not kept: it fails each time
        with pytest.raises(LedgerError) as caught:
            verify._open_note(other, note)
        with pytest.raises(LedgerError) as plain:
            other.open_note(note)
        assert str(caught.value) == str(plain.value)
    assert (other, note) not in verify._OPENED


def _items_of(world: World, size: int, **receipt: Any) -> list[RunItem]:
    """Receipts of every leaf of ``world`` under the checkpoint of ``size`` (records made to
    match: each leaf logs the digest of the record beside it)."""
    out = []
    for i in range(size):
        record = make_record(i)
        made = world.receipt(i, size, **receipt)
        out.append(RunItem(source=f"f:{i}", record=record, receipt=made))
    return out


def _world_of(records: int, *, late: int | None = None) -> World:
    """A log of ``records`` records (``make_record(i)`` at index i); ``late``: that leaf's time
    is a day after now, after any anchor of the log."""
    world = World([record_digest(make_record(i)) for i in range(records)])
    if late is not None:
        when = int(time.time() * 1000) + 86_400_000
        world.leaves[late] = encode_leaf(world.leaves[late][9:41], when)
        world.hashes[late] = merkle.leaf_hash(world.leaves[late])
    return world


def _variants(items: list[RunItem], world: World, size: int) -> list[RunItem]:
    """The items, and receipts of them that fail one part each."""
    good = items[1]
    r = good.receipt
    bad = [
        replace(r, record_digest=bytes(32)),  # not the record's digest
        replace(r, tree_size=size - 1),  # not the checkpoint's size
        replace(r, inclusion_proof=items[2].receipt.inclusion_proof),  # another leaf's path
        replace(r, leaf=items[2].receipt.leaf),  # another record's leaf
        replace(r, anchors=()),  # no anchor yet
        replace(r, anchors=(r.anchors[0], r.anchors[0])) if r.anchors else r,
        replace(
            r,
            checkpoint=world.note(size - 1),
            tree_size=size - 1,
            inclusion_proof=world.inclusion(1, size - 1),
        ),  # another checkpoint (not the one its anchor stamps)
        replace(r, record=make_record(7)),  # carries another record
    ]
    return [*items, *(RunItem(source="bad", record=good.record, receipt=b) for b in bad)]


@pytest.mark.parametrize("roots", [True, False])
@pytest.mark.parametrize("anchored", [True, False])
def test_a_quick_check_is_the_check_part_by_part(roots: bool, anchored: bool) -> None:
    size = 12
    world = _world_of(size, late=5)
    items = _variants(_items_of(world, size, anchored=anchored), world, size)
    witness = Ed25519Signer.generate("witness.example/w").verifier()
    for witnesses in ((), (witness,)):
        checker = ReceiptChecker(
            [world.key], tsa_roots=[tsa().root_cert] if roots else None, witnesses=witnesses
        )
        for item in items:  # the first check of a note and token: part by part
            digest = record_digest(item.record)
            assert check_item(item, checker) == verify._full_check(item, digest, checker)
        quick = 0
        for item in items:  # then the quick check, where it answers: the same checks
            digest = record_digest(item.record)
            got = verify._quick_check(item, digest, checker)
            full = verify._full_check(item, digest, checker)
            assert check_item(item, checker) == full
            if got is not None:
                quick += 1
                assert got == full and full.ok and repr(got) == repr(full)
        pending = roots and not anchored  # every receipt waits for its anchor: none valid
        assert quick == 0 if pending else quick >= size - 1  # all valid but the late leaf
        assert check_item(items[5], checker).ok is not roots


def test_a_leaf_time_at_the_anchor_limit_is_checked_in_full() -> None:
    """The quick check leaves a leaf time within a millisecond of the anchor's limit (genTime
    + accuracy + skew) to ``_parts``: at the limit the anchor is valid, a millisecond after it
    ``anchor-before-leaf`` fails, as ever."""
    world = _world_of(4, late=3)
    items = _items_of(world, 4)
    wide = ReceiptChecker([world.key], tsa_roots=[tsa().root_cert], skew=timedelta(days=2))
    assert check_item(items[0], wide).ok and check_item(items[3], wide).ok
    anchor = items[0].receipt.anchors[0]
    gen_time, latest_us = verify._QUICK[(wide, items[0].receipt.checkpoint, anchor.token, ())]
    slack_us = latest_us - (gen_time - EPOCH) // timedelta(microseconds=1) - 2 * 86_400_000_000
    leaf_ms = int.from_bytes(items[3].receipt.leaf[1:9], "big")
    for spare_ms, quick, ok in (
        (2, True, True),
        (1, True, True),
        (0, False, True),
        (-1, False, False),
    ):
        # the skew that puts the limit ``spare_ms`` after the late leaf's time
        skew = EPOCH + timedelta(milliseconds=leaf_ms + spare_ms) - gen_time
        checker = ReceiptChecker(
            [world.key], tsa_roots=[tsa().root_cert],
            skew=skew - timedelta(microseconds=slack_us),
        )  # fmt: skip
        assert check_item(items[0], checker).ok  # its note and anchor kept for ``_QUICK``
        digest = record_digest(items[3].record)
        assert (verify._quick_check(items[3], digest, checker) is not None) is quick
        got = check_item(items[3], checker)
        assert got == verify._full_check(items[3], digest, checker)
        assert got.ok is ok and (got.anchor == "valid") is ok


_TIMES = st.builds(
    lambda moment, fraction, offset: (
        rfc3339(moment.replace(microsecond=0))[:-1] + fraction + offset
    ),
    st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    ),
    st.sampled_from(["", ".5", ".123", ".000001", ".1234567"]),
    st.sampled_from(["Z", "+00:00", "+05:30", "-11:59", "+23:59"]),
)
_LEAF_MS = st.one_of(
    st.integers(min_value=0, max_value=2**64 - 1),
    st.integers(min_value=1_700_000_000_000, max_value=1_800_000_000_000),
    st.integers(min_value=253402300799000 - 10**9, max_value=253402300799999 + 10**9),
)
_SPANS = st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3650))


@given(_TIMES, _LEAF_MS, _SPANS, _SPANS, st.booleans(), st.data())
def test_a_time_check_on_integers_is_the_check_on_datetimes(
    text: str, leaf_ms: int, skew: timedelta, delay: timedelta, late: bool, data: st.DataObject
) -> None:
    record = cast(DecisionRecord, SimpleNamespace(time=text))
    claimed = verdicts._claimed_time(text)
    if claimed is not None and data.draw(st.booleans()):  # a leaf time near the claimed one
        near = (claimed - EPOCH) // timedelta(milliseconds=1)
        leaf_ms = max(0, near + data.draw(st.integers(-(10**10), 10**10)))
    policy = verdicts.TimePolicy(skew=skew, max_delay=delay, late_fails=late)
    for leaf in (leaf_ms, None):
        try:
            plain: object = verdicts._time_check(record, leaf, policy)
        except (OverflowError, ValueError) as exc:
            plain = type(exc)
        try:
            got: object = verdicts.time_check(record, leaf, policy)
        except (OverflowError, ValueError) as exc:
            got = type(exc)
        assert got == plain


def test_run_verdicts_kept_by_their_inputs_are_made_again_equal(tmp_path: Path) -> None:
    """``run_checks`` keeps a run's verdict by its records' verdicts (by identity), failures,
    steps, problem codes and chain: runs that differ in any of them get their own."""
    files = write_runs(tmp_path / "runs", RUNS)
    checker = ReceiptChecker([RUNS.world.key])
    for name in ("support", "review"):
        audit = audit_run(load_run(files[name]), checker)
        rows = timeline(audit)
        records = [(r.check, r.verdict) for r in rows]
        flagged = verdicts.Check(name="time", status=verdicts.WARNING, message="late by 1 d")
        late = verdicts._verdict_of((*records[0][1].checks[:2], flagged))
        chain = verdicts.Check(name="chain", status=verdicts.OK, message="seen")
        variants = [
            records,
            [(c, late) for c, _ in records],  # every record late: their steps named
            [
                (replace(c, record=replace(c.record, step=c.record.step + 1)), late)
                for c, _ in records
            ],  # the same, one step on
            [*records[:-1], (replace(records[-1][0], error="broken"), records[-1][1])],
            [*records[:-1], (replace(records[-1][0], error="x", anchor="pending"), late)],
        ]
        for _ in range(2):
            for variant in variants:
                for given_chain in (None, chain):
                    got = verdicts.run_checks(audit, variant, chain=given_chain)
                    assert got == verdicts._run_checks(audit, variant, given_chain)
            problem = RunProblem(code="missing", message="step 9 missing")
            other = replace(audit, problems=((problem, None),))
            got = verdicts.run_checks(other, records)
            assert got == verdicts._run_checks(other, records, None) and not got.ok
        assert len({verdicts.run_checks(audit, v).to_json_obj()["checks"].__repr__()
                    for v in variants}) == len(variants)  # fmt: skip


def test_a_time_check_on_integers_at_its_bounds() -> None:
    """A claim exactly the skew after the leaf time, or the leaf time exactly the delay after
    the claim, passes; a microsecond or a millisecond more fails, on either path."""
    policy = verdicts.TimePolicy(skew=timedelta(seconds=5), max_delay=timedelta(minutes=2))
    leaf_ms = 1_750_000_000_000
    leaf = EPOCH + timedelta(milliseconds=leaf_ms)
    cases = [
        (leaf + timedelta(seconds=5), verdicts.OK),
        (leaf + timedelta(seconds=5, microseconds=1), verdicts.FAILED),  # postdated
        (leaf - timedelta(minutes=2), verdicts.OK),
        (leaf - timedelta(minutes=2, microseconds=1), verdicts.WARNING),  # late
    ]
    for claimed, status in cases:
        record = cast(DecisionRecord, SimpleNamespace(time=rfc3339(claimed)))
        got = verdicts.time_check(record, leaf_ms, policy)
        assert got == verdicts._time_check(record, leaf_ms, policy)
        assert got.status == status, (claimed, got)
