"""The embedded TSA's HTTP server under slow clients: a bounded number of connections (503
beyond it, no thread started), a deadline for the whole body (408) and for the request head
(closed); no thread per connection (aiohttp on one event loop)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from ledger.timestamp.rfc3161 import imprint_for_checkpoint_body
from ledger.tsa.client import TsaAuthority, TsaClient, TsaServer

pytestmark = pytest.mark.integration


def slow_client(port: int) -> socket.socket:
    """Sends headers promising 100 bytes, then 1 byte, then stalls."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(
        b"POST / HTTP/1.0\r\nContent-Type: application/timestamp-query\r\n"
        b"Content-Length: 100\r\n\r\nx"
    )
    return sock


def status_of(sock: socket.socket) -> int:
    data = sock.recv(4096)
    return int(data.split(b" ", 2)[1])


def test_slow_clients_hold_a_bounded_number_of_threads_for_a_bounded_time() -> None:
    authority = TsaAuthority.generate("Limits TSA")
    before = threading.active_count()
    with TsaServer(authority, max_connections=4, body_deadline_s=1.0) as server:
        slow = [slow_client(server.port) for _ in range(4)]
        time.sleep(0.3)
        extra = [slow_client(server.port) for _ in range(40)]
        assert {status_of(s) for s in extra} == {503}  # answered at once, not held
        assert threading.active_count() <= before + 1 + 4
        started = time.monotonic()
        assert {status_of(s) for s in slow} == {408}
        assert time.monotonic() - started < 3
        for s in slow + extra:
            s.close()
        time.sleep(0.2)
        digest = imprint_for_checkpoint_body(b"example.com/log\n1\n" + b"A" * 43 + b"=\n")
        client = TsaClient(server.url, timeout=10, roots=[authority.root_cert])
        assert client.timestamp(digest)[1].digest == digest  # still serving


def test_no_thread_per_connection_and_a_stalled_head_is_closed() -> None:
    authority = TsaAuthority.generate("Limits TSA")
    before = threading.active_count()
    with TsaServer(authority, max_connections=2, head_deadline_s=0.5) as server:
        silent = [socket.create_connection(("127.0.0.1", server.port), timeout=5)]
        half = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        half.sendall(b"POST / HTTP/1.1\r\nContent-Type: application/timest")  # never ends
        held = [*silent, half]
        time.sleep(0.2)
        assert threading.active_count() <= before + 2  # the loop's thread (and a resolver's)
        extra = slow_client(server.port)
        assert status_of(extra) == 503  # both slots are held
        extra.close()
        started = time.monotonic()
        for sock in held:
            assert sock.recv(4096) == b""  # closed by the server, no answer
        assert time.monotonic() - started < 3
        for sock in held:
            sock.close()
        time.sleep(0.1)
        digest = imprint_for_checkpoint_body(b"example.com/log\n1\n" + b"A" * 43 + b"=\n")
        client = TsaClient(server.url, timeout=10, roots=[authority.root_cert])
        assert client.timestamp(digest)[1].digest == digest  # the slots came back


def test_a_body_without_content_length_is_refused() -> None:
    authority = TsaAuthority.generate("Limits TSA")
    with TsaServer(authority) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/timestamp-query\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        )
        assert status_of(sock) == 411
        sock.close()
