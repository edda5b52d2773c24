"""The crash harness's moving parts (``tools/crash.py``): a ``ledger serve`` child process, the
client load that records what was acknowledged, and what the clients saw signed."""

from __future__ import annotations

import hashlib
import os
import random
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["ORIGIN", "Load", "Observed", "Server", "StartRefused", "ledger_cli"]

ORIGIN = "ledger.crash/harness"
START_TIMEOUT_S = 60.0
PAGE = 1_000


class StartRefused(Exception):
    """``ledger serve`` exited before serving; the message is its stderr."""


def ledger_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``ledger`` CLI."""
    cmd = [sys.executable, "-m", "ledger", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


class Server:
    """``ledger serve`` as a child; with ``wait``, returns once it serves (or raises)."""

    def __init__(self, data_dir: Path, key_file: Path, *, wait: bool = False) -> None:
        cmd = [
            sys.executable, "-m", "ledger", "serve", "--data-dir", str(data_dir),
            "--key", str(key_file), "--origin", ORIGIN, "--listen", "127.0.0.1:0",
            "--checkpoint-interval-ms", "20", "--anchor-interval-s", "0.3", "--embedded-tsa",
        ]  # fmt: skip
        self._err_path = data_dir.with_name("serve.stderr")
        self._err = open(self._err_path, "w")  # noqa: SIM115 (closed in _reap)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._err, text=True, env=env
        )
        self.address = ""
        if wait:
            self._wait_ready()

    def _wait_ready(self) -> None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.kill()
            raise StartRefused(self._err_path.read_text()[-2000:])
        import json

        self.address = json.loads(line)["address"]

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._reap()

    def terminate(self) -> int:
        """SIGTERM, graceful; the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self._reap()
        return code

    def _reap(self) -> None:
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._err.close()


class Observed:
    """What the clients were told: acknowledged digests and signed roots (signatures checked)."""

    def __init__(self, verifier: Any) -> None:
        self.verifier = verifier
        self.acked: dict[bytes, int] = {}
        self.roots: dict[int, set[bytes]] = {}
        self.lock = threading.Lock()

    def record(self, note: str) -> None:
        from ledger.core.checkpoint import open_checkpoint

        cp = open_checkpoint(note, [self.verifier], origin=ORIGIN).checkpoint
        with self.lock:
            self.roots.setdefault(cp.size, set()).add(cp.root_hash)

    def covered_needed(self) -> int:
        with self.lock:
            return max(self.acked.values(), default=-1) + 1

    def max_size(self) -> int:
        with self.lock:
            return max(self.roots, default=0)

    def check_latest(self, address: str) -> int:
        """Record the server's newest checkpoint; its size."""
        from ledger_client.remote.log import RemoteLog

        with RemoteLog(address, timeout=30) as remote:
            latest = remote.checkpoint()
        self.record(latest.note)
        return latest.size

    def appends_refused(self, address: str) -> bool:
        """True when an append is refused as FAILED_PRECONDITION (read-only)."""
        from ledger.core.errors import FailedPreconditionError
        from ledger_client.remote.log import RemoteLog

        digest = hashlib.sha256(os.urandom(16)).digest()
        try:
            with RemoteLog(address, timeout=30) as remote:
                remote.append([digest])
        except FailedPreconditionError as exc:  # ReadOnlyError, as the client sees it
            return "read-only" in str(exc)
        return False

    def all_leaves(self, address: str) -> list[bytes]:
        """Every published leaf, in order."""
        from ledger_client.remote.log import RemoteLog

        leaves: list[bytes] = []
        with RemoteLog(address, timeout=60) as remote:
            size = remote.checkpoint().size
            while len(leaves) < size:
                leaves += [e.leaf for e in remote.entries(len(leaves), PAGE)]
        return leaves


class Load:
    """Three threads appending until the server dies, recording acknowledgements."""

    def __init__(self, address: str, cycle: int, seen: Observed) -> None:
        self.address = address
        self.cycle = cycle
        self.seen = seen
        self.checkpointed = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(w,)) for w in range(3)]
        for t in self.threads:
            t.start()

    def _run(self, worker: int) -> None:
        from ledger_client.remote.log import RemoteLog

        rng = random.Random(self.cycle * 10 + worker)
        try:
            with RemoteLog(self.address, timeout=10) as remote:
                for n in range(10**9):
                    batch = [
                        hashlib.sha256(f"{self.cycle}-{worker}-{n}-{i}".encode()).digest()
                        for i in range(rng.choice((1, 5, 50, 200)))
                    ]
                    out = remote.append(batch, wait_for_checkpoint=rng.random() < 0.3)
                    with self.seen.lock:
                        for d, r in zip(batch, out.results, strict=True):
                            self.seen.acked[d] = r.index
                    if out.checkpoint is not None:
                        self.seen.record(out.checkpoint.note)
                        self.checkpointed.set()
        except Exception:
            return

    def anchor_now(self) -> None:
        from ledger_client.remote.log import RemoteLog

        try:
            with RemoteLog(self.address, timeout=10) as remote:
                remote.anchor_now()
        except Exception:
            return

    def join(self) -> None:
        for t in self.threads:
            t.join(timeout=30)
