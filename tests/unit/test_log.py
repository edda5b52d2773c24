"""The log facade over the in-memory store: recovery, faults, clock, one root per size."""

from __future__ import annotations

import pytest

from ledger.core import merkle
from ledger.core.checkpoint import Ed25519Signer, open_checkpoint
from ledger.core.errors import (
    InvalidArgumentError,
    LogFailedError,
    NotYetPublishedError,
    OutOfRangeError,
    StorageError,
)
from ledger.core.types import PublishedCheckpoint, decode_leaf, encode_leaf
from ledger.log.facade import Log
from ledger.store.contract import MemoryStore
from tests.log_items import items

ORIGIN = "ledger.test/unit"


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make(store: MemoryStore, clock: Clock | None = None) -> tuple[Log, Ed25519Signer]:
    signer = Ed25519Signer.generate(ORIGIN)
    return Log(store=store, signer=signer, origin=ORIGIN, clock_ms=clock or Clock(1000)), signer


def test_leaf_round_trip_and_bounds() -> None:
    leaf = encode_leaf(b"\x07" * 32, 123456789, b"meta")
    assert leaf[0] == 1 and len(leaf) == 43 + 4
    entry = decode_leaf(5, leaf)
    assert (entry.record_digest, entry.timestamp_ms, entry.metadata) == (
        b"\x07" * 32,
        123456789,
        b"meta",
    )
    with pytest.raises(InvalidArgumentError):
        encode_leaf(b"\x07" * 31, 1)
    with pytest.raises(StorageError):
        decode_leaf(0, leaf[:-1])


def test_append_publish_prove_and_recover() -> None:
    store = MemoryStore()
    log, signer = make(store)
    log.append(items(37))
    cp = log.publish()
    assert cp.size == 37 and cp.root_hash == log.root_at(37)
    opened = open_checkpoint(cp.note, [signer.verifier()], origin=ORIGIN)
    assert opened.checkpoint.root_hash == cp.root_hash
    log.append(items(10, "b"))
    proof = log.inclusion_proof(36, 0)
    merkle.verify_inclusion(proof.leaf_hash, 36, 37, proof.hashes, cp.root_hash)
    with pytest.raises(NotYetPublishedError):
        log.inclusion_proof(40, 0)
    with pytest.raises(OutOfRangeError):
        log.inclusion_proof(47, 0)
    reopened = Log(store=store, signer=signer, origin=ORIGIN)
    assert reopened.size == 47 and reopened.latest_checkpoint() == cp


def test_clock_stepping_back_never_decreases_leaf_time() -> None:
    clock = Clock(5000)
    log, _ = make(MemoryStore(), clock)
    first = log.append(items(1))[0]
    clock.now = 10  # the wall clock steps back
    second = log.append(items(1, "later"))[0]
    assert second.timestamp_ms >= first.timestamp_ms == 5000


def test_failed_commit_stops_appends_and_loses_nothing_acknowledged() -> None:
    crash = {"on": False}

    def fault(point: str) -> None:
        if crash["on"] and point == "commit":
            raise OSError("disk on fire")

    store = MemoryStore(fault=fault)
    log, signer = make(store)
    acked = log.append(items(5))
    crash["on"] = True
    with pytest.raises(LogFailedError, match="commit failed"):
        log.append(items(5, "x"))
    crash["on"] = False
    with pytest.raises(LogFailedError, match="stopped after a fault"):
        log.append(items(1, "y"))
    recovered = Log(store=store, signer=signer, origin=ORIGIN)
    assert recovered.size == 5
    assert [recovered.index_of(i.record_digest) for i in items(5)] == [r.index for r in acked]


def test_store_refuses_a_second_root_for_a_size() -> None:
    store = MemoryStore()
    log, _ = make(store)
    log.append(items(3))
    cp = log.publish()
    forged = PublishedCheckpoint(origin=ORIGIN, size=3, root_hash=b"\x00" * 32, note=cp.note)
    with pytest.raises(StorageError, match="second checkpoint for size 3"):
        store.put_checkpoint(forged)
    store.put_checkpoint(cp)  # the same one again is a no-op


def test_recovery_refuses_a_checkpoint_that_disagrees_with_the_tree() -> None:
    store = MemoryStore()
    log, signer = make(store)
    log.append(items(4))
    good = log.publish()
    other = MemoryStore()
    other_log, _ = make(other)
    other_log.append(items(4, "other"))
    other_log.publish()
    # graft the first log's checkpoint into the second store: the tree no longer matches it
    other._checkpoints[4] = good
    with pytest.raises(StorageError, match="differs from the published checkpoint"):
        Log(store=other, signer=signer, origin=ORIGIN)
