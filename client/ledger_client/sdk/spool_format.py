"""The spool file's frames (format in ``ledger_client.sdk.spool``): encoding, reading, and
resynchronising after damage."""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "ACK",
    "DISCLOSURES",
    "HEADER",
    "MAGIC",
    "RECORD",
    "SpoolItem",
    "encode_frame",
]

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
_LEN = struct.Struct(">I")
_QUARANTINE = b"LDGQUAR1"
_KINDS = (RECORD, DISCLOSURES, ACK)
_FRAMING = 9 + 32  # type, length, CRC and the digest that starts an 'R' or 'D' body


@dataclass(frozen=True, slots=True)
class SpoolItem:
    """One spooled record: digest, canonical JSON, and (only if asked) its disclosures.
    An empty ``record_json`` is a chain beacon: a digest logged with no record
    (``ledger_client.sdk.agent``)."""

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


def _frame_at(reader: _Reader, pos: int, end: int) -> _Frame:
    """The frame starting at ``pos``; raises ``_Torn`` when it is short or bad."""
    head = reader.read(pos, _HEAD.size)
    if len(head) < _HEAD.size:
        raise _Torn(pos, "short frame header")
    kind, length = _HEAD.unpack(head)
    if kind not in _KINDS or length > MAX_BODY:
        raise _Torn(pos, f"bad frame header (type {kind:#x}, length {length})")
    if pos + _HEAD.size + length + _CRC.size > end:
        raise _Torn(pos, "short frame")
    rest = reader.read(pos + _HEAD.size, length + _CRC.size)
    if len(rest) < length + _CRC.size:
        raise _Torn(pos, "short frame")
    body = rest[:length]
    if _CRC.unpack(rest[length:])[0] != zlib.crc32(body, zlib.crc32(head)):
        raise _Torn(pos, "CRC mismatch")
    if (kind != ACK and length < 32) or (kind == ACK and length != 8):
        raise _Torn(pos, f"frame type {kind:#x} with a {length}-byte body")
    return _Frame(kind, pos, pos + _HEAD.size + length + _CRC.size, body)


def _scan(fd: int, start: int, end: int) -> tuple[list[_Frame], list[tuple[int, int, str]]]:
    """Every intact frame in ``[start, end)``, resynchronising after damage; and the damaged
    ranges skipped (start, end, why)."""
    reader, pos = _Reader(fd, end), start
    frames: list[_Frame] = []
    damaged: list[tuple[int, int, str]] = []
    while pos < end:
        try:
            frame = _frame_at(reader, pos, end)
        except _Torn as torn:
            nxt = _resync(reader, pos + 1, end)
            damaged.append((pos, nxt, str(torn)))
            pos = nxt
            continue
        frames.append(frame)
        pos = frame.end
    return frames, damaged


def _resync(reader: _Reader, pos: int, end: int) -> int:
    """The next offset from ``pos`` where an intact frame starts, or ``end``."""
    kinds = bytes(_KINDS)
    while pos < end:
        window = reader.read(pos, min(_CHUNK, end - pos))
        for i, byte in enumerate(window):
            if byte in kinds:
                with contextlib.suppress(_Torn):
                    _frame_at(reader, pos + i, end)
                    return pos + i
        pos += len(window)
    return end


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
        frame = _frame_at(reader, pos, end)
        yield frame
        pos = frame.end


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
