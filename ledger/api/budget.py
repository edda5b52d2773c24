"""One byte budget for every request the server holds in memory (issue 14, "bounded memory").

gRPC core limits what it buffers before Python sees a message (maximum request size, maximum
concurrent RPCs, HTTP/2 windows: ``ledger.api.server``); this budget bounds what Python holds after
that: the bytes of every unary request until it is answered, and of every stream message until
its items are handed to the writer. A request that does not fit is refused at once with
``PushbackError`` (RESOURCE_EXHAUSTED, with a retry hint); nothing waits for room, so no caller
can pin the budget by being slow. Single event loop; no locking needed.
"""

from __future__ import annotations

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

    def give(self, n: int) -> None:
        """Release ``n`` bytes taken earlier."""
        self.held = max(0, self.held - n)

    @contextmanager
    def holding(self, n: int, what: str) -> Iterator[None]:
        """Hold ``n`` bytes for the duration of a block."""
        self.take(n, what)
        try:
            yield
        finally:
            self.give(n)
