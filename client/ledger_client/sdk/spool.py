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
* Opening reads every frame. At a short frame or a CRC mismatch it resynchronises: it looks for
  the next offset where a whole frame with a valid CRC starts and goes on from there. The bytes
  skipped (a damaged frame, or a torn last write) are appended to ``<path>.quarantine`` for
  inspection, logged as a warning, and the spool is rewritten without them: every intact record
  after a damaged frame is still delivered; only a torn final frame is lost. (A damaged 16-byte
  header refuses to open, leaving the file untouched.) The items after the last 'A' offset are
  pending.
* Quarantine file: chunks, each ``"LDGQUAR1" | spool offset u64 | length u32 | the bytes``,
  appended and fsynced before the spool is rewritten.
* Compaction copies the pending items (not the 'A' frames) into a temporary file
  (``ledger.fileio.durable.write_file``, mode 0600), fsyncs it and renames it over the spool:
  on open, on close, and when the acknowledged prefix is at least ``compact_bytes`` and four
  times the pending part. A crash at any point leaves either file whole; a stale temporary
  file is deleted on open. The spool and its quarantine file are created 0600 (they may hold
  disclosures).
* One process at a time: ``<path>.lock`` is held with ``flock``; a second opener gets
  ``SpoolError``. POSIX only.

``append`` may be called from any thread; ``peek``, ``ack``, ``sync`` from one consumer thread.
``MemorySpool`` has the same interface and no durability (for tests and throwaway agents).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections import deque
from collections.abc import Iterator
from itertools import chain, islice
from pathlib import Path
from typing import Protocol

from ledger.fileio.durable import fsync_dir, fsync_fd, remove_temporaries, write_file
from ledger_client.sdk.errors import SpoolError
from ledger_client.sdk.spool_format import (
    _CRC,
    _HEAD,
    _LEN,
    _OFFSET,
    _QUARANTINE,
    ACK,
    DEFAULT_COMPACT_BYTES,
    HEADER,
    MAGIC,
    VERSION,
    SpoolItem,
    _frames,
    _items,
    _scan,
    _Torn,
    encode_frame,
)

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


def read_spool(path: str | Path) -> tuple[list[SpoolItem], list[SpoolItem]]:
    """Inspect a spool without locking it: (acknowledged items, pending items)."""
    with open(path, "rb") as f:
        fd, size = f.fileno(), os.fstat(f.fileno()).st_size
        if os.pread(fd, len(HEADER), 0) != HEADER:
            raise SpoolError(f"{path}: not a version-{VERSION} spool")
        frames, _ = _scan(fd, len(HEADER), size)  # damaged and torn bytes are not data
    acked = max((_OFFSET.unpack(f.body)[0] for f in frames if f.kind == ACK), default=0)
    both = list(_items(iter(frames), len(frames)))
    return [i for i, end in both if end <= acked], [i for i, end in both if end > acked]


# --- the file spool -----------------------------------------------------------------------------


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
        self.path.with_name(self.path.name + ".tmp").unlink(missing_ok=True)  # older versions
        remove_temporaries(self.path)
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
            fsync_fd(self._fd)
            fsync_dir(self.path.parent)
            return
        if head != HEADER:
            raise SpoolError(f"{self.path}: not a version-{VERSION} spool")
        frames, damaged = _scan(self._fd, len(HEADER), size)
        acked = max((_OFFSET.unpack(f.body)[0] for f in frames if f.kind == ACK), default=0)
        pairs = list(_items(iter(frames), len(frames)))
        self._pending = sum(1 for _, end in pairs if end > acked)
        self._ack_off = max([len(HEADER), *(end for _, end in pairs if end <= acked)])
        self._end = self._synced = size
        if damaged:
            self._quarantine(damaged)
            self._rewrite([item for item, end in pairs if end > acked])
        elif self._ack_off > len(HEADER):
            self._compact()

    def _quarantine(self, damaged: list[tuple[int, int, str]]) -> None:
        """Keep the skipped bytes in ``<path>.quarantine`` (durably) before they leave the spool."""
        qpath = self.path.with_name(self.path.name + ".quarantine")
        with open(os.open(qpath, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as out:
            for start, end, why in damaged:
                last = end == os.fstat(self._fd).st_size
                _log.warning(
                    "%s: %d bytes at offset %d skipped (%s%s); kept in %s",
                    self.path,
                    end - start,
                    start,
                    why,
                    ", a torn last write" if last else "; the records after it are kept",
                    qpath,
                )
                out.write(_QUARANTINE + _OFFSET.pack(start) + _LEN.pack(end - start))
                out.write(os.pread(self._fd, end - start, start))
            out.flush()
            fsync_fd(out.fileno())

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
            fsync_fd(self._fd)
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
        self._replace(
            encode_frame(frame.kind, frame.body)
            for frame in _frames(self._fd, self._ack_off, self._end)
            if frame.kind != ACK
        )

    def _rewrite(self, pending: list[SpoolItem]) -> None:
        """Rewrite the file with exactly ``pending`` (after damage was quarantined)."""
        self._replace(item.encode() for item in pending)
        self._pending = len(pending)

    def _replace(self, chunks: Iterator[bytes]) -> None:
        write_file(self.path, chain((HEADER,), chunks), mode=0o600)
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
                fsync_fd(self._fd)
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
