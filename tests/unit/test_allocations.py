"""No per-entry Python objects on the compiled append path (issue 23 item 2), measured with
tracemalloc over a real RocksDB store: the peak of Python memory during a packed append of a
batch is bounded by the packed buffers (one copy each) and one list slot per entry (the dedup
look-up's answers), not by an object per entry and per node as the typed path makes. (Until
layout tiles-3 the dedup keys and values handed to rocksdict were per-entry objects too.)"""

from __future__ import annotations

import hashlib
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from ledger.core import accel
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.types import AppendItem
from ledger.log.facade import Log
from ledger.log.sequencer import ValidItems
from ledger.store.rocks import RocksStore

pytestmark = pytest.mark.integration  # opens RocksDB

BATCH = 1_000
ORIGIN = "example.org/allocations"
SLOTS = 8  # list slots: the dedup look-up's answers (None, not an object each)
BUFFERS = 32 + 32 + 45 + 2 * 45  # new digests, leaf hashes, framed entries, bundle value twice
PER_ENTRY = SLOTS + BUFFERS  # about 210 bytes
FIXED = 64 << 10  # tile values, the compact range, the WriteBatch's Python side


def peak(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def digests(tag: str, n: int) -> bytes:
    return b"".join(hashlib.sha256(f"{tag}{i}".encode()).digest() for i in range(n))


def test_a_packed_batch_allocates_only_buffers(tmp_path: Path) -> None:
    if accel.CORE != "native":
        pytest.skip(f"the pure twin makes an object per entry by design ({accel.native_error})")
    store = RocksStore(tmp_path / "db")
    try:
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        for warm in range(3):
            log.append_digests(digests(f"warm{warm}", BATCH))
        bound = BATCH * PER_ENTRY + FIXED
        packed = [peak(partial(log.append_digests, digests(f"p{k}", BATCH))) for k in range(3)]
        assert min(packed) <= bound, (packed, bound)
        # the measure sees per-entry objects: the typed path (taken by items with metadata,
        # here one byte each) goes over
        items = ValidItems(AppendItem(hashlib.sha256(b"t%d" % i).digest(), b"m")
                           for i in range(BATCH))  # fmt: skip
        assert peak(partial(log.append, items)) > bound
        assert log.size == 7 * BATCH
    finally:
        store.close()
