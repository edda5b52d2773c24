"""Writing or completing a run's receipts file after the fact, from the agent's spool.

A run's receipts file (``ledger_run(..., receipts=PATH)``) is JSON lines
``{"record": <decision record>, "receipt": <receipt or null>}``, one per record in step order:
what ``ledger-verify run`` checks. When the log was unreachable while the run closed, the SDK
writes the file with ``"receipt": null`` lines (so the run's records are never only in the
spool) and raises ``TimeoutError``; the records stay spooled and are delivered on the next
start. This module finishes the job once they are logged:

* ``spooled_run``: the records of one run (with their disclosures, when the client spooled them)
  read from a spool file without locking it, acknowledged and pending alike. Read it *before*
  a client opens the spool: opening compacts the acknowledged records away.
* ``complete_run_receipts``: merge a receipts file (when there is one) with such records, ask
  the client for every missing receipt (waiting up to ``timeout`` for a covering checkpoint)
  and replace the file atomically (write, fsync, rename). Receipts already in the file are kept.

Pure of grpc: the client is any ``RecordSink`` (``LedgerClient``). ``ledger receipt run`` is
the command line for it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.core.errors import FormatError, InvalidRecordError
from ledger.core.jcs import canonical_bytes, loads_strict
from ledger.fileio.durable import write_file
from ledger.records.commitments import Disclosure
from ledger.records.decision import DecisionRecord, record_digest
from ledger_client.receipts.receipt import Receipt
from ledger_client.sdk.errors import SpoolError
from ledger_client.sdk.spool import read_spool

if TYPE_CHECKING:
    from ledger_client.sdk.context import RecordSink

__all__ = ["RunLine", "complete_run_receipts", "read_run_file", "spooled_run", "write_run_file"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLine:
    """One record of a run, its disclosures (if kept) and its receipt (None: not yet)."""

    record: DecisionRecord
    receipt: Receipt | None = None
    disclosures: tuple[Disclosure, ...] = ()

    @property
    def digest(self) -> bytes:
        return record_digest(self.record)

    def to_line(self) -> bytes:
        receipt = None if self.receipt is None else self.receipt.to_json_obj()
        return canonical_bytes({"record": self.record.to_json_obj(), "receipt": receipt}) + b"\n"


def _disclosures(raw: bytes | None) -> tuple[Disclosure, ...]:
    if raw is None:
        return ()
    values = json.loads(raw)
    return tuple(Disclosure.from_json_obj(v) for v in values)


def spooled_run(spool: str | Path, run_id: str | None = None) -> list[RunLine]:
    """The records in ``spool`` (of run ``run_id``; None: of the only run there), step order.

    Raises ``FormatError`` when ``run_id`` is None and the spool holds several runs, or when the
    spool or a spooled record does not parse.
    """
    try:
        acked, pending = read_spool(spool)
    except SpoolError as exc:
        raise FormatError(str(exc)) from None
    lines = []
    for item in [*acked, *pending]:
        if not item.record_json:
            continue  # a chain beacon: a digest logged with no record (sdk.agent)
        try:
            record = DecisionRecord.from_json(item.record_json)
        except InvalidRecordError as exc:
            raise FormatError(f"{spool}: a spooled record does not parse: {exc}") from None
        lines.append(RunLine(record=record, disclosures=_disclosures(item.disclosures_json)))
    runs = sorted({line.record.run_id for line in lines})
    if run_id is None and len(runs) > 1:
        raise FormatError(f"{spool} holds {len(runs)} runs ({', '.join(runs)}): name one")
    chosen = [line for line in lines if run_id is None or line.record.run_id == run_id]
    return sorted(_unique(chosen), key=lambda line: line.record.step)


def _unique(lines: Sequence[RunLine]) -> list[RunLine]:
    seen: dict[bytes, RunLine] = {}
    for line in lines:
        seen.setdefault(line.digest, line)
    return list(seen.values())


def read_run_file(path: str | Path) -> list[RunLine]:
    """The lines of a receipts file (``"receipt": null`` allowed)."""
    lines = []
    for number, raw in enumerate(Path(path).read_bytes().splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = loads_strict(raw)
            if not isinstance(obj, dict) or set(obj) != {"record", "receipt"}:
                raise FormatError("expected {'record', 'receipt'}")
            record = DecisionRecord.from_json_obj(obj["record"])
            receipt = None if obj["receipt"] is None else Receipt.from_json_obj(obj["receipt"])
        except FormatError as exc:
            raise FormatError(f"{path}:{number}: {exc}") from None
        lines.append(RunLine(record=record, receipt=receipt))
    return lines


def write_run_file(path: str | Path, lines: Sequence[RunLine]) -> Path:
    """Replace ``path`` with ``lines`` atomically (temporary file, fsync, rename, fsync of the
    folder)."""
    target = Path(path)
    write_file(target, b"".join(line.to_line() for line in lines))
    return target


def complete_run_receipts(
    client: RecordSink,
    path: str | Path,
    *,
    records: Sequence[RunLine] = (),
    with_disclosures: bool = False,
    timeout: float = 30.0,
) -> list[RunLine]:
    """Fill in every missing receipt of the run in ``path`` and ``records``; rewrite ``path``.

    Raises ``TimeoutError`` (from the client) when the log does not cover a record within
    ``timeout``; the file is then left as it was.
    """
    target = Path(path)
    merged = {line.digest: line for line in (read_run_file(target) if target.exists() else [])}
    for line in records:
        known = merged.get(line.digest)
        if known is None or (known.receipt is None and line.disclosures):
            merged[line.digest] = line if known is None else _with_disclosures(known, line)
    ordered = sorted(merged.values(), key=lambda line: line.record.step)
    missing = [line for line in ordered if line.receipt is None]
    found = client.receipts([line.digest for line in missing], timeout=timeout) if missing else []
    fetched = {line.digest: receipt for line, receipt in zip(missing, found, strict=True)}
    done = []
    for line in ordered:
        receipt = fetched.get(line.digest)
        if receipt is not None:
            shown = line.disclosures if with_disclosures else ()
            receipt = replace(receipt, record=line.record, disclosures=tuple(shown))
            line = RunLine(record=line.record, receipt=receipt, disclosures=line.disclosures)
        done.append(line)
    write_run_file(target, done)
    return done


def _with_disclosures(known: RunLine, spooled: RunLine) -> RunLine:
    return RunLine(record=known.record, receipt=known.receipt, disclosures=spooled.disclosures)
