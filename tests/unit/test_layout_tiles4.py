"""Storage layout ``tiles-4`` (``ledger.store.rocks``): full bundle and tile values under
position-major keys in the tree family, the right edge in the default family.

What it must hold: the keys map one to one onto the logical keys; every commit writes tree
keys above all keys before it, so RocksDB's compactions of the tree family only move files;
the stored values are byte for byte ``MemoryStore``'s; reads find a value that moved between
two reads; and a ``tiles-3`` dir is converted on open, resuming after a crash, while a
secondary refuses it.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core import merkle
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import StorageError
from ledger.core.merkle import CompactRange
from ledger.core.tile_layout import bundle_key, is_full, is_value_key, tile_key
from ledger.core.tiles import frame_entry
from ledger.core.types import encode_leaf
from ledger.log.integrator import Integrator
from ledger.store.contract import Batch, MemoryStore, TreeState

rocksdict = pytest.importorskip("rocksdict")

from ledger.log.facade import Log  # noqa: E402
from ledger.store import migrate as migration  # noqa: E402
from ledger.store.rocks import (  # noqa: E402
    EDGE,
    LAYOUT,
    TILES_3,
    RocksStore,
    logical_key,
    sealed_key,
)
from tests.layout_dirs import logical_values, open_raw, write_tiles3  # noqa: E402

logical_keys = st.one_of(
    st.integers(0, (1 << 56) - 1).map(bundle_key),
    st.tuples(st.integers(0, 7), st.integers(0, (1 << 56) - 1)).map(lambda t: tile_key(*t)),
)


@given(logical_keys)
def test_each_full_value_has_one_tree_key_and_back(key: bytes) -> None:
    sealed = sealed_key(key)
    shift, index = (8, key[1:]) if key[:1] == b"B" else (8 * (key[1] + 1), key[2:])
    end = (int.from_bytes(index, "big") + 1) << shift
    assert (sealed is None) == (end > 1 << 64)  # only what no tree below 2**64 entries fills
    if sealed is None:
        return
    assert logical_key(sealed) == key
    last = int.from_bytes(sealed[:8], "big")
    assert is_full(key, last + 1) and not is_full(key, last)  # full at exactly that size


@given(st.binary(min_size=0, max_size=12))
def test_a_key_the_layout_never_writes_maps_to_nothing(raw: bytes) -> None:
    logical = logical_key(raw)
    assert logical is None or sealed_key(logical) == raw


@given(logical_keys, st.binary(min_size=0, max_size=12))
def test_value_keys_are_those_of_bundles_and_tiles(key: bytes, raw: bytes) -> None:
    """``is_value_key`` (fsck's and the conversion's test of a stored key's shape)."""
    assert is_value_key(key) and not is_value_key(key + b"\0") and not is_value_key(key[:-1])
    assert is_value_key(raw) == (raw[:1] in (b"B", b"T") and len(raw) == {b"B": 9}.get(raw[:1], 10))


def digest(i: int) -> bytes:
    return hashlib.sha256(f"tiles4-{i}".encode()).digest()


def leaf(i: int) -> bytes:
    return encode_leaf(digest(i), 7_000 + i, b"x" * (i % 4))


def commit(
    stores: list[RocksStore | MemoryStore], first: int, count: int, compact: CompactRange
) -> CompactRange:
    new = [leaf(i) for i in range(first, first + count)]
    nodes, compact = Integrator(compact).integrate([merkle.leaf_hash(x) for x in new])
    batch = Batch(
        first=first,
        entries=[frame_entry(x) for x in new],
        digests=[x[9:41] for x in new],
        nodes=nodes,
        state=TreeState(compact=compact, last_timestamp_ms=7_000 + first + count),
    )
    for store in stores:
        store.commit(batch)
    return compact


def tree_keys(store: RocksStore) -> list[bytes]:
    return [key for key, _ in store.scan_family("tree")]


def test_each_commit_writes_tree_keys_above_all_before_and_stores_what_memory_does(
    tmp_path: Path,
) -> None:
    store, memory = RocksStore(tmp_path / "db"), MemoryStore()
    compact, size = CompactRange(), 0
    try:
        for count in (1, 255, 300, 7, 4_000, 60_000, 1_536, 2):  # past a level-1 tile
            before = tree_keys(store)
            compact = commit([store, memory], size, count, compact)
            size += count
            after = tree_keys(store)
            assert after[: len(before)] == before  # nothing below or between rewritten
            assert all(key > before[-1] for key in after[len(before) :]) if before else True
            assert all(is_full(logical_key(k) or b"", size) for k in after)
            edge = [k for k, _ in store.scan_family("default", EDGE) if k[:1] == EDGE]
            assert all(not is_full(k[1:], size) for k in edge)
            assert len(edge) <= 4  # the bundle and one tile value per level at most
            keys = sorted(memory._values)
            want = [memory._values[k] for k in keys]
            assert store._lookup(keys) == want  # the right edge from the TileWriter ...
            assert store._lookup_at(keys, size, None) == want  # ... and from the family
        assert sealed_key(tile_key(1, 0)) in tree_keys(store)
    finally:
        store.close()
    assert logical_values(tmp_path / "db") == memory._values


def test_a_read_finds_a_value_that_was_filled_since_the_state_it_knows(tmp_path: Path) -> None:
    store = RocksStore(tmp_path / "db")
    try:
        compact = commit([store], 0, 100, CompactRange())
        old = store._state
        commit([store], 100, 200, compact)  # fills bundle 0
        newer = store._state
        keys = [bundle_key(0), bundle_key(1), bundle_key(9)]
        want = store._lookup(keys)
        assert want[0] and want[1] and want[2] is None
        store._state = old  # a reader thread between the write and the state update
        assert store._lookup(keys) == want
        ahead = CompactRange()
        ahead.extend([b"\x00" * 32] * 600, with_leaves=False)
        store._state = TreeState(compact=ahead)  # bundle 1 looked for as full first
        assert store._lookup(keys) == want
    finally:
        store._state = newer
        store.close()


def compactions_that_rewrote(store: RocksStore) -> dict[str, int]:
    """Compactions (not flushes, not moves) per level of the tree family, from RocksDB's
    own statistics table (a trivial move counts in no level's ``Comp(cnt)``)."""
    text = str(store._tree.property_value("rocksdb.stats"))
    lines = text.splitlines()
    header = next(line.split() for line in lines if line.strip().startswith("Level"))
    at = header.index("Comp(cnt)") + 1  # a row's size takes two fields ("1.2 MB")
    counts = {}
    for line in lines:
        fields = line.split()
        if fields and fields[0].startswith("L") and fields[0][1:].isdigit():
            counts[fields[0]] = int(fields[at])
    return counts


def test_the_tree_familys_compactions_only_move_files(tmp_path: Path) -> None:
    store = RocksStore(tmp_path / "db", memtable_mb=1)
    log = Log(
        store=store, signer=Ed25519Signer.generate("tiles4.test/log"), origin="tiles4.test/log"
    )
    try:
        for _ in range(40):  # about 40 memtable flushes of the tree family
            log.append_digests(os.urandom(32 * 5_000))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            store._tree.property_int_value("rocksdb.compaction-pending")
            or store._tree.property_int_value("rocksdb.num-running-compactions")
            or store._tree.property_int_value("rocksdb.num-running-flushes")
        ):
            time.sleep(0.05)
        counts = compactions_that_rewrote(store)
        files = {
            level: store._tree.property_int_value(f"rocksdb.num-files-at-level{level}")
            for level in range(7)
        }
    finally:
        store.close()
    assert counts.pop("L0") > 4  # flushes: several L0 files made, so compaction was due
    assert sum(n or 0 for lvl, n in files.items() if lvl) > 4, files  # moved below L0
    assert not any(counts.values()), counts  # and none rewritten


