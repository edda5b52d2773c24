"""RocksDB storage (the only module importing rocksdict): the ``ledger.store.contract.Store``
contract.

Key layout (raw bytes, integers big-endian so keys sort numerically), in two column families,
``default`` and ``tree``; one WriteBatch spans them atomically. The bundle and tile values are
``ledger.core.tile_layout``'s, under its keys (``B`` || bundle index, ``T`` || level || index:
its *logical* keys); a value is stored in one of two places, by whether it is full
(``tile_layout.is_full``: no later commit changes it):

    family   key                             value
    default  b"S"                            tree state: last leaf time (8) || compact range
    default  b"V"                            layout version: b"tiles-4"
    default  b"M"                            only while converting tiles-1 (``store.migrate``)
    default  b"P" || logical key             a right-edge (partial) bundle or tile value
    default  b"C" || size (8)                root hash (32) || signed note (UTF-8)
    default  b"A" || size (8) || TSA name    genTime ms (8) || DER TimeStampToken
    tree     last (8) || b"B"                the full entry bundle ending at entry ``last``
    tree     last (8) || b"T" || level (1)   the full tile value ending at entry ``last``

``last`` is the index of the last entry a full value covers (``sealed_key``). A value becomes
full in the commit that crosses ``last``, so every commit writes tree keys above every key
written before it: each table file RocksDB flushes covers a key range of its own, and
compaction moves files down a level without rewriting them (a trivial move). With the logical
keys in one family (layout ``tiles-3``), each flushed file spanned the bundles' and the tiles'
key ranges at once and compaction rewrote the tile values again and again: 0.92 µs of server CPU
per record under B2, about a quarter of the server's (docs/benchmarks.md "Position-major keys
(issue 23), 2026-12-02"). A
right-edge value, rewritten by nearly every commit, lives in the small default family; the
commit that fills it writes it under its tree key and deletes the edge key in the same batch, so
a read finds it in one place or the other (``_lookup``). All families use LZ4 on every level:
a different compression on the last level would make its moves rewrites.

A group commit is one ``WriteBatch``: the right-edge bundle and tile values it extends, the
full ones it completes, the state. It is written without sync and the WAL is then synced with
``flush_wal(True)``, which releases the GIL during the fsync (the write itself holds it);
``commit`` returns only after the sync, so it is durable when it returns. Then its digests go
into the dedup table (``ledger.store.dedup``: a memory-mapped file derived from the bundles,
``LEDGER-DEDUP`` in the RocksDB directory, rebuilt from the bundles where it is missing or
behind), before the commit returns: every look-up after a commit sees its digests, and each
hit is confirmed against the stored leaf. Memtables are capped so RSS does not grow with the
log.

Older layouts, converted when a writer opens the dir (a secondary refuses them until then;
each conversion is safe to repeat after a crash): ``tiles-3`` (the logical keys in the tree
family) is converted to ``tiles-4`` by ``ledger.store.migrate.convert_tiles3`` (one rewrite of
every value); ``tiles-2`` is ``tiles-3`` with a ``digests`` column family (one RocksDB key per
entry, replaced by the dedup table): it is dropped; ``tiles-1`` (level-0 tile rows 1..7 stored)
is converted by ``ledger.store.migrate.convert_tiles1``. An older release refuses a ``tiles-4``
dir (unknown layout) instead of misreading it. Data dirs of the earlier per-entry layout are
refused with a message naming ``ledger migrate-storage`` (``ledger.store.migrate``), which
converts them in place.

WAL recovery (issue 14): RocksDB's default, point-in-time recovery, silently drops everything
after the first damaged WAL record. The log opens with ``tolerate_corrupted_tail_records``
instead: a torn final record (a crash in the middle of a write) is dropped as normal, while
damage in the middle of the WAL refuses to open, naming what to do. ``wal_recovery="salvage"``
(``ledger restore accept --salvage-wal``) opens such a dir with point-in-time recovery, on
purpose; the published high-water mark then tells how far it fell behind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from rocksdict import (
    AccessType,
    BlockBasedOptions,
    BottommostLevelCompaction,
    Cache,
    Checkpoint,
    CompactOptions,
    DBCompressionType,
    DBRecoveryMode,
    Options,
    Rdict,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

from ledger.core import accel, merkle
from ledger.core.errors import DataLossError, StorageError
from ledger.core.limits import HASH_SIZE
from ledger.core.merkle import NodeID
from ledger.core.tile_layout import StoredTiles, TileWriter, bundle_key, entry_range, tile_key
from ledger.core.tiles import TILE_HEIGHT, TILE_WIDTH
from ledger.core.types import Anchor, PublishedCheckpoint
from ledger.store.contract import Batch, PackedBatch, TreeState, check_new_checkpoint
from ledger.store.dedup import FILE as DEDUP_FILE
from ledger.store.dedup import DedupTable

__all__ = [
    "EDGE",
    "LAYOUT",
    "OLD_FAMILIES",
    "TILES_1",
    "TILES_2",
    "TILES_3",
    "RocksStore",
    "logical_key",
    "open_rdict",
    "sealed_key",
]

_log = logging.getLogger("ledger.store")

_STATE = b"S"
_VERSION = b"V"
LAYOUT = b"tiles-4"  # full values under position-major keys, the right edge apart
TILES_3 = b"tiles-3"  # every value under its logical key in the tree family: converted
TILES_2 = b"tiles-2"  # level-0 tile values hold rows 3..7; a ``digests`` family: converted
TILES_1 = b"tiles-1"  # level-0 tile values held rows 1..7: converted on open by a writer
OLD_FAMILIES = ("entries", "nodes", "dedup")  # the per-entry layout before tiles
FAMILIES = ("tree",)
DIGESTS = "digests"  # the dedup family of tiles-2 (and of ``ledger.store.migrate``'s rebuild)
_U64 = 8
_BUNDLES_READ = 64  # bundles per read when inserting entries into the dedup table
INDEX_BYTES = 6  # the old dedup family's values: indexes below 2**48
FLUSH_EVERY = 1 << 18  # entries inserted into the dedup table between two header updates, at
# least; a quarter of the table's entries when more: a flush writes back every page dirtied
# since (random slots: most of the table), and what it saves is re-inserting those entries from
# their bundles on the next open after a crash (about 1.1 s per million)


EDGE = b"P"  # default-family prefix of the right-edge values (b"E" was the per-entry layout's)
_U64_END = 1 << 64


def _u64(n: int) -> bytes:
    return n.to_bytes(_U64, "big")


def sealed_key(key: bytes, size: int = _U64_END) -> bytes | None:
    """The tree family's key of the value at logical ``key`` when it is full at tree ``size``
    (``tile_layout.is_full``), else None: the index of the last entry it covers (8) || ``B``
    (a bundle) or ``T`` || level (a tile value). With no ``size``, None only for a value no tree
    below 2**64 entries fills (a level-7 tile past the first)."""
    end = entry_range(key)[1]
    if end > size:
        return None
    return (end - 1).to_bytes(_U64, "big") + (b"B" if key[:1] == b"B" else key[:2])


def logical_key(key: bytes) -> bytes | None:
    """The logical key of a tree-family key (``sealed_key`` inverted); None for a key it never
    writes (fsck reports those)."""
    level: int | None
    if len(key) == _U64 + 1 and key[_U64:] == b"B":
        level, shift = None, TILE_HEIGHT
    elif len(key) == _U64 + 2 and key[_U64 : _U64 + 1] == b"T" and key[_U64 + 1] < 8:
        level = key[_U64 + 1]
        shift = TILE_HEIGHT * (level + 1)
    else:
        return None
    end = int.from_bytes(key[:_U64], "big") + 1
    if end & ((1 << shift) - 1):
        return None
    index = (end >> shift) - 1
    return bundle_key(index) if level is None else tile_key(level, index)


def _checkpoint_key(size: int) -> bytes:
    return b"C" + _u64(size)


def _anchor_key(size: int, tsa: str) -> bytes:
    return b"A" + _u64(size) + tsa.encode()


def _options(memtable_mb: int, cache_mb: int) -> Options:
    """Options for the families, sharing one memory budget.

    Memtables are charged to the block cache, which also holds the index and filter blocks,
    so RocksDB's memory stays near memtables + cache however big the log grows. (Until layout
    tiles-3 a ``digests`` family held the dedup index with its own tuning: docs/benchmarks.md
    "The dedup index" measured it; ``ledger.store.dedup`` replaced it.)
    """
    cache = Cache((cache_mb + 2 * memtable_mb) << 20)
    budget = WriteBufferManager.new_write_buffer_manager_with_cache(
        2 * memtable_mb << 20, False, cache
    )
    opts = _family_options(memtable_mb, cache, budget)
    # LZ4 on every level (bundles repeat a batch's leaf prefix). Until layout tiles-4 the last
    # level was ZSTD; a compression that differs by level makes RocksDB rewrite the files it
    # could move (module docstring). Tables written before read as they are.
    opts.set_compression_type(DBCompressionType.lz4())
    return opts


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


_PROPERTIES = (
    "rocksdb.estimate-num-keys",
    "rocksdb.total-sst-files-size",
    "rocksdb.live-sst-files-size",
    "rocksdb.cur-size-all-mem-tables",
    "rocksdb.block-cache-usage",
    "rocksdb.estimate-pending-compaction-bytes",
    "rocksdb.num-running-compactions",
    "rocksdb.num-running-flushes",
    "rocksdb.background-errors",
)


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
        'published high-water mark); see docs/operating.md "Faults, rollbacks and restore"'
    )


def _read_error(what: str, exc: Exception) -> StorageError:
    """A failed read: ``DataLossError`` when RocksDB reports damage (its text names the table
    file and offset), else ``StorageError``; never a plain Exception reaching a caller."""
    text = str(exc)
    if "Corruption" in text or "checksum" in text.lower():
        return DataLossError(f"damaged data reading {what}: {text}")
    return StorageError(f"reading {what} failed: {text}")


_T = TypeVar("_T")


def _read(what: str, fn: Callable[[], _T]) -> _T:
    try:
        return fn()
    except StorageError:
        raise
    except Exception as exc:  # rocksdict reports corruption as a plain Exception
        raise _read_error(what, exc) from exc


def checked_scan(
    db: Rdict, from_key: bytes, *, backwards: bool = False, what: str = "a scan"
) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) pairs from ``from_key`` on (or back), checking the iterator's status when
    it stops: a damaged block ends a RocksDB iteration as if the keys ended there, so a stop
    with a bad status raises ``DataLossError`` (naming the file) instead of ending quietly."""
    try:
        it = db.iter()
        if backwards:
            it.seek_for_prev(from_key)
        else:
            it.seek(from_key)
        step, valid, key, value = (it.prev if backwards else it.next), it.valid, it.key, it.value
        while valid():
            yield cast("bytes", key()), cast("bytes", value())
            step()
        it.status()
    except StorageError:
        raise
    except GeneratorExit:
        raise
    except Exception as exc:  # rocksdict reports corruption as a plain Exception
        raise _read_error(what, exc) from exc


