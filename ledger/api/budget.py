"""One byte budget for every request the server holds in memory (issue 14, "bounded memory").

gRPC core buffers a whole message once a read of it is pending, so the server reserves the
largest request in this budget before each read (``reserve``: waiting at most a moment for room)
and holds the message's size once it has arrived: every unary request until it is answered,
every stream message until its items are handed to the writer, every serialized answer until it
is sent (``ledger.api.server.BoundedMemory``). What does not fit is refused with
``PushbackError`` (RESOURCE_EXHAUSTED, with a retry hint); a read that never completes is ended
by the server's read timeout, so no caller pins the budget for long. Single event loop; no
locking needed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ledger.core.errors import PushbackError

__all__ = ["DEFAULT_BUDGET_BYTES", "ByteBudget"]

DEFAULT_BUDGET_BYTES = 64 << 20
RETRY_AFTER_S = 0.2


class ByteBudget:
    """A counter of bytes held, refusing what would pass ``limit``."""

    def __init__(self, limit: int = DEFAULT_BUDGET_BYTES) -> None:
        if limit <= 0:
            raise ValueError(f"byte budget {limit}, want > 0")
        self.limit = limit
        self.held = 0
        self.peak = 0
        self._freed = asyncio.Event()

    def take(self, n: int, what: str) -> None:
        """Hold ``n`` bytes more, or raise ``PushbackError`` naming ``what`` and the budget."""
        if self.held + n > self.limit:
            raise PushbackError(
                f"{what} of {n} bytes does not fit the server's in-flight budget "
                f"({self.held} of {self.limit} bytes held); retry shortly",
                retry_after=RETRY_AFTER_S,
            )
        self.held += n
        self.peak = max(self.peak, self.held)

    async def reserve(self, n: int, what: str, wait_s: float) -> None:
        """``take``, waiting up to ``wait_s`` seconds for room first."""
        deadline = time.monotonic() + wait_s
        while self.held + n > self.limit and n <= self.limit:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._freed.clear()
            try:
                await asyncio.wait_for(self._freed.wait(), left)
            except TimeoutError:
                break
        self.take(n, what)

    def force(self, n: int) -> None:
        """Hold ``n`` bytes even past the limit (what must be sent; later takes are refused)."""
        self.held += n
        self.peak = max(self.peak, self.held)

    def give(self, n: int) -> None:
        """Release ``n`` bytes taken earlier."""
        self.held = max(0, self.held - n)
        self._freed.set()

    @contextmanager
    def holding(self, n: int, what: str) -> Iterator[None]:
        """Hold ``n`` bytes for the duration of a block."""
        self.take(n, what)
        try:
            yield
        finally:
            self.give(n)
