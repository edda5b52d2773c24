"""One storage-contract suite (ledger/store/contract.py's docstring), run against both stores: the
in-memory ``MemoryStore`` and the RocksDB ``RocksStore`` (a real database in a temp dir)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ledger.core import merkle
from ledger.core.checkpoint import Checkpoint, Ed25519Signer, sign_checkpoint
from ledger.core.errors import StorageError
from ledger.core.merkle import CompactRange, NodeID
from ledger.core.tiles import frame_entry
from ledger.core.types import Anchor, PublishedCheckpoint, encode_leaf
from ledger.log.integrator import Integrator
from ledger.store.contract import Batch, MemoryStore, Store, TreeState

Reopen = Callable[[], Store]


@pytest.fixture(params=["memory", "rocks"])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Reopen]:
    """A function that returns the store "after a restart" (the same data, opened again)."""
    opened: list[Store] = []
    if request.param == "memory":
        memory = MemoryStore()

        def again() -> Store:
            return memory
    else:
        pytest.importorskip("rocksdict")
        from ledger.store.rocks import RocksStore

        def again() -> Store:
            for store in opened:
                store.close()
            opened.clear()
            opened.append(RocksStore(tmp_path / "db"))
            return opened[-1]

    yield again
    for store in opened:
        store.close()


def digest(i: int) -> bytes:
    return hashlib.sha256(f"contract-{i}".encode()).digest()


def batch_of(start: int, count: int, compact: CompactRange) -> tuple[Batch, CompactRange]:
    leaves = [encode_leaf(digest(i), 1000 + i) for i in range(start, start + count)]
    return commit_of(start, leaves, compact, [digest(i) for i in range(start, start + count)])


def commit_of(
    start: int, leaves: list[bytes], compact: CompactRange, digests: list[bytes]
) -> tuple[Batch, CompactRange]:
    nodes, new = Integrator(compact).integrate([merkle.leaf_hash(leaf) for leaf in leaves])
    state = TreeState(compact=new, last_timestamp_ms=9)
    entries = [frame_entry(leaf) for leaf in leaves]
    return Batch(first=start, entries=entries, digests=digests, nodes=nodes, state=state), new


ORIGIN = "ledger.test/contract"
SIGNER = Ed25519Signer.generate(ORIGIN)


def checkpoint(size: int, root: bytes) -> PublishedCheckpoint:
    note = sign_checkpoint(Checkpoint(origin=ORIGIN, size=size, root_hash=root), SIGNER)
    return PublishedCheckpoint(origin=ORIGIN, size=size, root_hash=root, note=note)


def test_a_new_store_is_empty(reopen: Reopen) -> None:
    store = reopen()
    assert store.load_state().size == 0
    assert store.find_digests([digest(0)]) == [None]
    assert store.latest_checkpoint() is None and store.get_checkpoint(1) is None
    assert store.anchored_sizes(10) == [] and store.get_anchors(1) == []


def test_commit_is_durable_and_readable_after_reopen(reopen: Reopen) -> None:
    store = reopen()
    first, compact = batch_of(0, 300, CompactRange())
    store.commit(first)
    second, compact = batch_of(300, 211, compact)
    store.commit(second)
    store = reopen()  # durable when commit returned
    state = store.load_state()
    assert state.size == 511 and state.last_timestamp_ms == 9
    assert state.compact.root() == compact.root()
    assert store.find_digests([digest(5), digest(510), digest(511)]) == [5, 510, None]
    leaves = store.get_leaves([0, 510])
    assert leaves == [encode_leaf(digest(0), 1000), encode_leaf(digest(510), 1510)]
    # level 0 is derived from the entries; level >= 1 nodes are the full subtrees
    ids = [NodeID(0, 7), NodeID(1, 3), NodeID(8, 0)]
    level0, level1, level8 = store.get_nodes(ids)
    assert level0 == merkle.leaf_hash(encode_leaf(digest(7), 1007))
    leaf_hashes = [merkle.leaf_hash(encode_leaf(digest(i), 1000 + i)) for i in range(511)]
    assert level1 == merkle.node_hash(leaf_hashes[6], leaf_hashes[7])
    assert level8 == merkle.root(leaf_hashes[0:256])


def test_reads_of_what_must_be_there_raise_when_missing(reopen: Reopen) -> None:
    store = reopen()
    b, _ = batch_of(0, 4, CompactRange())
    store.commit(b)
    with pytest.raises(StorageError):
        store.get_leaves([4])
    with pytest.raises(StorageError):
        store.get_nodes([NodeID(2, 1)])


def test_one_root_per_size_and_latest_is_the_largest(reopen: Reopen) -> None:
    store = reopen()
    store.put_checkpoint(checkpoint(3, b"\x01" * 32))
    store.put_checkpoint(checkpoint(7, b"\x02" * 32))
    store.put_checkpoint(checkpoint(3, b"\x01" * 32))  # the same again: a no-op
    with pytest.raises(StorageError, match="second checkpoint for size 3"):
        store.put_checkpoint(checkpoint(3, b"\x09" * 32))
    store = reopen()
    latest = store.latest_checkpoint()
    assert latest is not None and latest.size == 7
    assert store.get_checkpoint(3) == checkpoint(3, b"\x01" * 32)
    with pytest.raises(StorageError):
        store.put_checkpoint(checkpoint(3, b"\x09" * 32))  # also after a restart


def test_anchors_by_size_newest_first(reopen: Reopen) -> None:
    store = reopen()
    for size in (3, 9, 5):
        store.put_checkpoint(checkpoint(size, bytes([size]) * 32))
        store.put_anchor(Anchor(size=size, tsa="a", token=b"tok-a", gen_time_ms=size))
    store.put_anchor(Anchor(size=9, tsa="b", token=b"tok-b", gen_time_ms=10))
    store = reopen()
    assert store.anchored_sizes(10) == [9, 5, 3]
    assert store.anchored_sizes(2) == [9, 5]
    assert sorted(a.tsa for a in store.get_anchors(9)) == ["a", "b"]
    assert store.get_anchors(4) == []


def test_reads_run_concurrently_with_the_writer(reopen: Reopen) -> None:
    """Reads see the state before or after a commit, never a torn one."""
    store = reopen()
    compact = CompactRange()
    b, compact = batch_of(0, 64, compact)
    store.commit(b)
    errors: list[Exception] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                size = store.load_state().size
                store.get_leaves(range(size))
                store.get_nodes([NodeID(6, 0)])
            except Exception as exc:
                errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    for start in range(64, 64 * 8, 64):
        b, compact = batch_of(start, 64, compact)
        store.commit(b)
    stop.set()
    reader.join()
    assert errors == []


# --- the tile layout (ledger/core/tile_layout.py): tiles and entry bundles as served -------------


def leaf_hashes_of(n: int) -> list[bytes]:
    return [merkle.leaf_hash(encode_leaf(digest(i), 1000 + i)) for i in range(n)]


def reference_tile(hashes: list[bytes], level: int, index: int, width: int) -> bytes:
    """Tile (level, index, width) from first principles: MTHs of 256**level-leaf subtrees."""
    span = 256**level
    begin = index * 256 * span
    return b"".join(
        merkle.root(hashes[begin + k * span : begin + (k + 1) * span]) for k in range(width)
    )


def test_tiles_and_bundles_serve_every_published_width(reopen: Reopen) -> None:
    """A tile or bundle of any width up to what is committed is served (a narrower one is a
    prefix), also after the full one is written; beyond it the read raises."""
    store = reopen()
    compact = CompactRange()
    start = 0
    for count in (1, 200, 56, 300, 65_536 - 557, 1, 2):  # crosses 256 and 65,536
        b, compact = batch_of(start, count, compact)
        store.commit(b)
        start += count
    store = reopen()
    hashes = leaf_hashes_of(start)
    for width in (1, 7, 200, 256):
        assert store.get_tiles([(0, 0, width)]) == [reference_tile(hashes, 0, 0, width)]
        assert store.get_tiles([(1, 0, width)]) == [reference_tile(hashes, 1, 0, width)]
    assert store.get_tiles([(0, 256, 3), (2, 0, 1)]) == [
        reference_tile(hashes, 0, 256, 3),
        reference_tile(hashes, 2, 0, 1),
    ]
    for width in (1, 100, 256):
        bundle = store.get_entry_bundles([(1, width)])[0]
        want = b"".join(
            b"\x00\x2b" + encode_leaf(digest(i), 1000 + i) for i in range(256, 256 + width)
        )
        assert bundle == want
    with pytest.raises(StorageError):
        store.get_tiles([(0, 256, 4)])  # only 3 leaves there
    with pytest.raises(StorageError):
        store.get_entry_bundles([(257, 1)])
    with pytest.raises(StorageError):
        store.get_tiles([(1, 1, 1)])


def test_every_full_node_is_served_from_the_tiles(reopen: Reopen) -> None:
    store = reopen()
    compact = CompactRange()
    start = 0
    for count in (3, 250, 700, 71):
        b, compact = batch_of(start, count, compact)
        store.commit(b)
        start += count
    store = reopen()
    hashes = leaf_hashes_of(start)
    ids = [
        NodeID(level, index)
        for level in range(start.bit_length())
        for index in range(start >> level)
    ]
    want = [merkle.root(hashes[n.begin : n.end]) for n in ids]
    assert store.get_nodes(ids) == want


def test_entries_with_metadata_round_trip(reopen: Reopen) -> None:
    store = reopen()
    leaves = [encode_leaf(digest(i), 5, b"m" * (i % 4) * 100) for i in range(9)]
    batch, _ = commit_of(0, leaves, CompactRange(), [digest(i) for i in range(9)])
    store.commit(batch)
    store = reopen()
    assert store.get_leaves(range(9)) == leaves
    bundle = store.get_entry_bundles([(0, 5)])[0]
    assert bundle == b"".join(len(leaf).to_bytes(2, "big") + leaf for leaf in leaves[:5])


def test_full_tiles_and_bundles_are_written_once() -> None:
    """Only right-edge values are rewritten; one commit writes O(entries / 256 + levels)."""
    store = MemoryStore()
    compact = CompactRange()
    start = 0
    for count in (100, 156, 1, 511, 1_000, 3):
        before = dict(store.writes)
        b, compact = batch_of(start, count, compact)
        store.commit(b)
        written = {k for k, n in store.writes.items() if before.get(k) != n}
        per_level = count // 256 + 2  # bundles and level-0 tile values it touches
        assert len(written) <= 2 * per_level + 1  # plus the level-1 tile value
        start += count
    full = {b"B" + i.to_bytes(8, "big") for i in range(start // 256)}
    full |= {b"T\x00" + i.to_bytes(8, "big") for i in range(start // 256)}
    snapshot = dict(store.writes)
    b, compact = batch_of(start, 256, compact)
    store.commit(b)
    for key in full:
        assert store.writes[key] == snapshot[key]  # untouched once full


def test_a_secondary_sees_what_it_caught_up_to_and_never_writes(tmp_path: Path) -> None:
    """Reader processes: a RocksDB secondary serves the state of its last catch-up only."""
    pytest.importorskip("rocksdict")
    from ledger.store.rocks import RocksStore

    primary = RocksStore(tmp_path / "db")
    try:
        b, compact = batch_of(0, 300, CompactRange())
        primary.commit(b)
        primary.put_checkpoint(checkpoint(300, compact.root()))
        reader = RocksStore.secondary(tmp_path / "db", tmp_path / "reader")
        try:
            assert reader.load_state().size == 300
            b, compact = batch_of(300, 100, compact)
            primary.commit(b)
            primary.put_checkpoint(checkpoint(400, compact.root()))
            latest = reader.latest_checkpoint()
            assert latest is not None and latest.size == 300  # not caught up yet
            reader.catch_up()
            latest = reader.latest_checkpoint()
            assert latest is not None and latest.size == 400
            assert reader.get_tiles([(0, 1, 144)]) == primary.get_tiles([(0, 1, 144)])
            with pytest.raises(StorageError, match="append to the writer"):
                reader.commit(batch_of(400, 1, compact)[0])
        finally:
            reader.close()
    finally:
        primary.close()
