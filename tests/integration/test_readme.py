"""The README's walk-through, run for real against ``ledger serve`` (as a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.checkpoint import Ed25519Signer
from ledger.keys import write_signer
from tests.harness import ORIGIN, ServerProcess

pytestmark = pytest.mark.integration
README = Path(__file__).resolve().parents[2] / "README.md"


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
        shown = subprocess.run(
            [sys.executable, "-m", "ledger", "verifier-key", "--key", "signer.key"],
            capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
        )  # fmt: skip
        vkey = shown.stdout.strip()
        assert vkey == server.ready["verifier_key"]
        (tmp_path / "decision.txt").write_text('{"any": "bytes"}\n')
        appended = subprocess.run(
            [sys.executable, "-m", "ledger", "append", "--server", server.address, "--record",
             "decision.txt", "--proof-out", "proof.txt", "--leaf-out", "leaf.bin"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert appended.returncode == 0, appended.stderr
        assert json.loads(appended.stdout)["index"] == 0
        verify = subprocess.run(
            [sys.executable, "-c", "from ledger_client.cli import main; main()", "tlog-proof",
             "proof.txt", "--key", vkey, "--leaf", "leaf.bin"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert verify.returncode == 0, verify.stderr + verify.stdout
        leaf = (tmp_path / "leaf.bin").read_bytes()
        (tmp_path / "leaf.bin").write_bytes(b"tampered")
        bad = subprocess.run(
            [sys.executable, "-c", "from ledger_client.cli import main; main()", "tlog-proof",
             "proof.txt", "--key", vkey, "--leaf", "leaf.bin"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert bad.returncode == 1
        (tmp_path / "leaf.bin").write_bytes(leaf)
        anchored = subprocess.run(
            [sys.executable, "-m", "ledger", "anchor", "--server", server.address, "--wait"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert anchored.returncode == 0, anchored.stderr
        assert "anchored by embedded-dev" in anchored.stdout
        fetched = subprocess.run(
            [sys.executable, "-m", "ledger", "receipt", "fetch", "--server", server.address,
             "--leaf", "leaf.bin", "--out", "receipt.json"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert fetched.returncode == 0, fetched.stderr
        assert json.loads(fetched.stdout)["anchors"] == 1
        root = str(tmp_path / "data" / "tsa" / "root.pem")  # ledger-data/tsa/root.pem
        checked = subprocess.run(
            [sys.executable, "-c", "from ledger_client.cli import main; main()", "receipt",
             "receipt.json", "--key", vkey, "--tsa-root", root],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert checked.returncode == 0, checked.stderr + checked.stdout
        assert "anchored at:" in checked.stdout and "CN=" in checked.stdout
    finally:
        assert server.terminate() == 0
