"""B12: batch verification of a 2,000-receipt run, in library and with ``ledger-verify run``.

Builds a real run offline: ``DecisionRecord``s chained by parent digests and closed by a
``run_closed`` record, logged by the real ``Log`` on the in-memory store (v1 leaves, RFC 6962
tree, Ed25519 checkpoints published every ``--per-checkpoint`` records), each checkpoint
anchored by the embedded RFC 3161 TSA (``TsaAuthority``: real ECDSA tokens with certificates).
Each receipt sits on the earliest anchored checkpoint covering its record, as
``fetch_receipt`` builds them, so receipts share checkpoints and tokens as a real run's do.

Measured, each a median over ``--runs`` repetitions (min-max in brackets), per receipt:

* ``library``: ``verify_run`` on parsed items, with the TSA root (anchors checked) and without;
* ``cli``: ``ledger-verify run FILE --key K [--tsa-root R]`` as a subprocess, including
  interpreter start, imports and parsing the JSON-lines file.

Both wall time and CPU time (``getrusage``, this process plus finished children) are given:
on a shared, loaded machine the CPU time is the steadier figure.

    python tools/bench_receipts.py [--records 2000] [--per-checkpoint 100] [--runs 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.jcs import canonical_bytes
from ledger.core.types import Anchor
from ledger.log.facade import Log
from ledger.log.sequencer import AppendItem
from ledger.records.decision import DecisionRecord, ToolCall, new_record_id, record_digest
from ledger.records.runs import run_closed_record, run_steps
from ledger.store.contract import MemoryStore
from ledger.timestamp.rfc3161 import (
    build_request,
    imprint_for_checkpoint_body,
    token_certificates,
    token_from_response,
)
from ledger.tsa.authority import TsaAuthority
from ledger_client.receipts.receipt import Receipt, ReceiptAnchor
from ledger_client.receipts.run_verify import RunItem, verify_run

__all__ = ["build_run", "main"]

ORIGIN = "bench.ledger.example/b12"
TIME = "2026-11-30T08:00:00Z"


def _record(step: int, parents: tuple[str, ...]) -> DecisionRecord:
    return DecisionRecord(
        record_id=new_record_id(), run_id="bench-run", step=step, time=TIME,
        agent="bench-agent", parent_digests=parents,
        payload=ToolCall(tool=f"tool-{step % 7}", inputs_used=parents),
    )  # fmt: skip


def _records(n: int) -> list[DecisionRecord]:
    body: list[DecisionRecord] = []
    for step in range(n - 1):
        body.append(_record(step, (record_digest(body[-1]).hex(),) if body else ()))
    return [*body, run_closed_record("bench-run", run_steps(body), agent="bench-agent", time=TIME)]


def _anchor(log: Log, authority: TsaAuthority, size: int) -> ReceiptAnchor:
    body = log.checkpoint(size).note.split("\n\n")[0].encode() + b"\n"
    request = build_request(imprint_for_checkpoint_body(body))
    token = token_from_response(authority.respond(request.der))
    log.put_anchor(Anchor(size=size, tsa="embedded-dev", token=token, gen_time_ms=0))
    certs = tuple(token_certificates(token))  # what fetch_receipt puts in a receipt
    return ReceiptAnchor(tsa="embedded-dev", token=token, certificates=certs)


def build_run(n: int, per_checkpoint: int) -> tuple[list[RunItem], Ed25519Signer, TsaAuthority]:
    """``n`` records with receipts (as ``fetch_receipt`` builds them), the log key, the TSA."""
    signer = Ed25519Signer(name=ORIGIN, seed=hashlib.sha256(b"b12").digest())
    authority = TsaAuthority.generate("B12 TSA")
    log = Log(store=MemoryStore(), signer=signer, origin=ORIGIN)
    records = _records(n)
    anchors: dict[int, ReceiptAnchor] = {}
    for start in range(0, n, per_checkpoint):
        chunk = records[start : start + per_checkpoint]
        log.append([AppendItem(record_digest(r)) for r in chunk])
        size = log.publish().size
        anchors[size] = _anchor(log, authority, size)
    items = []
    entries = [e for start in range(0, n, 500) for e in log.entries(start, min(500, n - start))]
    for index, (record, entry) in enumerate(zip(records, entries, strict=True)):
        size = min(s for s in anchors if s > index)
        proof = log.inclusion_proof(index, size)
        receipt = Receipt(
            record_digest=entry.record_digest, leaf=entry.leaf, index=index, tree_size=size,
            inclusion_proof=proof.hashes, checkpoint=log.checkpoint(size).note,
            anchors=(anchors[size],),
        )  # fmt: skip
        items.append(RunItem(source=f"run.jsonl:{index + 1}", record=record, receipt=receipt))
    return items, signer, authority


def _median(samples: Sequence[float]) -> str:
    return f"{statistics.median(samples):.3f} ms ({min(samples):.3f}-{max(samples):.3f})"


def _cpu() -> float:
    """CPU seconds of this process and its finished children (robust on a loaded machine)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(fn: Callable[[], object], runs: int, per: int) -> dict[str, list[float]]:
    """Wall and CPU milliseconds per item, one sample per run."""
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), _cpu()
        fn()
        wall.append((time.perf_counter() - start) * 1000 / per)
        cpu.append((_cpu() - start_cpu) * 1000 / per)
    return {"wall": wall, "cpu": cpu}


def _cli(path: Path, key: str, root: Path | None) -> None:
    args = [sys.executable, "-c", "from ledger_client.cli.main import main; main()", "run",
            str(path), "--key", key, *(["--tsa-root", str(root)] if root else [])]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"ledger-verify run failed: {done.stderr}{done.stdout}")


def measure(n: int, per_checkpoint: int, runs: int) -> dict[str, Any]:
    items, signer, authority = build_run(n, per_checkpoint)
    key, roots = [signer.verifier()], [authority.root_cert]
    verdict = verify_run(items, key, tsa_roots=roots)
    assert verdict.ok and verdict.receipts_valid == n, verdict.problems[:3]
    results: dict[str, Any] = {"records": n, "checkpoints": -(-n // per_checkpoint)}
    results["library, anchors"] = _timed(lambda: verify_run(items, key, tsa_roots=roots), runs, n)
    results["library, no anchors"] = _timed(lambda: verify_run(items, key), runs, n)
    with tempfile.TemporaryDirectory() as tmp:
        path, root = Path(tmp) / "run.jsonl", Path(tmp) / "root.pem"
        lines = [
            canonical_bytes({"record": i.record.to_json_obj(), "receipt": i.receipt.to_json_obj()})
            for i in items
        ]
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        root.write_bytes(authority.root_pem())
        text_key = signer.verifier().key_string()
        results["cli, anchors"] = _timed(lambda: _cli(path, text_key, root), runs, n)
        results["cli, no anchors"] = _timed(lambda: _cli(path, text_key, None), runs, n)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--per-checkpoint", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the samples as JSON")
    args = parser.parse_args(argv)
    results = measure(args.records, args.per_checkpoint, args.runs)
    if args.json:
        print(json.dumps(results))
        return
    print(f"B12: {results['records']} receipts over {results['checkpoints']} anchored checkpoints")
    for name, samples in results.items():
        if isinstance(samples, dict):
            wall, cpu = _median(samples["wall"]), _median(samples["cpu"])
            print(f"  {name:<20} wall {wall}, CPU {cpu} per receipt")


if __name__ == "__main__":
    main()
