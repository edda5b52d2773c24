"""``ledger-verify monitor`` against real servers: an honest log, a fork and a rollback.

A fork is two servers (separate RocksDB folders) with one signer and one origin fed different
entries; a rollback is a server restarted on a copy of its data folder taken earlier. Leaves
carry the log's receive time, so "the same" entries appended to two servers already differ;
the tests give each server one entry of its own before the monitor trusts a checkpoint, so the
fork is certain whatever the clocks do.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ledger.core import merkle
from ledger.core.checkpoint import Ed25519Signer, open_checkpoint
from ledger.core.errors import VerificationError
from ledger_client.cli.main import main
from ledger_client.remote.log import RemoteLog
from ledger_client.remote.monitor import StateFile
from tests import processes
from tests.harness import ORIGIN, running_server

pytestmark = pytest.mark.integration


def digests(n: int, salt: str = "", start: int = 0) -> list[bytes]:
    return [hashlib.sha256(f"record-{salt}-{i}".encode()).digest() for i in range(start, start + n)]


def grow(log: RemoteLog, n: int, salt: str, start: int = 0) -> int:
    out = log.append(digests(n, salt, start), wait_for_checkpoint=True)
    assert out.checkpoint is not None
    return out.checkpoint.size


def monitor(address: str, signer: Ed25519Signer, state: Path, *extra: str) -> Result:
    args = [
        "monitor",
        "--server",
        address,
        "--key",
        signer.verifier().key_string(),
        "--state",
        str(state),
        "--once",
        *extra,
    ]
    return CliRunner().invoke(main, args)


def evidence_of(result: Result) -> dict[str, Any]:
    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    assert payload["valid"] is False and payload["check"] == "monitor"
    evidence: dict[str, Any] = payload["evidence"]
    return evidence


def check_notes(evidence: dict[str, Any], signer: Ed25519Signer) -> tuple[Any, Any]:
    """Both checkpoints in the evidence are validly signed by the log key: the log signed both."""
    trusted, observed = (
        open_checkpoint(evidence[side]["note"], [signer.verifier()], origin=ORIGIN).checkpoint
        for side in ("trusted", "observed")
    )
    assert (trusted.size, trusted.root_hash.hex()) == (
        evidence["trusted"]["size"],
        evidence["trusted"]["root_hash_hex"],
    )
    assert (observed.size, observed.root_hash.hex()) == (
        evidence["observed"]["size"],
        evidence["observed"]["root_hash_hex"],
    )
    return trusted, observed


def test_honest_log_passes_and_state_advances(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with running_server(tmp_path / "data") as (server, log, signer):
        first = monitor(server.address, signer, state, "--json")
        assert first.exit_code == 0, first.output
        assert json.loads(first.stdout)["status"] == "first-use"
        size = grow(log, 10, "h")
        second = json.loads(monitor(server.address, signer, state, "--json").stdout)
        assert (second["status"], second["size"]) == ("extended", size)
        size = grow(log, 2345, "h", start=10)
        audit = monitor(server.address, signer, state, "--full-audit", "--json")
        assert audit.exit_code == 0, audit.output
        payload = json.loads(audit.stdout)
        assert (payload["status"], payload["previous_size"]) == ("extended", second["size"])
        assert payload["size"] == payload["audited_size"] == payload["audited"] == size
        saved = StateFile(state).load()
        assert saved is not None and saved.note == log.checkpoint().note
        assert saved.audit_range().root() == log.checkpoint().root_hash
        size = grow(log, 7, "h", start=3000)
        again = json.loads(monitor(server.address, signer, state, "--full-audit", "--json").stdout)
        assert (again["audited_size"], again["audited"]) == (size, 7)
        human = monitor(server.address, signer, state)
        assert human.exit_code == 0 and f"size {size}: unchanged" in human.stdout


def test_fork_between_two_servers_with_one_key(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    state = tmp_path / "state.json"
    with (
        running_server(tmp_path / "a", signer) as (server_a, log_a, _),
        running_server(tmp_path / "b", signer) as (server_b, log_b, _),
    ):
        for log, own in ((log_a, "a"), (log_b, "b")):
            grow(log, 20, "common")
            assert grow(log, 1, own) == 21
        assert monitor(server_a.address, signer, state).exit_code == 0  # trusts A at 21
        trusted_note = log_a.checkpoint().note

        # equal sizes, two signed roots
        same_size = evidence_of(monitor(server_b.address, signer, state, "--json"))
        assert same_size["kind"] == "fork" and "proof" not in same_size
        assert same_size["trusted"]["note"] == trusted_note
        assert same_size["observed"]["note"] == log_b.checkpoint().note
        trusted, observed = check_notes(same_size, signer)
        assert trusted.size == observed.size == 21 and trusted.root_hash != observed.root_hash

        # B grows: a larger tree whose consistency proof from A's checkpoint cannot verify
        assert grow(log_b, 7, "b", start=1) == 28
        assert grow(log_a, 4, "a", start=1) == 25
        larger = evidence_of(monitor(server_b.address, signer, state, "--json"))
        assert larger["kind"] == "fork"
        trusted, observed = check_notes(larger, signer)
        assert (trusted.size, observed.size) == (21, 28)
        served = [h.hex() for h in log_b.consistency_proof(21, 28).hashes]
        assert larger["proof"] == {"size1": 21, "size2": 28, "hashes": served}
        proof = [bytes.fromhex(h) for h in served]
        with pytest.raises(VerificationError):  # anyone can re-check the evidence offline
            merkle.verify_consistency(21, 28, trusted.root_hash, observed.root_hash, proof)

        human = monitor(server_b.address, signer, state)
        assert human.exit_code == 1
        assert "INVALID: fork: size 28 does not extend trusted size 21" in human.stderr
        assert "re-check: ledger-verify consistency --size1 21 --size2 28" in human.stderr

        # the state never moved: the honest server still extends it
        saved = StateFile(state).load()
        assert saved is not None and saved.note == trusted_note
        back = json.loads(monitor(server_a.address, signer, state, "--json").stdout)
        assert (back["status"], back["previous_size"], back["size"]) == ("extended", 21, 25)


def test_rollback_to_an_older_copy(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    live, old, state = tmp_path / "live", tmp_path / "old", tmp_path / "state.json"
    with running_server(live, signer) as (_, log, _):
        assert grow(log, 10, "r") == 10
    shutil.copytree(live, old)  # the server is stopped: a consistent older copy
    with running_server(live, signer) as (server, log, _):
        assert grow(log, 15, "r", start=10) == 25
        assert monitor(server.address, signer, state, "--full-audit").exit_code == 0
    with running_server(old, signer) as (server, log, _):
        assert log.checkpoint().size == 10
        evidence = evidence_of(monitor(server.address, signer, state, "--json"))
        human = monitor(server.address, signer, state)
    assert evidence["kind"] == "rollback"
    trusted, observed = check_notes(evidence, signer)
    assert (trusted.size, observed.size) == (25, 10)
    assert human.exit_code == 1
    assert "INVALID: rollback: the log serves size 10 after signing size 25" in human.stderr
    saved = StateFile(state).load()
    assert saved is not None and (saved.size, saved.audited_size) == (25, 25)


def test_unreachable_server_is_exit_2(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    signer = Ed25519Signer.generate(ORIGIN)
    result = monitor(f"127.0.0.1:{port}", signer, tmp_path / "s.json", "--timeout", "5", "--json")
    assert result.exit_code == 2, result.output
    assert "UNAVAILABLE" in json.loads(result.stdout)["error"]


def test_polling_until_interrupted(tmp_path: Path) -> None:
    """Without --once the monitor polls every --interval; SIGINT ends a healthy watch with 0."""
    state = tmp_path / "state.json"
    with running_server(tmp_path / "data") as (server, log, signer):
        grow(log, 3, "p")
        cmd = [
            sys.executable,
            "-c",
            "from ledger_client.cli.main import main; main()",
            "monitor",
            "--server",
            server.address,
            "--key",
            signer.verifier().key_string(),
            "--state",
            str(state),
            "--interval",
            "0.1",
            "--json",
        ]
        proc = processes.spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            assert json.loads(proc.stdout.readline())["status"] == "first-use"
            size = grow(log, 4, "p", start=3)
            while (poll := json.loads(proc.stdout.readline()))["status"] == "unchanged":
                pass
            assert (poll["status"], poll["size"]) == ("extended", size)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                processes.kill_group(proc)
    assert proc.returncode == 0, err
    last = json.loads(out.splitlines()[-1])
    assert last == {"valid": True, "check": "monitor", "stopped": "interrupted", "size": size}
