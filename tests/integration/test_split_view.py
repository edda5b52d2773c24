"""A split view, end to end, with real processes: two ``ledger serve`` with the same key and
origin and diverging entries, and two ``ledger witness serve``.

The witnesses cosign only the first view they see; the second view never reaches a quorum, its
receipts fail ``ledger-verify receipt --min-witnesses 1`` (while they verify without witnesses:
the attack witnesses exist for), and the witnesses' evidence holds both signed checkpoints.
Also: a witness restarted (after being offline while the log grew) keeps its state and catches
up; a log restored from an old backup together with its mark is halted by the witnesses.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import main as ledger_main
from ledger.core import merkle
from ledger.core.checkpoint import CosignatureVerifier, Ed25519Signer, open_checkpoint
from ledger.core.errors import FailedPreconditionError, VerificationError
from ledger.fileio.keys import write_signer
from ledger.witness.core import build_request
from ledger_client.cli.main import main as verify_main
from ledger_client.receipts.receipt import Receipt
from ledger_client.remote.log import RemoteLog
from ledger_client.remote.receipt_fetch import count_cosignatures, fetch_receipt, witnessed_receipt
from tests.harness import ORIGIN, ServerProcess
from tests.waits import wait_until
from tests.witness_harness import WitnessProcess, make_witness_key, post, start_witnesses

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@dataclass
class World:
    tmp: Path
    log_key_file: Path
    signer: Ed25519Signer
    witness_keys: list[tuple[Path, str]]
    witnesses: list[WitnessProcess]
    config: Path

    @property
    def vkeys(self) -> list[str]:
        return [vkey for _, vkey in self.witness_keys]

    def log(self, name: str) -> ServerProcess:
        return ServerProcess(self.tmp / name, self.log_key_file, "--config", str(self.config))

    def restart_witness(self, i: int) -> WitnessProcess:
        old = self.witnesses[i]
        key_file, _ = self.witness_keys[i]
        self.witnesses[i] = WitnessProcess(
            key_file, self.tmp / f"w{i}", [self.signer.verifier().key_string()], old.address
        )
        return self.witnesses[i]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    signer = Ed25519Signer.generate(ORIGIN)
    log_key_file = tmp_path / "log.key"
    write_signer(log_key_file, signer)
    keys = [make_witness_key(tmp_path, f"w{i}.test") for i in range(2)]
    witnesses = start_witnesses([k for k, _ in keys], tmp_path, [signer.verifier().key_string()])
    config = tmp_path / "log.toml"
    entries = "".join(
        f'[[witness]]\nname = "w{i}"\nurl = "{w.url}"\nkey = "{vkey}"\ntimeout_s = 5\n\n'
        for i, (w, (_, vkey)) in enumerate(zip(witnesses, keys, strict=True))
    )
    config.write_text(f"[witnessing]\nquorum = 2\n\n{entries}")
    world = World(tmp_path, log_key_file, signer, keys, witnesses, config)
    try:
        yield world
    finally:
        for w in world.witnesses:
            if w.proc.poll() is None:
                w.stop()


def digests(n: int, salt: str) -> list[bytes]:
    return [hashlib.sha256(f"{salt}-{i}".encode()).digest() for i in range(n)]


def cosigners(note: str, world: World) -> set[str]:
    witnesses = [CosignatureVerifier.from_key_string(k) for k in world.vkeys]
    verified = open_checkpoint(note, [world.signer.verifier()], witnesses=witnesses)
    return {c.name for c in verified.cosignatures}


def verify_receipt_cli(receipt: Receipt, path: Path, world: World, *quorum: str) -> dict:  # type: ignore[type-arg]
    path.write_text(receipt.to_json())
    args = ["receipt", str(path), "--key", world.signer.verifier().key_string(), "--json"]
    result = CliRunner().invoke(verify_main, [*args, *quorum])
    return {"exit": result.exit_code, **json.loads(result.output)}


def with_witnesses(world: World, k: int) -> list[str]:
    args = [arg for vkey in world.vkeys for arg in ("--witness", vkey)]
    return [*args, "--min-witnesses", str(k)]


def log_status(data_dir: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    path = data_dir / "witnesses.json"
    if not path.exists():
        return {}
    return {w["name"]: w for w in json.loads(path.read_text())["witnesses"]}


def test_split_view_never_reaches_a_quorum(world: World) -> None:
    a = world.log("view-a")
    try:
        with RemoteLog(a.address, timeout=30) as remote:
            ours = digests(20, "view-a")
            size_a = remote.append(ours, wait_for_checkpoint=True).checkpoint.size  # type: ignore[union-attr]
            wait_until(lambda: cosigners(remote.checkpoint().note, world) == {"w0.test", "w1.test"})
            witnesses = [CosignatureVerifier.from_key_string(k) for k in world.vkeys]
            receipt_a = wait_until(
                lambda: witnessed_receipt(remote, fetch_receipt(remote, ours[3]), witnesses, 2)
            )
        good = verify_receipt_cli(receipt_a, world.tmp / "a.json", world, *with_witnesses(world, 2))
        assert good["exit"] == 0 and len(good["cosigned_by"]) == 2
    finally:
        a.terminate()

    b = world.log("view-b")  # same key, same origin, other entries: the split view
    try:
        with RemoteLog(b.address, timeout=30) as remote:
            theirs = digests(35, "view-b")
            remote.append(theirs, wait_for_checkpoint=True)

            def refused() -> bool:
                status = log_status(world.tmp / "view-b")
                errors = [w["last_error"] or "" for w in status.values()]
                return len(errors) == 2 and all("422" in e for e in errors)

            wait_until(refused, what="both witnesses to refuse view B with 422")
            # the 422 is evidence of another history: view B halts (issue 22)
            with pytest.raises(FailedPreconditionError, match="halted on evidence: fork"):
                remote.append(digests(1, "view-b-more"))
            note_b = remote.checkpoint().note
            assert cosigners(note_b, world) == set()
            receipt_b = fetch_receipt(remote, theirs[3])
            assert witnessed_receipt(remote, receipt_b, witnesses, 1) is None
        alone = verify_receipt_cli(receipt_b, world.tmp / "b.json", world)
        assert alone["exit"] == 0  # alone, the split view verifies: this is the attack
        quorum = verify_receipt_cli(
            receipt_b, world.tmp / "b.json", world, *with_witnesses(world, 1)
        )
        assert quorum["exit"] == 1 and "witness" in quorum["error"]
    finally:
        b.terminate()

    for i in range(2):
        result = CliRunner().invoke(
            ledger_main,
            ["witness", "evidence", "--state-dir", str(world.tmp / f"w{i}"), "--json"],
        )
        assert result.exit_code == 0, result.output
        items = json.loads(result.output)["items"]
        assert len(items) == 1 and items[0]["kind"] == "inconsistent-proof"
        cosigned = open_checkpoint(items[0]["cosigned"], [world.signer.verifier()], origin=ORIGIN)
        submitted = open_checkpoint(items[0]["submitted"], [world.signer.verifier()], origin=ORIGIN)
        assert cosigned.checkpoint.size == size_a and submitted.checkpoint.size == 35
        proof = [base64.b64decode(h) for h in items[0]["proof"]]
        with pytest.raises(VerificationError):
            merkle.verify_consistency(
                size_a, 35, cosigned.checkpoint.root_hash, submitted.checkpoint.root_hash, proof
            )


def test_offline_witness_catches_up_keeps_state_and_rollback_is_refused(world: World) -> None:
    a = world.log("log")
    try:
        with RemoteLog(a.address, timeout=30) as remote:
            first = remote.append(digests(10, "one"), wait_for_checkpoint=True).checkpoint
            assert first is not None
            wait_until(lambda: len(cosigners(remote.checkpoint().note, world)) == 2)
        a.terminate()
        shutil.copytree(world.tmp / "log", world.tmp / "backup")  # the old backup, size 10
        mark = world.tmp / "log.high-water"  # the log's own high-water mark (issue 14)
        shutil.copy2(mark, world.tmp / "backup.high-water")
        acked = world.tmp / "log.high-water.acked"  # the acknowledged size beside it
        shutil.copy2(acked, world.tmp / "backup.high-water.acked")

        world.witnesses[0].stop(signal.SIGKILL)  # w0 goes offline (crash)
        a = world.log("log")
        with RemoteLog(a.address, timeout=30) as remote:
            started = time.monotonic()
            grown = remote.append(digests(15, "two"), wait_for_checkpoint=True).checkpoint
            assert grown is not None and grown.size == 25
            assert time.monotonic() - started < 3  # an offline witness slows nothing
            wait_until(lambda: cosigners(remote.checkpoint().note, world) == {"w1.test"})
            wait_until(lambda: log_status(world.tmp / "log")["w0"]["last_error"], what="w0 error")
            world.restart_witness(0)  # same state folder, same port
            wait_until(
                lambda: cosigners(remote.checkpoint(25).note, world) == {"w0.test", "w1.test"},
                what="w0 to catch up",
            )
        a.terminate()
        state = CliRunner().invoke(
            ledger_main,
            ["witness", "state", "--state-dir", str(world.tmp / "w0")],
        )
        assert json.loads(state.output)[ORIGIN]["size"] == 25  # kept across the crash

        shutil.rmtree(world.tmp / "log")
        shutil.copytree(world.tmp / "backup", world.tmp / "log")  # rollback to size 10
        # An operator who rolls back the mark too defeats the log's own check (the mark is the
        # first line, tests/integration/test_rollback.py); the witnesses are the second line.
        shutil.copy2(world.tmp / "backup.high-water", mark)
        shutil.copy2(world.tmp / "backup.high-water.acked", acked)
        a = world.log("log")
        with RemoteLog(a.address, timeout=30) as remote:
            old_note = remote.checkpoint().note
            assert open_checkpoint(old_note, [world.signer.verifier()]).checkpoint.size == 10

            def refused() -> bool:
                status = log_status(world.tmp / "log")
                return all("rolled back" in (w["last_error"] or "") for w in status.values())

            wait_until(refused, what="the log to see its rollback refused")
            for w in world.witnesses:  # what the witness answers to the old checkpoint itself
                url = w.url + "/add-checkpoint"
                assert post(url, build_request(25, [], old_note))[0] == 400
                assert post(url, build_request(10, [], old_note))[:3:2] == (409, "25\n")
            # the restored log would grow past 25 with new entries, a fork: the witnesses'
            # answers at start halted it (issue 22), so it signs and appends nothing
            with pytest.raises(FailedPreconditionError, match="halted on evidence"):
                remote.append(digests(20, "three"), wait_for_checkpoint=True)
            assert remote.checkpoint().size == 10
            assert count_cosignatures(
                remote.checkpoint().note,
                [CosignatureVerifier.from_key_string(k) for k in world.vkeys],
            ) == 2  # fmt: skip
    finally:
        a.terminate()
