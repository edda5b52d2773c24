"""``ledger_client.sdk.run_file``: a run's receipts file written or completed after the fact.

Records go through a real ``FileSpool``; receipts come from ``test_receipt.World`` (real
leaves, RFC 6962 proofs, Ed25519 checkpoints), handed out by a sink that answers like
``LedgerClient.receipt`` (and times out for records the log does not have).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ledger.core.errors import FormatError
from ledger.records.commitments import Kept
from ledger.records.decision import DecisionRecord, record_digest
from ledger_client.receipts.receipt import Receipt
from ledger_client.receipts.run_verify import RunItem, verify_run
from ledger_client.sdk.run_file import (
    RunLine,
    complete_run_receipts,
    read_run_file,
    spooled_run,
    write_run_file,
)
from ledger_client.sdk.spool import FileSpool, SpoolItem
from tests.receipt_world import RECORDS, World, make_record


class WorldSink:
    """Receipts of the records a ``World`` logged; others time out, like a client would."""

    def __init__(self, world: World, logged: Sequence[DecisionRecord]) -> None:
        self.world = world
        self.index = {record_digest(r): i for i, r in enumerate(logged)}
        self.asked: list[bytes] = []

    def receipts(self, digests: Sequence[bytes], *, timeout: float = 30.0) -> list[Receipt]:
        self.asked.extend(digests)
        unknown = [d for d in digests if d not in self.index]
        if unknown:
            raise TimeoutError(f"no receipts for {len(digests)} records within {timeout} s")
        size = len(self.world.leaves)
        return [self.world.receipt(self.index[d], size, anchored=False) for d in digests]

    def submit(self, record: DecisionRecord, *, disclosures: Sequence[Kept] = ()) -> bytes:
        raise AssertionError("not used")

    def flush(self, timeout: float | None = None, *, checkpoint: bool = False) -> bool:
        return True


def spool_with(path: Path, records: Sequence[DecisionRecord]) -> None:
    spool = FileSpool(path)
    for record in records:
        spool.append(SpoolItem(record_digest(record), record.to_json().encode()))
    spool.close()


def test_spooled_run_picks_one_run(tmp_path: Path) -> None:
    other = make_record(0, run="run-other")
    spool_with(tmp_path / "a.spool", [*RECORDS[:3], other, *RECORDS[3:], RECORDS[1]])
    with pytest.raises(FormatError, match="2 runs"):
        spooled_run(tmp_path / "a.spool")
    lines = spooled_run(tmp_path / "a.spool", RECORDS[0].run_id)
    assert [line.record for line in lines] == list(RECORDS)  # step order, no duplicate
    assert spooled_run(tmp_path / "a.spool", "run-other")[0].record == other
    (tmp_path / "junk.spool").write_bytes(b"junk")
    with pytest.raises(FormatError):
        spooled_run(tmp_path / "junk.spool")


def test_complete_keeps_receipts_and_fills_the_rest(tmp_path: Path) -> None:
    world = World([record_digest(r) for r in RECORDS])
    sink = WorldSink(world, RECORDS)
    path = tmp_path / "run.jsonl"
    kept = world.receipt(0, len(RECORDS), anchored=False, record=RECORDS[0])
    write_run_file(path, [RunLine(record=RECORDS[0], receipt=kept), RunLine(record=RECORDS[1])])
    spooled = [RunLine(record=r) for r in RECORDS[1:]]
    lines = complete_run_receipts(sink, path, records=spooled, timeout=1)
    assert [line.record for line in lines] == list(RECORDS)
    assert sink.asked == [record_digest(r) for r in RECORDS[1:]]  # the kept one is not asked
    assert read_run_file(path)[0].receipt == kept
    items = [RunItem(source=str(i), record=x.record, receipt=x.receipt)  # type: ignore[arg-type]
             for i, x in enumerate(read_run_file(path))]  # fmt: skip
    assert verify_run(items, [world.key]).ok


def test_a_record_the_log_lacks_times_out_and_leaves_the_file(tmp_path: Path) -> None:
    world = World([record_digest(r) for r in RECORDS[:2]])
    path = tmp_path / "run.jsonl"
    write_run_file(path, [RunLine(record=r) for r in RECORDS])
    before = path.read_bytes()
    with pytest.raises(TimeoutError):
        complete_run_receipts(WorldSink(world, RECORDS[:2]), path, timeout=0.1)
    assert path.read_bytes() == before
    assert [line.receipt for line in read_run_file(path)] == [None] * len(RECORDS)


def test_run_file_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"record": null}\n')
    with pytest.raises(FormatError, match=r"bad\.jsonl:1"):
        read_run_file(path)
