"""Data dirs of layout ``tiles-1`` (level-0 tile values holding rows 1..7) are converted to
``tiles-2`` (rows 3..7), then ``tiles-3`` and ``tiles-4``, when a writer opens them: every
leaf, node, tile, bundle and dedup answer is the same after as before, a conversion
interrupted part-way resumes, and a secondary refuses an unconverted dir."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from ledger.core import merkle
from ledger.core.errors import StorageError
from ledger.core.merkle import NodeID
from ledger.core.tile_layout import LEVEL0_FIRST_ROW
from ledger.core.types import encode_leaf

rocksdict = pytest.importorskip("rocksdict")

from ledger.cli.main import main  # noqa: E402
from ledger.store import migrate as migration  # noqa: E402
from ledger.store.rocks import LAYOUT, TILES_1, RocksStore  # noqa: E402
from tests.layout_dirs import logical_values, open_raw, write_tiles3  # noqa: E402


def digest(i: int) -> bytes:
    return hashlib.sha256(f"tiles1-{i}".encode()).digest()


def leaf(i: int) -> bytes:
    return encode_leaf(digest(i), 5_000 + i, b"m" * (i % 3))


def node_key(level: int, index: int) -> bytes:
    return b"T" + level.to_bytes(1, "big") + index.to_bytes(8, "big")


def tiles1_level0(hashes: list[bytes], tile: int) -> bytes:
    """The tiles-1 level-0 value of ``tile`` from first principles: rows 1..7, row ``r`` the
    full nodes of height ``r`` inside the tile, 32 bytes each (docs of layout tiles-1)."""
    begin = 256 * tile
    width = min(256, len(hashes) - begin)
    return b"".join(
        merkle.root(hashes[begin + (k << r) : begin + ((k + 1) << r)])
        for r in range(1, 8)
        for k in range(width >> r)
    )


def write_tiles1(path: Path, sizes: list[int]) -> list[bytes]:
    """A data dir of layout tiles-1 grown by commits of ``sizes`` entries: bundles, upper tiles
    and state as tiles-3 keeps them, level-0 values as tiles-1 wrote them."""
    leaves = write_tiles3(path, sizes, leaf)
    hashes = [merkle.leaf_hash(x) for x in leaves]
    db = open_raw(path)
    tree = db.get_column_family("tree")
    for tile in range((len(leaves) + 255) // 256):
        value = tiles1_level0(hashes, tile)
        if value:  # a tile of one leaf has no rows 1..7: tiles-1 wrote no value for it
            tree[node_key(0, tile)] = value
        else:
            del tree[node_key(0, tile)]
    db[b"V"] = TILES_1
    del tree
    db.close()
    return leaves


def raw_tree(path: Path) -> dict[bytes, bytes]:
    """The tree family of a dir not yet converted: values by logical key."""
    db = open_raw(path)
    tree = db.get_column_family("tree")
    values = dict(cast("Iterator[tuple[bytes, bytes]]", tree.items()))
    del tree
    db.close()
    return values


def answers(store: RocksStore, size: int) -> dict[str, object]:
    """Every read the store answers for a tree of ``size``."""
    ids = [NodeID(h, j) for h in range(size.bit_length()) for j in range(size >> h)]
    tiles = []
    for level in range(3):
        span = 256**level
        for index in range((size // span + 255) // 256):
            full = min(256, size // span - 256 * index)
            tiles += [(level, index, w) for w in sorted({1, full // 2 or 1, full}) if w]
    bundles = [
        (index, w)
        for index in range((size + 255) // 256)
        for w in sorted({1, min(256, size - 256 * index)})
    ]
    digests = [digest(i) for i in range(size)] + [digest(size)]
    return {
        "state": store.load_state(),
        "leaves": store.get_leaves(range(size)),
        "nodes": store.get_nodes(ids),
        "tiles": store.get_tiles(tiles),
        "bundles": store.get_entry_bundles(bundles),
        "dedup": store.find_digests(digests),
    }


def expected(leaves: list[bytes], old: dict[bytes, bytes]) -> dict[str, object]:
    """What the tiles-1 dir says, read from its raw values and first principles."""
    size = len(leaves)
    hashes = [merkle.leaf_hash(x) for x in leaves]
    ids = [NodeID(h, j) for h in range(size.bit_length()) for j in range(size >> h)]
    nodes = [merkle.root(hashes[n.begin : n.end]) for n in ids]
    # the stored tiles-1 rows 1..7 agree with first principles (the dir is what it claims)
    for tile in range((size + 255) // 256):
        assert old.get(node_key(0, tile), b"") == tiles1_level0(hashes, tile)
    return {"leaves": leaves, "nodes": nodes, "dedup": [*range(size), None]}


@pytest.mark.parametrize("sizes", [[3, 250, 700, 47], [300, 217], [256, 1]])
def test_a_tiles1_dir_is_converted_on_open_and_answers_the_same(
    tmp_path: Path, sizes: list[int]
) -> None:
    path = tmp_path / "db"
    leaves = write_tiles1(path, sizes)
    old = raw_tree(path)
    want = expected(leaves, old)
    store = RocksStore(path)  # a writer: converts
    try:
        got = answers(store, len(leaves))
        assert store._db.get(b"V") == LAYOUT and store._db.get(migration.PROGRESS) is None
    finally:
        store.close()
    for name, value in want.items():
        assert got[name] == value, name
    new = logical_values(path)
    # only level-0 tile values changed: each is its old value's rows 3..7 (or gone when empty)
    for key, value in old.items():
        if key[:2] == b"T\x00":
            assert old[key].endswith(new.get(key, b""))
            assert len(new.get(key, b"")) == 32 * sum(
                (min(256, len(leaves) - 256 * int.from_bytes(key[2:], "big")) >> r)
                for r in range(LEVEL0_FIRST_ROW, 8)
            )
        else:
            assert new[key] == value
    assert set(new) <= set(old)
    # and the converted dir reads as a tiles-4 dir: reopened, same answers
    store = RocksStore(path)
    try:
        assert answers(store, len(leaves)) == got
    finally:
        store.close()


def test_an_interrupted_conversion_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "db"
    leaves = write_tiles1(path, [600, 900, 300])  # 7 level-0 tile values
    want = expected(leaves, raw_tree(path))
    monkeypatch.setattr(migration, "TILE_CHUNK", 2)
    notes: list[str] = []

    def crash_after_two_chunks(message: str) -> None:
        notes.append(message)
        if len(notes) == 2:
            raise RuntimeError("crash")

    opts = rocksdict.Options(raw_mode=True)
    db = rocksdict.Rdict(str(path), opts, column_families={"tree": opts})
    tree = db.get_column_family("tree")
    with pytest.raises(RuntimeError, match="crash"):
        migration.convert_tiles1(
            db, tree, db.get_column_family_handle("tree"), crash_after_two_chunks
        )
    assert db.get(b"V") == TILES_1
    assert int.from_bytes(db.get(migration.PROGRESS), "big") == 4  # tiles 0..3 converted
    del tree
    db.close()
    store = RocksStore(path)  # resumes from tile 4
    try:
        got = answers(store, len(leaves))
    finally:
        store.close()
    for name, value in want.items():
        assert got[name] == value, name


def test_a_secondary_refuses_a_tiles1_dir_and_migrate_storage_converts_it(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    path = tmp_path / "data" / "db"
    path.parent.mkdir()
    leaves = write_tiles1(path, [40])
    with pytest.raises(StorageError, match="layout tiles-1"):
        RocksStore.secondary(path, tmp_path / "secondary")
    result = CliRunner().invoke(main, ["migrate-storage", "--db", str(path)])
    assert result.exit_code == 0, result.output
    assert "40 entries" in result.output and LAYOUT.decode() in result.output
    reader = RocksStore.secondary(path, tmp_path / "secondary")
    try:
        assert reader.get_leaves(range(40)) == leaves
    finally:
        reader.close()
