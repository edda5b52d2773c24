"""The witness's durable state: an append-only journal of the latest checkpoint cosigned per log.

c2sp.org/tlog-witness requires the state to be persisted before a cosignature is returned.
One record is one JSON line appended and ``fdatasync``-ed: one disk flush per state change
(a temp file + rename needs two, with the folder's). ``state.jsonl``::

    {"format": "ledger-witness-state/v1"}
    {"origin": ..., "size": N, "root_hash": base64, "checkpoint": "<signed note>"}
    ...                                   the last line of an origin is its current record

A crash can leave only a torn last line (no final newline): it was never acknowledged, so it is
dropped (and cut off before the next append). Any other unparseable line is refused
(``FormatError``). Past ``COMPACT_AT`` lines the journal is rewritten atomically with one line
per origin (temp file, fsync, rename, fsync of the folder).
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any, BinaryIO

from ledger.core.errors import FormatError
from ledger.fileio.durable import fdatasync_fd, write_file
from ledger.witness.core import LogRecord

__all__ = [
    "COMPACT_AT",
    "JOURNAL",
    "STATE_FORMAT",
    "StateJournal",
    "load_records",
]

JOURNAL = "state.jsonl"
STATE_FORMAT = "ledger-witness-state/v1"
COMPACT_AT = 1_000
_HEADER = json.dumps({"format": STATE_FORMAT}) + "\n"


def _line(record: LogRecord) -> str:
    item = {
        "origin": record.origin,
        "size": record.size,
        "root_hash": base64.b64encode(record.root_hash).decode(),
        "checkpoint": record.note,
    }
    return json.dumps(item, sort_keys=True) + "\n"


def _record(item: Any) -> LogRecord:
    if not isinstance(item, dict) or set(item) != {"origin", "size", "root_hash", "checkpoint"}:
        raise ValueError("want origin, size, root_hash and checkpoint")
    size, origin, note = item["size"], item["origin"], item["checkpoint"]
    if not isinstance(size, int) or not isinstance(origin, str) or not isinstance(note, str):
        raise ValueError("mistyped field")
    root = base64.b64decode(item["root_hash"], validate=True)
    return LogRecord(origin=origin, size=size, root_hash=root, note=note)


def _parse(data: bytes, path: Path) -> tuple[dict[str, LogRecord], int, int]:
    """(records, length of the complete lines, number of complete lines)."""
    if not data:
        return {}, 0, 0
    *complete, torn = data.split(b"\n")
    if not complete or complete[0].decode(errors="replace") + "\n" != _HEADER:
        raise FormatError(f"{path}: not a {STATE_FORMAT} journal")
    records: dict[str, LogRecord] = {}
    for number, raw in enumerate(complete[1:], 2):
        try:
            record = _record(json.loads(raw))
        except (ValueError, KeyError, TypeError) as exc:
            raise FormatError(f"{path}:{number}: malformed record: {exc}") from None
        records[record.origin] = record
    return records, len(data) - len(torn), len(complete)


def load_records(folder: Path) -> dict[str, LogRecord]:
    """The latest cosigned checkpoint of every log (empty when there is no journal)."""
    path = folder / JOURNAL
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    return _parse(data, path)[0]


class StateJournal:
    """The open journal of one state folder (one writer: the caller holds the folder lock)."""

    def __init__(self, folder: Path) -> None:
        self._path = folder / JOURNAL
        data = self._path.read_bytes() if self._path.exists() else b""
        self.records, valid, self._lines = _parse(data, self._path)
        if not data:
            write_file(self._path, _HEADER)
            self._lines = 1
        elif valid < len(data):  # a torn last line: never acknowledged, cut it off
            os.truncate(self._path, valid)
        self._file: BinaryIO = self._path.open("ab")

    def put(self, record: LogRecord) -> None:
        """Append ``record`` durably (it becomes its origin's current record)."""
        self._file.write(_line(record).encode())
        self._file.flush()
        fdatasync_fd(self._file.fileno())
        self.records = {**self.records, record.origin: record}
        self._lines += 1
        if self._lines > COMPACT_AT:
            self._compact()

    def _compact(self) -> None:
        self._file.close()
        write_file(self._path, _HEADER + "".join(_line(r) for r in self.records.values()))
        self._lines = 1 + len(self.records)
        self._file = self._path.open("ab")

    def close(self) -> None:
        """Close the file."""
        self._file.close()
