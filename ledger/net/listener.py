"""Every inbound HTTP listener of the server side (tiles, ``/metrics``, the witness, the
embedded TSA): one accept loop with limits, so that no reader can take the file descriptors,
the memory or the log lines the writer needs.

``ListenerLimits`` (the ``[limits]`` settings, docs/operating.md "Connection limits"):

* ``header_timeout_s``: a connection that has not sent a complete request head this long after
  it opened, or after its previous answer (keep-alive), is closed. This is aiohttp's keep-alive
  timer (``keepalive_timeout``), which aiohttp 3.14 arms when a connection opens and which
  closes a connection holding no complete request head when it fires; a TLS handshake has the
  same time.
* ``body_timeout_s``: a request whose body has not fully arrived this long after its head is
  cut (its connection closed, one second after the handler's own 408 would have been sent, for
  the handlers that read a body: the witness, the TSA). Nothing is drained after an answer
  (``lingering_time=0``).
* ``max_connections`` open connections in all and ``max_per_address`` from one client address:
  a connection past either is accepted, answered ``503`` (``Retry-After: 1``) and closed at
  once, before any byte of it is parsed, so it holds a descriptor for microseconds only.

The accept loop is ours (``loop.sock_accept``), so an ``accept`` that fails for want of file
descriptors or memory (EMFILE, ENFILE, ENOMEM, ENOBUFS) is retried with
``ledger.core.backoff.SHORTAGE_BACKOFF`` and logged once per episode, with the number of
failures when accepting works again; aiohttp's per-connection errors go through a logger that
writes one line without a traceback per kind of error per minute (``CollapsingLogger``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from ledger.core.backoff import SHORTAGE_BACKOFF, Episodes, retry_async
from ledger.core.errors import is_resource_shortage

if TYPE_CHECKING:
    import ssl as ssl_module

__all__ = [
    "BODY_GRACE_S",
    "CollapsingLogger",
    "HttpListener",
    "ListenerLimits",
    "serve_limited",
]

BODY_GRACE_S = 1.0  # the handler's own 408 goes first; then the connection is cut
BACKLOG = 128
FOLD_S = 60.0  # one line per kind of per-connection error per this many seconds
_BUSY_TEXT = b"too many connections; retry shortly\n"
BUSY_REPLY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Retry-After: 1\r\nConnection: close\r\nContent-Length: "
    + str(len(_BUSY_TEXT)).encode()
    + b"\r\n\r\n"
    + _BUSY_TEXT
)
_log = logging.getLogger("ledger.net")
_BROKEN_LISTENER = frozenset({errno.EBADF, errno.EINVAL, errno.ENOTSOCK, errno.EOPNOTSUPP})


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerLimits:
    """Timeouts and connection caps of one HTTP listener (module docstring)."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 10.0
    max_connections: int = 256
    max_per_address: int = 32

    def __post_init__(self) -> None:
        if not (self.header_timeout_s > 0 and self.body_timeout_s > 0):
            raise ValueError("listener timeouts must be positive")
        if self.max_per_address < 1 or self.max_connections < 1:
            raise ValueError("connection caps must be at least 1")

    def handler_options(self, name: str) -> dict[str, Any]:
        """aiohttp ``RequestHandler`` arguments (for ``web.AppRunner`` or ``web.Server``)."""
        return {
            "keepalive_timeout": self.header_timeout_s,
            "lingering_time": 0,
            "access_log": None,
            "logger": CollapsingLogger(f"ledger.{name}.connections"),
        }


class CollapsingLogger(logging.Logger):
    """A logger for errors that may repeat on every request: a record at WARNING or above is
    written as one line, and further records of the same kind within ``FOLD_S`` seconds are only
    counted; the next line written says how many were folded into it.

    Per-connection errors (the default) are written without their traceback (the exception's
    class and message are appended) and are of a kind by their message template. With
    ``first_traceback`` (internal errors: ``ledger.api.server``, the embedded TSA) a kind is the
    formatted message and the exception's class, and the first line of each kind keeps its
    traceback; later lines of that kind are one line each, as above. ``clock``: monotonic
    seconds."""

    def __init__(
        self,
        name: str,
        *,
        first_traceback: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name)
        self.parent = logging.getLogger(name.rpartition(".")[0] or "ledger")
        self._seen: dict[str, tuple[float, int]] = {}
        self._first_traceback = first_traceback
        self._clock = clock

    def handle(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING:
            super().handle(record)
            return
        exc = record.exc_info[1] if record.exc_info else None
        text = record.getMessage()
        if self._first_traceback:
            key = f"{text}\0{type(exc).__name__ if exc is not None else ''}"
        else:
            key = str(record.msg)
        now = self._clock()
        known = key in self._seen
        first, folded = self._seen.get(key, (-FOLD_S, 0))
        if known and now - first < FOLD_S:
            self._seen[key] = (first, folded + 1)
            return
        self._seen[key] = (now, 0)
        if self._first_traceback and not known:
            record.msg, record.args = text, None  # the first of its kind: with its traceback
            super().handle(record)
            return
        if exc is not None:
            text = f"{text}: {type(exc).__name__}: {exc}"
        if folded:
            text = f"{text} ({folded} more like it in the last {FOLD_S:g} s)"
        record.msg, record.args = text, None
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        super().handle(record)


class _Tracked(asyncio.Protocol):
    """The aiohttp protocol of one connection, and a release of its place when it closes."""

    def __init__(self, inner: RequestHandler, release: Callable[[], None]) -> None:
        self._inner = inner
        self._release = release

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        self._inner.eof_received()
        return None

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self._inner.connection_lost(exc)
        finally:
            self._release()


def _cut_slow_body(request: web.BaseRequest) -> None:
    if not request.content.is_eof() and request.transport is not None:
        request.transport.close()


def _timed(
    handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]], body_timeout_s: float
) -> Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]:
    async def timed(request: web.BaseRequest) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        timer = loop.call_later(body_timeout_s + BODY_GRACE_S, _cut_slow_body, request)
        try:
            return await handler(request)
        finally:
            timer.cancel()

    return timed


