"""Reader processes, prototyped and measured: ``python tools/bench_readers.py [--entries N]``.

A *reader* (``python tools/bench_readers.py serve DB SCRATCH``) opens a running log's data dir
as a RocksDB secondary (``RocksStore.secondary``), builds a ``Log`` over it and serves the read
RPCs with the log's own gRPC servicer on its own port (a separate read port: appends must
reach the writer, so a reader refuses them with FAILED_PRECONDITION). Every ``--interval`` it
catches up with the writer and swaps in a ``Log`` opened on the caught-up view: the newest
checkpoint a reader answers for is the newest it has caught up to, and opening the ``Log``
re-checks that checkpoint's root against the stored tree (the recovery check).

The measurement starts ``ledger serve``, fills it with ``--entries`` (B2-style appends), then
drives B5's batched proof load (2 x 4 callers x 1,000 proofs per call, random sizes, sampled
proofs verified against the signed head) at the writer alone, at one reader, and at two
readers (one client process each); and times catch-ups while appends run. Figures are noisy
on a shared 2-core machine (the writer, the readers and the clients share the cores).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ledger.checkpoint import Ed25519Signer  # noqa: E402
from ledger.errors import FailedPreconditionError  # noqa: E402
from ledger.log import Log  # noqa: E402
from ledger.rocks import RocksStore  # noqa: E402
from ledger.sequencer import AppendItem  # noqa: E402
from ledger.server import create_server  # noqa: E402
from ledger.service import LogService  # noqa: E402
from ledger.types import AppendResult  # noqa: E402

__all__ = ["main"]


class ReaderService(LogService):
    """A ``LogService`` that only reads (its writer and publisher are never started)."""

    async def append(self, items: Sequence[AppendItem]) -> list[AppendResult]:
        raise FailedPreconditionError("this is a read-only reader; append to the writer's port")


async def serve(db: Path, scratch: Path, origin: str, interval: float) -> None:
    """Serve reads from a secondary of ``db`` until SIGTERM, catching up every ``interval``."""
    store = RocksStore.secondary(db, scratch)
    signer = Ed25519Signer.generate(origin)  # never used: a reader does not publish

    def fresh_log() -> Log:
        store.catch_up()
        return Log(store=store, signer=signer, origin=origin)

    service = ReaderService(await asyncio.to_thread(fresh_log))
    server, port = await create_server(service, "127.0.0.1:0")
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(json.dumps({"address": f"127.0.0.1:{port}"}), flush=True)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            service.log = await asyncio.to_thread(fresh_log)
    await server.stop(1)
    store.close()


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
    """A reader process (``serve``) on a data dir."""

    def __init__(self, db: Path, scratch: Path, origin: str) -> None:
        cmd = [sys.executable, __file__, "serve", str(db), str(scratch), "--origin", origin]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.address: str = json.loads(self.proc.stdout.readline())["address"]

    def sample(self) -> object:
        from tools.bench_stats import proc_sample

        return proc_sample(self.proc.pid)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def measure(entries: int, duration: float, work: Path) -> dict[str, float]:
    """The writer alone, one reader, two readers: batched proofs/s; catch-up times."""
    from tools.bench_clients import ClientPool, Task, sleep_until
    from tools.bench_server import ORIGIN, BenchServer, make_key, signed_head
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
            one = Reader(data / "db", work / "r1", ORIGIN)
            try:
                figures["one_reader_proofs_per_s"] = proofs([one.address, one.address])
                two = Reader(data / "db", work / "r2", ORIGIN)
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
    """Entry point: ``serve`` (a reader process) or the measurement."""
    parser = argparse.ArgumentParser(prog="tools/bench_readers.py", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    srv = sub.add_parser("serve", help="run one reader process")
    srv.add_argument("db", type=Path)
    srv.add_argument("scratch", type=Path)
    srv.add_argument("--origin", required=True)
    srv.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.command == "serve":
        asyncio.run(serve(args.db, args.scratch, args.origin, args.interval))
        return 0
    work = Path(tempfile.mkdtemp(prefix="ledger-readers-"))
    try:
        figures = measure(args.entries, args.duration, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"entries": args.entries, "load": os.getloadavg()[0], **figures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
