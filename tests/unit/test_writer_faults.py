"""A writer fault stops the log loudly, at each fault point of the store (MemoryStore's hook):
the fault is logged with its cause, listeners (health) are told, appends fail at once with
LogFailedError (UNAVAILABLE), waiters are released, ``stop`` returns promptly, and a restart over
the same store resumes with every acknowledged entry."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import LogFailedError
from ledger.core.types import Anchor, AppendItem
from ledger.log.facade import Log
from ledger.log.service import LogService
from ledger.store.contract import MemoryStore
from tests.waits import wait_until_async

ORIGIN = "ledger.test/faults"
SIGNER = Ed25519Signer.generate(ORIGIN)


def items(n: int, salt: str) -> list[AppendItem]:
    return [AppendItem(hashlib.sha256(f"{salt}{i}".encode()).digest()) for i in range(n)]


class Disk:
    """The fault hook: raises ENOSPC at one point once armed."""

    def __init__(self) -> None:
        self.full_at: str | None = None

    def __call__(self, point: str) -> None:
        if point == self.full_at:
            raise OSError(28, "No space left on device")


async def trigger(point: str, svc: LogService) -> None:
    if point == "commit":
        with pytest.raises(LogFailedError, match="No space left"):
            await svc.append(items(3, "boom"))
    elif point == "checkpoint":
        svc.log.append(items(2, "unpublished"))  # something new to sign
        with pytest.raises(LogFailedError, match="restart"):
            svc.log.publish()
    else:
        latest = svc.log.latest_checkpoint()
        assert latest is not None
        anchor = Anchor(size=latest.size, tsa="t", token=b"x", gen_time_ms=1)
        with pytest.raises(LogFailedError, match="anchor"):
            svc.log.put_anchor(anchor)


@pytest.mark.parametrize("point", ["commit", "checkpoint", "anchor"])
def test_a_store_fault_stops_the_log_loudly_and_a_restart_resumes(
    point: str, caplog: pytest.LogCaptureFixture
) -> None:
    disk = Disk()
    store = MemoryStore(fault=disk)

    async def main() -> dict[bytes, int]:
        svc = LogService(Log(store=store, signer=SIGNER, origin=ORIGIN), checkpoint_interval=0.01)
        told: list[Exception] = []
        svc.add_failure_listener(told.append)
        await svc.start()
        acked = await svc.append(items(10, "before"))
        await svc.wait_for_checkpoint(10, timeout=5)
        waiter = asyncio.create_task(svc.wait_for_checkpoint(10_000, timeout=30))
        disk.full_at = point
        with caplog.at_level(logging.ERROR, logger="ledger.service"):
            await trigger(point, svc)

            async def reported() -> bool:
                return bool(told) and "the log stopped after a fault" in caplog.text

            await wait_until_async(reported, timeout=10, what="the fault to be reported")
        assert svc.failure is not None and told == [svc.failure]
        assert "the log stopped after a fault" in caplog.text and "No space left" in caplog.text
        assert "Traceback" in caplog.text or caplog.records[-1].exc_info is not None
        started = time.monotonic()
        with pytest.raises(LogFailedError, match="restart"):
            await svc.append(items(1, "after"))
        assert time.monotonic() - started < 0.5  # at once, not at the client's deadline
        with pytest.raises(LogFailedError):
            await asyncio.wait_for(waiter, 2)
        started = time.monotonic()
        await asyncio.wait_for(svc.stop(), 5)
        assert time.monotonic() - started < 2
        return {r.leaf_hash: r.index for r in acked}

    acked = asyncio.run(main())
    disk.full_at = None  # space is back; a restart resumes
    log = Log(store=store, signer=SIGNER, origin=ORIGIN)
    assert log.size >= 10
    for proof in log.inclusion_proofs(sorted(acked.values()), 0):
        assert acked[proof.leaf_hash] == proof.entry.index
    log.append(items(1, "resumed"))
    assert log.publish().size == log.size
