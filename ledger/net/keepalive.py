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
"""

from __future__ import annotations

import http.client
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


class KeepAlive:
    """Connections to ``origin`` (``http://host:port`` or ``https://...``), one per thread."""

    def __init__(self, origin: str, *, timeout_s: float) -> None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{redact_url(origin)}: want http://host[:port] or https://...")
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self._host, self._https = parts.netloc, parts.scheme == "https"
        self.timeout_s = timeout_s
        self._local = threading.local()  # .conn: this thread's connection

    def request(self, method: str, path: str, *, body: bytes, headers: dict[str, str]) -> Answer:
        """Send one request on this thread's connection (opened or reopened as needed)."""
        for fresh in (False, True):
            conn, reused = self._connection(fresh)
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except TimeoutError:
                self._drop(conn)
                raise DeadlineExceededError(
                    f"{self.origin}{path}: no answer within {self.timeout_s:g} s"
                ) from None
            except (OSError, http.client.HTTPException) as exc:
                self._drop(conn)
                if reused and not fresh:
                    continue  # a kept connection the server had closed: once more, on a new one
                raise UnavailableError(
                    f"{self.origin}{path}: {str(exc) or type(exc).__name__}"
                ) from None
            if response.will_close:
                self._drop(conn)
            headers = {k.lower(): v for k, v in response.getheaders()}
            return Answer(response.status, headers, data)
        raise AssertionError("unreachable")  # pragma: no cover  (the loop returns or raises)

    def close(self) -> None:
        """Close this thread's connection (other threads' close with their thread)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            self._drop(conn)

    def _drop(self, conn: http.client.HTTPConnection) -> None:
        conn.close()
        self._local.conn = None

    def _connection(self, fresh: bool) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it served a request before."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and not fresh:
            return conn, True
        if conn is not None:
            conn.close()
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = kind(self._host, timeout=self.timeout_s)
        self._local.conn = conn
        return conn, False
