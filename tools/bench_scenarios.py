"""Running the benchmark scenarios B1..B8 and B11 once (one "run"): servers, loads, figures.

B1..B4 each get a fresh server. B5, B6 and B7 share one log: it is filled in four segments of
B2-style appends (10,000 digests per call, 8 in flight), B5 and B6 run at half size (the "1M"
log), memory is read there and at full size, then the server stops and the data dir is
compacted and measured; B11 (``tools.bench_tiles``) runs on the same log after B5. B8 runs in
this process with no server up. With profiling on, every measured phase gets its own
(profiled) server process, restarted on the same data dir.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ledger.core import accel
from ledger.store.rocks import RocksStore
from tools.bench_bucket import b13_bucket
from tools.bench_clients import ClientPool, Outcome, Task, sleep_until
from tools.bench_local import (
    local_append_rate,
    local_packed_rate,
    sha256_rate,
    synced_write_rate,
    synced_writes,
)
from tools.bench_peer import build_rates
from tools.bench_primary import b14_primary
from tools.bench_report import RunFigures
from tools.bench_server import BenchServer, CeilingServer, make_key, signed_head
from tools.bench_stats import disk_bytes, percentile
from tools.bench_tiles import b11_big_log, b11_mirror_lag
from tools.bench_verify import Head

__all__ = ["Bench", "Plan", "progress"]

MIB = 1 << 20
FILL_BATCH = 10_000  # the server's maximum per call
COLLECT_SLACK_S = 180.0
FILL_TIMEOUT_S = 3_600.0
_T0 = time.monotonic()
AnyServer = BenchServer | CeilingServer
# Records/s a raw load's request pool is sized for (unary, batched): enough that a log never
# sees a request twice; a faster trivial server gets resent ones, which it does not mind.
RAW_RATE_GUESS = {False: 50_000, True: 400_000}


def per_cpu(rate: float, cores: float) -> float:
    """A rate per server CPU second (``cores``: CPU seconds per second in the window)."""
    return rate / cores if cores > 0 else float("nan")


def progress(message: str) -> None:
    """A progress line on stderr, with the seconds since the benchmark started."""
    print(f"[bench {time.monotonic() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Sizes and durations of one benchmark invocation."""

    runs: int
    warm_s: float
    duration_s: float
    segment: int  # B7 fill segment; B5/B6 run at 2 segments, B7 fills 4
    validate: int  # sampled proofs verified per worker
    sha_calls: int
    local_batches: int
    peer_leaves: int  # B9
    peer_batch: int
    tile_proofs: int  # B11: inclusion proofs built from the warm tile cache, per round
    lag_seed: int  # B11: entries in the mirrored log before its lag is measured
    only: frozenset[str]


# Two of issue 23's targets for B2, as fractions.
PER_CORE_TARGET = 0.25  # of the trivial server's records per server CPU second
BOUND_TARGET = 0.8  # of the synced-write bound


def _us_per(count_per_s: float) -> float:
    """Microseconds per unit of a rate (NaN for no rate: a failed or empty run)."""
    return 1e6 / count_per_s if count_per_s > 0 else math.nan


def _record_costs(b2: dict[str, float], trivial_per_cpu_s: float) -> dict[str, float]:
    """B2's CPU per record beside what the targets allow: the least a durable record can cost
    the server is the trivial server's gRPC work plus the synced writes alone (no hashing, no
    dedup, no auth); 0.8 of the bound then takes that plus the client's CPU, at 0.8 x the
    bound's rate (docs/benchmarks.md "What B2's per-core and bound targets ask (issue 23),
    2026-12-02 16:11–16:43 (load average 1.2–3.0)")."""
    trivial_us = _us_per(trivial_per_cpu_s)
    floor_us = trivial_us + b2["synced_bound_cpu_us"]
    target_rate = BOUND_TARGET * b2["synced_bound_per_s"]
    return {
        "aio_packed_cpu_us": trivial_us,
        "b2_floor_cpu_us": floor_us,
        "b2_over_floor": b2["server_cpu_us"] / floor_us,
        "per_core_target_cpu_us": trivial_us / PER_CORE_TARGET,
        "bound_target_floor_cores": target_rate * (floor_us + b2["client_cpu_us"]) / 1e6,
        "bound_target_cores": target_rate * (b2["server_cpu_us"] + b2["client_cpu_us"]) / 1e6,
    }


def _merge(outcomes: list[Outcome]) -> Outcome:
    total = Outcome()
    for o in outcomes:
        total.merge(o)
    return total


