"""The log as an asyncio service: group commit, the checkpoint cadence, waiters and pushback.

Many concurrent appends share one durable write: requests queue here while the single writer
thread commits the previous group, then the next group is committed in one RocksDB write batch
(``Log.append``). A checkpoint is published after each commit, at most every
``checkpoint_interval`` seconds, so the newest entry is covered within about that interval plus
one commit. Past ``max_pending`` queued items, appends are refused with ``PushbackError``.

A fault in the writer (a commit, a checkpoint or an anchor that cannot be stored; a self-check
that fails) stops the log loudly: the error is logged with its cause, the failure listeners
(health: NOT_SERVING) are told, queued and new appends fail at once with ``LogFailedError``
(UNAVAILABLE), and ``stop`` returns promptly. Reads go on. A restart resumes the log once the
cause is fixed: nothing acknowledged is lost (docs/operating.md "Faults, rollbacks and restore").

Reads (checkpoints, proofs, entries, anchors, receipts) run on a pool of reader threads, never on
the event-loop thread, so a large proof batch does not stall appends or other calls; the
adapters (gRPC, HTTP) reach the log only through this service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ledger.core.errors import (
    LogFailedError,
    NotFoundError,
    PushbackError,
    ReadOnlyError,
    UnavailableError,
)
from ledger.core.limits import MAX_BATCH, MAX_GROUP
from ledger.core.packed import PackedResult, check_packed
from ledger.core.types import (
    Anchor,
    AppendItem,
    AppendResult,
    ConsistencyProof,
    Entry,
    InclusionProof,
    PublishedCheckpoint,
    ReceiptBundle,
)
from ledger.log.facade import Log
from ledger.log.packed import split
from ledger.log.publisher import Signed
from ledger.log.sequencer import ValidItems, validate_items

SMALL_READ = 16  # proofs in one call that still count as a small read
SMALL_REQUEST_ITEMS = 100  # appends this small go ahead of queued bulk ones (``_take_group``)
PRIMARY_GROUP_ITEMS = 1_000  # primary mode: items in one group commit (at least one request)
PIPELINE_DEPTH = 2  # primary mode: checkpoints signed and on their way into the bucket at once

__all__ = ["LogService"]

_log = logging.getLogger("ledger.service")
_T = TypeVar("_T")
STOP_DRAIN_S = 10.0  # how long ``stop`` waits for queued appends before failing them


class ServiceObserver(Protocol):
    """What the service reports (``ledger.log.metrics.LedgerMetrics``)."""

    def on_append(self, items: int) -> None: ...
    def on_commit(self, items: int, new: int, seconds: float) -> None: ...
    def on_publish(self, size: int) -> None: ...


@dataclass(slots=True)
class _Request:
    items: ValidItems
    done: asyncio.Future[list[AppendResult]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def count(self) -> int:
        return len(self.items)


@dataclass(slots=True)
class _PackedRequest:
    digests: bytes  # N x 32, checked
    count: int
    done: asyncio.Future[PackedResult] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class LogService:
    """Owns the writer and publisher tasks around a ``Log``."""

    def __init__(
        self,
        log: Log,
        *,
        checkpoint_interval: float = 0.05,
        max_pending: int = 200_000,
        group_items: int = 20_000,
        readers: int = 2,
        on_publish: Callable[[PublishedCheckpoint], None] | None = None,
        ack_on_publish: bool = False,
    ) -> None:
        self.log = log
        # Primary mode (``ledger.objstore.primary``): a committed group is acknowledged only
        # once a checkpoint covering it was swapped into the bucket; until then it is held here.
        self._ack_on_publish = ack_on_publish
        self._held: list[tuple[int, _Request | _PackedRequest, Any]] = []
        # ... and its checkpoints are pipelined (``_publish_pipelined``): signed on the writer
        # thread, staged on one thread while the previous one's swap runs on another.
        self._in_flight: list[asyncio.Task[None]] = []
        self._signing = asyncio.Lock()
        self._stager = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-stage")
        self._swapper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-swap")
        self._on_publish = on_publish  # called on the loop after each publish; must be quick
        self._interval = checkpoint_interval
        self._max_pending = max_pending
        self._group_items = min(max(group_items, MAX_BATCH), MAX_GROUP)
        if ack_on_publish:
            # Primary mode: short group commits, so a checkpoint is signed soon after the one
            # before it lands and a small append waits behind a short bulk commit (B4).
            self._group_items = min(self._group_items, PRIMARY_GROUP_ITEMS)
        self._queue: deque[_Request | _PackedRequest] = deque()
        self._queued_items = 0
        self._wake_writer = asyncio.Event()
        self._wake_publisher = asyncio.Event()
        self._published = asyncio.Condition()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-writer")
        self._readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="ledger-reader")
        # Batched reads (hundreds of proofs, pages, receipts) take one thread of their own: Python
        # work there holds the GIL, and more threads of it would starve the writer (B4R); small
        # reads never queue behind them.
        self._batches = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-batch")
        self._tasks: list[asyncio.Task[None]] = []
        self._accepting = False
        self._dirty = False
        self._last_publish = 0.0
        self._last_small = False  # the last group was of small requests (``_take_group``)
        self._commit_s_per_item = 0.0  # recent commits' seconds per item (moving average)
        self.observer: ServiceObserver | None = None
        self._failure: Exception | None = None
        self._failure_listeners: list[Callable[[Exception], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def failure(self) -> Exception | None:
        """The fault that stopped the writer (None while healthy)."""
        return self._failure

    def add_failure_listener(self, listener: Callable[[Exception], None]) -> None:
        """Call ``listener(fault)`` on the event loop when the writer stops after a fault, or
        when the log halts on evidence (``ledger.log.evidence``; at once if it has already)."""
        self._failure_listeners.append(listener)
        if self.log.halted is not None:
            listener(ReadOnlyError(self.log.halted))

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Publish a checkpoint for the recovered tree, then start the writer and publisher."""
        self._loop = asyncio.get_running_loop()
        self.log.failure_listeners.append(self._log_failed)
        self.log.halt_listeners.append(self._log_halted)
        # read-only with nothing published yet: reads wait for a checkpoint
        with contextlib.suppress(ReadOnlyError):
            await self._run(self.log.publish)
        self._accepting = True
        self._tasks = [
            asyncio.create_task(self._write_loop(), name="ledger-writer"),
            asyncio.create_task(self._publish_loop(), name="ledger-publisher"),
        ]

    async def stop(self) -> None:
        """Refuse new appends, drain queued ones, publish a final checkpoint, stop the tasks."""
        self._accepting = False
        deadline = asyncio.get_running_loop().time() + STOP_DRAIN_S
        while self._queue and self._failure is None:
            if asyncio.get_running_loop().time() > deadline:
                self._fail_queued(
                    UnavailableError("the log stopped before this append was written")
                )
                break
            self._wake_writer.set()
            await asyncio.sleep(0.005)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._landed()
        if self._failure is None:
            with contextlib.suppress(Exception):
                await self._publish_once()
            await self._landed()
        self._writer.shutdown(wait=True)
        self._stager.shutdown(wait=True)
        self._swapper.shutdown(wait=True)
        self._readers.shutdown(wait=True)
        self._batches.shutdown(wait=True)

    @property
    def queue_depth(self) -> int:
        """Items waiting for the writer."""
        return self._queued_items

    # --- appends ---------------------------------------------------------------------------

    async def append(self, items: Sequence[AppendItem]) -> list[AppendResult]:
        """Append a batch; return once it is durable."""
        request = _Request(validate_items(items, MAX_BATCH))
        self._enqueue(request)
        return await request.done

    async def append_packed(self, digests: bytes) -> PackedResult:
        """Append N x 32 bytes of digests without metadata (``ledger.core.packed``); return
        once durable. Same limits, queue, group commit and pushback as ``append``."""
        request = _PackedRequest(digests, check_packed(digests, MAX_BATCH))
        self._enqueue(request)
        return await request.done

    def _enqueue(self, request: _Request | _PackedRequest) -> None:
        if self._failure is not None:
            raise self._failed_error()
        if self.log.read_only is not None:
            raise ReadOnlyError(self.log.read_only)
        if not self._accepting:
            raise UnavailableError("the log is shutting down; retry against the restarted server")
        if self._queued_items + request.count > self._max_pending:
            raise PushbackError(
                f"{self._queued_items} items queued (max {self._max_pending}); retry shortly",
                retry_after=0.05,
            )
        if self.observer is not None:
            self.observer.on_append(request.count)
        self._queue.append(request)
        self._queued_items += request.count
        self._wake_writer.set()

    async def wait_for_checkpoint(self, size: int, timeout: float = 10.0) -> PublishedCheckpoint:
        """Wait until a published checkpoint covers ``size`` entries; return it."""

        def covered() -> bool:
            latest = self.log.latest_checkpoint()
            return self._failure is not None or (latest is not None and latest.size >= size)

        self._wake_publisher.set()
        try:
            async with self._published:
                await asyncio.wait_for(self._published.wait_for(covered), timeout)
        except TimeoutError:
            # UNAVAILABLE, so clients retry: the entries are durable and appends are idempotent.
            raise UnavailableError(
                f"no checkpoint covered {size} entries within {timeout:g} s; the entries are "
                "durable: retry (appends are idempotent) or fetch proofs after the next checkpoint"
            ) from None
        latest = self.log.latest_checkpoint()
        if latest is None or latest.size < size:
            raise self._failed_error()
        return latest

    # --- faults ------------------------------------------------------------------------------

    def _failed_error(self) -> LogFailedError:
        fault = self._failure
        error = LogFailedError(
            f"the log stopped after a fault and takes no appends ({type(fault).__name__}: "
            f"{fault}); the operator must fix the cause and restart it; acknowledged entries "
            "are safe"
        )
        error.__cause__ = fault
        return error

    def _log_failed(self, exc: Exception) -> None:
        """The log's listener (called on the writer thread)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._fail, exc)

    def _log_halted(self, reason: str) -> None:
        """The log's halt listener (any thread): tell the failure listeners (health), fail
        queued appends; the service itself goes on serving reads."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._halted, reason)

    def _halted(self, reason: str) -> None:
        error = ReadOnlyError(reason)
        self._fail_queued(error)
        for listener in self._failure_listeners:
            try:
                listener(error)
            except Exception:
                _log.exception("a failure listener failed")

    def _fail(self, exc: Exception) -> None:
        """Enter the failed state (on the event loop): log, fail queued appends, tell listeners."""
        if self._failure is not None:
            return
        self._failure = exc
        _log.error("the log stopped after a fault: %s: %s", type(exc).__name__, exc, exc_info=exc)
        self._fail_queued(self._failed_error())
        for listener in self._failure_listeners:
            try:
                listener(exc)
            except Exception:
                _log.exception("a failure listener failed")
        self._wake_publisher.set()
        asyncio.get_running_loop().create_task(self._notify_published())

    def _fail_queued(self, error: Exception) -> None:
        self._release_held(None, error)
        while self._queue:
            request = self._queue.popleft()
            self._queued_items -= request.count
            if not request.done.done():
                request.done.set_exception(error)

    async def _notify_published(self) -> None:
        async with self._published:
            self._published.notify_all()

    # --- reads, on the reader threads -------------------------------------------------------

    async def checkpoint(self, size: int = 0) -> PublishedCheckpoint:
        """The checkpoint published for ``size`` (0: the latest)."""
        if size == 0 and (latest := self.log.latest_checkpoint()) is not None:
            return latest  # in memory: no thread hop for the most frequent read
        return await self._read(self.log.checkpoint, size)

    async def inclusion_proofs(
        self, indexes: Sequence[int], record_digests: Sequence[bytes], tree_size: int
    ) -> list[InclusionProof]:
        """Inclusion proofs at one size: ``indexes`` first, then ``record_digests``."""

        def prove() -> list[InclusionProof]:
            found = [self.log.index_of(d) for d in record_digests]
            return self.log.inclusion_proofs([*indexes, *found], tree_size)

        if len(indexes) + len(record_digests) > SMALL_READ:
            return await self._read_batch(prove)
        return await self._read(prove)

    async def consistency_proof(self, size1: int, size2: int) -> ConsistencyProof:
        """RFC 9162 consistency proof (``size2`` 0: the latest)."""
        return await self._read(self.log.consistency_proof, size1, size2)

    async def entries(self, start: int, count: int) -> list[Entry]:
        """A page of published entries."""
        return await self._read_batch(self.log.entries, start, count)

    async def entry(self, record_digest: bytes) -> Entry:
        """The entry of a logged record digest."""
        return await self._read(self.log.entry_by_digest, record_digest)

    async def anchors(self, size: int) -> tuple[PublishedCheckpoint, list[Anchor]]:
        """The checkpoint of ``size`` (0: the newest anchored) and its anchors."""

        def read() -> tuple[PublishedCheckpoint, list[Anchor]]:
            at = size
            if at == 0:
                sizes = self.log.anchored_sizes(1)
                if not sizes:
                    raise NotFoundError("size: no checkpoint has been anchored yet")
                at = sizes[0]
            checkpoint = self.log.checkpoint(at)
            anchors = self.log.anchors(at)
            if not anchors:
                raise NotFoundError(f"size: the checkpoint of size {at} has no anchor yet")
            return checkpoint, anchors

        return await self._read(read)

    async def anchored_sizes(self, limit: int) -> list[int]:
        """Anchored checkpoint sizes, newest first."""
        return await self._read(self.log.anchored_sizes, limit)

    async def receipts(
        self, record_digests: Sequence[bytes], tree_size: int, *, prefer_anchored: bool
    ) -> ReceiptBundle:
        """One checkpoint, its anchors and an inclusion proof per digest (``receipt_bundle``)."""
        return await self._read_batch(
            lambda: self.log.receipt_bundle(
                record_digests, tree_size, prefer_anchored=prefer_anchored
            )
        )

    async def offload(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn`` (building a large answer from what a read returned) on a reader thread,
        so that neither the read nor the answer's construction holds the event loop."""
        return await self._read_batch(fn, *args)

    async def _read(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._readers, fn, *args)

    async def _read_batch(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._batches, fn, *args)

    # --- the writer and the publisher -------------------------------------------------------

    async def _write_loop(self) -> None:
        while self._failure is None:
            await self._wake_writer.wait()
            self._wake_writer.clear()
            while self._queue and self._failure is None:
                group = self._take_group()
                if self._dirty and self._publish_due(ahead=self._commit_estimate(group)):
                    # The checkpoint falls due during this commit: publish first, so the
                    # entries already acknowledged are not covered a whole commit late (B4).
                    with contextlib.suppress(Exception):
                        await self._publish_once()
                await self._commit(group)
                self._dirty = True
                if self._publish_due():
                    # Publish before the next group takes the writer: a checkpoint never waits
                    # behind another commit. A fault reaches ``_fail`` through the listener.
                    with contextlib.suppress(Exception):
                        await self._publish_once()
                else:
                    self._wake_publisher.set()

    def _publish_due(self, ahead: float = 0.0) -> bool:
        """Whether a checkpoint is due now (or within ``ahead`` seconds)."""
        return asyncio.get_running_loop().time() + ahead >= self._last_publish + self._interval

    def _commit_estimate(self, group: list[_Request | _PackedRequest]) -> float:
        """Seconds the commit of ``group`` should take, from the recent commits' rate."""
        return self._commit_s_per_item * sum(r.count for r in group)

    def _take_group(self) -> list[_Request | _PackedRequest]:
        """The next requests to commit together: up to the group size, all of one kind, in
        queue order; but after a group of bulk requests, small requests (at most
        ``SMALL_REQUEST_ITEMS``) waiting behind bulk ones go first, so a single append waits
        for at most one bulk commit, not for every bulk request queued before it (B4)."""
        queue = self._queue
        small_first = not self._last_small and queue[0].count > SMALL_REQUEST_ITEMS
        if small_first and (small := [r for r in queue if r.count <= SMALL_REQUEST_ITEMS]):
            kind = type(small[0])
            group, count = [], 0
            for request in small:
                if type(request) is kind and count + request.count <= self._group_items:
                    group.append(request)
                    count += request.count
            taken = {id(r) for r in group}
            self._queue = deque(r for r in queue if id(r) not in taken)
        else:
            kind = type(queue[0])
            group = []
            count = 0
            while queue and type(queue[0]) is kind:
                if group and count + queue[0].count > self._group_items:
                    break
                request = queue.popleft()
                group.append(request)
                count += request.count
        self._last_small = all(r.count <= SMALL_REQUEST_ITEMS for r in group)
        self._queued_items -= count
        return group

    def _append_group(self, group: list[_Request | _PackedRequest]) -> tuple[list[Any], int]:
        """On the writer thread: one durable commit for the group; each request's part of the
        outcome and the number of new entries."""
        counts = [r.count for r in group]
        if isinstance(group[0], _PackedRequest):
            packed = self.log.append_packed(
                b"".join(r.digests for r in group if isinstance(r, _PackedRequest))
            )
            return list(split(packed, counts)), packed.new_entries
        results = self.log.append(
            ValidItems.concat(r.items for r in group if isinstance(r, _Request))
        )
        parts, at = [], 0
        for n in counts:
            parts.append(results[at : at + n])
            at += n
        return parts, sum(1 for r in results if not r.duplicate)

    async def _commit(self, group: list[_Request | _PackedRequest]) -> None:
        started = asyncio.get_running_loop().time()
        try:
            parts, new = await self._run(self._append_group, group)
        except Exception as exc:
            if not isinstance(exc, LogFailedError | ReadOnlyError):
                self._fail(exc)  # e.g. a damaged index found while sequencing
            if self._failure is not None:
                exc = self._failed_error()
            for request in group:
                if not request.done.done():
                    request.done.set_exception(exc)
            return
        elapsed = asyncio.get_running_loop().time() - started
        items = sum(r.count for r in group)
        if items >= SMALL_REQUEST_ITEMS:  # a small commit is mostly its sync: no per-item rate
            self._commit_s_per_item += 0.25 * (elapsed / items - self._commit_s_per_item)
        if self.observer is not None:
            self.observer.on_commit(items, new, elapsed)
        if self._ack_on_publish:
            size = self.log.size  # the tree a covering checkpoint must reach
            self._held += [(size, r, p) for r, p in zip(group, parts, strict=True)]
            return
        for request, part in zip(group, parts, strict=True):
            if not request.done.done():
                request.done.set_result(part)

    async def _publish_loop(self) -> None:
        """Publish what the write loop left unpublished, once the interval has passed."""
        loop = asyncio.get_running_loop()
        while True:
            await self._wake_publisher.wait()
            self._wake_publisher.clear()
            delay = self._last_publish + self._interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if not self._dirty or self._failure is not None:
                continue
            with contextlib.suppress(Exception):  # a fault is reported through the log's listener
                await self._publish_once()

    async def _publish_once(self) -> None:
        if self._ack_on_publish:
            await self._publish_pipelined()
            return
        self._dirty = False
        self._last_publish = asyncio.get_running_loop().time()
        published = await self._run(self.log.publish)
        await self._published_now(published)

    async def _published_now(self, published: PublishedCheckpoint) -> None:
        self._release_held(published.size, None)
        if self.observer is not None:
            self.observer.on_publish(published.size)
        async with self._published:
            self._published.notify_all()
        if self._on_publish is not None:
            self._on_publish(published)

    async def _publish_pipelined(self) -> None:
        """Primary mode: sign a checkpoint on the writer thread (between commits), then stage
        it while the previous one's swap is in flight; its swap follows that one's
        (``Log.complete_publish``, strictly in signing order) and only then is it served and
        are the appends it covers acknowledged. At most ``PIPELINE_DEPTH`` on their way; when
        one lands a due publish goes next."""
        async with self._signing:  # signed and queued in one order (write and publish loops)
            if len(self._in_flight) >= PIPELINE_DEPTH:
                self._dirty = True  # the landing one publishes again
                return
            self._dirty = False
            self._last_publish = asyncio.get_running_loop().time()
            try:
                signed = await self._run(self.log.prepare_publish)
            except Exception as exc:
                self._release_held(None, exc)
                raise
            if signed is None:  # nothing new: what is held waits for a checkpoint in flight
                latest = self.log.latest_checkpoint()
                if latest is not None and not self._in_flight:
                    self._release_held(latest.size, None)
                return
            before = self._in_flight[-1] if self._in_flight else None
            task = asyncio.get_running_loop().create_task(self._land(signed, before))
            self._in_flight.append(task)

    async def _land(self, signed: Signed, before: asyncio.Task[None] | None) -> None:
        """Stage ``signed``, wait for the checkpoint signed before it, swap and store it, then
        serve it and acknowledge what it covers; a failure fails what is held."""
        loop = asyncio.get_running_loop()
        try:
            staged = await loop.run_in_executor(self._stager, self.log.stage_publish, signed)
            if before is not None:
                await asyncio.wait([before])  # its outcome is the log's: a failure drops this
            try:
                published = await loop.run_in_executor(
                    self._swapper, self.log.complete_publish, staged
                )
            except Exception as exc:  # a fault also reaches ``_fail`` through the listener
                self._release_held(None, exc)
                return
            try:
                await self._published_now(published)
            except Exception:  # a listener's bug: the checkpoint is published all the same
                _log.exception("after publishing checkpoint %d", published.size)
        finally:
            self._in_flight = [t for t in self._in_flight if t is not asyncio.current_task()]
            if self._dirty and self._failure is None and self._accepting:
                self._wake_publisher.set()

    async def _landed(self) -> None:
        """Wait for every checkpoint on its way (primary mode)."""
        while self._in_flight:
            await asyncio.wait(list(self._in_flight))

    def _release_held(self, size: int | None, error: Exception | None) -> None:
        """Primary mode: acknowledge the held groups a checkpoint of ``size`` covers, or fail
        every held group with ``error`` (their entries are committed locally but not stored in
        the bucket: a retry finds them in the dedup index and waits for the next checkpoint)."""
        if not self._held:
            return
        keep = []
        for need, request, part in self._held:
            if request.done.done():
                continue
            if error is not None:
                failure = self._failed_error() if self._failure is not None else error
                request.done.set_exception(failure)
            elif size is not None and need <= size:
                request.done.set_result(part)
            else:
                keep.append((need, request, part))
        self._held = keep

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn`` on the single writer thread (commits and publishes never overlap)."""
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn, *args)
