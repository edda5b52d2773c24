"""``ledger.net.keepalive``: one kept-open connection per thread, failures as the error tree's;
every way an answer may end (Content-Length, chunked, no content, until close) read whole."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

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


class _Shapes(BaseHTTPRequestHandler):
    """Every way an answer may end, by path (the small HTTP/1.1 reader's cases)."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[str, str, bytes, int]]] = []  # method, path, body, client port

    def log_message(self, *args: object) -> None:
        pass

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append(("PUT", self.path, body, self.client_address[1]))
        if self.path == "/length":
            self._answer(201, [("ETag", '"e1"'), ("Content-Length", "5")], b"hello")
        elif self.path == "/chunked":
            chunks = b"3\r\nabc\r\n4;x=1\r\ndefg\r\n0\r\nTrailer: t\r\n\r\n"
            self._answer(200, [("Transfer-Encoding", "chunked")], chunks)
        elif self.path == "/until-close":
            self._answer(412, [("Connection", "close")], b"<Code>PreconditionFailed</Code>")
        elif self.path == "/forget":  # answers, then closes without saying so
            self._answer(200, [("Content-Length", "0")], b"")
            self.close_connection = True
        elif self.path == "/garbage":
            self.wfile.write(b"NOT HTTP\r\n\r\n")
            self.close_connection = True
        elif self.path == "/no-content":
            self._answer(204, [], b"")
        elif self.path == "/interim":  # two interim answers, then the final one
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.wfile.write(b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n")
            self._answer(201, [("ETag", '"e2"'), ("Content-Length", "2")], b"ok")
        elif self.path == "/endless-interim":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n" * 20)
            self.close_connection = True

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response_only(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def shapes() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Shapes)
    _Shapes.seen = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_every_way_an_answer_ends(shapes: str) -> None:
    client = KeepAlive(shapes, timeout_s=5)
    answer = client.request("PUT", "/length", body=b"x" * 3000, headers={"X-A": "1"})
    assert (answer.status, answer.body, answer.headers["etag"]) == (201, b"hello", '"e1"')
    chunked = client.request("PUT", "/chunked", body=b"", headers={})
    assert (chunked.status, chunked.body) == (200, b"abcdefg")
    empty = client.request("PUT", "/no-content", body=b"b", headers={})
    assert (empty.status, empty.body) == (204, b"")
    closed = client.request("PUT", "/until-close", body=b"c", headers={})
    assert closed.status == 412 and b"PreconditionFailed" in closed.body
    again = client.request("PUT", "/length", body=b"d", headers={})
    assert again.body == b"hello"
    bodies = [body for _, _, body, _ in _Shapes.seen]
    assert bodies == [b"x" * 3000, b"", b"b", b"c", b"d"]
    ports = [port for *_, port in _Shapes.seen]
    assert len(set(ports[:4])) == 1 and ports[4] != ports[0]  # kept open until "close"
    client.close()


def test_a_kept_connection_closed_without_a_word_is_tried_once_more(shapes: str) -> None:
    client = KeepAlive(shapes, timeout_s=5)
    assert client.request("PUT", "/forget", body=b"1", headers={}).status == 200
    assert client.request("PUT", "/length", body=b"2", headers={}).body == b"hello"
    assert [body for _, _, body, _ in _Shapes.seen] == [b"1", b"2"]


def test_a_malformed_answer_is_unavailable(shapes: str) -> None:
    client = KeepAlive(shapes, timeout_s=5)
    with pytest.raises(UnavailableError, match=r"not an HTTP/1\.x status line"):
        client.request("PUT", "/garbage", body=b"", headers={})


def test_interim_answers_are_dropped_and_the_final_one_read(shapes: str) -> None:
    """1xx answers before the final one (RFC 9110 section 15.2) are not the answer: the
    connection stays in step and is kept for the next request."""
    client = KeepAlive(shapes, timeout_s=5)
    answer = client.request("PUT", "/interim", body=b"i", headers={})
    assert (answer.status, answer.body, answer.headers["etag"]) == (201, b"ok", '"e2"')
    assert "link" not in answer.headers  # the early hints' headers are not the answer's
    assert client.request("PUT", "/length", body=b"n", headers={}).body == b"hello"
    ports = [port for *_, port in _Shapes.seen]
    assert len(set(ports)) == 1
    with pytest.raises(UnavailableError, match="interim"):
        client.request("PUT", "/endless-interim", body=b"", headers={})
    client.close()
