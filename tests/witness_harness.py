"""Witnesses for tests: in-process (aiohttp on a thread's loop) or ``ledger witness serve``.

Both bind port 0 (or a given port, to restart one where it was) on 127.0.0.1 with a state
folder in a temporary directory, and are stopped by the test that started them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from ledger.core.checkpoint import CosignatureSigner, Verifier
from ledger.fileio.keys import write_signer
from ledger.witness.server import start_witness_server
from ledger.witness.state import Witness
from tests import processes

_T = TypeVar("_T")


def post(url: str, body: bytes, timeout: float = 10) -> tuple[int, str, str]:
    """POST ``body``; (status, content type, text) whatever the status."""
    request = urllib.request.Request(url, data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type", ""), err.read().decode()


class WitnessThread:
    """A ``Witness`` served by aiohttp on an event loop running in a daemon thread."""

    def __init__(
        self, folder: Path, logs: Mapping[str, Sequence[Verifier]], name: str = "witness.test/w1"
    ) -> None:
        self.signer = CosignatureSigner.generate(name)
        self.witness = Witness(folder=folder, signer=self.signer, logs=logs, clock=time.time)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.runner: web.AppRunner
        self.runner, self.listener = self._call(start_witness_server(self.witness, "127.0.0.1", 0))
        self.port = int(self.listener.port)

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def verifier_key(self) -> str:
        return self.signer.verifier().key_string()

    def stop(self) -> None:
        self._call(self.listener.close())
        self._call(self.runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
        self.witness.close()


class WitnessProcess:
    """``ledger witness serve`` as a child process; reads its address from the first line."""

    def __init__(
        self, key_file: Path, state_dir: Path, log_keys: list[str], listen: str = "127.0.0.1:0"
    ) -> None:
        cmd = [
            sys.executable, "-m", "ledger", "witness", "serve", "--key", str(key_file),
            "--state-dir", str(state_dir), "--listen", listen,
        ]  # fmt: skip
        for key in log_keys:
            cmd += ["--log", key]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = processes.spawn(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"ledger witness serve did not start: {err}")
        self.ready = json.loads(line)
        self.url: str = self.ready["url"]
        self.address: str = self.ready["address"]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)
        processes.wait(self.proc, 30)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def start_witnesses(
    keys: Sequence[Path], folder: Path, log_keys: list[str]
) -> list[WitnessProcess]:
    """``WitnessProcess(keys[i], folder / f"w{i}", log_keys)`` for each key, started side by side
    (each start is an interpreter loading the CLI: they overlap instead of queueing)."""

    def start(i: int) -> WitnessProcess:
        return WitnessProcess(keys[i], folder / f"w{i}", log_keys)

    with ThreadPoolExecutor(len(keys)) as pool:
        return list(pool.map(start, range(len(keys))))


def make_witness_key(folder: Path, name: str) -> tuple[Path, str]:
    """A cosigner key file for ``name`` in ``folder``; (path, verifier key)."""
    signer = CosignatureSigner.generate(name)
    path = folder / f"{name.replace('/', '_')}.key"
    write_signer(path, signer)
    return path, signer.verifier().key_string()


class FakeWitness:
    """An HTTP endpoint that answers every add-checkpoint with a fixed (status, type, body)."""

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        async def handle(request: web.Request) -> web.Response:
            await request.read()
            return web.Response(status=status, body=body, headers={"Content-Type": content_type})

        app = web.Application()
        app.router.add_post("/add-checkpoint", handle)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.runner = web.AppRunner(app)
        asyncio.run_coroutine_threadsafe(self.runner.setup(), self.loop).result(10)
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        asyncio.run_coroutine_threadsafe(site.start(), self.loop).result(10)
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
