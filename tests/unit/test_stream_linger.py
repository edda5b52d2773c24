"""``StreamReader.settle``: a stream's next group gathers until enough items are buffered, the
linger runs out, or the reading is over; never longer (ledger.api.streams)."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator

from ledger.api.budget import ByteBudget
from ledger.api.streams import StreamReader
from ledger.core.limits import HASH_SIZE

END = b""  # put on the source's queue: the client half-closes


def _digest(i: int) -> bytes:
    return hashlib.sha256(b"linger-%d" % i).digest()


def _packed(raw: bytes) -> bytes:
    return raw  # the messages here are N x 32 digest bytes already


async def _source(queue: asyncio.Queue[bytes]) -> AsyncIterator[bytes]:
    while (raw := await queue.get()) != END:
        yield raw


async def _reader() -> tuple[StreamReader, asyncio.Queue[bytes], asyncio.Task[None]]:
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    reader = StreamReader(_source(queue), _packed, budget=ByteBudget(1 << 20))
    return reader, queue, asyncio.create_task(reader.fill())


async def _settled(reader: StreamReader, items: int, seconds: float) -> float:
    """``reader.settle(items, seconds)``; the seconds it took."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    await reader.settle(items, seconds)
    return loop.time() - started


def test_settle_returns_at_once_when_enough_is_buffered() -> None:
    async def run() -> float:
        reader, queue, fill = await _reader()
        queue.put_nowait(b"".join(_digest(i) for i in range(5)))
        await asyncio.sleep(0.01)
        elapsed = await _settled(reader, 5, 10.0)
        group = await reader.take()
        assert group is not None and len(group) == 5 * HASH_SIZE
        fill.cancel()
        return elapsed

    assert asyncio.run(run()) < 1.0


def test_settle_waits_for_the_items_and_no_longer() -> None:
    async def run() -> float:
        reader, queue, fill = await _reader()

        async def trickle() -> None:
            for i in range(4):
                await asyncio.sleep(0.02)
                queue.put_nowait(_digest(i))

        feeder = asyncio.create_task(trickle())
        elapsed = await _settled(reader, 4, 10.0)  # on the fourth message, long before 10 s
        group = await reader.take()
        assert group == b"".join(_digest(i) for i in range(4))  # one group, in stream order
        await feeder
        fill.cancel()
        return elapsed

    assert asyncio.run(run()) < 5.0


def test_settle_gives_up_at_the_linger_with_what_it_has() -> None:
    async def run() -> float:
        reader, queue, fill = await _reader()
        queue.put_nowait(_digest(0))
        elapsed = await _settled(reader, 1_000, 0.2)
        assert await reader.take() == _digest(0)
        fill.cancel()
        return elapsed

    elapsed = asyncio.run(run())
    assert 0.15 <= elapsed < 5.0


def test_settle_ends_at_the_half_close() -> None:
    async def run() -> float:
        reader, queue, fill = await _reader()
        queue.put_nowait(_digest(0))
        settled = asyncio.create_task(_settled(reader, 1_000, 10.0))
        await asyncio.sleep(0.05)
        assert not settled.done()  # still gathering: one item of 1,000
        queue.put_nowait(END)
        elapsed = await settled
        assert await reader.take() == _digest(0)
        assert await reader.take() is None
        await fill
        return elapsed

    assert asyncio.run(run()) < 5.0


def test_no_linger_takes_each_message_as_it_comes() -> None:
    async def run() -> None:
        reader, queue, fill = await _reader()
        queue.put_nowait(_digest(0))
        await reader.settle(1_000, 0.0)  # the linger off: nothing waits
        assert await reader.take() == _digest(0)
        queue.put_nowait(_digest(1))
        assert await reader.take() == _digest(1)  # take still wakes on a single item
        queue.put_nowait(END)
        assert await reader.take() is None
        await fill

    asyncio.run(asyncio.wait_for(run(), 10))
