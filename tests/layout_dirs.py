"""Data dirs of older storage layouts, written as those releases wrote them, and the values of
a dir read back by logical key (``ledger.core.tile_layout``), for the layout conversion tests.

Layout ``tiles-3`` kept every bundle and tile value under its logical key in the ``tree``
family; ``MemoryStore`` keeps exactly those values under exactly those keys, so a tiles-3 dir
is a MemoryStore's values written into that family with the state and the version key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import rocksdict

from ledger.core import merkle
from ledger.core.merkle import CompactRange
from ledger.core.tiles import frame_entry
from ledger.log.integrator import Integrator
from ledger.store.contract import Batch, MemoryStore, TreeState
from ledger.store.rocks import EDGE, TILES_3, logical_key

__all__ = ["logical_values", "open_raw", "write_tiles3"]


def open_raw(path: Path) -> rocksdict.Rdict:
    """The data dir's RocksDB with its tree family, as the log's releases open it."""
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    return rocksdict.Rdict(str(path), opts, column_families={"tree": opts})


def write_tiles3(
    path: Path, sizes: list[int], leaf: Callable[[int], bytes], *, time0: int = 5_000
) -> list[bytes]:
    """A tiles-3 data dir grown by commits of ``sizes`` entries (``leaf(i)``: entry ``i``'s v1
    leaf); returns the leaves. No dedup table: the log builds it on open."""
    store = MemoryStore()
    compact = CompactRange()
    leaves: list[bytes] = []
    for count in sizes:
        new = [leaf(i) for i in range(len(leaves), len(leaves) + count)]
        nodes, compact = Integrator(compact).integrate([merkle.leaf_hash(x) for x in new])
        store.commit(
            Batch(
                first=len(leaves),
                entries=[frame_entry(x) for x in new],
                digests=[x[9:41] for x in new],
                nodes=nodes,
                state=TreeState(compact=compact, last_timestamp_ms=time0 + len(leaves) + count),
            )
        )
        leaves += new
    db = open_raw(path)
    tree = db.get_column_family("tree")
    for key, value in store._values.items():
        tree[key] = value
    db[b"S"] = store.load_state().to_bytes()
    db[b"V"] = TILES_3
    del tree
    db.close()
    return leaves


def logical_values(path: Path) -> dict[bytes, bytes]:
    """Every bundle and tile value of a tiles-4 dir by logical key: the tree family's full
    values and the default family's right edge (a key of neither kind fails the test)."""
    db = open_raw(path)
    tree = db.get_column_family("tree")
    values: dict[bytes, bytes] = {}
    for key, value in cast("Iterator[tuple[bytes, bytes]]", tree.items()):
        logical = logical_key(key)
        assert logical is not None, f"tree key {key.hex()} is not a tiles-4 key"
        values[logical] = value
    for key, value in cast("Iterator[tuple[bytes, bytes]]", db.items(from_key=EDGE)):
        if not key.startswith(EDGE):
            break
        assert key[1:] not in values, f"{key[1:].hex()} is stored twice"
        values[key[1:]] = value
    del tree
    db.close()
    return values
