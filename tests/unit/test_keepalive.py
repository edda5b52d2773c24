"""``ledger.net.keepalive``: one kept-open connection per thread, failures as the error tree's."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ledger.core.errors import DeadlineExceededError, UnavailableError
from ledger.net.keepalive import KeepAlive


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    connections: set[int] = set()  # noqa: RUF012  (shared by the test server's threads)

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Handler.connections.add(self.client_address[1])  # a new connection, a new port
        self.send_response(200 if body != b"missing" else 404)
        self.send_header("ETag", '"e1"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if body == b"close":
            self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_answers_any_status_and_keeps_the_connection() -> None:
    _Handler.connections = set()
    with _server() as origin:
        conns = KeepAlive(origin, timeout_s=5)
        first = conns.request("PUT", "/a", body=b"one", headers={})
        assert (first.status, first.headers["etag"], first.body) == (200, '"e1"', b"one")
        assert conns.request("PUT", "/b", body=b"missing", headers={}).status == 404
        assert len(_Handler.connections) == 1  # both on one connection
        conns.close()


def test_a_connection_the_server_closed_is_replaced_once() -> None:
    _Handler.connections = set()
    with _server() as origin:
        conns = KeepAlive(origin, timeout_s=5)
        assert conns.request("PUT", "/a", body=b"close", headers={}).status == 200
        assert conns.request("PUT", "/b", body=b"two", headers={}).body == b"two"
        assert len(_Handler.connections) == 2


def test_a_silent_server_is_a_deadline_and_a_closed_port_unavailable() -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (backlog), never answers
    try:
        silent = KeepAlive(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout_s=0.3)
        with pytest.raises(DeadlineExceededError, match=r"no answer within 0\.3 s"):
            silent.request("PUT", "/a", body=b"x", headers={})
    finally:
        listener.close()
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(UnavailableError):
        KeepAlive(f"http://127.0.0.1:{port}", timeout_s=1).request(
            "PUT", "/a", body=b"x", headers={}
        )


def test_only_http_origins() -> None:
    with pytest.raises(ValueError, match="want http"):
        KeepAlive("ftp://example.test", timeout_s=1)
