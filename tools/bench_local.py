"""B8, the limit without a network: SHA-256 calls per second, and an in-process append loop.

The loop is the server's per-entry work alone: ``ledger.log.Log`` over
``ledger.store.rocks.RocksStore`` (sequence, hash, fold into the compact range, one synced RocksDB
write batch, then sign and store a checkpoint) for batches of 1,000 digests. The benchmark reports
B2 as a fraction of it. The packed path (``Log.append_digests``, on the selected core, with a
checkpoint every 50 ms as the service publishes) and the synced-write bound beside it:
rocksdict alone writing what those commits write (1,000 dedup keys and values, the entry bundle
and tile values, the state) per synced batch.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.types import AppendItem
from ledger.log.facade import Log
from ledger.store.rocks import RocksStore
from tools.bench_loads import fresh_digests
from tools.bench_server import ORIGIN

__all__ = ["local_append_rate", "local_packed_rate", "sha256_rate", "synced_write_rate"]

SHA_INPUT = bytes(range(65))  # an RFC 6962 node: 0x01 || left (32) || right (32)
CHECKPOINT_INTERVAL_S = 0.05  # the service's default checkpoint cadence


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


def local_packed_rate(db_dir: Path, batches: int, batch: int = 1_000) -> float:
    """Entries per second of ``Log.append_digests`` per batch with ``Log.publish`` at the
    server's default cadence (every 50 ms, and once at the end), as the service runs them."""
    work = [b"".join(fresh_digests(batch)) for _ in range(batches)]
    store = RocksStore(db_dir)
    try:
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        t0 = last = time.perf_counter()
        for digests in work:
            log.append_digests(digests)
            if time.perf_counter() - last >= CHECKPOINT_INTERVAL_S:
                log.publish()
                last = time.perf_counter()
        log.publish()
        elapsed = time.perf_counter() - t0
    finally:
        store.close()
    return batches * batch / elapsed


def synced_write_rate(db_dir: Path, batches: int, batch: int = 1_000) -> float:
    """Entries per second of rocksdict alone writing, per synced batch, the values a packed
    commit of ``batch`` entries writes: its dedup keys and values, bundle and tile values of
    their sizes, the state (the write as the store does it: unsynced write, then the WAL sync)."""
    from rocksdict import WriteBatch, WriteOptions

    work = [fresh_digests(batch) for _ in range(batches)]
    store = RocksStore(db_dir)
    db, tree, dedup = store._db, store._tree_cf, store._digests_cf
    nosync = WriteOptions()
    nosync.sync = False
    bundle, tile = bytes(45 * 256), bytes(32 * 254)
    try:
        t0 = time.perf_counter()
        for n, keys in enumerate(work):
            wb = WriteBatch(raw_mode=True)
            for k, key in enumerate(keys):
                wb.put(key, (n * batch + k).to_bytes(6, "big"), dedup)
            for b in range(batch // 256 + 1):
                wb.put(b"B" + (n * batch + b).to_bytes(8, "big"), bundle, tree)
                wb.put(b"T\x00" + (n * batch + b).to_bytes(8, "big"), tile, tree)
            wb.put(b"S", bytes(8 + 8 + 32 * 20))
            db.write(wb, nosync)
            db.flush_wal(True)
        elapsed = time.perf_counter() - t0
    finally:
        store.close()
    return batches * batch / elapsed
