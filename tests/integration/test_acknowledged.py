"""Acknowledged means recoverable or refused (issue 22 item 3), with a real ``ledger serve``:
appends acknowledged over gRPC, SIGKILL, then the newest RocksDB WAL file cut short (storage
that lost synced writes). The restart refuses, naming the lost range; before, the log started
and gave the lost indexes to other records. An honest SIGKILL restarts and goes on."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.fileio.keys import write_signer
from ledger_client.remote.log import RemoteLog
from tests import processes
from tests.harness import ORIGIN, ServerProcess

pytestmark = [pytest.mark.integration]

BATCH = 200
BATCHES = 5


def digests(n: int, tag: str) -> list[bytes]:
    return [hashlib.sha256(f"{tag}-{i}".encode()).digest() for i in range(n)]


def acked_then_killed(tmp_path: Path) -> tuple[Path, Path, int, int]:
    """A server that published 10 entries, then acknowledged 1,000 more (no checkpoint yet:
    the interval is a minute), killed with SIGKILL. Returns data dir, key, published, acked."""
    key_file = tmp_path / "log.key"
    write_signer(key_file, Ed25519Signer.generate(ORIGIN))
    data_dir = tmp_path / "data"
    server = ServerProcess(data_dir, key_file, "--checkpoint-interval-ms", "60000")
    try:
        with RemoteLog(server.address, timeout=30) as remote:
            first = remote.append(digests(10, "published"), wait_for_checkpoint=True)
            assert first.checkpoint is not None
            last = 0
            for b in range(BATCHES):
                out = remote.append(digests(BATCH, f"acked{b}"))
                last = max(r.index for r in out.results)
            assert remote.checkpoint().size == 10  # the acknowledged ones are not published
    finally:
        server.kill()
    return data_dir, key_file, first.checkpoint.size, last + 1


def newest_wal(data_dir: Path) -> Path:
    return max((data_dir / "db").glob("*.log"), key=lambda p: int(p.stem))


def test_a_wal_cut_below_the_acknowledged_size_is_refused_naming_the_range(
    tmp_path: Path,
) -> None:
    data_dir, key_file, published, acked = acked_then_killed(tmp_path)
    wal = newest_wal(data_dir)
    data = wal.read_bytes()
    wal.write_bytes(data[: len(data) - len(data) // 4])  # the tail the disk lost

    with pytest.raises(RuntimeError, match="acknowledged but missing") as refused:
        ServerProcess(data_dir, key_file)
    found = re.search(r"entries (\d+)\.\.(\d+) acknowledged but missing", str(refused.value))
    assert found is not None
    first_lost, last_lost = int(found.group(1)), int(found.group(2))
    assert published <= first_lost <= last_lost == acked - 1

    accept = [sys.executable, "-m", "ledger", "restore", "accept", "--data-dir", str(data_dir)]
    accepted = processes.run(accept, capture_output=True, text=True, timeout=120, check=False)
    assert accepted.returncode == 0, accepted.stderr
    assert f"accepted the loss of entries {first_lost}..{last_lost}" in accepted.stdout
    server = ServerProcess(data_dir, key_file)  # the operator accepted the loss: it starts
    assert server.terminate() == 0


def test_an_honest_kill_restarts_and_goes_on(tmp_path: Path) -> None:
    data_dir, key_file, _, acked = acked_then_killed(tmp_path)
    server = ServerProcess(data_dir, key_file)
    try:
        with RemoteLog(server.address, timeout=30) as remote:
            again = remote.append(digests(BATCH, f"acked{BATCHES - 1}"))
            assert all(r.duplicate for r in again.results)  # nothing acknowledged was lost
            out = remote.append(digests(3, "after"), wait_for_checkpoint=True)
            assert [r.index for r in out.results] == [acked, acked + 1, acked + 2]
    finally:
        assert server.terminate() == 0
