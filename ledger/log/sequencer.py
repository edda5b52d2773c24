"""Sequencing (RFC 6962 §3 "log entries", our v1 leaf): dedup by record digest, assign indexes
and the log's receive time.

Pure bookkeeping over the store's batched digest look-up; nothing here writes. The log commits
what ``sequence`` returns and only then calls ``adopt``, so a failed commit leaves the
sequencer exactly where the durable log is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

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
from ledger.store.contract import Batch, Store, TreeState

__all__ = ["AppendItem", "Sequenced", "Sequencer", "ValidItems", "validate_items"]


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

    def adopt(self, sequenced: Sequenced) -> None:
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
