"""Convert older data dirs to the current storage layout (``ledger.core.tile_layout``), in place.

Three conversions, each safe to repeat after a crash:

**tiles-3 -> tiles-4** (``convert_tiles3``): ``tiles-3`` kept every bundle and tile value under
its logical key in the tree family; ``tiles-4`` keeps a full value under a position-major key
there and the right edge in the default family (``ledger.store.rocks``). Each value is put in
its new place and its old key deleted in the same write batch, so after a crash every value is
in exactly one place and a run converts what is left; the layout version is written last, then
the old key range is compacted away. ``RocksStore`` runs it when a writer opens a ``tiles-3``
dir (after the conversions below where they apply).

**tiles-1 -> tiles-2** (``convert_tiles1``): layout ``tiles-1`` stored level-0 tile rows 1..7;
``tiles-2`` stores rows 3..7 and derives rows 1..2 from the entry bundle (24 bytes per entry
less). Only level-0 tile values change (one per 256 entries): each keeps its rows 3..7, the
suffix of its old value. ``RocksStore`` runs it when a writer opens a ``tiles-1`` dir (a
secondary refuses one); ``ledger migrate-storage`` runs it too. Chunks of values are rewritten
in write batches that also record how far the conversion got (key ``M``), so a crash resumes
where it stopped; the layout version (``tiles-3``) is written last, with the progress key
deleted.

**The per-entry layout -> tiles** (``migrate``): the per-entry layout kept one value per entry
(``E`` || index), one per dedup digest (``D`` || digest) and one per tree node (``N`` || level ||
index), either in column families ``entries`` / ``dedup`` / ``nodes`` or, before those, all in
``default``. Checkpoints, anchors and the tree state keep their keys and formats. Steps (the
layout version key is written last):

1. drop any half-built ``tree`` / ``digests`` families of an earlier, interrupted run;
2. stream the old entries in index order, rebuilding bundles and tile values with the same
   ``TileWriter`` the log uses (the dedup table is derived from the bundles when the log first
   opens the dir: ``ledger.store.dedup``);
3. check that the rebuilt tree has the stored tree state's size and roots (else stop, leaving
   the old layout in place and refused);
4. write the layout version (synced), then drop the old families and keys, and compact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

from rocksdict import ColumnFamily, Options, Rdict, WriteBatch, WriteOptions

from ledger.core.errors import StorageError
from ledger.core.limits import HASH_SIZE
from ledger.core.merkle import CompactRange, leaf_hash
from ledger.core.tile_layout import LEVEL0_FIRST_ROW, TileWriter, is_value_key, tile_key
from ledger.core.tiles import TILE_HEIGHT, TILE_WIDTH, frame_entry
from ledger.store.contract import TreeState
from ledger.store.rocks import (
    DIGESTS,
    EDGE,
    FAMILIES,
    LAYOUT,
    OLD_FAMILIES,
    TILES_1,
    TILES_3,
    RocksStore,
    open_rdict,
    sealed_key,
)

__all__ = ["PROGRESS", "convert_tiles1", "convert_tiles3", "migrate"]

CHUNK = 1 << 16  # entries per write while rebuilding
TILE_CHUNK = 4_096  # level-0 tile values per write while converting tiles-1
MOVE_CHUNK = 8 << 20  # bytes of values per write while converting tiles-3
PROGRESS = b"M"  # tiles-1 -> tiles-2: level-0 tiles below this index (8 bytes) are converted


def _tiles1_bases() -> dict[int, int]:
    """tiles-1 level-0 value length (in hashes) -> its base width (row 1: bundle width / 2)."""
    rows = TILE_HEIGHT - 1
    return {sum(b >> k for k in range(rows)): b for b in range(TILE_WIDTH // 2 + 1)}


def _tiles2_value(key: bytes, old: bytes, bases: dict[int, int]) -> bytes:
    """A tiles-1 level-0 value cut to its rows 3..7 (its rows 1..2 come first)."""
    base = bases.get(len(old) // HASH_SIZE)
    if base is None or len(old) % HASH_SIZE:
        raise StorageError(f"tile value {key.hex()} has no tiles-1 length ({len(old)} bytes)")
    dropped = sum(base >> k for k in range(LEVEL0_FIRST_ROW - 1))  # rows 1..2
    return old[dropped * HASH_SIZE :]


def convert_tiles1(
    db: Rdict, tree: Rdict, tree_cf: ColumnFamily, note: Callable[[str], None] = lambda _m: None
) -> int:
    """Convert an open ``tiles-1`` data dir (``db``: its default family, ``tree``/``tree_cf``:
    its tree family) to ``tiles-2`` in place; return the number of level-0 values converted.
    The caller has checked that the layout version is ``tiles-1``."""
    bases = _tiles1_bases()
    nosync = WriteOptions()
    nosync.sync = False
    done = cast("bytes | None", db.get(PROGRESS))
    start = tile_key(0, 0 if done is None else int.from_bytes(done, "big"))
    end = tile_key(1, 0)
    converted = 0
    batch: list[tuple[bytes, bytes]] = []

    def flush(next_index: int) -> None:
        wb = WriteBatch(raw_mode=True)
        for key, value in batch:
            if value:
                wb.put(key, value, tree_cf)
            else:  # a right-edge tile narrower than 8 leaves: tiles-2 has no value for it
                wb.delete(key, tree_cf)
        wb.put(PROGRESS, next_index.to_bytes(8, "big"))
        db.write(wb, nosync)
        batch.clear()

    items = cast("Iterator[tuple[bytes, bytes]]", tree.items(from_key=start))
    for key, value in items:
        if key >= end:
            break
        batch.append((key, _tiles2_value(key, value, bases)))
        converted += 1
        if len(batch) == TILE_CHUNK:
            flush(int.from_bytes(key[2:], "big") + 1)
            note(f"converted {converted:,} level-0 tile values")
    if batch:
        flush(int.from_bytes(batch[-1][0][2:], "big") + 1)
    wb = WriteBatch(raw_mode=True)
    wb.put(b"V", TILES_3)
    wb.delete(PROGRESS)
    db.write(wb, nosync)
    db.flush_wal(True)
    note(f"layout {TILES_1.decode()} converted to {TILES_3.decode()} ({converted:,} tile values)")
    return converted


def convert_tiles3(
    db: Rdict, tree: Rdict, tree_cf: ColumnFamily, note: Callable[[str], None] = lambda _m: None
) -> int:
    """Convert an open ``tiles-3`` data dir (``db``: its default family, ``tree``/``tree_cf``:
    its tree family) to ``tiles-4`` in place; return the number of values moved. The caller
    has checked that the layout version is ``tiles-3``."""
    raw = cast("bytes | None", db.get(b"S"))
    size = TreeState().size if raw is None else TreeState.from_bytes(raw).size
    nosync = WriteOptions()
    nosync.sync = False
    moved = pending = 0
    wb = WriteBatch(raw_mode=True)
    # The logical keys sort from b"B" (tiles-4's tree keys, below 2**56 entries, from 0x00).
    for key, value in cast("Iterator[tuple[bytes, bytes]]", tree.items(from_key=b"B")):
        if not is_value_key(key):
            if key[:1] > b"T":
                break
            continue  # not a tiles-3 key: left for fsck to name
        sealed = sealed_key(key, size)
        if sealed is None:
            wb.put(EDGE + key, value)
        else:
            wb.put(sealed, value, tree_cf)
        wb.delete(key, tree_cf)
        moved += 1
        pending += len(value)
        if pending >= MOVE_CHUNK:
            db.write(wb, nosync)
            wb = WriteBatch(raw_mode=True)
            pending = 0
            note(f"moved {moved:,} bundle and tile values to layout {LAYOUT.decode()}")
    wb.put(b"V", LAYOUT)
    db.write(wb, nosync)
    db.flush_wal(True)
    tree.compact_range(b"B", b"U")  # the old keys' tombstones and the tables that held them
    note(f"layout {TILES_3.decode()} converted to {LAYOUT.decode()} ({moved:,} values moved)")
    return moved


def _old_entries(db: Rdict, families: list[str]) -> Iterator[tuple[int, bytes]]:
    """(index, leaf) of the per-entry layout, in index order."""
    source = db.get_column_family("entries") if "entries" in families else db
    for key, value in cast("Iterator[tuple[bytes, bytes]]", source.items(from_key=b"E")):
        if not key.startswith(b"E"):
            break
        yield int.from_bytes(key[1:], "big"), value


def _rebuild(db: Rdict, families: list[str], state: TreeState, note: Callable[[str], None]) -> None:
    tree = db.get_column_family_handle("tree")
    writer = TileWriter.load(0, lambda keys: [None] * len(keys))
    compact = CompactRange()
    chunk: list[bytes] = []
    nosync = WriteOptions()
    nosync.sync = False

    def flush() -> None:
        nonlocal writer
        first = compact.size
        nodes = compact.extend([leaf_hash(leaf) for leaf in chunk], with_leaves=False)
        values, writer = writer.plan(first, [frame_entry(leaf) for leaf in chunk], nodes)
        wb = WriteBatch(raw_mode=True)
        for key, value in values.items():
            wb.put(key, value, tree)
        db.write(wb, nosync)
        note(f"rebuilt {compact.size:,} of {state.size:,} entries")
        chunk.clear()

    for index, leaf in _old_entries(db, families):
        if index != compact.size + len(chunk):
            raise StorageError(f"entry {compact.size + len(chunk)} is missing from the old layout")
        if index >= state.size:
            break  # sequenced past the durable state: never acknowledged
        chunk.append(leaf)
        if len(chunk) == CHUNK:
            flush()
    if chunk:
        flush()
    if compact != state.compact:
        raise StorageError(
            f"the rebuilt tree ({compact!r}) differs from the stored tree state "
            f"({state.compact!r}); the old layout is left as it was"
        )


def migrate(path: str | Path, *, note: Callable[[str], None] = lambda _m: None) -> int:
    """Convert the data dir at ``path`` in place; return its size. A no-op on the current
    layout (apart from a compaction). The per-entry layout and ``tiles-1`` are converted
    here to ``tiles-3``, which opening the dir as the log does converts to ``tiles-4``."""
    path = Path(path)
    if not (path / "CURRENT").exists():
        raise StorageError(f"{path} is not a RocksDB directory")
    opts = Options(raw_mode=True)
    opts.create_missing_column_families(True)
    try:
        families = Rdict.list_cf(str(path), opts)
    except Exception as exc:
        raise StorageError(f"cannot open RocksDB at {path}: {exc}") from exc
    wanted = {name: Options(raw_mode=True) for name in {*families, *FAMILIES} - {"default"}}
    db = open_rdict(path, wanted, opts)
    try:
        raw_state = cast("bytes | None", db.get(b"S"))
        state = TreeState() if raw_state is None else TreeState.from_bytes(raw_state)
        version = db.get(b"V")
        if version == TILES_1:
            tree = db.get_column_family("tree")
            convert_tiles1(db, tree, db.get_column_family_handle("tree"), note)
            del tree
        elif version is None:
            if set(FAMILIES) & set(families):
                note("dropping the half-built tile layout of an interrupted run")
                for name in FAMILIES:
                    db.drop_column_family(name)
                    db.create_column_family(name, Options(raw_mode=True))
            if DIGESTS in families:  # an interrupted run of an earlier release wrote it
                db.drop_column_family(DIGESTS)
            _rebuild(db, families, state, note)
            db.flush_wal(True)
            synced = WriteOptions()
            synced.sync = True
            db.put(b"V", TILES_3, synced)  # the log converts it to tiles-4 when it opens it
        if version not in (TILES_1, TILES_3, LAYOUT):
            for name in set(OLD_FAMILIES) & set(families):
                db.drop_column_family(name)
            for prefix in (b"D", b"E", b"N"):  # the layout before column families
                db.delete_range(prefix, bytes([prefix[0] + 1]))
            note("old layout removed")
        if db.get(b"V") == TILES_3:
            tree = db.get_column_family("tree")
            convert_tiles3(db, tree, db.get_column_family_handle("tree"), note)
            del tree
    finally:
        db.close()
    return _compacted(path)


def _compacted(path: Path) -> int:
    """Open the converted dir as the log does (refused unless the layout is now current),
    compact it and return its size."""
    store = RocksStore(path)
    try:
        store.compact()
        return store.load_state().size
    finally:
        store.close()
