"""Benchmark B13: the log published to a local S3-compatible bucket (``tools/seaweed.py``).

In one run, on the same machine:

* B2 (2 processes x 4 callers, 1,000 digests per call) on a fresh server without a bucket, then
  on a fresh server in mirror mode (``--object-store-url``): records/s, the server process's
  CPU, and records per server CPU second, on vs off; beside it the CPU per entry of the upload
  client (the mirror child process, boto3) and of SeaweedFS;
* the mirror lag under that load (and again under B2 paced at 0.5, 0.7 and 0.85 of that rate,
  open loop, each after the bucket caught up; the highest rate whose p99 met 1 s stated): a
  probe polls the server's ``/checkpoint`` and the bucket's
  (anonymously, over HTTP) and records, for each new size the server served, the time until the
  bucket's checkpoint reached it; the rate the bucket absorbed meanwhile (its checkpoint size
  grown over the window) is stated beside it;
* tile GETs/s from the bucket's endpoint vs the server's own tiles endpoint (2 processes x 4
  keep-alive connections, 4 pipelined, random tiles of the bucket's tree), each with the
  serving process's CPU, so requests per CPU second.

The bucket passes one round of ``ledger objstore check`` first (the conformance test in
``make test`` runs five of each kind; ``ledger objstore check`` fifty).
"""

from __future__ import annotations

import http.client
import shutil
import threading
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from tools.bench_clients import Outcome, sleep_until
from tools.bench_stats import percentile, proc_sample
from tools.seaweed import Seaweed, checked_bucket, restore_env, run_seaweedfs, use_aws_env

if TYPE_CHECKING:
    from tools.bench_scenarios import Bench
    from tools.bench_server import BenchServer

__all__ = ["b13_bucket"]

BUCKET = "ledger"
PREFIX = "bench"
LAG_POLL_S = 0.005
PACED = (0.5, 0.7, 0.85)  # the paced B2s after the flat-out one: fractions of its rate
LAG_TARGET_MS = 1_000.0
NAN = float("nan")


def _progress(message: str) -> None:
    from tools.bench_scenarios import progress

    progress(message)


def _size_of(conn: http.client.HTTPConnection, path: str) -> int:
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        return 0
    return int(body.split(b"\n")[1])


class _LagProbe:
    """Polls the server's and the bucket's checkpoints; records served -> in the bucket lag."""

    def __init__(self, server_url: str, bucket_url: str) -> None:
        s = urllib.parse.urlsplit(server_url)
        b = urllib.parse.urlsplit(bucket_url)
        self._server = http.client.HTTPConnection(s.hostname or "", s.port, timeout=10)
        self._bucket = http.client.HTTPConnection(b.hostname or "", b.port, timeout=10)
        self._bucket_path = b.path.rstrip("/") + "/checkpoint"
        self.lags_ms: list[float] = []
        self.bucket_size = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        pending: list[tuple[int, float]] = []
        last = 0
        while not self._stop.is_set():
            now = time.monotonic()
            size = _size_of(self._server, "/checkpoint")
            if size > last:
                pending.append((size, now))
                last = size
            self.bucket_size = _size_of(self._bucket, self._bucket_path)
            done = [(s, t) for s, t in pending if s <= self.bucket_size]
            self.lags_ms += [(time.monotonic() - t) * 1000 for _, t in done]
            pending = [(s, t) for s, t in pending if s > self.bucket_size]
            time.sleep(LAG_POLL_S)

    def __enter__(self) -> _LagProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._server.close()
        self._bucket.close()


def _mirror_child(server_pid: int) -> int | None:
    """The pid of the server's bucket mirror process (``python -m ledger.objstore.mirror``)."""
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        for pid in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"ledger.objstore.mirror" in cmdline:
                return int(pid)
    return None


def _cpu(pid: int | None) -> float:
    return NAN if pid is None else proc_sample(pid).cpu_s


def _b2(
    bench: Bench, server: BenchServer, pids: dict[str, int | None], rate: float = 0.0
) -> dict[str, float]:
    """B2 load on ``server`` (flat out, or paced at ``rate`` records/s in all): records/s and
    the CPU seconds of each process in ``pids``."""
    plan = bench.plan
    tasks = [bench._task("append", server, seed=k, threads=4, batch=1_000, rate=rate / 2)
             for k in range(2)]  # fmt: skip
    start = bench.pool.launch(tasks)
    begin = start + plan.warm_s
    sleep_until(begin)
    before = {name: _cpu(pid) for name, pid in pids.items()}
    sleep_until(begin + plan.duration_s)
    after = {name: _cpu(pid) for name, pid in pids.items()}
    outs: list[Outcome] = bench.pool.collect(len(tasks), plan.duration_s + 60)
    records = sum(o.records for o in outs)
    figures = {
        "records_per_s": records / plan.duration_s,
        "records": float(records),
        "client_cores": sum(o.cpu_s for o in outs) / (plan.warm_s + plan.duration_s),
    }
    for name in pids:
        figures[f"{name}_cpu_s"] = after[name] - before[name]
    return figures


def _gets(bench: Bench, server: BenchServer, url: str, size: int, pid: int) -> tuple[float, float]:
    """Random tile GETs/s on ``url`` and the serving process's CPU seconds meanwhile."""
    tasks = [bench._task("tiles", server, seed=20 + k, threads=4, batch=4, url=url,
                         head_size=size) for k in range(2)]  # fmt: skip
    start = bench.pool.launch(tasks)
    begin = start + bench.plan.warm_s
    sleep_until(begin)
    before = proc_sample(pid).cpu_s
    sleep_until(begin + bench.plan.duration_s)
    cpu = proc_sample(pid).cpu_s - before
    outs = bench.pool.collect(len(tasks), bench.plan.duration_s + 60)
    return sum(o.records for o in outs) / bench.plan.duration_s, cpu


