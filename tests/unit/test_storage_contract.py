"""One storage-contract suite (ledger/storage.py's docstring), run against both stores: the
in-memory ``MemoryStore`` and the RocksDB ``RocksStore`` (a real database in a temp dir)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ledger import merkle
from ledger.checkpoint import Checkpoint, Ed25519Signer, sign_checkpoint
from ledger.errors import StorageError
from ledger.integrator import Integrator
from ledger.merkle import CompactRange, NodeID
from ledger.storage import Batch, MemoryStore, Store, TreeState
from ledger.types import Anchor, PublishedCheckpoint, encode_leaf

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
        from ledger.rocks import RocksStore

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
    indexes = range(start, start + count)
    entries = [(i, encode_leaf(digest(i), 1000 + i), digest(i)) for i in indexes]
    nodes, new = Integrator(compact).integrate([merkle.leaf_hash(leaf) for _, leaf, _ in entries])
    state = TreeState(compact=new, last_timestamp_ms=9)
    return Batch(entries=entries, nodes=nodes, state=state), new


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
