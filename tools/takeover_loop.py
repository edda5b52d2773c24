"""Repeated kill -9 takeovers in primary mode over a local SeaweedFS (issue 28).

    .venv/bin/python -m tools.takeover_loop --rounds 50 [--lease-s 2] [--json] [--no-wait-standby]

An active ``ledger serve`` (primary mode) and a ``--standby`` (each its own data dir, one
bucket) run under an append load (8 digests per call, ``wait_for_checkpoint``, two client
threads). Each round: wait for some acknowledged appends and for the standby to follow the
bucket (its ``standby: following`` line; ``--no-wait-standby`` kills at once, so a standby still
starting up counts its start-up and a full lease from its first read of the lock), kill -9 the
active, time until the standby prints its ``serving`` line (the takeover), move the load to it,
start a fresh standby. Each takeover is split into phases from the standby's log lines:
``detect`` (kill to the lease seen lapsed), ``lock`` (the lock swapped), ``catch_up`` (the data
dir at the bucket's checkpoint) and ``open`` (the rest of the start, to the serving line).
At the end it checks: every acknowledged digest is in the final writer's tree at the index it
was given (0 lost), and every checkpoint any writer served (the notes the load received) has
the bucket's root at its size (``checkpoints/<size>``, the one the lock swapped in). Prints
takeover p50/p99 and the totals; exits 1 on any loss or second root.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

from ledger.core.checkpoint import open_checkpoint
from ledger.core.errors import LedgerError
from ledger.core.note import Verifier
from ledger.objstore.bucket import Bucket, BucketAddress
from ledger.objstore.conformance import check_store
from ledger_client.remote.log import RemoteLog
from tools.bench_server import ORIGIN, BenchServer, make_key
from tools.seaweed import aws_env, run_seaweedfs

__all__ = ["main"]


class _Load:
    """Two client threads appending to ``target()``; records acks and the served notes."""

    def __init__(self, target: list[str]) -> None:
        self._target = target
        self.acked: dict[bytes, int] = {}
        self.notes: dict[int, str] = {}
        self.errors = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(2)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        address, client = "", None
        while not self._stop.is_set():
            if address != self._target[0]:
                if client is not None:
                    client.close()
                address = self._target[0]
                client = RemoteLog(address, timeout=5)
            assert client is not None
            digests = [os.urandom(32) for _ in range(8)]
            try:
                out = client.append(digests, wait_for_checkpoint=True)
            except LedgerError:
                with self._lock:
                    self.errors += 1
                self._stop.wait(0.05)
                continue
            with self._lock:
                for digest, result in zip(digests, out.results, strict=True):
                    self.acked[digest] = result.index
                if out.checkpoint is not None:
                    self.notes[out.checkpoint.size] = out.checkpoint.note
        if client is not None:
            client.close()

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def run(rounds: int, lease_s: float, work: Path, *, wait_standby: bool = True) -> dict[str, object]:
    os.environ.update(aws_env())
    os.environ["LEDGER_OBJECT_STORE_LEASE_S"] = str(lease_s)
    with run_seaweedfs(work / "seaweedfs") as seaweed:
        address = BucketAddress.parse("s3://ledger/loop", endpoint=seaweed.endpoint)
        bucket = Bucket(address)
        _wait(lambda: _ensure(bucket), 60)
        check_store(address, rounds=1, writers=4)
        key = work / "signer.key"
        make_key(key)
        pool = ThreadPoolExecutor(2)

        def writer(n: int, standby: bool) -> BenchServer:
            extra = [
                "--object-store-url", "s3://ledger/loop", "--object-store-endpoint",
                seaweed.endpoint, "--object-store-mode", "primary", "--object-store-writer",
                f"w{n}", "--checkpoint-interval-ms", "20", *(["--standby"] if standby else []),
            ]  # fmt: skip
            return BenchServer(work / f"w{n}", key, extra=extra)

        active = writer(0, False)
        verifier = _verifier(active)
        standby: Future[BenchServer] = pool.submit(writer, 1, True)
        target = [active.address]
        load = _Load(target)
        takeovers: list[float] = []
        phases: dict[str, list[float]] = {}
        try:
            for n in range(rounds):
                base = load.count()

                def grown(at_least: int = base + 40) -> bool:
                    return load.count() >= at_least

                if not _wait(grown, 60):
                    raise RuntimeError(f"round {n}: no appends acknowledged")
                log_path = work / f"w{n + 1}.server.log"
                followed = wait_standby and _wait(partial(_following, log_path, standby), 120)
                active.proc.kill()
                active.proc.wait(timeout=30)
                killed, killed_wall = time.monotonic(), time.time()
                active.stop()
                active = standby.result(timeout=120)
                served = time.time()
                takeovers.append(time.monotonic() - killed)
                phase = _phases(log_path, killed_wall, served)
                for name, value in phase.items():
                    phases.setdefault(name, []).append(value)
                target[0] = active.address
                standby = pool.submit(writer, n + 2, True)
                print(f"round {n + 1}: takeover {takeovers[-1]:.2f} s "
                      f"({' '.join(f'{k} {v:.2f}' for k, v in phase.items())}; standby "
                      f"{'following' if followed else 'maybe starting'}), acked {load.count()}",
                      file=sys.stderr)  # fmt: skip
            base = load.count()
            _wait(lambda: load.count() >= base + 40, 60)
        finally:
            load.stop()
        lost, second = _check(active, bucket, verifier, load)
        active.stop()
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_pending(standby)
        return {
            "rounds": rounds,
            "lease_s": lease_s,
            "acknowledged": len(load.acked),
            "lost": lost,
            "served_checkpoints": len(load.notes),
            "second_roots": second,
            "append_errors_during_failover": load.errors,
            "takeover_p50_s": round(statistics.median(takeovers), 3),
            "takeover_p99_s": round(_percentile(takeovers, 0.99), 3),
            "takeover_max_s": round(max(takeovers), 3),
            "phases_p50_p99_s": {
                name: [round(statistics.median(v), 3), round(_percentile(v, 0.99), 3)]
                for name, v in phases.items()
            },
        }


# The standby's log lines that end each phase of a takeover (``ledger.app.primary_mode``).
_PHASE_LINES = (
    ("detect", "lapsed"),  # kill -> the lease seen lapsed (lease_s + the poll)
    ("lock", "took the lock"),  # -> the lock swapped to the standby
    ("catch_up", "caught up with"),  # -> the data dir at the bucket's checkpoint
)


def _following(log_path: Path, standby: Future[BenchServer]) -> bool:
    """The standby caught up with the bucket once and watches the lock (its first poll), or
    it is already serving."""
    if standby.done():
        return True
    try:
        return "standby: following" in log_path.read_text()
    except OSError:
        return False


def _stamp(line: str) -> float | None:
    """The wall time of a text log line (``2026-12-01 18:20:01,123 LEVEL ...``)."""
    try:
        day, clock = line.split(" ", 2)[:2]
        whole, ms = clock.split(",")
        at = time.strptime(f"{day} {whole}", "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    return time.mktime(at) + int(ms) / 1000


def _phases(log_path: Path, killed: float, served: float) -> dict[str, float]:
    """Seconds spent in each phase of one takeover (``_PHASE_LINES``; ``open``: from the
    catch-up to the serving line, i.e. the rest of the server's start)."""
    lines = log_path.read_text().splitlines()
    out: dict[str, float] = {}
    last = killed
    for name, marker in _PHASE_LINES:
        at = next((_stamp(x) for x in lines if marker in x), None)
        if at is not None:
            out[name] = max(0.0, at - last)
            last = at
    out["open"] = max(0.0, served - last)
    return out


def _stop_pending(standby: Future[BenchServer]) -> None:
    try:
        server = standby.result(timeout=0.1)
    except Exception:  # still waiting for a lease that will never lapse: the pool is shut down
        return
    server.stop()


def _ensure(bucket: Bucket) -> bool:
    try:
        bucket.ensure_bucket()
        bucket.put(".ledger/probe", b"probe", {})
    except LedgerError:
        return False
    return True


def _verifier(server: BenchServer) -> Verifier:
    from ledger.core.note import Ed25519Verifier

    return Ed25519Verifier.from_key_string(server.verifier_key)


def _public_size(bucket: Bucket) -> int:
    stored = bucket.get("checkpoint")
    lines = b"" if stored is None else stored.body.split(b"\n", 2)[1]
    return int(lines) if lines.isdigit() else 0


def _check(active: BenchServer, bucket: Bucket, verifier: Verifier, load: _Load) -> tuple[int, int]:
    lost = 0
    with RemoteLog(active.address, timeout=30) as client:
        for digest, index in load.acked.items():
            try:
                if client.entry(digest).index != index:
                    lost += 1
            except LedgerError:
                lost += 1
    second = 0
    # The public copy follows the swap (acknowledged at the swap): let it reach what was served.
    newest = max(load.notes, default=0)
    _wait(lambda: _public_size(bucket) >= newest, 30)
    for size, note in load.notes.items():
        served = open_checkpoint(note, [verifier], origin=ORIGIN).checkpoint
        stored = bucket.get(f"checkpoints/{size}")
        if stored is None:
            second += 1
            continue
        theirs = open_checkpoint(stored.body.decode(), [verifier], origin=ORIGIN).checkpoint
        second += theirs.root_hash != served.root_hash
    return lost, second


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--lease-s", type=float, default=2.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--no-wait-standby",
        action="store_true",
        help="kill the active without waiting for the new standby to follow the bucket",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="takeover-") as tmp:
        result = run(args.rounds, args.lease_s, Path(tmp), wait_standby=not args.no_wait_standby)
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 1 if result["lost"] or result["second_roots"] else 0


if __name__ == "__main__":
    sys.exit(main())
