"""Witnesses over real HTTP: status codes on the wire, concurrent submissions, and a real log
server that gets its checkpoints cosigned in the background (``ledger.log.witnessing``)."""

from __future__ import annotations

import hashlib
import json
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.app.settings import WitnessTarget
from ledger.core import merkle
from ledger.core.checkpoint import (
    Checkpoint,
    CosignatureSigner,
    CosignatureVerifier,
    Ed25519Signer,
    NoteSignature,
    SignedNote,
    VerifiedCheckpoint,
    Verifier,
    open_checkpoint,
)
from ledger.records.decision import DecisionRecord, MemoryWrite, new_record_id
from ledger.witness.core import SIZE_CONTENT_TYPE
from ledger.witness.state import load_records
from ledger_client.cli.main import main as verify_main
from ledger_client.receipts.receipt import to_tlog_proof
from ledger_client.remote.log import RemoteLog
from ledger_client.remote.receipt_fetch import count_cosignatures, refresh_cosignatures
from ledger_client.sdk.client import LedgerClient
from tests.harness import ORIGIN, running_server
from tests.waits import wait_until
from tests.witness_fixtures import View
from tests.witness_harness import (
    FakeWitness,
    WitnessProcess,
    WitnessThread,
    make_witness_key,
    post,
)

pytestmark = pytest.mark.integration


def digests(n: int, salt: str) -> list[bytes]:
    return [hashlib.sha256(f"{salt}-{i}".encode()).digest() for i in range(n)]


def example_record() -> DecisionRecord:
    return DecisionRecord(
        record_id=new_record_id(),
        run_id="witnessed",
        step=0,
        time="2026-01-01T00:00:00.000Z",
        agent="agent-w",
        payload=MemoryWrite(key="k", value="v", source="user", trust_label="trusted"),
    )


def wait_cosigned(
    remote: RemoteLog, log_key: Verifier, keys: list[str], k: int, size: int, timeout: float = 20
) -> VerifiedCheckpoint:
    """The latest checkpoint once it covers ``size`` and carries ``k`` of ``keys``' lines."""
    deadline = time.monotonic() + timeout
    witnesses = [CosignatureVerifier.from_key_string(key) for key in keys]
    last = None
    while time.monotonic() < deadline:
        verified = open_checkpoint(remote.checkpoint().note, [log_key], witnesses=witnesses)
        last = verified
        if verified.checkpoint.size >= size and len(verified.cosignatures) >= k:
            return verified
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint >= {size} with {k} cosignatures: last {last}")


def reported(
    data_dir: Path, done: Callable[[dict[str, Any], dict[str, dict[str, Any]]], object]
) -> dict[str, Any] | None:
    """The log's witnesses.json once ``done(status, by_name)`` holds, else None."""
    path = data_dir / "witnesses.json"
    if not path.exists():
        return None
    status: dict[str, Any] = json.loads(path.read_text())
    return status if done(status, {w["name"]: w for w in status["witnesses"]}) else None


