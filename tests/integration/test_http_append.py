"""``POST /append`` on the HTTP listener (docs/sdk.md "Agents in other languages"): a record
sent as JSON by an agent in another language, with a token, comes back as a receipt that
``ledger-verify receipt`` accepts; without a token it is refused like the gRPC append; bad
input gets a clear 4xx, never a 500."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.api.auth import TokenStore
from ledger.core.errors import UnauthenticatedError
from ledger.core.limits import MAX_RECORD_BYTES
from ledger.records.decision import DecisionRecord, ToolCall, Usage, new_record_id, record_digest
from ledger_client.cli.main import main
from tests.harness import running_server

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
