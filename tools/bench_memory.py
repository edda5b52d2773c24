"""Server memory under hostile load: ``python tools/bench_memory.py [--runs N] [--json]``.

Starts a real ``ledger serve`` (temporary data dir, no TSA) per scenario and reads its peak RSS
(``VmHWM`` in ``/proc/PID/status``) before and after:

* ``unary``   40 concurrent AppendRecords calls, each a 15 MB message;
* ``streams`` 24 StreamAppend streams, each sending one 15 MB message and then holding the
  stream open for ``--hold`` seconds without half-closing.

``--message-mb 1.9`` repeats both with messages just under the server's 2 MiB request limit,
which are accepted and appended (the worst case the core limits allow).

The messages are sent as raw bytes (a valid AppendRecordsRequest: 15 MB of items), so that the
client's own limits do not stop them. Target (issue 14): peak RSS <= 512 MB in both. Every call's
status is counted. Prints a table (``--json``: one object); exit 0 when both targets were met.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET_MB = 512
MESSAGE_MB = 15
SERVICE = "/ledger.v1.LedgerService/"


def big_request(mb: float, tag: int) -> bytes:
    """A serialized AppendRecordsRequest of about ``mb`` MB (items with 1 KiB metadata)."""
    from ledger.v1 import ledger_pb2 as pb

    request = pb.AppendRecordsRequest()
    n = int(mb * (1 << 20)) // 1070
    for i in range(n):
        digest = (tag.to_bytes(4, "big") + i.to_bytes(4, "big")) * 4
        request.items.add(record_digest=digest, metadata=b"m" * 1024)
    return request.SerializeToString()


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


class Serve:
    def __init__(self, work: Path) -> None:
        cmd = [sys.executable, "-m", "ledger", "serve", "--data-dir", str(work / "data"),
               "--listen", "127.0.0.1:0", "--anchor-interval-s", "0", "--no-embedded-tsa",
               "--origin", "ledger.bench/memory"]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert self.proc.stdout is not None
        self.address = json.loads(self.proc.stdout.readline())["address"]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def _channel(address: str) -> Any:
    import grpc

    opts = [
        ("grpc.max_send_message_length", 64 << 20),
        ("grpc.max_receive_message_length", 64 << 20),
    ]
    return grpc.insecure_channel(address, options=opts)


def unary(address: str, payload: bytes, calls: int, counts: Counter[str]) -> None:
    import grpc

    def one() -> None:
        with _channel(address) as channel:
            call = channel.unary_unary(SERVICE + "AppendRecords")
            try:
                call(payload, timeout=120)
                counts["OK"] += 1
            except grpc.RpcError as exc:
                counts[exc.code().name] += 1

    threads = [threading.Thread(target=one) for _ in range(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def streams(address: str, payload: bytes, count: int, hold: float, counts: Counter[str]) -> None:
    import grpc

    def messages() -> Any:
        yield payload
        time.sleep(hold)  # hold the stream open without half-closing

    def one() -> None:
        with _channel(address) as channel:
            call = channel.stream_stream(SERVICE + "StreamAppend")
            try:
                for _ in call(messages(), timeout=hold + 120):
                    pass
                counts["OK"] += 1
            except grpc.RpcError as exc:
                counts[exc.code().name] += 1

    threads = [threading.Thread(target=one) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def scenario(name: str, payload: bytes, hold: float) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    counts: Counter[str] = Counter()
    try:
        server = Serve(work)
        before = peak_rss_mb(server.proc.pid)
        if name == "unary":
            unary(server.address, payload, 40, counts)
        else:
            streams(server.address, payload, 24, hold, counts)
        peak = peak_rss_mb(server.proc.pid)
        server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"scenario": name, "rss_before_mb": round(before, 1), "peak_rss_mb": round(peak, 1),
            "statuses": dict(counts)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/bench_memory.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hold", type=float, default=5.0, help="seconds streams stay open")
    parser.add_argument(
        "--message-mb", type=float, default=MESSAGE_MB, help="size of each message (MB)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    payload = big_request(args.message_mb, os.getpid())
    results: dict[str, list[dict[str, Any]]] = {"unary": [], "streams": []}
    for _ in range(args.runs):
        for name in results:
            results[name].append(scenario(name, payload, args.hold))
    summary = {
        name: {
            "peak_rss_mb_median": statistics.median(r["peak_rss_mb"] for r in runs),
            "peak_rss_mb_max": max(r["peak_rss_mb"] for r in runs),
            "rss_before_mb": runs[0]["rss_before_mb"],
            "statuses": runs[-1]["statuses"],
            "met": max(r["peak_rss_mb"] for r in runs) <= TARGET_MB,
        }
        for name, runs in results.items()
    }
    if args.json:
        print(json.dumps(summary))
    else:
        for name, s in summary.items():
            print(f"{name:8} peak RSS median {s['peak_rss_mb_median']} MB (max "
                  f"{s['peak_rss_mb_max']}; before {s['rss_before_mb']}) statuses {s['statuses']}"
                  f" target <= {TARGET_MB} MB: {'met' if s['met'] else 'NOT met'}")  # fmt: skip
    return 0 if all(s["met"] for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
