"""Failures that explain themselves (issue 22, item 9), on real sockets: an SDK client pointed at a
closed port, or speaking plaintext to a TLS server (or TLS to a plaintext one), says so within
5 s, names where its records stay and the command that delivers them later; the records stay
spooled. ``ledger serve`` keeps grpc core's per-connection chatter out of its log."""

from __future__ import annotations

import datetime as dt
import json
import socket
import time
import warnings
from pathlib import Path

import pytest

from ledger.api.auth import TokenStore
from ledger.api.tls import make_dev_certs
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import UnavailableError
from ledger.fileio.keys import write_signer
from ledger.records.commitments import commit
from ledger.records.decision import DecisionRecord, MemoryWrite, new_record_id
from ledger_client.remote.connection import Connection
from ledger_client.remote.log import RemoteLog
from ledger_client.sdk.client import DeliveryError, DeliveryWarning, LedgerClient
from ledger_client.sdk.spool import read_spool
from tests.harness import ORIGIN, ServerProcess, running_server
from tests.waits import wait_until


def a_record(n: int) -> DecisionRecord:
    committed, _ = commit("v", field_path="payload.value")
    return DecisionRecord(
        record_id=new_record_id(),
        run_id="explain",
        step=n,
        time="2026-01-01T00:00:00.000Z",
        agent="agent-e",
        payload=MemoryWrite(key="k", value=committed, source="user", trust_label="trusted"),
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def first_warning(
    connection: str | Connection, spool: Path, raises: type[Exception] = TimeoutError
) -> tuple[str, float, str]:
    """Submit one record; the first ``DeliveryWarning``, how long it took, and the
    error (``raises``) of a short ``append``. The records stay in the spool."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeliveryWarning)
        start = time.monotonic()
        client = LedgerClient(connection, spool=spool, register_atexit=False, close_timeout=0.5)
        try:
            client.submit(a_record(1))
            wait_until(
                lambda: any(w.category is DeliveryWarning for w in caught),
                timeout=10,
                what="a DeliveryWarning",
            )
            took = time.monotonic() - start
            with pytest.raises(raises) as timed_out:
                client.append(a_record(2), timeout=0.5)
        finally:
            client.close()
    message = next(str(w.message) for w in caught if w.category is DeliveryWarning)
    # nothing lost: the records wait in the spool (after a refusal, the client takes no more)
    assert len(read_spool(spool)[1]) == (2 if raises is TimeoutError else 1)
    return message, took, str(timed_out.value)


def test_a_closed_port_says_connection_refused_and_names_the_spool_command(
    tmp_path: Path,
) -> None:
    address = f"127.0.0.1:{closed_port()}"
    spool = tmp_path / "agent.spool"
    message, took, timeout_message = first_warning(address, spool)
    assert took < 5, took
    for text in (message, timeout_message):
        assert "connection refused" in text.lower()
        assert f"ledger receipt run --spool {spool} --server {address}" in text


def test_plaintext_against_tls_and_tls_against_plaintext_get_a_hint(tmp_path: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    certs = make_dev_certs(tmp_path / "tls", hosts=["localhost", "127.0.0.1"], clients=[], now=now)
    with running_server(
        tmp_path / "tls-data", tls_server_cert=certs.server_cert, tls_server_key=certs.server_key
    ) as (server, _, _):
        address = f"127.0.0.1:{server.app.port}"
        message, took, _ = first_warning(address, tmp_path / "plain.spool")
        assert took < 5, took
        assert "the server may be using TLS: pass --tls-ca / LEDGER_TLS_CA" in message
        assert "ledger receipt run --spool" in message
        with RemoteLog(address, timeout=5) as plaintext, pytest.raises(UnavailableError) as err:
            plaintext.checkpoint()
        assert "--tls-ca" in str(err.value)
    with running_server(tmp_path / "plain-data") as (server, _, _):
        tls = Connection(address=f"127.0.0.1:{server.app.port}", tls_ca=certs.ca)
        with RemoteLog(tls, timeout=5) as log, pytest.raises(UnavailableError) as err:
            log.checkpoint()
        assert "the server may not be using TLS" in str(err.value)


def test_serve_keeps_grpc_core_handshake_chatter_out_of_its_json_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plaintext client at a TLS ``ledger serve --log-format json``: before, grpc core wrote
    an unformatted ``Handshake failed`` line to the log per connection."""
    monkeypatch.delenv("GRPC_VERBOSITY", raising=False)
    monkeypatch.delenv("GRPC_TRACE", raising=False)
    now = dt.datetime.now(dt.UTC)
    certs = make_dev_certs(tmp_path / "tls", hosts=["localhost", "127.0.0.1"], clients=[], now=now)
    key_file = tmp_path / "log.key"
    write_signer(key_file, Ed25519Signer.generate(ORIGIN))
    server = ServerProcess(
        tmp_path / "data",
        key_file,
        "--log-format", "json",
        "--tls-cert", str(certs.server_cert),
        "--tls-key", str(certs.server_key),
    )  # fmt: skip
    try:
        port = server.address.rsplit(":", 1)[1]
        for _ in range(3):
            with (
                RemoteLog(f"127.0.0.1:{port}", timeout=5) as plaintext,
                pytest.raises(UnavailableError, match="--tls-ca"),
            ):
                plaintext.checkpoint()
        with RemoteLog(Connection(address=f"127.0.0.1:{port}", tls_ca=certs.ca)) as log:
            assert log.checkpoint().size >= 0
    finally:
        assert server.terminate() == 0
    lines = [line for line in server.log_path.read_text().splitlines() if line.strip()]
    assert lines
    for line in lines:
        assert isinstance(json.loads(line), dict), line  # every line in the configured format


def test_a_refused_token_says_so_at_once_and_names_the_spool_command(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    TokenStore(data / "tokens.json").create("t-append", ["append"], now=1)
    with running_server(data) as (server, _, _):
        spool = tmp_path / "agent.spool"
        bad = Connection(address=server.address, token="dl_00000000_" + "x" * 43)
        message, took, _ = first_warning(bad, spool, raises=DeliveryError)
        assert took < 5, took
        assert "--token / LEDGER_TOKEN" in message
        assert f"ledger receipt run --spool {spool} --server {server.address}" in message
