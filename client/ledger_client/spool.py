"""The agent client's durable spool: an append-only file of records on their way to the log.

A record is written here before it is sent, so it survives an agent crash or a log outage and is
sent again on the next start (the log deduplicates by digest, so a resend is harmless). Only the
record (with commitments, never their clear values) and its digest are kept; the disclosures
(clear values and salts) are written only when the client is asked to (``spool_disclosures``).

File format, version 1 (all integers big-endian)::

    file    := header frame*
    header  := "LDGSPOOL" | version u8 = 0x01 | 7 zero bytes                      (16 bytes)
    frame   := type u8 | length u32 | body (length bytes) | crc u32                (9 + length)
               crc = CRC-32 (zlib.crc32, ISO-HDLC) over type | length | body
    type 'R' (0x52) record       body = record digest (32) | RFC 8785 canonical record JSON
    type 'D' (0x44) disclosures  body = record digest (32) | JSON array of disclosures
                                 ({"field_path", "salt", "value"}); follows its 'R' frame
    type 'A' (0x41) acknowledged body = offset u64: every 'R' frame (with its 'D' frame)
                                 that ends at or before this file offset was acknowledged by
                                 the log (sequenced and durable there)

Rules:

* An item ('R', and 'D' if any) is written with one ``write(2)``, so it survives the writer's
  crash as soon as ``append`` returns; ``sync`` (an ``fsync``) makes it survive a machine crash.
  The client syncs before it sends a batch, so the log never holds a digest whose record could
  still be lost here. 'A' frames are not synced: losing one only causes a resend.
* Acknowledgements are a prefix: items are sent and acknowledged in file order.
* Opening reads every frame; a short frame or a CRC mismatch (a torn last write) ends the valid
  data and the file is truncated there (logged as a warning). The items after the last 'A'
  offset are pending.
* Compaction copies the pending items (not the 'A' frames) into ``<path>.tmp``, fsyncs it and
  renames it over the spool: on open, on close, and when the acknowledged prefix is at least
  ``compact_bytes`` and four times the pending part. A crash at any point leaves either file
  whole; a stale ``.tmp`` is deleted on open.
* One process at a time: ``<path>.lock`` is held with ``flock``; a second opener gets
  ``SpoolError``. POSIX only.

``append`` may be called from any thread; ``peek``, ``ack``, ``sync`` from one consumer thread.
``MemorySpool`` has the same interface and no durability (for tests and throwaway agents).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import struct
import threading
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Protocol

from ledger_client.sdk_errors import SpoolError

__all__ = [
    "HEADER",
    "MAGIC",
    "FileSpool",
    "MemorySpool",
    "Spool",
    "SpoolItem",
    "encode_frame",
    "read_spool",
]

_log = logging.getLogger("ledger_client.spool")

MAGIC = b"LDGSPOOL"
VERSION = 1
HEADER = MAGIC + bytes([VERSION]) + bytes(7)
RECORD, DISCLOSURES, ACK = 0x52, 0x44, 0x41
MAX_BODY = 64 << 20
DEFAULT_COMPACT_BYTES = 8 << 20
_HEAD = struct.Struct(">BI")
_CRC = struct.Struct(">I")
_OFFSET = struct.Struct(">Q")
_CHUNK = 1 << 20
_KINDS = (RECORD, DISCLOSURES, ACK)
_FRAMING = 9 + 32  # type, length, CRC and the digest that starts an 'R' or 'D' body


@dataclass(frozen=True, slots=True)
class SpoolItem:
    """One spooled record: digest, canonical JSON, and (only if asked) its disclosures."""

    digest: bytes
    record_json: bytes
    disclosures_json: bytes | None = None

    @property
    def size(self) -> int:
        """Bytes this item occupies on disk (its frames)."""
        extra = 0 if self.disclosures_json is None else _FRAMING + len(self.disclosures_json)
        return _FRAMING + len(self.record_json) + extra

    def encode(self) -> bytes:
        """The item's frames: 'R', then 'D' if it carries disclosures."""
        out = encode_frame(RECORD, self.digest + self.record_json)
        if self.disclosures_json is not None:
            out += encode_frame(DISCLOSURES, self.digest + self.disclosures_json)
        return out


class Spool(Protocol):
    """What the sender needs from a spool (``FileSpool`` or ``MemorySpool``)."""

    @property
    def pending_count(self) -> int: ...

    @property
    def pending_bytes(self) -> int: ...

    def append(self, item: SpoolItem) -> None: ...

    def peek(self, max_items: int) -> list[SpoolItem]: ...

    def ack(self, count: int) -> None: ...

    def sync(self) -> None: ...

    def close(self) -> None: ...


def encode_frame(kind: int, body: bytes) -> bytes:
    """One frame: type, length, body, CRC-32 over all three (module docstring)."""
    head = _HEAD.pack(kind, len(body))
    return head + body + _CRC.pack(zlib.crc32(body, zlib.crc32(head)))


# --- reading frames ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Frame:
    kind: int
    start: int
    end: int
    body: bytes


