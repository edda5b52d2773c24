"""Microbenchmark: the typed reading of a decision record, CPU per record.

    python tools/bench_record_read.py DIR [--files 100] [--repeats 9]

Reads the records of the first ``--files`` run files in DIR (``{"record", "receipt"}`` JSON
lines, as ``tools/bench_audit.py`` writes them), each parsed once by ``loads_strict``, then times
(process CPU, median of ``--repeats`` passes over all of them) ``DecisionRecord.from_json_obj``
(``checked=True``, as the run reader calls it: the selected reading, compiled unless
``LEDGER_PURE=1``), the pure twin of the fast reading (``decision._record_fast``), and the
compiled one (``ledger.core._recordread.record``) when it is built. Run from an older tree
(``PYTHONPATH``), it times that tree's ``from_json_obj`` alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.core import accel, jcs
from ledger.records import decision
from ledger.records.decision import DecisionRecord


def per_record(read: Callable[[Any], object], records: list[Any], repeats: int) -> list[float]:
    """CPU microseconds per record of each pass of ``read`` over ``records``."""
    out = []
    for _ in range(repeats):
        start = time.process_time()
        for record in records:
            read(record)
        out.append((time.process_time() - start) / len(records) * 1e6)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    records = []
    for path in sorted(args.dir.glob("*.jsonl"))[: args.files]:
        for line in path.read_bytes().splitlines():
            item = jcs.loads_strict(line, safe_numbers=True)
            assert isinstance(item, dict)
            records.append(item["record"])
    if not records:
        print(f"no run files in {args.dir}", file=sys.stderr)
        return 2
    core = getattr(accel, "RECORD_CORE", "a tree before the compiled reader")
    readings: dict[str, Callable[[Any], object]] = {
        f"from_json_obj ({core})": lambda r: DecisionRecord.from_json_obj(r, checked=True),
    }
    twin, compiled = getattr(decision, "_record_fast", None), getattr(accel, "record_read", None)
    if twin is not None:
        readings["pure twin (_record_fast)"] = twin
    if compiled is not None:
        readings["compiled (_recordread.record)"] = compiled
    print(f"{len(records)} records from {args.dir}")
    for name, read in readings.items():
        times = per_record(read, records, args.repeats)
        print(
            f"{name:34} median {statistics.median(times):6.2f} µs/record "
            f"(range {min(times):.2f}-{max(times):.2f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