def test_wire_statuses_and_concurrent_submissions(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    server = WitnessThread(tmp_path / "w", {ORIGIN: [signer.verifier()]})
    url = server.url + "/add-checkpoint"
    try:
        a, b = View(signer, "same"), View(signer, "same")
        a.grow(5)
        b.grow(5)
        assert post(url, a.request(0))[0] == 200
        a.salt, b.salt = "a", "b"
        a.grow(5)
        b.grow(5)
        with ThreadPoolExecutor(16) as pool:
            answers = list(
                pool.map(lambda body: post(url, body), [a.request(5), b.request(5)] * 16)
            )
        assert a.log.checkpoint(5).root_hash == b.log.checkpoint(5).root_hash  # both valid
        assert [s for s, _, _ in answers].count(200) == 1
        stale = [(t, body) for s, t, body in answers if s == 409]
        assert len(stale) == 31 and all(
            t == SIZE_CONTENT_TYPE and body == "10\n" for t, body in stale
        )
        assert load_records(tmp_path / "w")[ORIGIN].size == 10
        status, kind, body = post(url, b"old 0\n\nnot a checkpoint\n")
        assert status == 400 and kind.startswith("text/plain") and body.strip()
        assert post(url, b"x" * 20_000)[0] == 413
        status, _, _ = post(server.url + "/nothing-here", b"")
        assert status == 404
    finally:
        server.stop()


def test_log_gets_cosigned_in_the_background_and_a_dead_witness_costs_nothing(
    tmp_path: Path,
) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    logs = {ORIGIN: [signer.verifier()]}
    w1, w2 = (
        WitnessThread(tmp_path / "w1", logs, "w1.test"),
        WitnessThread(tmp_path / "w2", logs, "w2.test"),
    )
    dead_key = CosignatureSigner.generate("w3.test").verifier().key_string()
    dead = WitnessTarget(name="dead", url="http://127.0.0.1:9", key=dead_key)
    targets = (
        WitnessTarget(name="w1", url=w1.url, key=w1.verifier_key),
        WitnessTarget(name="w2", url=w2.url, key=w2.verifier_key),
        dead,
    )
    keys = [w1.verifier_key, w2.verifier_key]
    try:
        with running_server(tmp_path / "log", signer, witnesses=targets, witness_quorum=2) as (
            _server,
            remote,
            _,
        ):
            for round_ in range(3):
                started = time.monotonic()
                out = remote.append(digests(200, f"r{round_}"), wait_for_checkpoint=True)
                assert time.monotonic() - started < 2.0  # the dead witness slows nothing
                assert out.checkpoint is not None
                verified = wait_cosigned(remote, signer.verifier(), keys, 2, out.checkpoint.size)
                assert {c.name for c in verified.cosignatures} == {"w1.test", "w2.test"}
            # receipts read the stored checkpoint of their size: it carries the cosignatures
            size = verified.checkpoint.size
            stored = remote.checkpoint(size).note
            assert stored.count("\u2014 ") == 3
            status = wait_until(
                lambda: reported(
                    tmp_path / "log",
                    lambda s, w: (
                        (w["w1"]["cosigned_size"] or 0) >= size
                        and w["dead"]["last_error"]
                        and s["quorum_size"] >= size
                    ),
                ),
                what="witnesses.json to report the round",
            )
            by_name = {w["name"]: w for w in status["witnesses"]}
            assert by_name["w1"]["cosigned_size"] >= size and by_name["w1"]["last_error"] is None
            assert by_name["dead"]["cosigned_size"] is None and by_name["dead"]["last_error"]
            assert status["quorum_latency_ms"]["count"] >= 1 and status["quorum_size"] >= size
    finally:
        w1.stop()
        w2.stop()


def test_clients_require_the_quorum(tmp_path: Path) -> None:
    """The SDK, receipts, tlog-proof and the monitor with --witness / --min-witnesses."""
    signer = Ed25519Signer.generate(ORIGIN)
    logs = {ORIGIN: [signer.verifier()]}
    w1 = WitnessThread(tmp_path / "w1", logs, "w1.test")
    w2 = WitnessThread(tmp_path / "w2", logs, "w2.test")
    targets = tuple(
        WitnessTarget(name=n, url=w.url, key=w.verifier_key) for n, w in (("a", w1), ("b", w2))
    )
    keys = [w1.verifier_key, w2.verifier_key]
    quorum = [*(a for k in keys for a in ("--witness", k)), "--min-witnesses", "2"]
    vkey = signer.verifier().key_string()
    try:
        with running_server(tmp_path / "log", signer, witnesses=targets) as (server, remote, _):
            sdk = LedgerClient(server.address, witnesses=keys, register_atexit=False)
            with sdk:
                record = example_record()
                receipt = sdk.append(record, timeout=20)
            verifiers = [CosignatureVerifier.from_key_string(k) for k in keys]
            assert count_cosignatures(receipt.checkpoint, verifiers) == 2
            # an early receipt (no cosignatures yet) gains them when refreshed
            bare = SignedNote.from_text(receipt.checkpoint)
            early = replace(
                receipt,
                checkpoint=SignedNote(text=bare.text, signatures=bare.signatures[:1]).to_text(),
            )
            assert count_cosignatures(early.checkpoint, verifiers) == 0
            refreshed = refresh_cosignatures(remote, early)
            assert count_cosignatures(refreshed.checkpoint, verifiers) == 2
            (tmp_path / "r.json").write_text(early.to_json())
            (tmp_path / "p.txt").write_text(to_tlog_proof(refreshed).to_text())
            runner = CliRunner()
            ok = runner.invoke(verify_main, ["receipt", str(tmp_path / "r.json"), "--key", vkey])
            assert ok.exit_code == 0, ok.output
            short = runner.invoke(
                verify_main, ["receipt", str(tmp_path / "r.json"), "--key", vkey, *quorum]
            )
            assert short.exit_code == 1 and "0 trusted witness(es)" in short.output
            (tmp_path / "r.json").write_text(refreshed.to_json())
            good = runner.invoke(
                verify_main, ["receipt", str(tmp_path / "r.json"), "--key", vkey, *quorum]
            )
            assert good.exit_code == 0 and good.output.count("cosigned by:") == 2, good.output
            leaf = merkle.leaf_hash(refreshed.leaf).hex()
            args = ["tlog-proof", str(tmp_path / "p.txt"), "--key", vkey, "--leaf-hash", leaf]
            proof = runner.invoke(verify_main, [*args, *quorum])
            assert proof.exit_code == 0, proof.output
            monitor = runner.invoke(
                verify_main,
                ["monitor", "--server", server.address, "--key", vkey, "--once",
                 "--state", str(tmp_path / "m.json"), *quorum],
            )  # fmt: skip
            assert monitor.exit_code == 0, monitor.output
    finally:
        w1.stop()
        w2.stop()


def submit_chain(view: View, url: str, progress: dict[str, int]) -> None:
    """Grow ``view`` and submit each checkpoint until the witness stops answering."""
    while True:
        old = progress["acked"]
        view.grow(3)
        progress["sent"] = view.log.checkpoint(0).size
        try:
            status, _, _ = post(url, view.request(old), timeout=5)
        except OSError:
            return  # killed
        if status != 200:
            return
        progress["acked"] = progress["sent"]


@pytest.mark.slow
def test_witness_killed_mid_submissions_never_forgets_a_cosignature(tmp_path: Path) -> None:
    """SIGKILL a ``ledger witness serve`` while a chain of checkpoints is being cosigned: after
    restart its size is at least the last one it acknowledged (the state is durable before the
    answer) and at most the last one sent, and the chain goes on from there."""
    signer = Ed25519Signer.generate(ORIGIN)
    key_file, _ = make_witness_key(tmp_path, "killed.test")
    view = View(signer)
    acked, sent, listen = 0, 0, "127.0.0.1:0"
    for cycle in range(4):
        witness = WitnessProcess(
            key_file, tmp_path / "state", [signer.verifier().key_string()], listen
        )
        listen, url = witness.address, witness.url + "/add-checkpoint"
        if acked:
            status, _, body = post(url, view.request(0))
            assert status == 409 and acked <= int(body) <= sent, (cycle, acked, body, sent)
            acked = sent = int(body)
        progress = {"acked": acked, "sent": sent}
        thread = threading.Thread(target=submit_chain, args=(view, url, progress))
        thread.start()
        # killed after a few more acknowledgements each cycle (3 leaves per checkpoint)
        target = acked + 3 * (2 + cycle)

        def enough(p: dict[str, int] = progress, t: int = target) -> bool:
            return p["acked"] >= t

        wait_until(enough, what=f"acks up to {target}")
        witness.stop(signal.SIGKILL)
        thread.join(timeout=10)
        acked, sent = progress["acked"], progress["sent"]
        assert acked > 0
    assert acked <= load_records(tmp_path / "state")[ORIGIN].size <= sent


def test_bad_witness_answers_are_refused_and_reported(tmp_path: Path) -> None:
    """Garbage, an oversized answer, a malformed size, a line by another key: nothing is
    attached, each is the witness's last error, and appends go on."""
    signer = Ed25519Signer.generate(ORIGIN)
    mine = CosignatureSigner.generate("w.test")
    key = mine.verifier().key_string()
    other = CosignatureSigner.generate("w.test")  # same name, another key
    body = Checkpoint(origin=ORIGIN, size=1, root_hash=b"\0" * 32)
    foreign = other.cosign(body, 1).to_line().encode() + b"\n"
    forged = NoteSignature(name=mine.name, key_id=mine.key_id, signature=b"\1" * 72)
    fakes = {
        "garbage": FakeWitness(200, "text/plain", b"hello\n"),
        "huge": FakeWitness(200, "text/plain", b"x" * 100_000),
        "size": FakeWitness(409, SIZE_CONTENT_TYPE, b"012\n"),
        "foreign": FakeWitness(200, "text/plain", foreign),
        "forged": FakeWitness(200, "text/plain", forged.to_line().encode() + b"\n"),
        "refusing": FakeWitness(403, "text/plain", b"no trusted signature\n"),
    }
    targets = tuple(WitnessTarget(name=n, url=f.url, key=key) for n, f in fakes.items())
    try:
        with running_server(tmp_path / "log", signer, witnesses=targets, witness_quorum=1) as (
            _server,
            remote,
            _,
        ):
            remote.append(digests(10, "x"), wait_for_checkpoint=True)
            wait_until(
                lambda: reported(
                    tmp_path / "log", lambda _, w: all(w[n]["last_error"] for n in fakes)
                ),
                what="every fake witness's error in witnesses.json",
            )
            remote.append(digests(10, "y"), wait_for_checkpoint=True)
            status = json.loads((tmp_path / "log" / "witnesses.json").read_text())
            errors = {w["name"]: w["last_error"] for w in status["witnesses"]}
            assert "no cosignature line" in errors["garbage"]
            assert "over 65536 bytes" in errors["huge"]
            assert "malformed" in errors["size"]
            assert "no cosignature line" in errors["foreign"]
            assert "does not verify" in errors["forged"]
            assert errors["refusing"] == "HTTP 403: no trusted signature"
            assert remote.checkpoint().note.count("\u2014 ") == 1  # only the log's signature
    finally:
        for fake in fakes.values():
            fake.stop()