def _parse_checkpoint(size: int, value: bytes) -> PublishedCheckpoint:
    note = value[32:].decode()
    return PublishedCheckpoint(
        origin=note.split("\n", 1)[0], size=size, root_hash=value[:32], note=note
    )


def open_rdict(path: str | Path, families: dict[str, Options], opts: Options) -> Rdict:
    """Open a RocksDB directory with these column families (``StorageError`` when it cannot)."""
    try:
        return Rdict(str(path), opts, column_families=families)
    except Exception as exc:  # rocksdict raises plain Exception (e.g. the LOCK is held)
        raise _open_error(path, exc) from exc


def _check_layout(path: Path, opts: Options) -> list[str]:
    """Refuse a data dir of the per-entry layout (it needs ``ledger migrate-storage``); the
    families to open only to drop them (tiles-2's ``digests``)."""
    if not (path / "CURRENT").exists():
        return []
    try:
        families = Rdict.list_cf(str(path), opts)
    except Exception as exc:
        raise StorageError(f"cannot open RocksDB at {path}: {exc}") from exc
    old = sorted(set(families) & set(OLD_FAMILIES))
    if old or ("tree" not in families and len(families) > 1):
        raise StorageError(
            f"{path} holds the earlier per-entry storage layout (column families "
            f"{', '.join(old) or ', '.join(families)}); convert it with "
            f"`ledger migrate-storage --db {path}` (stop the server first)"
        )
    return [DIGESTS] if DIGESTS in families else []


