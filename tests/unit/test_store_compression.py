"""The store's last level is ZSTD-compressed: the entry bundles' repeated leaf prefixes shrink
after a full compaction, and a data dir whose tables were written uncompressed reads as before
(digests answered by the dedup table, derived from those bundles)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.log.facade import Log

rocksdict = pytest.importorskip("rocksdict")

from ledger.store import rocks  # noqa: E402
from ledger.store.rocks import RocksStore  # noqa: E402

ORIGIN = "example.com/compression"
ENTRIES = 20_000


def digests(n: int) -> list[bytes]:
    return [hashlib.sha256(i.to_bytes(8, "big")).digest() for i in range(n)]


def fill(path: Path, leaves: list[bytes]) -> None:
    store = RocksStore(path)
    try:
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        for start in range(0, len(leaves), 5_000):
            log.append_digests(b"".join(leaves[start : start + 5_000]))
        store.compact()
    finally:
        store.close()


def tree_bytes(path: Path) -> int:
    store = RocksStore(path)
    try:
        return store.properties()["tree"]["rocksdb.live-sst-files-size"]
    finally:
        store.close()


def uncompressed_last_level(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables written with no compression at all."""
    options = rocks._options

    def before(memtable_mb: int, cache_mb: int) -> Any:
        tree = options(memtable_mb, cache_mb)
        tree.set_compression_type(rocksdict.DBCompressionType.none())
        tree.set_bottommost_compression_type(rocksdict.DBCompressionType.none())
        return tree

    monkeypatch.setattr(rocks, "_options", before)


def test_tree_under_45_bytes_per_entry(tmp_path: Path) -> None:
    fill(tmp_path / "db", digests(ENTRIES))
    # bundles (2 + 45 bytes per entry) and tiles: about 53 bytes uncompressed, 41 in ZSTD
    assert tree_bytes(tmp_path / "db") / ENTRIES < 45


def test_uncompressed_tables_read_then_shrink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    leaves = digests(ENTRIES)
    with monkeypatch.context() as patch:
        uncompressed_last_level(patch)
        fill(tmp_path / "db", leaves)
        before = tree_bytes(tmp_path / "db")
    assert before / ENTRIES > 50
    store = RocksStore(tmp_path / "db")
    try:
        assert store.find_digests(leaves[::997]) == list(range(0, ENTRIES, 997))
        assert store.load_state().size == ENTRIES
        store.compact()
        assert store.find_digests(leaves[::997]) == list(range(0, ENTRIES, 997))
    finally:
        store.close()
    assert tree_bytes(tmp_path / "db") < before * 0.9
