"""CPU per unary call: ``python tools/bench_call_cost.py [--calls N] [--runs N]``.

Starts the server in process (``ledger.app.compose.start_app`` on a thread of its own, temporary
data dir, access log and anchoring off), appends one entry, then makes ``--calls`` sequential
unary ``GetCheckpoint`` calls and prints the calls per second and the process CPU time per call
(client and server together: the difference between two builds is the server's).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

METHOD = "/ledger.v1.LedgerService/GetCheckpoint"


def one_run(calls: int) -> tuple[float, float]:
    """(calls per second, CPU microseconds per call)."""
    import grpc

    from ledger.app.compose import start_app
    from ledger.app.settings import Settings
    from ledger.core.checkpoint import Ed25519Signer
    from ledger_client.remote.log import RemoteLog

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    with tempfile.TemporaryDirectory() as work:
        settings = Settings(
            origin="ledger.bench/call-cost", data_dir=Path(work) / "data",
            listen="127.0.0.1:0", anchor_interval_s=0, embedded_tsa=False,
            tiles_listen="off", metrics_listen="off", access_log=False,
        )  # fmt: skip
        signer = Ed25519Signer.generate(settings.origin)
        app = asyncio.run_coroutine_threadsafe(start_app(settings, signer), loop).result(60)
        try:
            with RemoteLog(app.address, timeout=30) as remote:
                remote.append([bytes(32)], wait_for_checkpoint=True)
            with grpc.insecure_channel(app.address) as channel:
                call = channel.unary_unary(METHOD, None, None)
                for _ in range(200):  # warm up
                    call(b"")
                cpu, wall = time.process_time(), time.perf_counter()
                for _ in range(calls):
                    call(b"")
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        finally:
            asyncio.run_coroutine_threadsafe(app.stop(), loop).result(60)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
    return calls / wall, cpu / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/bench_call_cost.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    for _ in range(args.runs):
        rate, cpu_us = one_run(args.calls)
        print(f"{rate:.0f} calls/s, {cpu_us:.0f} us CPU per call (client + server)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
