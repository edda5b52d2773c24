"""Benchmark: ``ledger-verify index`` over 10,000 runs of 20 records (200,000 receipts).

    python tools/bench_audit.py --runs 10000 --records 20 --repeats 3 --data bench-audit

Generates (once; reused while the parameters match) a folder of run files as the SDK writes
them (``{"record", "receipt"}`` JSON lines, records with salted commitments and data-flow
parents), with real receipts: an RFC 6962 tree over every record, a real Ed25519-signed
checkpoint per ``--runs-per-checkpoint`` runs (each receipt proves inclusion in the checkpoint
that closed its batch) and a real RFC 3161 token per checkpoint from a generated TSA. Then it
times ``ledger-verify index DIR --db FILE --key VKEY --tsa-root PEM`` (a subprocess, a fresh
database each time), and once more on the unchanged folder (the incremental pass), and prints
the median and range of ``--repeats`` runs with the index's counts (distinct checkpoints and
tokens verified, which show the verification shared across runs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ledger.core import merkle
from ledger.core.checkpoint import Checkpoint, Ed25519Signer, sign_checkpoint
from ledger.core.jcs import canonical_bytes
from ledger.core.types import encode_leaf
from ledger.records.commitments import commit
from ledger.records.decision import (
    ConstraintCheck,
    DecisionRecord,
    MemoryWrite,
    ParameterConstruction,
    ToolCall,
    new_record_id,
    record_digest,
)
from ledger.records.runs import run_closed_record, run_steps
from ledger.timestamp.rfc3161 import build_request, imprint_for_checkpoint_body, token_from_response
from ledger.tsa.authority import TsaAuthority
from ledger_client.receipts.receipt import Receipt, ReceiptAnchor

ORIGIN = "bench.example/audit"
T0 = 1_780_000_000_000


def _body(run: str, run_no: int, count: int) -> list[DecisionRecord]:
    """``count`` records: tool calls on committed parameters, memory writes, checks."""
    out: list[DecisionRecord] = []
    for step in range(count):
        kind = step % 4
        parents = (record_digest(out[-1]).hex(),) if out and kind != 2 else ()
        committed, _ = commit(f"value {run_no}/{step}", field_path="parameters.q")
        payload: Any = (
            ToolCall(tool=f"tool-{step % 5}"),
            ParameterConstruction(tool="search"),
            MemoryWrite(key="note", value=committed, source="web",
                        trust_label="untrusted" if run_no % 10 == 0 else "trusted"),
            ConstraintCheck(constraint_id="policy", passed=step % 7 != 0),
        )[kind]  # fmt: skip
        out.append(
            DecisionRecord(
                record_id=new_record_id(now_ms=T0 + run_no * 100 + step),
                run_id=run,
                step=step,
                time="2026-06-01T12:00:00.000Z",
                agent=f"agent-{run_no % 7}",
                parent_digests=parents,
                parameters={"q": committed} if kind != 2 else {},
                payload=payload,
            )
        )
    return out


def _levels(hashes: list[bytes]) -> list[list[bytes]]:
    """Every full subtree hash, level by level (level 0: the leaf hashes)."""
    levels = [hashes]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append(
            [merkle.node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
        )
    return levels


def generate(folder: Path, runs: int, per_run: int, per_checkpoint: int) -> dict[str, Any]:
    """Write the run files, ``root.pem`` and ``manifest.json``; reuse them when they match."""
    manifest = folder / "manifest.json"
    wanted = {"runs": runs, "records": per_run, "runs_per_checkpoint": per_checkpoint}
    if manifest.is_file() and json.loads(manifest.read_text())["params"] == wanted:
        return dict(json.loads(manifest.read_text()))
    started = time.perf_counter()
    signer = Ed25519Signer(name=ORIGIN, seed=hashlib.sha256(b"bench-audit").digest())
    authority = TsaAuthority.generate("Bench Audit TSA")
    all_runs = []
    for n in range(runs):
        run = new_record_id(now_ms=T0 + n, rand=n.to_bytes(10, "big"))
        body = _body(run, n, per_run - 1)
        closed = run_closed_record(run, run_steps(body), agent=body[0].agent, time=body[0].time)
        all_runs.append([*body, closed])
    records = [r for rs in all_runs for r in rs]
    leaves = [encode_leaf(record_digest(r), T0 + i) for i, r in enumerate(records)]
    levels = _levels([merkle.leaf_hash(leaf) for leaf in leaves])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "runs").mkdir(exist_ok=True)
    at = 0
    for batch in range(0, runs, per_checkpoint):
        group = all_runs[batch : batch + per_checkpoint]
        size = at + sum(len(rs) for rs in group)
        root = merkle.fold_proof_nodes(
            [merkle.subtree_node(0, size)], lambda ids: [levels[i.level][i.index] for i in ids]
        )[0]
        checkpoint = Checkpoint(origin=ORIGIN, size=size, root_hash=root)
        note = sign_checkpoint(checkpoint, signer)
        request = build_request(imprint_for_checkpoint_body(checkpoint.body_bytes()))
        token = token_from_response(authority.respond(request.der))
        anchor = ReceiptAnchor(tsa="bench-tsa", token=token, certificates=())
        for offset, rs in enumerate(group):
            lines = []
            for record in rs:
                nodes = merkle.inclusion_proof_nodes(at, size)
                proof = merkle.fold_proof_nodes(
                    nodes, lambda ids: [levels[i.level][i.index] for i in ids]
                )
                receipt = Receipt(
                    record_digest=record_digest(record), leaf=leaves[at], index=at, tree_size=size,
                    inclusion_proof=tuple(proof), checkpoint=note, anchors=(anchor,), record=record,
                )  # fmt: skip
                lines.append(
                    canonical_bytes(
                        {"record": record.to_json_obj(), "receipt": receipt.to_json_obj()}
                    )
                )
                at += 1
            (folder / "runs" / f"{batch + offset:06d}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (folder / "root.pem").write_bytes(authority.root_pem())
    info: dict[str, Any] = {"params": wanted, "key": signer.verifier().key_string(),
            "generated_s": round(time.perf_counter() - started, 1)}  # fmt: skip
    manifest.write_text(json.dumps(info))
    return dict(info)


def index_once(folder: Path, key: str, db: Path) -> tuple[float, dict[str, Any]]:
    """Run ``ledger-verify index`` as a subprocess: (seconds, its JSON answer)."""
    command = [
        sys.executable, "-c", "from ledger_client.cli.main import main; main()", "index",
        str(folder / "runs"), "--db", str(db), "--key", key, "--tsa-root",
        str(folder / "root.pem"), "--json",
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"index failed: {done.stdout}{done.stderr}")
    answer = dict(json.loads(done.stdout))
    answer["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--runs-per-checkpoint", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=Path("bench-audit"))
    args = parser.parse_args()
    info = generate(args.data, args.runs, args.records, args.runs_per_checkpoint)
    total = args.runs * args.records
    full, again, cpu = [], [], []
    answer: dict[str, Any] = {}
    for _ in range(args.repeats):
        db = args.data / "audit.sqlite"
        for stale in args.data.glob("audit.sqlite*"):
            stale.unlink()
        took, answer = index_once(args.data, info["key"], db)
        full.append(took)
        cpu.append(answer["cpu_s"])
        again.append(index_once(args.data, info["key"], db)[0])
    med = statistics.median(full)
    print(f"index {args.runs} runs x {args.records} records = {total} receipts")
    print(f"  full:        median {med:.1f} s ({min(full):.1f}-{max(full):.1f}), "
          f"{med / total * 1e6:.0f} us per receipt, {total / med:,.0f} receipts/s")  # fmt: skip
    print(f"  CPU (all processes): median {statistics.median(cpu):.1f} s, "
          f"{statistics.median(cpu) / total * 1e6:.0f} us per receipt")  # fmt: skip
    print(f"  incremental: median {statistics.median(again):.2f} s (nothing changed)")
    print(f"  checkpoints verified: {answer['checkpoints']}, tokens verified: {answer['tokens']}, "
          f"runs not verified: {answer['failed_runs']}")  # fmt: skip


if __name__ == "__main__":
    main()
