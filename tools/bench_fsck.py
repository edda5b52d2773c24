"""fsck speed: build a log of N entries (through ``Log``, in batches, a checkpoint every
100,000 entries), stop it, run ``ledger.ops.fsck.fsck`` on it several times, report the median
entries per second and the extrapolation to 10 million entries.

Usage: ``python tools/bench_fsck.py --entries 1000000 --runs 3 [--dir DIR]``.
fsck is one sequential pass over entries, nodes and dedup keys (plus one dedup point lookup per
entry), so its time grows linearly with the log; the extrapolation assumes that, and a larger
log whose index and filter blocks no longer fit the block cache would be somewhat slower.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.types import AppendItem
from ledger.fileio.keys import write_signer
from ledger.log.facade import Log
from ledger.ops.binding import bind_signer
from ledger.ops.fsck import fsck
from ledger.store.rocks import RocksStore

ORIGIN = "bench.local/fsck"
BATCH = 10_000


def build(data: Path, entries: int) -> float:
    """Write the log; return the seconds it took."""
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(data / "signer.key", signer)
    bind_signer(data, signer, ORIGIN)
    store = RocksStore(data / "db")
    start = time.perf_counter()
    try:
        log = Log(store=store, signer=signer, origin=ORIGIN)
        for first in range(0, entries, BATCH):
            items = [
                AppendItem(hashlib.sha256(i.to_bytes(8, "big")).digest(), b"")
                for i in range(first, min(first + BATCH, entries))
            ]
            log.append(items)
            if (first + BATCH) % 100_000 == 0:
                log.publish()
        log.publish()
        store.compact()
    finally:
        store.close()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        build_s = build(base, args.entries)
        times = []
        for _ in range(args.runs):
            report = fsck(base)
            assert report.ok, report.problems[:3]
            times.append(report.seconds)
        median = statistics.median(times)
        rate = args.entries / median
        print(json.dumps({
            "entries": args.entries, "build_s": round(build_s, 1),
            "fsck_s": [round(t, 1) for t in times], "median_s": round(median, 1),
            "entries_per_s": round(rate), "extrapolated_10M_min": round(10_000_000 / rate / 60, 1),
            "counts": report.counts,
        }))  # fmt: skip
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
