"""The descriptor budget at start (``ledger.app.preflight.check_file_limit``): the connection caps
plus the reserve must fit ``ulimit -n``; the soft limit is raised towards the hard one, and a
warning names the numbers when even the hard limit is short."""

from __future__ import annotations

import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.app.preflight import FILES_RESERVE, check_file_limit, files_needed
from ledger.app.settings import Settings


@pytest.fixture(autouse=True)
def restore_limit() -> Iterator[None]:
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)


def test_the_defaults_fit_the_common_1024(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "d")  # tiles with /metrics, embedded TSA
    assert files_needed(settings) == 256 + 256 + 32 + FILES_RESERVE <= 1024
    split = settings.with_overrides(metrics_listen="127.0.0.1:0", embedded_tsa=False)
    assert files_needed(split) == 256 + 2 * 256 + FILES_RESERVE
    assert files_needed(split, table_files=40) == files_needed(split) + 40  # RocksDB's files


def test_a_short_soft_limit_is_raised_and_a_short_hard_limit_warned(tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"the hard limit ({hard}) leaves no room to test raising")
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    wide = Settings(data_dir=tmp_path / "d", grpc_max_connections=1500)
    assert check_file_limit(wide) == []
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == files_needed(wide)
    beyond = 100_000 if hard == resource.RLIM_INFINITY else hard + 1
    too_many = Settings(data_dir=tmp_path / "d", grpc_max_connections=beyond)
    if hard == resource.RLIM_INFINITY:
        assert check_file_limit(too_many) == []
        return
    [warning] = check_file_limit(too_many)
    assert f"need {files_needed(too_many)} file" in warning and f"may open {hard}" in warning
