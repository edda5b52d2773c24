"""TSAs over HTTP: the embedded TSA server, the client, and OpenSSL on both sides.

OpenSSL proves interoperability both ways: ``openssl ts -verify`` accepts the embedded TSA's
tokens, and the client accepts tokens from ``openssl ts -reply`` (a TSA it did not write).
"""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from ledger.core.errors import FormatError, TimestampError
from ledger.timestamp.asn1 import parse_response
from ledger.timestamp.rfc3161 import build_request, imprint_for_checkpoint_body, verify_token
from ledger.tsa.client import TSA_POLICY_OID, TsaAuthority, TsaClient, TsaServer, run_tsa
from tests.tsa_openssl import OPENSSL, OPENSSL_POLICY, openssl_tsa, run_openssl

pytestmark = pytest.mark.integration
needs_openssl = pytest.mark.skipif(OPENSSL is None, reason="openssl is not installed")

BODY = b"example.com/decision-ledger\n7\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
DIGEST = imprint_for_checkpoint_body(BODY)


@pytest.fixture(scope="module")
def authority() -> TsaAuthority:
    return TsaAuthority.generate("Integration TSA")


@pytest.fixture
def server(authority: TsaAuthority) -> Iterator[TsaServer]:
    with TsaServer(authority, port=0) as running:
        yield running


def _post(url: str, body: bytes, content_type: str = "application/timestamp-query") -> bytes:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": content_type}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers.get_content_type() == "application/timestamp-reply"
        return bytes(response.read())


def _status(url: str, method: str, headers: dict[str, str], body: bytes = b"") -> int:
    host, port = url.removeprefix("http://").rstrip("/").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.putrequest(method, "/")
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders(body or None)
        return conn.getresponse().status
    finally:
        conn.close()


# --- embedded TSA over HTTP -------------------------------------------------------------------


def test_client_round_trip_with_the_embedded_server(
    server: TsaServer, authority: TsaAuthority
) -> None:
    client = TsaClient(server.url, timeout=10, roots=[authority.root_cert])
    token, verified = client.timestamp(DIGEST)
    assert verified.policy == TSA_POLICY_OID and verified.digest == DIGEST
    again = verify_token(token, digest=DIGEST, roots=[authority.root_cert])
    assert again.serial_number == verified.serial_number


def test_client_refuses_a_tsa_outside_its_roots(server: TsaServer) -> None:
    stranger = TsaAuthority.generate("Stranger")
    client = TsaClient(server.url, timeout=10, roots=[stranger.root_cert])
    with pytest.raises(TimestampError) as info:
        client.timestamp(DIGEST)
    assert info.value.check == "chain"


def test_server_answers_http_errors(server: TsaServer) -> None:
    query = {"Content-Type": "application/timestamp-query"}
    assert _status(server.url, "GET", {}) == 405
    assert _status(server.url, "HEAD", {}) == 405
    text = {"Content-Type": "text/plain", "Content-Length": "1"}
    assert _status(server.url, "POST", text, b"x") == 415
    assert _status(server.url, "POST", query) == 411
    assert _status(server.url, "POST", {**query, "Content-Length": "999999"}) == 413


def test_server_rejects_malformed_queries_in_the_reply(server: TsaServer) -> None:
    status = parse_response(_post(server.url, b"\x30\x03\x02\x01\x05junk"))
    assert (status.status, status.fail_info) == ("rejection", ("bad_data_format",))


def _serve_once(state_dir: Path) -> tuple[list[int], bytes]:
    """Run ``run_tsa`` in a thread, take 5 tokens, stop it: (serials, root PEM)."""
    ready = threading.Event()
    started: list[tuple[TsaServer, TsaAuthority]] = []

    def on_ready(srv: TsaServer, auth: TsaAuthority) -> None:
        started.append((srv, auth))
        ready.set()

    thread = threading.Thread(
        target=run_tsa, args=("127.0.0.1", 0, state_dir), kwargs={"on_ready": on_ready}
    )
    thread.start()
    assert ready.wait(10)
    srv, auth = started[0]
    try:
        root = x509.load_pem_x509_certificate((state_dir / "root.pem").read_bytes())
        client = TsaClient(srv.url, timeout=10, roots=[root])
        serials = [client.timestamp(DIGEST)[1].serial_number for _ in range(5)]
    finally:
        srv.stop()
        thread.join(10)
    assert not thread.is_alive()
    return serials, auth.root_pem()


