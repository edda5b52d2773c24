"""The storage contract of the log, and an in-memory store with a fault hook for crash tests.

What a store promises (``RocksStore`` in ``ledger.store.rocks`` is the production one):

* ``commit(batch)`` is atomic and durable when it returns: after a crash at any instant either
  all of a batch (entries, tree nodes, tree state) is there or none of it; ``find_digests``
  answers its digests once it returns (``RocksStore`` derives its dedup table from the entries,
  ``ledger.store.dedup``, and rebuilds what a crash left out of it on open).
* ``put_checkpoint`` and ``put_anchor`` are durable when they return; a checkpoint for a size
  that already has one with a different root is refused (``StorageError``): the log never
  signs two roots for one size. The same checkpoint may be stored again with more signature
  lines (witness cosignatures: same note text, every stored line kept), never with fewer.
* One writer calls ``commit`` / ``put_*`` at a time; reads may run concurrently with it and see
  either the state before or after a commit. The one exception: ``put_checkpoint`` that adds
  signature lines to a size already stored may run concurrently with the writer (one such
  call at a time); the writer never writes a size that is already stored.
* Reads of what the contract says is there (a node of a committed tree, an entry below the
  committed size) raise ``StorageError`` when missing: that is corruption, not absence.
* Layout (``ledger.core.tile_layout``, the same in every store): entries live in tlog-tiles entry
  bundles and the tree in tile values, so a commit writes O(entries / 256 + tile levels) values;
  full bundles and tiles are written once, the right-edge partial ones are rewritten by the
  commit that extends them.
* ``get_tiles`` and ``get_entry_bundles`` serve the C2SP tlog-tiles read path: a tile
  ``(level, index, width)`` or bundle ``(index, width)`` of any width up to what is committed
  (a narrower one is a prefix of the stored value, so every published partial width stays
  servable until and after the full one exists); beyond what is committed: ``StorageError``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ledger.core.accel import split_hashes
from ledger.core.checkpoint import SignedNote
from ledger.core.errors import StorageError
from ledger.core.merkle import CompactRange, NodeID
from ledger.core.tile_layout import StoredTiles, TileWriter
from ledger.core.types import Anchor, PublishedCheckpoint

__all__ = ["Batch", "MemoryStore", "PackedBatch", "Store", "TreeState", "check_new_checkpoint"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeState:
    """The durable tree: its compact range (size and subtree roots) and the last leaf time."""

    compact: CompactRange = field(default_factory=CompactRange)
    last_timestamp_ms: int = 0

    @property
    def size(self) -> int:
        """Number of committed entries."""
        return self.compact.size

    def to_bytes(self) -> bytes:
        """Serialise: 8-byte last timestamp, then the compact range."""
        return self.last_timestamp_ms.to_bytes(8, "big") + self.compact.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> TreeState:
        """Inverse of ``to_bytes``."""
        return cls(
            compact=CompactRange.from_bytes(data[8:]),
            last_timestamp_ms=int.from_bytes(data[:8], "big"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """One group commit: new entries from index ``first``, each framed as in an entry bundle
    (uint16 length || v1 leaf, ``ledger.core.tile_layout.frame``), their record digests, the full
    nodes of height >= 1 they complete, and the new state. A height-0 node is the leaf hash of
    its entry."""

    first: int
    entries: Sequence[bytes]
    digests: Sequence[bytes]
    nodes: Sequence[tuple[NodeID, bytes]]
    state: TreeState


@dataclass(frozen=True, slots=True, kw_only=True)
class PackedBatch:
    """A group commit of entries without metadata, over buffers: ``framed`` holds the new
    entries framed as in an entry bundle, ``step`` bytes each; ``digests`` their record digests
    (``N x 32``); ``rows[h - 1]`` the hashes of the full nodes of height ``h`` they complete
    (``CompactRange.extend_packed``); the new state. The same writes as the ``Batch`` of the
    same entries."""

    first: int
    framed: bytes
    step: int
    digests: bytes
    rows: Sequence[bytes]
    state: TreeState


class Store(Protocol):
    """What the log needs from storage (guarantees in the module docstring)."""

    def load_state(self) -> TreeState:
        """The committed tree state (empty for a new store)."""
        ...

    def find_digests(self, digests: Sequence[bytes]) -> list[int | None]:
        """The index of each record digest, or None; one batched read."""
        ...

    def find_packed(self, digests: bytes) -> list[int | None]:
        """``find_digests`` of N x 32 bytes of digests."""
        ...

    def commit(self, batch: Batch) -> None:
        """Write a batch atomically and durably."""
        ...

    def commit_packed(self, batch: PackedBatch) -> None:
        """``commit`` for a batch over buffers (the same guarantees, the same writes)."""
        ...

    def get_nodes(self, ids: Sequence[NodeID]) -> list[bytes]:
        """Hashes of full nodes of the committed tree, in order; one batched read."""
        ...

    def get_leaves(self, indexes: Sequence[int]) -> list[bytes]:
        """The leaves at ``indexes`` (all below the committed size), in order; one batched read."""
        ...

    def get_tiles(self, ids: Sequence[tuple[int, int, int]]) -> list[bytes]:
        """tlog-tiles tiles ``(level, index, width)``: ``width`` 32-byte hashes each."""
        ...

    def get_entry_bundles(self, ids: Sequence[tuple[int, int]]) -> list[bytes]:
        """tlog-tiles entry bundles ``(index, width)``: the first ``width`` entries each."""
        ...

    def put_checkpoint(self, checkpoint: PublishedCheckpoint) -> None:
        """Store a signed checkpoint durably (refusing a second root for its size)."""
        ...

    def get_checkpoint(self, size: int) -> PublishedCheckpoint | None:
        """The checkpoint published for exactly ``size``."""
        ...

    def latest_checkpoint(self) -> PublishedCheckpoint | None:
        """The checkpoint with the largest size."""
        ...

    def put_anchor(self, anchor: Anchor) -> None:
        """Store an RFC 3161 anchor durably (one per checkpoint size and TSA)."""
        ...

    def get_anchors(self, size: int) -> list[Anchor]:
        """Every anchor of the checkpoint of ``size``."""
        ...

    def anchored_sizes(self, limit: int) -> list[int]:
        """Checkpoint sizes with at least one anchor, newest first."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...


