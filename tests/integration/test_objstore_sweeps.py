"""Overlapping updates (the bucket mirror's sweeps, ``BucketPublisher.start``) against a real
SeaweedFS: an update started while earlier ones are still uploading writes its ``checkpoint``
after theirs and after every tile of its tree, and one whose predecessor failed writes none."""

from __future__ import annotations

import os
import threading

import pytest

from ledger.core.errors import LedgerError, ObjectConflictError
from ledger.objstore.bucket import Bucket
from ledger.objstore.conformance import check_store
from ledger_client.remote.tiles import TileClient
from tests.objstore_world import MemoryLog, Seaweed

pytestmark = pytest.mark.integration
ORIGIN = "ledger.test/bucket"


def test_overlapping_updates_write_each_checkpoint_last_and_in_order(seaweed: Seaweed) -> None:
    """Five updates started back to back (each while the ones before are in flight); a reader
    polling the bucket meanwhile finds, for every checkpoint it sees, the whole tree of that
    size in the tiles, and never a checkpoint older than the one it saw before."""
    address = seaweed.address("logs/overlap")
    check_store(address, rounds=1, writers=8)
    log = MemoryLog(ORIGIN)
    checkpoints = [log.grow(n) for n in (700, 300, 1, 900, 45)]
    client = TileClient(seaweed.bucket_url("logs/overlap"))
    verifiers = [log.signer.verifier()]
    seen: list[int] = []
    problems: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                size = client.checkpoint(verifiers, origin=ORIGIN).checkpoint.size
            except LedgerError:
                continue  # no checkpoint yet
            if seen and size < seen[-1]:
                problems.append(f"checkpoint went back from {seen[-1]} to {size}")
            if not seen or size != seen[-1]:
                seen.append(size)
                try:
                    if client.root(size) != log.log.root_at(size):
                        problems.append(f"size {size}: the tiles give another root")
                except LedgerError as exc:
                    problems.append(f"size {size}: a tile is missing ({exc})")

    watcher = threading.Thread(target=watch)
    watcher.start()
    publisher = log.publisher(address)
    try:
        updates = [publisher.start([cp], coalesce=True) for cp in checkpoints]
        results = [update.result(timeout=120) for update in updates]
    finally:
        stop.set()
        watcher.join()
        publisher.close()
    assert [r.size for r in results] == [cp.size for cp in checkpoints]
    assert [r.from_size for r in results] == [0, *(cp.size for cp in checkpoints[:-1])]
    assert problems == []
    assert seen  # the watcher saw checkpoints while the updates were in flight
    assert client.checkpoint(verifiers, origin=ORIGIN).checkpoint.size == checkpoints[-1].size
    assert client.root(checkpoints[-1].size) == log.log.root_at(checkpoints[-1].size)


def test_an_update_after_a_failed_one_writes_no_checkpoint(seaweed: Seaweed) -> None:
    """The first update meets a conflicting tile; the one started behind it (its own tiles go up
    without it) fails with the same error instead of publishing a tree with a foreign tile in it."""
    address = seaweed.address("logs/chain")
    check_store(address, rounds=1, writers=8)
    log = MemoryLog(ORIGIN)
    first, second = log.grow(40 * 256), log.grow(300)  # the first: ~80 objects to upload
    bucket = Bucket(address)
    assert bucket.create("tile/0/039", os.urandom(256 * 32), {})  # another history's tile
    publisher = log.publisher(address)
    try:
        one = publisher.start([first], coalesce=True)
        with pytest.raises(ObjectConflictError):  # planned behind the first, or refused after it
            publisher.start([second], coalesce=True).result(timeout=60)
        with pytest.raises(ObjectConflictError, match="other content"):
            one.result(timeout=60)
        assert bucket.get("checkpoint") is None  # no checkpoint over the foreign tile
        with pytest.raises(ObjectConflictError):  # and publishing stays stopped
            publisher.start([log.grow(1)])
    finally:
        publisher.close()
