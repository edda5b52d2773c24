"""Reading one StreamAppend stream (proto/ledger/v1/ledger.proto; issue 14, "streams and memory").

Messages are parsed and validated one at a time. Each is held against the server's byte budget
(``ledger.api.budget``) from its arrival until its items are handed to the writer; the buffer holds
at most ``LIMIT`` items, so a producer faster than the log is slowed by gRPC flow control. The
reading ends at the client's half-close, or with ``error`` set:

* a message that does not parse or breaks the item rules -> ``InvalidArgumentError``;
* no message for ``idle_s`` seconds -> ``UnavailableError`` (the stream is closed as idle);
* a message that does not fit the byte budget -> ``PushbackError``.

The handler acknowledges every group committed before it, then ends the stream with the error's
status; nothing read before the error is lost, and the stream never hangs. No grpc here: the
adapter passes raw messages and a parse function.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable

from ledger.api.budget import ByteBudget
from ledger.core.errors import LedgerError, PushbackError, UnavailableError
from ledger.core.limits import MAX_BATCH
from ledger.core.types import AppendItem

__all__ = ["DEFAULT_IDLE_S", "StreamReader"]

DEFAULT_IDLE_S = 60.0


class StreamReader:
    """Items read from one stream, waiting for the writer (rules in the module docstring)."""

    LIMIT = 2 * MAX_BATCH

    def __init__(
        self,
        raw: AsyncIterator[bytes],
        parse: Callable[[bytes], list[AppendItem]],
        *,
        budget: ByteBudget,
        idle_s: float = DEFAULT_IDLE_S,
    ) -> None:
        self._raw = raw
        self._parse = parse
        self._budget = budget
        self._idle_s = idle_s
        self._items: list[AppendItem] = []
        self._held: deque[list[int]] = deque()  # per buffered message: [items left, bytes]
        self._more = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._finished = False
        self.error: LedgerError | None = None

    async def fill(self) -> None:
        """Read until the half-close or an error, pausing while the buffer is full."""
        try:
            while (raw := await self._next()) is not None:
                self._add(raw)
                if self.error is not None:
                    return
                if len(self._items) >= self.LIMIT:
                    self._room.clear()
                    await self._room.wait()
        finally:
            self._finished = True
            self._more.set()

    async def _next(self) -> bytes | None:
        try:
            async with asyncio.timeout(self._idle_s):  # wait_for would start a task per message
                raw = await anext(self._raw)
        except StopAsyncIteration:
            return None
        except TimeoutError:
            self.error = UnavailableError(
                f"no message for {self._idle_s:g} s: the stream is closed as idle; open a new "
                "one to go on (everything acknowledged is durable)"
            )
            return None
        return raw

    def _add(self, raw: bytes) -> None:
        try:
            self._budget.take(len(raw), "a stream message")
        except PushbackError as exc:
            self.error = exc
            return
        try:
            items = self._parse(raw)
        except LedgerError as exc:
            self._budget.give(len(raw))
            self.error = exc
            return
        if not items:
            self._budget.give(len(raw))
            return
        self._items.extend(items)
        self._held.append([len(items), len(raw)])
        self._more.set()

    async def take(self) -> list[AppendItem] | None:
        """The next group of at most MAX_BATCH items; None once the reading is over."""
        while not self._items:
            if self._finished:
                return None
            self._more.clear()
            await self._more.wait()
        group = self._items[:MAX_BATCH]
        del self._items[: len(group)]
        self._release(len(group))
        if len(self._items) < self.LIMIT:
            self._room.set()
        return group

    def _release(self, count: int) -> None:
        """Give back the bytes of the messages whose items have all been taken."""
        while count and self._held:
            head = self._held[0]
            used = min(count, head[0])
            head[0] -= used
            count -= used
            if head[0] == 0:
                self._budget.give(head[1])
                self._held.popleft()

    def close(self) -> None:
        """Give back everything still held (the stream ended)."""
        while self._held:
            self._budget.give(self._held.popleft()[1])
        self._items.clear()
