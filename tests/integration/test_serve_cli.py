"""``ledger serve`` on embedded defaults, TOML configuration, graceful shutdown, keygen."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import main
from ledger.core.checkpoint import Ed25519Verifier, open_checkpoint
from ledger_client.remote.log import RemoteLog
from tests import processes

pytestmark = pytest.mark.integration


def start(cwd: Path, *args: str) -> tuple[subprocess.Popen[str], dict[str, object]]:
    proc = processes.spawn(
        [sys.executable, "-m", "ledger", "serve", *args],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else ""
    return proc, json.loads(line)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_serve_with_no_flags_uses_embedded_defaults(tmp_path: Path) -> None:
    if not port_free(6962) or not port_free(6963):
        pytest.skip("port 6962 or 6963 (metrics) is taken on this machine")
    proc, ready = start(tmp_path)
    try:
        assert ready["address"] == "127.0.0.1:6962"
        assert ready["tiles_url"] == "http://127.0.0.1:6963/"  # tlog-tiles next to gRPC
        assert ready["origin"] == "ledger.localhost/dev" and ready["key_created"] is True
        key = tmp_path / "ledger-data" / "signer.key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert (tmp_path / "ledger-data" / "db").is_dir()
        assert ready["tsas"] == ["embedded-dev"]
        verifier = Ed25519Verifier.from_key_string(str(ready["verifier_key"]))
        with RemoteLog(str(ready["address"])) as log:
            out = log.append([hashlib.sha256(b"x").digest()], wait_for_checkpoint=True)
            assert out.checkpoint is not None
            open_checkpoint(out.checkpoint.note, [verifier], origin="ledger.localhost/dev")
            size, anchors, failures = log.anchor_now()
            assert size == 1 and [a.tsa for a in anchors] == ["embedded-dev"] and not failures
    finally:
        proc.send_signal(signal.SIGTERM)
        assert processes.wait(proc, 60) == 0
        assert proc.stderr is not None
        err = proc.stderr.read()
        assert ("development default" in err and "proves nothing" in err) or "prove nothing" in err
    # the key is kept across restarts
    proc, again = start(tmp_path, "--listen", "127.0.0.1:0")
    proc.send_signal(signal.SIGINT)
    assert processes.wait(proc, 60) == 0
    assert again["verifier_key"] == ready["verifier_key"] and again["key_created"] is False


def test_toml_config_flags_win_json_logs_and_graceful_drain(tmp_path: Path) -> None:
    config = tmp_path / "ledger.toml"
    config.write_text(
        '[log]\norigin = "ledger.example/cfg"\ndata_dir = "d1"\ncheckpoint_interval_ms = 60000\n'
        '[server]\nlisten = "127.0.0.1:0"\nlog_format = "json"\n'
        "[anchor]\nembedded_tsa = false\ninterval_s = 0\n"
    )
    proc, ready = start(tmp_path, "--config", str(config), "--data-dir", "d2")
    assert ready["origin"] == "ledger.example/cfg" and ready["data_dir"] == "d2"
    with RemoteLog(str(ready["address"])) as log:
        log.append([hashlib.sha256(b"first").digest()], wait_for_checkpoint=True)
        log.append([hashlib.sha256(f"{i}".encode()).digest() for i in range(50)])
        before = log.checkpoint().size  # the next scheduled checkpoint is a minute away
    assert before == 1
    proc.send_signal(signal.SIGTERM)
    assert processes.wait(proc, 60) == 0
    assert proc.stderr is not None
    lines = [json.loads(x) for x in proc.stderr.read().splitlines() if x.strip()]
    assert all({"time", "level", "logger", "message"} <= set(x) for x in lines)
    # the final checkpoint on shutdown covers everything acknowledged
    proc, ready = start(tmp_path, "--config", str(config), "--data-dir", "d2")
    with RemoteLog(str(ready["address"])) as log:
        assert log.checkpoint().size == 51
    proc.send_signal(signal.SIGTERM)
    assert processes.wait(proc, 60) == 0


def test_config_show_and_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[log]\norigin = "o.example/x"\n[server]\nmax_pending = 7\n')
    out = CliRunner().invoke(main, ["config", "show", "--config", str(config)])
    assert out.exit_code == 0
    shown = json.loads(out.output)
    assert shown["origin"] == "o.example/x" and shown["max_pending"] == 7
    assert shown["key_file"] == "ledger-data/signer.key"
    config.write_text("[log]\nnope = 1\n")
    bad = CliRunner().invoke(main, ["config", "show", "--config", str(config)])
    assert bad.exit_code == 2 and "c.toml: [log] nope: unknown key" in bad.output
    config.write_text("[server]\nmax_pending = 'many'\n")
    bad = CliRunner().invoke(main, ["config", "show", "--config", str(config)])
    assert (
        bad.exit_code == 2 and "[server] max_pending: Input should be a valid integer" in bad.output
    )


def test_keygen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    out = runner.invoke(main, ["keygen", "log.example/agents"])
    assert out.exit_code == 0
    vkey = out.stdout.strip().splitlines()[0]
    assert Ed25519Verifier.from_key_string(vkey).name == "log.example/agents"
    path = Path("log.example_agents.key")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().startswith("PRIVATE+KEY+log.example/agents+")
    again = runner.invoke(main, ["keygen", "log.example/agents"])
    assert again.exit_code == 2 and "exists" in again.output
    other = runner.invoke(main, ["keygen", "x", "--out", "k/x.key"])
    assert other.exit_code == 0 and Path("k/x.key").exists()


def test_ledger_tsa_command_serves_verifiable_tokens(tmp_path: Path) -> None:
    from cryptography import x509

    from ledger.timestamp.rfc3161 import imprint_for_checkpoint_body
    from ledger.tsa.client import TsaClient

    proc = processes.spawn(
        [sys.executable, "-m", "ledger", "tsa", "--listen", "127.0.0.1:0",
         "--state-dir", str(tmp_path / "tsa")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        roots = x509.load_pem_x509_certificates(Path(ready["root"]).read_bytes())
        digest = imprint_for_checkpoint_body(b"ledger.test/tsa\n1\n" + b"A" * 44 + b"\n")
        token, verified = TsaClient(ready["url"], timeout=10, roots=roots).timestamp(digest)
        assert token and verified.digest == digest
    finally:
        proc.send_signal(signal.SIGINT)
        processes.wait(proc, 30)
    bad = CliRunner().invoke(main, ["tsa", "--listen", "nonsense"])
    assert bad.exit_code == 2 and "want HOST:PORT" in bad.output
