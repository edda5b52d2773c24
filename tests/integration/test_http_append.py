"""``POST /append`` on the HTTP listener (docs/sdk.md "Agents in other languages"): a record
sent as JSON by an agent in another language, with a token, comes back as a receipt that
``ledger-verify receipt`` accepts; without a token it is refused like the gRPC append; bad
input gets a clear 4xx, never a 500."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from click.testing import CliRunner

from ledger.api.auth import TokenStore
from ledger.core.errors import UnauthenticatedError
from ledger.core.limits import MAX_RECORD_BYTES
from ledger.records.decision import (
    SCHEMA_VERSION,
    DecisionRecord,
    ToolCall,
    Usage,
    new_record_id,
    record_digest,
    record_fields,
)
from ledger.v1 import ledger_pb2 as pb
from ledger.v1 import ledger_pb2_grpc as pb_grpc
from ledger_client.cli.main import main
from tests.harness import running_server
from tests.waits import wait_until

pytestmark = pytest.mark.integration


def record_text() -> str:
    """A record as an agent in another language would write it (v2 members included)."""
    record = DecisionRecord(
        record_id=new_record_id(),
        run_id="go-agent-run-1",
        step=0,
        time="2026-12-01T15:04:05.120Z",
        agent="go-agent",
        payload=ToolCall(tool="geocode"),
        started_at="2026-12-01T15:04:05.000Z",
        ended_at="2026-12-01T15:04:05.120Z",
        usage=Usage(input_tokens=12, output_tokens=3, total_tokens=15),
    )
    return json.dumps(record.to_json_obj(), indent=2)  # not canonical: the server does not care


def post(url: str, body: str, token: str | None = None, kind: str = "application/json") -> Any:
    headers = {"Content-Type": kind}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


def test_http_json_append_with_a_token_returns_a_verifiable_receipt(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    store = TokenStore(data / "tokens.json")
    append_token = store.create("t-append", ["append"], now=1)[0]
    read_token = store.create("t-read", ["read"], now=1)[0]
    text = record_text()
    with running_server(data) as (server, anonymous, signer):
        assert server.app.tiles_url is not None
        url = server.app.tiles_url + "append"
        status, body, headers = post(url, text)
        assert status == 401 and "needs a credential" in body["error"]
        assert headers.get("WWW-Authenticate") == "Bearer"
        with pytest.raises(UnauthenticatedError, match="needs a credential"):
            anonymous.append([hashlib.sha256(b"grpc").digest()])  # refused alike over gRPC
        assert post(url, text, "dl_00000000_" + "x" * 43)[0] == 401
        status, body, _ = post(url, text, read_token)
        assert status == 403 and "'append' scope" in body["error"]
        status, receipt, _ = post(url, text, append_token)
        assert status == 201, receipt
        again = post(url, text, append_token)
        assert again[0] == 200 and again[1]["index"] == receipt["index"]  # idempotent
        bad = json.loads(text)
        bad["usage"]["input_tokens"] = -1
        status, body, _ = post(url, json.dumps(bad), append_token)
        assert status == 400 and "usage.input_tokens" in body["error"]
        assert post(url, "{not json", append_token)[0] == 400
        assert post(url, text, append_token, kind="text/plain")[0] == 415
        big = json.loads(text)
        big["parameters"] = {"blob": "a" * MAX_RECORD_BYTES}
        status, body, _ = post(url, json.dumps(big), append_token)
        assert status == 413 and f"over {MAX_RECORD_BYTES}" in body["error"]
        key = signer.verifier().key_string()
    expected = record_digest(DecisionRecord.from_json(text)).hex()
    assert receipt["record_digest"] == expected and receipt["anchors"] == []
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    result = CliRunner().invoke(main, ["receipt", str(path), "--key", key, "--json"])
    assert result.exit_code == 0, result.output
    verified = json.loads(result.output)
    assert verified["valid"] is True and verified["record_digest"] == expected


def test_schema_invalid_records_are_refused_naming_the_schema_path(tmp_path: Path) -> None:
    text = record_text()
    usage = "#/properties/usage/"
    changes: list[tuple[str, str, Any]] = [
        ("$.usage.input_tokens", usage, lambda r: r["usage"].update(input_tokens=-1)),
        ("$", "#/additionalProperties", lambda r: r.update(comment="x")),
        ("$.record_id", "#/", lambda r: r.update(record_id="not-a-uuid")),
        ("$.kind", "#/properties/kind", lambda r: r.update(kind="telepathy")),
        ("$.step", "#/", lambda r: r.update(step="0")),
    ]
    with running_server(tmp_path / "data") as (server, _, _signer):
        assert server.app.tiles_url is not None
        url = server.app.tiles_url + "append"
        for where, rule, change in changes:
            record = json.loads(text)
            change(record)
            status, body, _ = post(url, json.dumps(record))
            assert status == 400, body
            error = body["error"]
            assert error.startswith(f"invalid record: {where}"), error
            assert f"(schema decision-record-v{SCHEMA_VERSION}.schema.json{rule}" in error, error
        # a v1 record is checked against the v1 schema: a later member is not allowed there
        old = {k: v for k, v in json.loads(text).items() if k in record_fields(1)}
        old["schema"] = "ledger.decision/v1"
        status, body, _ = post(url, json.dumps({**old, "usage": None}))
        assert status == 400, body
        assert "decision-record-v1.schema.json#/additionalProperties" in body["error"]
        status, receipt, _ = post(url, json.dumps(old))
        assert status == 201, receipt


def test_http_append_shares_the_byte_budget_and_writes_access_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ledger.access")
    text = record_text()
    # one MiB in flight for everything: a request declaring as much leaves no room
    with running_server(tmp_path / "data", inflight_mb=1, max_request_mb=1) as (server, _, _k):
        budget, base = server.app.budget, server.app.tiles_url
        assert budget is not None and base is not None
        url = base + "append"
        host, port = urllib.parse.urlsplit(base).hostname, urllib.parse.urlsplit(base).port
        assert host is not None and port is not None
        with socket.create_connection((host, port)) as slow:  # sends its body slowly
            slow.sendall(
                b"POST /append HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1048576\r\n\r\n{"
            )
            wait_until(lambda: budget.held == budget.limit, what="the slow append holds its size")
            status, body, headers = post(url, text)
            assert status == 503 and "in-flight budget" in body["error"], body
            assert headers.get("Retry-After") == "1"
            with grpc.insecure_channel(server.address) as channel:  # gRPC: the same budget
                stub = pb_grpc.LedgerServiceStub(channel)  # type: ignore[no-untyped-call]
                item = pb.AppendItem(record_digest=hashlib.sha256(b"grpc").digest())
                with pytest.raises(grpc.RpcError) as refused:
                    stub.AppendRecords(pb.AppendRecordsRequest(items=[item]), timeout=30)
                assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        wait_until(lambda: budget.held == 0, what="the slow append's bytes given back")
        status, receipt, _ = post(url, text)
        assert status == 201, receipt
    lines = [r.getMessage() for r in caplog.records if r.name == "ledger.access"]
    posts = [line for line in lines if line.startswith("POST /append ")]
    assert [line.split()[2] for line in posts] == ["503", "201"], posts
    assert all(re.fullmatch(r"POST /append \d{3} [\d.]+ms anonymous ipv4:127\.0\.0\.1:\d+", line)
               for line in posts), posts  # fmt: skip
    grpc_line = next(line for line in lines if line.startswith(APPEND_RPC))
    assert grpc_line.split()[1] == "RESOURCE_EXHAUSTED"  # the same format for both
    last: Any = next(r for r in caplog.records if r.getMessage() == posts[-1])
    assert last.access["status"] == "201" and last.access["identity"] == "anonymous"


APPEND_RPC = "/ledger.v1.LedgerService/AppendRecords "
