"""Convert a data dir of the per-entry layout to the tile layout (``ledger.core.tile_layout``), in
place.

The per-entry layout kept one value per entry (``E`` || index), one per dedup digest
(``D`` || digest) and one per tree node (``N`` || level || index), either in column families
``entries`` / ``dedup`` / ``nodes`` or, before those, all in ``default``. Checkpoints, anchors
and the tree state keep their keys and formats.

Steps, each safe to repeat after a crash (the layout version key is written last):

1. drop any half-built ``tree`` / ``digests`` families of an earlier, interrupted run;
2. stream the old entries in index order, rebuilding bundles, tile values and the dedup index
   with the same ``TileWriter`` the log uses;
3. check that the rebuilt tree has the stored tree state's size and roots (else stop, leaving
   the old layout in place and refused);
4. write the layout version (synced), then drop the old families and keys, and compact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from ledger.core.errors import StorageError
from ledger.core.merkle import CompactRange, leaf_hash
from ledger.core.tile_layout import TileWriter
from ledger.core.tiles import frame_entry
from ledger.store.contract import TreeState
from ledger.store.rocks import FAMILIES, INDEX_BYTES, LAYOUT, OLD_FAMILIES, RocksStore, open_rdict

__all__ = ["migrate"]

CHUNK = 1 << 16  # entries per write while rebuilding


def _old_entries(db: Rdict, families: list[str]) -> Iterator[tuple[int, bytes]]:
    """(index, leaf) of the per-entry layout, in index order."""
    source = db.get_column_family("entries") if "entries" in families else db
    for key, value in cast("Iterator[tuple[bytes, bytes]]", source.items(from_key=b"E")):
        if not key.startswith(b"E"):
            break
        yield int.from_bytes(key[1:], "big"), value


def _rebuild(db: Rdict, families: list[str], state: TreeState, note: Callable[[str], None]) -> None:
    tree = db.get_column_family_handle("tree")
    digests = db.get_column_family_handle("digests")
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
        for i, leaf in enumerate(chunk, first):
            wb.put(leaf[9:41], i.to_bytes(INDEX_BYTES, "big"), digests)
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
    """Convert the data dir at ``path`` in place; return its size. A no-op on the tile layout."""
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
        if db.get(b"V") is None:
            if set(FAMILIES) & set(families):
                note("dropping the half-built tile layout of an interrupted run")
                for name in FAMILIES:
                    db.drop_column_family(name)
                    db.create_column_family(name, Options(raw_mode=True))
            _rebuild(db, families, state, note)
            db.flush_wal(True)
            synced = WriteOptions()
            synced.sync = True
            db.put(b"V", LAYOUT, synced)
        for name in set(OLD_FAMILIES) & set(families):
            db.drop_column_family(name)
        for prefix in (b"D", b"E", b"N"):  # the layout before column families
            db.delete_range(prefix, bytes([prefix[0] + 1]))
        note("old layout removed")
    finally:
        db.close()
    store = RocksStore(path)  # opens only if the layout is now the tile one
    try:
        store.compact()
        return store.load_state().size
    finally:
        store.close()
