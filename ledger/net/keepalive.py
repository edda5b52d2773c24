"""One blocking HTTP/1.1 connection per thread to one origin, kept open between requests.

For callers that send many small requests from worker threads and count CPU per request: the
object store's PUTs (``ledger.objstore.bucket``, one per tile; a urllib3 pool costs ~0.3 ms more
CPU per request there, measured side by side). ``KeepAlive.request`` answers every status as
an ``Answer`` for the caller to judge; transport failures are the error tree's:

- no answer within ``timeout_s`` (connect, or between bytes) -> ``DeadlineExceededError``;
- refused, reset, a malformed answer -> ``UnavailableError``.

A kept connection that the server had closed meanwhile is tried once more on a new one (never
after a timeout: a stalled server costs one timeout, not two). The body is read whole: callers
talk to servers they chose (their own bucket), not to untrusted ones.

The request goes out in one ``sendall`` (request line, headers and body in one buffer, on a
socket with ``TCP_NODELAY``) and the answer is read by a small HTTP/1.1 reader (status line,
headers, then ``Content-Length``, chunked, or until close; interim 1xx answers before the final
one are dropped): ``http.client`` sends the head and the body in two writes and parses every
answer's headers with the ``email`` package, which cost more CPU per PUT than the rest of the
request together.
"""

from __future__ import annotations

import socket
import ssl
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from ledger.core.errors import DeadlineExceededError, UnavailableError
from ledger.core.redact import redact_url

__all__ = ["Answer", "KeepAlive"]


@dataclass(frozen=True, slots=True)
class Answer:
    """An answered request: its status, headers (names lower-cased) and body."""

    status: int
    headers: dict[str, str]
    body: bytes


_MAX_LINE = 65_536
_MAX_HEADERS = 100
_MAX_INTERIM = 8  # 1xx answers before the final one


class _Malformed(Exception):
    """An answer that is not HTTP/1.x."""


class _Conn:
    """One open connection: its socket and a buffered reader over it."""

    __slots__ = ("reader", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def line(self) -> bytes:
        data = self.reader.readline(_MAX_LINE + 1)
        if len(data) > _MAX_LINE:
            raise _Malformed("a header line longer than 64 KiB")
        return data

    def exactly(self, count: int) -> bytes:
        data = self.reader.read(count)
        if len(data) != count:
            raise _Malformed(f"the answer ended after {len(data)} of {count} body bytes")
        return data

    def answer(self, method: str) -> tuple[Answer, bool]:
        """Read one final answer; whether the connection must close after it. Interim answers
        (1xx but 101, RFC 9110 section 15.2) are read and dropped: at most ``_MAX_INTERIM``."""
        for _ in range(_MAX_INTERIM + 1):
            version, status, headers = self._head()
            if not 100 <= status < 200 or status == 101:
                break
        else:
            raise _Malformed(f"more than {_MAX_INTERIM} interim (1xx) answers")
        tokens = headers.get("connection", "").lower()
        close = "close" in tokens or (version == "HTTP/1.0" and "keep-alive" not in tokens)
        if method == "HEAD" or status in (101, 204, 304):
            return Answer(status, headers, b""), close or status == 101
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return Answer(status, headers, self._chunked()), close
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise _Malformed(f"Content-Length {length[:40]!r}")
            return Answer(status, headers, self.exactly(int(length))), close
        return Answer(status, headers, self.reader.read()), True  # until the server closes

    def _head(self) -> tuple[str, int, dict[str, str]]:
        """An answer's status line and headers: (HTTP version, status, headers)."""
        status_line = self.line()
        if not status_line:
            raise ConnectionResetError("the server closed the connection")
        version, _, rest = status_line.decode("latin-1").rstrip("\r\n").partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise _Malformed(f"not an HTTP/1.x status line: {status_line[:80]!r}")
        headers: dict[str, str] = {}
        for _ in range(_MAX_HEADERS + 1):
            raw = self.line()
            if raw in (b"\r\n", b"\n", b""):
                break
            name, sep, value = raw.decode("latin-1").partition(":")
            if not sep:
                raise _Malformed(f"a header line without a colon: {raw[:80]!r}")
            headers[name.strip().lower()] = value.strip()
        else:
            raise _Malformed(f"more than {_MAX_HEADERS} header lines")
        return version, int(code), headers

    def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = self.line().split(b";", 1)[0].strip()
            try:
                count = int(size, 16)
            except ValueError:
                raise _Malformed(f"a chunk size {size[:40]!r}") from None
            if count == 0:
                while self.line() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self.exactly(count))
            self.exactly(2)  # CRLF after the chunk


class KeepAlive:
    """Connections to ``origin`` (``http://host:port`` or ``https://...``), one per thread."""

    def __init__(self, origin: str, *, timeout_s: float, cafile: str | None = None) -> None:
        """``cafile``: the PEM bundle that HTTPS servers' certificates must chain to (None: the
        system's trusted roots)."""
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{redact_url(origin)}: want http://host[:port] or https://...")
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self._host, self._https = parts.netloc, parts.scheme == "https"
        self._address = (parts.hostname or "", parts.port or (443 if self._https else 80))
        self._tls = ssl.create_default_context(cafile=cafile) if self._https else None
        self.timeout_s = timeout_s
        self._local = threading.local()  # .conn: this thread's connection

    def request(self, method: str, path: str, *, body: bytes, headers: dict[str, str]) -> Answer:
        """Send one request on this thread's connection (opened or reopened as needed)."""
        head = [f"{method} {path} HTTP/1.1", f"Host: {self._host}"]
        head += [f"{name}: {value}" for name, value in headers.items() if name.lower() != "host"]
        head += [f"Content-Length: {len(body)}", "", ""]
        message = "\r\n".join(head).encode("latin-1") + body
        for fresh in (False, True):
            try:
                conn, reused = self._connection(fresh)
            except TimeoutError:
                raise DeadlineExceededError(
                    f"{self.origin}{path}: no connection within {self.timeout_s:g} s"
                ) from None
            except OSError as exc:
                raise UnavailableError(
                    f"{self.origin}{path}: {str(exc) or type(exc).__name__}"
                ) from None
            try:
                conn.sock.sendall(message)
                answer, close = conn.answer(method)
            except TimeoutError:
                self._drop(conn)
                raise DeadlineExceededError(
                    f"{self.origin}{path}: no answer within {self.timeout_s:g} s"
                ) from None
            except (OSError, _Malformed) as exc:
                self._drop(conn)
                if reused and not fresh and not isinstance(exc, _Malformed):
                    continue  # a kept connection the server had closed: once more, on a new one
                raise UnavailableError(
                    f"{self.origin}{path}: {str(exc) or type(exc).__name__}"
                ) from None
            if close:
                self._drop(conn)
            return answer
        raise AssertionError("unreachable")  # pragma: no cover  (the loop returns or raises)

    def close(self) -> None:
        """Close this thread's connection (other threads' close with their thread)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            self._drop(conn)

    def _drop(self, conn: _Conn) -> None:
        conn.close()
        self._local.conn = None

    def _connection(self, fresh: bool) -> tuple[_Conn, bool]:
        """This thread's connection, and whether it served a request before."""
        conn: _Conn | None = getattr(self._local, "conn", None)
        if conn is not None and not fresh:
            return conn, True
        if conn is not None:
            self._drop(conn)
        sock = socket.create_connection(self._address, timeout=self.timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self._address[0])
        except OSError:
            sock.close()
            raise
        conn = _Conn(sock)
        self._local.conn = conn
        return conn, False
