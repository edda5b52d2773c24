"""RocksDB storage (the only module importing rocksdict): the ``ledger.storage.Store`` contract.

Key layout (raw bytes, integers big-endian so keys sort numerically), in four column families:
``default`` (S, C, A), ``entries`` (E), ``dedup`` (D) and ``nodes`` (N); one WriteBatch spans
them atomically, so the append-only families never share compactions with the random dedup keys:

    key                                   value
    b"S"                                  tree state: last leaf time (8) || compact range
    b"E" || index (8)                     leaf bytes (v1 leaf, see ``ledger.types``)
    b"D" || record digest (32)            index (8)                    (dedup index)
    b"N" || level (1) || index (8)        node hash (32)      (full subtrees, level >= 1; a
                                                               level-0 node is the hash of E)
    b"C" || size (8)                      root hash (32) || signed note (UTF-8)
    b"A" || size (8) || TSA name (UTF-8)  genTime ms (8) || DER TimeStampToken

Each group commit is one ``WriteBatch`` written with ``sync=True``; whole-key bloom filters
keep dedup misses to about one probe; memtables are capped so RSS does not grow with the log.

WAL recovery (issue 14): RocksDB's default, point-in-time recovery, silently drops everything
after the first damaged WAL record. The log opens with ``tolerate_corrupted_tail_records``
instead: a torn final record (a crash in the middle of a write) is dropped as normal, while
damage in the middle of the WAL refuses to open, naming what to do. ``wal_recovery="salvage"``
(``ledger restore accept --salvage-wal``) opens such a dir with point-in-time recovery, on
purpose; the published high-water mark then tells how far it fell behind.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from rocksdict import (
    BlockBasedOptions,
    Cache,
    DBCompressionType,
    DBRecoveryMode,
    Options,
    Rdict,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

from ledger.errors import DataLossError, StorageError
from ledger.merkle import NodeID, leaf_hash
from ledger.storage import Batch, TreeState, check_new_checkpoint
from ledger.types import Anchor, PublishedCheckpoint

__all__ = ["RocksStore"]

_STATE = b"S"
# Column families: the append-only families (entries, nodes: keys grow with the index) compact
# by cheap trivial moves; only the dedup index (random digests) pays for real compaction.
_U64 = 8


def _u64(n: int) -> bytes:
    return n.to_bytes(_U64, "big")


def _entry_key(index: int) -> bytes:
    return b"E" + _u64(index)


def _digest_key(digest: bytes) -> bytes:
    return b"D" + digest


def _node_key(node: NodeID) -> bytes:
    return b"N" + node.level.to_bytes(1, "big") + _u64(node.index)


def _checkpoint_key(size: int) -> bytes:
    return b"C" + _u64(size)


def _anchor_key(size: int, tsa: str) -> bytes:
    return b"A" + _u64(size) + tsa.encode()


def _options(memtable_mb: int, cache_mb: int) -> tuple[Options, Options]:
    """Options for the append-only families and for the dedup family, sharing one memory budget
    (universal compaction for dedup was measured: faster at first, then long full merges).

    Memtables are charged to the block cache, which also holds the index and filter blocks,
    so RocksDB's memory stays near memtables + cache however big the log grows.
    """
    cache = Cache((cache_mb + 2 * memtable_mb) << 20)
    budget = WriteBufferManager.new_write_buffer_manager_with_cache(
        2 * memtable_mb << 20, False, cache
    )
    opts = _family_options(memtable_mb, cache, budget)
    dedup = _family_options(memtable_mb, cache, budget)
    return opts, dedup


def _family_options(memtable_mb: int, cache: Cache, budget: WriteBufferManager) -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_write_buffer_size(memtable_mb << 20)
    opts.set_max_write_buffer_number(2)
    opts.set_max_background_jobs(2)
    opts.set_memtable_whole_key_filtering(True)  # bloom in the memtable too: dedup misses
    opts.set_memtable_prefix_bloom_ratio(0.1)
    opts.set_compression_type(DBCompressionType.none())  # hashes and digests do not compress
    opts.set_write_buffer_manager(budget)
    table = BlockBasedOptions()
    table.set_bloom_filter(10, False)
    table.set_block_cache(cache)
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    opts.set_block_based_table_factory(table)
    return opts


def _recovery_mode(name: str) -> DBRecoveryMode:
    if name == "strict":  # a torn tail is normal after a crash; damage before it is not
        return DBRecoveryMode.tolerate_corrupted_tail_records()
    if name == "salvage":
        return DBRecoveryMode.point_in_time()
    raise ValueError(f"wal_recovery: {name!r}, want 'strict' or 'salvage'")


def _open_error(path: str | Path, exc: Exception) -> StorageError:
    text = str(exc)
    if "Corruption" not in text:
        return StorageError(f"cannot open RocksDB at {path}: {text}")
    return DataLossError(
        f"RocksDB at {path} is damaged ({text}); the log refuses to start rather than drop "
        "acknowledged entries silently. What you can do: restore a copy of the data dir, or "
        "run `ledger restore accept --salvage-wal` to keep what is intact before the damage "
        "(the log then stays read-only until `ledger restore catch-up` brings it back to its "
        'published high-water mark); see README "Restore"'
    )


def _parse_checkpoint(size: int, value: bytes) -> PublishedCheckpoint:
    note = value[32:].decode()
    return PublishedCheckpoint(
        origin=note.split("\n", 1)[0], size=size, root_hash=value[:32], note=note
    )


class RocksStore:
    """A ``Store`` in a RocksDB directory (one process at a time, as RocksDB requires)."""

    def __init__(
        self,
        path: str | Path,
        *,
        memtable_mb: int = 16,
        cache_mb: int = 32,
        wal_recovery: str = "strict",
    ) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        opts, dedup = _options(memtable_mb, cache_mb)
        opts.create_missing_column_families(True)
        opts.set_wal_recovery_mode(_recovery_mode(wal_recovery))
        families = {"entries": opts, "dedup": dedup, "nodes": opts}
        try:
            self._db = Rdict(str(path), opts, column_families=families)
        except Exception as exc:  # rocksdict raises plain Exception (e.g. the LOCK is held)
            raise _open_error(path, exc) from exc
        self._entries = self._db.get_column_family("entries")
        self._dedup = self._db.get_column_family("dedup")
        self._nodes = self._db.get_column_family("nodes")
        self._entries_cf = self._db.get_column_family_handle("entries")
        self._dedup_cf = self._db.get_column_family_handle("dedup")
        self._nodes_cf = self._db.get_column_family_handle("nodes")
        self._sync = WriteOptions()
        self._sync.sync = True
        self.path = Path(path)

    @staticmethod
    def _get_many(family: Rdict, keys: list[bytes]) -> list[bytes | None]:
        if not keys:
            return []
        return cast("list[bytes | None]", family.get(cast("list[Any]", keys)))

    def _scan(self, from_key: bytes, *, backwards: bool = False) -> Iterator[tuple[bytes, bytes]]:
        items = self._db.items(backwards=backwards, from_key=from_key)
        return cast("Iterator[tuple[bytes, bytes]]", iter(items))

    # --- tree ------------------------------------------------------------------------------

    def load_state(self) -> TreeState:
        raw = cast("bytes | None", self._db.get(_STATE))
        return TreeState() if raw is None else TreeState.from_bytes(raw)

    def find_digests(self, digests: Sequence[bytes]) -> list[int | None]:
        if not digests:
            return []
        found = self._get_many(self._dedup, [_digest_key(d) for d in digests])
        return [None if v is None else int.from_bytes(v, "big") for v in found]

    def commit(self, batch: Batch) -> None:
        wb = WriteBatch(raw_mode=True)
        put = wb.put
        entries, dedup, nodes = self._entries_cf, self._dedup_cf, self._nodes_cf
        for index, leaf, digest in batch.entries:  # the hot loop: keys built inline
            i = index.to_bytes(8, "big")
            put(b"E" + i, leaf, entries)
            put(b"D" + digest, i, dedup)
        for (level, index), h in batch.nodes:
            put(b"N" + level.to_bytes(1, "big") + index.to_bytes(8, "big"), h, nodes)
        wb.put(_STATE, batch.state.to_bytes())
        self._db.write(wb, self._sync)

    def get_nodes(self, ids: Sequence[NodeID]) -> list[bytes]:
        if not ids:
            return []
        leaves = iter(
            self._get_many(self._entries, [_entry_key(n.index) for n in ids if n.level == 0])
        )
        inner = iter(self._get_many(self._nodes, [_node_key(n) for n in ids if n.level]))
        found = [
            (None if (v := next(leaves)) is None else leaf_hash(v)) if n.level == 0 else next(inner)
            for n in ids
        ]
        hashes = [h for h in found if h is not None]
        if len(hashes) != len(ids):
            missing = next(n for n, h in zip(ids, found, strict=True) if h is None)
            raise StorageError(f"missing tree node {missing}")
        return hashes

    def get_leaves(self, indexes: Sequence[int]) -> list[bytes]:
        if not indexes:
            return []
        found = self._get_many(self._entries, [_entry_key(i) for i in indexes])
        leaves = [leaf for leaf in found if leaf is not None]
        if len(leaves) != len(indexes):
            missing = next(i for i, leaf in zip(indexes, found, strict=True) if leaf is None)
            raise StorageError(f"missing entry {missing}")
        return leaves

    # --- checkpoints and anchors -------------------------------------------------------------

    def put_checkpoint(self, checkpoint: PublishedCheckpoint) -> None:
        if check_new_checkpoint(self.get_checkpoint(checkpoint.size), checkpoint):
            value = checkpoint.root_hash + checkpoint.note.encode()
            self._db.put(_checkpoint_key(checkpoint.size), value, self._sync)

    def get_checkpoint(self, size: int) -> PublishedCheckpoint | None:
        value = cast("bytes | None", self._db.get(_checkpoint_key(size)))
        return None if value is None else _parse_checkpoint(size, value)

    def latest_checkpoint(self) -> PublishedCheckpoint | None:
        for key, value in self._scan(b"C" + b"\xff" * _U64, backwards=True):
            if not key.startswith(b"C"):
                return None
            return _parse_checkpoint(int.from_bytes(key[1:], "big"), value)
        return None

    def put_anchor(self, anchor: Anchor) -> None:
        value = _u64(anchor.gen_time_ms) + anchor.token
        self._db.put(_anchor_key(anchor.size, anchor.tsa), value, self._sync)

    def get_anchors(self, size: int) -> list[Anchor]:
        prefix = b"A" + _u64(size)
        anchors = []
        for key, value in self._scan(prefix):
            if not key.startswith(prefix):
                break
            tsa = key[len(prefix) :].decode()
            gen = int.from_bytes(value[:_U64], "big")
            anchors.append(Anchor(size=size, tsa=tsa, token=value[_U64:], gen_time_ms=gen))
        return anchors

    def anchored_sizes(self, limit: int) -> list[int]:
        sizes: list[int] = []
        for key, _ in self._scan(b"A" + b"\xff" * (_U64 + 64), backwards=True):
            if not key.startswith(b"A") or len(sizes) >= limit:
                break
            size = int.from_bytes(key[1 : 1 + _U64], "big")
            if not sizes or sizes[-1] != size:
                sizes.append(size)
        return sizes

    def compact(self) -> None:
        """Compact the whole key space (benchmarks report disk bytes per entry after this)."""
        for family in (self._db, self._entries, self._dedup, self._nodes):
            family.compact_range(None, None)

    def close(self) -> None:
        # Column-family views and handles keep the database (and its LOCK) alive: drop them first.
        del self._entries, self._dedup, self._nodes
        del self._entries_cf, self._dedup_cf, self._nodes_cf
        self._db.close()
