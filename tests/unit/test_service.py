"""The asyncio service around the log: group commit, checkpoint waits, pushback, shutdown."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import InvalidArgumentError, PushbackError, ServiceError
from ledger.core.types import AppendItem
from ledger.log.facade import Log
from ledger.log.service import LogService
from ledger.store.contract import MemoryStore

ORIGIN = "ledger.test/service"


def items(n: int, salt: str) -> list[AppendItem]:
    return [AppendItem(hashlib.sha256(f"{salt}{i}".encode()).digest()) for i in range(n)]


def service(**kw: float) -> LogService:
    log = Log(store=MemoryStore(), signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
    return LogService(log, **kw)  # type: ignore[arg-type]


def test_concurrent_appends_share_commits_and_get_a_checkpoint() -> None:
    async def main() -> None:
        svc = service(checkpoint_interval=0.01)
        await svc.start()
        results = await asyncio.gather(*(svc.append(items(5, f"c{i}")) for i in range(20)))
        indexes = sorted(r.index for batch in results for r in batch)
        assert indexes == list(range(100))
        cp = await svc.wait_for_checkpoint(100, timeout=5)
        assert cp.size == 100
        await svc.stop()

    asyncio.run(main())


def test_waiting_past_the_timeout_is_a_retryable_service_error() -> None:
    async def main() -> None:
        svc = service(checkpoint_interval=0.01)
        await svc.start()
        with pytest.raises(ServiceError, match="entries are durable"):
            await svc.wait_for_checkpoint(10, timeout=0.1)  # nothing will ever cover 10
        await svc.stop()

    asyncio.run(main())


def test_pushback_and_refusals() -> None:
    async def main() -> None:
        svc = service(max_pending=10)
        await svc.start()
        with pytest.raises(InvalidArgumentError):
            await svc.append([])
        with pytest.raises(PushbackError) as info:
            await svc.append(items(11, "b"))  # more than max_pending at once
        assert info.value.retry_after > 0
        await svc.append(items(8, "a"))
        await svc.stop()
        with pytest.raises(ServiceError, match="shutting down"):
            await svc.append(items(1, "late"))
        assert svc.log.latest_checkpoint() is not None
        assert svc.log.latest_checkpoint().size == 8  # type: ignore[union-attr]

    asyncio.run(main())


def test_a_small_append_waits_for_one_bulk_commit_not_for_every_queued_one() -> None:
    """Three bulk requests of a full group each and then a one-item append, all queued before
    the writer runs: the single append is committed before the second bulk group (B4: it
    is not queued behind every bulk request that came before it)."""

    async def main() -> None:
        svc = service(checkpoint_interval=0.01, group_items=10_000)
        await svc.start()
        bulk = [
            svc.append_packed(b"".join(i.record_digest for i in items(10_000, f"bulk{k}")))
            for k in range(3)
        ]
        queued = [asyncio.ensure_future(b) for b in bulk]  # queued in this order
        single = asyncio.ensure_future(svc.append(items(1, "single")))
        packed = await asyncio.gather(*queued)
        index = (await single)[0].index
        firsts = sorted(p.first_index for p in packed)
        assert index in (0, 10_000)  # before the second bulk group at the latest
        assert firsts == ([1, 10_001, 20_001] if index == 0 else [0, 10_001, 20_001])
        await svc.stop()

    asyncio.run(main())


class _Commits:
    """An observer that records the number of items in each group commit."""

    def __init__(self) -> None:
        self.items: list[int] = []

    def on_append(self, items: int) -> None:
        pass

    def on_commit(self, items: int, new: int, seconds: float) -> None:
        self.items.append(items)

    def on_publish(self, size: int) -> None:
        pass


@pytest.mark.parametrize("primary", [False, True])
def test_primary_mode_commits_short_groups(primary: bool) -> None:
    """Primary mode caps a group commit at ``PRIMARY_GROUP_ITEMS`` (at least one request), so
    a checkpoint is signed soon after the one before it lands and a small append waits behind
    a short commit (B4); local mode takes every queued bulk request in one group."""
    from ledger.log.service import PRIMARY_GROUP_ITEMS

    async def main() -> list[int]:
        svc = service(checkpoint_interval=0.01, ack_on_publish=primary)
        commits = _Commits()
        svc.observer = commits
        await svc.start()
        bulk = [
            asyncio.ensure_future(
                svc.append_packed(b"".join(i.record_digest for i in items(1_000, f"g{k}")))
            )
            for k in range(6)
        ]
        await asyncio.gather(*bulk)
        await svc.stop()
        return commits.items

    sizes = asyncio.run(main())
    assert sum(sizes) == 6_000
    if primary:
        assert max(sizes) <= max(PRIMARY_GROUP_ITEMS, 1_000) and len(sizes) >= 6_000 // max(
            PRIMARY_GROUP_ITEMS, 1_000
        )
    else:
        assert sizes == [6_000]
