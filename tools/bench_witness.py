"""Witness benchmarks: cosigning latency under B2 load, and a witness's add-checkpoint rate.

    python tools/bench_witness.py --runs 3 --duration 15 --out bench-results

For each run, on fresh data dirs:

* **W1, cosigning latency**: a real ``ledger serve`` with two local ``ledger witness serve``
  processes (quorum 2 of 2) under B2 load (2 client processes x 4 threads, 1,000 digests per
  call). The log measures, for every published checkpoint, the time until a checkpoint of at
  least its size carries 2 valid cosignatures (``witnesses.json``, ``quorum_latency_ms``);
  p50/p99 over the run.
* **B2 / B4 with and without witnesses**: the same load against a log without witnesses, so the
  cost of witnessing on appends (records/s) and on ack -> covering checkpoint (a probe that
  appends one digest and polls until a checkpoint covers it, p99) shows as a difference.
* **W2, add-checkpoint rate**: one witness process; a chain of checkpoints from an in-memory
  log, each 1-16 entries larger, submitted in order with its consistency proof (every request
  changes the state: one fsynced write each), then the same checkpoint re-submitted by 8
  concurrent clients (no state change).

Figures are medians over the runs (min-max in brackets); the JSON goes to ``<out>/witness.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp

from ledger.core.checkpoint import CosignatureSigner, Ed25519Signer
from ledger.fileio.keys import write_signer
from ledger.log.facade import Log
from ledger.log.sequencer import AppendItem
from ledger.store.contract import MemoryStore
from ledger.witness.core import build_request
from ledger_client.remote.log import RemoteLog

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the ``tools`` package importable
    sys.path.insert(0, str(ROOT))

from tools.bench_server import ORIGIN, BenchServer, make_key  # noqa: E402

LOAD_PROCESSES, LOAD_THREADS, BATCH = 2, 4, 1_000


# --- processes -----------------------------------------------------------------------------------


class WitnessProc:
    """``ledger witness serve`` on port 0 with its own key and state folder."""

    def __init__(self, folder: Path, name: str, log_vkey: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        signer = CosignatureSigner.generate(name)
        key = folder / "witness.key"
        write_signer(key, signer)
        self.vkey = signer.verifier().key_string()
        cmd = [
            sys.executable, "-m", "ledger", "witness", "serve", "--key", str(key),
            "--state-dir", str(folder / "state"), "--listen", "127.0.0.1:0", "--log", log_vkey,
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url: str = json.loads(self.proc.stdout.readline())["url"]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _config(path: Path, witnesses: list[WitnessProc]) -> Path:
    entries = "".join(
        f'[[witness]]\nname = "w{i}"\nurl = "{w.url}"\nkey = "{w.vkey}"\n\n'
        for i, w in enumerate(witnesses)
    )
    path.write_text(f"[witnessing]\nquorum = {len(witnesses)}\n\n{entries}")
    return path


# --- load ----------------------------------------------------------------------------------------


def _load_process(address: str, seconds: float, seed: int) -> int:
    """B2 load from one process: LOAD_THREADS threads, BATCH digests per call; records sent."""
    counts = [0] * LOAD_THREADS
    end = time.monotonic() + seconds

    def run(k: int) -> None:
        rng = random.Random(seed * 100 + k)
        with RemoteLog(address, timeout=60) as remote:
            while time.monotonic() < end:
                batch = [rng.randbytes(32) for _ in range(BATCH)]
                remote.append(batch)
                counts[k] += BATCH

    threads = [threading.Thread(target=run, args=(k,)) for k in range(LOAD_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts)


def _probe(address: str, seconds: float, out: list[float]) -> None:
    """B4 probe: append one digest, poll until a checkpoint covers it (ms)."""
    end = time.monotonic() + seconds
    with RemoteLog(address, timeout=60) as remote:
        while time.monotonic() < end:
            digest = hashlib.sha256(os.urandom(16)).digest()
            index = remote.append([digest]).results[0].index
            t1 = time.monotonic()
            while remote.checkpoint().size <= index:
                time.sleep(0.002)
            out.append((time.monotonic() - t1) * 1000)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else float("nan")


def loaded_log(
    work: Path, key: Path, seconds: float, witnesses: list[WitnessProc]
) -> dict[str, Any]:
    """B2 load (+ B4 probe) on a fresh log, with ``witnesses`` (quorum all of them) or none."""
    extra = ["--config", str(_config(work / "log.toml", witnesses))] if witnesses else []
    server = BenchServer(work / "data", key, extra=extra)
    probe: list[float] = []
    try:
        prober = threading.Thread(target=_probe, args=(server.address, seconds, probe))
        with ProcessPoolExecutor(LOAD_PROCESSES) as pool:
            futures = [
                pool.submit(_load_process, server.address, seconds, seed)
                for seed in range(LOAD_PROCESSES)
            ]
            started = time.monotonic()
            prober.start()
            records = sum(f.result() for f in futures)
            elapsed = time.monotonic() - started
        prober.join()
    finally:
        server.stop()
    figures: dict[str, Any] = {
        "b2_records_per_s": records / elapsed,
        "b4_p50_ms": _pct(probe, 50),
        "b4_p99_ms": _pct(probe, 99),
    }
    if witnesses:
        status = json.loads((work / "data" / "witnesses.json").read_text())
        figures |= {f"cosign_{k}": v for k, v in status["quorum_latency_ms"].items()}
        figures["cosigned_sizes"] = [w["cosigned_size"] for w in status["witnesses"]]
    return figures


# --- the witness alone --------------------------------------------------------------------------


def _chain(signer: Ed25519Signer, length: int) -> list[bytes]:
    """Add-checkpoint bodies of a growing in-memory log, each extending the previous one."""
    log = Log(store=MemoryStore(), signer=signer, origin=ORIGIN)
    rng = random.Random(7)
    bodies, old = [], 0
    for _ in range(length):
        log.append([AppendItem(rng.randbytes(32)) for _ in range(rng.randint(1, 16))])
        cp = log.publish()
        proof = log.consistency_proof(old, cp.size).hashes if old else ()
        bodies.append(build_request(old, proof, cp.note))
        old = cp.size
    return bodies


async def _witness_rates(url: str, bodies: list[bytes], concurrent: int) -> dict[str, float]:
    target = url + "/add-checkpoint"
    async with aiohttp.ClientSession() as session:
        started = time.monotonic()
        for body in bodies:
            async with session.post(target, data=body) as response:
                if response.status != 200:
                    raise RuntimeError(f"chain step refused: {response.status}")
        chain_rate = len(bodies) / (time.monotonic() - started)
        last = bodies[-1]
        note = last.split(b"\n\n", 1)[1]
        size = int(note.split(b"\n")[1])
        again = build_request(size, [], note.decode())
        per_client = 300

        async def client() -> None:
            for _ in range(per_client):
                async with session.post(target, data=again) as response:
                    if response.status != 200:
                        raise RuntimeError(f"re-submission refused: {response.status}")

        started = time.monotonic()
        await asyncio.gather(*(client() for _ in range(concurrent)))
        same_rate = concurrent * per_client / (time.monotonic() - started)
    return {"chain_requests_per_s": chain_rate, "same_checkpoint_requests_per_s": same_rate}


def witness_alone(work: Path, signer: Ed25519Signer) -> dict[str, float]:
    bodies = _chain(signer, 600)
    witness = WitnessProc(work / "solo", "bench.witness/solo", signer.verifier().key_string())
    try:
        return asyncio.run(_witness_rates(witness.url, bodies, 8))
    finally:
        witness.stop()


# --- driver ---------------------------------------------------------------------------------------


def one_run(run: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-witness-") as tmp:
        work = Path(tmp)
        key = work / "log.key"
        make_key(key)
        signer = Ed25519Signer.from_key_string(key.read_text().strip())
        vkey = signer.verifier().key_string()
        print(f"run {run}: B2 + B4 without witnesses", file=sys.stderr, flush=True)
        (work / "plain").mkdir()
        plain = loaded_log(work / "plain", key, seconds, [])
        print(f"run {run}: B2 + B4 with 2 witnesses (quorum 2)", file=sys.stderr, flush=True)
        (work / "witnessed").mkdir()
        witnesses = [WitnessProc(work / f"w{i}", f"bench.witness/w{i}", vkey) for i in range(2)]
        try:
            witnessed = loaded_log(work / "witnessed", key, seconds, witnesses)
        finally:
            for w in witnesses:
                w.stop()
        print(f"run {run}: witness add-checkpoint rate", file=sys.stderr, flush=True)
        solo = witness_alone(work, signer)
    return {"plain": plain, "witnessed": witnessed, "witness": solo}


def _summary(runs: list[dict[str, Any]]) -> dict[str, str]:
    def fig(part: str, key: str) -> str:
        values = [r[part][key] for r in runs]
        return f"{statistics.median(values):,.1f} ({min(values):,.1f}-{max(values):,.1f})"

    return {
        "W1 cosign p50 ms": fig("witnessed", "cosign_p50"),
        "W1 cosign p99 ms": fig("witnessed", "cosign_p99"),
        "W1 cosigned checkpoints": fig("witnessed", "cosign_count"),
        "B2 records/s without witnesses": fig("plain", "b2_records_per_s"),
        "B2 records/s with 2 witnesses": fig("witnessed", "b2_records_per_s"),
        "B4 p99 ms without witnesses": fig("plain", "b4_p99_ms"),
        "B4 p99 ms with 2 witnesses": fig("witnessed", "b4_p99_ms"),
        "W2 chain requests/s (state change, fsync)": fig("witness", "chain_requests_per_s"),
        "W2 same-checkpoint requests/s (8 clients)": fig(
            "witness", "same_checkpoint_requests_per_s"
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=15.0, help="seconds of load per log")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args()
    runs = [one_run(i + 1, args.duration) for i in range(args.runs)]
    summary = _summary(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "witness.json").write_text(json.dumps({"runs": runs, "summary": summary}, indent=2))
    for name, value in summary.items():
        print(f"{name:45} {value}")


if __name__ == "__main__":
    main()
