"""A real full file system under the log: appends fail loudly once the disk is full, nothing
acknowledged is lost, and a restart once space is back resumes the log (docs/operating.md
"Faults, rollbacks and restore")."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ledger.core.types import AppendItem, decode_leaf
from tests.disk_full import fill_in_child, open_log, small_tmpfs

pytestmark = [pytest.mark.integration]


def check_resumes(data: Path, acked: dict[bytes, int]) -> None:
    """Reopen (space is back): every acknowledged entry is there and appends work again."""
    assert len(acked) > 1000, "the file system filled before the test proved anything"
    store, log = open_log(data)
    try:
        assert log.read_only is None
        assert log.size >= max(acked.values()) + 1
        indexes = sorted(acked.values())
        for at in range(0, len(indexes), 1000):
            chunk = indexes[at : at + 1000]
            for i, leaf in zip(chunk, store.get_leaves(chunk), strict=True):
                assert acked[decode_leaf(i, leaf).record_digest] == i
        before = log.size
        log.append([AppendItem(hashlib.sha256(b"after the disk was full").digest())])
        assert log.publish().size == before + 1
    finally:
        store.close()


def test_a_full_tmpfs_stops_appends_and_a_restart_resumes(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs", 24) as fs:
        if fs is None:
            pytest.skip("mounting a tmpfs is not allowed here (see the RLIMIT_FSIZE test)")
        ballast = fs / "ballast"
        ballast.write_bytes(b"\0" * (10 << 20))  # freed below: "space is back"
        acked, error = fill_in_child(fs / "data")
        assert "No space left on device" in error or "space" in error.lower(), error
        assert "restart" in error  # the message says what to do
        ballast.unlink()
        check_resumes(fs / "data", acked)


def test_a_file_size_limit_stops_appends_and_a_restart_resumes(tmp_path: Path) -> None:
    acked, error = fill_in_child(tmp_path / "data", 6 << 20)
    assert error, "the store never failed under the file-size limit"
    assert "restart" in error
    check_resumes(tmp_path / "data", acked)
