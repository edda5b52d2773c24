"""The benchmark's scenarios B1..B8, B11, B13 and B14, their targets, and the report (JSON,
Markdown).

Each scenario names its figures; a figure may carry a target (``>=`` or ``<=`` a number) that
its median across runs is checked against. Figures measured in a run are plain floats keyed by
scenario id and figure name; ``build_report`` summarises the runs (median, min, max).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tools.bench_stats import summarize

__all__ = ["SCENARIOS", "Figure", "RunFigures", "Scenario", "build_report", "render_markdown"]

RunFigures = dict[str, dict[str, float]]  # scenario id -> figure name -> value, for one run


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured number of a scenario, with an optional target on its median."""

    name: str
    label: str
    unit: str
    op: str = ""  # ">=" or "<=" when the figure has a target
    bound: float = 0.0

    def meets(self, value: float) -> bool | None:
        """Whether ``value`` meets the target (None without a target or a number)."""
        if not self.op or math.isnan(value):
            return None
        return value >= self.bound if self.op == ">=" else value <= self.bound

    @property
    def target(self) -> str | None:
        """The target as text, e.g. ``>= 4000``."""
        return f"{self.op} {self.bound:g}" if self.op else None


@dataclass(frozen=True, slots=True)
class Scenario:
    """A benchmark scenario: id, what runs, the stated target and its figures."""

    id: str
    title: str
    target: str
    figures: tuple[Figure, ...]


