"""Benchmark B11: the C2SP tlog-tiles read path, side by side with B5's gRPC proofs.

On the big log of B5 (same run, same entries), after B5:

* the server is stopped and ``ledger tiles export`` builds the static mirror (timed);
* tile requests/s served by the in-process HTTP endpoint (aiohttp) and by nginx over the mirror
  (one worker, the README's server block), from two client processes that GET random tiles of
  the tree (hash tiles of every level and entry bundles) over keep-alive connections, 16
  requests pipelined on each;
* inclusion proofs/s built client-side (``ledger_client.remote.tiles.TileClient``) from a warm tile
  cache, at random indexes and random sizes up to the signed size; a sample is compared with
  the server's gRPC proofs.

Then, on a fresh server with ``--tiles-dir``, under B2 load with B4's probe and tile readers on
the endpoint running: the mirror lag (a new checkpoint seen on the endpoint -> the mirror's
``checkpoint`` file at that size), B2's throughput and B4's p99 meanwhile.
"""

from __future__ import annotations

import http.client
import json
import random
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.core.tiles import tiles_for_size
from ledger_client.remote.log import RemoteLog
from ledger_client.remote.tiles import TileClient
from tools.bench_clients import sleep_until
from tools.bench_stats import percentile
from tools.bench_verify import Head
from tools.nginx_mirror import find_nginx, run_nginx

if TYPE_CHECKING:
    from tools.bench_scenarios import Bench, _BigServer
    from tools.bench_server import BenchServer

__all__ = ["b11_big_log", "b11_mirror_lag"]

NAN = float("nan")
PIPELINE = 16
LAG_POLL_S = 0.002
# The mirror lag's window is never shorter (in a --smoke run's 1 s window a loaded machine mirrored
# as few as one size; full and --quick windows are this long or longer anyway).
LAG_WINDOW_MIN_S = 2.0


def _progress(message: str) -> None:
    from tools.bench_scenarios import progress

    progress(message)


def _export(data_dir: Path, out: Path) -> tuple[float, float]:
    """Run ``ledger tiles export``; return seconds and files written."""
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "ledger", "tiles", "export", "--data-dir", str(data_dir),
           "--out", str(out), "--json"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, float(json.loads(done.stdout)["files"])


def _tile_requests(bench: Bench, server: BenchServer, url: str, head: Head) -> tuple[float, float]:
    """Tile GETs/s from two client processes (4 connections each); and p99 per pipeline (ms)."""
    tasks = [
        bench._task("tiles", server, k, threads=4, batch=PIPELINE, url=url, head_size=head.size)
        for k in range(2)
    ]
    out, _, _ = bench._timed(server, tasks)
    if out.errors:
        _progress(f"    {out.errors} tile requests failed: {out.first_error}")
    return bench._rate(out.records), percentile(out.latencies_ms, 99)


def client_proofs(url: str, head: Head, count: int, seed: int) -> tuple[float, TileClient]:
    """Inclusion proofs/s built from a warm tile cache at random indexes and sizes <= head."""
    client = TileClient(url, cache_tiles=1 << 16)
    for tile in tiles_for_size(head.size):  # warm: every hash tile of the tree, once
        if not tile.entries:
            client.tile_hashes(tile.level, tile.index, tile.width)
    rng = random.Random(seed)
    sizes = [rng.randint(1, head.size) for _ in range(count)]
    jobs = [(rng.randrange(s), s) for s in sizes]
    build = client.inclusion_proof
    t0 = time.perf_counter()
    for index, size in jobs:
        build(index, size)
    return count / (time.perf_counter() - t0), client


def _check_against_grpc(client: TileClient, address: str, head: Head, n: int) -> tuple[int, int]:
    """Compare ``n`` client-built proofs with the server's; return (equal, different)."""
    rng = random.Random(7)
    ok = bad = 0
    with RemoteLog(address, timeout=60) as remote:
        for _ in range(n):
            size = rng.randint(1, head.size)
            index = rng.randrange(size)
            (served,) = remote.inclusion_proofs([index], tree_size=size)
            if client.inclusion_proof(index, size) == list(served.hashes):
                ok += 1
            else:
                bad += 1
    root_ok = client.root(head.size) == head.root
    return ok + root_ok, bad + (not root_ok)


