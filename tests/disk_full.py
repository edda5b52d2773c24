"""A real full file system for the writer-fault tests: a small tmpfs where mounting is allowed,
else a file-size limit (RLIMIT_FSIZE, in a child process, SIGXFSZ ignored so writes fail with
EFBIG as they would with ENOSPC).

``python -m tests.disk_full fill DIR LIMIT_BYTES`` (0: no limit) appends to a log in DIR until
the store fails and prints JSON: the acknowledged (digest hex -> index) and the error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import LogFailedError
from ledger.core.types import AppendItem
from ledger.log.facade import Log
from ledger.log.highwater import HighWaterMark
from ledger.store.rocks import RocksStore
from tests import processes

ORIGIN = "ledger.test/disk-full"
SIGNER = Ed25519Signer.generate(ORIGIN)


@contextlib.contextmanager
def small_tmpfs(where: Path, size_mb: int) -> Iterator[Path | None]:
    """A mounted tmpfs of ``size_mb`` at ``where``, or None where mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        done = processes.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(where)],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        yield None
        return
    if done.returncode != 0:
        yield None
        return
    try:
        yield where
    finally:
        processes.run(["umount", "-l", str(where)], capture_output=True, timeout=30, check=False)


def open_log(data: Path) -> tuple[RocksStore, Log]:
    store = RocksStore(data / "db", memtable_mb=4, cache_mb=1)
    mark = HighWaterMark(data / "mark")
    return store, Log(store=store, signer=SIGNER, origin=ORIGIN, mark=mark)


def fill(data: Path, *, rounds: int = 100_000) -> tuple[dict[bytes, int], str]:
    """Append 100-digest batches (1 KiB metadata each), publishing, until the store fails."""
    store, log = open_log(data)
    acked: dict[bytes, int] = {}
    error = ""
    try:
        for r in range(rounds):
            batch = [hashlib.sha256(f"{r}-{i}".encode()).digest() for i in range(100)]
            try:
                results = log.append([AppendItem(d, b"m" * 1024) for d in batch])
                log.publish()
            except (LogFailedError, OSError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                break
            acked.update({d: res.index for d, res in zip(batch, results, strict=True)})
    finally:
        with contextlib.suppress(Exception):
            store.close()
    return acked, error


def fill_in_child(data: Path, limit: int = 0) -> tuple[dict[bytes, int], str]:
    """``fill`` in a child process (under RLIMIT_FSIZE when ``limit``): the process that met
    the full disk ends, as a server would be restarted."""
    cmd = [sys.executable, "-m", "tests.disk_full", "fill", str(data), str(limit)]
    done = processes.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the filler failed: {done.stderr[-2000:]}")
    out = json.loads(done.stdout)
    return {bytes.fromhex(d): i for d, i in out["acked"].items()}, out["error"]


def _child(data: Path, limit: int) -> None:
    if limit:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    acked, error = fill(data)
    os.write(1, json.dumps({"acked": {d.hex(): i for d, i in acked.items()}, "error": error})
             .encode())  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "fill":
        _child(Path(sys.argv[2]), int(sys.argv[3]))
