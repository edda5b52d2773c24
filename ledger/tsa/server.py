"""HTTP transport for the embedded TSA (RFC 3161 §3.4, "Time-Stamp Protocol via HTTP").

``TsaServer`` serves a :class:`~ledger.tsa_authority.TsaAuthority` with the stdlib
``ThreadingHTTPServer``:

- ``POST`` with ``Content-Type: application/timestamp-query`` -> 200,
  ``application/timestamp-reply`` carrying a TimeStampResp (granted, or a rejection with a
  failInfo for a malformed or unsupported request: RFC 3161 reports those in the reply);
- ``POST`` with any other content type -> 415 Unsupported Media Type (the body is not a
  time-stamp query, so there is nothing to answer in RFC 3161 terms);
- no or bad ``Content-Length`` -> 411 / 400; a body over 64 KiB -> 413;
- any other method -> 405 with ``Allow: POST``;
- past ``max_connections`` open connections -> 503 at once (no thread is started for it), and
  a body not received within ``body_deadline_s`` in all -> 408: a slow or stalled client holds
  at most one of a bounded number of threads, for a bounded time.

Bind to port 0 for an ephemeral port; ``.url`` then names the one the OS chose.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast

from ledger.tsa.authority import TsaAuthority

__all__ = ["QUERY_CONTENT_TYPE", "REPLY_CONTENT_TYPE", "TsaServer"]

QUERY_CONTENT_TYPE = "application/timestamp-query"
REPLY_CONTENT_TYPE = "application/timestamp-reply"
MAX_QUERY_BYTES = 64 * 1024
POLL_SECONDS = 0.05  # how soon serve_forever notices stop()
_log = logging.getLogger(__name__)


MAX_CONNECTIONS = 32
BODY_DEADLINE_S = 10.0


def _busy_reply() -> bytes:
    text = b"too many connections; retry shortly\n"
    return (
        b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Retry-After: 1\r\nConnection: close\r\nContent-Length: "
        + str(len(text)).encode()
        + b"\r\n\r\n"
        + text
    )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # past the cap, connections are answered 503 rather than left in SYN
    authority: TsaAuthority
    body_deadline_s: float = BODY_DEADLINE_S
    slots: threading.BoundedSemaphore

    def process_request(self, request: Any, client_address: Any) -> None:
        """Start a handler thread only while a connection slot is free; else answer 503."""
        if not self.slots.acquire(blocking=False):
            try:
                with contextlib.suppress(OSError):
                    request.settimeout(1.0)
                    request.sendall(_busy_reply())
            finally:
                self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _Handler(BaseHTTPRequestHandler):
    """One HTTP exchange; the authority lives on the server object."""

    timeout = 10.0  # seconds a client may take to send its request
    server_version = "DecisionLedgerTSA/1"

    def do_POST(self) -> None:
        """Answer one time-stamp query."""
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type != QUERY_CONTENT_TYPE:
            self._plain(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, f"expected {QUERY_CONTENT_TYPE}")
            return
        body = self._body()
        if body is None:
            return
        try:
            reply = cast(_Server, self.server).authority.respond(body)
        except Exception:
            _log.exception("TSA failed to answer a query")
            self._plain(HTTPStatus.INTERNAL_SERVER_ERROR, "time-stamping failed")
            return
        self._send(HTTPStatus.OK, REPLY_CONTENT_TYPE, reply)

    def _body(self) -> bytes | None:
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            self._plain(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
            return None
        try:
            length = int(length_text)
        except ValueError:
            length = -1
        if length < 0:
            self._plain(HTTPStatus.BAD_REQUEST, "bad Content-Length")
            return None
        if length > MAX_QUERY_BYTES:
            self._plain(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"query over {MAX_QUERY_BYTES} bytes")
            return None
        body = self._read_within(length, cast(_Server, self.server).body_deadline_s)
        if body is None:
            self._plain(HTTPStatus.REQUEST_TIMEOUT, "the request body came too slowly")
            self.close_connection = True
        return body

    def _read_within(self, length: int, deadline_s: float) -> bytes | None:
        """``length`` body bytes, or None when they do not all arrive within the deadline."""
        deadline = time.monotonic() + deadline_s
        chunks, got = [], 0
        try:
            while got < length:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.connection.settimeout(left)
                chunk = self.rfile.read1(length - got)
                if not chunk:
                    return None
                chunks.append(chunk)
                got += len(chunk)
        except TimeoutError:
            return None
        finally:
            self.connection.settimeout(self.timeout)
        return b"".join(chunks)

    def _not_allowed(self) -> None:
        self._plain(HTTPStatus.METHOD_NOT_ALLOWED, "only POST is supported", allow="POST")

    do_GET = do_PUT = do_DELETE = do_PATCH = _not_allowed

    def do_HEAD(self) -> None:
        """HEAD gets 405 too, without a body."""
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self.send_header("Allow", "POST")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _plain(self, status: HTTPStatus, text: str, *, allow: str | None = None) -> None:
        self._send(status, "text/plain; charset=utf-8", f"{text}\n".encode(), allow=allow)

    def _send(
        self, status: HTTPStatus, content_type: str, body: bytes, *, allow: str | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if allow is not None:
            self.send_header("Allow", allow)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Route access logs to ``logging`` instead of stderr."""
        _log.debug("%s - %s", self.address_string(), format % args)


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
    ):
        self._authority = authority
        self._address = (host, port)
        self._max_connections = max_connections
        self._body_deadline_s = body_deadline_s
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def _bind(self) -> _Server:
        if self._httpd is not None:
            raise RuntimeError("TsaServer already started")
        httpd = _Server(self._address, _Handler)
        httpd.authority = self._authority
        httpd.slots = threading.BoundedSemaphore(self._max_connections)
        httpd.body_deadline_s = self._body_deadline_s
        self._httpd = httpd
        return httpd

    @property
    def port(self) -> int:
        """The bound port (after ``start``/``serve``)."""
        if self._httpd is None:
            raise RuntimeError("TsaServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://host:port/``, the URL clients POST queries to."""
        host = self._address[0] or "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/"

    def start(self) -> TsaServer:
        """Bind and serve in a daemon thread; returns self."""
        httpd = self._bind()
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(POLL_SECONDS,), name="tsa-http", daemon=True
        )
        self._thread.start()
        return self

    def serve(self, *, on_bound: Callable[[], None] | None = None) -> None:
        """Bind, call ``on_bound``, serve in this thread until ``stop()`` from another."""
        httpd = self._bind()
        try:
            if on_bound is not None:
                on_bound()
            httpd.serve_forever(POLL_SECONDS)
        finally:
            httpd.server_close()

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
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
