"""The append hot path over packed buffers, in pure Python: the reference twin of the compiled
``ledger.core._hot`` (a C extension built from ``ledger/core/_hot.c``).

Every function takes and returns buffers (``N x 32`` bytes of digests or hashes), never one
object per entry; ``ledger.core.accel`` picks the compiled module when it is built and not
refused (``LEDGER_PURE=1``), else this one. The two give byte-identical answers
(``tests/property/test_hot_twins.py``); this one is the reference, and is the one to read.

* ``sequence_plain``: one batch of digests without metadata, given which the durable log already
  holds: the new digests (first occurrences, in order), their leaf hashes
  (``SHA-256(0x00 || leaf)`` over ``hashed_prefix || digest || suffix``), their entries framed
  for a bundle (``framed_prefix || digest || suffix``) and the duplicates as ``(position,
  source)`` pairs: ``source`` is the number of the new entry it repeats, or -1 when the durable
  log holds it.
* ``compact_extend``: RFC 6962 §2.1 compact range (its subtree roots, largest first, packed)
  extended by packed leaf hashes: the new stack and, per height ``1..``, the hashes of the full
  nodes completed at that height (consecutive indexes, so a buffer per height says it all).
* ``compact_root``: the Merkle Tree Hash of a packed compact range.
* ``split_hashes`` / ``index_values``: the per-entry keys and values handed to the store.
* ``present``: one flag byte per multi-get answer (1: found).
* ``bundle_leaf_hashes``: the leaf hash of every entry of an entry bundle (C2SP tlog-tiles: each
  entry a 2-byte big-endian length, then the entry), packed: a level-0 tile's row 0 read back
  from its bundle (``ledger.core.tile_layout``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = [
    "CORE",
    "bundle_leaf_hashes",
    "compact_extend",
    "compact_root",
    "index_values",
    "present",
    "sequence_plain",
    "split_hashes",
]

CORE = "pure"
_H = 32
_EMPTY_ROOT = hashlib.sha256(b"").digest()


def sequence_plain(
    digests: bytes, known: bytes, hashed_prefix: bytes, framed_prefix: bytes, suffix: bytes
) -> tuple[bytes, bytes, bytes, list[int]]:
    """(new digests, their leaf hashes, their framed entries, flat [position, source, ...])."""
    if len(digests) % _H or len(known) != len(digests) // _H:
        raise ValueError("sequence_plain: digests not N x 32 or known not N flags")
    sha256 = hashlib.sha256
    first: dict[bytes, int] = {}
    new: list[bytes] = []
    hashes: list[bytes] = []
    framed: list[bytes] = []
    dups: list[int] = []
    for position in range(len(known)):
        digest = digests[position * _H : (position + 1) * _H]
        if known[position]:
            dups += (position, -1)
            continue
        k = first.get(digest)
        if k is not None:
            dups += (position, k)
            continue
        first[digest] = len(new)
        new.append(digest)
        hashes.append(sha256(hashed_prefix + digest + suffix).digest())
        framed.append(framed_prefix + digest + suffix)
    return b"".join(new), b"".join(hashes), b"".join(framed), dups


def compact_extend(size: int, stack: bytes, leaves: bytes) -> tuple[bytes, list[bytes]]:
    """(new stack, completed node hashes per height 1.. as one buffer each)."""
    if size < 0 or len(stack) != _H * size.bit_count() or len(leaves) % _H:
        raise ValueError("compact_extend: stack does not match size, or leaves not N x 32")
    sha256 = hashlib.sha256
    hashes = [stack[i : i + _H] for i in range(0, len(stack), _H)]
    by_height: list[list[bytes]] = []
    index = size
    for at in range(0, len(leaves), _H):
        h = leaves[at : at + _H]
        level = 0
        i = index
        while i & 1:
            h = sha256(b"\x01" + hashes.pop() + h).digest()
            level += 1
            i >>= 1
            if len(by_height) < level:
                by_height.append([])
            by_height[level - 1].append(h)
        hashes.append(h)
        index += 1
    return b"".join(hashes), [b"".join(row) for row in by_height]


def compact_root(stack: bytes) -> bytes:
    """Merkle Tree Hash of the leaves a packed compact range covers (SHA-256("") when empty)."""
    if len(stack) % _H:
        raise ValueError("compact_root: stack not N x 32")
    if not stack:
        return _EMPTY_ROOT
    acc = stack[-_H:]
    for at in range(len(stack) - 2 * _H, -1, -_H):
        acc = hashlib.sha256(b"\x01" + stack[at : at + _H] + acc).digest()
    return acc


def split_hashes(buffer: bytes) -> list[bytes]:
    """``N x 32`` bytes as N keys."""
    if len(buffer) % _H:
        raise ValueError("split_hashes: buffer not N x 32")
    return [buffer[at : at + _H] for at in range(0, len(buffer), _H)]


def index_values(first: int, count: int, width: int) -> list[bytes]:
    """Indexes ``first .. first + count - 1`` as ``width``-byte big-endian values."""
    if first < 0 or count < 0 or not 1 <= width <= 8 or (first + count) >> (8 * width):
        raise ValueError("index_values: indexes do not fit the width")
    return [i.to_bytes(width, "big") for i in range(first, first + count)]


def present(values: Sequence[object]) -> bytes:
    """One byte per answer of a multi-get: 1 when found (not None)."""
    return bytes(v is not None for v in values)


def bundle_leaf_hashes(bundle: bytes) -> bytes:
    """``SHA-256(0x00 || entry)`` of each entry of ``bundle``, packed; ValueError where the
    bytes end inside an entry's length or inside an entry (the messages of
    ``tiles.split_entry_bundle``, which this module cannot import: ``merkle`` imports it
    through ``accel``, and ``tiles`` imports ``merkle``)."""
    out: list[bytes] = []
    at, end_of = 0, len(bundle)
    while at < end_of:
        if at + 2 > end_of:
            raise ValueError(f"entry bundle ends inside the length of entry {len(out)}")
        end = at + 2 + int.from_bytes(bundle[at : at + 2], "big")
        if end > end_of:
            raise ValueError(f"entry bundle ends inside entry {len(out)}")
        out.append(hashlib.sha256(b"\x00" + bundle[at + 2 : end]).digest())
        at = end
    return b"".join(out)
