"""Primary mode against local-only, same run, local SeaweedFS (issue 28 item 4).

Scenario B14 of ``tools/bench.py`` (``b14_primary``; ``--only B14``): in one run, a fresh
``ledger serve`` without a bucket and then a fresh one in primary mode (``--object-store-mode
primary`` over a local SeaweedFS), each under

* B2's load (pre-encoded ``AppendPacked`` of 1,000 digests, every client process x 2 in flight):
  records/s, records per server CPU second, and in primary mode SeaweedFS's CPU per entry;
* B4's probe beside B2-style load (2 processes x 4 in flight): one digest appended, then the
  checkpoint polled until it covers it; reported as the time from the call to the covering
  checkpoint (in primary mode the acknowledgement itself waits for the swap, so the call's
  share counts).

The standalone form (threads in this process, ``RemoteLog``; rougher):

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
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.core.errors import LedgerError
from ledger_client.remote.log import RemoteLog
from tools.bench_clients import Outcome, Task, sleep_until
from tools.bench_server import BenchServer, make_key
from tools.bench_stats import percentile, proc_sample
from tools.seaweed import aws_env, checked_bucket, restore_env, run_seaweedfs, use_aws_env

if TYPE_CHECKING:
    from tools.bench_scenarios import Bench

__all__ = ["b14_primary", "main"]

NAN = float("nan")


def _window(
    bench: Bench, tasks: list[Task], pids: dict[str, int]
) -> tuple[list[Outcome], dict[str, float]]:
    """Run ``tasks``; their outcomes and the CPU seconds of each of ``pids`` in the window."""
    plan = bench.plan
    start = bench.pool.launch(tasks)
    begin = start + plan.warm_s
    sleep_until(begin)
    before = {name: proc_sample(pid).cpu_s for name, pid in pids.items()}
    sleep_until(begin + plan.duration_s)
    cpu = {name: proc_sample(pid).cpu_s - before[name] for name, pid in pids.items()}
    return bench.pool.collect(len(tasks), plan.duration_s + 180), cpu


def _mode(bench: Bench, server: BenchServer, weed_pid: int | None) -> dict[str, float]:
    """B2, then B4's probe under B2-style load, on ``server``."""
    pids = {"server": server.pid} | ({} if weed_pid is None else {"weed": weed_pid})
    seconds = bench.plan.duration_s
    outs, cpu = _window(bench, bench._raw_tasks(server, "AppendPacked", 2, 1_000), pids)
    records = sum(o.records for o in outs)
    load = bench._raw_tasks(server, "AppendPacked", 4, 1_000, processes=2)
    probe_outs, probe_cpu = _window(bench, [*load, bench._task("probe", server, seed=9)], pids)
    probe = probe_outs[-1]
    total = [a + b for a, b in zip(probe.latencies_ms, probe.extra_ms, strict=True)]
    figures = {
        "records_per_s": records / seconds,
        "per_server_cpu_s": records / cpu["server"] if cpu["server"] else NAN,
        "server_cores": cpu["server"] / seconds,
        "errors": float(sum(o.errors for o in outs)),
        "b4_p50_ms": percentile(total, 50),
        "b4_p99_ms": percentile(total, 99),
        "b4_samples": float(len(total)),
        "b4_load_per_s": sum(o.records for o in probe_outs[:-1]) / seconds,
    }
    if "weed" in cpu:
        figures["weed_us_per_entry"] = 1e6 * cpu["weed"] / records if records else NAN
        b4_records = sum(o.records for o in probe_outs)
        figures["b4_weed_us_per_entry"] = (
            1e6 * probe_cpu["weed"] / b4_records if b4_records else NAN
        )
    return figures


def b14_primary(bench: Bench, run: int) -> dict[str, float]:
    """Scenario B14 (module docstring)."""
    from tools.bench_scenarios import progress

    progress(f"run {run} B14: B2 and B4 local-only, then in primary mode (SeaweedFS)")
    root = bench.work / f"run{run}-B14-weed"
    saved = use_aws_env()  # the primary server finds its bucket credentials here
    out: dict[str, float] = {}
    try:
        with run_seaweedfs(root) as weed:
            url = checked_bucket(weed.endpoint, "s3://ledger/b14", writers=4)
            primary = ("--object-store-url", url, "--object-store-endpoint", weed.endpoint,
                       "--object-store-mode", "primary")  # fmt: skip
            for mode, extra in (("local", ()), ("primary", primary)):
                data_dir = bench.work / f"run{run}-B14-{mode}"
                server = bench.start_server(data_dir, f"B14-{mode}-run{run}", *extra)
                try:
                    figures = _mode(bench, server, weed.proc.pid if extra else None)
                finally:
                    server.stop()
                    shutil.rmtree(data_dir, ignore_errors=True)
                out |= {f"{mode}_{name}": value for name, value in figures.items()}
    finally:
        restore_env(saved)
        shutil.rmtree(root, ignore_errors=True)
    out["primary_over_local_per_cpu"] = (
        out["primary_per_server_cpu_s"] / out["local_per_server_cpu_s"]
    )
    return out


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