def test_run_tsa_keeps_its_root_and_serials_across_restarts(tmp_path: Path) -> None:
    first, root1 = _serve_once(tmp_path / "tsa")
    second, root2 = _serve_once(tmp_path / "tsa")
    assert root1 == root2
    assert first + second == sorted(set(first + second))


# --- the client against broken TSAs -----------------------------------------------------------


class _Broken(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        status, content_type = (500, "text/plain") if self.path == "/500" else (200, "text/html")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"no")

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.mark.parametrize("path", ["/500", "/html"])
def test_client_reports_http_failures(authority: TsaAuthority, path: str) -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Broken)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}{path}"
        with pytest.raises(TimestampError) as info:
            TsaClient(url, timeout=5, roots=[authority.root_cert]).timestamp(DIGEST)
        assert info.value.check == "http"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_client_reports_refused_connections_and_timeouts(authority: TsaAuthority) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # accepts, never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        with pytest.raises(TimestampError) as info:
            TsaClient(url, timeout=0.3, roots=[authority.root_cert]).timestamp(DIGEST)
        assert info.value.check == "network"
    with pytest.raises(TimestampError) as info:  # the port is closed now
        TsaClient(url, timeout=2, roots=[authority.root_cert]).timestamp(DIGEST)
    assert info.value.check == "network"


def test_client_refuses_bad_configuration(authority: TsaAuthority) -> None:
    with pytest.raises(FormatError):
        TsaClient("file:///etc/passwd", timeout=1, roots=[authority.root_cert])
    with pytest.raises(FormatError):
        TsaClient("http://127.0.0.1:1/", timeout=1, roots=[])


# --- OpenSSL on both sides --------------------------------------------------------------------


@needs_openssl
def test_openssl_verifies_the_embedded_tsa_tokens(
    server: TsaServer, authority: TsaAuthority, tmp_path: Path
) -> None:
    request = build_request(DIGEST)
    (tmp_path / "q.tsq").write_bytes(request.der)
    (tmp_path / "r.tsr").write_bytes(_post(server.url, request.der))
    (tmp_path / "root.pem").write_bytes(authority.root_pem())
    (tmp_path / "tsa.pem").write_bytes(authority.tsa_pem())
    trust = ("-in", "r.tsr", "-CAfile", "root.pem", "-untrusted", "tsa.pem")
    by_digest = run_openssl("ts", "-verify", "-digest", DIGEST.hex(), *trust, cwd=tmp_path)
    assert by_digest.returncode == 0 and "Verification: OK" in by_digest.stdout, by_digest.stderr
    by_query = run_openssl("ts", "-verify", "-queryfile", "q.tsq", *trust, cwd=tmp_path)
    assert by_query.returncode == 0 and "Verification: OK" in by_query.stdout, by_query.stderr
    other = imprint_for_checkpoint_body(b"another checkpoint\n")
    wrong = run_openssl("ts", "-verify", "-digest", other.hex(), *trust, cwd=tmp_path)
    assert wrong.returncode != 0


@needs_openssl
@pytest.mark.parametrize(
    ("key_type", "ess_alg"),
    [("rsa", "sha256"), ("rsa", "sha1"), ("ec", "sha256"), ("ec384", "sha384")],
    ids=["rsa-essv2", "rsa-essv1", "p256-essv2", "p384-essv2-sha384"],
)
def test_client_accepts_openssl_tsa_tokens(tmp_path: Path, key_type: str, ess_alg: str) -> None:
    with openssl_tsa(tmp_path, key_type=key_type, ess_cert_id_alg=ess_alg) as (url, root, tsa):
        roots = [x509.load_pem_x509_certificate(root)]
        token, verified = TsaClient(url, timeout=10, roots=roots).timestamp(DIGEST)
    assert verified.policy == OPENSSL_POLICY
    tsa_der = x509.load_pem_x509_certificate(tsa).public_bytes(Encoding.DER)
    assert verified.signer_certificate_der == tsa_der
    assert verified.accuracy == timedelta(seconds=1, milliseconds=500, microseconds=100)
    with pytest.raises(TimestampError) as info:
        verify_token(token, digest=imprint_for_checkpoint_body(b"other"), roots=roots)
    assert info.value.check == "imprint"


@needs_openssl
def test_client_refuses_openssl_tokens_from_an_untrusted_root(
    tmp_path: Path, authority: TsaAuthority
) -> None:
    with openssl_tsa(tmp_path) as (url, _root, _tsa):
        client = TsaClient(url, timeout=10, roots=[authority.root_cert])
        with pytest.raises(TimestampError) as info:
            client.timestamp(DIGEST)
    assert info.value.check == "chain"