_CPU = (Figure("server_cpu", "server CPU", "cores"), Figure("client_cpu", "client CPU", "cores"))
_VALID = (
    Figure("validated", "sampled proofs verified", "proofs"),
    Figure("invalid", "sampled proofs failing", "proofs", "<=", 0),
)

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "B1",
        "unary append (AppendPacked, 1 digest per call), 64 in flight (4 processes x 16, "
        "pre-encoded), durable acks",
        ">= 0.8 of the aio unary ceiling (scenario C); p99 ack <= 50 ms",
        (
            Figure("records_per_s", "throughput", "records/s"),
            Figure("records_per_server_cpu_s", "per server CPU second", "records/cpu-s"),
            Figure("p50_ms", "ack p50", "ms"),
            Figure("p99_ms", "ack p99", "ms", "<=", 50),
            *_CPU,
            Figure("errors", "failed calls", "calls"),
            Figure("reused", "requests sent twice (pool ran out)", "calls"),
        ),
    ),
    Scenario(
        "B2",
        "batched append (AppendPacked, 1,000 digests per call), 8 in flight (4 processes x 2, "
        "pre-encoded); AppendRecords of the same shape; the synced-write bound (the log's "
        "write batches alone, synced), same run",
        ">= 150,000 records/s durable; >= 0.8 of the synced-write bound",
        (
            Figure("records_per_s", "throughput", "records/s", ">=", 150_000),
            Figure("records_per_server_cpu_s", "per server CPU second", "records/cpu-s"),
            Figure("p50_ms", "call p50", "ms"),
            Figure("p99_ms", "call p99", "ms"),
            *_CPU,
            Figure("errors", "failed calls", "calls"),
            Figure("reused", "requests sent twice (pool ran out)", "calls"),
            Figure("typed_records_per_s", "AppendRecords throughput", "records/s"),
            Figure(
                "typed_per_server_cpu_s", "AppendRecords per server CPU second", "records/cpu-s"
            ),
            Figure("typed_server_cpu", "AppendRecords server CPU", "cores"),
            Figure("synced_bound_per_s", "synced-write bound", "entries/s"),
            Figure("of_synced_bound", "B2 / synced-write bound", "ratio", ">=", 0.8),
            Figure("server_cpu_us", "server CPU per record", "µs"),
            Figure("client_cpu_us", "client CPU per record", "µs"),
            Figure("synced_bound_cpu_us", "synced-write bound: CPU per entry", "µs"),
        ),
    ),
    Scenario(
        "B3",
        "one streaming append (1 digest per message, pre-encoded, one process), batched acks",
        ">= 0.8 of the aio stream ceiling (scenario C)",
        (
            Figure("records_per_s", "throughput", "records/s"),
            Figure("records_per_server_cpu_s", "per server CPU second", "records/cpu-s"),
            Figure("ack_p50_ms", "record -> ack p50", "ms"),
            Figure("ack_p99_ms", "record -> ack p99", "ms"),
            Figure("records_per_ack", "records per ack", "records"),
            *_CPU,
            Figure("errors", "failed streams", "streams"),
            Figure("reused", "messages sent twice (pool ran out)", "messages"),
            Figure("records_per_s_100", "throughput, 100 digests per message", "records/s"),
            Figure("errors_100", "failed streams, 100 per message", "streams"),
        ),
    ),
    Scenario(
        "B4",
        "ack -> covering signed checkpoint, under B2 load",
        "p99 <= 150 ms",
        (
            Figure("p50_ms", "ack -> checkpoint p50", "ms"),
            Figure("p99_ms", "ack -> checkpoint p99", "ms", "<=", 150),
            Figure("samples", "probes", "probes"),
            Figure("probe_ack_p99_ms", "probe append ack p99", "ms"),
            Figure("load_records_per_s", "B2 load throughput", "records/s"),
            Figure("server_cpu", "server CPU", "cores"),
            Figure("load_per_server_cpu_s", "B2 load per server CPU second", "records/cpu-s"),
        ),
    ),
    Scenario(
        "B4R",
        "B4 while batched inclusion proofs (1,000 per call, 4 in flight) read the same log: "
        "reads run on reader threads, never on the event loop",
        "p99 <= 150 ms",
        (
            Figure("p50_ms", "ack -> checkpoint p50", "ms"),
            Figure("p99_ms", "ack -> checkpoint p99", "ms", "<=", 150),
            Figure("samples", "probes", "probes"),
            Figure("proofs_per_s", "concurrent batched proofs", "proofs/s"),
            Figure("load_records_per_s", "concurrent B2 load", "records/s"),
            Figure("server_cpu", "server CPU", "cores"),
            *_VALID,
        ),
    ),
    Scenario(
        "B5",
        "inclusion proofs, random indexes and sizes, 1M-entry log: 64 in flight unary; "
        "batched RPC (1,000 per call, 8 in flight)",
        ">= 3,000/s unary; >= 20,000/s batched",
        (
            Figure("unary_per_s", "unary proofs", "proofs/s", ">=", 3_000),
            Figure("unary_per_server_cpu_s", "unary per server CPU second", "proofs/cpu-s"),
            Figure("unary_p50_ms", "unary p50", "ms"),
            Figure("unary_p99_ms", "unary p99", "ms"),
            Figure("unary_server_cpu", "unary server CPU", "cores"),
            Figure("batched_per_s", "batched proofs", "proofs/s", ">=", 20_000),
            Figure("batched_per_server_cpu_s", "batched per server CPU second", "proofs/cpu-s"),
            Figure("batched_p99_ms", "batched call p99", "ms"),
            Figure("batched_server_cpu", "batched server CPU", "cores"),
            Figure("log_size", "log size", "entries"),
            *_VALID,
        ),
    ),
    Scenario(
        "B6",
        "consistency proofs between random sizes, same log, 64 in flight",
        ">= 3,000/s unary",
        (
            Figure("per_s", "proofs", "proofs/s", ">=", 3_000),
            Figure("per_server_cpu_s", "per server CPU second", "proofs/cpu-s"),
            Figure("p50_ms", "p50", "ms"),
            Figure("p99_ms", "p99", "ms"),
            *_CPU,
            *_VALID,
        ),
    ),
    Scenario(
        "B7",
        "fill to 2M entries (10,000 per call, 8 in flight)",
        "last 500k rate >= 90% of first 500k; peak RSS at 2M within 10% of RSS at 1M; "
        "disk <= 120 bytes/entry after compaction",
        (
            Figure("segment1_per_s", "append rate, 1st segment", "records/s"),
            Figure("segment2_per_s", "append rate, 2nd segment", "records/s"),
            Figure("segment3_per_s", "append rate, 3rd segment", "records/s"),
            Figure("segment4_per_s", "append rate, 4th segment", "records/s"),
            Figure("last_over_first", "last / first segment rate", "ratio", ">=", 0.9),
            Figure("rss_1m_mb", "RSS at half size", "MiB"),
            Figure("hwm_1m_mb", "peak RSS at half size", "MiB"),
            Figure("rss_2m_mb", "RSS at full size", "MiB"),
            Figure("hwm_2m_mb", "peak RSS at full size", "MiB"),
            Figure("peak_2m_over_rss_1m", "peak RSS full / RSS half", "ratio", "<=", 1.10),
            Figure("peak_2m_over_peak_1m", "peak RSS full / peak RSS half", "ratio"),
            Figure("disk_bytes_per_entry", "disk per entry, compacted", "bytes", "<=", 120),
            Figure("disk_bytes_per_entry_raw", "disk per entry, before compaction", "bytes"),
            Figure("compaction_s", "full compaction time", "s"),
            Figure("entries", "entries", "entries"),
        ),
    ),
    Scenario(
        "B8",
        "the limit: SHA-256 of 65 bytes; in-process Log.append + publish per 1,000 (synced); "
        "and the gRPC floor (trivial unary health Check, 2 x 32 callers)",
        "report B2 as a fraction of the loop (and B1 as a fraction of the gRPC floor)",
        (
            Figure("sha256_per_s", "SHA-256 calls", "calls/s"),
            Figure("loop_entries_per_s", "in-process append loop", "entries/s"),
            Figure(
                "packed_loop_per_s",
                "in-process packed loop (append_digests, checkpoint every 50 ms)",
                "entries/s",
            ),
            Figure("synced_bound_per_s", "synced-write bound (rocksdict alone)", "entries/s"),
            Figure("packed_of_bound", "packed loop / synced-write bound", "ratio", ">=", 0.8),
            Figure("native_core", "compiled core (1) or pure twin (0)", "flag"),
            Figure("b2_fraction", "B2 / loop", "ratio"),
            Figure("grpc_floor_per_s", "gRPC floor: trivial unary calls", "calls/s"),
            Figure("grpc_floor_server_cpu", "gRPC floor server CPU", "cores"),
            Figure("b1_fraction", "B1 / gRPC floor", "ratio"),
        ),
    ),
    Scenario(
        "B11",
        "C2SP tlog-tiles on B5's log: random tile GETs (2 processes x 4 keep-alive connections, "
        "16 pipelined) on the in-process endpoint and on nginx (1 worker) over the mirror; "
        "inclusion proofs built client-side from a warm tile cache; mirror lag under B2 load",
        "nginx >= 10x B5 unary proofs/s in tile requests; client-side proofs >= 20,000/s; "
        "mirror lag p99 <= 1 s",
        (
            Figure("b5_unary_per_s", "B5 unary gRPC proofs, same run", "proofs/s"),
            Figure("endpoint_per_s", "tile requests, in-process endpoint", "requests/s"),
            Figure("endpoint_p99_ms", "endpoint p99 per 16 pipelined", "ms"),
            Figure("nginx_per_s", "tile requests, nginx over the mirror", "requests/s"),
            Figure("nginx_p99_ms", "nginx p99 per 16 pipelined", "ms"),
            Figure("nginx_over_b5", "nginx / B5 unary", "ratio", ">=", 10),
            Figure(
                "client_proofs_per_s", "proofs from a warm tile cache", "proofs/s", ">=", 20_000
            ),
            *_VALID,
            Figure("export_s", "ledger tiles export of the log", "s"),
            Figure("export_files", "mirror files", "files"),
            Figure("mirror_lag_p50_ms", "mirror lag p50", "ms"),
            Figure("mirror_lag_p99_ms", "mirror lag p99", "ms", "<=", 1_000),
            Figure("mirror_lag_samples", "checkpoints observed", "checkpoints"),
            Figure("mirror_b2_records_per_s", "B2 throughput with the mirror on", "records/s"),
            Figure("mirror_b4_p99_ms", "B4 p99 with mirror and tile readers", "ms", "<=", 150),
            Figure("mirror_readers_per_s", "tile reads meanwhile", "requests/s"),
        ),
    ),
    Scenario(
        "B13",
        "the log published to a local SeaweedFS bucket (mirror mode): B2 without and with the "
        "bucket mirror, fresh servers, same run; mirror lag under that B2 load; random tile GETs "
        "(2 processes x 4 keep-alive connections, 4 pipelined) from the bucket vs the endpoint",
        "with the mirror >= 0.9 of without per server CPU second; mirror lag p99 <= 1 s at the "
        "rate the bucket absorbs (stated)",
        (
            Figure("off_records_per_s", "B2 without the bucket", "records/s"),
            Figure("on_records_per_s", "B2 with the bucket mirror", "records/s"),
            Figure("off_per_server_cpu_s", "without: records per server CPU second", "records"),
            Figure("on_per_server_cpu_s", "with: records per server CPU second", "records"),
            Figure(
                "on_over_off_per_cpu", "with / without, per server CPU second", "ratio", ">=", 0.9
            ),
            Figure("upload_cpu_ms_per_1k", "upload client (mirror child) CPU per 1,000", "ms"),
            Figure("weed_cpu_ms_per_1k", "SeaweedFS CPU per 1,000 entries", "ms"),
            Figure("bucket_absorbed_per_s", "entries the bucket's checkpoint grew by", "records/s"),
            Figure("lag_p50_ms", "mirror lag p50 (served -> in the bucket)", "ms"),
            Figure("lag_p99_ms", "mirror lag p99", "ms", "<=", 1_000),
            Figure("lag_samples", "checkpoints observed", "checkpoints"),
            Figure("drain_s", "bucket catches up after the load", "s"),
            Figure("on_client_cores", "load generator CPU with the mirror (of 2 cores)", "cores"),
            Figure("paced_records_per_s", "B2 paced at half the flat-out rate", "records/s"),
            Figure("paced_lag_p50_ms", "paced: mirror lag p50", "ms"),
            Figure("paced_lag_p99_ms", "paced: mirror lag p99", "ms", "<=", 1_000),
            Figure("paced70_records_per_s", "B2 paced at 0.7 of the flat-out rate", "records/s"),
            Figure("paced70_lag_p99_ms", "paced 0.7: mirror lag p99", "ms"),
            Figure("paced85_records_per_s", "B2 paced at 0.85 of the flat-out rate", "records/s"),
            Figure("paced85_lag_p99_ms", "paced 0.85: mirror lag p99", "ms"),
            Figure(
                "lag_ok_records_per_s",
                "highest B2 rate, lag p99 <= 1 s (this run)",
                "records/s",
            ),
            Figure("bucket_gets_per_s", "tile GETs from the bucket's endpoint", "requests/s"),
            Figure("bucket_gets_per_cpu_s", "per SeaweedFS CPU second", "requests"),
            Figure("endpoint_gets_per_s", "tile GETs from the log's endpoint", "requests/s"),
            Figure("endpoint_gets_per_cpu_s", "per server CPU second", "requests"),
        ),
    ),
    Scenario(
        "B14",
        "primary mode (the bucket holds the log; tools/bench_primary.py): B2 and B4 on a fresh "
        "local-only server, then on a fresh server in primary mode over a local SeaweedFS, same "
        "run; B4 from the call to the covering checkpoint (primary acknowledges at the swap)",
        "primary >= 0.5 of local-only per server CPU second; primary B4 p99 <= 250 ms",
        (
            Figure("local_records_per_s", "local-only B2", "records/s"),
            Figure("primary_records_per_s", "primary B2", "records/s"),
            Figure("local_per_server_cpu_s", "local-only per server CPU second", "records"),
            Figure("primary_per_server_cpu_s", "primary per server CPU second", "records"),
            Figure(
                "primary_over_local_per_cpu",
                "primary / local-only, per server CPU second",
                "ratio",
                ">=",
                0.5,
            ),
            Figure("primary_weed_us_per_entry", "SeaweedFS CPU per entry (B2)", "µs"),
            Figure("local_server_cores", "local-only server CPU", "cores"),
            Figure("primary_server_cores", "primary server CPU", "cores"),
            Figure("local_b4_p50_ms", "local-only B4 p50 (call -> checkpoint)", "ms"),
            Figure("local_b4_p99_ms", "local-only B4 p99", "ms"),
            Figure("primary_b4_p50_ms", "primary B4 p50 (call -> checkpoint)", "ms"),
            Figure("primary_b4_p99_ms", "primary B4 p99", "ms", "<=", 250),
            Figure("local_b4_samples", "local-only B4 probes", "probes"),
            Figure("primary_b4_samples", "primary B4 probes", "probes"),
            Figure("local_b4_load_per_s", "local-only load beside the probe", "records/s"),
            Figure("primary_b4_load_per_s", "primary load beside the probe", "records/s"),
            Figure("primary_b4_weed_us_per_entry", "SeaweedFS CPU per entry (B4 load)", "µs"),
            Figure("primary_errors", "primary: failed calls", "calls"),
        ),
    ),
    Scenario(
        "C",
        "the benchmark's own ceiling: a trivial grpc.aio server (tools/bench_ceiling.py) of the "
        "same message shapes, the same pre-encoded load from the same processes, same run; "
        "each append scenario as a fraction, in total and per server CPU second",
        "client ceiling >= 3x B2; B1 >= 0.8 of aio unary; B3 >= 0.8 of aio stream; "
        "B2 >= 0.25 of aio packed per server core",
        (
            Figure("aio_unary_per_s", "unary (B1 shape)", "records/s"),
            Figure("aio_unary_per_server_cpu_s", "unary per server CPU second", "records/cpu-s"),
            Figure("aio_packed_per_s", "AppendPacked 1,000 per call (B2 shape)", "records/s"),
            Figure(
                "aio_packed_per_server_cpu_s", "AppendPacked per server CPU second", "records/cpu-s"
            ),
            Figure("aio_packed_client_cpu", "AppendPacked client CPU", "cores"),
            Figure("aio_batched_per_s", "AppendRecords 1,000 per call", "records/s"),
            Figure(
                "aio_batched_per_server_cpu_s",
                "AppendRecords per server CPU second",
                "records/cpu-s",
            ),
            Figure("aio_stream_per_s", "stream 1/message (B3 shape)", "records/s"),
            Figure("aio_stream_client_cpu", "stream client CPU", "cores"),
            Figure("aio_stream_per_server_cpu_s", "stream per server CPU second", "records/cpu-s"),
            Figure("ceiling_over_b2", "client ceiling / B2", "ratio", ">=", 3),
            Figure("b1_of_aio_unary", "B1 / aio unary", "ratio", ">=", 0.8),
            Figure("b1_of_aio_unary_per_cpu", "B1 / aio unary, per server core", "ratio"),
            Figure("b2_of_aio_packed", "B2 / aio packed", "ratio"),
            Figure(
                "b2_of_aio_packed_per_cpu", "B2 / aio packed, per server core", "ratio", ">=", 0.25
            ),
            Figure("b2_typed_of_aio_batched", "B2 AppendRecords / aio AppendRecords", "ratio"),
            Figure("b2_typed_of_aio_batched_per_cpu", "the same, per server core", "ratio"),
            Figure("b3_of_aio_stream", "B3 / aio stream", "ratio", ">=", 0.8),
            Figure("b3_of_aio_stream_per_cpu", "B3 / aio stream, per server core", "ratio"),
            Figure("aio_packed_cpu_us", "aio packed: server CPU per record", "µs"),
            Figure("b2_floor_cpu_us", "B2 floor: aio packed + synced writes, CPU per record", "µs"),
            Figure("b2_over_floor", "B2 server CPU per record / floor", "ratio"),
            Figure("per_core_target_cpu_us", "CPU per record 0.25 per core allows", "µs"),
            Figure(
                "bound_target_floor_cores",
                "cores 0.8 of the bound takes at the floor (server + client)",
                "cores",
            ),
            Figure("bound_target_cores", "cores 0.8 of the bound takes at B2's costs", "cores"),
        ),
    ),
    Scenario(
        "B9",
        "the peer: build a durable tree of the same leaves in process, the log "
        "(Log.append_digests + publish per batch over RocksStore) against pymerkle 7 SqliteTree "
        "(append_entries, one transaction per batch)",
        "log build rate >= pymerkle's in the same run",
        (
            Figure("log_per_s", "log build rate", "leaves/s"),
            Figure("pymerkle_per_s", "pymerkle SqliteTree build rate", "leaves/s"),
            Figure("log_over_pymerkle", "log / pymerkle", "ratio", ">=", 1.0),
            Figure("log_bytes_per_leaf", "log disk per leaf, compacted", "bytes"),
            Figure("pymerkle_bytes_per_leaf", "pymerkle disk per leaf", "bytes"),
            Figure("leaves", "leaves", "leaves"),
            Figure("batch", "leaves per batch", "leaves"),
            Figure("native_core", "compiled core (1) or pure twin (0)", "flag"),
        ),
    ),
)


