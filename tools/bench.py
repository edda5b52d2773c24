"""Benchmark a real log server: ``python tools/bench.py [--quick] [--runs N] [--out DIR]``.

Starts ``ledger serve`` on a temporary data dir (port 0, no TSA, no anchoring), drives it from
separate client processes (B1/B2 and their ceilings: requests encoded before the clock starts,
sent as bytes over grpc.aio from every worker process; the rest through ``RemoteLog``), samples
the server's CPU from ``/proc/<pid>/stat`` around each window (every throughput also per server
CPU second), and writes ``DIR/bench.json`` and
``DIR/bench.md`` (default ``bench-results/``): every figure is the median of ``--runs`` runs with
min-max, next to the exact command and the date. Scenarios and targets:

    B1  unary append, 1 digest per call, 64 in flight     >= 0.8 of the aio unary ceiling (C);
                                                          p99 ack <= 50 ms
    B2  AppendPacked, 1,000 per call, 8 in flight         >= 150,000 records/s durable;
        (and AppendRecords of the same shape)             >= 0.8 of the synced-write bound
        the synced-write bound: the log's write batches alone, synced, same run
    B3  one streaming append, batched acks                >= 0.8 of the aio stream ceiling (C)
    C   the benchmark's own ceiling: a trivial grpc.aio server (tools/bench_ceiling.py) under
        the B1, B2 and B3 loads, same run; B1/B2/B3 as fractions of it, in total and per
        server core                                       client ceiling >= 3 x B2
    B4  ack -> covering signed checkpoint, under B2 load  p99 <= 150 ms
    B5  inclusion proofs at random sizes, 1M-entry log    >= 3,000/s unary; >= 20,000/s batched
    B6  consistency proofs between random sizes           >= 3,000/s unary
    B7  fill to 2M: rate per 500k, RSS at 1M and 2M, disk <= 120 bytes per entry compacted
    B8  the limit: SHA-256 calls/s and the in-process append loop; B2 as a fraction of it
    B9  the peer: durable build of the same 1M leaves, the log vs pymerkle SqliteTree (batched)
    B11 tlog-tiles: tile requests/s (in-process endpoint, nginx over the mirror) and proofs/s
        built from a warm tile cache, on B5's log beside B5 unary; mirror lag under B2 load
                                                          nginx >= 10 x B5 unary; >= 20,000
                                                          proofs/s; mirror lag p99 <= 1 s
    B13 the log in a local SeaweedFS bucket (tools/bench_bucket.py): B2 with the bucket mirror
        on vs off per server CPU second, upload and SeaweedFS CPU per entry, mirror lag under
        B2 at the rate the bucket absorbs, tile GETs/s from the bucket vs the log's endpoint
                                                          on >= 0.9 x off per server CPU s;
                                                          mirror lag p99 <= 1 s
    B14 primary mode (tools/bench_primary.py): B2 and B4 local-only, then with the bucket as
        the primary store (local SeaweedFS), fresh servers, same run; SeaweedFS CPU per entry
                                                          primary >= 0.5 x local-only per
                                                          server CPU s; B4 p99 <= 250 ms

``--quick`` shrinks everything (20k/40k-entry logs, 2 s windows, 20k B9 leaves, 1 run) for a
quick look. ``--smoke`` shrinks it further, for the test suite's smoke tests
(``tests/integration/test_bench_smoke*.py``): every scenario's code path runs for real
(servers, client processes, SeaweedFS, nginx, the figures read from the report) on 4k/8k-entry
logs in 1 s windows (B11's mirror lag: 2 s); its figures say nothing about speed.
``--only B1,B5`` picks scenarios. ``--server-python OTHER/.venv/bin/python`` serves with
another checkout's code under this load generator (before/after comparisons, e.g. B5/B6 against
the commit before issue 23). ``--profile DIR`` runs every server under cProfile (one
profile per thread, see ``tools/bench_profiled.py``) and writes ``DIR/summary.txt``; its figures
are distorted by the profiler. Progress goes to stderr; the Markdown report (or with ``--json``
the JSON one) to stdout. Exit status: 0 done, 1 a sampled proof failed to verify, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import sys
import tempfile
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the ``tools`` package importable
    sys.path.insert(0, str(ROOT))

from tools.bench_clients import ClientPool  # noqa: E402
from tools.bench_profiled import summarize_profiles  # noqa: E402
from tools.bench_report import SCENARIOS, RunFigures, build_report, render_markdown  # noqa: E402
from tools.bench_scenarios import Bench, Plan, progress  # noqa: E402

__all__ = ["main"]

IDS = tuple(s.id for s in SCENARIOS)
CLIENT_PROCESSES = 4  # two load processes, the B4 probe and B11's tile readers


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tools/bench.py", description=__doc__.split("\n", 1)[0] if __doc__ else None
    )
    parser.add_argument("--quick", action="store_true", help="small and short (a quick look)")
    parser.add_argument(
        "--smoke", action="store_true", help="the smallest sizes (the test suite's smoke run)"
    )
    parser.add_argument("--runs", type=int, help="runs per figure (default 3, quick 1)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="report folder")
    parser.add_argument("--only", default=",".join(IDS), help="comma-separated scenario ids")
    parser.add_argument("--duration", type=float, help="measured seconds per timed scenario")
    parser.add_argument("--segment", type=int, help="entries per fill segment (B5/B6 at 2)")
    parser.add_argument("--profile", type=Path, help="profile the servers into this folder")
    parser.add_argument("--work-dir", type=Path, help="where temporary data dirs go")
    parser.add_argument(
        "--server-python",
        help="the interpreter that runs `ledger serve` (default: this one); another checkout's "
        "venv runs that checkout's server under this load generator (an A/B)",
    )
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    args = parser.parse_args(argv)
    only = {s.strip().upper() for s in args.only.split(",") if s.strip()}
    if not only or not only <= set(IDS):
        parser.error(f"--only: pick from {', '.join(IDS)}")
    if args.quick and args.smoke:
        parser.error("--quick and --smoke: pick one")
    if args.runs is not None and args.runs < 1:
        parser.error("--runs: want 1 or more")
    args.only = frozenset(only)
    return args


def make_plan(args: argparse.Namespace) -> Plan:
    """Sizes and durations: full, or shrunk by ``--quick`` or ``--smoke``; overridden by
    explicit flags."""
    if args.smoke:
        plan = dict(runs=1, warm_s=0.2, duration_s=1.0, segment=2_000, validate=5)
        plan |= dict(sha_calls=20_000, local_batches=5, peer_leaves=2_000, peer_batch=500)
        plan |= dict(tile_proofs=2_000, lag_seed=5_000)
    elif args.quick:
        plan = dict(runs=1, warm_s=0.3, duration_s=2.0, segment=10_000, validate=10)
        plan |= dict(sha_calls=200_000, local_batches=20, peer_leaves=20_000, peer_batch=1_000)
        plan |= dict(tile_proofs=20_000, lag_seed=50_000)
    else:
        plan = dict(runs=3, warm_s=1.0, duration_s=5.0, segment=500_000, validate=50)
        plan |= dict(sha_calls=2_000_000, local_batches=300)
        plan |= dict(peer_leaves=1_000_000, peer_batch=10_000)
        plan |= dict(tile_proofs=200_000, lag_seed=50_000)
    for flag, key in (("runs", "runs"), ("duration", "duration_s"), ("segment", "segment")):
        if getattr(args, flag) is not None:
            plan[key] = getattr(args, flag)
    return Plan(only=args.only, **plan)  # type: ignore[arg-type]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _header(plan: Plan, profiled: bool, server_python: str) -> dict[str, Any]:
    notes = [
        "clients (separate processes: pre-encoded grpc.aio requests for B1/B2/B4 and the "
        "ceilings, RemoteLog for the rest) and the server share this machine's CPUs; figures "
        "on a busy machine are noisy",
        f"B5/B6 log size {2 * plan.segment:,}; B7 fill segments of {plan.segment:,}",
    ]
    if profiled:
        notes.insert(0, "PROFILED servers (cProfile): figures are distorted; read the profiles")
    plain = asdict(plan)
    plain["only"] = sorted(plan.only)
    return {
        "command": shlex.join(sys.orig_argv),
        "cwd": os.getcwd(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": f"{_cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.platform()}",
        "load_average_at_start": list(os.getloadavg()),
        "plan": plain,
        "profiled": profiled,
        "server_python": server_python,
        "notes": notes,
    }


def _write(out: Path, report: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "bench.md").write_text(render_markdown(report))


def _failed_proofs(report: dict[str, Any]) -> bool:
    return any(
        f["name"] == "invalid" and (f["max"] or 0) > 0
        for s in report["scenarios"]
        for f in s["figures"]
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; write and return the report."""
    plan = make_plan(args)
    header = _header(plan, args.profile is not None, args.server_python or sys.executable)
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ledger-bench-", dir=args.work_dir))
    pool = ClientPool(CLIENT_PROCESSES)
    runs: list[RunFigures] = []
    try:
        bench = Bench(plan, pool, work, args.profile)
        if args.server_python:
            bench.server_python = args.server_python
        for n in range(1, plan.runs + 1):
            runs.append(bench.run(n))
            _write(args.out, build_report(runs, header))  # keep what is done so far
    finally:
        pool.close()
        shutil.rmtree(work, ignore_errors=True)
    report = build_report(runs, header)
    report["load_average_at_end"] = list(os.getloadavg())
    _write(args.out, report)
    if args.profile is not None:
        (args.profile / "summary.txt").write_text(summarize_profiles(args.profile))
        progress(f"profiles and summary in {args.profile}")
    progress(f"report in {args.out / 'bench.json'} and {args.out / 'bench.md'}")
    return report


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = _parse(sys.argv[1:] if argv is None else argv)
    report = run(args)
    print(json.dumps(report, indent=2) if args.json else render_markdown(report))
    return 1 if _failed_proofs(report) else 0


if __name__ == "__main__":
    sys.exit(main())
