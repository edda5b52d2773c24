"""Publishing (C2SP tlog-checkpoint, signed-note): sign and store checkpoints of the durable tree.

A checkpoint is signed only for a size whose tree is durable and proven (from stored nodes)
consistent with the previous signed one; it is recorded in the high-water mark outside the
data dir, then stored durably, before anyone sees it (in primary mode the ``gate`` first swaps
it into the bucket); and never for a size smaller than the latest one. The store refuses a
second root for a size, so even a bug above cannot make the log sign two different roots for
one size.

Three steps, so that primary mode can pipeline them (``ledger.log.service``):

1. ``sign`` (under the log's writer lock): the checkpoint of the durable tree, extending the
   newest one signed (published, or still on its way into the bucket): a ``Signed``;
2. ``stage`` (no log lock; may overlap the previous checkpoint's ``complete``): the gate's
   first step (primary mode: the staging object); its failure is kept for ``complete``;
3. ``complete`` (strictly in signing order): the gate's second step (the lock swap), then the
   mark, the store and ``latest``. Only here does a checkpoint leave the process. A failure
   drops every checkpoint signed after the last completed one (a new *generation*): each of
   them fails at its own ``complete`` with the same error, and the next ``sign`` extends the
   last completed checkpoint again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ledger.core.checkpoint import Checkpoint, Signer, sign_checkpoint
from ledger.core.types import PublishedCheckpoint
from ledger.log.highwater import HighWaterMark, MarkState
from ledger.store.contract import Store

__all__ = ["Gate", "Publisher", "Signed"]


class Gate(Protocol):
    """Primary mode's two steps before a signed checkpoint is stored or seen
    (``ledger.objstore.primary``): ``stage`` may run while the previous checkpoint's ``swap``
    is in flight; ``swap`` calls come strictly in signing order. Raising from either keeps the
    checkpoint in the process."""

    def stage(self, previous: int, published: PublishedCheckpoint) -> object: ...

    def swap(self, staged: object) -> None: ...


@dataclass(frozen=True, slots=True)
class Signed:
    """A signed checkpoint not yet published: the size it extends, its generation
    (``Publisher`` docstring) and, once staged, the gate's handle or the staging failure."""

    previous: int
    checkpoint: PublishedCheckpoint
    generation: int
    staged: object = None
    failure: Exception | None = None


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
        self._tail = self._latest  # the newest signed: published, or on its way
        self._generation = 0
        self._dropped: Exception | None = None  # why the last generation was dropped
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

    def sign(self, size: int, root_hash: bytes) -> Signed | None:
        """Step 1: sign the checkpoint of the durable tree of ``size`` (None: nothing new
        beyond the newest signed one). The caller holds the log's writer lock."""
        tail = self._tail
        if tail is not None and tail.size >= size:
            return None
        if tail is not None:
            self._check(tail, size, root_hash)  # raises DataLossError: nothing is signed
        body = Checkpoint(origin=self._origin, size=size, root_hash=root_hash)
        published = PublishedCheckpoint(
            origin=self._origin,
            size=size,
            root_hash=root_hash,
            note=sign_checkpoint(body, self._signer),
        )
        self._tail = published
        return Signed(0 if tail is None else tail.size, published, self._generation)

    def stage(self, signed: Signed) -> Signed:
        """Step 2: the gate's first step; never raises (a failure waits for ``complete``)."""
        if self._gate is None:
            return signed
        try:
            staged = self._gate.stage(signed.previous, signed.checkpoint)
        except Exception as exc:
            return Signed(signed.previous, signed.checkpoint, signed.generation, failure=exc)
        return Signed(signed.previous, signed.checkpoint, signed.generation, staged)

    def swap(self, signed: Signed) -> None:
        """Step 3's first half (in signing order, no log lock): the gate's swap. Raises when
        this checkpoint must not leave the process; the caller then calls ``drop``."""
        if signed.generation != self._generation:
            # Signed over a checkpoint that never left the process: fails as that one did.
            dropped = self._dropped or RuntimeError("an earlier checkpoint was not published")
            try:
                again = type(dropped)(str(dropped))
            except TypeError:
                again = RuntimeError(str(dropped))
            raise again
        latest = 0 if self._latest is None else self._latest.size
        if signed.previous != latest:
            raise AssertionError(
                f"publish order: checkpoint {signed.checkpoint.size} extends {signed.previous}, "
                f"the latest published is {latest}"
            )
        if signed.failure is not None:
            raise signed.failure
        if self._gate is not None:
            self._gate.swap(signed.staged)

    def drop(self, signed: Signed, exc: Exception) -> None:
        """After a failed ``swap`` (caller holds the writer lock): unless its generation was
        dropped already, drop every checkpoint signed after the latest published one."""
        if signed.generation == self._generation:
            self._generation += 1
            self._dropped = exc
            self._tail = self._latest

    def store(self, signed: Signed) -> PublishedCheckpoint:
        """Step 3's second half, after a successful ``swap`` (caller holds the writer lock):
        the mark, the store, then ``latest``: from here the checkpoint may be seen."""
        published = signed.checkpoint
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
        self._tail = published
        self._generation += 1  # anything signed before is over a tree no longer current
