"""Test harness: a real log server in a background thread, or as a ``ledger serve`` subprocess.

Both bind port 0 on 127.0.0.1 with a real RocksDB in a temporary folder and are stopped by the
test that started them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path

from ledger.app.compose import App, start_app
from ledger.app.settings import Settings
from ledger.core.checkpoint import Ed25519Signer
from ledger_client.remote.log import RemoteLog
from ledger_client.sdk.client import Backoff, SenderOptions
from tests import processes

ORIGIN = "ledger.test/integration"


class ServerThread:
    """``start_app`` on an event loop running in a daemon thread."""

    def __init__(self, settings: Settings, signer: Ed25519Signer) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.app: App = self.call(start_app(settings, signer))

    def call(self, coro: object) -> App:
        fut: Future[App] = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        return fut.result(timeout=60)

    @property
    def address(self) -> str:
        return self.app.address

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.app.stop(), self.loop).result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


def test_settings(data_dir: Path, **overrides: object) -> Settings:
    base = Settings(
        origin=ORIGIN,
        data_dir=data_dir,
        listen="127.0.0.1:0",
        anchor_interval_s=0,
        metrics_listen="",  # /metrics on the tiles endpoint (port 0 there too)
    )
    return base.with_overrides(**overrides)


@contextmanager
def running_server(
    data_dir: Path, signer: Ed25519Signer | None = None, **overrides: object
) -> Iterator[tuple[ServerThread, RemoteLog, Ed25519Signer]]:
    """A started in-process server and a client to it; stopped on exit."""
    signer = signer or Ed25519Signer.generate(ORIGIN)
    server = ServerThread(test_settings(data_dir, **overrides), signer)
    client = RemoteLog(server.address, timeout=30)
    try:
        yield server, client, signer
    finally:
        client.close()
        server.stop()


def _limit_files(count: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))


class ServerProcess:
    """``ledger serve`` as a child process; reads the bound address from its first line."""

    def __init__(
        self, data_dir: Path, key_file: Path, *extra: str, nofile: int | None = None
    ) -> None:
        cmd = [
            sys.executable, "-m", "ledger", "serve", "--data-dir", str(data_dir),
            "--key", str(key_file), "--origin", ORIGIN, "--listen", "127.0.0.1:0",
            "--anchor-interval-s", "0", "--no-embedded-tsa", "--metrics-listen", "127.0.0.1:0",
            *extra,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # The server's log (one access-log line per call) goes to a file, never to a pipe
        # nobody reads, which would fill up and stall the server.
        self.log_path = data_dir.parent / f"{data_dir.name}.server.log"
        self._log = self.log_path.open("a")
        # ``nofile``: the child's soft and hard RLIMIT_NOFILE (``ulimit -n``)
        limit = None if nofile is None else functools.partial(_limit_files, nofile)
        self.proc = processes.spawn(
            cmd, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env, preexec_fn=limit
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise RuntimeError(f"ledger serve did not start: {self.log_path.read_text()}")
        self.ready = json.loads(line)
        self.address: str = self.ready["address"]

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        self.proc.send_signal(signal.SIGKILL)
        processes.wait(self.proc, 30)
        self._close_pipes()

    def terminate(self) -> int:
        """SIGTERM: graceful shutdown; return the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        code = processes.wait(self.proc, 60)
        self._close_pipes()
        return code

    def _close_pipes(self) -> None:
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


# A client that batches and retries quickly (tests against a local log).
QUICK = SenderOptions(batch_age=0.01, backoff=Backoff(initial=0.02, maximum=0.2))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
