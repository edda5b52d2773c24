"""Dedup index alternatives, measured: ``python tools/bench_dedup.py [--entries N] [--only a,b]``.

Each variant is a RocksDB column family of the dedup index on its own, driven like the log
drives it: per group of 1,000 fresh digests, one multi-get (all misses, as for new records),
then one WriteBatch of the 1,000 keys (unsynced; the log syncs the WAL once per commit). The
figures are the rate of the first and last tenth of the fill (flat is the goal: B7), the CPU
per key of the whole process (compaction threads included; less sensitive to a busy machine
than the rates) in the first and last tenth, the CPU seconds per 1,000 keys of the write and of
the look-up, and bytes per key on disk after a full compaction. Variants:

    level       level compaction (default 256 MiB level base), whole-key bloom (the old choice)
    nomembloom  the same without the memtable bloom
    hashskip    hash-skiplist memtable on a 4-byte prefix, prefix bloom
    universal   universal compaction
    bigmem      level, 64 MiB memtables (fewer, larger flushes)
    short       level, keys cut to 16 bytes (what an index verified against the leaf could use)
    smallbase   level, 32 MiB level base and 8 MiB files: compactions rewrite less at a time
    shortsmall  short and smallbase together
    smallmem    smallbase with 4 MiB memtables (a smaller skiplist: cheaper random inserts; the
                log's choice, ``ledger.store.rocks``)

Figures are noisy on a shared machine; run it on a quiet one for the record.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rocksdict import (
    BlockBasedOptions,
    Cache,
    DBCompactionStyle,
    MemtableFactory,
    Options,
    Rdict,
    SliceTransform,
    WriteBatch,
    WriteOptions,
)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ledger.store.rocks import _options  # noqa: E402

__all__ = ["main"]

GROUP = 1_000
VARIANTS = [
    "level",
    "nomembloom",
    "hashskip",
    "universal",
    "bigmem",
    "short",
    "smallbase",
    "shortsmall",
]


def _base() -> Options:
    """The options of ``ledger.store.rocks`` (the dedup family's, when it had one) with
    RocksDB's default level sizes."""
    opts = _options(16, 32)
    opts.set_max_bytes_for_level_base(256 << 20)
    opts.set_target_file_size_base(64 << 20)
    opts.set_level_compaction_dynamic_level_bytes(False)
    opts.set_write_buffer_size(16 << 20)
    return opts


def _variant(name: str) -> tuple[Options, int]:
    """Options and key length of a variant."""
    opts = _base()
    key = 32
    if name == "nomembloom":
        opts.set_memtable_whole_key_filtering(False)
        opts.set_memtable_prefix_bloom_ratio(0.0)
    elif name == "hashskip":
        opts.set_prefix_extractor(SliceTransform.create_fixed_prefix(4))
        opts.set_memtable_factory(MemtableFactory.hash_skip_list(1 << 16, 4, 4))  # type: ignore[call-arg]
        opts.set_allow_concurrent_memtable_write(False)
    elif name == "universal":
        opts.set_compaction_style(DBCompactionStyle.universal())
    elif name == "bigmem":
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_write_buffer_size(64 << 20)
        table = BlockBasedOptions()
        table.set_bloom_filter(10, False)
        table.set_block_cache(Cache(64 << 20))
        opts.set_block_based_table_factory(table)
    elif name == "short":
        key = 16
    elif name == "smallbase":
        _small_levels(opts)
    elif name == "smallmem":
        _small_levels(opts)
        opts.set_write_buffer_size(4 << 20)
    elif name == "shortsmall":
        key = 16
        _small_levels(opts)
    elif name != "level":
        raise SystemExit(f"unknown variant {name!r}")
    return opts, key


def _small_levels(opts: Options) -> None:
    opts.set_max_bytes_for_level_base(32 << 20)
    opts.set_target_file_size_base(8 << 20)
    opts.set_level_compaction_dynamic_level_bytes(True)


def _timed(fn: Callable[[], object]) -> float:
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def run_variant(name: str, entries: int, work: Path) -> dict[str, float]:
    """Fill one variant; return its figures."""
    opts, key = _variant(name)
    opts.create_if_missing(True)
    path = work / name
    db = Rdict(str(path), opts)
    nosync = WriteOptions()
    nosync.sync = False
    groups = entries // GROUP
    tenth = max(1, groups // 10)
    rates: list[float] = []
    cpus: list[float] = []  # CPU seconds of the whole process (compaction threads too) per tenth
    cpu_write = cpu_get = 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    for g in range(groups):
        digests = [os.urandom(key) for _ in range(GROUP)]
        cpu_get += _timed(lambda d=digests: db.get(d))  # type: ignore[misc]
        wb = WriteBatch(raw_mode=True)
        value = (g * GROUP).to_bytes(6, "big")
        for d in digests:
            wb.put(d, value)
        cpu_write += _timed(lambda b=wb: db.write(b, nosync))  # type: ignore[misc]
        if (g + 1) % tenth == 0:
            rates.append(tenth * GROUP / (time.perf_counter() - t0))
            cpus.append(time.process_time() - c0)
            t0, c0 = time.perf_counter(), time.process_time()
    db.compact_range(None, None)
    db.close()
    disk = sum(p.stat().st_size for p in path.rglob("*.sst"))
    shutil.rmtree(path, ignore_errors=True)
    return {
        "first_rate": rates[0],
        "last_rate": rates[-1],
        "ratio": rates[-1] / rates[0],
        "cpu_first_us": cpus[0] / (tenth * GROUP) * 1e6,
        "cpu_last_us": cpus[-1] / (tenth * GROUP) * 1e6,
        "write_cpu_ms_per_1k": cpu_write / groups * 1e3,
        "get_cpu_ms_per_1k": cpu_get / groups * 1e3,
        "disk_bytes_per_key": disk / (groups * GROUP),
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="tools/bench_dedup.py", description=__doc__)
    parser.add_argument("--entries", type=int, default=2_000_000)
    parser.add_argument(
        "--only", default="level,nomembloom,hashskip,universal,bigmem,short,smallbase,shortsmall"
    )
    parser.add_argument("--work-dir", type=Path)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ledger-dedup-", dir=args.work_dir))
    print(
        f"| variant | keys/s first 10% | last 10% | last/first | CPU us/key first 10% | "
        f"last 10% | write CPU ms/1k | get CPU ms/1k | disk B/key |  ({args.entries:,} keys, "
        f"load {os.getloadavg()[0]:.1f})"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    try:
        for name in args.only.split(","):
            f = run_variant(name.strip(), args.entries, work)
            print(
                f"| {name} | {f['first_rate']:,.0f} | {f['last_rate']:,.0f} | {f['ratio']:.2f} | "
                f"{f['cpu_first_us']:.2f} | {f['cpu_last_us']:.2f} | "
                f"{f['write_cpu_ms_per_1k']:.2f} | {f['get_cpu_ms_per_1k']:.2f} | "
                f"{f['disk_bytes_per_key']:.1f} |",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
