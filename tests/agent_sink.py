"""An in-memory sink for the agent SDK's run context (no log): records kept in order."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ledger.records.commitments import Kept
from ledger.records.decision import (
    DecisionRecord,
    RunClosed,
    record_digest,
)
from ledger.records.runs import check_run
from ledger_client.receipts.receipt import Receipt
from ledger_client.sdk.decorators import decision


class Sink:
    """Collects submitted records in order, like a client would send them."""

    def __init__(self) -> None:
        self.records: list[DecisionRecord] = []
        self.disclosures: dict[bytes, tuple[Kept, ...]] = {}
        self.lock = threading.Lock()

    def submit(self, record: DecisionRecord, *, disclosures: Sequence[Kept] = ()) -> bytes:
        with self.lock:
            self.records.append(record)
            digest = record_digest(record)
            self.disclosures[digest] = tuple(disclosures)
            return digest

    def flush(self, timeout: float | None = None, *, checkpoint: bool = False) -> bool:
        return True

    def receipts(self, digests: Sequence[bytes], *, timeout: float = 30.0) -> list[Receipt]:
        raise NotImplementedError

    def by_kind(self, kind: str) -> list[DecisionRecord]:
        return [r for r in self.records if r.kind == kind]

    def hex(self, record: DecisionRecord) -> str:
        return record_digest(record).hex()


def assert_run_ok(sink: Sink) -> None:
    """Steps are 0..n-1 in submission order, parents come earlier, run_closed lists them all."""
    assert [r.step for r in sink.records] == list(range(len(sink.records)))
    report = check_run(sink.records)
    assert report.ok, report.problems
    assert isinstance(sink.records[-1].payload, RunClosed)


# --- work a child process does inside its parent's run (importable: spawned children load it) --


@decision("tool_call", name="child_step")
def child_step(text: str) -> str:
    """A decorated call made in a child process."""
    return text.upper()


def child_work(text: str) -> None:
    """The target a test's child process runs (``ledger_process``)."""
    child_step(text)
