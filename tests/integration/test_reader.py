"""``ledger serve-reader``: a reader process on a running log's data dir (RocksDB secondary)
serves verifiable proofs on its own port, never for a checkpoint newer than it caught up to,
catches up with the writer, and refuses appends."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core import merkle
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import FailedPreconditionError
from ledger.fileio.keys import write_signer
from tests.harness import ORIGIN, ServerProcess

pytestmark = pytest.mark.integration
pytest.importorskip("rocksdict")
pytest.importorskip("grpc")

from ledger_client.remote.log import RemoteLog  # noqa: E402
from tests import processes  # noqa: E402
from tests.waits import wait_until  # noqa: E402


def digests(start: int, n: int) -> list[bytes]:
    return [hashlib.sha256(b"reader-%d" % i).digest() for i in range(start, start + n)]


def test_a_reader_serves_what_it_caught_up_to_and_refuses_appends(tmp_path: Path) -> None:
    write_signer(tmp_path / "signer.key", Ed25519Signer.generate(ORIGIN))
    writer = ServerProcess(tmp_path / "data", tmp_path / "signer.key")
    reader_proc = None
    try:
        with RemoteLog(writer.address, timeout=30) as w:
            w.append(digests(0, 300))
            wait_until(lambda: w.checkpoint().size >= 300)
            cmd = [
                sys.executable, "-m", "ledger", "serve-reader", "--data-dir",
                str(tmp_path / "data"), "--listen", "127.0.0.1:0", "--interval-ms", "50",
            ]  # fmt: skip
            reader_proc = processes.spawn(cmd, stdout=subprocess.PIPE, text=True)
            assert reader_proc.stdout is not None
            ready = json.loads(reader_proc.stdout.readline())
            assert ready["role"] == "reader"
            with RemoteLog(ready["address"], timeout=30) as r:
                head = r.checkpoint()
                assert head.size >= 300
                assert head == w.checkpoint(head.size)  # the writer's signed checkpoint
                proofs = r.inclusion_proofs([0, 150, 299], tree_size=head.size)
                for p in proofs:
                    merkle.verify_inclusion(
                        p.entry.leaf_hash, p.entry.index, head.size, list(p.hashes), head.root_hash
                    )
                with pytest.raises(FailedPreconditionError, match="append to the writer"):
                    r.append(digests(1000, 1))
                w.append(digests(300, 200))
                wait_until(lambda: w.checkpoint().size >= 500)
                latest = w.checkpoint()
                wait_until(lambda: r.checkpoint().size >= latest.size)  # caught up
                assert r.checkpoint(latest.size) == latest
                proof = r.consistency_proof(head.size, latest.size)
                merkle.verify_consistency(
                    head.size, latest.size, head.root_hash, latest.root_hash, list(proof.hashes)
                )
    finally:
        if reader_proc is not None:
            reader_proc.send_signal(signal.SIGTERM)
            assert processes.wait(reader_proc, 30) == 0
            if reader_proc.stdout is not None:
                reader_proc.stdout.close()
        writer.terminate()


def test_serve_reader_refuses_a_dir_without_a_log(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "ledger", "serve-reader", "--data-dir", str(tmp_path)]
    done = processes.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "holds no log" in done.stderr
