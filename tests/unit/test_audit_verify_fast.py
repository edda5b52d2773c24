"""The index's per-receipt checks made with fewer steps (``ledger_client.audit.verify``) answer
as the plain steps do: a ``RecordCheck`` set slot by slot equals the one the constructor makes,
and a checkpoint note kept for a checker opens as ``open_note`` opens it, a failing one raising
each time and never taken for another checker's verdict."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from ledger.core.errors import LedgerError
from ledger.core.note import Ed25519Signer
from ledger_client.audit import verify
from ledger_client.audit.verify import RecordCheck, audit_run
from ledger_client.receipts.run_load import load_run
from ledger_client.receipts.verify import ReceiptChecker
from tests.audit_world import build, write_runs

RUNS = build()


def test_a_check_set_slot_by_slot_is_the_constructors(tmp_path: Path) -> None:
    files = write_runs(tmp_path / "runs", RUNS)
    audit = audit_run(load_run(files["support"]), ReceiptChecker([RUNS.world.key]))
    assert audit.checks
    for check in audit.checks:
        made = RecordCheck(**{f.name: getattr(check, f.name) for f in fields(RecordCheck)})
        assert made == check and repr(made) == repr(check)


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
