"""Primary mode against local-only, same run, local SeaweedFS (issue 28 item 4).

    .venv/bin/python -m tools.bench_primary [--duration 8] [--json]

For each mode (local-only, then primary) a fresh ``ledger serve`` runs B2's shape (``AppendPacked``
of 1,000 random digests per call; 4 client threads) for ``--duration`` seconds, and beside it
B4's probe (one ``AppendRecords`` of one digest with ``wait_for_checkpoint``, every 20 ms:
the time from the call to the covering signed checkpoint). Reported per mode: acknowledged
entries/s, entries per server CPU second, the B4 probe's p50/p99, and in primary mode the
SeaweedFS process's CPU per entry. The load generator is Python threads in this process (it
competes with the server on a shared machine: compare the two modes of one run, not runs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from ledger.core.errors import LedgerError
from ledger_client.remote.log import RemoteLog
from tools.bench_server import BenchServer, make_key
from tools.bench_stats import proc_sample
from tools.seaweed import aws_env, checked_bucket, run_seaweedfs

__all__ = ["main"]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def _load(server: BenchServer, duration: float) -> dict[str, float]:
    stop = threading.Event()
    counts = [0] * 4
    latencies: list[float] = []

    def packed(slot: int) -> None:
        with RemoteLog(server.address, timeout=30) as client:
            while not stop.is_set():
                try:
                    counts[slot] += client.append_packed(os.urandom(32 * 1000)).count
                except LedgerError:
                    stop.wait(0.05)

    def probe() -> None:
        with RemoteLog(server.address, timeout=30) as client:
            while not stop.wait(0.02):
                began = time.perf_counter()
                try:
                    client.append([os.urandom(32)], wait_for_checkpoint=True)
                except LedgerError:
                    continue
                latencies.append(time.perf_counter() - began)

    threads = [threading.Thread(target=packed, args=(i,)) for i in range(4)]
    threads.append(threading.Thread(target=probe))
    before = server.sample().cpu_s
    began = time.monotonic()
    for thread in threads:
        thread.start()
    stop.wait(duration)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    elapsed = time.monotonic() - began
    cpu = server.sample().cpu_s - before
    entries = sum(counts)
    return {
        "entries": entries,
        "entries_per_s": round(entries / elapsed),
        "server_cpu_s": round(cpu, 2),
        "entries_per_server_cpu_s": round(entries / cpu) if cpu else 0,
        "b4_p50_ms": round(1000 * _percentile(latencies, 0.5), 1),
        "b4_p99_ms": round(1000 * _percentile(latencies, 0.99), 1),
        "b4_samples": len(latencies),
    }


def run(duration: float, work: Path) -> dict[str, object]:
    os.environ.update(aws_env())
    with run_seaweedfs(work / "seaweedfs") as seaweed:
        url = checked_bucket(seaweed.endpoint, "s3://ledger/bench", writers=4)
        key = work / "signer.key"
        make_key(key)
        out: dict[str, object] = {"duration_s": duration}
        with BenchServer(work / "local", key) as server:
            out["local"] = _load(server, duration)
        primary = [
            "--object-store-url", url, "--object-store-endpoint",
            seaweed.endpoint, "--object-store-mode", "primary",
        ]  # fmt: skip
        with BenchServer(work / "primary", key, extra=primary) as server:
            weed_before = proc_sample(seaweed.proc.pid).cpu_s
            result = _load(server, duration)
            weed = proc_sample(seaweed.proc.pid).cpu_s - weed_before
            result["bucket_cpu_s"] = round(weed, 2)
            result["bucket_cpu_us_per_entry"] = (
                round(1e6 * weed / result["entries"], 2) if result["entries"] else 0
            )
            out["primary"] = result
        local, prim = out["local"], out["primary"]
        assert isinstance(local, dict) and isinstance(prim, dict)
        if local["entries_per_server_cpu_s"]:
            out["primary_over_local_per_server_cpu_s"] = round(
                prim["entries_per_server_cpu_s"] / local["entries_per_server_cpu_s"], 2
            )
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-primary-") as tmp:
        result = run(args.duration, Path(tmp))
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
