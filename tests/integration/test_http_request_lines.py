"""Odd request lines sent over a raw socket to real HTTP listeners: the tiles port answers
CONNECT and ``OPTIONS *`` with 405 and ``Allow``, serves an absolute-form target by its path
(RFC 9112 §3.2.2), and never answers 5xx or logs a traceback."""

from __future__ import annotations

import logging
import socket
import urllib.parse
from pathlib import Path

import pytest

from tests.harness import running_server

pytestmark = pytest.mark.integration


def exchange(host: str, port: int, request_line: str) -> tuple[int, dict[str, str], bytes]:
    """Send one request (``Connection: close``) and read the whole answer: status, headers,
    body."""
    head = f"{request_line}\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
    data = b""
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(head.encode("ascii"))
        while chunk := sock.recv(65536):
            data += chunk
    header_block, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = header_block.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def test_odd_request_lines_on_the_tiles_port(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with running_server(tmp_path / "data") as (server, _remote, _signer):
        url = server.app.tiles_url
        assert url is not None
        split = urllib.parse.urlsplit(url)
        host, port = split.hostname, split.port
        assert host is not None and port is not None
        for line in ("CONNECT example.com:443 HTTP/1.1", "OPTIONS * HTTP/1.1"):
            status, headers, _ = exchange(host, port, line)
            assert status == 405, line
            assert headers["allow"] == "GET, HEAD", line
        status, _, body = exchange(host, port, "OPTIONS /checkpoint HTTP/1.1")
        assert status == 405
        status, _, body = exchange(host, port, f"GET http://{host}:{port}/checkpoint HTTP/1.1")
        assert status == 200
        assert body.startswith(b"ledger.test/")
        status, _, _ = exchange(host, port, "GET http://elsewhere.example/tile/0/000 HTTP/1.1")
        assert status == 404  # the path is served; the tree is empty
        status, _, _ = exchange(host, port, "HEAD http://elsewhere.example/nothing HTTP/1.1")
        assert status == 404
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
