"""Issue 26's figures: the cost of signing a record, and the gap scan over 10,000 runs.

* Signing: ``ledger.records.agent.sign_record`` (RFC 8785 bytes without ``signature``, the
  context string, Ed25519) on typical records, beside what the SDK does per record anyway
  (canonical JSON and SHA-256 of the signed record, ``LedgerClient._item``), and the verify
  cost an auditor pays per record (``verify_record_signature``).
* Gap scan: a log of ``--runs`` runs of one agent chain (``--records`` entries per run plus the
  open beacon, one genesis beacon) with one run withheld; the time to read the presented runs'
  files (``ledger-verify chain``'s reader, ``"receipt": null`` lines) and the time of
  ``scan_chains`` over the log's digests (pure; reading the tiles is B11's figure).

    .venv/bin/python tools/bench_agent.py --records 2000 --runs 10000 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from ledger.core.note import Ed25519Signer
from ledger.records.agent import (
    RecordSigner,
    agent_chain_key,
    chain_key,
    genesis_beacon,
    open_beacon,
    open_tag,
    sign_record,
    verify_record_signature,
)
from ledger.records.decision import (
    ChainLink,
    DecisionRecord,
    ToolCall,
    new_record_id,
    record_digest,
)
from ledger_client.audit.chain import scan_chains
from ledger_client.cli.agent import presented_runs


def typical(step: int, run: int = 0) -> DecisionRecord:
    return DecisionRecord(
        record_id=new_record_id(),
        run_id=f"run-{run}",
        step=step,
        time="2026-12-01T12:00:00.250Z",
        agent="bench-agent",
        model="model-x",
        evidence={"prompt": "ab" * 32},
        parameters={"query": "flights to Lisbon", "limit": 10},
        parent_digests=("cd" * 32,),
        payload=ToolCall(tool="search", inputs_used=("ef" * 32,)),
    )


def per_record(label: str, count: int, work: list[DecisionRecord], fn: object) -> float:
    call = fn  # a callable taking one record
    start = time.perf_counter()
    for record in work:
        call(record)  # type: ignore[operator]
    seconds = time.perf_counter() - start
    micros = seconds / count * 1e6
    print(f"{label}: {micros:.1f} µs per record ({count / seconds:,.0f}/s)")
    return micros


def signing(count: int) -> None:
    signer = Ed25519Signer.generate("bench-agent")
    keys = (signer.verifier(),)
    records = [typical(1 + i % 50) for i in range(count)]
    signed = [sign_record(r, signer) for r in records[:10]]  # warm up
    base = per_record("canonical JSON + SHA-256 (no signature)", count, records, record_digest)
    ready = RecordSigner(signer)  # as the SDK keeps it
    cost = per_record("sign_record", count, records, ready.sign)
    signed = [sign_record(r, signer) for r in records]
    per_record("sign_record + digest of the signed record", count, records,
               lambda r: record_digest(ready.sign(r)))  # fmt: skip
    per_record("verify_record_signature", count, signed,
               lambda r: verify_record_signature(r, keys))  # fmt: skip
    message = b"x" * 600
    start = time.perf_counter()
    for _ in range(count):
        signer.sign(message)
    raw = (time.perf_counter() - start) / count * 1e6
    print(f"raw Ed25519 sign of 600 bytes: {raw:.1f} µs ({1e6 / raw:,.0f}/s)")
    print(f"signing adds {cost:.1f} µs per record to {base:.1f} µs of canonical JSON + SHA-256")


def build_log(runs: int, records: int, folder: Path) -> tuple[list[tuple[int, bytes]], bytes]:
    signer = Ed25519Signer.generate("bench-agent")
    ka = agent_chain_key(signer)
    chain_id = os.urandom(16).hex()
    kc = chain_key(ka, chain_id)
    leaves = [genesis_beacon(ka, chain_id)]
    for seq in range(runs):
        tag = open_tag(kc, seq)
        link = ChainLink(id=chain_id, seq=seq, tag=tag.hex(), genesis="new" if seq == 0 else None)
        first = DecisionRecord(
            record_id=new_record_id(), run_id=f"run-{seq}", step=0,
            time="2026-12-01T12:00:00.250Z", agent="bench-agent",
            payload=ToolCall(tool="search"), chain=link,
        )  # fmt: skip
        leaves.append(open_beacon(tag, first))
        leaves.append(record_digest(first))
        leaves.extend(os.urandom(32) for _ in range(records - 1))
        if seq != runs // 2:  # one run withheld
            line = b'{"record":' + first.to_json().encode() + b',"receipt":null}\n'
            (folder / f"run-{seq:05}.jsonl").write_bytes(line)
    return list(enumerate(leaves)), ka


def gap_scan(runs: int, records: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        leaves, ka = build_log(runs, records, folder)
        files = sorted(str(p) for p in folder.iterdir())
        reads, scans = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            presented = presented_runs(files)
            reads.append(time.perf_counter() - start)
            start = time.perf_counter()
            report = scan_chains(leaves, ka, [r for r, _ in presented])
            scans.append(time.perf_counter() - start)
            assert [g["seq"] for g in report.gaps] == [runs // 2], report.gaps
        print(
            f"gap scan: {runs:,} runs, {len(leaves):,} log entries, {len(files):,} files "
            f"presented: read files {statistics.median(reads):.2f} s "
            f"({min(reads):.2f}-{max(reads):.2f}), scan {statistics.median(scans):.2f} s "
            f"({min(scans):.2f}-{max(scans):.2f}), found the 1 withheld run"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=2000, help="records signed")
    parser.add_argument("--runs", type=int, default=10_000, help="runs in the chain")
    parser.add_argument("--entries-per-run", type=int, default=5, help="records per run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    signing(args.records)
    gap_scan(args.runs, args.entries_per_run, args.repeats)


if __name__ == "__main__":
    main()
