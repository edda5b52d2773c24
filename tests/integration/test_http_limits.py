"""The limits every HTTP listener has (``ledger.net.listener``), as a client would meet them on
real sockets: a half-sent request head is closed after the head timeout, a body that stops
arriving is cut after the body timeout, connections past the cap per address and in all get 503
without being parsed, and a flood of broken connections logs a few lines, never a traceback
per connection."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from aiohttp import web

from ledger.net.listener import HttpListener, ListenerLimits, serve_limited

pytestmark = pytest.mark.integration

LIMITS = ListenerLimits(
    header_timeout_s=0.5, body_timeout_s=0.5, max_connections=4, max_per_address=2
)


class Served:
    """A handler that reads the whole body (with no timeout of its own), on a loop thread."""

    def __init__(self, limits: ListenerLimits) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

        async def start() -> tuple[web.Server, HttpListener]:
            async def echo(request: web.BaseRequest) -> web.Response:
                body = await request.read()
                return web.Response(text=f"read {len(body)}")

            server = web.Server(echo, **limits.handler_options("probe"))
            return server, await serve_limited(server, "127.0.0.1", 0, limits, name="probe")

        self.server, self.listener = self.call(start())

    def call(self, coro: Any) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout=30)

    def stop(self) -> None:
        self.call(self.listener.close())
        self.call(self.server.shutdown(1.0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def served() -> Iterator[Served]:
    server = Served(LIMITS)
    try:
        yield server
    finally:
        server.stop()


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def closed_within(sock: socket.socket, seconds: float) -> bytes:
    """Everything the server sends until it closes; fails when it has not closed in time."""
    sock.settimeout(seconds)
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_a_half_sent_head_is_closed_after_the_head_timeout(served: Served) -> None:
    with connect(served.listener.port) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: probe\r\nX-Slow: ")
        start = time.monotonic()
        closed_within(sock, 5)
        assert time.monotonic() - start < 3
    assert served.listener.open == 0


def test_a_body_that_stops_arriving_is_cut_after_the_body_timeout(served: Served) -> None:
    with connect(served.listener.port) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: probe\r\nContent-Length: 100\r\n\r\nx")
        start = time.monotonic()
        assert closed_within(sock, 5) == b""
        assert time.monotonic() - start < 4
    with connect(served.listener.port) as sock:  # a whole body is answered
        sock.sendall(b"POST / HTTP/1.1\r\nHost: probe\r\nContent-Length: 3\r\n\r\nabc")
        assert b"read 3" in sock.recv(4096)


def test_connections_past_the_caps_get_503_without_being_parsed(served: Served) -> None:
    port = served.listener.port
    held = [connect(port), connect(port)]  # the cap per address
    try:
        with connect(port) as third:
            assert closed_within(third, 5).startswith(b"HTTP/1.1 503 ")
        held += [connect(port, "127.0.0.2"), connect(port, "127.0.0.3")]  # the cap in all
        with connect(port, "127.0.0.4") as fifth:
            assert closed_within(fifth, 5).startswith(b"HTTP/1.1 503 ")
        assert served.listener.refused == 2
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + 5
    while served.listener.open and time.monotonic() < deadline:
        time.sleep(0.02)
    with connect(port) as sock:  # places are given back when connections close
        sock.sendall(b"POST / HTTP/1.1\r\nHost: probe\r\nContent-Length: 2\r\n\r\nok")
        assert b"read 2" in sock.recv(4096)


def test_broken_connections_log_a_few_lines_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="asyncio")
    wide = ListenerLimits(header_timeout_s=2, body_timeout_s=0.3, max_connections=64)
    server = Served(wide)
    try:
        port = server.listener.port
        for i in range(60):
            with connect(port, f"127.0.0.{2 + i % 30}") as sock:
                if i % 3 == 0:
                    sock.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
                elif i % 3 == 1:  # leaves in the middle of its body
                    sock.sendall(b"POST / HTTP/1.1\r\nHost: p\r\nContent-Length: 50\r\n\r\nab")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                else:
                    sock.sendall(b"GET / HTTP/1.1\r\nHost: p\r\nContent-Length: 9\r\n\r\n")
                    time.sleep(0.01)
        time.sleep(1.0)  # every cut body has timed out
    finally:
        server.stop()
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert all(r.exc_info is None and r.exc_text is None for r in caplog.records), [
        r.getMessage() for r in caplog.records if r.exc_info
    ]
    assert len(loud) <= 6, [r.getMessage() for r in loud]
