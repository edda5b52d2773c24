"""Reader processes, measured: ``python tools/bench_readers.py [--entries N]``.

A reader is ``ledger serve-reader`` (``ledger.log.reader``): it opens a running log's data dir as a
RocksDB secondary and serves the read RPCs on its own port (appends must reach the writer, so
a reader refuses them with FAILED_PRECONDITION); every 100 ms it catches up and swaps in a
``Log`` opened on the caught-up view, so it never answers for a checkpoint newer than that.

The measurement starts ``ledger serve``, fills it with ``--entries`` (B2-style appends), then
drives B5's batched proof load (2 x 4 callers x 1,000 proofs per call, random sizes, sampled
proofs verified against the signed head) at the writer alone, at one reader, and at two
readers (one client process each); and times catch-ups while appends run. Figures are noisy
on a shared 2-core machine (the writer, the readers and the clients share the cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ledger.store.rocks import RocksStore  # noqa: E402

__all__ = ["main"]


def catch_up_ms(db: Path, scratch: Path, seconds: float) -> list[float]:
    """Catch-up times of a secondary while the writer runs (what a reader pays per refresh)."""
    store = RocksStore.secondary(db, scratch)
    times = []
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            store.catch_up()
            times.append((time.perf_counter() - t0) * 1e3)
            time.sleep(0.05)
    finally:
        store.close()
    return times


class Reader:
    """A ``ledger serve-reader`` process on a data dir."""

    def __init__(self, data_dir: Path) -> None:
        cmd = [sys.executable, "-m", "ledger", "serve-reader", "--data-dir", str(data_dir),
               "--listen", "127.0.0.1:0"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.address: str = json.loads(self.proc.stdout.readline())["address"]

    def stop(self) -> None:
        """SIGTERM and wait."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def measure(entries: int, duration: float, work: Path) -> dict[str, float]:
    """The writer alone, one reader, two readers: batched proofs/s; catch-up times."""
    from tools.bench_clients import ClientPool, Task, sleep_until
    from tools.bench_server import BenchServer, make_key, signed_head
    from tools.bench_stats import percentile

    data = work / "data"
    make_key(work / "key")
    pool = ClientPool(2)
    figures: dict[str, float] = {}
    try:
        with BenchServer(data, work / "key") as writer:
            per = entries // 2
            fill = [
                Task(
                    kind="fill", address=writer.address, threads=4, batch=10_000, count=per, seed=k
                )
                for k in range(2)
            ]
            pool.launch(fill)
            pool.collect(2, 3_600)
            head = signed_head(writer, 2 * per)

            def proofs(addresses: list[str]) -> float:
                tasks = [
                    Task(
                        kind="inclusions",
                        address=a,
                        threads=4,
                        batch=1_000,
                        warm_s=1.0,
                        duration_s=duration,
                        head_size=head.size,
                        head_root=head.root,
                        validate=8,
                        seed=k,
                    )
                    for k, a in enumerate(addresses)
                ]
                start = pool.launch(tasks)
                sleep_until(start + 1.0 + duration)
                outs = pool.collect(len(tasks), duration + 180)
                if any(o.invalid for o in outs) or not all(o.validated for o in outs):
                    raise RuntimeError("a sampled proof failed to verify")
                return sum(o.records for o in outs) / duration

            figures["writer_proofs_per_s"] = proofs([writer.address, writer.address])
            one = Reader(data)
            try:
                figures["one_reader_proofs_per_s"] = proofs([one.address, one.address])
                two = Reader(data)
                try:
                    figures["two_readers_proofs_per_s"] = proofs([one.address, two.address])
                finally:
                    two.stop()
            finally:
                one.stop()
            load = [
                Task(
                    kind="append",
                    address=writer.address,
                    threads=4,
                    batch=1_000,
                    warm_s=0.5,
                    duration_s=duration,
                    seed=k,
                )
                for k in range(2)
            ]
            pool.launch(load)
            times = catch_up_ms(data / "db", work / "r3", duration)
            pool.collect(2, duration + 180)
            figures["catch_up_p50_ms"] = percentile(times, 50)
            figures["catch_up_p99_ms"] = percentile(times, 99)
    finally:
        pool.close()
    figures["two_over_one"] = (
        figures["two_readers_proofs_per_s"] / figures["one_reader_proofs_per_s"]
    )
    figures["two_over_writer"] = (
        figures["two_readers_proofs_per_s"] / figures["writer_proofs_per_s"]
    )
    return figures


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="tools/bench_readers.py", description=__doc__)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ledger-readers-"))
    try:
        figures = measure(args.entries, args.duration, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"entries": args.entries, "load": os.getloadavg()[0], **figures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
