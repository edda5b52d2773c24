"""Preflight on where the high-water mark lives (issue 22 item 1): refused inside the data dir
(a restored copy would carry it back), a WARNING beside it (the default) or on tmpfs/overlay;
and the acknowledged size beside it survives a torn write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.app.preflight import _filesystem, check_mark_location
from ledger.app.settings import Settings
from ledger.core.errors import FailedPreconditionError
from ledger.log.highwater import ACKED_SLOT, AckedSize


def test_a_mark_inside_the_data_dir_is_refused(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", mark_file=tmp_path / "data" / "mark")
    with pytest.raises(FailedPreconditionError, match="inside the data dir"):
        check_mark_location(settings)


def test_the_default_mark_beside_the_data_dir_warns(tmp_path: Path) -> None:
    warnings = check_mark_location(Settings(data_dir=tmp_path / "data"))
    assert any("beside the data dir" in w for w in warnings)


def test_a_mark_elsewhere_does_not_warn_about_its_place(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    settings = Settings(data_dir=tmp_path / "data", mark_file=tmp_path / "other" / "mark")
    assert not any("beside" in w for w in check_mark_location(settings))


@pytest.mark.skipif(not Path("/proc/self/mounts").exists(), reason="needs /proc")
def test_the_file_system_of_a_path_is_found() -> None:
    mounts = Path("/proc/self/mounts").read_text().split()
    assert _filesystem(Path("/proc/self")) == "proc"
    assert _filesystem(Path("/")) in mounts


def test_a_torn_acked_write_leaves_the_previous_size(tmp_path: Path) -> None:
    acked = AckedSize(tmp_path / "m.acked")
    acked.write(10)
    acked.write(20)
    acked.close()
    assert AckedSize(tmp_path / "m.acked").read() == 20
    fd = os.open(tmp_path / "m.acked", os.O_WRONLY)
    try:  # sequence 2 went to slot 0: tear it
        os.pwrite(fd, b"\xff" * 16, 8)
    finally:
        os.close(fd)
    assert AckedSize(tmp_path / "m.acked").read() == 10
    again = AckedSize(tmp_path / "m.acked")
    assert again.read() == 10
    again.write(30)
    again.close()
    assert AckedSize(tmp_path / "m.acked").read() == 30
    assert (tmp_path / "m.acked").stat().st_size == 2 * ACKED_SLOT