class _Torn(Exception):
    def __init__(self, offset: int, why: str) -> None:
        super().__init__(f"offset {offset}: {why}")
        self.offset = offset


class _Reader:
    """``pread`` through a 1 MiB window."""

    def __init__(self, fd: int, end: int) -> None:
        self._fd, self._end = fd, end
        self._base, self._buf = 0, b""

    def read(self, offset: int, n: int) -> bytes:
        if self._base <= offset and offset + n <= self._base + len(self._buf):
            return self._buf[offset - self._base : offset - self._base + n]
        self._buf = os.pread(self._fd, max(0, min(max(n, _CHUNK), self._end - offset)), offset)
        self._base = offset
        return self._buf[:n]


def _frames(fd: int, start: int, end: int) -> Iterator[_Frame]:
    """The frames in ``[start, end)``; raises ``_Torn`` at the first short or bad one."""
    reader, pos = _Reader(fd, end), start
    while pos < end:
        head = reader.read(pos, _HEAD.size)
        if len(head) < _HEAD.size:
            raise _Torn(pos, "short frame header")
        kind, length = _HEAD.unpack(head)
        if kind not in _KINDS or length > MAX_BODY:
            raise _Torn(pos, f"bad frame header (type {kind:#x}, length {length})")
        rest = reader.read(pos + _HEAD.size, length + _CRC.size)
        if len(rest) < length + _CRC.size:
            raise _Torn(pos, "short frame")
        body = rest[:length]
        if _CRC.unpack(rest[length:])[0] != zlib.crc32(body, zlib.crc32(head)):
            raise _Torn(pos, "CRC mismatch")
        if (kind != ACK and length < 32) or (kind == ACK and length != 8):
            raise _Torn(pos, f"frame type {kind:#x} with a {length}-byte body")
        yield _Frame(kind, pos, pos + _HEAD.size + length + _CRC.size, body)
        pos += _HEAD.size + length + _CRC.size


def _items(frames: Iterator[_Frame], max_items: int) -> Iterator[tuple[SpoolItem, int]]:
    """Group 'R' frames with their 'D' frame: (item, end offset of its last frame)."""
    item: SpoolItem | None = None
    end = 0
    count = 0
    for frame in frames:
        if frame.kind == RECORD:
            if item is not None:
                yield item, end
            if count == max_items:
                return
            item, end, count = SpoolItem(frame.body[:32], frame.body[32:]), frame.end, count + 1
        elif frame.kind == DISCLOSURES and item is not None and frame.body[:32] == item.digest:
            item, end = SpoolItem(item.digest, item.record_json, frame.body[32:]), frame.end
    if item is not None:
        yield item, end


def read_spool(path: str | Path) -> tuple[list[SpoolItem], list[SpoolItem]]:
    """Inspect a spool without locking it: (acknowledged items, pending items)."""
    with open(path, "rb") as f:
        fd, size = f.fileno(), os.fstat(f.fileno()).st_size
        if os.pread(fd, len(HEADER), 0) != HEADER:
            raise SpoolError(f"{path}: not a version-{VERSION} spool")
        frames: list[_Frame] = []
        with contextlib.suppress(_Torn):  # a torn tail is not data
            frames.extend(_frames(fd, len(HEADER), size))
    acked = max((_OFFSET.unpack(f.body)[0] for f in frames if f.kind == ACK), default=0)
    both = list(_items(iter(frames), len(frames)))
    return [i for i, end in both if end <= acked], [i for i, end in both if end > acked]


# --- the file spool -----------------------------------------------------------------------------


def _fsync_dir(path: Path) -> None:
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _lock(path: Path) -> int:
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SpoolError(f"{path}: the spool is in use by another process") from None
    return fd