def _prepare(weed: Seaweed) -> str:
    """The bucket made, checked (one round), and its ``s3://`` URL."""
    return checked_bucket(weed.endpoint, f"s3://{BUCKET}/{PREFIX}", writers=16)


def b13_bucket(bench: Bench, run: int) -> dict[str, float]:
    """Scenario B13 (module docstring)."""
    _progress(f"run {run} B13: B2 without and with the bucket mirror (SeaweedFS), lag, tile GETs")
    root = bench.work / f"run{run}-B13-weed"
    saved = use_aws_env()  # the server's mirror child inherits the credentials
    try:
        with run_seaweedfs(root) as weed:
            url = _prepare(weed)
            off_dir = bench.work / f"run{run}-B13-off"
            off = bench.start_server(off_dir, f"B13-off-run{run}")
            try:
                without = _b2(bench, off, {"server": off.pid})
            finally:
                off.stop()
                shutil.rmtree(off_dir, ignore_errors=True)
            on_dir = bench.work / f"run{run}-B13-on"
            extra = ("--object-store-url", url, "--object-store-endpoint", weed.endpoint)
            on = bench.start_server(on_dir, f"B13-on-run{run}", *extra)
            public = weed.public_url(BUCKET, PREFIX)
            try:
                pids = {"server": on.pid, "upload": _mirror_child(on.pid), "weed": weed.proc.pid}
                with _LagProbe(on.tiles_url, public) as probe:
                    at_start = probe.bucket_size
                    with_mirror = _b2(bench, on, pids)
                    grown = probe.bucket_size - at_start
                    drain = time.monotonic()
                    size = _drain(probe, on.tiles_url)
                    drain_s = time.monotonic() - drain
                    lags = list(probe.lags_ms)  # after the drain: the window's slowest count too
                    ladder = {}  # fraction of the flat-out rate -> (records/s, lags)
                    for fraction in PACED:
                        probe.lags_ms.clear()
                        rate = fraction * with_mirror["records_per_s"]
                        paced = _b2(bench, on, {}, rate=rate)
                        _drain(probe, on.tiles_url)
                        ladder[fraction] = (paced["records_per_s"], list(probe.lags_ms))
                bucket_size = size
                bucket_gets, weed_cpu = _gets(bench, on, public, bucket_size, weed.proc.pid)
                server_gets, server_cpu = _gets(bench, on, on.tiles_url, bucket_size, on.pid)
            finally:
                on.stop()
                shutil.rmtree(on_dir, ignore_errors=True)
    finally:
        restore_env(saved)
        shutil.rmtree(root, ignore_errors=True)
    per_off = without["records"] / without["server_cpu_s"]
    per_on = with_mirror["records"] / with_mirror["server_cpu_s"]
    records = with_mirror["records"]
    return {
        "off_records_per_s": without["records_per_s"],
        "on_records_per_s": with_mirror["records_per_s"],
        "off_per_server_cpu_s": per_off,
        "on_per_server_cpu_s": per_on,
        "on_over_off_per_cpu": per_on / per_off,
        "upload_cpu_ms_per_1k": with_mirror["upload_cpu_s"] * 1e6 / records,
        "weed_cpu_ms_per_1k": with_mirror["weed_cpu_s"] * 1e6 / records,
        "bucket_absorbed_per_s": grown / bench.plan.duration_s,
        "lag_p50_ms": percentile(lags, 50),
        "lag_p99_ms": percentile(lags, 99),
        "lag_samples": float(len(lags)),
        "drain_s": drain_s,
        "on_client_cores": with_mirror["client_cores"],
        **_ladder(ladder),
        "lag_ok_records_per_s": max(
            [rate for rate, lags in ladder.values() if percentile(lags, 99) <= LAG_TARGET_MS]
            + ([with_mirror["records_per_s"]] if percentile(lags, 99) <= LAG_TARGET_MS else [])
            + [0.0]
        ),
        "bucket_gets_per_s": bucket_gets,
        "bucket_gets_per_cpu_s": bucket_gets * bench.plan.duration_s / weed_cpu,
        "endpoint_gets_per_s": server_gets,
        "endpoint_gets_per_cpu_s": server_gets * bench.plan.duration_s / server_cpu,
    }


def _ladder(ladder: dict[float, tuple[float, list[float]]]) -> dict[str, float]:
    """The paced windows' figures: ``paced`` (half the flat-out rate), ``paced70``, ..."""
    out: dict[str, float] = {}
    for fraction, (rate, lags) in ladder.items():
        key = "paced" if fraction == 0.5 else f"paced{round(fraction * 100)}"
        out[f"{key}_records_per_s"] = rate
        out[f"{key}_lag_p50_ms"] = percentile(lags, 50)
        out[f"{key}_lag_p99_ms"] = percentile(lags, 99)
    return out


def _drain(probe: _LagProbe, url: str) -> int:
    """Wait (up to 120 s) until the bucket has what the server serves (that size), and the
    probe has seen it."""
    size = _served_size(url)
    began = time.monotonic()
    while probe.bucket_size < size and time.monotonic() - began < 120:
        time.sleep(0.01)
    time.sleep(2 * LAG_POLL_S)
    return size


def _served_size(url: str) -> int:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        return _size_of(conn, "/checkpoint")
    finally:
        conn.close()
