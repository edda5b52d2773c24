"""Every user error the issue lists ends in one line and an exit code, never a traceback, and
``ledger serve`` creates nothing on disk before its listen address is known to be usable."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.fileio.keys import write_signer
from tests import processes
from tests.harness import ORIGIN, ServerProcess

pytestmark = pytest.mark.integration


def run(
    cwd: Path, *args: str, module: str = "ledger", extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    if module == "ledger":
        cmd = [sys.executable, "-m", "ledger", *args]
    else:
        cmd = [sys.executable, "-c", "from ledger_client.cli.main import main; main()", *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(extra_env or {})
    return processes.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, env=env,
                          check=False)  # fmt: skip


def one_line(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = [  # click's usage errors come with its two usage lines first
        line
        for line in result.stderr.splitlines()
        if line.strip() and not line.startswith(("Usage: ", "Try '"))
    ]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def serve(*extra: str) -> list[str]:
    return ["serve", "--no-embedded-tsa", "--anchor-interval-s", "0",
            "--metrics-listen", "127.0.0.1:0", *extra]  # fmt: skip


def test_a_busy_port_fails_before_anything_is_created(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run(tmp_path, *serve("--listen", f"127.0.0.1:{port}"))
        one_line(result, 1, "in use")
        result = run(tmp_path, *serve("--listen", "127.0.0.1:0", "--metrics-listen",
                                      f"127.0.0.1:{port}"))  # fmt: skip
        one_line(result, 1, "metrics listen", "in use")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("listen", "needle"),
    [("nonsense", "HOST:PORT"), ("127.0.0.1:99999", "0..65535"),
     ("no-such-host.invalid:1", "cannot resolve"), ("192.0.2.1:6962", "not an address")],
)  # fmt: skip
def test_bad_listen_addresses(tmp_path: Path, listen: str, needle: str) -> None:
    one_line(run(tmp_path, *serve("--listen", listen)), 2 if "PORT" in needle or
             "65535" in needle else (2 if "resolve" in needle else 1), needle)  # fmt: skip
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("toml", "needle"),
    [("[server]\nmax_pending = -5\n", "c.toml: [server] max_pending: "),
     ("[log]\ncheckpoint_interval_ms = 0\n", "c.toml: [log] checkpoint_interval_ms: "),
     ('[server]\nlog_format = "yaml"\n', "c.toml: [server] log_format: "),
     ('[server]\nlisten = "127.0.0.1:99999"\n', "c.toml: [server] listen: ")],
)  # fmt: skip
def test_config_values_out_of_range(tmp_path: Path, toml: str, needle: str) -> None:
    (tmp_path / "c.toml").write_text(toml)
    one_line(run(tmp_path, "serve", "--config", "c.toml"), 2, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]


@pytest.mark.parametrize(
    ("toml", "env", "needle"),
    [("[server]\nlisen = 1\n", {}, "c.toml: [server] lisen: unknown key (did you mean listen?)"),
     ("[[anchor.tsa]]\nname = 'a'\nurl = 'http://t'\nroot = ['r.pem']\n", {},
      "c.toml: [[anchor.tsa]] #1 root: unknown key (did you mean roots?)"),
     ("", {"LEDGER_LISTEN": "bad"}, "error: environment variable LEDGER_LISTEN: 'bad': want"),
     ("", {"LEDGER_MAX_PENDNG": "5"}, "LEDGER_MAX_PENDNG: not a setting (did you mean "
      "LEDGER_MAX_PENDING?)")],
)  # fmt: skip
def test_config_errors_name_the_file_and_key_or_the_variable(
    tmp_path: Path, toml: str, env: dict[str, str], needle: str
) -> None:
    (tmp_path / "c.toml").write_text(toml)
    line = one_line(run(tmp_path, "config", "show", "--config", "c.toml", extra_env=env), 2,
                    needle)  # fmt: skip
    assert "config None" not in line and ": ?:" not in line


def test_binary_config_and_key_files(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_bytes(os.urandom(64) + b"\xff\xfe")
    one_line(run(tmp_path, "serve", "--config", "c.toml"), 2, "not UTF-8")
    (tmp_path / "k.key").write_bytes(b"\xff\xfe\x00\x01binary")
    (tmp_path / "k.key").chmod(0o600)
    one_line(run(tmp_path, *serve("--listen", "127.0.0.1:0", "--key", "k.key")), 2, "k.key")
    one_line(run(tmp_path, "verifier-key", "--key", "k.key"), 2, "k.key")


def test_unusable_data_dirs(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    one_line(run(tmp_path, *serve("--listen", "127.0.0.1:0", "--data-dir", "file")), 2,
             "is a file")  # fmt: skip
    one_line(run(tmp_path, *serve("--listen", "127.0.0.1:0", "--data-dir", "file/sub")), 2,
             "file/sub")  # fmt: skip
    if os.geteuid() != 0:  # root may write anywhere
        (tmp_path / "ro").mkdir(mode=0o500)
        one_line(run(tmp_path, *serve("--listen", "127.0.0.1:0", "--data-dir", "ro/data")), 1,
                 "permission denied")  # fmt: skip
    one_line(run(tmp_path, *serve("--listen", "127.0.0.1:0", "--data-dir", "/proc/ledger")), 2,
             "/proc/ledger")  # fmt: skip


def test_a_readable_key_file_is_refused(tmp_path: Path) -> None:
    write_signer(tmp_path / "k.key", Ed25519Signer.generate(ORIGIN))
    (tmp_path / "k.key").chmod(0o644)
    one_line(run(tmp_path, *serve("--listen", "127.0.0.1:0", "--key", "k.key", "--origin",
                                  ORIGIN)), 2, "chmod 600")  # fmt: skip


def test_a_private_key_given_as_verifier_key_is_not_echoed(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    secret = signer.key_string()
    (tmp_path / "p.txt").write_text("proof")
    result = run(tmp_path, "tlog-proof", "p.txt", "--key", secret, module="ledger_client")
    assert result.returncode == 2 and "private signer key" in result.stderr
    assert secret not in result.stderr + result.stdout
    seed = secret.split("+", 4)[4]  # PRIVATE+KEY+name+hexid+base64: "+" is base64 too
    assert seed not in result.stderr + result.stdout


def test_copied_data_dir_with_another_origin_or_key_and_a_held_lock(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(tmp_path / "signer.key", signer)
    server = ServerProcess(tmp_path / "data", tmp_path / "signer.key")
    try:
        one_line(run(tmp_path, "anchor", "--data-dir", "data"), 1, "lock")
        one_line(run(tmp_path, "fsck", "--data-dir", "data"), 1, "in use by a running server")
        second = run(tmp_path, *serve("--listen", "127.0.0.1:0", "--data-dir", "data",
                                      "--key", "signer.key", "--origin", ORIGIN))  # fmt: skip
        one_line(second, 1, "in use by a running server")
    finally:
        assert server.terminate() == 0
    shutil.copytree(tmp_path / "data", tmp_path / "copy")
    other = Ed25519Signer.generate("other.example/log")
    write_signer(tmp_path / "other.key", other)
    one_line(run(tmp_path, *serve("--listen", "127.0.0.1:0", "--data-dir", "copy", "--origin",
                                  "other.example/log", "--key", "other.key")), 1,
             "holds the log")  # fmt: skip
    write_signer(tmp_path / "same-name.key", Ed25519Signer.generate(ORIGIN))
    one_line(run(tmp_path, *serve("--listen", "127.0.0.1:0", "--data-dir", "copy", "--origin",
                                  ORIGIN, "--key", "same-name.key")), 1, "rotate-key")  # fmt: skip
    one_line(run(tmp_path, *serve("--listen", "127.0.0.1:0", "--data-dir", "copy", "--origin",
                                  ORIGIN)), 1, "missing")  # fmt: skip
    assert not (tmp_path / "copy" / "signer.key").exists()  # no key was made up
