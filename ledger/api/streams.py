"""Reading one StreamAppend stream (proto/ledger/v1/ledger.proto; issue 14, "streams and memory").

Messages are parsed and validated one at a time. A message whose items carry a digest and
nothing else is kept packed (``N x 32`` bytes, issue 23: no per-item objects; such runs go to
``LogService.append_packed``); any other message is kept as typed items. Each message is held
against the server's byte budget (``ledger.api.budget``) from its arrival until its items are
handed to the writer; the buffer holds at most ``LIMIT`` items, so a producer faster than the
log is slowed by gRPC flow control. A group (``take``) is a run of consecutive items of one
kind, at most ``MAX_BATCH``, in stream order. The reading ends at the client's half-close, or
with ``error`` set:

* a message that does not parse or breaks the item rules -> ``InvalidArgumentError``;
* no message for the server's idle time -> ``UnavailableError`` (raised by the message source,
  ``ledger.api.server.BoundedMemory``, which times each read with one timer per stream);
* a message that does not fit the byte budget -> ``PushbackError``.

The handler acknowledges every group committed before it, then ends the stream with the error's
status; nothing read before the error is lost, and the stream never hangs. No grpc here: the
adapter passes raw messages and a parse function.

A stream's client does not wait for each acknowledgement, so its messages keep coming while a
group is committed: the handler lets the next group gather (``settle``) for up to the server's
linger (``stream_linger_s``) after its last commit, unless ``LINGER_ITEMS`` are already
buffered. A commit costs about the same whatever its size (a WAL sync, the writer's pass, the
thread hand-offs: about 1.5 ms of server CPU on the benchmark machine), so a stream of single
digests committed as fast as they come spends most of the server's CPU on commits, not on
entries (docs/benchmarks.md, "The stream linger"). Unary calls never linger: their callers
wait for each answer.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from ledger.api.budget import ByteBudget
from ledger.core.errors import LedgerError, PushbackError, UnavailableError
from ledger.core.limits import HASH_SIZE, MAX_BATCH
from ledger.core.types import AppendItem

__all__ = [
    "DEFAULT_IDLE_S",
    "DEFAULT_LINGER_S",
    "LINGER_ITEMS",
    "Group",
    "ReadDeadline",
    "StreamReader",
]

DEFAULT_IDLE_S = 60.0
DEFAULT_LINGER_S = 0.010
LINGER_ITEMS = 1_000  # a group this large is committed without lingering

# A group handed to the writer: packed digests (N x 32 bytes) or typed items.
Group = bytes | list[AppendItem]


class StreamReader:
    """Items read from one stream, waiting for the writer (rules in the module docstring)."""

    LIMIT = 2 * MAX_BATCH

    def __init__(
        self,
        raw: AsyncIterator[bytes],
        parse: Callable[[bytes], Group],
        *,
        budget: ByteBudget,
    ) -> None:
        self._raw = raw
        self._parse = parse
        self._budget = budget
        self._parts: deque[bytearray | list[AppendItem]] = deque()  # runs of one kind
        self._count = 0  # items buffered
        self._held: deque[list[int]] = deque()  # per buffered message: [items left, bytes]
        self._more = asyncio.Event()
        self._wanted = 1  # items buffered before ``_more`` is set (``settle`` raises it)
        self._room = asyncio.Event()
        self._room.set()
        self._finished = False
        self.error: LedgerError | None = None

    async def fill(self) -> None:
        """Read until the half-close or an error, pausing while the buffer is full."""
        raw_messages = self._raw
        try:
            while True:
                try:
                    raw = await anext(raw_messages)
                except StopAsyncIteration:
                    return
                except LedgerError as exc:  # the source's own refusal (an idle stream)
                    self.error = exc
                    return
                self._add(raw)
                if self.error is not None:
                    return
                if self._count >= self.LIMIT:
                    self._room.clear()
                    await self._room.wait()
        finally:
            self._finished = True
            self._more.set()

    def _add(self, raw: bytes) -> None:
        size = len(raw)
        try:
            self._budget.take(size, "a stream message")
        except PushbackError as exc:
            self.error = exc
            return
        try:
            parsed = self._parse(raw)
        except LedgerError as exc:
            self._budget.give(size)
            self.error = exc
            return
        del raw
        parts = self._parts
        if isinstance(parsed, bytes):
            n = len(parsed) // HASH_SIZE
            if parts and isinstance(parts[-1], bytearray):
                parts[-1] += parsed
            elif n:
                parts.append(bytearray(parsed))
        else:
            n = len(parsed)
            if parts and isinstance(parts[-1], list):
                parts[-1].extend(parsed)
            elif n:
                parts.append(parsed)
        if not n:
            self._budget.give(size)
            return
        self._count += n
        self._held.append([n, size])
        if self._count >= self._wanted:
            self._more.set()

    async def settle(self, items: int, seconds: float) -> None:
        """Wait up to ``seconds`` until at least ``items`` items are buffered or the reading
        is over (half-close, error); at once when either holds already."""
        if seconds <= 0 or self._count >= items or self._finished:
            return
        self._wanted = items
        try:
            async with asyncio.timeout(seconds):
                while self._count < items and not self._finished:
                    self._more.clear()
                    await self._more.wait()
        except TimeoutError:
            pass
        finally:
            self._wanted = 1

    async def take(self) -> Group | None:
        """The next group (at most MAX_BATCH items of one kind); None once the reading is over."""
        while not self._count:
            if self._finished:
                return None
            self._more.clear()
            await self._more.wait()
        head = self._parts[0]
        group: Group
        if isinstance(head, bytearray):
            cut = min(len(head), MAX_BATCH * HASH_SIZE)
            group = bytes(head[:cut])
            del head[:cut]
            n = cut // HASH_SIZE
        else:
            group = head[:MAX_BATCH]
            del head[: len(group)]
            n = len(group)
        if not head:
            self._parts.popleft()
        self._count -= n
        self._release(n)
        if self._count < self.LIMIT:
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
        self._parts.clear()
        self._count = 0


class ReadDeadline:
    """The read timeout of one stream with one timer for all its reads (``asyncio.timeout``
    around each read would create and cancel a timer per message).

    ``start`` before a read and ``stop`` after it only note the time; the timer, armed at the
    first read, checks on firing whether the pending read began ``seconds`` ago: then it cancels
    the reading task (``expired`` tells that cancellation from any other), else it re-arms for
    the pending read's due time, or lapses when no read is pending (the next ``start`` re-arms)."""

    _SLACK_S = 0.001  # the event loop runs a timer up to its clock resolution early

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[Any] | None = None
        self._since = -1.0  # when the pending read began; < 0: none pending
        self._timer: asyncio.TimerHandle | None = None
        self._fired = False
        self._cancelling = 0

    def start(self) -> None:
        """A read begins. Every read of a stream is made by one task (its reader's), the one
        the first read found: looking it up again per message took about a twelfth of the
        event loop's time under B3."""
        self._since = self._loop.time()
        if self._task is None:
            self._task = asyncio.current_task()
        if self._timer is None:
            self._timer = self._loop.call_at(self._since + self.seconds, self._check)

    def stop(self) -> None:
        """The read is over."""
        self._since = -1.0

    def expired(self) -> UnavailableError | None:
        """On a ``CancelledError`` from the read: the idle error if this deadline cancelled it
        (and nothing else did), else None (re-raise the cancellation)."""
        if not self._fired or self._task is None:
            return None
        self._fired = False
        if self._task.uncancel() > self._cancelling:
            return None
        return UnavailableError(
            f"no message for {self.seconds:g} s: the stream is closed as idle; open a new "
            "one to go on"
        )

    def close(self) -> None:
        """The stream is over: drop the timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        self._timer = None
        if self._since < 0 or self._task is None:
            return
        due = self._since + self.seconds
        if self._loop.time() + self._SLACK_S >= due:
            self._fired = True
            self._cancelling = self._task.cancelling()
            self._task.cancel()
        else:
            self._timer = self._loop.call_at(due, self._check)
