"""Benchmark load B11: GET random C2SP tlog-tiles paths over keep-alive HTTP/1.1 connections.

Each thread keeps one connection and pipelines ``Task.batch`` requests at a time (the server
answers them in order), so the Python client is not the bottleneck of a fast static server.
The paths are every tile (hash tiles of every level and entry bundles, full and partial) of the
tree of ``Task.head_size``; a record is one 200 response with its whole body read. Any other
status counts as an error.
"""

from __future__ import annotations

import random
import socket
import time
import urllib.parse

from ledger.core import tiles
from tools.bench_clients import Outcome, Task, Window, sleep_until

__all__ = ["tile_paths", "tiles_load"]


def tile_paths(size: int) -> list[bytes]:
    """Request targets of every tile of the tree of ``size``."""
    return [b"/" + t.path.encode() for t in tiles.tiles_for_size(size)]


class _Connection:
    """One keep-alive HTTP/1.1 connection that reads Content-Length-delimited answers."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.head = b" HTTP/1.1\r\nHost: " + f"{parts.hostname}:{parts.port}".encode() + b"\r\n\r\n"
        self.sock = socket.create_connection((parts.hostname or "", parts.port or 80))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stream = self.sock.makefile("rb", buffering=1 << 16)

    def send(self, targets: list[bytes]) -> None:
        self.sock.sendall(b"".join(b"GET " + t + self.head for t in targets))

    def receive(self) -> int:
        """Read one response; return its status (ConnectionError when the server closed)."""
        line = self.stream.readline()
        if not line:
            raise ConnectionError("the server closed the connection")
        status = int(line.split(b" ", 2)[1])
        length = 0
        while (line := self.stream.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        self.stream.read(length)
        return status

    def close(self) -> None:
        self.stream.close()
        self.sock.close()


def _thread(task: Task, window: Window, seed: int, paths: list[bytes]) -> Outcome:
    out = Outcome()
    rng = random.Random(seed)
    conn = _Connection(task.url)
    try:
        sleep_until(window.start)
        while (t0 := time.monotonic()) < window.end:
            targets = [rng.choice(paths) for _ in range(task.batch)]
            try:
                conn.send(targets)
                ok = sum(conn.receive() == 200 for _ in targets)
            except (ConnectionError, OSError) as exc:
                out.error(exc)
                conn.close()
                conn = _Connection(task.url)
                continue
            t1 = time.monotonic()
            if window.inside(t1):
                out.calls += 1
                out.records += ok
                out.errors += len(targets) - ok
                out.latencies_ms.append((t1 - t0) * 1000)
    finally:
        conn.close()
    return out


def tiles_load(task: Task, window: Window) -> Outcome:
    """``task.threads`` connections, ``task.batch`` requests in flight on each."""
    from tools.bench_loads import in_threads

    base = urllib.parse.urlsplit(task.url).path.rstrip("/").encode()  # a bucket's /BUCKET/PREFIX
    paths = [base + path for path in tile_paths(task.head_size)]
    return in_threads(task, lambda k: _thread(task, window, task.seed * 1000 + k, paths))
