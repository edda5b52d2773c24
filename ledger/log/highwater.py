"""The published high-water mark: the newest checkpoint the log ever handed out, kept outside
RocksDB so that a rolled-back data dir (a flipped WAL byte, a restored backup) cannot carry its
own, older idea of "published" back with it (docs/design.md "Rules of the house", rule 4).

The mark is one small file at a location configured apart from the data dir
(``[log] mark_file``), written before the checkpoint is stored or returned to anyone. It has two
fixed slots and is updated in place, one slot at a time, each write followed by ``fdatasync``
(one flush per checkpoint; no rename, no folder sync): a torn write can only damage the slot
being written, whose checkpoint nobody has seen yet, and the other slot still holds the previous
mark. Format (integers big-endian)::

    file := slot slot                       each slot SLOT_BYTES (16 KiB), zero-padded
    slot := "LDGMARK1" | sequence u64 | length u32 | crc32 u32 | body (length bytes)
            crc32 (zlib) over sequence | length | body; the valid slot with the larger
            sequence is the mark
    body := UTF-8 JSON {"format": "decision-ledger/high-water/v1",
                        "note": "<the signed checkpoint note, C2SP tlog-checkpoint>",
                        "restore": null | {"tree_size": N, "accepted_ms": T}}

``restore`` is set by ``ledger restore accept`` when the operator starts a data dir whose tree is
behind the mark on purpose: the log then serves reads, refuses appends and signs nothing until
its tree is consistent with the mark again (``ledger restore catch-up``), which clears it.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from ledger.core.checkpoint import Checkpoint
from ledger.core.errors import FormatError, LedgerError
from ledger.core.note import SignedNote
from ledger.core.types import PublishedCheckpoint

__all__ = ["FORMAT", "HighWaterMark", "MarkState", "RestoreRecord"]

FORMAT = "decision-ledger/high-water/v1"
MAGIC = b"LDGMARK1"
SLOT_BYTES = 16 << 10
_HEAD = struct.Struct(">8sQII")  # magic, sequence, length, crc32


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoreRecord:
    """An operator accepted starting from a tree behind the mark (read-only until caught up)."""

    tree_size: int
    accepted_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkState:
    """What the mark file holds."""

    checkpoint: PublishedCheckpoint
    restore: RestoreRecord | None = None


def checkpoint_from_note(note: str) -> PublishedCheckpoint:
    """Parse a signed checkpoint note (signature not checked: the log wrote it)."""
    body = Checkpoint.from_text(SignedNote.from_text(note).text)
    return PublishedCheckpoint(
        origin=body.origin, size=body.size, root_hash=body.root_hash, note=note
    )


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _encode(state: MarkState) -> bytes:
    restore = state.restore
    doc = {
        "format": FORMAT,
        "note": state.checkpoint.note,
        "restore": None
        if restore is None
        else {"tree_size": restore.tree_size, "accepted_ms": restore.accepted_ms},
    }
    return json.dumps(doc, indent=1).encode()


def _decode(body: bytes) -> MarkState:
    doc = json.loads(body)
    if doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} mark")
    restore = doc.get("restore")
    return MarkState(
        checkpoint=checkpoint_from_note(doc["note"]),
        restore=None
        if restore is None
        else RestoreRecord(
            tree_size=int(restore["tree_size"]), accepted_ms=int(restore["accepted_ms"])
        ),
    )


def _slot(raw: bytes) -> tuple[int, bytes] | None:
    """(sequence, body) of an intact slot, else None."""
    if len(raw) < _HEAD.size or raw[:8] != MAGIC:
        return None
    sequence, length, crc = _HEAD.unpack(raw[: _HEAD.size])[1:]
    body = raw[_HEAD.size : _HEAD.size + length]
    if len(body) != length or zlib.crc32(raw[8:16] + raw[16:20] + body) != crc:
        return None
    return sequence, body


class HighWaterMark:
    """The mark file at ``path`` (format in the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._sequence: int | None = None

    def read(self) -> MarkState | None:
        """The mark, or None when no checkpoint was ever published with this mark file."""
        try:
            raw = self.path.read_bytes()[: 2 * SLOT_BYTES]
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FormatError(f"cannot read the high-water mark {self.path}: {exc}") from exc
        slots = [s for s in (_slot(raw[:SLOT_BYTES]), _slot(raw[SLOT_BYTES:])) if s is not None]
        try:
            if not slots:
                raise ValueError("no intact slot")
            sequence, body = max(slots)
            state = _decode(body)
        except (ValueError, KeyError, TypeError, AttributeError, LedgerError) as exc:
            raise FormatError(
                f"the high-water mark {self.path} is damaged ({exc}); it is the only record of "
                "what was published: restore it from a copy, never delete it to make the log start"
            ) from exc
        self._sequence = sequence
        return state

    def write(self, state: MarkState) -> None:
        """Record ``state`` durably (the other slot keeps the previous mark until it returns)."""
        body = _encode(state)
        if _HEAD.size + len(body) > SLOT_BYTES:
            raise FormatError(f"high-water mark of {len(body)} bytes does not fit a slot")
        if self._sequence is None and self.read() is None:
            self._create()
        sequence = (self._sequence or 0) + 1
        head = _HEAD.pack(MAGIC, sequence, len(body), 0)[:20]
        crc = zlib.crc32(head[8:] + body)
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.pwrite(fd, head + crc.to_bytes(4, "big") + body, (sequence % 2) * SLOT_BYTES)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        self._sequence = sequence

    def _create(self) -> None:
        """A new mark file: two empty slots, durable with its folder entry."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.pwrite(fd, bytes(2 * SLOT_BYTES), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(self.path.parent)
        self._sequence = 0
