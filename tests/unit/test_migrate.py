"""Data dirs of the per-entry layout: refused with a message naming ``ledger migrate-storage``,
and converted in place by it (tree, dedup index, checkpoints and anchors kept)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.core import merkle
from ledger.core.errors import StorageError
from ledger.core.merkle import CompactRange, NodeID
from ledger.core.types import encode_leaf
from ledger.store.contract import TreeState

rocksdict = pytest.importorskip("rocksdict")

from ledger.cli.main import main  # noqa: E402
from ledger.store.migrate import migrate  # noqa: E402
from ledger.store.rocks import RocksStore  # noqa: E402


def digest(i: int) -> bytes:
    return hashlib.sha256(f"old-{i}".encode()).digest()


def write_old_layout(path: Path, size: int, *, families: bool = True) -> CompactRange:
    """A data dir as the per-entry layout wrote it: E, D, N keys (in families or in default)."""
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    names = ("entries", "dedup", "nodes") if families else ()
    db = rocksdict.Rdict(str(path), opts, column_families={n: opts for n in names})
    cf = {n: db.get_column_family(n) for n in names}
    entries, dedup, nodes = (cf[n] for n in names) if families else (db, db, db)
    compact = CompactRange()
    for i in range(size):
        leaf = encode_leaf(digest(i), 1000 + i)
        entries[b"E" + i.to_bytes(8, "big")] = leaf
        dedup[b"D" + digest(i)] = i.to_bytes(8, "big")
        for (level, index), h in compact.append(merkle.leaf_hash(leaf))[1:]:
            nodes[b"N" + level.to_bytes(1, "big") + index.to_bytes(8, "big")] = h
    db[b"S"] = TreeState(compact=compact, last_timestamp_ms=7).to_bytes()
    db[b"C" + size.to_bytes(8, "big")] = compact.root() + b"note"
    del entries, dedup, nodes, cf
    db.close()
    return compact


@pytest.mark.parametrize("families", [True, False])
def test_old_layout_is_refused_then_migrated(tmp_path: Path, families: bool) -> None:
    path = tmp_path / "db"
    compact = write_old_layout(path, 1_000, families=families)
    with pytest.raises(StorageError, match="ledger migrate-storage --db"):
        RocksStore(path)
    assert migrate(path) == 1_000
    assert migrate(path) == 1_000  # a rerun is a no-op
    store = RocksStore(path)
    try:
        assert store.load_state().compact == compact
        assert store.find_digests([digest(999), digest(1_000)]) == [999, None]
        assert store.get_leaves([0, 999]) == [
            encode_leaf(digest(0), 1000),
            encode_leaf(digest(999), 1999),
        ]
        assert store.get_nodes([NodeID(9, 0)])[0] == merkle.root(
            merkle.leaf_hash(leaf) for leaf in store.get_leaves(range(512))
        )
        checkpoint = store.latest_checkpoint()
        assert checkpoint is not None and checkpoint.root_hash == compact.root()
    finally:
        store.close()


def test_cli_migrates_and_reports(tmp_path: Path) -> None:
    path = tmp_path / "data" / "db"
    path.parent.mkdir()
    write_old_layout(path, 300)
    result = CliRunner().invoke(main, ["migrate-storage", "--data-dir", str(path.parent)])
    assert result.exit_code == 0, result.output
    assert "300 entries" in result.output
    missing = CliRunner().invoke(main, ["migrate-storage", "--db", str(tmp_path / "nope")])
    assert missing.exit_code == 1 and "not a RocksDB directory" in missing.output
    usage = CliRunner().invoke(main, ["migrate-storage"])
    assert usage.exit_code == 2


def test_a_torn_old_layout_is_left_alone(tmp_path: Path) -> None:
    """A rebuilt tree that differs from the stored state stops the migration."""
    path = tmp_path / "db"
    write_old_layout(path, 10, families=True)
    db = rocksdict.Rdict(
        str(path),
        rocksdict.Options(raw_mode=True),
        column_families={
            n: rocksdict.Options(raw_mode=True) for n in ("entries", "dedup", "nodes")
        },
    )
    entries = db.get_column_family("entries")
    entries[b"E" + (3).to_bytes(8, "big")] = encode_leaf(digest(333), 1)
    del entries
    db.close()
    with pytest.raises(StorageError, match="differs from the stored tree state"):
        migrate(path)
    with pytest.raises(StorageError, match="migrate-storage"):
        RocksStore(path)
