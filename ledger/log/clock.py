"""The log's receive-time clock: the wall clock, bounded by the monotonic clock (our v1 leaf's
time field; docs/operating.md "Faults, rollbacks and restore").

Leaf times never decrease, so one forward glitch of the wall clock (ten years ahead for a
second) would otherwise pin every later leaf time in the future, across restarts. Policy:

* The clock keeps a reference (wall time, monotonic time) taken while the two agreed. The
  expected wall time now is ``ref_wall + (monotonic - ref_mono)``.
* A wall reading more than ``max_jump_ms`` ahead of the expected time is not believed: the
  expected time is used instead, and the jump is logged (a warning, once per jump).
* If the wall clock stays ahead, advancing in step with the monotonic clock, for
  ``adopt_after_ms`` (10 minutes by default), it is taken to be a real correction: it is adopted
  as the new reference and that is logged.
* Backward steps are left to the leaf rule (never decreasing) as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["BoundedClock"]

_log = logging.getLogger("ledger.clock")


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _mono_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class BoundedClock:
    """Callable returning milliseconds since the Unix epoch (policy in the module docstring)."""

    def __init__(
        self,
        *,
        wall_ms: Callable[[], int] = _wall_ms,
        monotonic_ms: Callable[[], int] = _mono_ms,
        max_jump_ms: int = 60_000,
        adopt_after_ms: int = 600_000,
    ) -> None:
        self._wall, self._mono = wall_ms, monotonic_ms
        self._max_jump = max_jump_ms
        self._adopt_after = adopt_after_ms
        self._ref_wall, self._ref_mono = self._wall(), self._mono()
        self._ahead_since: tuple[int, int] | None = None  # (mono, offset) when the jump began

    def __call__(self) -> int:
        wall, mono = self._wall(), self._mono()
        expected = self._ref_wall + (mono - self._ref_mono)
        offset = wall - expected
        if offset <= self._max_jump:
            self._ref_wall, self._ref_mono = wall, mono
            if self._ahead_since is not None:
                _log.warning("wall clock back within %d ms of the monotonic clock", self._max_jump)
            self._ahead_since = None
            return wall
        return self._ahead(wall, mono, expected, offset)

    def _ahead(self, wall: int, mono: int, expected: int, offset: int) -> int:
        since = self._ahead_since
        if since is None or abs(offset - since[1]) > self._max_jump:
            self._ahead_since = (mono, offset)
            _log.warning(
                "wall clock jumped %d ms ahead of the monotonic clock; leaf times follow the "
                "monotonic clock (adopted if it stays ahead for %d ms)",
                offset,
                self._adopt_after,
            )
            return expected
        if mono - since[0] >= self._adopt_after:
            _log.warning(
                "wall clock stayed %d ms ahead for %d ms: adopting it", offset, mono - since[0]
            )
            self._ref_wall, self._ref_mono = wall, mono
            self._ahead_since = None
            return wall
        return expected