def b11_big_log(bench: Bench, big: _BigServer, head: Head, b5_unary: float) -> dict[str, float]:
    """B11 on the big log (module docstring)."""
    run_dir = big.data_dir.with_name(big.data_dir.name + "-mirror")
    _progress(f"  B11: export the mirror of {head.size:,} entries")
    big.current.stop()
    try:
        export_s, files = _export(big.data_dir, run_dir)
    finally:
        big.current = bench.start_server(big.data_dir, "B11")
    server = big.current
    figures = {"export_s": export_s, "export_files": files, "b5_unary_per_s": b5_unary}
    _progress("  B11: tile requests on the in-process endpoint")
    figures["endpoint_per_s"], figures["endpoint_p99_ms"] = _tile_requests(
        bench, server, server.tiles_url, head
    )
    figures["nginx_per_s"] = figures["nginx_p99_ms"] = NAN
    if find_nginx() is None:
        _progress("  B11: nginx is not installed: its figures are left out")
        figures |= _proofs(bench, server.address, server.tiles_url, head)
    else:
        with run_nginx(run_dir) as nginx_url:
            _progress("  B11: tile requests on nginx over the mirror")
            figures["nginx_per_s"], figures["nginx_p99_ms"] = _tile_requests(
                bench, server, nginx_url, head
            )
            figures |= _proofs(bench, server.address, nginx_url, head)
    figures["nginx_over_b5"] = figures["nginx_per_s"] / b5_unary if b5_unary else NAN
    shutil.rmtree(run_dir, ignore_errors=True)
    return figures


def _proofs(bench: Bench, address: str, url: str, head: Head) -> dict[str, float]:
    count = bench.plan.tile_proofs
    _progress(f"  B11: {count:,} inclusion proofs built from a warm tile cache")
    rates = []
    client = None
    for k in range(3):
        rate, client = client_proofs(url, head, count, seed=k)
        rates.append(rate)
    assert client is not None
    ok, bad = _check_against_grpc(client, address, head, bench.plan.validate)
    return {"client_proofs_per_s": sorted(rates)[1], "validated": ok, "invalid": bad}


# --- mirror lag under B2 load ------------------------------------------------------------------


class _LagProbe:
    """Polls the endpoint's checkpoint and the mirror's file; records publish -> mirrored lag."""

    def __init__(self, url: str, mirror: Path) -> None:
        parts = urllib.parse.urlsplit(url)
        self._conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        self._file = mirror / "checkpoint"
        self.lags_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _served_size(self) -> int:
        self._conn.request("GET", "/checkpoint")
        return int(self._conn.getresponse().read().split(b"\n")[1])

    def _mirrored_size(self) -> int:
        try:
            return int(self._file.read_bytes().split(b"\n")[1])
        except (OSError, IndexError, ValueError):
            return 0

    def _run(self) -> None:
        pending: list[tuple[int, float]] = []  # (size, first seen on the endpoint)
        last = 0
        while not self._stop.is_set():
            now = time.monotonic()
            size = self._served_size()
            if size > last:
                pending.append((size, now))
                last = size
            mirrored = self._mirrored_size()
            done = [(s, t) for s, t in pending if s <= mirrored]
            self.lags_ms += [(time.monotonic() - t) * 1000 for _, t in done]
            pending = [(s, t) for s, t in pending if s > mirrored]
            time.sleep(LAG_POLL_S)

    def __enter__(self) -> _LagProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()


def b11_mirror_lag(bench: Bench, run: int) -> dict[str, float]:
    """Mirror lag, B2 throughput and B4 p99 with the mirror on and tile readers running."""
    _progress(f"run {run} B11: mirror lag under B2 load (with B4's probe and tile readers)")
    data_dir = bench.work / f"run{run}-B11-mirror"
    mirror = bench.work / f"run{run}-B11-tiles"
    server = bench.start_server(data_dir, f"B11-mirror-run{run}", "--tiles-dir", str(mirror))
    try:
        seeded = bench.plan.lag_seed
        seed = bench._task("fill", server, seed=5, threads=4, batch=10_000, count=seeded)
        bench.pool.launch([seed])
        bench.pool.collect(1, 600)
        while (size := _size(server.address)) < seeded:
            time.sleep(0.01)
        window = {"duration_s": max(bench.plan.duration_s, LAG_WINDOW_MIN_S)}
        load = [bench._task("append", server, seed=k, threads=4, batch=1_000, **window)
                for k in range(2)]  # fmt: skip
        readers = bench._task("tiles", server, 3, threads=2, batch=4, url=server.tiles_url,
                              head_size=size, **window)  # fmt: skip
        tasks = [*load, bench._task("probe", server, seed=9, **window), readers]
        with _LagProbe(server.tiles_url, mirror) as probe:
            start = bench.pool.launch(tasks)
            sleep_until(start + bench.plan.warm_s)
            probe.lags_ms.clear()
            outs = bench.pool.collect(len(tasks), window["duration_s"] + 180)
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(mirror, ignore_errors=True)
    records = sum(o.records for o in outs[:2])
    seconds = window["duration_s"]
    return {
        "mirror_lag_p50_ms": percentile(probe.lags_ms, 50),
        "mirror_lag_p99_ms": percentile(probe.lags_ms, 99),
        "mirror_lag_samples": len(probe.lags_ms),
        "mirror_b2_records_per_s": records / seconds,
        "mirror_b4_p99_ms": percentile(outs[2].extra_ms, 99),
        "mirror_readers_per_s": outs[3].records / seconds,
    }


def _size(address: str) -> int:
    with RemoteLog(address, timeout=30) as remote:
        return remote.checkpoint().size
