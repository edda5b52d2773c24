"""Reader processes: proofs and reads served from a RocksDB secondary of a running log.

A reader opens the writer's data dir as a secondary (``RocksStore.secondary``), never writes,
and serves the read RPCs on its own port with the log's own servicer; appends sent to it are
refused (FAILED_PRECONDITION: append to the writer). Every interval it catches up with the
writer and swaps in a ``Log`` opened on the caught-up view, so the newest checkpoint it answers
for is the newest it has caught up to, and that checkpoint's root is checked against the stored
tree (the log's recovery check) before the reader answers for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ledger.core.errors import FailedPreconditionError, StorageError
from ledger.core.types import AppendItem, AppendResult
from ledger.log.facade import Log
from ledger.log.service import LogService
from ledger.store.rocks import RocksStore

__all__ = ["NotSigning", "ReaderService", "open_reader_log", "refresh"]


class NotSigning:
    """The signer of a reader's ``Log``: a reader never publishes, so it has no key."""

    name = "reader"
    key_id = b"\x00\x00\x00\x00"

    def sign(self, message: bytes) -> bytes:
        """Refuse: only the writer signs checkpoints."""
        raise StorageError("a reader does not sign checkpoints")


class ReaderService(LogService):
    """A ``LogService`` whose writer and publisher never start: reads only."""

    async def append(self, items: Sequence[AppendItem]) -> list[AppendResult]:
        """Refuse: appends go to the writer's port."""
        raise FailedPreconditionError("this is a read-only reader; append to the writer's port")


def open_reader_log(store: RocksStore) -> Log:
    """Catch up with the writer and open a ``Log`` on that view (checking its checkpoint)."""
    store.catch_up()
    latest = store.latest_checkpoint()
    origin = latest.origin if latest is not None else "reader"
    return Log(store=store, signer=NotSigning(), origin=origin)


async def refresh(service: ReaderService, store: RocksStore, interval: float) -> None:
    """Swap in a caught-up ``Log`` every ``interval`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(interval)
        service.log = await asyncio.to_thread(open_reader_log, store)
