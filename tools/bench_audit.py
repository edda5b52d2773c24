"""Benchmark: ``ledger-verify index`` over 10,000 runs of 20 records (200,000 receipts), then
``lineage --db`` over them and ``report`` over 1,000 of them.

    python tools/bench_audit.py --runs 10000 --records 20 --repeats 3 --data bench-audit

Generates (once; reused while the parameters match) a folder of run files as the SDK writes
them (``{"record", "receipt"}`` JSON lines, records with salted commitments and data-flow
parents), with real receipts: an RFC 6962 tree over every record, a real Ed25519-signed
checkpoint per ``--runs-per-checkpoint`` runs (each receipt proves inclusion in the checkpoint
that closed its batch) and a real RFC 3161 token per checkpoint from a generated TSA. Then it
times ``ledger-verify index DIR --db FILE --key VKEY --tsa-root PEM`` (a subprocess, a fresh
database each time), and once more on the unchanged folder (the incremental pass), and prints
the median and range of ``--repeats`` runs with the index's counts (distinct checkpoints and
tokens verified, which show the verification shared across runs). Records carry what the index
now holds (model, OpenTelemetry ids, token usage, cost, tags, evidence).

Then ``ledger-verify lineage DIR --db FILE`` (stored verdicts; a subprocess, so the figure
includes starting Python) for the descendants of a run's first record, the ancestors of a run's
last record, and every tainted write (``--tainted``); and ``ledger-verify report`` over the
first ``--report-runs`` run files (paged: the overview and one page per run), with the size of
the largest page. The subprocesses keep their compiled bytecode under ``--data`` (as an
installed ``ledger-verify`` has it), so no figure includes compiling the sources.

``--store-parts N`` times only the main process's part of ``index`` (storing the rows of the
first N runs and the bulk build's SQL indexes; the runs are verified once, untimed, and their
rows stored again ``--repeats`` times; nothing is written under ``--data`` then). ``--db FILE``
keeps the index elsewhere than ``DATA/audit.sqlite`` (a folder of runs shared with others);
``--skip-index`` reuses it, and stops at once if it is missing or of another index version
(``ledger-verify index`` makes it again).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ledger.core import merkle
from ledger.core.checkpoint import Checkpoint, Ed25519Signer, sign_checkpoint
from ledger.core.errors import FormatError
from ledger.core.jcs import canonical_bytes
from ledger.core.types import encode_leaf
from ledger.records.commitments import commit
from ledger.records.decision import (
    ConstraintCheck,
    Cost,
    DecisionRecord,
    MemoryWrite,
    OtelContext,
    ParameterConstruction,
    ToolCall,
    Usage,
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
        trace = hashlib.sha256(run.encode()).hexdigest()
        out.append(
            DecisionRecord(
                record_id=new_record_id(now_ms=T0 + run_no * 100 + step),
                run_id=run,
                step=step,
                time="2026-05-28T20:26:39.000Z",  # just before T0: the log's leaf times
                agent=f"agent-{run_no % 7}",
                parent_digests=parents,
                parameters={"q": committed, "tags": ["bench", f"t{step % 3}"]} if kind != 2 else {},
                payload=payload,
                model=f"model-{run_no % 3}",
                otel=OtelContext(trace_id=trace[:32], span_id=trace[32:40] + f"{step:08x}"),
                evidence={"prompt": hashlib.sha256(f"{run_no}/{step}".encode()).hexdigest()},
                usage=Usage(input_tokens=100 + step, output_tokens=20),
                cost=Cost(amount=f"0.00{step % 9 + 1}", currency="USD"),
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
    wanted = {"runs": runs, "records": per_run, "runs_per_checkpoint": per_checkpoint,
              "content": 3}  # fmt: skip
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


def _env() -> dict[str, str]:
    """The subprocesses' environment: Python may write its compiled bytecode (kept under
    ``--data``), as an installed ``ledger-verify`` has it, so start-up is not compiling."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(Path(_PYCACHE[0]).resolve())
    return env


_PYCACHE = ["bench-audit/pycache"]


