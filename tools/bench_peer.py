"""B9, the peer: build a durable Merkle tree of the same leaves with the log and with pymerkle.

Both in this process, one after the other, on the same random 32-byte digests, in batches:

* the log: ``Log.append_digests`` (the packed path on the selected core, ``ledger.core.accel``:
  a synced group commit of entry bundles, tile values, dedup index and tree state) then
  ``Log.publish`` (a signed checkpoint) per batch, over ``RocksStore``;
* pymerkle 7: ``SqliteTree.append_entries`` per batch, one SQLite transaction each (the
  default rollback journal, ``synchronous=FULL``: durable at commit).

The log's leaf is the v1 leaf around the digest (43 bytes), pymerkle's the digest itself.
Disk: the log's data dir after a full compaction; pymerkle's database file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ledger.core import accel
from ledger.core.checkpoint import Ed25519Signer
from ledger.log.facade import Log
from ledger.store.rocks import RocksStore
from tools.bench_server import ORIGIN
from tools.bench_stats import disk_bytes

__all__ = ["build_rates"]


def _log_rate(db: Path, batches: list[list[bytes]]) -> tuple[float, int]:
    work = [b"".join(batch) for batch in batches]
    store = RocksStore(db)
    try:
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        t0 = time.perf_counter()
        for digests in work:
            log.append_digests(digests)
            log.publish()
        elapsed = time.perf_counter() - t0
        store.compact()
    finally:
        store.close()
    return sum(map(len, batches)) / elapsed, disk_bytes(db)


def _pymerkle_rate(path: Path, batches: list[list[bytes]]) -> tuple[float, int]:
    from pymerkle import SqliteTree  # type: ignore[import-untyped]

    tree = SqliteTree(str(path))
    try:
        t0 = time.perf_counter()
        for batch in batches:
            tree.append_entries(batch, chunksize=len(batch))
        elapsed = time.perf_counter() - t0
    finally:
        tree.close()
    return sum(map(len, batches)) / elapsed, path.stat().st_size


def build_rates(work: Path, leaves: int, batch: int) -> dict[str, float]:
    """B9's figures for ``leaves`` leaves in batches of ``batch``."""
    batches = [[os.urandom(32) for _ in range(batch)] for _ in range(leaves // batch)]
    total = batch * len(batches)
    log_rate, log_disk = _log_rate(work / "b9-log", batches)
    peer_rate, peer_disk = _pymerkle_rate(work / "b9-pymerkle.db", batches)
    return {
        "log_per_s": log_rate,
        "pymerkle_per_s": peer_rate,
        "log_over_pymerkle": log_rate / peer_rate,
        "log_bytes_per_leaf": log_disk / total,
        "pymerkle_bytes_per_leaf": peer_disk / total,
        "leaves": float(total),
        "batch": float(batch),
        "native_core": float(accel.CORE == "native"),
    }
