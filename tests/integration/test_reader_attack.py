"""Readers cannot stop the writer, as an attacker would try (issue 22, item 2): a real
``ledger serve`` limited to 1,024 file descriptors (``ulimit -n 1024``), 1,100 half-sent HTTP
requests on its tiles port and 1,000 idle gRPC connections (the HTTP/2 preface, then nothing).
Every append still succeeds within 5 s, health stays SERVING without a restart, and the server
writes fewer than 100 log lines (no traceback per connection)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import resource
import selectors
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ledger.core.checkpoint import Ed25519Signer
from ledger.fileio.keys import write_signer
from ledger_client.remote.log import RemoteLog
from tests.harness import ORIGIN, ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.serial]

SERVER_FILES = 1024
HALF_SENT_TILES = 1100
IDLE_GRPC = 1000
APPEND_DEADLINE_S = 5.0
MAX_LOG_LINES = 100
HALF_HEAD = b"GET /checkpoint HTTP/1.1\r\nHost: ledger\r\nX-Pad: "  # never finished
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


@pytest.fixture(autouse=True)
def enough_files_for_the_client() -> Iterator[None]:
    """The attacking client holds 2,100 sockets: raise its own soft limit to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = HALF_SENT_TILES + IDLE_GRPC + 256
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.fail(f"the test client needs {wanted} file descriptors; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def open_many(
    address: str, count: int, first_bytes: bytes, timeout: float = 20.0
) -> list[socket.socket]:
    """``count`` connections to ``address`` (non-blocking connects) from 50 loopback addresses
    (a distributed attack: past the caps per address, up to the caps in all), each sent
    ``first_bytes`` once connected; connections the server refuses or closes are dropped."""
    host, _, port = address.rpartition(":")
    selector = selectors.DefaultSelector()
    by_fd: dict[int, socket.socket] = {}
    for i in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((f"127.0.0.{2 + i % 50}", 0))
        sock.setblocking(False)
        code = sock.connect_ex((host, int(port)))
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            continue
        selector.register(sock, selectors.EVENT_WRITE)
        by_fd[sock.fileno()] = sock
    opened: list[socket.socket] = []
    deadline = time.monotonic() + timeout
    while selector.get_map() and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.5):
            sock = by_fd[key.fd]
            selector.unregister(sock)
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                sock.close()
                continue
            with contextlib.suppress(OSError):
                sock.send(first_bytes)
            opened.append(sock)
    for key in list(selector.get_map().values()):  # still connecting: left in the backlog
        opened.append(by_fd[key.fd])
    selector.close()
    return opened


def serving(channel: grpc.Channel) -> bool:
    check = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(), timeout=APPEND_DEADLINE_S
    )
    return bool(check.status == health_pb2.HealthCheckResponse.SERVING)


def timed_append(log: RemoteLog, i: int) -> float:
    start = time.monotonic()
    log.append([hashlib.sha256(f"attack-{i}".encode()).digest()], wait_for_checkpoint=True)
    return time.monotonic() - start


def test_half_sent_requests_and_idle_connections_do_not_stop_appends(tmp_path: Path) -> None:
    key = tmp_path / "signer.key"
    write_signer(key, Ed25519Signer.generate(ORIGIN))
    server = ServerProcess(tmp_path / "data", key, nofile=SERVER_FILES)
    attack: list[socket.socket] = []
    try:
        # the writer's channel and a monitor's, both opened before the attack (as they would be)
        log = RemoteLog(server.address, timeout=APPEND_DEADLINE_S)
        monitor = grpc.insecure_channel(server.address)
        try:
            timed_append(log, -1)
            assert serving(monitor)
            tiles = str(server.ready["tiles_url"]).removeprefix("http://").rstrip("/")
            attack += open_many(tiles, HALF_SENT_TILES, HALF_HEAD)
            attack += open_many(server.address, IDLE_GRPC, HTTP2_PREFACE)
            took = [timed_append(log, i) for i in range(20)]
            assert max(took) < APPEND_DEADLINE_S, took
            assert serving(monitor)
            for sock in attack:
                sock.close()
            attack.clear()
            with RemoteLog(server.address, timeout=APPEND_DEADLINE_S) as fresh:  # new connections
                fresh.append([hashlib.sha256(b"after").digest()], wait_for_checkpoint=True)
            with grpc.insecure_channel(server.address) as after:
                assert serving(after)
        finally:
            monitor.close()
            log.close()
    finally:
        for sock in attack:
            sock.close()
        server.terminate()
    lines = server.log_path.read_text().splitlines()
    assert len(lines) < MAX_LOG_LINES, "\n".join(lines[:40])
