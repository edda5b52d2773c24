"""``ledger receipt fetch | upgrade | run`` and ``ledger anchor --wait`` against a real server.

The server runs in process on port 0 with the embedded TSA (real HTTP, real tokens, RocksDB in
a temporary folder); the CLIs run in process (``CliRunner``); receipts are checked with
``ledger-verify receipt`` / ``run`` against the embedded TSA's root.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli.main import main as ledger
from ledger.cli.receipt import wait_for_anchor
from ledger.core.checkpoint import Ed25519Signer
from ledger.records.decision import Outcome, ToolCall, record_digest
from ledger_client.cli.main import main as verify
from ledger_client.receipts.receipt import Receipt
from ledger_client.sdk.client import (
    AnchorTimeoutError,
    LedgerClient,
    RecordTooLargeError,
    decision,
)
from ledger_client.sdk.context import emit, ledger_run
from ledger_client.sdk.run_file import read_run_file, spooled_run
from tests.harness import QUICK, free_port, running_server

pytestmark = pytest.mark.integration


def run_ledger(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(ledger, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def run_verify(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(verify, [*args, "--json"])
    out: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, out


def test_fetch_anchor_wait_and_upgrade(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data, embedded_tsa=True) as (server, log, signer):
        key, root = signer.verifier().key_string(), str(data / "tsa" / "root.pem")
        first, second = (bytes([n]) * 32 for n in (1, 2))
        log.append([first], wait_for_checkpoint=True)
        out = tmp_path / "r.json"
        code, text = run_ledger("receipt", "fetch", "--server", server.address,
                                "--digest", first.hex(), "--out", str(out))  # fmt: skip
        assert code == 0 and json.loads(text)["anchors"] == 0, text
        code, report = run_verify("receipt", str(out), "--key", key, "--tsa-root", root)
        assert code == 3 and report["status"] == "anchors_pending"  # nothing anchored yet
        log.append([second], wait_for_checkpoint=True)  # the checkpoint moves on, unanchored
        code, text = run_ledger("anchor", "--server", server.address, "--wait", "--json")
        assert code == 0 and json.loads(text)["size"] == 2, text
        code, text = run_ledger("receipt", "upgrade", str(out), "--server", server.address)
        assert code == 0, text
        moved = Receipt.from_json(out.read_bytes())
        assert moved.tree_size == 2 and moved.previous is not None and moved.anchors
        code, report = run_verify("receipt", str(out), "--key", key, "--tsa-root", root)
        assert code == 0 and report["previous_size"] == 1 and report["anchored_by"], report
        # the checkpoint it was fetched at gets its own anchor later: upgrade adds it in place
        fresh = tmp_path / "fresh.json"
        run_ledger("receipt", "fetch", "--server", server.address, "--digest", second.hex(),
                   "--out", str(fresh))  # fmt: skip
        assert Receipt.from_json(fresh.read_bytes()).anchors  # size 2 is anchored already
        assert run_ledger("anchor", "--server", server.address, "--wait")[0] == 0  # skipped
        again = tmp_path / "again.json"
        code, text = run_ledger("receipt", "upgrade", str(out), "--server", server.address,
                                "--out", str(again))  # fmt: skip
        assert code == 0 and Receipt.from_json(again.read_bytes()) == moved  # nothing new


def test_upgrade_adds_anchors_that_reached_the_same_checkpoint(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data, embedded_tsa=True) as (server, log, signer):
        digest = b"\x07" * 32
        log.append([digest], wait_for_checkpoint=True)
        out = tmp_path / "r.json"
        run_ledger("receipt", "fetch", "--server", server.address, "--digest", digest.hex(),
                   "--out", str(out))  # fmt: skip
        before = Receipt.from_json(out.read_bytes())
        assert not before.anchors
        assert run_ledger("anchor", "--server", server.address, "--wait")[0] == 0
        code, text = run_ledger("receipt", "upgrade", str(out), "--server", server.address)
        assert code == 0, text
        after = Receipt.from_json(out.read_bytes())
        assert after.tree_size == before.tree_size and after.previous is None
        assert after.inclusion_proof == before.inclusion_proof and len(after.anchors) == 1
        key, root = signer.verifier().key_string(), str(data / "tsa" / "root.pem")
        code, report = run_verify("receipt", str(out), "--key", key, "--tsa-root", root)
        assert code == 0 and report["anchors"][0]["status"] == "valid", report


def sdk_run(address: str, tmp_path: Path, name: str, **options: Any) -> tuple[Path, LedgerClient]:
    """A two-record SDK run against ``address``, its receipts written to ``name``.jsonl."""
    client = LedgerClient(address, spool=tmp_path / f"{name}.spool", register_atexit=False)
    run_file = tmp_path / f"{name}.jsonl"
    with ledger_run(client, agent=f"{name}-bot", receipts=run_file, **options):
        emit(ToolCall(tool="search"))
        emit(Outcome(), actual_outcome={"ok": True})
    return run_file, client


def test_receipt_upgrade_of_an_sdk_run_file_in_place_and_to_out(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data, embedded_tsa=True) as (server, _, signer):
        key, root = signer.verifier().key_string(), str(data / "tsa" / "root.pem")
        run_file, client = sdk_run(server.address, tmp_path, "agent")
        client.close()
        written = run_file.read_bytes()
        check = ["--key", key, "--tsa-root", root]
        code, report = run_verify("run", str(run_file), *check)
        assert code == 3 and report["status"] == "anchors_pending", report
        assert report["anchors_pending"] == 3 and report["receipts_valid"] == 3
        upgrade = ["receipt", "upgrade", str(run_file), "--server", server.address]
        code, text = run_ledger(*upgrade)  # no anchor yet: nothing written
        assert code == 1 and "no anchored checkpoint" in text, text
        assert run_file.read_bytes() == written
        assert run_ledger("anchor", "--server", server.address, "--wait")[0] == 0
        out = tmp_path / "anchored.jsonl"
        code, text = run_ledger(*upgrade, "--out", str(out))
        assert code == 0, text
        assert json.loads(text) == {
            "out": str(out), "kind": "run", "records": 3, "anchored": 3,
            "tree_sizes": [json.loads(out.read_text().splitlines()[0])["receipt"]["tree_size"]],
        }  # fmt: skip
        assert run_file.read_bytes() == written  # --out leaves the file as it was
        code, report = run_verify("run", str(out), *check)
        assert code == 0 and report["status"] == "verified", report
        code, text = run_ledger(*upgrade)  # in place
        assert code == 0, text
        assert run_file.read_bytes() == out.read_bytes()
        before, after = read_run_file(tmp_path / "agent.jsonl"), read_run_file(out)
        assert [line.record for line in before] == [line.record for line in after]
        code, report = run_verify("run", str(run_file), *check)
        assert code == 0 and [t["status"] for t in report["timeline"]] == ["verified"] * 3


def test_wait_anchor_waits_for_the_schedule_and_never_asks_for_an_anchor(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data, embedded_tsa=True, anchor_interval_s=1.0) as (server, _, signer):
        key, root = signer.verifier().key_string(), str(data / "tsa" / "root.pem")
        run_file, client = sdk_run(server.address, tmp_path, "patient", wait_anchor=60)
        assert client.close()
        code, report = run_verify("run", str(run_file), "--key", key, "--tsa-root", root)
        assert code == 0 and report["status"] == "verified", report
    # no schedule: the wait times out, the file has the unanchored receipts (pending), and no
    # anchor was made (the SDK never calls AnchorNow); close() does not wait for anchors
    data2 = tmp_path / "data2"
    with running_server(data2, embedded_tsa=True) as (server, log, signer):
        key, root = signer.verifier().key_string(), str(data2 / "tsa" / "root.pem")
        with pytest.raises(AnchorTimeoutError, match="ledger receipt upgrade"):
            sdk_run(server.address, tmp_path, "impatient", wait_anchor=1.5)
        code, report = run_verify("run", str(tmp_path / "impatient.jsonl"), "--key", key,
                                  "--tsa-root", root)  # fmt: skip
        assert code == 3 and report["status"] == "anchors_pending", report
        assert log.anchored_sizes(10) == []
        client = LedgerClient(server.address, register_atexit=False, wait_anchor=3600)
        with ledger_run(client, agent="closer"):
            emit(ToolCall(tool="search"))
        assert client.close(timeout=20)  # delivered; anchors are never waited for here


def test_large_content_is_logged_and_verified_or_refused_where_it_is_made(tmp_path: Path) -> None:
    """The issue's case: a 600 KB value captured as content is verified by `run` (it was refused
    for being "longer than 1048576 bytes"); a value over the limit is refused by the SDK at the
    call, and the run goes on."""

    @decision("tool_call", capture="content")
    def fetch(size: int) -> str:
        return "x" * size

    with running_server(tmp_path / "data") as (server, _, signer):
        client = LedgerClient(server.address, spool=tmp_path / "a.spool", register_atexit=False)
        with ledger_run(client, agent="big-bot", receipts=tmp_path / "big.jsonl"):
            fetch(600_000)
            with pytest.raises(RecordTooLargeError, match="limit of 1048576 bytes"):
                fetch(1_100_000)
            emit(Outcome(), actual_outcome="done")
        client.close()
        code, report = run_verify("run", str(tmp_path / "big.jsonl"), "--key",
                                  signer.verifier().key_string())  # fmt: skip
        assert code == 0 and report["records"] == 3, report  # the refused call left no step


def test_bad_input_and_failures(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data, embedded_tsa=True) as (server, log, _):
        log.append([b"\x05" * 32], wait_for_checkpoint=True)
        out = str(tmp_path / "r.json")
        fetch = ["receipt", "fetch", "--server", server.address, "--out", out]
        assert run_ledger(*fetch)[0] == 2  # neither --digest nor --leaf
        assert run_ledger(*fetch, "--digest", "zz")[0] == 2
        assert run_ledger(*fetch, "--digest", "ab" * 31)[0] == 2
        (tmp_path / "leaf.bin").write_bytes(b"\x01short")
        assert run_ledger(*fetch, "--leaf", str(tmp_path / "leaf.bin"))[0] == 2
        code, text = run_ledger(*fetch, "--digest", "ab" * 32)
        assert code == 1 and "NOT_FOUND" in text
        (tmp_path / "bad.json").write_text('{"receipt": 1}')
        code, text = run_ledger("receipt", "upgrade", str(tmp_path / "bad.json"),
                                "--server", server.address)  # fmt: skip
        assert code == 2 and "bad.json" in text
        # a newer schema version: exit 4 and ledger-verify's message, never "bad input"
        code, text = run_ledger("receipt", "fetch", "--server", server.address,
                                "--digest", "05" * 32, "--out", out)  # fmt: skip
        assert code == 0, text
        newer = {**json.loads(Path(out).read_text()), "receipt": "decision-ledger/receipt/v3"}
        (tmp_path / "r3.json").write_text(json.dumps(newer))
        code, text = run_ledger("receipt", "upgrade", str(tmp_path / "r3.json"),
                                "--server", server.address)  # fmt: skip
        assert code == 4 and "unsupported schema version 3" in text, text
        assert text.rstrip().endswith("upgrade ledger-verify"), text
        entries = [{"record": {"schema": "ledger.decision/v3"}, "receipt": newer}]
        (tmp_path / "run3.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
        code, text = run_ledger("receipt", "upgrade", str(tmp_path / "run3.jsonl"),
                                "--server", server.address)  # fmt: skip
        assert code == 4 and "unsupported schema version 3" in text, text
    unreachable = f"127.0.0.1:{free_port()}"
    code, text = run_ledger("receipt", "fetch", "--server", unreachable, "--digest", "ab" * 32,
                            "--out", out)  # fmt: skip
    assert code == 1 and "UNAVAILABLE" in text


def test_wait_for_anchor_retries_and_times_out() -> None:
    calls: list[int] = []
    now = [0.0]

    def once() -> tuple[int, list[str], list[str]]:
        calls.append(1)
        return 7, (["tsa"] if len(calls) == 3 else []), ["tsa: unreachable"]

    assert wait_for_anchor(once, lambda size: False, timeout=60, sleep=lambda s: None)[1] == ["tsa"]
    assert len(calls) == 3

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(TimeoutError, match=r"size 7.*unreachable"):
        wait_for_anchor(
            lambda: (7, [], ["tsa: unreachable"]), lambda size: False, timeout=3,
            sleep=sleep, clock=lambda: now[0],
        )  # fmt: skip
    skipped = wait_for_anchor(lambda: (7, [], []), lambda size: size == 7, timeout=1)
    assert skipped == (7, [], [])


def test_a_run_delivered_after_an_outage_gets_its_receipts(tmp_path: Path) -> None:
    spool, run_file = tmp_path / "agent.spool", tmp_path / "run.jsonl"
    down = LedgerClient(f"127.0.0.1:{free_port()}", spool=spool, options=QUICK,
                        register_atexit=False, close_timeout=0.2)  # fmt: skip
    context = ledger_run(down, agent="outage-bot", receipts=run_file, receipts_timeout=0.5)
    with pytest.raises(TimeoutError), context as run:
        emit(ToolCall(tool="search"))
        emit(Outcome(), actual_outcome={"ok": True})
    assert not down.close(0.2)  # the records stay spooled
    pending = read_run_file(run_file)
    assert [line.receipt for line in pending] == [None, None, None]
    assert [line.record.step for line in pending] == [0, 1, 2]
    some_key = Ed25519Signer.generate("ledger.test/any").verifier().key_string()
    code, report = run_verify("run", str(run_file), "--key", some_key)
    assert code == 2 and "no receipt yet" in report["error"]
    assert [line.digest for line in spooled_run(spool)] == [e.digest for e in run.entries]
    with running_server(tmp_path / "data") as (server, _, signer):
        code, text = run_ledger("receipt", "run", "--spool", str(spool), "--server",
                                server.address, "--out", str(run_file))  # fmt: skip
        assert code == 0, text
        assert json.loads(text) == {"records": 3, "run_id": run.run_id, "out": str(run_file)}
        key = signer.verifier().key_string()
        code, report = run_verify("run", str(run_file), "--key", key)
        assert code == 0 and report["records"] == 3, report
        assert [r["status"] for r in report["timeline"]] == ["verified"] * 3
        # a spool re-send within --max-delay shows nothing; under a zero delay it is late,
        # exactly as a backdated record would be (docs/auditing.md)
        times = [r["verdict"]["checks"][0] for r in report["records_checked"]]
        assert [(t["name"], t["status"]) for t in times] == [("time", "ok")] * 3
        assert all(r["time_difference_ms"] > 0 for r in report["records_checked"])
        code, report = run_verify("run", str(run_file), "--key", key, "--max-delay", "0s")
        assert code == 1 and {p["code"] for p in report["problems"]} == {"late"}, report
        lines = read_run_file(run_file)
        assert [record_digest(line.record) for line in lines] == [e.digest for e in run.entries]


def test_run_command_input_errors(tmp_path: Path) -> None:
    missing = ["receipt", "run", "--spool", str(tmp_path / "none.spool"), "--out", "x.jsonl"]
    assert run_ledger(*missing)[0] == 2
    (tmp_path / "junk.spool").write_bytes(b"not a spool")
    junk = ["receipt", "run", "--spool", str(tmp_path / "junk.spool"), "--out", "x.jsonl"]
    code, text = run_ledger(*junk)
    assert code == 2 and "spool" in text


def test_fetch_from_tiles_by_index(tmp_path: Path) -> None:
    """``ledger receipt fetch --tiles URL --index I``: no gRPC, no digest index; the receipt
    verifies offline (no anchors: tiles carry none)."""
    data = tmp_path / "data"
    with running_server(data) as (server, log, signer):
        digests = [bytes([n]) * 32 for n in range(1, 6)]
        log.append(digests, wait_for_checkpoint=True)
        url, key = server.app.tiles_url, signer.verifier().key_string()
        assert url is not None
        out = tmp_path / "r.json"
        code, text = run_ledger("receipt", "fetch", "--tiles", url, "--index", "3", "--key", key,
                                "--out", str(out))  # fmt: skip
        assert code == 0, text
        receipt = Receipt.from_json(out.read_text())
        assert receipt.record_digest == digests[3] and receipt.index == 3
        assert run_verify("receipt", str(out), "--key", key)[0] == 0
        fetch = ["receipt", "fetch", "--tiles", url, "--key", key, "--out", str(out)]
        code, text = run_ledger(*fetch)
        assert code == 2 and "--index" in text  # tiles have no digest index
        code, text = run_ledger(*fetch, "--index", "3", "--digest", digests[0].hex())
        assert code == 1 and "is not record_digest" in text
        assert run_ledger(*fetch, "--index", "99")[0] == 1
        assert run_ledger(*fetch, "--index", "1")[0] == 0  # the digest comes from the leaf
        code, text = run_ledger("receipt", "fetch", "--server", server.address, "--index", "1",
                                "--digest", digests[0].hex(), "--out", str(out))  # fmt: skip
        assert code == 2 and "go with --tiles" in text