class FileSpool:
    """The durable spool file (format and rules in the module docstring)."""

    def __init__(self, path: str | Path, *, compact_bytes: int = DEFAULT_COMPACT_BYTES) -> None:
        self.path = Path(path)
        self._compact_bytes = compact_bytes
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _lock(self.path)
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        self._tmp.unlink(missing_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        self._pending = 0
        self._ends: list[int] = []
        self._ack_off = self._end = self._synced = len(HEADER)
        try:
            self._recover()
        except BaseException:
            self._release()
            raise

    # --- state ------------------------------------------------------------------------------

    @property
    def pending_count(self) -> int:
        """Items written and not yet acknowledged."""
        return self._pending

    @property
    def pending_bytes(self) -> int:
        """Bytes of the file after the acknowledged prefix."""
        return self._end - self._ack_off

    def _recover(self) -> None:
        size = os.fstat(self._fd).st_size
        head = os.pread(self._fd, len(HEADER), 0)
        if size < len(HEADER) and HEADER.startswith(head):
            os.ftruncate(self._fd, 0)
            self._write(HEADER)
            os.fsync(self._fd)
            _fsync_dir(self.path)
            return
        if head != HEADER:
            raise SpoolError(f"{self.path}: not a version-{VERSION} spool")
        frames = self._valid_frames(size)
        acked = max((_OFFSET.unpack(f.body)[0] for f in frames if f.kind == ACK), default=0)
        ends = [end for _, end in _items(iter(frames), len(frames))]
        self._pending = sum(1 for end in ends if end > acked)
        self._ack_off = max([len(HEADER), *(end for end in ends if end <= acked)])
        self._end = self._synced = frames[-1].end if frames else len(HEADER)
        if self._ack_off > len(HEADER):
            self._compact()

    def _valid_frames(self, size: int) -> list[_Frame]:
        frames: list[_Frame] = []
        try:
            frames.extend(_frames(self._fd, len(HEADER), size))
        except _Torn as torn:
            _log.warning(
                "%s: dropping %d bytes after a torn write (%s)", self.path, size - torn.offset, torn
            )
            os.ftruncate(self._fd, torn.offset)
            os.fsync(self._fd)
        return frames

    # --- writing ----------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def append(self, item: SpoolItem) -> None:
        """Write one item (one ``write(2)``); on failure the file is cut back and nothing counts."""
        data = item.encode()
        with self._lock:
            self._check_open()
            try:
                self._write(data)
            except OSError as exc:
                os.ftruncate(self._fd, self._end)
                raise SpoolError(f"{self.path}: cannot write: {exc}") from exc
            self._end += len(data)
            self._pending += 1

    def sync(self) -> None:
        """``fsync`` everything written so far (consumer thread)."""
        end = self._end
        if end != self._synced:
            os.fsync(self._fd)
            self._synced = end

    def peek(self, max_items: int) -> list[SpoolItem]:
        """Up to ``max_items`` pending items, oldest first, without consuming them."""
        with self._lock:  # appends only grow the file; the consumer alone moves the rest
            self._check_open()
            fd, start, end = self._fd, self._ack_off, self._end
        try:
            pairs = list(_items(_frames(fd, start, end), max_items))
        except _Torn as torn:
            raise SpoolError(f"{self.path}: corrupt at {torn}") from None
        self._ends = [end for _, end in pairs]
        return [item for item, _ in pairs]

    def ack(self, count: int) -> None:
        """The first ``count`` items of the last ``peek`` were acknowledged by the log."""
        if not 0 < count <= len(self._ends):
            raise ValueError(f"ack of {count} items; the last peek returned {len(self._ends)}")
        with self._lock:
            self._check_open()
            self._ack_off = self._ends[count - 1]
            self._pending -= count
            self._ends = []
            acked = self._ack_off - len(HEADER)
            if acked >= self._compact_bytes and acked >= 4 * self.pending_bytes:
                self._compact()
            else:
                self._write(encode_frame(ACK, _OFFSET.pack(self._ack_off)))
                self._end += _HEAD.size + _OFFSET.size + _CRC.size

    # --- compaction and closing -------------------------------------------------------------

    def _compact(self) -> None:
        """Rewrite the file with only the pending items (module docstring)."""
        with open(self._tmp, "wb") as out:
            out.write(HEADER)
            for frame in _frames(self._fd, self._ack_off, self._end):
                if frame.kind != ACK:
                    out.write(encode_frame(frame.kind, frame.body))
            out.flush()
            os.fsync(out.fileno())
        os.replace(self._tmp, self.path)
        _fsync_dir(self.path)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        self._ack_off = len(HEADER)
        self._end = self._synced = os.fstat(self._fd).st_size
        self._ends = []

    def _check_open(self) -> None:
        if self._fd < 0:
            raise SpoolError(f"{self.path}: the spool is closed")

    def _release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def close(self) -> None:
        """Sync, compact away what was acknowledged, and release the lock. Idempotent."""
        with self._lock:
            if self._fd < 0:
                return
            try:
                if self._ack_off > len(HEADER):
                    self._compact()
                os.fsync(self._fd)
            finally:
                self._release()


# --- the memory spool ----------------------------------------------------------------------------


class MemorySpool:
    """The spool interface in memory: no durability, for tests and throwaway agents."""

    def __init__(self) -> None:
        self._items: deque[SpoolItem] = deque()
        self._bytes = 0
        self._peeked = 0
        self._lock = threading.Lock()

    @property
    def pending_count(self) -> int:
        return len(self._items)

    @property
    def pending_bytes(self) -> int:
        return self._bytes

    def append(self, item: SpoolItem) -> None:
        with self._lock:
            self._items.append(item)
            self._bytes += item.size

    def peek(self, max_items: int) -> list[SpoolItem]:
        with self._lock:
            items = list(islice(self._items, max_items))
            self._peeked = len(items)
            return items

    def ack(self, count: int) -> None:
        if not 0 < count <= self._peeked:
            raise ValueError(f"ack of {count} items; the last peek returned {self._peeked}")
        with self._lock:
            for _ in range(count):
                self._bytes -= self._items.popleft().size
            self._peeked = 0

    def sync(self) -> None:
        """Nothing to make durable."""

    def close(self) -> None:
        """Nothing to release."""
