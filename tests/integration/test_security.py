"""Authenticated writers, TLS and mTLS, rate limits, the access log, health and /metrics,
against a real server (in-process, port 0) with real tokens and real certificates."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ledger.api.auth import TokenStore
from ledger.api.tls import make_dev_certs
from ledger.core.errors import (
    PermissionDeniedError,
    PushbackError,
    UnauthenticatedError,
    UnavailableError,
)
from ledger_client.remote.connection import Connection
from ledger_client.remote.log import RemoteLog
from tests.harness import running_server
from tests.waits import wait_until

pytestmark = pytest.mark.integration


def digest(i: int) -> bytes:
    return hashlib.sha256(f"security-{i}".encode()).digest()


def refuses(call: Callable[[], object]) -> bool:
    """Whether ``call`` fails with UNAUTHENTICATED."""
    try:
        call()
    except UnauthenticatedError:
        return True
    return False


def tokens(data: Path) -> dict[str, str]:
    store = TokenStore(data / "tokens.json")
    return {
        scope: store.create(f"t-{scope}", [scope], now=1)[0]
        for scope in ("append", "admin", "read")
    }


def test_tokens_scopes_and_the_access_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    made = tokens(data)
    caplog.set_level(logging.INFO, logger="ledger.access")
    with running_server(data, embedded_tsa=True) as (server, anonymous, _):
        assert not server.app.policy.open_log
        assert anonymous.checkpoint().size == 0  # reads stay open
        with pytest.raises(UnauthenticatedError, match="needs a credential"):
            anonymous.append([digest(0)])
        addr = server.address
        with (
            RemoteLog(Connection(address=addr, token="dl_00000000_" + "x" * 43)) as bad,
            pytest.raises(UnauthenticatedError, match="invalid or revoked"),
        ):
            bad.append([digest(0)])
        with (
            RemoteLog(Connection(address=addr, token=made["read"])) as reader,
            pytest.raises(PermissionDeniedError, match="append"),
        ):
            reader.append([digest(0)])
        with RemoteLog(Connection(address=addr, token=made["append"])) as writer:
            assert writer.append([digest(1)], wait_for_checkpoint=True).checkpoint is not None
            with pytest.raises(PermissionDeniedError, match="admin"):
                writer.anchor_now()
            with pytest.raises(PermissionDeniedError, match="admin"):
                writer.backup(str(tmp_path / "b"))
            stream = list(writer.stream_append([[digest(2)], [digest(3)]]))
            assert sum(a.count for a in stream) == 2
        with RemoteLog(Connection(address=addr, token=made["admin"])) as admin:
            size, anchors, failures = admin.anchor_now()
            assert size >= 1 and [a.tsa for a in anchors] == ["embedded-dev"], failures
        TokenStore(data / "tokens.json").revoke("t-append")
        with RemoteLog(Connection(address=addr, token=made["append"])) as revoked:
            # a running server re-reads the tokens file within a second (a read: no side effect)
            wait_until(lambda: refuses(revoked.checkpoint), timeout=10, what="the revocation")
            with pytest.raises(UnauthenticatedError):
                revoked.append([digest(4)])
    lines = [r for r in caplog.records if r.name == "ledger.access"]
    texts = "\n".join(r.getMessage() + str(getattr(r, "access", "")) for r in lines)
    for token in made.values():
        assert token not in texts and token.split("_", 2)[2] not in texts
    assert "AppendRecords UNAUTHENTICATED" in texts
    assert "AppendRecords PERMISSION_DENIED" in texts and "token:t-read" in texts
    assert "token:t-append" in texts and "token:t-admin" in texts
    fields = next(r for r in lines if "AnchorNow OK" in r.getMessage()).__dict__["access"]
    assert set(fields) == {"method", "status", "duration_ms", "identity", "peer"}


def test_rate_limits_answer_resource_exhausted_with_retry_after(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    made = tokens(data)
    with running_server(data, rate_per_s=1.0, burst=2) as (server, _, _):
        with RemoteLog(Connection(address=server.address, token=made["append"])) as w:
            w.append([digest(10)])
            w.append([digest(11)])
            with pytest.raises(PushbackError, match="rate limit of token:t-append") as caught:
                w.append([digest(12)])
            assert 0 < caught.value.retry_after <= 1.0
        with RemoteLog(Connection(address=server.address, token=made["admin"])) as other:
            other.append([digest(13)])  # another identity has its own bucket


def test_tls_and_mtls_identities(tmp_path: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    hosts, clients = ["localhost", "127.0.0.1"], ["agent-b", "stranger"]
    certs = make_dev_certs(tmp_path / "tls", hosts=hosts, clients=clients, now=now)
    (agent_cert, agent_key), (stranger_cert, stranger_key) = certs.clients
    data = tmp_path / "data"
    with running_server(
        data,
        tls_server_cert=certs.server_cert,
        tls_server_key=certs.server_key,
        tls_client_ca=certs.ca,
        auth_mtls={"agent-b": ("append",)},
    ) as (server, _, _):
        port = server.app.port
        address = f"localhost:{port}"
        agent = Connection(address=address, tls_ca=certs.ca, tls_cert=agent_cert,
                           tls_key=agent_key)  # fmt: skip
        with RemoteLog(agent) as log:
            assert log.append([digest(20)], wait_for_checkpoint=True).checkpoint is not None
        stranger = Connection(address=address, tls_ca=certs.ca, tls_cert=stranger_cert,
                              tls_key=stranger_key)  # fmt: skip
        with RemoteLog(stranger) as log:
            assert log.checkpoint().size >= 1
            with pytest.raises(UnauthenticatedError):
                log.append([digest(21)])
        with (
            RemoteLog(Connection(address=address, tls_ca=certs.ca), timeout=5) as no_cert,
            pytest.raises(UnavailableError),
        ):  # the handshake needs a client certificate
            no_cert.checkpoint()
        with (
            RemoteLog(Connection(address=address), timeout=5) as plaintext,
            pytest.raises(UnavailableError),
        ):
            plaintext.checkpoint()
        metrics = server.app.metrics_address
        assert metrics is not None
        context = ssl.create_default_context(cafile=str(certs.ca))
        context.load_cert_chain(agent_cert, agent_key)
        with urllib.request.urlopen(
            f"https://localhost:{metrics.rsplit(':', 1)[1]}/metrics", context=context, timeout=10
        ) as answer:
            assert b"ledger_appended_records_total" in answer.read()


def test_health_and_metrics_after_recovery(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as (server, client, _):
        with grpc.insecure_channel(server.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            answer = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
        client.append([digest(i) for i in range(30, 40)], wait_for_checkpoint=True)
        client.inclusion_proofs([0, 1])
        client.consistency_proof(1)
        tiles = server.app.tiles_url
        metrics = server.app.metrics_address
        assert tiles is not None and metrics is not None and metrics in tiles  # the same endpoint
        with urllib.request.urlopen(tiles + "checkpoint", timeout=10) as answer:
            assert answer.status == 200
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(tiles + "tile/0/x001", timeout=10)  # malformed: 4xx
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    for name in (
        'ledger_appended_records_total{outcome="new"} 10.0',
        "ledger_append_batch_size_count 1.0",
        "ledger_group_commit_seconds_count",
        "ledger_queue_depth 0.0",
        "ledger_checkpoint_size 10.0",
        "ledger_checkpoint_age_seconds",
        'ledger_proof_requests_total{kind="inclusion"} 1.0',
        'ledger_proof_requests_total{kind="consistency"} 1.0',
        'ledger_rpc_requests_total{code="OK",method="AppendRecords"} 1.0',
        'ledger_rocksdb_estimate_num_keys{family="tree"}',
        'ledger_tile_requests_total{kind="checkpoint",status="200"} 1.0',
        'ledger_tile_requests_total{kind="tile",status="400"} 1.0',
        "ledger_witness_quorum_size 0.0",
    ):
        assert name in text, name