class RocksStore:
    """A ``Store`` in a RocksDB directory (one writing process at a time, as RocksDB requires).

    ``RocksStore.secondary`` opens a read-only view for reader processes (RocksDB secondary
    instance): it sees what the writer had made durable at its last ``catch_up``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        memtable_mb: int = 16,
        cache_mb: int = 32,
        secondary: str | Path | None = None,
        create: bool = True,
        paranoid: bool = False,
        wal_recovery: str = "strict",
        tiles_only: bool = False,
    ) -> None:
        """Open the store; ``secondary``: a read-only RocksDB secondary instance (``catch_up``
        follows the writer); ``create=False``: refuse a folder with no database (fsck,
        restore); ``paranoid``: any corrupt WAL record or block is an error, never skipped;
        ``wal_recovery``: "strict" (a torn tail is dropped, damage before it refuses to open)
        or "salvage" (point in time: ``ledger restore accept --salvage-wal``); ``tiles_only``
        (a secondary that publishes tiles, ``ledger.objstore.mirror``): it never looks up
        digests, so it never maps the dedup table. The dedup table is opened (and rebuilt
        where it must be) on the first look-up or commit, or by ``open_dedup``: opening a
        store to read it (backup, restore checks, fsck of other parts) does not touch it."""
        if not create and not (Path(path) / "CURRENT").exists():
            raise StorageError(f"no RocksDB at {path}")
        opts = _options(memtable_mb, cache_mb)
        opts.set_wal_recovery_mode(_recovery_mode(wal_recovery))
        if paranoid:
            opts.set_paranoid_checks(True)
            opts.set_wal_recovery_mode(DBRecoveryMode.absolute_consistency())
        self.read_only = secondary is not None
        self.path = Path(path)
        self._table: DedupTable | None = None
        self._opening = threading.Lock()
        self.dedup_note = ""  # why the dedup table was rebuilt on open, and how long it took
        if secondary is None:
            Path(path).mkdir(parents=True, exist_ok=True)
            opts.create_missing_column_families(True)
            old = _check_layout(Path(path), opts)
            families = {name: opts for name in (*FAMILIES, *old)}
            self._db = open_rdict(path, families, opts)
            for name in old:  # tiles-2's dedup family: derived now (``_check_version``)
                self._db.drop_column_family(name)
        else:
            opts.set_max_open_files(-1)  # a secondary must keep every file open to catch up
            access = AccessType.secondary(str(secondary))
            try:
                self._db = Rdict(
                    str(path), opts, column_families={"tree": opts}, access_type=access
                )
            except Exception as exc:
                raise StorageError(f"cannot open {path} as a secondary: {exc}") from exc
        self._tree = self._db.get_column_family("tree")
        self.tiles_only = tiles_only and self.read_only
        self._tree_cf = self._db.get_column_family_handle("tree")
        self._check_version(Path(path))
        self._nosync = WriteOptions()
        self._nosync.sync = False
        self._reader = StoredTiles(self._lookup)
        try:
            self._state = self._stored_state()
            self._writer = TileWriter.load(self._state.size, self._lookup)
        except StorageError:
            self.close()
            raise
        except Exception as exc:  # rocksdict reports a corrupt block as a plain Exception
            self.close()
            raise StorageError(f"cannot read the tree's right edge in {path}: {exc}") from exc
        self._unflushed = 0  # entries inserted into the dedup table since its header

    @classmethod
    def secondary(
        cls, path: str | Path, scratch: str | Path, *, memtable_mb: int = 16, cache_mb: int = 32
    ) -> RocksStore:
        """A read-only view of the data dir at ``path`` (``scratch``: its own info logs)."""
        return cls(path, secondary=scratch, memtable_mb=memtable_mb, cache_mb=cache_mb)

    def catch_up(self) -> None:
        """A secondary: see what the writer has made durable since (it replays the WAL written
        since into its memtables, holding the GIL: a few ms). A dedup table the writer has
        replaced since (grown or rebuilt) is mapped again."""
        self._db.try_catch_up_with_primary()
        state = self._stored_state()
        self._writer = TileWriter.load(  # its right edge, for reads (before the new state)
            state.size, lambda keys: self._lookup_at(keys, state.size, None)
        )
        self._state = state
        table = self._table
        if table is not None:
            try:
                current = (self.path / DEDUP_FILE).stat().st_ino
            except OSError:
                current = -1
            if current != table.inode:
                self._table = None
                table.retire()

    def _check_version(self, path: Path) -> None:
        try:  # a damaged block here is a finding (fsck), not a traceback
            version = cast(
                "bytes | None", _read("the layout version", lambda: self._db.get(_VERSION))
            )
            state = None if version else _read("the tree state", lambda: self._db.get(_STATE))
        except StorageError:
            self.close()
            raise
        if version is None and state is not None:
            self.close()
            raise StorageError(
                f"{path} has a tree state but no layout version; convert it with "
                f"`ledger migrate-storage --db {path}`"
            )
        if version in (TILES_1, TILES_2, TILES_3) and self.read_only:
            self.close()
            raise StorageError(
                f"{path} holds storage layout {version.decode()}; the log converts it to "
                f"{LAYOUT.decode()} when it opens it (or run `ledger migrate-storage --db {path}`)"
            )
        if version is None and not self.read_only:  # a new data dir
            self._db.put(_VERSION, LAYOUT, _synced())
        elif version == TILES_2:  # its digests family was dropped on open: now tiles-3
            version = TILES_3
        elif version == TILES_1:
            from ledger.store.migrate import convert_tiles1  # it imports this module

            self._converting(
                lambda: convert_tiles1(self._db, self._tree, self._tree_cf, _log.info), "tiles-1"
            )
            version = TILES_3
        if version == TILES_3:
            from ledger.store.migrate import convert_tiles3

            self._converting(
                lambda: convert_tiles3(self._db, self._tree, self._tree_cf, _log.info), "tiles-3"
            )
        elif version not in (None, TILES_1, TILES_2, LAYOUT):
            self.close()
            raise StorageError(f"{path}: unknown storage layout {version!r}")

    def _converting(self, convert: Callable[[], object], layout: str) -> None:
        """Run a layout conversion on open; closed and ``StorageError`` when it fails."""
        try:
            convert()
        except StorageError:
            self.close()
            raise
        except Exception as exc:  # rocksdict reports a damaged block as a plain Exception
            self.close()
            raise _read_error(f"the {layout} values", exc) from exc

    def _refuse_writes(self) -> None:
        if self.read_only:
            raise StorageError("a secondary (reader) store does not write; append to the writer")

    def tree_values(self, keys: list[bytes]) -> list[bytes | None]:
        """Raw bundle and tile values (``ledger.core.tile_layout`` keys) in one read (fsck)."""
        return self._lookup(keys)

    def _lookup(self, keys: list[bytes]) -> list[bytes | None]:
        """The values at logical keys (module docstring): a full value in the tree family, the
        right edge from the ``TileWriter`` (the writer's, or a reader's as of its last catch-up)
        or the default family. A key not found where the tree state says it is is read in the
        other family, then once more where it was read first: a commit (one batch) may have
        filled a value, or made a new one, between the state and a read."""
        writer: TileWriter | None = getattr(self, "_writer", None)  # None while opening
        return self._lookup_at(keys, self._state.size, writer)

    def _lookup_at(
        self, keys: list[bytes], size: int, writer: TileWriter | None
    ) -> list[bytes | None]:
        """``_lookup`` as of a tree of ``size`` entries with ``writer``'s right edge (None: the
        stored one). ``writer`` is never older than ``size``: a commit, and a reader's catch-up,
        put the new writer in place before the new state."""
        if not keys:
            return []
        found: list[bytes | None] = [None] * len(keys)
        sealed: list[int] = []
        physical: list[bytes] = []
        edge: list[int] = []
        for i, key in enumerate(keys):
            placed = sealed_key(key, size)
            if placed is not None:
                sealed.append(i)
                physical.append(placed)
            else:
                value = None if writer is None else writer.edge(key)
                if value is None:
                    edge.append(i)
                else:
                    found[i] = value
        sealed = self._read_into(self._tree, "tree values", sealed, physical, found)
        edge = self._read_edge(keys, edge, found)
        if sealed or edge:  # moved between the state and the read, or missing
            sealed = self._read_edge(keys, sealed, found)
            edge = self._read_sealed(keys, edge, found)
            self._read_sealed(keys, sealed, found)
            self._read_edge(keys, edge, found)
        return found

    def _read_sealed(
        self, keys: list[bytes], which: list[int], found: list[bytes | None]
    ) -> list[int]:
        """Read ``keys[i]`` for ``i`` in ``which`` from the tree family into ``found``; the
        ``i`` not found."""
        where = [(i, sealed_key(keys[i])) for i in which]
        wanted = [(i, key) for i, key in where if key is not None]
        return [i for i, key in where if key is None] + self._read_into(
            self._tree, "tree values", [i for i, _ in wanted], [k for _, k in wanted], found
        )

    def _read_edge(
        self, keys: list[bytes], which: list[int], found: list[bytes | None]
    ) -> list[int]:
        """``_read_sealed`` from the right-edge keys of the default family."""
        physical = [EDGE + keys[i] for i in which]
        return self._read_into(self._db, "right-edge values", which, physical, found)

    @staticmethod
    def _read_into(
        family: Rdict, what: str, which: list[int], physical: list[bytes], found: list[bytes | None]
    ) -> list[int]:
        """Read ``physical[k]`` from ``family`` into ``found[which[k]]`` (one multi-get);
        the ``which`` not found."""
        if not which:
            return []
        values = _read(what, lambda: family.get(cast("list[Any]", physical)))
        missing = []
        for i, value in zip(which, cast("list[bytes | None]", values), strict=True):
            if value is None:
                missing.append(i)
            else:
                found[i] = value
        return missing

    def put_values(
        self, wb: WriteBatch, values: Iterable[tuple[bytes, bytes]], old: int, size: int
    ) -> None:
        """Put a commit's values (logical keys, ``TileWriter.plan``) taking the tree from
        ``old`` entries to ``size`` into ``wb``: a full one under its tree key, deleting its
        right-edge key where it had one; the right edge under its edge key. (Commits use it;
        so does the synced-write bound, ``tools/bench_local.py``.)"""
        tree = self._tree_cf
        for key, value in values:
            sealed = sealed_key(key, size)
            if sealed is None:
                wb.put(EDGE + key, value)
            else:
                wb.put(sealed, value, tree)
                if old > entry_range(key)[0]:  # it had entries: its edge key may exist
                    wb.delete(EDGE + key)

    def _scan(self, from_key: bytes, *, backwards: bool = False) -> Iterator[tuple[bytes, bytes]]:
        what = f"the default family from key {from_key.hex()}"
        return checked_scan(self._db, from_key, backwards=backwards, what=what)

    # --- tree ------------------------------------------------------------------------------

    def load_state(self) -> TreeState:
        """The durable tree state this process knows: the writer's after its last commit, a
        reader's as of its last catch-up. Never newer than the right edge reads are answered
        from (``_lookup``), though the stored state may be, between a commit's write and its
        return."""
        return self._state

    def _stored_state(self) -> TreeState:
        raw = cast("bytes | None", _read("the tree state", lambda: self._db.get(_STATE)))
        return TreeState() if raw is None else TreeState.from_bytes(raw)

    def find_digests(self, digests: Sequence[bytes]) -> list[int | None]:
        return self.find_packed(b"".join(digests)) if digests else []

    def find_packed(self, digests: bytes) -> list[int | None]:
        """``find_digests`` of N x 32 bytes: the table's candidates, each confirmed against
        the stored leaf (its digest, an index below the tree size), so only a true hit
        answers; with no candidate (a new digest, the common case) nothing is read."""
        found: list[int | None] = [None] * (len(digests) // HASH_SIZE)
        candidates = self._dedup().find(digests)
        if not candidates:
            return found
        size = self._state.size
        pairs = [
            (position, index)
            for position, index in zip(candidates[0::2], candidates[1::2], strict=True)
            if index < size
        ]
        indexes = sorted({index for _, index in pairs})
        leaves = dict(zip(indexes, self.get_leaves(indexes), strict=True))
        for position, index in pairs:
            at = position * HASH_SIZE
            if found[position] is None and leaves[index][9:41] == digests[at : at + HASH_SIZE]:
                found[position] = index
        return found

    def dedup_candidates(self, digests: bytes) -> list[int]:
        """The dedup table's unconfirmed answers (``ledger.core.hot.dedup_find``): fsck."""
        return self._dedup().find(digests)

    def open_dedup(self) -> str:
        """Open the dedup table now (the server at start, so its first append does not wait
        for a rebuild); return what was done to it ("" when it was up to date)."""
        self._dedup()
        return self.dedup_note

    def _dedup(self) -> DedupTable:
        table = self._table
        if table is None:
            if self.tiles_only:
                raise StorageError("this reader opened the store without its dedup index")
            with self._opening:  # a reader thread and the writer may both ask first
                table = self._table
                if table is None:
                    table = self._table = self._open_dedup()
        return table

    def _root_at(self, size: int) -> bytes:
        if size == self._state.size:
            return self._state.compact.root()
        if size == 0:
            return merkle.EMPTY_ROOT
        return merkle.fold_proof_nodes([merkle.subtree_node(0, size)], self._reader.nodes)[0]

    def _open_dedup(self) -> DedupTable:
        path = self.path / DEDUP_FILE
        table, why = DedupTable.open(path, writable=not self.read_only)
        if self.read_only:  # the writer's table, mapped read-only; confirmed hits only
            if table is None:
                raise StorageError(
                    f"the dedup table {path} cannot be used ({why}): the writer makes it when "
                    "it opens the data dir"
                )
            return table
        size = self._state.size
        if table is not None:
            covered = table.header.covered
            if covered > size:
                why = f"it covers {covered:,} entries, the tree holds {size:,}"
            elif self._root_at(covered) != table.header.root:
                why = f"its tree root at size {covered:,} is not this tree's"
            else:
                if covered < size:  # entries since its last header: from their bundles
                    self._reserve(table, size - covered, covered)
                    table = self._table or table
                    for first, digests in self._bundle_digests(covered, size):
                        table.insert(first, digests)
                    table.flush(size, self._root_at(size))
                return table
            table.close()
        started = time.monotonic()
        built = DedupTable.build(path, size, self._bundle_digests(0, size))
        built.flush(size, self._root_at(size))
        built.install(path)
        if size or table is not None or why != "there is none":  # not a new data dir
            self.dedup_note = (
                f"dedup table {path} rebuilt from the entry bundles ({why}): {size:,} entries "
                f"in {time.monotonic() - started:.1f} s"
            )
            _log.warning("%s", self.dedup_note)
        return built

    def _bundle_digests(self, start: int, end: int) -> Iterator[tuple[int, bytes]]:
        """(first index, N x 32 record digests) of the entries ``[start, end)``, from their
        entry bundles in order (read 64 at a time)."""
        last = (end + TILE_WIDTH - 1) >> TILE_HEIGHT
        for chunk in range(start >> TILE_HEIGHT, last, _BUNDLES_READ):
            indexes = range(chunk, min(chunk + _BUNDLES_READ, last))
            values = self._lookup([bundle_key(n) for n in indexes])
            for n, value in zip(indexes, values, strict=True):
                first = n << TILE_HEIGHT
                if value is None:
                    raise DataLossError(f"entry bundle {n} is missing")
                try:
                    digests = accel.bundle_digests(value)
                except ValueError as exc:
                    raise DataLossError(f"entry bundle {n}: {exc}") from exc
                low, high = max(start - first, 0), min(end - first, TILE_WIDTH)
                if len(digests) // HASH_SIZE < high:
                    raise DataLossError(f"the entry bundles end before entry {end - 1}")
                yield first + low, digests[low * HASH_SIZE : high * HASH_SIZE]

    def _reserve(self, table: DedupTable, more: int, covered: int) -> None:
        """Room for ``more`` entries: a table twice as big (or more) when it would be over
        half full, written beside it from its fingerprints (entries ``[0, covered)`` at
        least) and put in its place."""
        if not table.needs_growth(more):
            return
        grown = table.grown(more)
        try:
            grown.flush(covered, self._root_at(covered))
            grown.install(table.path)
        except BaseException:
            grown.discard()
            raise
        self._table = grown
        self._unflushed = 0
        table.retire()

    def _inserted(self, first: int, digests: bytes, state: TreeState) -> None:
        """After a durable commit: its digests into the dedup table (room made before)."""
        self._state = state
        table = self._dedup()
        table.insert(first, digests)
        self._unflushed += len(digests) // HASH_SIZE
        if self._unflushed >= max(FLUSH_EVERY, table.count // 4):
            table.flush(state.size, state.compact.root())
            self._unflushed = 0

    def commit(self, batch: Batch) -> None:
        self._refuse_writes()
        self._reserve(self._dedup(), len(batch.digests), self._state.size)
        values, writer = self._writer.plan(batch.first, batch.entries, batch.nodes)
        wb = WriteBatch(raw_mode=True)
        self.put_values(wb, values.items(), batch.first, batch.state.size)
        wb.put(_STATE, batch.state.to_bytes())
        self._db.write(wb, self._nosync)  # holds the GIL ...
        self._db.flush_wal(True)  # ... the fsync does not; durable before anyone is told
        self._writer = writer
        self._inserted(batch.first, b"".join(batch.digests), batch.state)

    def commit_packed(self, batch: PackedBatch) -> None:
        """``commit`` over buffers: no object per entry."""
        self._refuse_writes()
        self._reserve(self._dedup(), len(batch.digests) // HASH_SIZE, self._state.size)
        values, writer = self._writer.plan_packed(batch.first, batch.framed, batch.step, batch.rows)
        wb = WriteBatch(raw_mode=True)
        self.put_values(wb, values.items(), batch.first, batch.state.size)
        wb.put(_STATE, batch.state.to_bytes())
        self._db.write(wb, self._nosync)  # holds the GIL ...
        self._db.flush_wal(True)  # ... the fsync does not; durable before anyone is told
        self._writer = writer
        self._inserted(batch.first, batch.digests, batch.state)

    def get_nodes(self, ids: Sequence[NodeID]) -> list[bytes]:
        return self._reader.nodes(ids)

    def get_leaves(self, indexes: Sequence[int]) -> list[bytes]:
        return self._reader.leaves(indexes)

    def get_tiles(self, ids: Sequence[tuple[int, int, int]]) -> list[bytes]:
        return self._reader.tiles(ids)

    def get_entry_bundles(self, ids: Sequence[tuple[int, int]]) -> list[bytes]:
        return self._reader.bundles(ids)

    # --- checkpoints and anchors -------------------------------------------------------------

    def put_checkpoint(self, checkpoint: PublishedCheckpoint) -> None:
        self._refuse_writes()
        if check_new_checkpoint(self.get_checkpoint(checkpoint.size), checkpoint):
            value = checkpoint.root_hash + checkpoint.note.encode()
            # as a commit: a synced put would hold the GIL during the fsync; the WAL sync
            # does not, and the checkpoint is durable when it returns either way
            self._db.put(_checkpoint_key(checkpoint.size), value, self._nosync)
            self._db.flush_wal(True)

    def get_checkpoint(self, size: int) -> PublishedCheckpoint | None:
        key = _checkpoint_key(size)
        value = cast("bytes | None", _read(f"checkpoint {size}", lambda: self._db.get(key)))
        return None if value is None else _parse_checkpoint(size, value)

    def latest_checkpoint(self) -> PublishedCheckpoint | None:
        for key, value in self._scan(b"C" + b"\xff" * _U64, backwards=True):
            if not key.startswith(b"C"):
                return None
            return _parse_checkpoint(int.from_bytes(key[1:], "big"), value)
        return None

    def put_anchor(self, anchor: Anchor) -> None:
        self._refuse_writes()
        value = _u64(anchor.gen_time_ms) + anchor.token
        self._db.put(_anchor_key(anchor.size, anchor.tsa), value, _synced())

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

    # --- operations (fsck, backup, metrics) ---------------------------------------------------

    FAMILIES = ("default", *FAMILIES)

    def _family(self, name: str) -> Rdict:
        if name not in self.FAMILIES:
            raise StorageError(f"no column family {name!r}: the families are {self.FAMILIES}")
        return {"default": self._db, "tree": self._tree}[name]

    def scan_family(
        self, family: str, from_key: bytes = b"", *, backwards: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) of a column family in key order (or back from ``from_key``);
        reads verify block checksums and a damaged block raises ``DataLossError``."""
        what = f"the {family} family from key {from_key.hex()}"
        return checked_scan(self._family(family), from_key, backwards=backwards, what=what)

    def probe_table_files(self) -> list[tuple[str, str]]:
        """Point-read the smallest and largest key of every live table file, so its filter
        block is read (and checksummed) too, which scans never touch; (file, error) failures."""
        failures = []
        for info in self._db.live_files():
            # live_files() does not name the file's column family: read the keys in each
            # (a read of a key absent from a family reads that family's filter, not the file).
            try:
                for name in self.FAMILIES:
                    family = self._family(name)
                    family.get(info["start_key"])
                    family.get(info["end_key"])
            except Exception as exc:  # rocksdict reports corruption as a plain Exception
                failures.append((str(info["name"]).lstrip("/"), str(exc)))
        return failures

    def unreadable_keys(self, family: str, keys: list[bytes]) -> list[bytes]:
        """Keys a scan returned that a point read (through the bloom filter) does not find."""
        db = self._family(family)
        found = _read(f"{family} keys", lambda: db.get(cast("list[Any]", keys))) if keys else []
        values = cast("list[bytes | None]", found)
        return [k for k, v in zip(keys, values, strict=True) if v is None]

    def backup_to(self, out: Path) -> None:
        """A consistent RocksDB checkpoint of every family in ``out`` (which must not exist):
        hard links to the immutable table files plus what the memtables hold."""
        try:
            Checkpoint(self._db).create_checkpoint(str(out))
        except Exception as exc:  # rocksdict raises plain Exception
            raise StorageError(f"RocksDB checkpoint into {out} failed: {exc}") from exc

    def properties(self) -> dict[str, dict[str, int]]:
        """Integer RocksDB properties per column family (for metrics)."""
        out: dict[str, dict[str, int]] = {}
        for family in self.FAMILIES:
            db = self._family(family)
            values = {}
            for name in _PROPERTIES:
                value = db.property_int_value(name)
                if value is not None:
                    values[name] = int(value)
            out[family] = values
        return out

    def compact(self) -> None:
        """Compact the whole key space (benchmarks report disk bytes per entry after this),
        rewriting the last level too, so tables written before its compression get it."""
        full = CompactOptions()
        full.set_bottommost_level_compaction(BottommostLevelCompaction.force_optimized())
        for family in (self._db, self._tree):
            family.compact_range(None, None, full)

    def close(self) -> None:
        table = getattr(self, "_table", None)
        if table is not None:  # the next open then has no entries to insert again
            self._table = None
            try:
                if not self.read_only and table.header.covered != self._state.size:
                    table.flush(self._state.size, self._state.compact.root())
            finally:
                table.close()
        # Column-family views and handles keep the database (and its LOCK) alive: drop them first.
        for name in ("_tree", "_tree_cf"):
            if hasattr(self, name):
                delattr(self, name)
        self._db.close()


def _synced() -> WriteOptions:
    opts = WriteOptions()
    opts.sync = True
    return opts
