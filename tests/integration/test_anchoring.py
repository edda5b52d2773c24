"""RFC 3161 anchoring against a real server: the embedded TSA, OpenSSL's TSA, a TSA that hangs,
the in-server schedule and the cron command (``ledger anchor``)."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from cryptography import x509

from ledger.app.settings import TsaSettings
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.types import Anchor
from ledger.fileio.keys import write_signer
from ledger.log.anchoring import checkpoint_body
from ledger.timestamp.rfc3161 import imprint_for_checkpoint_body, verify_token
from ledger_client.remote.log import RemoteLog
from tests import processes
from tests.harness import ORIGIN, running_server
from tests.tsa_openssl import openssl_tsa

pytestmark = pytest.mark.integration


def digests(n: int, salt: str) -> list[bytes]:
    return [hashlib.sha256(f"{salt}-{i}".encode()).digest() for i in range(n)]


def embedded_root(data_dir: Path) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates((data_dir / "tsa" / "root.pem").read_bytes())


def check_anchor(log: RemoteLog, size: int, tsa: str, roots: list[x509.Certificate]) -> None:
    checkpoint, anchors = log.anchors(size)
    assert checkpoint.size == size
    (anchor,) = [a for a in anchors if a.tsa == tsa]
    digest = imprint_for_checkpoint_body(checkpoint_body(checkpoint.note))
    verified = verify_token(anchor.token, digest=digest, roots=roots)
    assert abs(verified.gen_time.timestamp() * 1000 - anchor.gen_time_ms) < 1000


def test_anchor_now_with_embedded_tsa_and_no_double_stamp(tmp_path: Path) -> None:
    with running_server(tmp_path, embedded_tsa=True) as (_, log, _signer):
        out = log.append(digests(20, "a"), wait_for_checkpoint=True)
        assert out.checkpoint is not None
        size, anchors, failures = log.anchor_now()
        assert failures == [] and size == out.checkpoint.size
        assert [a.tsa for a in anchors] == ["embedded-dev"]
        check_anchor(log, size, "embedded-dev", embedded_root(tmp_path))
        again_size, again, _ = log.anchor_now()
        assert again_size == size and again == []  # never stamped twice per TSA
        assert log.anchored_sizes() == [size]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_anchor_with_openssl_tsa_and_schedule(tmp_path: Path) -> None:
    with openssl_tsa(tmp_path) as (url, root_pem, _tsa_pem):
        root_file = tmp_path / "openssl-root.pem"
        root_file.write_bytes(root_pem)
        tsa = TsaSettings(name="openssl", url=url, roots=(root_file,))
        data = tmp_path / "data"
        with running_server(data, tsas=(tsa,), embedded_tsa=True, anchor_interval_s=0.2) as (
            _,
            log,
            _signer,
        ):
            out = log.append(digests(5, "o"), wait_for_checkpoint=True)
            assert out.checkpoint is not None
            size = out.checkpoint.size
            deadline = time.monotonic() + 30
            tsas: set[str] = set()
            while time.monotonic() < deadline and tsas != {"openssl", "embedded-dev"}:
                time.sleep(0.1)  # the schedule stores one TSA's anchor after the other
                if size in log.anchored_sizes():
                    tsas = {a.tsa for a in log.anchors(size)[1]}
            assert tsas == {"openssl", "embedded-dev"}
            check_anchor(log, size, "openssl", x509.load_pem_x509_certificates(root_pem))
            check_anchor(log, size, "embedded-dev", embedded_root(data))


def test_hanging_tsa_does_not_slow_appends(tmp_path: Path) -> None:
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen(16)  # accepts connections into the backlog, never answers
    root = tmp_path / "root.pem"
    root.write_bytes(_throwaway_root())
    hang = TsaSettings(
        name="hangs", url=f"http://127.0.0.1:{sink.getsockname()[1]}/", roots=(root,), timeout_s=3
    )
    try:
        with running_server(tmp_path / "d", tsas=(hang,), embedded_tsa=False) as (_, log, _s):
            log.append(digests(3, "h"), wait_for_checkpoint=True)
            result: dict[str, tuple[int, list[Anchor], list[str]]] = {}
            anchoring = threading.Thread(target=lambda: result.update(out=log.anchor_now()))
            anchoring.start()
            sink.settimeout(30)
            held, _ = sink.accept()  # the anchorer is now waiting on the TSA's answer
            latencies = []
            for i in range(20):
                t0 = time.monotonic()
                log.append(digests(1, f"h{i}"), wait_for_checkpoint=True)
                latencies.append(time.monotonic() - t0)
            assert anchoring.is_alive(), "the TSA answered: the test proved nothing"
            assert max(latencies) < 1.0, latencies
            anchoring.join(timeout=60)
            _size, anchors, failures = result["out"]
            assert anchors == [] and failures and failures[0].startswith("hangs:")
            held.close()
    finally:
        sink.close()


def _throwaway_root() -> bytes:
    from tests.tsa_openssl import make_ca, pem

    return pem(make_ca("unused root"))


def filled_and_stopped(data_dir: Path, signer: Ed25519Signer, salt: str, n: int) -> int:
    """Append ``n`` entries to the log in ``data_dir`` (its key file written on first use) and
    stop it; return the published size."""
    if not (data_dir / "signer.key").exists():
        write_signer(data_dir / "signer.key", signer)
    with running_server(data_dir, signer, embedded_tsa=False) as (_server, log, _):
        log.append(digests(n, salt), wait_for_checkpoint=True)
        return log.checkpoint().size


def anchor_data_dir(data_dir: Path) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "ledger", "anchor", "--data-dir", str(data_dir), "--json"]
    done = processes.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stderr


def test_ledger_anchor_refuses_a_data_dir_behind_or_off_its_mark(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    data = tmp_path / "data"
    assert filled_and_stopped(data, signer, "first", 5) == 5
    shutil.copytree(data, tmp_path / "backup")  # the mark (data.high-water) stays where it is
    assert filled_and_stopped(data, signer, "second", 5) == 10
    shutil.rmtree(data)
    shutil.copytree(tmp_path / "backup", data)  # rolled back to size 5; the mark says 10
    code, err = anchor_data_dir(data)
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "has 5 entries, but a checkpoint of size 10" in err

    assert filled_and_stopped(tmp_path / "other", signer, "other", 12) == 12
    shutil.rmtree(data)
    shutil.copytree(tmp_path / "other", data)  # same origin, another history, past the mark
    code, err = anchor_data_dir(data)
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "is not the one that was published" in err


def test_ledger_anchor_cron_twice(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    key = tmp_path / "data" / "signer.key"
    write_signer(key, signer)
    with running_server(tmp_path / "data", signer, embedded_tsa=False) as (server, log, _):
        log.append(digests(7, "c"), wait_for_checkpoint=True)
        size = log.checkpoint().size
        server_addr = server.address
    # the server is stopped: the cron command works on the data dir directly
    cmd = [sys.executable, "-m", "ledger", "anchor", "--data-dir", str(tmp_path / "data"), "--json"]
    first = processes.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"size": size, "anchored": ["embedded-dev"], "failures": []}
    second = processes.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["anchored"] == []
    # --server against a dead address fails with a clear line and exit 1
    dead = processes.run([sys.executable, "-m", "ledger", "anchor", "--server", server_addr],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert dead.returncode == 1 and "UNAVAILABLE" in dead.stderr
    usage = processes.run([sys.executable, "-m", "ledger", "anchor", "--server", server_addr,
                            "--data-dir", str(tmp_path / "data")], capture_output=True,
                           text=True, timeout=60, check=False)  # fmt: skip
    assert usage.returncode == 2 and "exactly one of" in usage.stderr