def test_a_tiles3_dir_is_converted_on_open_and_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "db"
    leaves = write_tiles3(path, [300, 217, 1_000, 5], leaf)
    db = open_raw(path)
    tree = db.get_column_family("tree")
    before = dict(tree.items())
    del tree
    db.close()
    with pytest.raises(StorageError, match="layout tiles-3"):
        RocksStore.secondary(path, tmp_path / "secondary")
    store = RocksStore(path)
    try:
        assert store._db.get(b"V") == LAYOUT
        assert store.get_leaves(range(len(leaves))) == leaves
        assert store.find_digests([digest(i) for i in (0, 1_521, 1_522)]) == [0, 1_521, None]
    finally:
        store.close()
    assert logical_values(path) == before


def test_an_interrupted_tiles3_conversion_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "db"
    write_tiles3(path, [700, 100], leaf)  # 4 bundles and 3 level-0 tiles, 1 level-1 tile
    db = open_raw(path)
    tree = db.get_column_family("tree")
    before = dict(tree.items())
    monkeypatch.setattr(migration, "MOVE_CHUNK", 1)  # one value per write
    notes: list[str] = []

    def crash_after_three(message: str) -> None:
        notes.append(message)
        if len(notes) == 3:
            raise RuntimeError("crash")

    with pytest.raises(RuntimeError, match="crash"):
        migration.convert_tiles3(db, tree, db.get_column_family_handle("tree"), crash_after_three)
    assert db.get(b"V") == TILES_3
    left = [key for key, _ in tree.items(from_key=b"B")]
    assert len(left) == len(before) - 3  # three moved, each in one place only
    del tree
    db.close()
    store = RocksStore(path)  # converts what is left
    try:
        assert store._db.get(b"V") == LAYOUT
    finally:
        store.close()
    assert logical_values(path) == before
