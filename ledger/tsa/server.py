"""HTTP transport for the embedded TSA (RFC 3161 §3.4, "Time-Stamp Protocol via HTTP").

``TsaServer`` serves a :class:`~ledger.tsa.authority.TsaAuthority` with aiohttp, the project's
one HTTP server stack, on an event loop of its own (a thread for ``start()``, the caller's
thread for the blocking ``serve()`` that ``ledger tsa`` runs):

- ``POST`` with ``Content-Type: application/timestamp-query`` -> 200,
  ``application/timestamp-reply`` carrying a TimeStampResp (granted, or a rejection with a
  failInfo for a malformed or unsupported request: RFC 3161 reports those in the reply);
- ``POST`` with any other content type -> 415 Unsupported Media Type (the body is not a
  time-stamp query, so there is nothing to answer in RFC 3161 terms);
- no ``Content-Length`` -> 411, a malformed one -> 400 (aiohttp's parser), a body over 64 KiB
  -> 413 (before any of it is read);
- any other method -> 405 with ``Allow: POST`` (HEAD without a body);
- past ``max_connections`` open connections -> 503 at once (the connection never reaches the
  HTTP parser; ``ledger.net.listener``, the accept loop of every HTTP listener); a body not
  received within ``body_deadline_s`` in all -> 408 and the connection
  is closed; a connection that sends no complete request head within ``head_deadline_s`` (also
  between keep-alive requests) is closed. A slow or stalled client holds at most one of a
  bounded number of connections, for a bounded time, and no thread.

Bind to port 0 for an ephemeral port; ``.url`` then names the one the OS chose.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from types import TracebackType

from aiohttp import web

from ledger.net.listener import CollapsingLogger, ListenerLimits, serve_limited
from ledger.tsa.authority import TsaAuthority

__all__ = ["QUERY_CONTENT_TYPE", "REPLY_CONTENT_TYPE", "TsaServer"]

QUERY_CONTENT_TYPE = "application/timestamp-query"
REPLY_CONTENT_TYPE = "application/timestamp-reply"
MAX_QUERY_BYTES = 64 * 1024
MAX_CONNECTIONS = 32
BODY_DEADLINE_S = 10.0
HEAD_DEADLINE_S = 10.0  # seconds a client may take to send a request head (also when idle)
_TEXT = "text/plain"
# A failing signer or serial store fails every query: its traceback once, then a line a minute.
_failed = CollapsingLogger(f"{__name__}.failures", first_traceback=True)


def _text(status: int, message: str, **headers: str) -> web.Response:
    return web.Response(status=status, text=f"{message}\n", content_type=_TEXT, headers=headers)


class _Queries:
    """The one handler: every path, every method (only POST is answered with a reply)."""

    def __init__(self, authority: TsaAuthority, body_deadline_s: float) -> None:
        self._authority = authority
        self._body_deadline_s = body_deadline_s

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method != "POST":
            return _text(405, "only POST is supported", Allow="POST")
        if request.content_type.lower() != QUERY_CONTENT_TYPE:
            return _text(415, f"expected {QUERY_CONTENT_TYPE}")
        length = request.content_length
        if length is None:
            return _text(411, "Content-Length is required")
        if length > MAX_QUERY_BYTES:
            return _text(413, f"query over {MAX_QUERY_BYTES} bytes")
        try:
            body = await asyncio.wait_for(request.read(), self._body_deadline_s)
        except TimeoutError:
            reply = _text(408, "the request body came too slowly")
            reply.force_close()
            return reply
        try:  # signing, and now and then a durable serial reservation: off the loop
            answer = await asyncio.to_thread(self._authority.respond, body)
        except Exception:
            _failed.exception("TSA failed to answer a query")
            return _text(500, "time-stamping failed")
        return web.Response(body=answer, content_type=REPLY_CONTENT_TYPE)


class TsaServer:
    """The embedded TSA over HTTP; ``start()``/``stop()`` in a thread, or blocking ``serve()``."""

    def __init__(
        self,
        authority: TsaAuthority,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_connections: int = MAX_CONNECTIONS,
        body_deadline_s: float = BODY_DEADLINE_S,
        head_deadline_s: float = HEAD_DEADLINE_S,
    ):
        self._authority = authority
        self._address = (host, port)
        self._max_connections = max_connections
        self._body_deadline_s = body_deadline_s
        self._head_deadline_s = head_deadline_s
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = False

    @property
    def port(self) -> int:
        """The bound port (after ``start``/``serve``)."""
        if self._port is None:
            raise RuntimeError("TsaServer is not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://host:port/``, the URL clients POST queries to."""
        host = self._address[0] or "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/"

    def _claim(self) -> None:
        if self._started:
            raise RuntimeError("TsaServer already started")
        self._started = True

    async def _main(self, on_bound: Callable[[], None]) -> None:
        """Bind, call ``on_bound``, serve until ``stop()``; then close every connection."""
        loop = asyncio.get_running_loop()
        self._loop, self._stopping = loop, asyncio.Event()
        limits = ListenerLimits(
            header_timeout_s=self._head_deadline_s,
            body_timeout_s=self._body_deadline_s,
            max_connections=self._max_connections,
            max_per_address=self._max_connections,  # its one client: the anchorer, on loopback
        )
        server = web.Server(
            _Queries(self._authority, self._body_deadline_s), **limits.handler_options("tsa")
        )
        host, port = self._address
        listener = await serve_limited(server, host, port, limits, name="tsa")
        try:
            self._port = int(listener.port)
            on_bound()
            await self._stopping.wait()
        finally:
            await listener.close()
            await server.shutdown(1.0)
            self._loop = None

    def start(self) -> TsaServer:
        """Bind and serve in a daemon thread; returns self (bind errors are raised here)."""
        self._claim()
        bound = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(self._main(bound.set))
            except BaseException as exc:  # reported to start() when binding failed
                failed.append(exc)
                bound.set()

        self._thread = threading.Thread(target=run, name="tsa-http", daemon=True)
        self._thread.start()
        bound.wait()
        if failed:
            self._thread.join()
            self._thread = None
            raise failed[0]
        return self

    def serve(self, *, on_bound: Callable[[], None] | None = None) -> None:
        """Bind, call ``on_bound``, serve in this thread until ``stop()`` from another."""
        self._claim()
        asyncio.run(self._main(on_bound or (lambda: None)))

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stopping.set)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
            self._thread = None

    def __enter__(self) -> TsaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
