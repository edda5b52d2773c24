"""The one backoff schedule gives the waits the loops it replaced computed, and the one retry
loop keeps their rules: what is retried, when it gives up, what it waits."""

from __future__ import annotations

import asyncio
import errno
import math

import pytest

from ledger.core.backoff import Backoff, DeadlinePassed, Episodes, retry, retry_async
from ledger.core.errors import (
    FormatError,
    PushbackError,
    UnavailableError,
    is_resource_shortage,
)


def test_the_schedules_of_the_loops_it_replaced() -> None:
    sdk = Backoff()  # the SDK sender and client: 0.05 doubling to 5 s, +-20 %
    assert [sdk.delay(n, 0.5) for n in range(8)] == pytest.approx(
        [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0]
    )
    assert sdk.delay(0, 0.0) == pytest.approx(0.04) and sdk.delay(0, 0.999) < 0.06
    witnessing = Backoff.doubling(0.2, 30.0)  # min(30, 0.2 * 2 ** (failures - 1))
    assert [witnessing.delay(f - 1) for f in range(1, 12)] == [
        min(30.0, 0.2 * 2 ** (f - 1)) for f in range(1, 12)
    ]
    anchoring = Backoff.doubling(0.5)  # 0.5, then doubled each attempt, no cap
    assert [anchoring.delay(n) for n in range(4)] == [0.5, 1.0, 2.0, 4.0]
    assert Backoff.doubling(0.2, 5.0).delay(10) == 5.0  # waiting for an anchor
    assert Backoff.fixed(3.0).delay(50, 0.9) == 3.0  # the monitor's poll interval
    assert math.isfinite(Backoff().delay(10_000, 0.5))


def test_bad_schedules_are_refused() -> None:
    for bad in ({"jitter": 1.5}, {"multiplier": 0.5}, {"initial": 9.0, "maximum": 1.0}):
        with pytest.raises(ValueError):
            Backoff(**bad)


class Flaky:
    """Fails with each of ``errors`` in turn, then returns "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_retry_follows_the_one_retry_rule() -> None:
    waits: list[float] = []
    call = Flaky(UnavailableError("down"), UnavailableError("down"))
    got = retry(call, backoff=Backoff(jitter=0.0), sleep=waits.append)
    assert got == "ok" and call.calls == 3 and waits == [0.05, 0.1]
    refused = Flaky(FormatError("bad"))
    with pytest.raises(FormatError):  # not retryable: raised at once, no wait
        retry(refused, backoff=Backoff(), sleep=waits.append)
    assert refused.calls == 1 and len(waits) == 2


def test_the_random_source_is_injected() -> None:
    waits: list[float] = []
    retry(
        Flaky(UnavailableError("x"), UnavailableError("x")),
        backoff=Backoff(initial=1.0, maximum=10.0, jitter=0.5),
        sleep=waits.append,
        rand=iter([0.0, 0.999]).__next__,
    )
    assert waits == pytest.approx([0.5, 2 * 1.499])


def test_a_hint_replaces_the_schedule() -> None:
    waits: list[float] = []
    retry(
        Flaky(PushbackError("full", retry_after=0.7), UnavailableError("x")),
        backoff=Backoff(jitter=0.0),
        hint=lambda exc: exc.retry_after if isinstance(exc, PushbackError) else None,
        sleep=waits.append,
    )
    assert waits == [0.7, 0.1]


def test_attempts_and_deadline_end_the_loop() -> None:
    call = Flaky(*(UnavailableError(f"try {n}") for n in range(5)))
    seen: list[int] = []
    with pytest.raises(UnavailableError, match="try 2"):
        retry(
            call,
            backoff=Backoff(),
            attempts=3,
            on_retry=lambda n, exc, wait: seen.append(n),
            sleep=lambda s: None,
        )
    assert call.calls == 3 and seen == [0, 1]
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    late = Flaky(*(UnavailableError("x") for _ in range(100)))
    with pytest.raises(DeadlinePassed) as ended:
        retry(late, backoff=Backoff(jitter=0.0), deadline=1.0, sleep=sleep, clock=lambda: now[0])
    assert isinstance(ended.value, TimeoutError)
    assert isinstance(ended.value.__cause__, UnavailableError)
    assert now[0] <= 1.0 and now[0] + 0.05 * 2 ** (late.calls - 1) > 1.0


def test_retry_async_is_the_same_loop() -> None:
    call = Flaky(UnavailableError("x"))

    async def once() -> str:
        return call()

    async def main() -> str:
        return await retry_async(once, backoff=Backoff(initial=0.001, maximum=0.001))

    assert asyncio.run(main()) == "ok" and call.calls == 2


def test_a_shortage_episode_is_logged_once_with_its_count() -> None:
    episode = Episodes()
    assert episode.recovered() is None  # nothing failed
    assert [episode.failed() for _ in range(4)] == [True, False, False, False]
    assert episode.recovered() == 4
    assert episode.failed() is True  # a new episode
    assert episode.recovered() == 1 and episode.total == 5


def test_only_a_shortage_of_descriptors_or_memory_counts() -> None:
    for code in (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS):
        assert is_resource_shortage(OSError(code, "short"))
    assert not is_resource_shortage(OSError(errno.EIO, "io"))
    assert not is_resource_shortage(FileNotFoundError(errno.ENOENT, "gone"))
    assert not is_resource_shortage(ValueError("x"))
