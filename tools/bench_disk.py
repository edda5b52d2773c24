"""Disk bytes per entry, per column family: ``python -m tools.bench_disk [--entries N]``.

Fills a fresh ``RocksStore`` through ``Log.append_digests`` (random digests, 10,000 per batch,
a checkpoint per batch, as B9 does), compacts it (``RocksStore.compact``, as B7 and B9 do before
they measure), then prints, per entry: each column family's live table bytes (RocksDB's
``live-sst-files-size``), the raw value bytes of each kind of tree value (bundles, tile values
per level) and the data dir's allocated bytes (``du``, the figure B7 and B9 report). Then the
in-process CPU cost of proofs on that log (what the storage layout changes for B5/B6): CPU
microseconds per ``Log.inclusion_proof``, per proof of ``Log.inclusion_proofs`` (1,000 per
call) and per ``Log.consistency_proof``, at random indexes, the best of ``--rounds`` rounds
(process CPU time, so a busy machine inflates it less than wall time).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the ``tools`` package importable
    sys.path.insert(0, str(ROOT))

from ledger.core import accel  # noqa: E402
from ledger.core.checkpoint import Ed25519Signer  # noqa: E402
from ledger.log.facade import Log  # noqa: E402
from ledger.store.rocks import EDGE, RocksStore, logical_key  # noqa: E402
from tools.bench_server import ORIGIN  # noqa: E402
from tools.bench_stats import disk_bytes  # noqa: E402

__all__ = ["measure"]

BATCH = 10_000


def _kind(key: bytes | None) -> str:
    """A logical key's kind (``ledger.core.tile_layout``)."""
    if key is None:
        return "other"
    return "bundles" if key[:1] == b"B" else f"tiles level {key[1]}"


def _proof_costs(log: Log, size: int, rounds: int) -> dict[str, float]:
    """CPU microseconds per proof (the best round of each kind)."""
    rnd = random.Random(1)
    best: dict[str, float] = {}
    for _ in range(rounds):
        picks = [rnd.randrange(size) for _ in range(1_000)]
        t0 = time.process_time()
        for i in picks:
            log.inclusion_proof(i, size)
        t1 = time.process_time()
        log.inclusion_proofs(picks, size)
        t2 = time.process_time()
        for i in picks:
            log.consistency_proof(i + 1, size)
        t3 = time.process_time()
        for name, seconds in (
            ("inclusion proof, CPU µs", t1 - t0),
            ("batched inclusion proof, CPU µs", t2 - t1),
            ("consistency proof, CPU µs", t3 - t2),
        ):
            best[name] = min(best.get(name, float("inf")), seconds * 1e6 / len(picks))
    return best


def measure(db: Path, entries: int, rounds: int = 5) -> dict[str, float]:
    """Fill ``db`` with ``entries`` entries, compact, and return bytes per entry by part and
    the CPU cost of proofs on it."""
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
        stored = [(logical_key(k), v) for k, v in store.scan_family("tree")]
        stored += [(k[1:], v) for k, v in store.scan_family("default", EDGE) if k[:1] == EDGE]
        for key, value in stored:
            raw[_kind(key)] = raw.get(_kind(key), 0) + len(value)
        out |= {f"raw {kind}": size / entries for kind, size in sorted(raw.items())}
        out["data dir (du)"] = disk_bytes(db) / entries
        if rounds:
            out |= _proof_costs(log, entries, rounds)
    finally:
        store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point: print the figures, one per line."""
    parser = argparse.ArgumentParser(prog="tools/bench_disk.py", description=__doc__)
    parser.add_argument("--entries", type=int, default=300_000, help="multiple of 10,000")
    parser.add_argument("--rounds", type=int, default=5, help="proof rounds (0: none)")
    args = parser.parse_args(argv)
    if args.entries < BATCH or args.entries % BATCH:
        parser.error(f"--entries: a positive multiple of {BATCH:,}")
    work = Path(tempfile.mkdtemp(prefix="ledger-disk-"))
    try:
        figures = measure(work / "db", args.entries, max(args.rounds, 0))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.entries:,} entries, bytes per entry (load {os.getloadavg()[0]:.1f})")
    print(f"{'core':32} {accel.CORE}")
    for name, value in figures.items():
        print(f"{name:32} {value:,.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