def _figure_json(fig: Figure, runs: Sequence[float]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": fig.name, "label": fig.label, "unit": fig.unit}
    summary = summarize(runs)
    out.update({k: _finite(v) for k, v in summary.to_json().items()})
    out["target"] = fig.target
    out["ok"] = fig.meets(summary.median)
    return out


def _finite(value: object) -> object:
    """NaN (no samples) becomes None, so the JSON stays standard."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _scenario_json(scenario: Scenario, runs: Sequence[RunFigures]) -> dict[str, Any] | None:
    figures = []
    for fig in scenario.figures:
        values = [r[scenario.id][fig.name] for r in runs if fig.name in r.get(scenario.id, {})]
        if values:
            figures.append(_figure_json(fig, values))
    if not figures:
        return None
    verdicts = [f["ok"] for f in figures if f["ok"] is not None]
    return {
        "id": scenario.id,
        "scenario": scenario.title,
        "target": scenario.target,
        "ok": all(verdicts) if verdicts else None,
        "figures": figures,
    }


def build_report(runs: Sequence[RunFigures], header: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON report: ``header`` (command, date, host, plan) and every scenario measured."""
    scenarios = [_scenario_json(s, runs) for s in SCENARIOS]
    return {**header, "runs": len(runs), "scenarios": [s for s in scenarios if s is not None]}


def _num(value: float | None, unit: str) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    if unit in ("ratio", "cores") or (unit == "µs" and abs(value) < 10):
        return f"{value:.2f}"
    if unit in ("ms", "s") or abs(value) < 100:
        return f"{value:,.1f}"
    return f"{value:,.0f}"


def _ok(ok: bool | None) -> str:
    return "" if ok is None else ("yes" if ok else "**NO**")


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown: provenance, then one table row per figure."""
    lines = [
        "# Decision Ledger benchmark",
        "",
        f"- command: `{report['command']}`",
        f"- date: {report['date']}",
        f"- host: {report['host']}",
        f"- runs: {report['runs']} (each figure: median, min–max over the runs)",
    ]
    lines += [f"- note: {note}" for note in report.get("notes", [])]
    lines += [
        "",
        "| id | scenario | figure | median | min–max | unit | target | ok |",
        "| --- | --- | --- | ---: | ---: | --- | --- | --- |",
    ]
    for s in report["scenarios"]:
        first = True
        for f in s["figures"]:
            sid, title = (s["id"], s["scenario"]) if first else ("", "")
            spread = f"{_num(f['min'], f['unit'])}–{_num(f['max'], f['unit'])}"
            row = (
                sid, title, f["label"], _num(f["median"], f["unit"]), spread, f["unit"],
                f["target"] or "", _ok(f["ok"]),
            )  # fmt: skip
            lines.append("| " + " | ".join(row) + " |")
            first = False
    return "\n".join(lines) + "\n"
