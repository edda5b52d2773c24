"""The gRPC server's connection limits (``[limits]``, ``ledger.api.server.connection_options``)
as a client meets them on raw sockets: a connection that never completes its HTTP/2 handshake
is closed after the handshake timeout, an idle connection gets GOAWAY after ``grpc_idle_s``,
and past ``grpc_max_connections`` new connections are closed at once, while a client that is
already connected goes on appending."""

from __future__ import annotations

import hashlib
import socket
import time
from pathlib import Path

import pytest

from tests.harness import running_server

pytestmark = pytest.mark.integration

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
GOAWAY = 7


def connect(address: str, first: bytes = b"") -> socket.socket:
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    if first:
        sock.sendall(first)
    return sock


def frames_until_closed(sock: socket.socket, seconds: float) -> list[int]:
    """The HTTP/2 frame types the server sends until it closes (within ``seconds``)."""
    sock.settimeout(seconds)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:  # closed with unread data: a reset, also a close
        pass
    kinds, at = [], 0
    while at + 9 <= len(data):
        length = int.from_bytes(data[at : at + 3], "big")
        kinds.append(data[at + 3])
        at += 9 + length
    return kinds


def test_a_silent_and_an_idle_connection_are_closed(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", grpc_idle_s=1.0, http_header_timeout_s=1.0) as (
        server,
        _,
        _,
    ):
        silent = connect(server.address)  # no HTTP/2 preface at all
        start = time.monotonic()
        frames_until_closed(silent, 10)
        assert time.monotonic() - start < 5
        silent.close()

        idle = connect(server.address, PREFACE)
        start = time.monotonic()
        assert GOAWAY in frames_until_closed(idle, 15)
        assert time.monotonic() - start < 10
        idle.close()


def test_connections_past_the_cap_are_closed_and_the_writer_goes_on(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", grpc_max_connections=4) as (server, client, _):
        client.append([hashlib.sha256(b"before").digest()])  # connected before the others
        held = [connect(server.address, PREFACE) for _ in range(3)]  # with the client's: 4
        try:
            extra = connect(server.address, PREFACE)
            start = time.monotonic()
            frames_until_closed(extra, 10)
            assert time.monotonic() - start < 3  # at once, not after the 300 s idle limit
            extra.close()
            client.append([hashlib.sha256(b"during").digest()])  # the writer is not hurt
        finally:
            for sock in held:
                sock.close()
