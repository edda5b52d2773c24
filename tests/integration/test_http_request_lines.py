"""Requests sent over a raw socket to real HTTP listeners: the tiles port answers CONNECT and
``OPTIONS *`` with 405 and ``Allow`` and serves an absolute-form target by its path (RFC 9112
§3.2.2); ``ledger witness serve`` answers a body that never arrives with 408 and drops a client
that leaves mid-body; neither answers 5xx or logs a traceback. Entry bundles are sent
gzip-encoded even to a client that asks for no encoding, and the tile client decodes them."""

from __future__ import annotations

import gzip
import hashlib
import logging
import signal
import socket
import time
import urllib.parse
from pathlib import Path

import pytest

from ledger.core import tiles
from ledger.core.checkpoint import Ed25519Signer
from ledger_client.remote.tiles import TileClient
from tests import processes
from tests.harness import running_server
from tests.witness_harness import WitnessProcess, make_witness_key

pytestmark = pytest.mark.integration


def exchange(
    host: str, port: int, request_line: str, extra: str = ""
) -> tuple[int, dict[str, str], bytes]:
    """Send one request (``Connection: close``, ``extra`` header lines) and read the whole
    answer: status, headers, body."""
    head = f"{request_line}\r\nHost: {host}:{port}\r\n{extra}Connection: close\r\n\r\n"
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


def test_witness_times_out_a_body_that_never_arrives_and_drops_a_client_that_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_WITNESS_BODY_TIMEOUT_S", "1")
    key_file, _ = make_witness_key(tmp_path, "w.test")
    log_key = Ed25519Signer.generate("log.test/odd").verifier().key_string()
    witness = WitnessProcess(key_file, tmp_path / "state", [log_key])
    try:
        host, _, port_text = witness.address.rpartition(":")
        head = (
            f"POST /add-checkpoint HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100\r\n\r\nold 0\n"
        )
        with socket.create_connection((host, int(port_text)), timeout=8) as sock:
            sock.sendall(head.encode("ascii"))
            started = time.monotonic()
            answer = b""
            while chunk := sock.recv(65536):  # the server closes after its 408
                answer += chunk
            assert time.monotonic() - started < 6
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b"did not arrive within 1 s" in answer
        with socket.create_connection((host, int(port_text)), timeout=8) as sock:
            sock.sendall(head.encode("ascii"))  # and leave before the body is complete
        status, _, _ = exchange(host, int(port_text), "GET /add-checkpoint HTTP/1.1")
        assert status == 405  # still serving
    finally:
        witness.proc.send_signal(signal.SIGTERM)
        processes.wait(witness.proc, 30)
        assert witness.proc.stderr is not None
        log = witness.proc.stderr.read()
        witness.stop()
    assert "Traceback" not in log
    assert "Error handling request" not in log


def test_entry_bundles_are_sent_gzip_encoded_and_the_tile_client_decodes_them(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path / "data") as (server, remote, _signer):
        leaves = [hashlib.sha256(b"gz-%d" % i).digest() for i in range(300)]
        size = remote.append(leaves, wait_for_checkpoint=True).checkpoint
        assert size is not None and size.size == 300
        url = server.app.tiles_url
        assert url is not None
        split = urllib.parse.urlsplit(url)
        host, port = split.hostname, split.port
        assert host is not None and port is not None
        stored = [e.leaf for e in remote.entries(0, 300)]
        for path, start, width in (
            ("/tile/entries/000", 0, 256),
            ("/tile/entries/001.p/44", 256, 44),
        ):
            status, headers, body = exchange(
                host, port, f"GET {path} HTTP/1.1", "Accept-Encoding: identity\r\n"
            )
            assert status == 200 and headers["content-encoding"] == "gzip", path
            bundle = gzip.decompress(body)
            assert len(body) < len(bundle)
            assert tiles.decode_entry_bundle(bundle, width) == stored[start : start + width]
            assert tiles.gunzip_bundle(body) == bundle
        status, headers, body = exchange(host, port, "HEAD /tile/entries/000 HTTP/1.1")
        assert status == 200 and headers["content-encoding"] == "gzip" and body == b""
        status, headers, _ = exchange(host, port, "GET /tile/0/000 HTTP/1.1")
        assert status == 200 and "content-encoding" not in headers  # hash tiles as they are
        client = TileClient(url)
        assert client.leaves(250, 50, 300) == stored[250:]
