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
* ``dedup_insert`` / ``dedup_find`` / ``dedup_rehash`` / ``dedup_count``: the derived dedup table
  (``ledger.store.dedup``): an open-addressing table (linear probing) of 12-byte slots, each a
  48-bit keyed fingerprint of a record digest and its entry index + 1 (little-endian, 6 bytes
  each; index + 1 == 0: an empty slot). The fingerprint is the first 6 bytes, little-endian, of
  ``SHA-256(key || digest)`` (``key``: the table's random 16 bytes, so clients cannot choose
  digests that share a probe chain), masked by ``mask`` (all 48 bits but in tests, which force
  collisions with a narrow one); a digest's chain starts at ``fingerprint mod slots``. Inserting
  a (fingerprint, index) pair already in its chain writes nothing, so replaying entries after a
  crash is harmless; ``dedup_find`` answers every index whose fingerprint matches (the caller
  confirms each against the stored entry).
* ``dedup_fingerprints`` / ``dedup_insert_fps`` / ``dedup_find_fps``: the same in two steps,
  the fingerprints (8 bytes each, little-endian) taken once for a look-up and the insert that
  follows it (``ledger.store.dedup``).
* ``bundle_digests``: the record digest (bytes 9..41 of each v1 leaf) of every entry of a
  bundle, packed (rebuilding the dedup table from the bundles).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = [
    "CORE",
    "bundle_digests",
    "bundle_leaf_hashes",
    "compact_extend",
    "compact_root",
    "dedup_count",
    "dedup_find",
    "dedup_find_fps",
    "dedup_fingerprints",
    "dedup_insert",
    "dedup_insert_fps",
    "dedup_rehash",
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


def bundle_digests(bundle: bytes) -> bytes:
    """The record digest of each entry of ``bundle`` (bytes 9..41 of its v1 leaf), packed;
    ValueError where the bytes end inside an entry's length or an entry, or an entry is too
    short to hold a digest."""
    out: list[bytes] = []
    at, end_of = 0, len(bundle)
    while at < end_of:
        if at + 2 > end_of:
            raise ValueError(f"entry bundle ends inside the length of entry {len(out)}")
        end = at + 2 + int.from_bytes(bundle[at : at + 2], "big")
        if end > end_of:
            raise ValueError(f"entry bundle ends inside entry {len(out)}")
        if end - at - 2 < _DIGEST_END:
            raise ValueError(f"entry {len(out)} of the bundle is too short for a record digest")
        out.append(bundle[at + 2 + _DIGEST_AT : at + 2 + _DIGEST_END])
        at = end
    return b"".join(out)


Buffer = bytes | bytearray | memoryview  # a table: the store passes a view of its mapping
SLOT = 12  # a dedup table slot: fingerprint (6 bytes) || index + 1 (6 bytes), little-endian
_DIGEST_AT, _DIGEST_END = 9, 41  # a v1 leaf: version (1) || time (8) || record digest (32) ...
_FP_BYTES = 6
_MAX_VALUE = 1 << 48


def _slot_count(slots: memoryview) -> int:
    count = len(slots) // SLOT
    if len(slots) % SLOT or count == 0 or count & (count - 1):
        raise ValueError("dedup table: not a power-of-two number of 12-byte slots")
    return count


def _fingerprints(key: bytes, mask: int, digests: bytes) -> list[int]:
    if len(key) != 16 or len(digests) % _H or not 0 <= mask < _MAX_VALUE:
        raise ValueError("dedup table: key not 16 bytes, digests not N x 32 or mask over 48 bits")
    sha256, from_bytes = hashlib.sha256, int.from_bytes
    return [
        from_bytes(sha256(key + digests[at : at + _H]).digest()[:_FP_BYTES], "little") & mask
        for at in range(0, len(digests), _H)
    ]


def _put(slots: memoryview, count: int, fingerprint: int, value: int) -> int:
    """Put one pair into its chain: 1 when written, 0 when it was there."""
    mask = count - 1
    at = fingerprint & mask
    want = fingerprint.to_bytes(_FP_BYTES, "little") + value.to_bytes(_FP_BYTES, "little")
    for _ in range(count):
        start = at * SLOT
        slot = slots[start : start + SLOT]
        if not any(slot[_FP_BYTES:]):
            slots[start : start + SLOT] = want
            return 1
        if slot == want:
            return 0
        at = (at + 1) & mask
    raise ValueError("dedup table: full")


def dedup_fingerprints(key: bytes, mask: int, digests: bytes) -> bytes:
    """The fingerprint of every digest, 8 bytes little-endian each."""
    return b"".join(fp.to_bytes(8, "little") for fp in _fingerprints(key, mask, digests))


def _fps(fingerprints: bytes) -> list[int]:
    if len(fingerprints) % 8:
        raise ValueError("dedup table: fingerprints not N x 8 bytes")
    from_bytes, raw = int.from_bytes, fingerprints
    return [from_bytes(raw[at : at + 8], "little") for at in range(0, len(raw), 8)]


def _check_fp_values(fps: list[int]) -> None:
    if any(fp >= _MAX_VALUE for fp in fps):
        raise ValueError("dedup table: a fingerprint over 48 bits")


def dedup_insert(slots: Buffer, key: bytes, mask: int, digests: bytes, first: int) -> int:
    """Put (fingerprint of digest k, ``first + k + 1``) for every digest into the table; return
    how many slots were written (a pair already in its chain is not written again)."""
    return dedup_insert_fps(slots, dedup_fingerprints(key, mask, digests), first)


def dedup_insert_fps(slots: Buffer, fingerprints: bytes, first: int) -> int:
    """``dedup_insert`` of the digests whose ``dedup_fingerprints`` these are."""
    view = memoryview(slots)
    _slot_count(view)
    fps = _fps(fingerprints)
    if first < 0 or first + len(fps) >= _MAX_VALUE:
        raise ValueError("dedup table: index over 48 bits")
    _check_fp_values(fps)
    return _insert(view, fps, first)


def _insert(view: memoryview, fps: list[int], first: int) -> int:
    count = _slot_count(view)
    return sum(_put(view, count, fp, first + k + 1) for k, fp in enumerate(fps))


def dedup_find(slots: Buffer, key: bytes, mask: int, digests: bytes) -> list[int]:
    """Flat [position, index, ...]: for each digest (position in ``digests``), the index of
    every slot of its chain with its fingerprint, in probe order."""
    return dedup_find_fps(slots, dedup_fingerprints(key, mask, digests))


def dedup_find_fps(slots: Buffer, fingerprints: bytes) -> list[int]:
    """``dedup_find`` of the digests whose ``dedup_fingerprints`` these are."""
    view = memoryview(slots)
    _slot_count(view)
    fps = _fps(fingerprints)
    _check_fp_values(fps)
    return _find(view, fps)


def _find(view: memoryview, fps: list[int]) -> list[int]:
    count = _slot_count(view)
    out: list[int] = []
    from_bytes = int.from_bytes
    for position, fingerprint in enumerate(fps):
        at = fingerprint & (count - 1)
        for _ in range(count):
            start = at * SLOT
            value = from_bytes(view[start + _FP_BYTES : start + SLOT], "little")
            if not value:
                break
            if from_bytes(view[start : start + _FP_BYTES], "little") == fingerprint:
                out += (position, value - 1)
            at = (at + 1) & (count - 1)
    return out


def dedup_count(slots: Buffer) -> int:
    """How many slots are occupied."""
    view = memoryview(slots)
    _slot_count(view)
    return sum(
        1 for start in range(0, len(view), SLOT) if any(view[start + _FP_BYTES : start + SLOT])
    )


def dedup_rehash(old: Buffer, new: Buffer) -> int:
    """Put every occupied slot of ``old``, in slot order, into the empty table ``new``; return
    how many."""
    source, target = memoryview(old), memoryview(new)
    _slot_count(source)
    count = _slot_count(target)
    moved = 0
    from_bytes = int.from_bytes
    for start in range(0, len(source), SLOT):
        value = from_bytes(source[start + _FP_BYTES : start + SLOT], "little")
        if value:
            fingerprint = from_bytes(source[start : start + _FP_BYTES], "little")
            moved += _put(target, count, fingerprint, value)
    return moved
