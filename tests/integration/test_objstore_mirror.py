"""Mirror mode against a real server and a real SeaweedFS: the local store stays primary, the
bucket follows after each local commit (lag on ``/metrics``), an unreachable bucket delays
publishing and never an append (health and ``/metrics`` show it), and a start weighs the
bucket's checkpoint as evidence (a larger one, or another root at a size the log holds, halts)."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ledger.app.tsa_setup import load_pems
from ledger.cli.main import main as ledger_main
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import FailedPreconditionError
from ledger.objstore.bucket import Bucket
from ledger.objstore.conformance import check_store
from ledger_client.cli.main import main as verify_main
from ledger_client.receipts.verify import verify_receipt
from ledger_client.remote.receipt_tiles import (
    anchored_from_bucket,
    fetch_receipt_from_tiles,
    upgrade_receipt_from_tiles,
)
from ledger_client.remote.tiles import TileClient, TileSource
from tests.harness import ORIGIN, free_port, running_server
from tests.objstore_world import MemoryLog, Seaweed
from tests.waits import wait_until

pytestmark = pytest.mark.integration


def _metrics(address: str | None) -> str:
    assert address is not None
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        text: str = response.read().decode()
        return text


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{}"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def _bucket_health(address: str) -> int:
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        answer = stub.Check(health_pb2.HealthCheckRequest(service="ledger.objstore"))
        return int(answer.status)


def test_mirror_mode_follows_the_log(seaweed: Seaweed, tmp_path: Path) -> None:
    address = seaweed.address("mirror")
    check_store(address, rounds=1, writers=8)
    with running_server(
        tmp_path / "data", object_store_url=address.url, object_store_endpoint=seaweed.endpoint
    ) as (server, remote, signer):
        size = 0
        for count in (10, 500, 3):
            size = remote.append([os.urandom(32) for _ in range(count)]).results[-1].index + 1
        client = TileClient(seaweed.bucket_url("mirror"))
        verifiers = [signer.verifier()]

        def published() -> bool:
            return client.checkpoint(verifiers, origin=ORIGIN).checkpoint.size >= size

        wait_until(published, timeout=60, interval=0.1, what="the bucket to reach the log")
        latest = client.checkpoint(verifiers, origin=ORIGIN).checkpoint
        assert client.root(latest.size) == latest.root_hash
        assert TileSource(client).latest_checkpoint().startswith(ORIGIN)
        text = _metrics(server.app.metrics_address)
        assert _metric(text, "ledger_bucket_reachable") == 1.0
        assert _metric(text, "ledger_bucket_published_size") >= size
        assert _metric(text, "ledger_bucket_lag_seconds_count") >= 1
        assert _bucket_health(server.address) == health_pb2.HealthCheckResponse.SERVING


def test_unreachable_bucket_delays_publishing_never_appends(tmp_path: Path) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with running_server(
        tmp_path / "data", object_store_url="s3://ledger/away", object_store_endpoint=nobody
    ) as (server, remote, _signer):
        outcome = remote.append([os.urandom(32) for _ in range(20)], wait_for_checkpoint=True)
        assert outcome.results[-1].index == 19  # appended and published locally
        wait_until(
            lambda: _metric(_metrics(server.app.metrics_address), "ledger_bucket_reachable") == 0,
            timeout=60,
            what="the bucket to show unreachable",
        )
        text = _metrics(server.app.metrics_address)
        assert _metric(text, "ledger_bucket_published_size") == 0
        assert _bucket_health(server.address) == health_pb2.HealthCheckResponse.NOT_SERVING


def test_a_bucket_ahead_of_the_log_halts_the_start(seaweed: Seaweed, tmp_path: Path) -> None:
    address = seaweed.address("ahead")
    check_store(address, rounds=1, writers=8)
    signer = Ed25519Signer.generate(ORIGIN)
    elsewhere = MemoryLog(ORIGIN, signer)  # the same log's key: what it published, this lacks
    elsewhere.publisher(address).update([elsewhere.grow(40)])
    with running_server(
        tmp_path / "data",
        signer,
        object_store_url=address.url,
        object_store_endpoint=seaweed.endpoint,
    ) as (server, remote, _signer):
        assert server.app.evidence.halted is not None
        assert server.app.evidence.halted.kind == "larger"
        with pytest.raises(FailedPreconditionError, match="halted on evidence"):
            remote.append([os.urandom(32)])


def test_another_root_in_the_bucket_halts_the_start(seaweed: Seaweed, tmp_path: Path) -> None:
    address = seaweed.address("fork")
    check_store(address, rounds=1, writers=8)
    signer = Ed25519Signer.generate(ORIGIN)
    with running_server(tmp_path / "data", signer) as (_server, remote, _signer):
        remote.append([os.urandom(32) for _ in range(50)], wait_for_checkpoint=True)
    other = MemoryLog(ORIGIN, signer)  # another history under the same key: a fork
    other.publisher(address).update([other.grow(30)])
    with running_server(
        tmp_path / "data",
        signer,
        object_store_url=address.url,
        object_store_endpoint=seaweed.endpoint,
    ) as (server, _remote, _signer):
        assert server.app.evidence.halted is not None
        assert server.app.evidence.halted.kind == "fork"
        bucket = server.app.bucket
        assert bucket is not None
        wait_until(lambda: bucket.state.stopped, timeout=60, what="publishing to stop")
        assert "another history" in (bucket.state.stopped or "")
        assert _bucket_health(server.address) == health_pb2.HealthCheckResponse.NOT_SERVING


def test_receipts_are_fetched_and_upgraded_from_the_bucket_alone(
    seaweed: Seaweed, tmp_path: Path
) -> None:
    address = seaweed.address("receipts")
    check_store(address, rounds=1, writers=8)
    digests = [os.urandom(32) for _ in range(30)]
    data = tmp_path / "data"
    with running_server(
        data, object_store_url=address.url, object_store_endpoint=seaweed.endpoint
    ) as (_server, remote, signer):
        remote.append(digests, wait_for_checkpoint=True)
        anchored, anchors, failures = remote.anchor_now()
        assert anchors and not failures
        client = TileClient(seaweed.bucket_url("receipts"))
        verifiers = [signer.verifier()]
        wait_until(
            lambda: anchored_from_bucket(client, verifiers, ORIGIN) is not None,
            timeout=60,
            interval=0.1,
            what="the bucket's anchors",
        )
        receipt = fetch_receipt_from_tiles(
            client, digests[7], verifiers=verifiers, origin=ORIGIN, index=7
        )
        assert receipt.tree_size == anchored and len(receipt.anchors) == 1
        roots = load_pems((data / "tsa" / "root.pem",), "root")
        report = verify_receipt(receipt, verifiers, tsa_roots=roots, origin=ORIGIN)
        assert report.anchors_checked and report.index == 7
        more = remote.append([os.urandom(32) for _ in range(5)], wait_for_checkpoint=True)
        size = more.results[-1].index + 1
        wait_until(
            lambda: client.checkpoint(verifiers).checkpoint.size >= size,
            timeout=60,
            what="the bucket to reach the log",
        )
        upgraded = upgrade_receipt_from_tiles(client, receipt, verifiers=verifiers, origin=ORIGIN)
        assert upgraded.tree_size >= size and upgraded.previous is not None
        assert upgraded.previous.anchors == receipt.anchors
        verify_receipt(upgraded, verifiers, tsa_roots=roots, origin=ORIGIN)


def test_tools_work_over_the_bucket(seaweed: Seaweed, tmp_path: Path) -> None:
    """The monitor (full audit), ``ledger fsck --tiles`` and a tile client whose first URL is
    dead, all against the bucket's anonymous HTTP endpoint; fsck names a rewritten tile."""
    address = seaweed.address("tools")
    check_store(address, rounds=1, writers=8)
    data = tmp_path / "data"
    with running_server(
        data, object_store_url=address.url, object_store_endpoint=seaweed.endpoint
    ) as (_server, remote, signer):
        remote.append([os.urandom(32) for _ in range(600)], wait_for_checkpoint=True)
        remote.anchor_now()
        size = remote.checkpoint().size
        url = seaweed.bucket_url("tools")
        dead = f"http://127.0.0.1:{free_port()}/"
        client = TileClient([dead, url])
        verifiers = [signer.verifier()]
        wait_until(
            lambda: (
                client.checkpoint(verifiers).checkpoint.size >= size
                and anchored_from_bucket(client, verifiers, ORIGIN) is not None
            ),
            timeout=60,
            interval=0.1,
            what="the bucket to reach the log",
        )
        assert client.base_urls == [url, dead]  # the dead mirror went to the back
        assert client.root(size) == remote.checkpoint().root_hash
        key = signer.verifier().key_string()
        monitor = CliRunner().invoke(verify_main, [
            "monitor", "--tiles", f"{dead},{url}", "--key", key, "--state",
            str(tmp_path / "state.json"), "--once", "--full-audit", "--json",
        ])  # fmt: skip
        assert monitor.exit_code == 0, monitor.output
        assert f'"size": {size}' in monitor.output
        fsck = ["fsck", "--data-dir", str(data), "--tiles", url, "--vkey", key, "--json"]
        clean = CliRunner().invoke(ledger_main, fsck)
        assert clean.exit_code == 0, clean.output
        report = json.loads(clean.output)
        assert report["counts"]["entries"] == size and report["counts"]["anchors"] == 1
        Bucket(address).put("tile/0/001", os.urandom(32 * 256), {})  # rewritten in the bucket
        bad = CliRunner().invoke(ledger_main, fsck)
        assert bad.exit_code == 1
        assert "tile/0/001" in bad.output


def test_tiles_export_uploads_a_stopped_log(seaweed: Seaweed, tmp_path: Path) -> None:
    address = seaweed.address("export")
    data = tmp_path / "data"
    with running_server(data) as (_server, remote, signer):
        remote.append([os.urandom(32) for _ in range(700)], wait_for_checkpoint=True)
        remote.anchor_now()
        size = remote.checkpoint().size
    args = ["tiles", "export", "--data-dir", str(data), "--bucket", address.url,
            "--endpoint", seaweed.endpoint, "--json"]  # fmt: skip
    refused = CliRunner().invoke(ledger_main, args)  # never checked: refused
    assert refused.exit_code == 1 and "ledger objstore check" in refused.output
    check_store(address, rounds=1, writers=8)
    done = CliRunner().invoke(ledger_main, args)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["size"] == size
    client = TileClient(seaweed.bucket_url("export"))
    verified = client.checkpoint([signer.verifier()], origin=ORIGIN).checkpoint
    assert verified.size == size and client.root(size) == verified.root_hash
    assert anchored_from_bucket(client, [signer.verifier()], ORIGIN) is not None
    again = CliRunner().invoke(ledger_main, args)
    assert again.exit_code == 0 and json.loads(again.stdout)["files"] == 0
