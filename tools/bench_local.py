"""B8, the limit without a network: SHA-256 calls per second, an in-process append loop, and
the synced-write bound.

The loop is the server's per-entry work alone: ``ledger.log.Log`` over
``ledger.store.rocks.RocksStore`` (sequence, hash, fold into the compact range, one synced RocksDB
write batch, then sign and store a checkpoint) for batches of 1,000 digests. The benchmark reports
B2 as a fraction of it.

The synced-write bound is what the disk and rocksdict allow a log that did nothing else: the
exact keys and values ``RocksStore.commit`` writes for batches of 1,000 fresh digests (entry
bundles, tiles, one dedup key per entry, the tree state), recorded beforehand from a real log,
then written into a fresh store as rocksdict write batches, each synced (``flush_wal(True)``)
as the log syncs each group commit. B2 is reported as a fraction of it, measured in the same run.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from rocksdict import WriteBatch

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.types import AppendItem
from ledger.log.facade import Log
from ledger.store.contract import Batch
from ledger.store.rocks import INDEX_BYTES, RocksStore
from tools.bench_loads import fresh_digests
from tools.bench_server import ORIGIN

__all__ = ["local_append_rate", "sha256_rate", "synced_write_rate"]

SHA_INPUT = bytes(range(65))  # an RFC 6962 node: 0x01 || left (32) || right (32)


def sha256_rate(calls: int) -> float:
    """``hashlib.sha256(65 bytes).digest()`` calls per second."""
    sha, data = hashlib.sha256, SHA_INPUT
    t0 = time.perf_counter()
    for _ in range(calls):
        sha(data).digest()
    return calls / (time.perf_counter() - t0)


def local_append_rate(db_dir: Path, batches: int, batch: int = 1_000) -> float:
    """Entries per second of ``Log.append`` + ``Log.publish`` per batch on a fresh RocksDB."""
    work = [[AppendItem(d) for d in fresh_digests(batch)] for _ in range(batches)]
    store = RocksStore(db_dir)
    try:
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        t0 = time.perf_counter()
        for items in work:
            log.append(items)
            log.publish()
        elapsed = time.perf_counter() - t0
    finally:
        store.close()
    return batches * batch / elapsed


_Writes = tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]], bytes]  # tree, dedup, state


class _Recording(RocksStore):
    """A store that keeps what each commit writes (the bound replays it)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.recorded: list[_Writes] = []

    def commit(self, batch: Batch) -> None:
        values, _ = self._writer.plan(batch.first, batch.entries, batch.nodes)
        dedup = [
            (d, i.to_bytes(INDEX_BYTES, "big")) for i, d in enumerate(batch.digests, batch.first)
        ]
        self.recorded.append((list(values.items()), dedup, batch.state.to_bytes()))
        super().commit(batch)


def synced_write_rate(db_dir: Path, batches: int, batch: int = 1_000) -> float:
    """Entries per second of the log's synced write batches alone (module docstring)."""
    recorder = _Recording(db_dir / "record")
    try:
        log = Log(store=recorder, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        for _ in range(batches):
            log.append([AppendItem(d) for d in fresh_digests(batch)])
        work = recorder.recorded
    finally:
        recorder.close()
    store = RocksStore(db_dir / "bound")  # the log's options and column families
    db, tree, dedup_cf = store._db, store._tree_cf, store._digests_cf
    try:
        t0 = time.perf_counter()
        for values, dedup, state in work:
            wb = WriteBatch(raw_mode=True)
            put = wb.put
            for key, value in values:
                put(key, value, tree)
            for key, value in dedup:
                put(key, value, dedup_cf)
            put(b"S", state)
            db.write(wb, store._nosync)
            db.flush_wal(True)
        elapsed = time.perf_counter() - t0
    finally:
        store.close()
    return batches * batch / elapsed