class _BigServer:
    """The big log's server; with profiling, a fresh profiled process per measured phase."""

    def __init__(self, bench: Bench, data_dir: Path, run: int) -> None:
        self._bench = bench
        self._run = run
        self.data_dir = data_dir
        self.current = bench.start_server(data_dir, f"B7-fill-run{run}")

    def phase(self, label: str) -> BenchServer:
        """The server to measure ``label`` on."""
        if self._bench.profile_dir is not None:
            self.current.stop()
            self.current = self._bench.start_server(self.data_dir, f"{label}-run{self._run}")
        return self.current


class Bench:
    """One benchmark invocation's scenarios over a pool of client processes."""

    def __init__(self, plan: Plan, pool: ClientPool, work: Path, profile_dir: Path | None):
        self.plan = plan
        self.pool = pool
        self.work = work
        self.profile_dir = profile_dir
        self.server_python = sys.executable  # the interpreter (and so the code) of the server

    def wants(self, *ids: str) -> bool:
        """Whether any of ``ids`` is selected."""
        return any(i in self.plan.only for i in ids)

    # --- plumbing ---------------------------------------------------------------------------

    def start_server(self, data_dir: Path, label: str, *extra: str) -> BenchServer:
        """A server on ``data_dir`` (its key beside it, created once)."""
        key = data_dir.with_name(data_dir.name + ".key")
        if not key.exists():
            make_key(key)
        return BenchServer(
            data_dir,
            key,
            profile_dir=self.profile_dir,
            label=label,
            extra=extra,
            python=self.server_python,
        )

    @contextmanager
    def _fresh_server(self, run: int, label: str) -> Iterator[BenchServer]:
        data_dir = self.work / f"run{run}-{label}"
        server = self.start_server(data_dir, f"{label}-run{run}")
        try:
            yield server
        finally:
            server.stop()
            shutil.rmtree(data_dir, ignore_errors=True)

    def _task(
        self, kind: str, server: BenchServer | CeilingServer, seed: int, **kw: object
    ) -> Task:
        base = Task(
            kind=kind,
            address=server.address,
            warm_s=self.plan.warm_s,
            duration_s=self.plan.duration_s,
            seed=seed,
        )
        return replace(base, **kw)  # type: ignore[arg-type]

    def _timed(
        self, server: BenchServer | CeilingServer, tasks: list[Task]
    ) -> tuple[Outcome, float, float]:
        """Run ``tasks``; return merged outcome, server and client CPU (cores) in the window."""
        plan = self.plan
        start = self.pool.launch(tasks)
        begin = start + plan.warm_s
        sleep_until(begin)
        before = server.sample()
        sleep_until(begin + plan.duration_s)
        after = server.sample()
        outcome = _merge(self.pool.collect(len(tasks), plan.duration_s + COLLECT_SLACK_S))
        server_cpu = (after.cpu_s - before.cpu_s) / plan.duration_s
        client_cpu = outcome.cpu_s / (plan.warm_s + plan.duration_s)
        return outcome, server_cpu, client_cpu

    def _rate(self, n: int) -> float:
        return n / self.plan.duration_s

    # --- B1..B4: fresh servers ----------------------------------------------------------------

    def _raw_tasks(
        self, server: AnyServer, rpc: str, lanes: int, batch: int, processes: int = 0
    ) -> list[Task]:
        """Pre-encoded ``rpc`` requests of ``batch`` digests from ``processes`` workers (default:
        the whole pool), ``lanes`` calls in flight each; each worker encodes enough distinct
        requests for ``RAW_RATE_GUESS`` over the warm-up and the window."""
        processes = processes or self.pool.size
        seconds = self.plan.warm_s + self.plan.duration_s
        requests = math.ceil(RAW_RATE_GUESS[batch > 1] * seconds / (processes * batch))
        return [
            self._task("raw", server, seed=k, threads=lanes, batch=batch, rpc=rpc,
                       requests=max(requests, 2 * lanes))
            for k in range(processes)
        ]  # fmt: skip

    def _raw_figures(self, server: AnyServer, tasks: list[Task]) -> dict[str, float]:
        out, server_cpu, client_cpu = self._timed(server, tasks)
        rate = self._rate(out.records)
        return {
            "records_per_s": rate,
            "records_per_server_cpu_s": per_cpu(rate, server_cpu),
            "p50_ms": percentile(out.latencies_ms, 50),
            "p99_ms": percentile(out.latencies_ms, 99),
            "server_cpu": server_cpu,
            "client_cpu": client_cpu,
            "errors": out.errors,
            "reused": out.reused,
        }

    def appends(self, run: int, sid: str, lanes: int, batch: int) -> dict[str, float]:
        """B1 / B2: pre-encoded AppendPacked requests of ``batch`` digests from every worker
        process, ``lanes`` in flight each; B2 also AppendRecords of the same digests' shape and
        the synced-write bound, in the same run."""
        procs = self.pool.size
        progress(f"run {run} {sid}: {procs} x {lanes} in flight, {batch} digests per call")
        with self._fresh_server(run, sid) as server:
            figures = self._raw_figures(
                server, self._raw_tasks(server, "AppendPacked", lanes, batch)
            )
        if sid != "B2":
            return figures
        progress(f"run {run} {sid}: the same with AppendRecords (typed items)")
        with self._fresh_server(run, f"{sid}-typed") as server:
            typed = self._raw_figures(
                server, self._raw_tasks(server, "AppendRecords", lanes, batch)
            )
        figures["typed_records_per_s"] = typed["records_per_s"]
        figures["typed_per_server_cpu_s"] = typed["records_per_server_cpu_s"]
        figures["typed_server_cpu"] = typed["server_cpu"]
        progress(f"run {run} {sid}: synced-write bound, {self.plan.local_batches} batches")
        db = self.work / f"run{run}-bound"
        try:
            bound, bound_cpu_us = synced_writes(db, self.plan.local_batches)
        finally:
            shutil.rmtree(db, ignore_errors=True)
        figures["synced_bound_per_s"] = bound
        figures["of_synced_bound"] = figures["records_per_s"] / bound
        figures["synced_bound_cpu_us"] = bound_cpu_us
        figures["server_cpu_us"] = _us_per(figures["records_per_server_cpu_s"])
        figures["client_cpu_us"] = figures["client_cpu"] * _us_per(figures["records_per_s"])
        return figures

    def _stream_figures(self, server: AnyServer, batch: int) -> tuple[Outcome, float, float]:
        tasks = self._raw_tasks(server, "StreamAppend", 1, batch, processes=1)
        return self._timed(server, tasks)

    def stream(self, run: int) -> dict[str, float]:
        """B3: one stream of pre-encoded single-digest messages; then 100-digest messages."""
        progress(f"run {run} B3: one stream, 1 digest per message (then 100 per message)")
        with self._fresh_server(run, "B3") as server:
            out, server_cpu, client_cpu = self._stream_figures(server, 1)
            batched, _, _ = self._stream_figures(server, 100)
        return {
            "records_per_s": self._rate(out.records),
            "records_per_server_cpu_s": per_cpu(self._rate(out.records), server_cpu),
            "ack_p50_ms": percentile(out.extra_ms, 50),
            "ack_p99_ms": percentile(out.extra_ms, 99),
            "records_per_ack": out.records / out.calls if out.calls else float("nan"),
            "server_cpu": server_cpu,
            "client_cpu": client_cpu,
            "errors": out.errors,
            "reused": out.reused,
            "records_per_s_100": self._rate(batched.records),
            "errors_100": batched.errors,
        }

    def checkpoint_latency(self, run: int) -> dict[str, float]:
        """B4: a probe's ack -> covering checkpoint while B2-style load runs."""
        progress(f"run {run} B4: ack -> checkpoint probe under B2 load")
        with self._fresh_server(run, "B4") as server:
            load = self._raw_tasks(server, "AppendPacked", 4, 1_000, processes=2)
            tasks = [*load, self._task("probe", server, seed=9)]
            start = self.pool.launch(tasks)
            begin = start + self.plan.warm_s
            sleep_until(begin)
            before = server.sample()
            sleep_until(begin + self.plan.duration_s)
            after = server.sample()
            outs = self.pool.collect(len(tasks), self.plan.duration_s + COLLECT_SLACK_S)
        probe, load_out = outs[-1], _merge(outs[:-1])
        return {
            "p50_ms": percentile(probe.extra_ms, 50),
            "p99_ms": percentile(probe.extra_ms, 99),
            "samples": len(probe.extra_ms),
            "probe_ack_p99_ms": percentile(probe.latencies_ms, 99),
            "load_records_per_s": self._rate(load_out.records),
            "server_cpu": (after.cpu_s - before.cpu_s) / self.plan.duration_s,
            "load_per_server_cpu_s": load_out.records / max(after.cpu_s - before.cpu_s, 1e-9),
        }

    def checkpoint_latency_under_reads(self, run: int) -> dict[str, float]:
        """B4R: the B4 probe while B2-style appends and B5 batched proofs run together."""
        progress(f"run {run} B4R: ack -> checkpoint probe under B2 load and batched proofs")
        with self._fresh_server(run, "B4R") as server:
            self._fill(server, 0, self.plan.segment)
            head = signed_head(server, self.plan.segment)
            common = {
                "head_size": head.size,
                "head_root": head.root,
                "validate": self.plan.validate,
            }
            tasks = [
                self._task("append", server, seed=0, threads=4, batch=1_000),
                self._task("inclusions", server, seed=1, threads=4, batch=1_000, **common),
                self._task("probe", server, seed=9),
            ]
            start = self.pool.launch(tasks)
            begin = start + self.plan.warm_s
            sleep_until(begin)
            before = server.sample()
            sleep_until(begin + self.plan.duration_s)
            after = server.sample()
            load, proofs, probe = self.pool.collect(
                len(tasks), self.plan.duration_s + COLLECT_SLACK_S
            )
        return {
            "p50_ms": percentile(probe.extra_ms, 50),
            "p99_ms": percentile(probe.extra_ms, 99),
            "samples": len(probe.extra_ms),
            "proofs_per_s": self._rate(proofs.records),
            "load_records_per_s": self._rate(load.records),
            "server_cpu": (after.cpu_s - before.cpu_s) / self.plan.duration_s,
            "validated": proofs.validated,
            "invalid": proofs.invalid,
        }

    # --- B5, B6, B7: one big log ------------------------------------------------------------

    def _fill(self, server: BenchServer, done: int, total: int) -> float:
        """Append one segment (B2 style, 10,000 per call, 2 x 4 callers); return its rate."""
        seg = self.plan.segment
        counts = [seg // 2, seg - seg // 2]
        tasks = [
            self._task("fill", server, seed=k, threads=4, batch=FILL_BATCH, count=c)
            for k, c in enumerate(counts)
        ]
        self.pool.launch(tasks)
        outs = self.pool.collect(len(tasks), FILL_TIMEOUT_S)
        rate = seg / max(o.elapsed_s for o in outs)
        progress(f"  fill {done + seg:,}/{total:,} entries: {rate:,.0f} records/s")
        return rate

    def _b5(self, big: _BigServer, head: Head) -> dict[str, float]:
        """B5: unary inclusion proofs (2 x 32 callers), then batched ones (2 x 4 x 1,000)."""
        progress(f"  B5: inclusion proofs at random sizes <= {head.size:,}")
        common = {"head_size": head.size, "head_root": head.root, "validate": self.plan.validate}
        server = big.phase("B5-unary")
        tasks = [self._task("inclusion", server, k, threads=32, **common) for k in range(2)]
        unary, unary_cpu, _ = self._timed(server, tasks)
        server = big.phase("B5-batched")
        tasks = [
            self._task("inclusions", server, k, threads=4, batch=1_000, **common) for k in range(2)
        ]
        batched, batched_cpu, _ = self._timed(server, tasks)
        return {
            "unary_per_s": self._rate(unary.records),
            "unary_per_server_cpu_s": per_cpu(self._rate(unary.records), unary_cpu),
            "unary_p50_ms": percentile(unary.latencies_ms, 50),
            "unary_p99_ms": percentile(unary.latencies_ms, 99),
            "unary_server_cpu": unary_cpu,
            "batched_per_s": self._rate(batched.records),
            "batched_per_server_cpu_s": per_cpu(self._rate(batched.records), batched_cpu),
            "batched_p99_ms": percentile(batched.latencies_ms, 99),
            "batched_server_cpu": batched_cpu,
            "log_size": head.size,
            "validated": unary.validated + batched.validated,
            "invalid": unary.invalid + batched.invalid,
        }

    def _b6(self, big: _BigServer, head: Head) -> dict[str, float]:
        """B6: consistency proofs between random sizes (2 x 32 callers)."""
        progress(f"  B6: consistency proofs between random sizes <= {head.size:,}")
        common = {"head_size": head.size, "head_root": head.root, "validate": self.plan.validate}
        server = big.phase("B6")
        tasks = [self._task("consistency", server, k, threads=32, **common) for k in range(2)]
        out, server_cpu, client_cpu = self._timed(server, tasks)
        return {
            "per_s": self._rate(out.records),
            "per_server_cpu_s": per_cpu(self._rate(out.records), server_cpu),
            "p50_ms": percentile(out.latencies_ms, 50),
            "p99_ms": percentile(out.latencies_ms, 99),
            "server_cpu": server_cpu,
            "client_cpu": client_cpu,
            "validated": out.validated,
            "invalid": out.invalid,
        }

    def big_log(self, run: int) -> RunFigures:
        """Fill, B5 and B6 at half size, fill to full size, memory, compaction (B7)."""
        seg = self.plan.segment
        total = 4 * seg if self.wants("B7") else 2 * seg
        progress(f"run {run} B5/B6/B7: filling a log to {total:,} entries")
        data_dir = self.work / f"run{run}-big"
        big = _BigServer(self, data_dir, run)
        entries = 2 * seg
        try:
            rates = [self._fill(big.current, k * seg, total) for k in range(2)]
            head = signed_head(big.current, 2 * seg)
            b5 = self._b5(big, head) if self.wants("B5", "B11") else {}
            b6 = self._b6(big, head) if self.wants("B6") else {}
            unary = b5.get("unary_per_s", float("nan"))
            b11 = b11_big_log(self, big, head, unary) if self.wants("B11") else {}
            half = full = big.current.sample()
            if self.wants("B7"):
                server = big.phase("B7-fill2")
                rates += [self._fill(server, k * seg, total) for k in range(2, 4)]
                entries = signed_head(server, total).size
                full = server.sample()
        finally:
            big.current.stop()
        if not self.wants("B7"):
            shutil.rmtree(data_dir, ignore_errors=True)
            return {"B5": b5, "B6": b6, "B11": b11}
        b7 = {f"segment{k + 1}_per_s": r for k, r in enumerate(rates)}
        b7 |= {
            "last_over_first": rates[-1] / rates[0],
            "rss_1m_mb": half.rss_bytes / MIB,
            "hwm_1m_mb": half.hwm_bytes / MIB,
            "rss_2m_mb": full.rss_bytes / MIB,
            "hwm_2m_mb": full.hwm_bytes / MIB,
            "peak_2m_over_rss_1m": full.hwm_bytes / half.rss_bytes,
            "peak_2m_over_peak_1m": full.hwm_bytes / half.hwm_bytes,
            "entries": entries,
        }
        b7 |= self._disk(data_dir, entries)
        shutil.rmtree(data_dir, ignore_errors=True)
        return {"B5": b5, "B6": b6, "B7": b7, "B11": b11}

    def _disk(self, data_dir: Path, entries: int) -> dict[str, float]:
        db = data_dir / "db"
        raw = disk_bytes(db)
        progress(f"  compacting {raw / MIB:,.0f} MiB")
        t0 = time.perf_counter()
        store = RocksStore(db)
        try:
            store.compact()
        finally:
            store.close()
        seconds = time.perf_counter() - t0
        return {
            "disk_bytes_per_entry": disk_bytes(db) / entries,
            "disk_bytes_per_entry_raw": raw / entries,
            "compaction_s": seconds,
        }

    # --- B8 and one whole run ---------------------------------------------------------------

    def grpc_floor(self, run: int) -> dict[str, float]:
        """B8: trivial unary RPCs (health Check) at B1's concurrency: what B1 can at most do."""
        progress(f"run {run} B8: gRPC floor, trivial unary calls, 2 x 32 callers")
        with self._fresh_server(run, "B8-floor") as server:
            tasks = [self._task("health", server, seed=k, threads=32) for k in range(2)]
            out, server_cpu, _ = self._timed(server, tasks)
        return {"grpc_floor_per_s": self._rate(out.calls), "grpc_floor_server_cpu": server_cpu}

    def limit(self, run: int) -> dict[str, float]:
        """B8: SHA-256 calls/s and the in-process append loop (no server running)."""
        progress(f"run {run} B8: SHA-256 and the in-process append loop")
        rates = {}
        for name, rate in (
            ("loop_entries_per_s", local_append_rate),
            ("packed_loop_per_s", local_packed_rate),
            ("synced_bound_per_s", synced_write_rate),
        ):
            db = self.work / f"run{run}-local-{name}"
            try:
                rates[name] = rate(db, self.plan.local_batches)
            finally:
                shutil.rmtree(db, ignore_errors=True)
        rates["packed_of_bound"] = rates["packed_loop_per_s"] / rates["synced_bound_per_s"]
        rates["native_core"] = float(accel.CORE == "native")
        return {"sha256_per_s": sha256_rate(self.plan.sha_calls), **rates}

    def ceilings(self, run: int, figures: RunFigures) -> dict[str, float]:
        """C: the B1, B2 and B3 loads against a trivial grpc.aio server of the same shapes (the
        benchmark's own ceiling), in total and per server CPU second; the fractions."""
        out: dict[str, float] = {}
        progress(f"run {run} C: aio ceiling server, B1/B2/B3 shapes")
        server = CeilingServer("aio", self.work / f"run{run}-ceiling-aio.log")
        try:
            shapes = (
                ("unary", "AppendPacked", 16, 1),
                ("packed", "AppendPacked", 2, 1_000),
                ("batched", "AppendRecords", 2, 1_000),
            )
            for name, rpc, lanes, batch in shapes:
                done = self._raw_figures(server, self._raw_tasks(server, rpc, lanes, batch))
                out[f"aio_{name}_per_s"] = done["records_per_s"]
                out[f"aio_{name}_per_server_cpu_s"] = done["records_per_server_cpu_s"]
                out[f"aio_{name}_client_cpu"] = done["client_cpu"]
            stream, server_cpu, client_cpu = self._stream_figures(server, 1)
            out["aio_stream_per_s"] = self._rate(stream.records)
            out["aio_stream_client_cpu"] = client_cpu
            out["aio_stream_per_server_cpu_s"] = per_cpu(out["aio_stream_per_s"], server_cpu)
        finally:
            server.stop()
        pairs = (
            ("B1", "records_per_s", "records_per_server_cpu_s", "b1", "unary"),
            ("B2", "records_per_s", "records_per_server_cpu_s", "b2", "packed"),
            ("B2", "typed_records_per_s", "typed_per_server_cpu_s", "b2_typed", "batched"),
            ("B3", "records_per_s", "records_per_server_cpu_s", "b3", "stream"),
        )
        for sid, rate, per_core, figure, shape in pairs:
            if sid in figures and rate in figures[sid]:
                out[f"{figure}_of_aio_{shape}"] = figures[sid][rate] / out[f"aio_{shape}_per_s"]
                out[f"{figure}_of_aio_{shape}_per_cpu"] = (
                    figures[sid][per_core] / out[f"aio_{shape}_per_server_cpu_s"]
                )
        if "B2" in figures:
            out["ceiling_over_b2"] = out["aio_packed_per_s"] / figures["B2"]["records_per_s"]
            out |= _record_costs(figures["B2"], out["aio_packed_per_server_cpu_s"])
        return out

    def peer(self, run: int) -> dict[str, float]:
        """B9: the log and pymerkle build durable trees of the same leaves, in process."""
        progress(f"run {run} B9: log vs pymerkle, {self.plan.peer_leaves:,} leaves")
        work = self.work / f"run{run}-B9"
        work.mkdir()
        try:
            return build_rates(work, self.plan.peer_leaves, self.plan.peer_batch)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def run(self, run: int) -> RunFigures:
        """Every selected scenario once."""
        figures: RunFigures = {}
        if self.wants("B1"):
            figures["B1"] = self.appends(run, "B1", lanes=16, batch=1)
        if self.wants("B2", "B8"):
            figures["B2"] = self.appends(run, "B2", lanes=2, batch=1_000)
        if self.wants("B3"):
            figures["B3"] = self.stream(run)
        if self.wants("C"):
            figures["C"] = self.ceilings(run, figures)
        if self.wants("B4"):
            figures["B4"] = self.checkpoint_latency(run)
        if self.wants("B4R"):
            figures["B4R"] = self.checkpoint_latency_under_reads(run)
        if self.wants("B5", "B6", "B7", "B11"):
            figures |= {k: v for k, v in self.big_log(run).items() if v}
        if self.wants("B11"):
            figures["B11"] = figures.get("B11", {}) | b11_mirror_lag(self, run)
        if self.wants("B13"):
            figures["B13"] = b13_bucket(self, run)
        if self.wants("B14"):
            figures["B14"] = b14_primary(self, run)
        if self.wants("B8"):
            b8 = self.grpc_floor(run) | self.limit(run)
            b8["b2_fraction"] = figures["B2"]["records_per_s"] / b8["loop_entries_per_s"]
            if "B1" in figures:
                b8["b1_fraction"] = figures["B1"]["records_per_s"] / b8["grpc_floor_per_s"]
            figures["B8"] = b8
        if self.wants("B9"):
            figures["B9"] = self.peer(run)
        return figures
