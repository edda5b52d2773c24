"""Read bursts against the memory bound: ``python tools/bench_read_burst.py [--runs N] [--json]``.

Starts a real ``ledger serve`` (temporary data dir, no TSA, one appended entry) per run and
sends ``--bursts`` (default 2) bursts of ``--calls`` (600) concurrent ``GetInclusionProofs``
requests over ``--connections`` (60) connections, each request padded with an unknown field to
``--message-mb`` (1.8 MiB; reads need no token). Before and after each burst it reads the
server's ``VmHWM`` and ``VmRSS`` from ``/proc/PID/status``; the memory bound the server states
(``ledger.api.server.ServerLimits.memory_bound``, docs/operating.md "Streams and memory") is
printed beside it. Extra ``ledger serve`` flags go after ``--``. Exit 0 when every run's peak
stayed within the idle RSS plus the bound and the second burst did not raise the peak by more
than ``TOLERANCE_MB``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

METHOD = "/ledger.v1.LedgerService/GetInclusionProofs"
TOLERANCE_MB = 48.0


def padded_request(mb: float) -> bytes:
    """A GetInclusionProofsRequest for index 0 padded to ``mb`` MiB with unknown field 15."""
    from ledger.v1 import ledger_pb2 as pb

    body = pb.GetInclusionProofsRequest(indexes=[0]).SerializeToString()
    pad = int(mb * (1 << 20)) - len(body) - 8
    length = bytearray()
    n = pad
    while True:  # varint
        byte, n = n & 0x7F, n >> 7
        length.append(byte | (0x80 if n else 0))
        if not n:
            break
    return body + bytes([15 << 3 | 2]) + bytes(length) + b"\0" * pad


def memory_mb(pid: int) -> dict[str, float]:
    """VmHWM and VmRSS of ``pid`` in MiB."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("VmHWM", "VmRSS"):
            found[key] = int(line.split()[1]) / 1024
    return found


async def burst(address: str, payload: bytes, calls: int, connections: int) -> Counter[str]:
    """``calls`` concurrent requests spread over ``connections`` channels; count statuses."""
    import grpc

    options = [("grpc.max_send_message_length", 64 << 20), ("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(address, options=options) for _ in range(connections)]
    counts: Counter[str] = Counter()

    async def one(i: int) -> None:
        call = channels[i % connections].unary_unary(METHOD, None, None)
        try:
            await call(payload, timeout=120)
            counts["OK"] += 1
        except grpc.aio.AioRpcError as exc:
            counts[exc.code().name] += 1

    try:
        await asyncio.gather(*(one(i) for i in range(calls)))
    finally:
        await asyncio.gather(*(c.close(None) for c in channels))
    return counts


class Serve:
    """``ledger serve`` on port 0 in ``work``; reads the address and the bound it states."""

    def __init__(self, work: Path, extra: list[str]) -> None:
        cmd = [sys.executable, "-m", "ledger", "serve", "--data-dir", str(work / "data"),
               "--listen", "127.0.0.1:0", "--anchor-interval-s", "0", "--no-embedded-tsa",
               "--origin", "ledger.bench/read-burst", "--tiles-listen", "off", *extra]  # fmt: skip
        self.log = (work / "server.log").open("w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        assert self.proc.stdout is not None
        self.ready = json.loads(self.proc.stdout.readline())
        self.address: str = self.ready["address"]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self.log.close()


def default_bound(args: argparse.Namespace) -> int:
    """The documented bound for the default limits and ``--connections`` (plus the one the
    setup append used); ``LEDGER_INFLIGHT_MB`` and ``LEDGER_MAX_REQUEST_MB`` are honoured."""
    import os

    from ledger.api.budget import ByteBudget
    from ledger.api.server import ServerLimits

    limits = ServerLimits(
        max_request_bytes=int(os.environ.get("LEDGER_MAX_REQUEST_MB", "2")) << 20,
        budget=ByteBudget(int(os.environ.get("LEDGER_INFLIGHT_MB", "64")) << 20),
    )
    return limits.memory_bound(args.connections + 1)


def one_run(args: argparse.Namespace, payload: bytes) -> dict[str, Any]:
    from ledger_client.remote.log import RemoteLog

    work = Path(tempfile.mkdtemp(prefix="bench-read-burst-"))
    try:
        server = Serve(work, args.serve_args)
        try:
            with RemoteLog(server.address, timeout=30) as log:
                log.append([bytes(32)], wait_for_checkpoint=True)
            idle = memory_mb(server.proc.pid)
            peaks, statuses = [], []
            for _ in range(args.bursts):
                statuses.append(
                    dict(asyncio.run(burst(server.address, payload, args.calls, args.connections)))
                )
                peaks.append(memory_mb(server.proc.pid))
        finally:
            server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bound_mb = default_bound(args) / (1 << 20)
    return {
        "idle_rss_mb": round(idle["VmRSS"], 1),
        "idle_hwm_mb": round(idle["VmHWM"], 1),
        "peak_hwm_mb": [round(p["VmHWM"], 1) for p in peaks],
        "rss_after_mb": [round(p["VmRSS"], 1) for p in peaks],
        "bound_mb": round(bound_mb, 1),
        "statuses": statuses,
        "within_bound": bound_mb > 0 and peaks[-1]["VmHWM"] <= idle["VmHWM"] + bound_mb,
        "second_burst_rise_mb": round(peaks[-1]["VmHWM"] - peaks[0]["VmHWM"], 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/bench_read_burst.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--bursts", type=int, default=2)
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--connections", type=int, default=60)
    parser.add_argument("--message-mb", type=float, default=1.8)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("serve_args", nargs="*", help="extra `ledger serve` flags (after --)")
    args = parser.parse_args(argv)
    payload = padded_request(args.message_mb)
    runs = [one_run(args, payload) for _ in range(args.runs)]
    ok = all(r["within_bound"] and r["second_burst_rise_mb"] <= TOLERANCE_MB for r in runs)
    if args.json:
        print(json.dumps({"runs": runs, "met": ok}))
    else:
        for r in runs:
            print(json.dumps(r))
        peaks = [max(r["peak_hwm_mb"]) for r in runs]
        print(f"peak VmHWM median {statistics.median(peaks)} MiB (max {max(peaks)}), idle "
              f"{runs[0]['idle_hwm_mb']} MiB, bound {runs[0]['bound_mb']} MiB: "
              f"{'met' if ok else 'NOT met'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
