"""CPU per receipt of reading run files (the reading layer of ``ledger-verify index``).

Reads the JSON-lines run files of a folder (``tools/bench_audit.py`` writes them) with
``load_run`` and, separately, each step of it over the same lines: parsing a line
(``jcs.loads_exact``), comparing the record beside the receipt with the receipt's, reading the
record and the receipt into their types, and the record digest. Best of ``--repeats`` passes,
``time.process_time``, microseconds per receipt, as one JSON object::

    python tools/bench_reading.py RUNS_DIR --files 200

Which core reads is ``ledger.core.accel.JSON_CORE`` (``LEDGER_PURE=1`` for the pure one).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

from ledger.core import accel, jcs
from ledger.records.decision import DecisionRecord, record_digest_of_plain
from ledger_client.receipts import run_load
from ledger_client.receipts.receipt import Receipt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", type=Path, help="a folder of *.jsonl run files")
    parser.add_argument("--files", type=int, default=200, help="how many run files (first N)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    files = sorted(args.runs.glob("*.jsonl"))[: args.files]
    lines = [line for f in files for line in f.read_bytes().splitlines() if line.strip()]

    def per_receipt(step: Callable[[], object]) -> float:
        best = float("inf")
        for _ in range(args.repeats):
            start = time.process_time()
            step()
            best = min(best, time.process_time() - start)
        return round(best / len(lines) * 1e6, 1)

    parsed = [jcs.loads_exact(line, safe_numbers=True) for line in lines]
    objs = [obj for obj, _ in parsed if isinstance(obj, dict)]
    records = [DecisionRecord.from_json_obj(obj["record"], checked=True) for obj in objs]
    answer = {
        "core": getattr(accel, "JSON_CORE", "pure (no compiled reader)"),
        "receipts": len(lines),
        "load_run_us": per_receipt(lambda: [run_load.load_run(f) for f in files]),
        "parse_us": per_receipt(lambda: [jcs.loads_exact(x, safe_numbers=True) for x in lines]),
        "same_json_us": per_receipt(
            lambda: [run_load._same_json(o["receipt"]["record"], o["record"]) for o in objs]  # type: ignore[call-overload,index]
        ),
        "record_us": per_receipt(
            lambda: [DecisionRecord.from_json_obj(o["record"], checked=True) for o in objs]
        ),
        "receipt_us": per_receipt(
            lambda: [
                Receipt.from_json_obj(o["receipt"], checked=True, record=r)
                for o, r in zip(objs, records, strict=True)
            ]
        ),
        "digest_us": per_receipt(
            lambda: [record_digest_of_plain(o["record"], exact=e) for (o, e) in parsed]  # type: ignore[call-overload,index]
        ),
    }
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
