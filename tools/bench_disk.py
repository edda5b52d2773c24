"""Disk bytes per entry, per column family: ``python -m tools.bench_disk [--entries N]``.

Fills a fresh ``RocksStore`` through ``Log.append_digests`` (random digests, 10,000 per batch,
a checkpoint per batch, as B9 does), compacts it (``RocksStore.compact``, as B7 and B9 do before
they measure), then prints, per entry: each column family's live table bytes (RocksDB's
``live-sst-files-size``), the raw value bytes of each kind of tree value (bundles, tile values
per level) and the data dir's allocated bytes (``du``, the figure B7 and B9 report).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the ``tools`` package importable
    sys.path.insert(0, str(ROOT))

from ledger.core.checkpoint import Ed25519Signer  # noqa: E402
from ledger.log.facade import Log  # noqa: E402
from ledger.store.rocks import RocksStore  # noqa: E402
from tools.bench_server import ORIGIN  # noqa: E402
from tools.bench_stats import disk_bytes  # noqa: E402

__all__ = ["measure"]

BATCH = 10_000


def _kind(key: bytes) -> str:
    return "bundles" if key[:1] == b"B" else f"tiles level {key[1]}"


def measure(db: Path, entries: int) -> dict[str, float]:
    """Fill ``db`` with ``entries`` entries, compact, and return bytes per entry by part."""
    store = RocksStore(db)
    try:
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        t0 = time.perf_counter()
        for _ in range(entries // BATCH):
            log.append_digests(os.urandom(32 * BATCH))
            log.publish()
        out = {"fill_per_s": entries / (time.perf_counter() - t0)}
        store.compact()
        for family, props in store.properties().items():
            out[f"{family} family (tables)"] = props["rocksdb.live-sst-files-size"] / entries
        raw: dict[str, int] = {}
        for key, value in store.scan_family("tree"):
            raw[_kind(key)] = raw.get(_kind(key), 0) + len(value)
        out |= {f"raw {kind}": size / entries for kind, size in sorted(raw.items())}
    finally:
        store.close()
    out["data dir (du)"] = disk_bytes(db) / entries
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point: print the figures, one per line."""
    parser = argparse.ArgumentParser(prog="tools/bench_disk.py", description=__doc__)
    parser.add_argument("--entries", type=int, default=300_000, help="multiple of 10,000")
    args = parser.parse_args(argv)
    if args.entries < BATCH or args.entries % BATCH:
        parser.error(f"--entries: a positive multiple of {BATCH:,}")
    work = Path(tempfile.mkdtemp(prefix="ledger-disk-"))
    try:
        figures = measure(work / "db", args.entries)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.entries:,} entries, bytes per entry (load {os.getloadavg()[0]:.1f})")
    for name, value in figures.items():
        print(f"{name:32} {value:,.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
