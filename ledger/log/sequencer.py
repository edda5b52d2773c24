"""Sequencing (RFC 6962 §3 "log entries", our v1 leaf): dedup by record digest, assign indexes
and the log's receive time.

Pure bookkeeping over the store's batched digest look-up; nothing here writes. The log commits
what ``sequence`` returns and only then calls ``adopt``, so a failed commit leaves the
sequencer exactly where the durable log is.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ledger.core import accel
from ledger.core.errors import DataLossError, InvalidArgumentError
from ledger.core.limits import HASH_SIZE, MAX_METADATA
from ledger.core.merkle import NodeID
from ledger.core.tiles import frame_entry
from ledger.core.types import (
    AppendItem,
    AppendResult,
    decode_leaf,
    leaf_prefix,
    leaf_suffix,
)
from ledger.store.contract import Batch, PackedBatch, Store, TreeState

__all__ = [
    "AppendItem",
    "PackedSequenced",
    "Sequenced",
    "Sequencer",
    "ValidItems",
    "validate_items",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Sequenced:
    """The outcome of sequencing one batch, not yet durable."""

    first: int  # index of the first new entry
    entries: list[bytes]  # new entries framed for their bundle (uint16 length || v1 leaf)
    digests: list[bytes]  # their record digests
    leaf_hashes: list[bytes]  # their leaf hashes
    results: list[AppendResult]  # one per item, in request order
    next_index: int
    last_timestamp_ms: int

    def batch(self, nodes: Sequence[tuple[NodeID, bytes]], state: TreeState) -> Batch:
        """The group commit of these entries, the nodes they complete and the new state."""
        return Batch(
            first=self.first, entries=self.entries, digests=self.digests, nodes=nodes, state=state
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PackedSequenced:
    """The outcome of sequencing packed digests (no metadata), not yet durable: buffers, no
    object per entry. New entries take ``first_index ..`` in request order and share
    ``timestamp_ms``; every other position is a duplicate, listed with its original index,
    time and leaf hash (of a durable entry, or of an earlier position of the same buffer)."""

    count: int  # digests in the request
    first_index: int  # index of the first new entry (the log's size when none is new)
    timestamp_ms: int  # receive time of the new entries
    dup_positions: array[int]  # 'Q': ascending positions of the duplicates
    dup_indexes: array[int]  # 'Q': their original indexes
    dup_timestamps_ms: array[int]  # 'Q': their original receive times
    dup_leaf_hashes: bytes  # D x 32: their original leaf hashes
    digests: bytes  # the new entries' record digests, N x 32
    leaf_hashes: bytes  # their leaf hashes, N x 32
    framed: bytes  # their entries framed for a bundle, ``step`` bytes each
    step: int
    next_index: int
    last_timestamp_ms: int

    @property
    def new_entries(self) -> int:
        """New entries: indexes ``[first_index, first_index + new_entries)``."""
        return self.next_index - self.first_index

    def results(self) -> list[AppendResult]:
        """One typed result per digest of the request, in request order (the typed RPCs)."""
        new, stamp, first, hashes = (
            tuple.__new__,
            self.timestamp_ms,
            self.first_index,
            self.leaf_hashes,
        )
        fresh = [
            new(
                AppendResult, (first + k, hashes[k * HASH_SIZE : (k + 1) * HASH_SIZE], stamp, False)
            )
            for k in range(self.new_entries)
        ]
        if not self.dup_positions:
            return fresh
        out: list[AppendResult] = []
        taken = iter(fresh)
        dups = iter(range(len(self.dup_positions)))
        d = next(dups)
        for position in range(self.count):
            if d < len(self.dup_positions) and self.dup_positions[d] == position:
                leaf_hash = self.dup_leaf_hashes[d * HASH_SIZE : (d + 1) * HASH_SIZE]
                out.append(
                    AppendResult(self.dup_indexes[d], leaf_hash, self.dup_timestamps_ms[d], True)
                )
                d = next(dups, len(self.dup_positions))
            else:
                out.append(next(taken))
        return out

    def batch(self, rows: Sequence[bytes], state: TreeState) -> PackedBatch:
        """The group commit of these entries, the nodes they complete and the new state."""
        return PackedBatch(
            first=self.first_index,
            framed=self.framed,
            step=self.step,
            digests=self.digests,
            rows=rows,
            state=state,
        )


class ValidItems(tuple[AppendItem, ...]):
    """Items that ``validate_items`` accepted: the log does not check them again."""

    __slots__ = ()

    @classmethod
    def concat(cls, parts: Iterable[ValidItems]) -> ValidItems:
        """Several validated batches as one (a group commit); the caller bounds the total."""
        return cls(item for part in parts for item in part)


def validate_items(items: Sequence[AppendItem], max_items: int) -> ValidItems:
    """Refuse an empty or oversized batch, wrong digest lengths and oversized metadata."""
    if isinstance(items, ValidItems) and len(items) <= max_items:
        return items
    if not items:
        raise InvalidArgumentError("items: empty batch, want 1 or more")
    if len(items) > max_items:
        raise InvalidArgumentError(f"items: {len(items)} in one batch, max {max_items}")
    for i, item in enumerate(items):
        if len(item.record_digest) != HASH_SIZE:
            raise InvalidArgumentError(
                f"items[{i}].record_digest: {len(item.record_digest)} bytes, want {HASH_SIZE}"
            )
        if len(item.metadata) > MAX_METADATA:
            raise InvalidArgumentError(
                f"items[{i}].metadata: {len(item.metadata)} bytes, max {MAX_METADATA}"
            )
    return ValidItems(items)


class Sequencer:
    """Assigns the next indexes and a never-decreasing receive time; dedups by digest."""

    def __init__(
        self,
        *,
        store: Store,
        clock_ms: Callable[[], int],
        next_index: int,
        last_timestamp_ms: int,
        check_leaves: Callable[[Sequence[int], Sequence[bytes]], None] | None = None,
    ) -> None:
        self._store = store
        self._clock_ms = clock_ms
        self._check_leaves = check_leaves or (lambda _indexes, _leaves: None)
        self._next_index = next_index
        self._last_timestamp_ms = last_timestamp_ms

    @property
    def next_index(self) -> int:
        """The index the next new entry gets."""
        return self._next_index

    def sequence(self, items: Sequence[AppendItem]) -> Sequenced:
        """Sequence a validated batch against the durable log (one batched digest read).

        The hot loop of an append: per new entry, two concatenations, one SHA-256 (the RFC 6962
        leaf hash ``SHA-256(0x00 || leaf)``, inlined) and one result.
        """
        now = max(self._clock_ms(), self._last_timestamp_ms)
        seen = self._known(items)  # digest -> result: the durable log's, then this batch's
        entries: list[bytes] = []
        digests: list[bytes] = []
        leaf_hashes: list[bytes] = []
        results: list[AppendResult] = []
        first = index = self._next_index
        prefix = leaf_prefix(now)
        hashed = b"\x00" + prefix  # the leaf hash's input up to the digest
        plain = leaf_suffix(b"")
        # a leaf without metadata, framed for its bundle, up to the digest: length || prefix
        framed = (len(prefix) + HASH_SIZE + len(plain)).to_bytes(2, "big") + prefix
        sha256, new = hashlib.sha256, tuple.__new__
        for digest, meta in items:
            result = seen.get(digest)
            if result is not None:
                results.append(_as_duplicate(result))
                continue
            if meta:
                tail = digest + leaf_suffix(meta)
                entries.append(frame_entry(prefix + tail))
            else:
                tail = digest + plain
                entries.append(framed + tail)
            h = sha256(hashed + tail).digest()
            result = seen[digest] = new(AppendResult, (index, h, now, False))
            digests.append(digest)
            leaf_hashes.append(h)
            results.append(result)
            index += 1
        return Sequenced(
            first=first,
            entries=entries,
            digests=digests,
            leaf_hashes=leaf_hashes,
            results=results,
            next_index=index,
            last_timestamp_ms=now,
        )

    def sequence_packed(self, digests: bytes) -> PackedSequenced:
        """``sequence`` for N x 32 bytes of digests without metadata (``packed_count`` checked
        by the caller), on the selected core: one dedup look-up over the buffer, then
        validation, in-batch dedup, leaf bytes and leaf hashes over the buffer. The same
        indexes, times and leaf hashes as ``sequence`` of the same items."""
        now = max(self._clock_ms(), self._last_timestamp_ms)
        found = self._store.find_packed(digests)
        prefix = leaf_prefix(now)
        plain = leaf_suffix(b"")
        framed_prefix = (len(prefix) + HASH_SIZE + len(plain)).to_bytes(2, "big") + prefix
        known = accel.present(found)
        new, hashes, framed, dups = accel.sequence_plain(
            digests, known, b"\x00" + prefix, framed_prefix, plain
        )
        first = self._next_index
        positions, indexes, times = array("Q"), array("Q"), array("Q")
        dup_hashes: list[bytes] = []
        if dups:
            durable = self._durable({found[p] for p in dups[0::2] if known[p]})
            for position, source in zip(dups[0::2], dups[1::2], strict=True):
                positions.append(position)
                if source < 0:
                    index = found[position]
                    assert index is not None
                    stamp, leaf_hash = durable[index]
                    if digests[position * HASH_SIZE : (position + 1) * HASH_SIZE] != stamp[1]:
                        raise DataLossError(
                            f"the digest index maps a digest to entry {index}, which holds "
                            "another digest: the index is damaged; refusing to answer a duplicate"
                        )
                    indexes.append(index)
                    times.append(stamp[0])
                    dup_hashes.append(leaf_hash)
                else:
                    indexes.append(first + source)
                    times.append(now)
                    dup_hashes.append(hashes[source * HASH_SIZE : (source + 1) * HASH_SIZE])
        return PackedSequenced(
            count=len(digests) // HASH_SIZE,
            first_index=first,
            timestamp_ms=now,
            dup_positions=positions,
            dup_indexes=indexes,
            dup_timestamps_ms=times,
            dup_leaf_hashes=b"".join(dup_hashes),
            digests=new,
            leaf_hashes=hashes,
            framed=framed,
            step=len(framed_prefix) + HASH_SIZE + len(plain),
            next_index=first + len(new) // HASH_SIZE,
            last_timestamp_ms=now,
        )

    def _durable(self, wanted: set[int | None]) -> dict[int, tuple[tuple[int, bytes], bytes]]:
        """Index -> ((time, record digest), leaf hash) of durable entries (duplicates only)."""
        indexes = sorted(i for i in wanted if i is not None)
        leaves = self._store.get_leaves(indexes)
        self._check_leaves(indexes, leaves)
        out = {}
        for index, leaf in zip(indexes, leaves, strict=True):
            entry = decode_leaf(index, leaf)
            out[index] = ((entry.timestamp_ms, entry.record_digest), entry.leaf_hash)
        return out

    def sequence_leaves(self, start: int, leaves: Sequence[bytes]) -> Sequenced:
        """Leaves taken verbatim (catch-up after a restore), to be stored from ``start``."""
        if start != self._next_index:
            raise InvalidArgumentError(f"leaves start at {start}, the log at {self._next_index}")
        entries, digests, hashes, last = [], [], [], self._last_timestamp_ms
        for index, leaf in enumerate(leaves, start):
            entry = decode_leaf(index, leaf)
            entries.append(frame_entry(leaf))
            digests.append(entry.record_digest)
            hashes.append(entry.leaf_hash)
            last = max(last, entry.timestamp_ms)
        return Sequenced(
            first=start,
            entries=entries,
            digests=digests,
            leaf_hashes=hashes,
            results=[],
            next_index=start + len(entries),
            last_timestamp_ms=last,
        )

    def adopt(self, sequenced: Sequenced | PackedSequenced) -> None:
        """Move on once ``sequenced`` is durable."""
        self._next_index = sequenced.next_index
        self._last_timestamp_ms = sequenced.last_timestamp_ms

    def _known(self, items: Sequence[AppendItem]) -> dict[bytes, AppendResult]:
        """Results for digests the durable log already holds (original index, leaf and time)."""
        digests = [item[0] for item in items]
        found = self._store.find_digests(digests)
        if found.count(None) == len(found):  # the common case: every digest is new
            return {}
        hits = list({d: i for d, i in zip(digests, found, strict=True) if i is not None}.items())
        leaves = self._store.get_leaves([i for _, i in hits])
        self._check_leaves([i for _, i in hits], leaves)
        known = {}
        for (digest, index), leaf in zip(hits, leaves, strict=True):
            entry = decode_leaf(index, leaf)
            if entry.record_digest != digest:
                raise DataLossError(
                    f"the digest index maps {digest.hex()} to entry {index}, which holds "
                    "another digest: the index is damaged; refusing to answer a duplicate"
                )
            known[digest] = AppendResult(
                index=index,
                leaf_hash=entry.leaf_hash,
                timestamp_ms=entry.timestamp_ms,
                duplicate=True,
            )
        return known


def _as_duplicate(result: AppendResult) -> AppendResult:
    return result if result.duplicate else result._replace(duplicate=True)
