"""The writer's CPU per entry, in process and by phase:
``python tools/bench_writer.py [--entries 1000000] [--batch 1000,4000] [--runs 2]``.

``ledger.log.Log.append_digests`` of random digests (a batch per call, as a group commit of
that many) into a fresh ``RocksStore``, with a checkpoint every 50 ms as the service publishes:
the work of the server's writer thread without gRPC, the event loop or the thread hand-offs.
Prints the process CPU per entry (compaction and flush threads included) and the writer
thread's CPU per entry in each phase (``time.thread_time`` around the store's and the log's
calls; phases nest: ``commit_packed`` holds the RocksDB write, the WAL sync and the dedup
insert). Compare builds by running it from each checkout (issue 23).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the ``tools`` package importable
    sys.path.insert(0, str(ROOT))

from ledger.core import accel  # noqa: E402
from ledger.core.checkpoint import Ed25519Signer  # noqa: E402
from ledger.core.tile_layout import TileWriter  # noqa: E402
from ledger.log.facade import Log  # noqa: E402
from ledger.log.integrator import Integrator  # noqa: E402
from ledger.log.sequencer import Sequencer  # noqa: E402
from ledger.store.dedup import DedupTable  # noqa: E402
from ledger.store.rocks import RocksStore  # noqa: E402
from tools.bench_loads import fresh_digests  # noqa: E402
from tools.bench_local import append_packed  # noqa: E402
from tools.bench_server import ORIGIN  # noqa: E402

__all__ = ["main", "writer_run"]

PHASES: tuple[tuple[type, str], ...] = (
    (Log, "append_digests"),
    (Log, "publish"),
    (Sequencer, "sequence_packed"),
    (Integrator, "integrate_packed"),
    (RocksStore, "find_packed"),
    (RocksStore, "commit_packed"),
    (RocksStore, "_reserve"),
    (TileWriter, "plan_packed"),
    (DedupTable, "find"),
    (DedupTable, "insert"),
    (DedupTable, "flush"),
)


_Spent = defaultdict[str, float]


def _timed(spent: _Spent, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] += time.thread_time() - start

    return wrapper


def writer_run(work: Path, entries: int, batch: int) -> tuple[float, dict[str, float]]:
    """(process CPU µs per entry, {phase: writer-thread CPU µs per entry})."""
    batches = [b"".join(fresh_digests(batch)) for _ in range(max(1, entries // batch))]
    spent: _Spent = defaultdict(float)
    saved = [(cls, name, cls.__dict__[name]) for cls, name in PHASES]
    for cls, name, fn in saved:
        setattr(cls, name, _timed(spent, f"{cls.__name__}.{name}", fn))
    store = RocksStore(work)
    try:
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        cpu0 = time.process_time()
        append_packed(log, batches)
        cpu = time.process_time() - cpu0
    finally:
        store.close()
        for cls, name, fn in saved:
            setattr(cls, name, fn)
    n = len(batches) * batch
    return 1e6 * cpu / n, {label: 1e6 * s / n for label, s in spent.items()}


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="tools/bench_writer.py", description=__doc__)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--batch", default="1000,4000", help="digests per call, comma-separated")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"core: {accel.CORE}; {args.entries:,} entries per run, median of {args.runs} runs")
    for batch in (int(b) for b in args.batch.split(",")):
        totals: list[float] = []
        phases: dict[str, list[float]] = {}
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="ledger-bench-writer-") as tmp:
                total, split = writer_run(Path(tmp) / "db", args.entries, batch)
            totals.append(total)
            for label, value in split.items():
                phases.setdefault(label, []).append(value)
        print(f"\n{batch:,} per call: process CPU {statistics.median(totals):.2f} µs per entry "
              f"({min(totals):.2f}–{max(totals):.2f})")  # fmt: skip
        for label, values in sorted(phases.items(), key=lambda kv: -statistics.median(kv[1])):
            print(f"  {label:32} {statistics.median(values):6.3f} µs per entry")
    return 0


if __name__ == "__main__":
    sys.exit(main())