def index_once(folder: Path, key: str, db: Path) -> tuple[float, dict[str, Any]]:
    """Run ``ledger-verify index`` as a subprocess: (seconds, its JSON answer)."""
    command = [
        sys.executable, "-c", "from ledger_client.cli.main import main; main()", "index",
        str(folder / "runs"), "--db", str(db), "--key", key, "--tsa-root",
        str(folder / "root.pem"), "--json",
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=_env())
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"index failed: {done.stdout}{done.stderr}")
    answer = dict(json.loads(done.stdout))
    answer["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, answer


def _cli(*args: str) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """``ledger-verify ARGS`` as a subprocess: (wall seconds, CPU seconds, the result)."""
    command = [sys.executable, "-c", "from ledger_client.cli.main import main; main()", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=_env())
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu, done


def lineage_figures(folder: Path, key: str, db: Path, repeats: int) -> None:
    """``lineage --db``: descendants of a first record, ancestors of a last, --tainted."""
    first_run = sorted((folder / "runs").iterdir())[0].read_text().splitlines()
    first = json.loads(first_run[0])["record"]
    last = json.loads(first_run[-2])["record"]
    digest = {
        "descendants": record_digest(DecisionRecord.from_json_obj(first)).hex(),
        "ancestors": record_digest(DecisionRecord.from_json_obj(last)).hex(),
    }
    common = [str(folder / "runs"), "--key", key, "--tsa-root", str(folder / "root.pem"),
              "--db", str(db), "--json"]  # fmt: skip
    cases = {
        "descendants of a first record": ["--from", digest["descendants"]],
        "ancestors of a last record": ["--from", digest["ancestors"], "--ancestors"],
        "every tainted write (--tainted)": ["--tainted"],
    }
    startup, startup_cpu, _ = _cli("--help")  # starting Python and the CLI, nothing else
    for name, extra in cases.items():
        walls, cpus = [], []
        answer: dict[str, Any] = {}
        for _ in range(repeats):
            took, cpu, done = _cli("lineage", *common, *extra)
            answer = json.loads(done.stdout)
            walls.append(took)
            cpus.append(cpu)
        sources = {r["source"] for r in answer["runs"]}
        print(f"  lineage, {name}: median {statistics.median(walls):.2f} s "
              f"({min(walls):.2f}-{max(walls):.2f}) wall, {statistics.median(cpus):.2f} s CPU "
              f"(with {startup:.2f} s wall, {startup_cpu:.2f} s CPU to start the CLI), "
              f"{len(answer['records'])} records, {len(answer['runs'])} runs, verdicts from "
              f"{sorted(sources)}, load average {os.getloadavg()[0]:.1f}")  # fmt: skip


def report_figures(folder: Path, key: str, runs: int, repeats: int, db: Path) -> None:
    """``report`` over the first ``runs`` run files: time and the largest page; verifying
    every run, then with the index's stored verdicts (``--db``: the runs it verified are not
    verified again; the files are hard links, found in the index by their hash)."""
    subset = folder / f"runs-{runs}"
    if not subset.is_dir():
        subset.mkdir()
        for path in sorted((folder / "runs").iterdir())[:runs]:
            os.link(path, subset / path.name)
    out = folder / "report" / "report.html"
    shutil.rmtree(out.parent, ignore_errors=True)  # no pages of an earlier, larger report
    out.parent.mkdir()
    paged = out.parent / "report-runs"  # absent for a report of one page (<= PAGE_RUNS runs)
    for how, extra in (("verified now", []), ("--db (stored verdicts)", ["--db", str(db)])):
        walls, cpus = [], []
        for _ in range(repeats):
            root = str(folder / "root.pem")
            took, cpu, done = _cli("report", str(subset), "--key", key, "--tsa-root", root,
                                   "--html", str(out), *extra)  # fmt: skip
            if done.returncode not in (0, 1):
                raise SystemExit(f"report failed: {done.stdout}{done.stderr}")
            walls.append(took)
            cpus.append(cpu)
        pages = [out, *(paged.iterdir() if paged.is_dir() else ())]
        largest = max(p.stat().st_size for p in pages)
        print(f"  report, {runs} runs, {how}: median {statistics.median(walls):.1f} s "
              f"({min(walls):.1f}-{max(walls):.1f}), CPU {statistics.median(cpus):.1f} s, "
              f"{len(pages)} pages, largest {largest / 1e6:.2f} MB, overview "
              f"{out.stat().st_size / 1e6:.2f} MB, load average "
              f"{os.getloadavg()[0]:.1f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--runs-per-checkpoint", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=Path("bench-audit"))
    parser.add_argument("--report-runs", type=int, default=1000)
    parser.add_argument("--skip-index", action="store_true", help="reuse the last index")
    parser.add_argument(
        "--store-parts",
        type=int,
        default=0,
        metavar="N",
        help="only the main process's part of index, over the first N runs",
    )
    parser.add_argument("--db", type=Path, default=None,
                        help="the index (default: DATA/audit.sqlite)")  # fmt: skip
    parser.add_argument("--skip-report", action="store_true", help="no report figures")
    parser.add_argument("--skip-lineage", action="store_true", help="no lineage figures")
    args = parser.parse_args()
    info = generate(args.data, args.runs, args.records, args.runs_per_checkpoint)
    db = args.db or args.data / "audit.sqlite"
    if args.store_parts:  # in this process: no subprocess, no bytecode under --data
        store_figures(args.data, info["key"], db, args.store_parts, args.repeats)
        return
    _PYCACHE[0] = str(args.data / "pycache")
    _cli("--help")  # compiles the bytecode once, before anything is timed
    total = args.runs * args.records
    if not args.skip_index:
        index_figures(args, info, db, total)
    else:
        _current(db)
    if not args.skip_lineage:
        lineage_figures(args.data, info["key"], db, args.repeats)
    if not args.skip_report:
        report_figures(args.data, info["key"], min(args.report_runs, args.runs), args.repeats, db)


def store_figures(folder: Path, key: str, db: Path, runs: int, repeats: int) -> None:
    """``--store-parts N``: the main process's part of ``index`` alone (storing each file's
    rows, then the bulk build's SQL indexes), CPU per receipt: the first N runs are verified
    once in this process, then their rows stored into a new ``db`` ``--repeats`` times."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    from ledger_client.audit import index as ix

    root = x509.load_pem_x509_certificate((folder / "root.pem").read_bytes())
    spec = ix.CacheSpec((key,), (root.public_bytes(Encoding.DER),), None, ())
    paths = [p.resolve() for p in sorted((folder / "runs").iterdir())[:runs]]
    done: list[Any] = []

    class Capture(ix.AuditIndex):  # the rows made as ``index`` makes them, kept
        def _audit(self, todo: Any, spec: Any, workers: Any, trust: Any) -> Any:
            for made in super()._audit(todo, spec, 1, trust):
                done.append(made)
                yield made

    class Replay(ix.AuditIndex):  # the same rows again, without verifying
        def _audit(self, todo: Any, spec: Any, workers: Any, trust: Any) -> Any:
            return iter(done)

    cpus = []
    for n in range(repeats + 1):
        for stale in db.parent.glob(f"{db.name}*"):
            stale.unlink()
        with Capture(db) if n == 0 else Replay(db) as store:
            started = time.process_time()
            store.index(paths, spec, fingerprint="bench")
            cpus.append(time.process_time() - started)
    receipts = sum(len(d.records) for d in done)
    cpu = statistics.median(cpus[1:])
    print(f"index, the main process's part ({len(paths)} runs, {receipts} receipts, bulk build): "
          f"median {cpu / receipts * 1e6:.1f} us CPU per receipt "
          f"({min(cpus[1:]) / receipts * 1e6:.1f}-{max(cpus[1:]) / receipts * 1e6:.1f}), "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip


def _current(db: Path) -> None:
    """``--skip-index``: the index must be there and of this verifier's version."""
    from ledger_client.audit.lineage_index import open_index

    if not db.is_file():
        raise SystemExit(f"--skip-index: no index at {db}")
    try:
        open_index(db).close()
    except FormatError as exc:
        raise SystemExit(f"--skip-index: {exc}") from None


def index_figures(args: argparse.Namespace, info: dict[str, Any], db: Path, total: int) -> None:
    full, again, cpu = [], [], []
    answer: dict[str, Any] = {}
    for _ in range(args.repeats):
        for stale in db.parent.glob(f"{db.name}*"):
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
          f"runs not verified: {answer['failed_runs']}, "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
