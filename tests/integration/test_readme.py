"""The README's walk-through, run for real against ``ledger serve`` (as a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import UnauthenticatedError
from ledger.fileio.keys import write_signer
from ledger_client.remote.connection import Connection
from ledger_client.remote.log import RemoteLog
from tests import processes
from tests.harness import ORIGIN, ServerProcess
from tests.waits import wait_until

pytestmark = pytest.mark.integration
README = Path(__file__).resolve().parents[2] / "README.md"


def knows(log: RemoteLog) -> bool:
    """Whether the server accepts ``log``'s token (a read: no side effect)."""
    try:
        log.checkpoint()
    except UnauthenticatedError:
        return False
    return True


def test_readme_quick_start_and_walk_through(tmp_path: Path) -> None:
    text = README.read_text()
    assert "make run" in text and "make test" in text
    for command in (
        "VKEY=$(ledger verifier-key)",
        "ledger append --server 127.0.0.1:6962 --record decision.txt --proof-out proof.txt",
        'ledger-verify tlog-proof proof.txt --key "$VKEY" --leaf leaf.bin',
        "ledger anchor --server 127.0.0.1:6962 --wait",
        "ledger receipt fetch --server 127.0.0.1:6962 --leaf leaf.bin --out receipt.json",
        'ledger-verify receipt receipt.json --key "$VKEY" --tsa-root ledger-data/tsa/root.pem',
    ):
        assert command in text, command
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(tmp_path / "signer.key", signer)
    server = ServerProcess(tmp_path / "data", tmp_path / "signer.key", "--embedded-tsa")
    try:
        shown = processes.run(
            [sys.executable, "-m", "ledger", "verifier-key", "--key", "signer.key"],
            capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
        )  # fmt: skip
        vkey = shown.stdout.strip()
        assert vkey == server.ready["verifier_key"]
        (tmp_path / "decision.txt").write_text('{"any": "bytes"}\n')
        appended = processes.run(
            [sys.executable, "-m", "ledger", "append", "--server", server.address, "--record",
             "decision.txt", "--proof-out", "proof.txt", "--leaf-out", "leaf.bin"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert appended.returncode == 0, appended.stderr
        assert json.loads(appended.stdout)["index"] == 0
        verify = processes.run(
            [sys.executable, "-c", "from ledger_client.cli.main import main; main()", "tlog-proof",
             "proof.txt", "--key", vkey, "--leaf", "leaf.bin"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert verify.returncode == 0, verify.stderr + verify.stdout
        leaf = (tmp_path / "leaf.bin").read_bytes()
        (tmp_path / "leaf.bin").write_bytes(b"tampered")
        bad = processes.run(
            [sys.executable, "-c", "from ledger_client.cli.main import main; main()", "tlog-proof",
             "proof.txt", "--key", vkey, "--leaf", "leaf.bin"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert bad.returncode == 1
        (tmp_path / "leaf.bin").write_bytes(leaf)
        anchored = processes.run(
            [sys.executable, "-m", "ledger", "anchor", "--server", server.address, "--wait"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert anchored.returncode == 0, anchored.stderr
        assert "anchored by embedded-dev" in anchored.stdout
        fetched = processes.run(
            [sys.executable, "-m", "ledger", "receipt", "fetch", "--server", server.address,
             "--leaf", "leaf.bin", "--out", "receipt.json"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert fetched.returncode == 0, fetched.stderr
        assert json.loads(fetched.stdout)["anchors"] == 1
        root = str(tmp_path / "data" / "tsa" / "root.pem")  # ledger-data/tsa/root.pem
        checked = processes.run(
            [sys.executable, "-c", "from ledger_client.cli.main import main; main()", "receipt",
             "receipt.json", "--key", vkey, "--tsa-root", root],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert checked.returncode == 0, checked.stderr + checked.stdout
        assert "anchored at:" in checked.stdout and "CN=" in checked.stdout
    finally:
        assert server.terminate() == 0


def test_readme_walk_through_with_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = README.read_text()
    for command in (
        "ledger token create --scope append --name agent-a > agent-a.token",
        "ledger token create --scope admin --name ops > ops.token",
        "export LEDGER_SERVER=127.0.0.1:6962",
        "export LEDGER_TOKEN=$(cat agent-a.token)",
        "ledger append --record decision.txt --proof-out proof.txt --leaf-out leaf.bin",
        "LEDGER_TOKEN=$(cat ops.token) ledger anchor",
    ):
        assert command in text, command
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(tmp_path / "signer.key", signer)
    data = tmp_path / "ledger-data"
    server = ServerProcess(data, tmp_path / "signer.key", "--embedded-tsa")
    assert server.ready["auth"].startswith("open")

    def ledger(*args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
        env["LEDGER_SERVER"] = server.address
        if token is not None:
            env["LEDGER_TOKEN"] = token
        cmd = [sys.executable, "-m", "ledger", *args]
        return processes.run(
            cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env, check=False
        )

    try:
        made = {}
        for scope, name in (("append", "agent-a"), ("admin", "ops")):
            created = ledger("token", "create", "--scope", scope, "--name", name)
            assert created.returncode == 0, created.stderr
            made[scope] = created.stdout.strip()
            assert made[scope] not in created.stderr
        # the running server picks the tokens up within a second
        with RemoteLog(Connection(address=server.address, token=made["admin"])) as admin:
            wait_until(lambda: knows(admin), timeout=10, what="the server to load the tokens")
        (tmp_path / "decision.txt").write_text('{"any": "bytes"}\n')
        args = ("append", "--record", "decision.txt", "--proof-out", "proof.txt", "--leaf-out",
                "leaf.bin")  # fmt: skip
        refused = ledger(*args)
        assert refused.returncode == 1 and "UNAUTHENTICATED" in refused.stderr
        appended = ledger(*args, token=made["append"])
        assert appended.returncode == 0, appended.stderr
        denied = ledger("anchor", token=made["append"])
        assert denied.returncode == 1 and "PERMISSION_DENIED" in denied.stderr
        anchored = ledger("anchor", token=made["admin"])
        assert anchored.returncode == 0 and "anchored by embedded-dev" in anchored.stdout
        monkeypatch.setenv("LEDGER_SERVER", server.address)  # the SDK's connection, from env
        monkeypatch.setenv("LEDGER_TOKEN", made["append"])
        with RemoteLog() as log:
            assert log.append([bytes(32)]).results[0].index == 1
        listed = ledger("token", "list")
        assert "agent-a" in listed.stdout and made["append"] not in listed.stdout
    finally:
        assert server.terminate() == 0
    served = server.log_path.read_text()
    assert "token:agent-a" in served and "token:ops" in served  # the access log names them
    for token in made.values():
        assert token not in served and token.split("_", 2)[2] not in served
