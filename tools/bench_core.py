"""The packed hot loop on one core, for comparing cores under a GIL profiler:
``python tools/bench_core.py {pure,native,mypyc} [SECONDS]``.

Per batch of 1,000 random digests: ``sequence_plain`` (dedup, leaf bytes, leaf hashes), the
dedup keys and values, ``compact_extend``; no store. ``pure`` is ``ledger.core.hot``,
``native`` the C extension ``ledger.core._hot`` (``make native``), ``mypyc`` the pure module
compiled by mypyc into a temporary folder first (it takes a minute). Prints entries per second.
The design's comparison ran each under ``py-spy record --gil -r 200 -f raw -o OUT -- python
tools/bench_core.py CORE 6`` (docs/design.md "The compiled core").
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
BATCH = 1_000

__all__ = ["load", "main", "run"]


def load(name: str, work: Path) -> ModuleType:
    """The core called ``name``; ``mypyc`` is compiled into ``work`` first."""
    if name == "pure":
        return importlib.import_module("ledger.core.hot")
    if name == "native":
        return importlib.import_module("ledger.core._hot")
    if name != "mypyc":
        raise SystemExit(f"core {name!r}: want pure, native or mypyc")
    shutil.copy2(ROOT / "ledger" / "core" / "hot.py", work / "hot_mypyc.py")
    mypyc = Path(sys.executable).parent / "mypyc"
    subprocess.run([str(mypyc), "hot_mypyc.py"], cwd=work, check=True, capture_output=True)
    sys.path.insert(0, str(work))
    return importlib.import_module("hot_mypyc")


def run(core: ModuleType, seconds: float) -> float:
    """Entries per second of the loop for ``seconds``."""
    batches = [os.urandom(32 * BATCH) for _ in range(64)]
    known = bytes(BATCH)
    hashed, framed, suffix = b"\x00" + bytes(9), b"\x00\x2b" + bytes(9), b"\x00\x00"
    size, stack, done = 0, b"", 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, hashes, _, _ = core.sequence_plain(batches[done % 64], known, hashed, framed, suffix)
        core.split_hashes(batches[done % 64])
        core.index_values(size, BATCH, 6)
        stack, _ = core.compact_extend(size, stack, hashes)
        size += BATCH
        done += 1
    return done * BATCH / (time.perf_counter() - t0)


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    seconds = float(argv[1]) if len(argv) > 1 else 6.0
    with tempfile.TemporaryDirectory() as work:
        rate = run(load(argv[0], Path(work)), seconds)
    print(f"{argv[0]}: {rate:,.0f} entries/s ({1e6 / rate:.2f} us per entry)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
