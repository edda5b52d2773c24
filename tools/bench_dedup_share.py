"""The dedup index's share of the append path, measured in the real server under B2:
``python tools/bench_dedup_share.py [--runs 3] [--only base,nodedup]``.

Each variant is this checkout's committed tree (``git archive HEAD``) with one change made to
``ledger/store/rocks.py`` (the compiled core copied beside it), run as the server of
``tools/bench.py --only B2`` through ``--server-python`` (the same load generator for all).
The variants are experiments, never a way to run a log: without its dedup index a log would
sequence a duplicate twice.

    base       the log as committed
    nolookup   no dedup look-up (every digest treated as new); digests still inserted
    nowrite    digests never inserted into the dedup table (so every look-up misses)
    nodedup    neither look-up nor inserts

Since layout tiles-3 the dedup index is the derived table of ``ledger.store.dedup``; the
variants of the ``digests`` family it replaced (docs/benchmarks.md "The dedup index's share of
B2, 2026-12-02 00:37–00:47 (load average 6.1–7.3)") are in this file's history.

Prints, per variant, B2's records/s and records per server CPU second (median and range over
``--runs``) and the server's CPU. Run it on a quiet machine for the record; the ratios between
variants, measured in the same hour, are what it is for.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORE = "ledger/store/rocks.py"
_LOOKUP = "        candidates = self._dedup().find(digests)\n"
_WRITE = """        table = self._dedup()
        table.insert(first, digests)
"""
_NO_LOOKUP = "        candidates: list[int] = []  # EXPERIMENT\n"
_NO_WRITE = "        table = self._dedup()  # EXPERIMENT: no inserts\n"
VARIANTS: dict[str, list[tuple[str, str]]] = {
    "base": [],
    "nolookup": [(_LOOKUP, _NO_LOOKUP)],
    "nowrite": [(_WRITE, _NO_WRITE)],
    "nodedup": [(_LOOKUP, _NO_LOOKUP), (_WRITE, _NO_WRITE)],
}


FIGURES = {  # bench.json names: the labels printed
    "records_per_s": "records/s",
    "records_per_server_cpu_s": "per server CPU second",
    "server_cpu": "server cores",
}


def make_variant(name: str, where: Path) -> Path:
    """The committed tree with ``name``'s change, and an interpreter that runs it: its path."""
    tree = where / name
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "HEAD"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    for built in (ROOT / "ledger/core").glob("_*.so"):
        shutil.copy2(built, tree / "ledger/core" / built.name)
    source = (tree / STORE).read_text()
    for old, new in VARIANTS[name]:
        if source.count(old) != 1:
            raise SystemExit(f"{name}: {STORE} changed; update this tool's patterns")
        source = source.replace(old, new)
    (tree / STORE).write_text(source)
    python = tree / "python"
    paths = f"{tree}:{tree / 'client'}"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={paths} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python


def run_b2(python: Path, runs: int, out: Path) -> dict[str, list[float]]:
    """``tools/bench.py --only B2`` with ``python`` as the server: the B2 figures by name."""
    command = [sys.executable, str(ROOT / "tools/bench.py"), "--only", "B2", "--runs", str(runs),
               "--out", str(out), "--server-python", str(python)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"bench failed: {done.stderr[-2000:]}")
    report = json.loads((out / "bench.json").read_text())
    (b2,) = [s for s in report["scenarios"] if s["id"] == "B2"]
    return {f["name"]: f["runs"] for f in b2["figures"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=",".join(VARIANTS))
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}: choose from {sorted(VARIANTS)}")
    with tempfile.TemporaryDirectory(prefix="dedup-share-") as scratch:
        work = Path(scratch)
        for name in names:
            figures = run_b2(make_variant(name, work), args.runs, work / f"out-{name}")
            line = [f"{name:9}"]
            for figure, label in FIGURES.items():
                values = sorted(figures[figure])
                digits = 2 if figure == "server_cpu" else 0
                mid, low, high = values[len(values) // 2], values[0], values[-1]
                line.append(f"{label} {mid:,.{digits}f} ({low:,.{digits}f}-{high:,.{digits}f})")
            print(" | ".join(line), f"| load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
