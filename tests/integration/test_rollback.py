"""Rollbacks against real RocksDB: a torn WAL tail restarts cleanly, a byte flipped in the middle
of the WAL is refused (and, salvaged, detected against the high-water mark), and a restored
backup is refused, then served read-only, then caught up with ``ledger restore``."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import DataLossError, FailedPreconditionError
from ledger.core.types import AppendItem
from ledger.fileio.keys import write_signer
from ledger.log.facade import Log
from ledger.log.highwater import HighWaterMark
from ledger.store.rocks import RocksStore
from ledger_client.remote.log import RemoteLog
from tests import processes
from tests.harness import ORIGIN, ServerProcess

pytestmark = [pytest.mark.integration]

SIGNER = Ed25519Signer.generate(ORIGIN)


def digests(n: int, tag: str) -> list[bytes]:
    return [hashlib.sha256(f"{tag}-{i}".encode()).digest() for i in range(n)]


def crashed_copy(tmp_path: Path) -> tuple[Path, HighWaterMark]:
    """A data dir as kill -9 leaves it: 1,000 published entries, then 100 unpublished, all in
    the WAL (copied while the store is open: no shutdown code ran)."""
    mark = HighWaterMark(tmp_path / "mark")
    store = RocksStore(tmp_path / "db")
    log = Log(store=store, signer=SIGNER, origin=ORIGIN, mark=mark)
    for b in range(10):
        log.append([AppendItem(d) for d in digests(100, f"b{b}")])
        log.publish()
    log.append([AppendItem(d) for d in digests(100, "last")])
    shutil.copytree(tmp_path / "db", tmp_path / "crashed")
    store.close()
    return tmp_path / "crashed", mark


def wal_of(db: Path) -> Path:
    (wal,) = sorted(db.glob("*.log"))
    return wal


def test_a_torn_final_wal_record_restarts_cleanly(tmp_path: Path) -> None:
    db, mark = crashed_copy(tmp_path)
    wal = wal_of(db)
    data = wal.read_bytes()
    wal.write_bytes(data[:-25])  # the last write never completed
    store = RocksStore(db)
    try:
        log = Log(store=store, signer=SIGNER, origin=ORIGIN, mark=mark)
        assert log.size == 1000 and log.read_only is None
        log.append([AppendItem(d) for d in digests(5, "after")])
        assert log.publish().size == 1005
    finally:
        store.close()


def test_a_byte_flipped_mid_wal_is_refused_and_detected_when_salvaged(tmp_path: Path) -> None:
    db, mark = crashed_copy(tmp_path)
    wal = wal_of(db)
    data = bytearray(wal.read_bytes())
    data[len(data) // 2] ^= 0x40
    wal.write_bytes(bytes(data))
    with pytest.raises(DataLossError, match=r"damaged.*ledger restore accept --salvage-wal"):
        RocksStore(db)
    store = RocksStore(db, wal_recovery="salvage")
    try:
        assert store.load_state().size < 1000  # RocksDB dropped everything after the damage
        with pytest.raises(DataLossError, match="rolled back"):
            Log(store=store, signer=SIGNER, origin=ORIGIN, mark=mark)
    finally:
        store.close()


def ledger(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ledger", *args]
    return processes.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def append_and_stop(data_dir: Path, key_file: Path, tag: str, n: int) -> int:
    server = ServerProcess(data_dir, key_file)
    with RemoteLog(server.address) as remote:
        out = remote.append(digests(n, tag), wait_for_checkpoint=True)
    assert server.terminate() == 0
    assert out.checkpoint is not None
    return out.checkpoint.size


def test_a_restored_backup_is_refused_then_read_only_then_caught_up(tmp_path: Path) -> None:
    key_file = tmp_path / "signer.key"
    write_signer(key_file, SIGNER)
    config = tmp_path / "ledger.toml"
    data_dir = tmp_path / "data"
    config.write_text(
        f'[log]\norigin = "{ORIGIN}"\ndata_dir = "{data_dir}"\nkey_file = "{key_file}"\n'
    )
    assert append_and_stop(data_dir, key_file, "first", 100) == 100
    shutil.copytree(data_dir, tmp_path / "backup")
    assert append_and_stop(data_dir, key_file, "second", 150) == 250
    shutil.copytree(data_dir, tmp_path / "mirror")
    shutil.rmtree(data_dir)
    shutil.copytree(tmp_path / "backup", data_dir)

    with pytest.raises(RuntimeError, match="has 100 entries, but a checkpoint of size 250"):
        ServerProcess(data_dir, key_file)
    status = ledger("restore", "status", "--config", str(config))
    assert status.returncode == 1 and "behind the mark by 150" in status.stderr
    accepted = ledger("restore", "accept", "--config", str(config))
    assert accepted.returncode == 0, accepted.stderr

    server = ServerProcess(data_dir, key_file)
    try:
        with RemoteLog(server.address) as remote:
            assert remote.checkpoint().size == 100
            with pytest.raises(FailedPreconditionError, match="read-only"):
                remote.append(digests(1, "new"))
    finally:
        assert server.terminate() == 0

    caught = ledger("restore", "catch-up", "--config", str(config), "--from-data-dir",
                    str(tmp_path / "mirror"))  # fmt: skip
    assert caught.returncode == 0, caught.stderr
    assert ledger("restore", "status", "--config", str(config)).returncode == 0
    assert append_and_stop(data_dir, key_file, "third", 10) == 260
