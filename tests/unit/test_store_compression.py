"""The store's last level is ZSTD-compressed: the dedup index's per-key framing shrinks after a
full compaction, and a data dir whose tables were written uncompressed reads as before."""

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


def dedup_bytes(path: Path) -> int:
    store = RocksStore(path)
    try:
        return store.properties()["digests"]["rocksdb.live-sst-files-size"]
    finally:
        store.close()


def uncompressed_last_level(monkeypatch: pytest.MonkeyPatch) -> None:
    """The options before the change: no compression on the last level."""
    options = rocks._options

    def before(memtable_mb: int, cache_mb: int) -> tuple[Any, Any]:
        tree, dedup = options(memtable_mb, cache_mb)
        for family in (tree, dedup):
            family.set_bottommost_compression_type(rocksdict.DBCompressionType.none())
        return tree, dedup

    monkeypatch.setattr(rocks, "_options", before)


def test_dedup_index_under_45_bytes_per_key(tmp_path: Path) -> None:
    fill(tmp_path / "db", digests(ENTRIES))
    # 32-byte key + 6-byte value + framing: 49 bytes per key uncompressed, about 40 in ZSTD
    assert dedup_bytes(tmp_path / "db") / ENTRIES < 45


def test_uncompressed_tables_read_then_shrink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    leaves = digests(ENTRIES)
    with monkeypatch.context() as patch:
        uncompressed_last_level(patch)
        fill(tmp_path / "db", leaves)
        before = dedup_bytes(tmp_path / "db")
    assert before / ENTRIES > 47
    store = RocksStore(tmp_path / "db")
    try:
        assert store.find_digests(leaves[::997]) == list(range(0, ENTRIES, 997))
        assert store.load_state().size == ENTRIES
        store.compact()
        assert store.find_digests(leaves[::997]) == list(range(0, ENTRIES, 997))
    finally:
        store.close()
    assert dedup_bytes(tmp_path / "db") < before * 0.9
