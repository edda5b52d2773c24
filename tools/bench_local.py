"""B8, the limit without a network: SHA-256 calls per second, an in-process append loop, and
the synced-write bound.

The loop is the server's per-entry work alone: ``ledger.log.Log`` over
``ledger.store.rocks.RocksStore`` (sequence, hash, fold into the compact range, one synced RocksDB
write batch, then sign and store a checkpoint) for batches of 1,000 digests. The benchmark reports
B2 as a fraction of it. The packed loop is the same over ``Log.append_digests`` (the selected
core, ``ledger.core.accel``) with a checkpoint every 50 ms, as the service publishes.

The synced-write bound is what the disk and rocksdict allow a log that did nothing else: the
exact keys and values ``RocksStore.commit`` (or ``commit_packed``) writes for batches of 1,000
fresh digests (entry bundles, tiles, the tree state: since layout tiles-3 no dedup keys), recorded
beforehand from a real log, then written into a fresh store as rocksdict write batches placed as
the store places them (``RocksStore.put_values``: layout tiles-4), each synced
(``flush_wal(True)``) as the log syncs each group commit. B2 is reported as a fraction
of it, measured in the same run.
"""

from __future__ import annotations

import hashlib
import resource
import time
from collections.abc import Iterable
from pathlib import Path

from rocksdict import WriteBatch

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.types import AppendItem
from ledger.log.facade import Log
from ledger.store.contract import Batch, PackedBatch
from ledger.store.rocks import RocksStore
from tools.bench_loads import fresh_digests
from tools.bench_server import ORIGIN

__all__ = [
    "append_packed",
    "local_append_rate",
    "local_packed_rate",
    "sha256_rate",
    "synced_write_rate",
    "synced_writes",
]

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


_Writes = tuple[list[tuple[bytes, bytes]], int, int, bytes]  # tree values, sizes, state


class _Recording(RocksStore):
    """A store that keeps what each commit writes (the bound replays it)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.recorded: list[_Writes] = []

    def commit(self, batch: Batch) -> None:
        values, _ = self._writer.plan(batch.first, batch.entries, batch.nodes)
        self.recorded.append(
            (list(values.items()), batch.first, batch.state.size, batch.state.to_bytes())
        )
        super().commit(batch)

    def commit_packed(self, batch: PackedBatch) -> None:
        values, _ = self._writer.plan_packed(batch.first, batch.framed, batch.step, batch.rows)
        self.recorded.append(
            (list(values.items()), batch.first, batch.state.size, batch.state.to_bytes())
        )
        super().commit_packed(batch)


def local_packed_rate(db_dir: Path, batches: int, batch: int = 1_000) -> float:
    """Entries per second of ``Log.append_digests`` per batch with ``Log.publish`` at the
    server's default cadence (every 50 ms, and once at the end), as the service runs them."""
    work = [b"".join(fresh_digests(batch)) for _ in range(batches)]
    store = RocksStore(db_dir)
    try:
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        t0 = time.perf_counter()
        append_packed(log, work)
        elapsed = time.perf_counter() - t0
    finally:
        store.close()
    return batches * batch / elapsed


def append_packed(log: Log, work: Iterable[bytes]) -> None:
    """Each packed batch of ``work`` appended, a checkpoint published at the service's cadence
    (``CHECKPOINT_INTERVAL_S``) and once at the end."""
    last = time.perf_counter()
    for digests in work:
        log.append_digests(digests)
        if time.perf_counter() - last >= CHECKPOINT_INTERVAL_S:
            log.publish()
            last = time.perf_counter()
    log.publish()


def synced_write_rate(db_dir: Path, batches: int, batch: int = 1_000) -> float:
    """Entries per second of the log's synced write batches alone (module docstring)."""
    return synced_writes(db_dir, batches, batch)[0]


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def synced_writes(db_dir: Path, batches: int, batch: int = 1_000) -> tuple[float, float]:
    """The synced-write bound (entries per second) and the CPU it took per entry (µs: this
    process's every thread, RocksDB's included, while the writes ran): the share of a record's
    CPU that storing it costs the log at the least."""
    recorder = _Recording(db_dir / "record")
    try:
        log = Log(store=recorder, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        for _ in range(batches):
            log.append([AppendItem(d) for d in fresh_digests(batch)])
        work = recorder.recorded
    finally:
        recorder.close()
    store = RocksStore(db_dir / "bound")  # the log's options, families and key placement
    db = store._db
    try:
        t0, cpu0 = time.perf_counter(), _process_cpu_s()
        for values, old, size, state in work:
            wb = WriteBatch(raw_mode=True)
            store.put_values(wb, values, old, size)
            wb.put(b"S", state)
            db.write(wb, store._nosync)
            db.flush_wal(True)
        elapsed, cpu = time.perf_counter() - t0, _process_cpu_s() - cpu0
    finally:
        store.close()
    return batches * batch / elapsed, cpu / (batches * batch) * 1e6
