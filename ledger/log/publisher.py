"""Publishing (C2SP tlog-checkpoint, signed-note): sign and store checkpoints of the durable tree.

A checkpoint is signed only for a size whose tree is durable and proven (from stored nodes)
consistent with the previous published one; it is recorded in the high-water mark outside the
data dir, then stored durably, before anyone sees it (in primary mode the ``gate`` first swaps
it into the bucket); and never for a size smaller than the
latest one. The store refuses a second root for a size, so even a bug above cannot make the log
sign two different roots for one size.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ledger.core.checkpoint import Checkpoint, Signer, sign_checkpoint
from ledger.core.types import PublishedCheckpoint
from ledger.log.highwater import HighWaterMark, MarkState
from ledger.store.contract import Store

__all__ = ["Gate", "Publisher"]

# Called with the previous published size and a newly signed checkpoint before it is stored or
# seen; raising keeps the checkpoint in the process (``ledger.objstore.primary``).
Gate = Callable[[int, PublishedCheckpoint], None]


class Publisher:
    """Signs checkpoints with an injected signer and stores them."""

    def __init__(
        self,
        *,
        store: Store,
        signer: Signer,
        origin: str,
        mark: HighWaterMark | None = None,
        check: Callable[[PublishedCheckpoint, int, bytes], None] | None = None,
        gate: Gate | None = None,
    ) -> None:
        self._store = store
        self._signer = signer
        self._origin = origin
        self._mark = mark
        self._check = check or (lambda _old, _size, _root: None)
        self._gate = gate
        self._latest = store.latest_checkpoint()
        self._latest_lock = threading.Lock()

    @property
    def origin(self) -> str:
        """The log's origin line."""
        return self._origin

    @property
    def latest(self) -> PublishedCheckpoint | None:
        """The newest published checkpoint."""
        return self._latest

    def refresh(self, checkpoint: PublishedCheckpoint) -> None:
        """Adopt a stored checkpoint that gained signature lines (witness cosignatures); safe
        to call from another thread than ``publish``."""
        with self._latest_lock:
            if self._latest is not None and self._latest.size == checkpoint.size:
                self._latest = checkpoint

    def publish(self, size: int, root_hash: bytes) -> PublishedCheckpoint:
        """Sign and durably store the checkpoint for a durable tree of ``size``."""
        latest = self._latest
        if latest is not None and latest.size >= size:
            return latest
        if latest is not None:
            self._check(latest, size, root_hash)  # raises DataLossError: nothing is signed
        body = Checkpoint(origin=self._origin, size=size, root_hash=root_hash)
        published = PublishedCheckpoint(
            origin=self._origin,
            size=size,
            root_hash=root_hash,
            note=sign_checkpoint(body, self._signer),
        )
        if self._gate is not None:
            # Primary mode: the checkpoint is swapped into the bucket before it is served,
            # witnessed, put in receipts or marked; a failed swap keeps it in this process.
            self._gate(0 if latest is None else latest.size, published)
        if self._mark is not None:
            self._mark.write(MarkState(checkpoint=published))
        self._store.put_checkpoint(published)
        with self._latest_lock:
            self._latest = published
        return published

    def adopt(self, published: PublishedCheckpoint) -> None:
        """Store a checkpoint published earlier (found in the high-water mark) as the latest."""
        self._store.put_checkpoint(published)
        self._latest = published
