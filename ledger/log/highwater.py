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

Beside the mark, ``<mark>.acked`` holds the acknowledged tree size (``AckedSize``): after each
group commit's WAL sync and before any of its appends is acknowledged, the new tree size is
written there the same way (two slots, ``pwrite`` + ``fdatasync``). A data dir whose storage lost
synced WAL writes then starts below that size, and the log refuses, naming the lost range,
instead of handing the lost indexes to other records. (A disk that loses synced writes to both
files is not caught here.)

``restore`` is set by ``ledger restore accept`` when the operator starts a data dir whose tree is
behind the mark on purpose: the log then serves reads, refuses appends and signs nothing until
its tree is consistent with the mark again (``ledger restore catch-up``), which clears it.
"""

from __future__ import annotations

import errno
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
from ledger.fileio.durable import fdatasync_fd, fsync_dir, fsync_fd, open_fd

__all__ = ["FORMAT", "AckedSize", "HighWaterMark", "MarkState", "RestoreRecord", "acked_path"]

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
    """The mark file at ``path`` (format in the module docstring). Once reserved or written,
    the file stays open until ``close``: a checkpoint never needs a new file descriptor."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._sequence: int | None = None
        self._fd: int | None = None

    def reserve(self) -> None:
        """Open the mark file now, when it exists, and keep it open: publishing a checkpoint
        then needs no new file descriptor (a reader holding every descriptor cannot fail it)."""
        if self._fd is None and self.path.exists():
            self._fd = open_fd(self.path, os.O_RDWR)

    def close(self) -> None:
        """Release the file descriptor."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def read(self) -> MarkState | None:
        """The mark, or None when no checkpoint was ever published with this mark file."""
        try:
            if self._fd is not None:
                raw = os.pread(self._fd, 2 * SLOT_BYTES, 0)
            else:
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
        self.reserve()
        fd = self._fd
        if fd is None:  # read before, gone now
            raise FileNotFoundError(errno.ENOENT, "the high-water mark was deleted", str(self.path))
        os.pwrite(fd, head + crc.to_bytes(4, "big") + body, (sequence % 2) * SLOT_BYTES)
        fdatasync_fd(fd)
        if os.fstat(fd).st_nlink == 0:  # kept open: a mark deleted meanwhile is not written
            raise FileNotFoundError(errno.ENOENT, "the high-water mark was deleted", str(self.path))
        self._sequence = sequence

    def _create(self) -> None:
        """A new mark file: two empty slots, durable with its folder entry."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_fd(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.pwrite(fd, bytes(2 * SLOT_BYTES), 0)
            fsync_fd(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        fsync_dir(self.path.parent)
        self._sequence = 0


ACKED_MAGIC = b"LDGACKD1"
ACKED_SLOT = 512
_ACKED = struct.Struct(">8sQQI")  # magic, sequence, size, crc32 (over sequence | size)


def acked_path(mark_path: Path) -> Path:
    """Where the acknowledged size lives: beside the mark (``<mark>.acked``)."""
    return mark_path.with_name(mark_path.name + ".acked")


def _acked_slot(raw: bytes) -> tuple[int, int] | None:
    """(sequence, size) of an intact slot, else None."""
    if len(raw) < _ACKED.size or raw[:8] != ACKED_MAGIC:
        return None
    _, sequence, size, crc = _ACKED.unpack(raw[: _ACKED.size])
    if zlib.crc32(raw[8:24]) != crc:
        return None
    return sequence, size


class AckedSize:
    """The acknowledged tree size outside RocksDB (module docstring). The file is opened once
    and kept open: a group commit never needs a new file descriptor."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._sequence = 0

    def read(self) -> int | None:
        """The recorded size, or None when nothing was ever acknowledged with this file."""
        try:
            raw = self.path.read_bytes()[: 2 * ACKED_SLOT]
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FormatError(f"cannot read the acknowledged size {self.path}: {exc}") from exc
        slots = [s for s in (_acked_slot(raw[:ACKED_SLOT]), _acked_slot(raw[ACKED_SLOT:])) if s]
        if not slots:
            if not raw.strip(b"\0"):
                return None  # created, never written (a crash right after creating it)
            raise FormatError(
                f"the acknowledged size {self.path} is damaged (no intact slot); restore it from "
                "a copy, never delete it to make the log start"
            )
        sequence, size = max(slots)
        self._sequence = max(self._sequence, sequence)
        return size

    def write(self, size: int) -> None:
        """Record ``size`` durably (the other slot keeps the previous size until it returns)."""
        if self._fd is None:
            self._open()
        assert self._fd is not None
        sequence = self._sequence + 1
        head = _ACKED.pack(ACKED_MAGIC, sequence, size, 0)[:24]
        slot = head + zlib.crc32(head[8:]).to_bytes(4, "big")
        os.pwrite(self._fd, slot, (sequence % 2) * ACKED_SLOT)
        fdatasync_fd(self._fd)
        self._sequence = sequence

    def close(self) -> None:
        """Release the file descriptor."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> None:
        if self.read() is None and not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_fd(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.pwrite(fd, bytes(2 * ACKED_SLOT), 0)
                fsync_fd(fd)
            except BaseException:
                os.close(fd)
                raise
            fsync_dir(self.path.parent)
            self._fd = fd
            return
        self._fd = open_fd(self.path, os.O_RDWR)

    def reserve(self) -> None:
        """Open (or create) the file now and keep it open (``HighWaterMark.reserve``)."""
        if self._fd is None:
            self._open()
