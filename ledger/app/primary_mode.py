"""Primary mode in the server (``[object_store] mode = "primary"``; ``ledger.objstore.primary``):
the bucket holds the log, the data dir is a cache and dedup index rebuilt from it.

* ``PrimaryMode.open(settings, store)`` builds the writer's ``PrimaryBucket``; the mode itself
  is the log's publish gate (``stage``, then ``swap``: ``ledger.log.publisher``).
* ``start(log)``, active: takes the lock (``WriterActiveError`` while another writer's lease is
  live: start that one with ``--standby``), then ``catch_up``.
* ``start(log)``, ``--standby``: follows the bucket's public checkpoint into the data dir until
  the active writer's lease lapses (``LockWatcher``), takes the lock, then ``catch_up``; the gRPC
  port opens only after, so appends are accepted only once the dedup index covers the bucket's
  checkpoint and a re-sent record finds its index.
* ``catch_up``: the bucket's checkpoint is the high-water mark. A data dir behind it is filled
  from the bucket's entry bundles (leaves checked against the signed root); a data dir holding
  more entries must hold the bucket's root at the bucket's size (the extra entries were never
  acknowledged); a local checkpoint larger than the bucket's is refused (an older bucket).
* ``weigh_witnesses``, after the witnesses' start check (start and takeover): a witness at a
  size larger than the bucket's checkpoint halts the log (one witness is enough here).
* The lease keeper renews the lock every ``lease_s / 3``; a renewal that finds another writer
  halts the log (health NOT_SERVING, with the reason).
* ``stage``/``swap`` (the log's publish gate) fail fast while the bucket is stalled
  (``STALL_RETRY_S``).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ledger.app.settings import Settings
from ledger.core.checkpoint import open_checkpoint
from ledger.core.errors import (
    DataLossError,
    StoreUnreachableError,
    WriterActiveError,
    WriterFencedError,
)
from ledger.core.note import Verifier
from ledger.core.types import PublishedCheckpoint
from ledger.log.facade import Log
from ledger.log.witnessing import WitnessStatus
from ledger.objstore.bucket import Bucket, BucketAddress
from ledger.objstore.primary import (
    LeaseKeeper,
    LockState,
    LockWatcher,
    PrimaryBucket,
    StagedTree,
    public_checkpoint,
    read_leaves,
)
from ledger.store.contract import Store
from ledger.store.tile_reader import TileReader

__all__ = ["PrimaryMode"]

_log = logging.getLogger("ledger.primary")
# Every bucket request on the append path is bounded by BUCKET_TIMEOUT_S (connect, read; a
# PUT that timed out is not tried again), and after one the gate fails fast (STALL_RETRY_S):
# an append in a stall fails UNAVAILABLE within about two timeouts (a lease renewal's, then
# the commit's), well inside a client's usual deadline (5 s or more), never DEADLINE_EXCEEDED.
BUCKET_TIMEOUT_S = 1.5
STALL_RETRY_S = 1.0


def poll_interval(lease_s: float) -> float:
    """How often a standby reads the lock (and follows the bucket) while it waits."""
    return min(1.0, lease_s / 5)


@dataclass(slots=True, kw_only=True)
class PrimaryMode:
    """The server's primary-mode parts (module docstring)."""

    settings: Settings
    primary: PrimaryBucket
    verifier: Verifier
    keeper: LeaseKeeper | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    stall: _Stall = field(default_factory=lambda: _Stall())

    @classmethod
    def open(cls, settings: Settings, store: Store, verifier: Verifier) -> PrimaryMode:
        address = BucketAddress.parse(
            settings.object_store_url,
            endpoint=settings.object_store_endpoint,
            region=settings.object_store_region,
        )
        reader = TileReader(store=store, published=lambda: None)
        primary = PrimaryBucket(
            # A stalled store fails a commit within one timeout (UNAVAILABLE), inside a
            # client's deadline, rather than after botocore's default retries.
            bucket=Bucket(address, timeout_s=BUCKET_TIMEOUT_S, attempts=2, retry_timeouts=False),
            tile_source=reader.read,
            origin=settings.origin,
            writer=settings.object_store_writer or socket.gethostname(),
        )
        return cls(settings=settings, primary=primary, verifier=verifier)

    def start(self, log: Log) -> None:
        """Take the lock (after waiting out the active writer's lease, ``--standby``) and bring
        the data dir to the bucket's checkpoint. Blocking: run it off the event loop."""
        lease_s = self.settings.object_store_lease_s
        if self.settings.standby:
            watcher = LockWatcher(self.primary.bucket, lease_s=lease_s)
            first = True
            while not self.stopping.is_set():
                self._follow(log)
                if watcher.poll():
                    break
                if first:  # the data dir caught up once and the lease is being watched
                    first = False
                    _log.warning(
                        "standby: following %s at size %d until writer %r's lease (%g s) lapses",
                        self.primary.bucket.address.url,
                        log.size,
                        "?" if watcher.state is None else watcher.state.writer,
                        lease_s,
                    )
                self.stopping.wait(poll_interval(lease_s))
            holder = "nobody" if watcher.state is None else repr(watcher.state.writer)
            _log.warning(
                "standby: the lease of writer %s lapsed (no lock change for %g s); taking over",
                holder,
                lease_s,
            )
            state = self.primary.acquire()
        else:
            try:
                state = self.primary.open()
            except WriterActiveError as exc:
                raise WriterActiveError(
                    f"{exc}: another writer is active on this bucket; start this server with "
                    "--standby to take over when its lease lapses"
                ) from None
            if state is None:
                self.catch_up(log, None)  # an empty bucket and a data dir that published: refused
                state = self.primary.acquire()
        before = log.size
        self.catch_up(log, state)
        _log.info(
            "caught up with %s: size %d (%d entries read from the bucket)",
            self.primary.bucket.address.url,
            log.size,
            log.size - before,
        )

    def _follow(self, log: Log) -> None:
        note = public_checkpoint(self.primary.bucket)
        if note is None:
            return
        checkpoint = self._verified(note)
        if checkpoint.size > log.size:
            leaves = read_leaves(self.primary.bucket, log.size, checkpoint.size)
            log.follow(leaves, checkpoint)

    def catch_up(self, log: Log, state: LockState | None) -> None:
        """The data dir against the locked checkpoint (module docstring)."""
        if state is None or not state.size:
            if log.latest_checkpoint() is not None:
                raise DataLossError(
                    f"{self.primary.bucket.address.url} holds no checkpoint but this data dir "
                    "published one: the bucket is older than the local mark; refusing"
                )
            return
        checkpoint = self._verified(state.note)
        latest = log.latest_checkpoint()
        if latest is not None and latest.size > checkpoint.size:
            raise DataLossError(
                f"the bucket's checkpoint (size {checkpoint.size}) is older than this data "
                f"dir's (size {latest.size}): refusing to sign below known evidence"
            )
        if log.size < checkpoint.size:
            leaves = read_leaves(self.primary.bucket, log.size, checkpoint.size)
            log.follow(leaves, checkpoint)
        else:
            log.follow([], checkpoint)

    def weigh_witnesses(self, log: Log, witnesses: Sequence[WitnessStatus]) -> None:
        """After the start check (start and takeover): halt when any witness holds a size
        larger than the bucket's checkpoint (as it answered the start check, or as this data
        dir last heard it). In primary mode one witness is enough, not a quorum: a witness only
        holds checkpoints this log signed, each swapped into the bucket before it left the
        writer, so a bucket below one was rolled back (restored from an older copy, or another
        store) and continuing it would sign a second root at sizes the witness holds."""
        latest = log.latest_checkpoint()
        size = 0 if latest is None else latest.size
        ahead = [w for w in witnesses if w.witness_size > size]
        if not ahead or log.halted is not None:
            return
        top = max(ahead, key=lambda w: w.witness_size)
        reason = (
            f"the bucket's checkpoint {self.primary.bucket.address.url} (size {size}) is older "
            f"than witness {top.name}'s (size {top.witness_size}): the bucket was rolled back; "
            "refusing to sign below known evidence. The log serves reads but signs and appends "
            "nothing: put back the bucket's objects from a copy that holds the witness's size"
        )
        if log.halt(reason):
            _log.error("HALTED: %s", reason)

    def _verified(self, note: str) -> PublishedCheckpoint:
        body = open_checkpoint(note, [self.verifier], origin=self.settings.origin).checkpoint
        return PublishedCheckpoint(
            origin=body.origin, size=body.size, root_hash=body.root_hash, note=note
        )

    def stage(self, previous: int, published: PublishedCheckpoint) -> StagedTree:
        """The log's publish gate, step 1 (``PrimaryBucket.stage``), failing fast while the
        bucket is stalled (``StoreUnreachableError`` naming the bucket: gRPC UNAVAILABLE;
        nothing leaves the process). One real commit is tried every ``STALL_RETRY_S``; a lease
        renewal that succeeds ends the stall at once."""
        self.stall.check(self.primary.bucket.address.url)
        try:
            return self.primary.stage(previous, published)
        except StoreUnreachableError as exc:
            self.stall.began(str(exc))
            raise

    def swap(self, staged: object) -> None:
        """The log's publish gate, step 2 (``PrimaryBucket.swap``), in signing order."""
        try:
            self.primary.swap(staged)
        except StoreUnreachableError as exc:
            self.stall.began(str(exc))
            raise
        self.stall.ended()

    def keep_lease(self, log: Log) -> None:
        """Renew the lease until ``stop``; a fence halts the log."""

        def fenced(exc: WriterFencedError) -> None:
            log.halt(str(exc))

        self.keeper = LeaseKeeper(
            self.primary,
            lease_s=self.settings.object_store_lease_s,
            on_fenced=fenced,
            on_renewed=self.stall.ended,
        )
        self.keeper.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.keeper is not None:
            self.keeper.stop()
        self.primary.close()


class _Stall:
    """Whether the bucket stopped answering, and since when (``PrimaryMode.stage``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._tried = 0.0
        self._why = ""

    def check(self, url: str) -> None:
        """Raise while stalled, except once every ``STALL_RETRY_S`` (that call tries)."""
        with self._lock:
            if self._since is None:
                return
            now = self._clock()
            if now - self._tried >= STALL_RETRY_S:
                self._tried = now
                return
            raise StoreUnreachableError(
                f"{url}: the object store has not answered for {now - self._since:.1f} s "
                f"({self._why}); appends are not acknowledged until it does"
            )

    def began(self, why: str) -> None:
        with self._lock:
            now = self._clock()
            if self._since is None:
                self._since = now
                _log.error("the object store stopped answering: %s", why)
            self._tried, self._why = now, why

    def ended(self) -> None:
        with self._lock:
            if self._since is not None:
                _log.warning(
                    "the object store answers again after %.1f s", self._clock() - self._since
                )
            self._since = None
