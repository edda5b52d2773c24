"""The one backoff schedule, and the one retry loop every retrying caller runs.

``Backoff`` is pure: the wait before retry ``attempt`` (0-based) is
``min(maximum, initial * multiplier**attempt)``, spread by ``jitter`` (a fraction: +-20 % for
0.2) with a uniform draw in [0, 1) that the caller supplies. ``jitter=0`` gives the plain
doubling of the server's loops; ``Backoff.fixed(s)`` a constant interval.

``retry(call, ...)`` calls ``call`` until it returns, retrying the exceptions ``retry_on``
accepts (default: ``ledger.core.errors.is_retryable``, the one retry rule) and re-raising any
other at once. Between attempts it waits ``hint(exc)`` when that gives a time (a pushback's
``retry-after``), else the schedule's next delay. It gives up by re-raising the last exception
after ``attempts`` calls, and with ``DeadlinePassed`` (a ``TimeoutError``, chained to the last
exception) when the next wait would end past ``deadline`` (a ``clock()`` value).
``retry_async`` is the same loop for coroutines. Sleep, clock and the random draw are
injected; the defaults are the real ones.

``Episodes`` counts the failures of one kind of call that is retried for as long as it takes
(an ``accept`` or ``open`` short of file descriptors), so the caller logs an episode once, not
once per failure: ``failed()`` is true for the first failure of an episode (log it), and
``recovered()`` returns how many failures the episode had when the call succeeds again (log
that count), else None.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ledger.core.errors import is_retryable

__all__ = ["SHORTAGE_BACKOFF", "Backoff", "DeadlinePassed", "Episodes", "retry", "retry_async"]

_T = TypeVar("_T")
RetryHook = Callable[[int, Exception, float], None]


class DeadlinePassed(TimeoutError):
    """``retry`` gave up: the next wait would end past the deadline."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """Exponential backoff: ``initial * multiplier**attempt`` capped at ``maximum``, +-jitter."""

    initial: float = 0.05
    maximum: float = 5.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if not (0 <= self.initial <= self.maximum and self.multiplier >= 1):
            raise ValueError("want 0 <= initial <= maximum and multiplier >= 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter {self.jitter} outside 0..1")

    @classmethod
    def fixed(cls, interval: float) -> Backoff:
        """The same wait every time."""
        return cls(initial=interval, maximum=interval, multiplier=1.0, jitter=0.0)

    @classmethod
    def doubling(cls, initial: float, maximum: float = math.inf) -> Backoff:
        """``initial``, twice that, ... up to ``maximum``; no jitter."""
        return cls(initial=initial, maximum=maximum, multiplier=2.0, jitter=0.0)

    def delay(self, attempt: int, rand: float = 0.5) -> float:
        """The wait before retry ``attempt`` (0-based); ``rand`` is uniform in [0, 1)."""
        base = min(self.maximum, self.initial * self.multiplier ** min(attempt, 64))
        return base * (1 - self.jitter + 2 * self.jitter * rand)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Policy:
    backoff: Backoff
    retry_on: Callable[[Exception], bool]
    attempts: int | None
    deadline: float | None
    hint: Callable[[Exception], float | None] | None
    on_retry: RetryHook | None
    clock: Callable[[], float]
    rand: Callable[[], float]

    def wait(self, attempt: int, exc: Exception) -> float:
        """How long to wait before the next attempt; raises when there is none."""
        if not self.retry_on(exc):
            raise exc
        if self.attempts is not None and attempt + 1 >= self.attempts:
            raise exc
        hinted = self.hint(exc) if self.hint is not None else None
        wait = self.backoff.delay(attempt, self.rand()) if hinted is None else hinted
        if self.deadline is not None and self.clock() + wait > self.deadline:
            raise DeadlinePassed(f"gave up after {attempt + 1} attempts: {exc}") from exc
        if self.on_retry is not None:
            self.on_retry(attempt, exc, wait)
        return wait


def retry(
    call: Callable[[], _T],
    *,
    backoff: Backoff,
    retry_on: Callable[[Exception], bool] = is_retryable,
    attempts: int | None = None,
    deadline: float | None = None,
    hint: Callable[[Exception], float | None] | None = None,
    on_retry: RetryHook | None = None,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rand: Callable[[], float] = random.random,
) -> _T:
    """``call()`` until it returns (module docstring)."""
    policy = _Policy(
        backoff=backoff, retry_on=retry_on, attempts=attempts, deadline=deadline, hint=hint,
        on_retry=on_retry, clock=clock, rand=rand,
    )  # fmt: skip
    attempt = 0
    while True:
        try:
            return call()
        except Exception as exc:
            wait = policy.wait(attempt, exc)
        sleep(wait)
        attempt += 1


async def retry_async(
    call: Callable[[], Awaitable[_T]],
    *,
    backoff: Backoff,
    retry_on: Callable[[Exception], bool] = is_retryable,
    attempts: int | None = None,
    deadline: float | None = None,
    hint: Callable[[Exception], float | None] | None = None,
    on_retry: RetryHook | None = None,
    clock: Callable[[], float] = time.monotonic,
    rand: Callable[[], float] = random.random,
) -> _T:
    """``await call()`` until it returns (``retry``'s rules; waits with ``asyncio.sleep``)."""
    import asyncio  # here, not at the top: the CLIs' synchronous paths never load asyncio

    policy = _Policy(
        backoff=backoff, retry_on=retry_on, attempts=attempts, deadline=deadline, hint=hint,
        on_retry=on_retry, clock=clock, rand=rand,
    )  # fmt: skip
    attempt = 0
    while True:
        try:
            return await call()
        except Exception as exc:
            wait = policy.wait(attempt, exc)
        await asyncio.sleep(wait)
        attempt += 1


SHORTAGE_BACKOFF = Backoff(initial=0.01, maximum=1.0)
"""The wait schedule of calls short of file descriptors or memory (``is_resource_shortage``)."""


@dataclass(slots=True)
class Episodes:
    """Failures of one retried call, counted per episode (module docstring)."""

    failures: int = 0
    total: int = 0

    def failed(self) -> bool:
        """Count a failure; true when it starts an episode (the one to log)."""
        self.failures += 1
        self.total += 1
        return self.failures == 1

    def recovered(self) -> int | None:
        """The call succeeded: the failures of the episode it ends, or None when none."""
        count, self.failures = self.failures, 0
        return count or None
