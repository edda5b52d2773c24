"""The bounded leaf clock: a forward wall-clock glitch is detected against the monotonic clock,
not believed, logged; a lasting step is adopted after the settle time."""

from __future__ import annotations

import logging

import pytest

from ledger.log.clock import BoundedClock

YEAR_MS = 365 * 24 * 3600 * 1000


class Clocks:
    def __init__(self) -> None:
        self.wall = 1_700_000_000_000
        self.mono = 5_000

    def tick(self, ms: int) -> None:
        self.wall += ms
        self.mono += ms


def make(clocks: Clocks) -> BoundedClock:
    return BoundedClock(
        wall_ms=lambda: clocks.wall,
        monotonic_ms=lambda: clocks.mono,
        max_jump_ms=60_000,
        adopt_after_ms=600_000,
    )


def test_a_forward_glitch_is_bounded_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    clocks = Clocks()
    clock = make(clocks)
    clocks.tick(1_000)
    assert clock() == clocks.wall
    clocks.wall += 10 * YEAR_MS
    with caplog.at_level(logging.WARNING, logger="ledger.clock"):
        now = clock()
    assert now == clocks.wall - 10 * YEAR_MS
    assert "jumped" in caplog.text
    clocks.wall -= 10 * YEAR_MS  # the glitch ends
    clocks.tick(500)
    assert clock() == clocks.wall


def test_small_steps_pass_and_a_lasting_step_is_adopted() -> None:
    clocks = Clocks()
    clock = make(clocks)
    clocks.wall += 30_000  # within the bound: believed
    assert clock() == clocks.wall
    clocks.wall += 3_600_000  # an hour ahead, and it stays
    first = clock()
    assert first < clocks.wall
    clocks.tick(300_000)
    assert clock() == clocks.wall - 3_600_000
    clocks.tick(300_001)
    assert clock() == clocks.wall  # held for the settle time: adopted
    clocks.tick(10)
    assert clock() == clocks.wall
