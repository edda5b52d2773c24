"""A tiles-only secondary (the bucket and folder mirrors' view of the store): it follows the
writer's tree, checkpoints and state without mapping the dedup table, and it refuses dedup
lookups clearly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import StorageError
from ledger.core.tiles import TileID
from ledger.log.facade import Log
from ledger.log.sequencer import AppendItem
from ledger.store.tile_reader import TileReader

ORIGIN = "ledger.test/tiles-only"


def test_a_tiles_only_secondary_follows_the_tree_without_the_dedup_index(tmp_path: Path) -> None:
    pytest.importorskip("rocksdict")
    from ledger.store.rocks import RocksStore

    writer = RocksStore(tmp_path / "db")
    try:
        log = Log(store=writer, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        log.append([AppendItem(os.urandom(32)) for _ in range(300)])
        log.publish()
        reader = RocksStore(tmp_path / "db", secondary=tmp_path / "reader", tiles_only=True)
        try:
            log.append([AppendItem(os.urandom(32)) for _ in range(100)])
            cp = log.publish()
            reader.catch_up()
            latest = reader.latest_checkpoint()
            assert latest is not None and latest == cp and reader.load_state().size == 400
            tiles = TileReader(store=reader, published=lambda: None, cache_bytes=0)
            ours = TileReader(store=writer, published=lambda: None, cache_bytes=0)
            for tile in (TileID(level=0, index=1, width=144), TileID(level=0, index=1,
                         width=144, entries=True)):  # fmt: skip
                assert tiles.read(tile, 400) == ours.read(tile, 400)
            with pytest.raises(StorageError, match="without its dedup index"):
                reader.find_digests([os.urandom(32)])
        finally:
            reader.close()
    finally:
        writer.close()
