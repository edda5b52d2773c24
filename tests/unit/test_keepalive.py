"""``ledger.net.keepalive`` against a real HTTP/1.1 server (``http.server`` on port 0): every
way an answer may end (Content-Length, chunked, close), one connection kept per thread, a kept
connection the server closed tried once more, errors in the error tree."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from ledger.core.errors import DeadlineExceededError, UnavailableError
from ledger.net.keepalive import KeepAlive


class _Handler(BaseHTTPRequestHandler):
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

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response_only(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.seen = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_every_way_an_answer_ends(server: str) -> None:
    client = KeepAlive(server, timeout_s=5)
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
    bodies = [body for _, _, body, _ in _Handler.seen]
    assert bodies == [b"x" * 3000, b"", b"b", b"c", b"d"]
    ports = [port for *_, port in _Handler.seen]
    assert len(set(ports[:4])) == 1 and ports[4] != ports[0]  # kept open until "close"
    client.close()


def test_a_kept_connection_the_server_closed_is_tried_once_more(server: str) -> None:
    client = KeepAlive(server, timeout_s=5)
    assert client.request("PUT", "/forget", body=b"1", headers={}).status == 200
    assert client.request("PUT", "/length", body=b"2", headers={}).body == b"hello"
    assert [body for _, _, body, _ in _Handler.seen] == [b"1", b"2"]


def test_errors_are_the_error_trees(server: str) -> None:
    client = KeepAlive(server, timeout_s=5)
    with pytest.raises(UnavailableError, match=r"not an HTTP/1\.x status line"):
        client.request("PUT", "/garbage", body=b"", headers={})
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(UnavailableError):
        KeepAlive(f"http://127.0.0.1:{port}", timeout_s=5).request("PUT", "/", body=b"", headers={})
    with socket.socket() as silent:  # accepts (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        slow = KeepAlive(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.3)
        with pytest.raises(DeadlineExceededError, match=r"no answer within 0\.3 s"):
            slow.request("PUT", "/", body=b"", headers={})