def _bind(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class HttpListener:
    """A listening socket serving an aiohttp ``web.Server`` within ``ListenerLimits``."""

    def __init__(
        self,
        server: web.Server,
        sock: socket.socket,
        limits: ListenerLimits,
        *,
        name: str,
        ssl: ssl_module.SSLContext | None,
    ) -> None:
        self._server = server
        self._sock = sock
        self.limits = limits
        self.name = name
        self._ssl = ssl
        self.host, self.port = sock.getsockname()[:2]
        self.open = 0
        self.refused = 0
        self._per_address: Counter[str] = Counter()
        self._pending: set[asyncio.Task[None]] = set()
        self._shortage = Episodes()
        self._events = CollapsingLogger(f"ledger.{name}.listener")
        server.request_handler = _timed(server.request_handler, limits.body_timeout_s)
        self._task = asyncio.get_running_loop().create_task(self._accept_forever())

    async def close(self) -> None:
        """Stop accepting (open connections are the server's to shut down)."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        for task in list(self._pending):
            task.cancel()
        self._sock.close()

    async def _accept_forever(self) -> None:
        loop = asyncio.get_running_loop()

        def failed(attempt: int, exc: Exception, wait: float) -> None:
            if self._shortage.failed():
                _log.warning(
                    "%s: cannot accept a connection (%s); retrying with backoff, counting "
                    "further failures",
                    self.name,
                    exc.strerror if isinstance(exc, OSError) else exc,
                )

        while True:
            try:
                conn, address = await retry_async(
                    lambda: loop.sock_accept(self._sock),
                    backoff=SHORTAGE_BACKOFF,
                    retry_on=is_resource_shortage,
                    on_retry=failed,
                )
            except OSError as exc:
                if exc.errno in _BROKEN_LISTENER or self._sock.fileno() < 0:
                    _log.error("%s: the listening socket failed: %s", self.name, exc)
                    return
                _log.debug("%s: accept failed: %s", self.name, exc)  # a client gone before it
                continue
            if (count := self._shortage.recovered()) is not None:
                _log.warning("%s: accepting again after %d failed accepts", self.name, count)
            self._admit(conn, str(address[0]) if isinstance(address, tuple) else "local")

    def _admit(self, conn: socket.socket, address: str) -> None:
        limits = self.limits
        if self.open >= limits.max_connections or (
            self._per_address[address] >= limits.max_per_address
        ):
            self.refused += 1
            self._events.warning(
                "%s: a connection over the limits (%d in all, %d per address) was answered 503",
                self.name,
                limits.max_connections,
                limits.max_per_address,
            )
            with contextlib.suppress(OSError):
                conn.send(BUSY_REPLY)
                conn.shutdown(socket.SHUT_WR)
            conn.close()
            return
        self.open += 1
        self._per_address[address] += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.open -= 1
                self._per_address[address] -= 1
                if self._per_address[address] <= 0:
                    del self._per_address[address]

        task = asyncio.get_running_loop().create_task(self._connect(conn, release))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _connect(self, conn: socket.socket, release: Callable[[], None]) -> None:
        protocol = _Tracked(self._server(), release)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: protocol,
                conn,
                ssl=self._ssl,
                ssl_handshake_timeout=self.limits.header_timeout_s if self._ssl else None,
            )
        except (OSError, TimeoutError, asyncio.CancelledError) as exc:  # a failed handshake
            _log.debug("%s: connection dropped before its first request: %s", self.name, exc)
            conn.close()
            release()


async def serve_limited(
    server: web.Server,
    host: str,
    port: int,
    limits: ListenerLimits,
    *,
    name: str,
    ssl: ssl_module.SSLContext | None = None,
) -> HttpListener:
    """Listen on ``host:port`` (port 0 picks one) and serve ``server`` within ``limits``
    (``OSError`` when the address cannot be bound). Build ``server`` with
    ``limits.handler_options(name)``."""
    return HttpListener(server, _bind(host, port), limits, name=name, ssl=ssl)
