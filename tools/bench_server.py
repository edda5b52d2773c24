"""The server under benchmark: ``ledger serve`` as a child process on port 0, optionally profiled.

``BenchServer`` starts ``python -m ledger serve`` (or ``tools/bench_profiled.py``, which runs
the same CLI under cProfile, one profile per Python thread) on a data dir, reads the JSON
"serving" line for the bound address and the verifier key, samples the process's RSS and CPU
from ``/proc``, and stops it with SIGTERM (graceful drain and final checkpoint).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from ledger.core.checkpoint import Ed25519Signer, Ed25519Verifier, open_checkpoint
from ledger.fileio.keys import write_signer
from ledger_client.remote.log import RemoteLog
from tools.bench_stats import ProcSample, proc_sample
from tools.bench_verify import Head

__all__ = ["ORIGIN", "BenchServer", "CeilingServer", "make_key", "signed_head"]

ORIGIN = "bench.local/log"
PROFILER = Path(__file__).with_name("bench_profiled.py")
STOP_TIMEOUT_S = 300.0


def make_key(path: Path) -> None:
    """Write a fresh Ed25519 signer key for ``ORIGIN`` to ``path``."""
    write_signer(path, Ed25519Signer.generate(ORIGIN))


def _serve_args(data_dir: Path, key_file: Path) -> list[str]:
    return [
        "serve", "--data-dir", str(data_dir), "--key", str(key_file), "--origin", ORIGIN,
        "--listen", "127.0.0.1:0", "--no-embedded-tsa", "--anchor-interval-s", "0",
        "--metrics-listen", "127.0.0.1:0",
    ]  # fmt: skip


class BenchServer:
    """A running ``ledger serve`` child process."""

    def __init__(
        self,
        data_dir: Path,
        key_file: Path,
        *,
        profile_dir: Path | None = None,
        label: str = "",
        extra: Sequence[str] = (),
        python: str = sys.executable,
    ) -> None:
        args = [*_serve_args(data_dir, key_file), *extra]
        if profile_dir is None:
            cmd = [python, "-P", "-m", "ledger", *args]  # -P: the code ``python`` installs, not ./
        else:
            cmd = [python, str(PROFILER), str(profile_dir), label or "server", *args]
        self.log_path = data_dir.with_name(data_dir.name + ".server.log")
        self._log_file = self.log_path.open("w")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._log_file, text=True, env=env
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise RuntimeError(f"ledger serve did not start:\n{self._log_tail()}")
        ready = json.loads(line)
        self.address: str = ready["address"]
        self.verifier_key: str = ready["verifier_key"]
        self.tiles_url: str = ready.get("tiles_url") or ""
        self.data_dir = data_dir

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.proc.pid

    def sample(self) -> ProcSample:
        """RSS, peak RSS and CPU seconds of the server process now."""
        return proc_sample(self.pid)

    def stop(self) -> int:
        """SIGTERM, wait for the graceful exit; return the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=STOP_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log_file.close()
        return code

    def _log_tail(self, lines: int = 30) -> str:
        self._log_file.flush()
        return "\n".join(self.log_path.read_text().splitlines()[-lines:])

    def __enter__(self) -> BenchServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc.poll() is None:
            self.stop()


def signed_head(server: BenchServer, at_least: int, timeout_s: float = 120.0) -> Head:
    """Wait for a checkpoint covering ``at_least`` entries; verify its signature; return it."""
    verifier = Ed25519Verifier.from_key_string(server.verifier_key)
    deadline = time.monotonic() + timeout_s
    with RemoteLog(server.address, timeout=30) as remote:
        while True:
            cp = remote.checkpoint()
            if cp.size >= at_least:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"no checkpoint covers {at_least} entries (latest {cp.size})")
            time.sleep(0.01)
    opened = open_checkpoint(cp.note, [verifier], origin=ORIGIN).checkpoint
    if (opened.size, opened.root_hash) != (cp.size, cp.root_hash):
        raise RuntimeError("checkpoint fields differ from its signed note")
    return Head(opened.size, opened.root_hash)


class CeilingServer:
    """A trivial gRPC server (``tools/bench_ceiling.py``) as a child process: the ceilings."""

    def __init__(self, mode: str, log_path: Path) -> None:
        self._log_file = log_path.open("w")
        script = Path(__file__).with_name("bench_ceiling.py")
        self.proc = subprocess.Popen(
            [sys.executable, str(script), "--mode", mode],
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise RuntimeError(f"the {mode} ceiling server did not start (see {log_path})")
        self.address: str = json.loads(line)["address"]

    def sample(self) -> ProcSample:
        """RSS, peak RSS and CPU seconds of the server process now."""
        return proc_sample(self.proc.pid)

    def stop(self) -> int:
        """SIGTERM, wait; return the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log_file.close()
        return code