def check_new_checkpoint(old: PublishedCheckpoint | None, new: PublishedCheckpoint) -> bool:
    """True when ``new`` must be written; raise when it would be a second root for a size."""
    if old is None:
        return True
    if old.root_hash != new.root_hash or old.origin != new.origin:
        raise StorageError(
            f"refusing a second checkpoint for size {new.size}: stored root "
            f"{old.root_hash.hex()}, new root {new.root_hash.hex()}"
        )
    if new.note == old.note:
        return False
    stored, offered = SignedNote.from_text(old.note), SignedNote.from_text(new.note)
    if offered.text != stored.text or not set(stored.signatures) <= set(offered.signatures):
        raise StorageError(
            f"refusing to rewrite the checkpoint note of size {new.size}: only signature lines "
            "(cosignatures) may be added to it"
        )
    return True


class MemoryStore:
    """A dict-backed ``Store`` for tests (the same values under the same keys as RocksDB);
    ``fault(point)`` may raise to simulate a crash.

    ``fault`` is called with "commit" or "checkpoint" or "anchor" before anything is applied,
    so a raised fault leaves the store exactly as a crash before the write would.
    """

    def __init__(self, *, fault: Callable[[str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._fault = fault or (lambda _point: None)
        self._state = TreeState()
        self._values: dict[bytes, bytes] = {}  # bundles and tiles (core.tile_layout keys)
        self._digests: dict[bytes, int] = {}
        self._checkpoints: dict[int, PublishedCheckpoint] = {}
        self._anchors: dict[tuple[int, str], Anchor] = {}
        self.writes: dict[bytes, int] = {}  # how often each value was written (tests)
        self._reader = StoredTiles(self._lookup)
        self._writer = TileWriter.load(0, self._lookup)

    def _lookup(self, keys: list[bytes]) -> list[bytes | None]:
        return [self._values.get(k) for k in keys]

    def load_state(self) -> TreeState:
        return self._state

    def find_digests(self, digests: Sequence[bytes]) -> list[int | None]:
        return [self._digests.get(d) for d in digests]

    def find_packed(self, digests: bytes) -> list[int | None]:
        return self.find_digests(split_hashes(digests))

    def commit(self, batch: Batch) -> None:
        self._fault("commit")
        values, writer = self._writer.plan(batch.first, batch.entries, batch.nodes)
        with self._lock:
            self._values.update(values)
            for key in values:
                self.writes[key] = self.writes.get(key, 0) + 1
            for index, digest in enumerate(batch.digests, batch.first):
                self._digests[digest] = index
            self._state = batch.state
            self._writer = writer

    def commit_packed(self, batch: PackedBatch) -> None:
        self._fault("commit")
        values, writer = self._writer.plan_packed(batch.first, batch.framed, batch.step, batch.rows)
        digests = split_hashes(batch.digests)
        with self._lock:
            self._values.update(values)
            for key in values:
                self.writes[key] = self.writes.get(key, 0) + 1
            for index, digest in enumerate(digests, batch.first):
                self._digests[digest] = index
            self._state = batch.state
            self._writer = writer

    def get_nodes(self, ids: Sequence[NodeID]) -> list[bytes]:
        return self._reader.nodes(ids)

    def get_leaves(self, indexes: Sequence[int]) -> list[bytes]:
        return self._reader.leaves(indexes)

    def get_tiles(self, ids: Sequence[tuple[int, int, int]]) -> list[bytes]:
        return self._reader.tiles(ids)

    def get_entry_bundles(self, ids: Sequence[tuple[int, int]]) -> list[bytes]:
        return self._reader.bundles(ids)

    def put_checkpoint(self, checkpoint: PublishedCheckpoint) -> None:
        if check_new_checkpoint(self._checkpoints.get(checkpoint.size), checkpoint):
            self._fault("checkpoint")
            self._checkpoints[checkpoint.size] = checkpoint

    def get_checkpoint(self, size: int) -> PublishedCheckpoint | None:
        return self._checkpoints.get(size)

    def latest_checkpoint(self) -> PublishedCheckpoint | None:
        return self._checkpoints[max(self._checkpoints)] if self._checkpoints else None

    def put_anchor(self, anchor: Anchor) -> None:
        self._fault("anchor")
        self._anchors[(anchor.size, anchor.tsa)] = anchor

    def get_anchors(self, size: int) -> list[Anchor]:
        return [a for (s, _), a in sorted(self._anchors.items()) if s == size]

    def anchored_sizes(self, limit: int) -> list[int]:
        return sorted({s for s, _ in self._anchors}, reverse=True)[:limit]

    def close(self) -> None:
        """Nothing to release."""
