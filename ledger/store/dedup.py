"""The derived dedup table: record digest -> entry index, one file beside RocksDB's files.

The entry bundles are the source of truth (each v1 leaf holds its record digest); this table
is derived from them, so it is never backed up and is rebuilt wherever it is missing, damaged
or from another log. It replaced the ``digests`` column family (one RocksDB key per entry),
whose memtable inserts, flushes and compactions of random keys cost about 8 of 11 µs of server
CPU per record under B2 (docs/benchmarks.md "The dedup index's share of B2, 2026-12-02
00:37–00:47 (load average 6.1–7.3)"; the table's figures: docs/benchmarks.md "The derived
dedup table, 2026-12-02 03:07–03:18 (load average 6.9–12.0)").

File ``LEDGER-DEDUP`` (all integers little-endian), memory-mapped:

    offset 0 and 4096   two header copies (one per page), the valid one with the larger
                        ``seq`` counts: magic (16) || seq (8) || key (16) || bits (1) ||
                        covered (8) || count (8) || root (32) || CRC-32 of the above (4)
    offset 8192         2**bits slots of 12 bytes: ledger/core/hot.py "dedup_insert"

``key`` is 16 random bytes drawn when the table is built: the slots are keyed fingerprints
(``SHA-256(key || digest)``), so clients, who choose digests freely, cannot pile them onto one
probe chain. A look-up answers candidates; the store confirms each against the stored leaf
(same digest, index below the tree size), so a stale, torn or colliding slot never gives a
wrong answer. ``covered`` says which entries are surely in the file: the header is written
only after the slots' pages are flushed (``fdatasync``), and names the tree root at
``covered`` so a table of another log, or of a history rolled back and regrown since, is
rebuilt. Torn header writes fail their CRC and the other copy counts. On open, entries from
``covered`` to the tree size are inserted again from their bundles (inserting a pair already
there writes nothing). The table is kept at most half full: when an insert would pass that, a
table of twice the slots is written beside it from the fingerprints it holds (no bundle read),
flushed and renamed over it. Its disk blocks are allocated up front (``posix_fallocate``), so
a full disk fails the growth with an error instead of a fault on a mapped page.
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path

from ledger.core import accel
from ledger.core.errors import StorageError
from ledger.fileio.durable import fdatasync_fd, fsync_dir, replace_file

__all__ = ["FILE", "FP_MASK", "DedupTable", "Header", "bits_for"]

FILE = "LEDGER-DEDUP"
MAGIC = b"ledger-dedup-v1\n"
SLOT = 12
COPY = 4096  # each header copy on its own page
HEADER = 2 * COPY  # the slots start here
FP_MASK = (1 << 48) - 1  # fingerprints: 48 bits (tests narrow it to force collisions)
MIN_BITS = 12
_LAYOUT = struct.Struct("<16sQ16sBQQ32s")
_CRC = struct.Struct("<I")


def bits_for(entries: int) -> int:
    """Slots (as a power of two) that keep ``entries`` at most half full."""
    return max(MIN_BITS, (2 * entries - 1).bit_length() if entries else 0)


@dataclass(frozen=True, slots=True)
class Header:
    """One header copy: ``covered`` entries are surely in the flushed slots."""

    seq: int
    key: bytes
    bits: int
    covered: int
    count: int
    root: bytes

    def to_bytes(self) -> bytes:
        body = _LAYOUT.pack(
            MAGIC, self.seq, self.key, self.bits, self.covered, self.count, self.root
        )
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def from_bytes(cls, raw: bytes) -> Header | None:
        """The header in ``raw``, or None when torn or not one."""
        body, crc = raw[: _LAYOUT.size], raw[_LAYOUT.size : _LAYOUT.size + _CRC.size]
        if len(crc) != _CRC.size or _CRC.unpack(crc)[0] != zlib.crc32(body):
            return None
        magic, seq, key, bits, covered, count, root = _LAYOUT.unpack(body)
        if magic != MAGIC or not MIN_BITS <= bits <= 47:
            return None
        return cls(seq=seq, key=key, bits=bits, covered=covered, count=count, root=root)


class DedupTable:
    """One mapped table file (``open`` / ``build``); the writer inserts, anyone finds."""

    def __init__(self, path: Path, fd: int, mapping: mmap.mmap, header: Header) -> None:
        self.path = path
        self._fd = fd
        self._map = mapping
        self._slots = memoryview(mapping)[HEADER:]
        self.header = header
        self.count = header.count  # occupied slots (``open`` counts them: a crash leaves more)
        self.inode = os.fstat(fd).st_ino
        self.mask = FP_MASK
        # (digests, key, mask, their fingerprints) of the last look-up, for the insert after it
        self._last: tuple[bytes, bytes, int, bytes] | None = None

    @property
    def capacity(self) -> int:
        """Slots."""
        return 1 << self.header.bits

    @classmethod
    def open(cls, path: Path, *, writable: bool) -> tuple[DedupTable | None, str]:
        """The table at ``path``, or None and why it cannot be used (missing, torn headers,
        wrong size)."""
        try:
            fd = os.open(path, (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC)
        except FileNotFoundError:
            return None, "there is none"
        except OSError as exc:
            return None, f"cannot open it ({exc})"
        try:
            first, second = os.pread(fd, 128, 0), os.pread(fd, 128, COPY)
            found = [h for h in (Header.from_bytes(first), Header.from_bytes(second)) if h]
            if not found:
                os.close(fd)
                return None, "both header copies are damaged"
            header = max(found, key=lambda h: h.seq)
            size = os.fstat(fd).st_size
            if size != HEADER + SLOT * (1 << header.bits):
                os.close(fd)
                return None, f"{size} bytes, its header wants {HEADER + (SLOT << header.bits)}"
            access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
            mapping = mmap.mmap(fd, size, access=access)
        except OSError as exc:
            os.close(fd)
            return None, f"cannot read it ({exc})"
        table = cls(path, fd, mapping, header)
        if writable:  # slots written after the header (then a crash) count too: growth needs them
            table.count = accel.dedup_count(table._slots)
        return table, ""

    @classmethod
    def build(
        cls,
        path: Path,
        entries: int,
        bundles: Iterable[tuple[int, bytes]],
        *,
        key: bytes | None = None,
        mask: int = FP_MASK,
    ) -> DedupTable:
        """A new table (a fresh key) for ``entries`` entries from ``bundles`` ((first index,
        N x 32 digests) in any order), written beside ``path`` and not yet flushed or in place
        (``flush`` then ``install``)."""
        bits = bits_for(entries)
        header = Header(
            seq=0, key=key or os.urandom(16), bits=bits, covered=0, count=0, root=bytes(32)
        )
        table = cls._create(path.with_name(path.name + ".new"), header)
        table.mask = mask
        try:
            for first, digests in bundles:
                table.insert(first, digests)
        except BaseException:
            table.discard()
            raise
        return table

    @classmethod
    def _create(cls, path: Path, header: Header) -> DedupTable:
        size = HEADER + SLOT * (1 << header.bits)
        with suppress(FileNotFoundError):
            path.unlink()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            os.posix_fallocate(fd, 0, size)  # zeroed, and blocks there before any page fault
            mapping = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
        except OSError as exc:
            os.close(fd)
            with suppress(FileNotFoundError):
                path.unlink()
            raise StorageError(
                f"cannot make the dedup table {path} ({size:,} bytes): {exc}"
            ) from exc
        return cls(path, fd, mapping, header)

    def insert(self, first: int, digests: bytes) -> None:
        """Put the digests of entries ``first ..`` (room made by ``reserve``)."""
        fingerprints = self._take_fingerprints(digests)
        try:
            written = accel.dedup_insert_fps(self._slots, fingerprints, first)
        except ValueError as exc:  # a full table: the store grows it first, so never here
            raise StorageError(f"dedup table {self.path}: {exc}") from exc
        self.count += written

    def find(self, digests: bytes) -> list[int]:
        """Flat [position, index, ...] candidates (``ledger.core.hot.dedup_find``). The
        fingerprints are kept for an ``insert`` of the same digests (a group commit looks its
        digests up, then inserts the new ones: all of them, in the common case)."""
        key, mask = self.header.key, self.mask
        fingerprints = accel.dedup_fingerprints(key, mask, digests)
        self._last = (digests, key, mask, fingerprints)
        return accel.dedup_find_fps(self._slots, fingerprints)

    def _take_fingerprints(self, digests: bytes) -> bytes:
        """The fingerprints of ``digests``: those of the last look-up when it asked for the
        same bytes with the same key and mask, else taken now."""
        last, self._last = self._last, None
        key, mask = self.header.key, self.mask
        if last is not None and last[1:3] == (key, mask) and last[0] == digests:
            return last[3]
        return accel.dedup_fingerprints(key, mask, digests)

    def needs_growth(self, more: int) -> bool:
        """Whether ``more`` entries would fill it past half."""
        return 2 * (self.count + more) > self.capacity

    def grown(self, more: int) -> DedupTable:
        """A table with room for ``more`` entries beyond this one's, holding the same pairs
        (not yet flushed or in place: ``flush`` then ``install``)."""
        header = replace(self.header, seq=0, bits=bits_for(self.count + more), count=0)
        table = DedupTable._create(self.path.with_name(self.path.name + ".new"), header)
        table.mask = self.mask
        table._last = self._last  # the same key and mask (checked at the insert)
        try:
            table.count = accel.dedup_rehash(self._slots, table._slots)
        except BaseException:
            table.discard()
            raise
        return table

    def flush(self, covered: int, root: bytes) -> None:
        """Make the slots durable, then record that entries ``[0, covered)`` are in them
        (tree root ``root``) in the older header copy."""
        fdatasync_fd(self._fd)
        seq = self.header.seq + 1
        header = replace(self.header, seq=seq, covered=covered, count=self.count, root=root)
        at = COPY * (seq % 2)
        self._map[at : at + COPY] = header.to_bytes().ljust(COPY, b"\0")
        fdatasync_fd(self._fd)
        self.header = header

    def install(self, path: Path) -> None:
        """Rename this (flushed) table to ``path``, replacing what was there."""
        replace_file(self.path, path)
        fsync_dir(path.parent)
        self.path = path

    def discard(self) -> None:
        """Close and delete this table's file (a build or growth that did not finish)."""
        self.close()
        with suppress(FileNotFoundError):
            self.path.unlink()

    def retire(self) -> None:
        """Replaced by a grown table: close the file; the mapping stays for a look-up still
        running in another thread and goes with the last reference."""
        with suppress(OSError):
            os.close(self._fd)

    def close(self) -> None:
        """Release the file and the mapping."""
        with suppress(BufferError):
            self._slots.release()
            self._map.close()
        self.retire()
