"""The background sender: spooled records go to the log in batches, with retries and pushback.

``Sender.put`` writes a record to the spool (``ledger_client.sdk.spool``) and returns a ticket (its
position in the spool order); one daemon thread sends the spool in order with the batch RPC
``AppendRecords`` and acknowledges each batch in the spool once the log has made it durable.
So the log sees a client's records in exactly the order they were put.

* Batching: a batch is sent when ``batch_size`` records are pending, when the oldest has waited
  ``batch_age`` seconds, or at once when someone flushes, closes or waits for a receipt (then
  the request asks the log to wait for the covering checkpoint).
* Retries: the ledger's one retry rule (``ledger.core.errors.is_retryable``: UNAVAILABLE,
  RESOURCE_EXHAUSTED, OUT_OF_RANGE, DEADLINE_EXCEEDED, INTERNAL and the transient transport
  statuses) is retried forever with exponential backoff and jitter (``Backoff``); a
  pushback's ``retry-after-ms`` hint is honoured instead. A resend is harmless: the log
  deduplicates by digest. After a failure the channel is rebuilt, so a restarted server is
  found at once. Any other error (a refusal that resending cannot cure) stops the sender with
  ``DeliveryError``; the records stay in the spool and every later call raises that error.
* Overflow (bounded memory, nothing dropped): records are never queued in memory; the spool is
  the queue and the sender holds one batch at a time. With a spool file the backlog lives on
  disk. When ``max_pending`` records or ``max_pending_bytes`` bytes are pending, ``put`` blocks
  until the sender makes room (``overflow="block"``, the default; ``block_timeout`` bounds the
  wait, then ``SpoolFullError``), or raises ``SpoolFullError`` at once (``overflow="raise"``).
  A refused record is written nowhere, and the caller is told.
* Failures explain themselves: the first failure of a streak (connection refused, a TLS
  mismatch, a refused token: ``ledger_client.remote.log.explain`` words it) is logged and
  warned (``DeliveryWarning``) at once, with where the records stay and the command that
  delivers them later (``spool_hint``); ``problem`` keeps it for callers' timeout messages.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ledger.core.backoff import Backoff, retry
from ledger.core.errors import LedgerError, PushbackError, is_retryable
from ledger.core.limits import MAX_BATCH
from ledger_client.remote.log import RemoteLog, status_name
from ledger_client.sdk.errors import (
    ClientClosedError,
    ClientError,
    DeliveryError,
    DeliveryWarning,
    SpoolFullError,
)
from ledger_client.sdk.spool import FileSpool, Spool, SpoolItem

__all__ = [
    "Backoff",
    "Overflow",
    "Sender",
    "SenderOptions",
    "spool_hint",
]

_log = logging.getLogger("ledger_client.sender")

Overflow = Literal["block", "raise"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SenderOptions:
    """Batching, overflow and retry settings (module docstring)."""

    batch_size: int = 500
    batch_age: float = 0.05
    max_pending: int = 1_000_000
    max_pending_bytes: int = 1 << 30
    overflow: Overflow = "block"
    block_timeout: float | None = None
    backoff: Backoff = field(default_factory=Backoff)

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= MAX_BATCH:
            raise ValueError(f"batch_size {self.batch_size} outside 1..{MAX_BATCH}")
        if self.overflow not in ("block", "raise"):
            raise ValueError(f"overflow {self.overflow!r}: want 'block' or 'raise'")
        if self.max_pending < 1 or self.max_pending_bytes < 1 or self.batch_age < 0:
            raise ValueError("max_pending and max_pending_bytes >= 1, batch_age >= 0")


def spool_hint(spool: Spool, address: str) -> str:
    """Where undelivered records stay, and the command that delivers them later."""
    if not isinstance(spool, FileSpool):
        return (
            "the records wait in an in-memory spool and are lost if this process exits first "
            "(give LedgerClient a spool file)"
        )
    return (
        f"the records stay in the spool {spool.path}: a LedgerClient opening it again sends "
        f"them, or run `ledger receipt run --spool {spool.path} --server {address or 'ADDR'} "
        "--out RUN.jsonl`"
    )


class Sender:
    """Owns the spool's consumer side: one daemon thread, tickets, flush and close."""

    def __init__(
        self,
        spool: Spool,
        connect: Callable[[], RemoteLog],
        options: SenderOptions | None = None,
        *,
        name: str = "ledger-sender",
        address: str = "",
    ) -> None:
        self._spool = spool
        self._address = address
        self._connect = connect
        self.options = options or SenderOptions()
        self._cond = threading.Condition()
        self._remote: RemoteLog | None = None
        self._put = spool.pending_count  # tickets handed out (records left from earlier count)
        self._acked = 0
        self._since: float | None = 0.0 if self._put else None
        self._urgent = 0  # highest ticket someone waits on with a checkpoint
        self._flushing = 0
        self._stopping = self._abandon = self._closed = False
        self.error: ClientError | None = None
        self.problem: str | None = None  # the failure of the current streak, with its hint
        self.batches = self.retries = self.hinted = self.sent = 0  # hinted: retries on a hint
        self.covering_size = 0  # a checkpoint of this size covers every acknowledged record
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    # --- producer side ----------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Records put (or left from an earlier process) and not yet acknowledged."""
        return self._spool.pending_count

    def put(self, item: SpoolItem, *, block: bool = True) -> int:
        """Spool ``item`` under the overflow policy; return its ticket."""
        size = item.size
        with self._cond:
            self._check_usable()
            deadline = self._deadline(self.options.block_timeout)
            while self._full(size):
                self._refuse_or_wait(block, deadline)
                self._check_usable()
            self._spool.append(item)
            self._put += 1
            if self._since is None:
                self._since = time.monotonic()
            self._cond.notify_all()
            return self._put

    def _full(self, size: int) -> bool:
        spool, opts = self._spool, self.options
        return spool.pending_count > 0 and (
            spool.pending_count >= opts.max_pending
            or spool.pending_bytes + size > opts.max_pending_bytes
        )

    def _refuse_or_wait(self, block: bool, deadline: float | None) -> None:
        state = f"{self._spool.pending_count} records, {self._spool.pending_bytes} bytes pending"
        limits = f"(max {self.options.max_pending} records, {self.options.max_pending_bytes} bytes)"
        if self.options.overflow == "raise" or not block:
            raise SpoolFullError(f"spool full: {state} {limits}")
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise SpoolFullError(
                f"spool still full after {self.options.block_timeout} s: {state} {limits}"
            )
        self._cond.wait(remaining)

    def _check_usable(self) -> None:
        if self.error is not None:
            raise self.error
        if self._stopping:
            raise ClientClosedError("the ledger client is closed")

    @staticmethod
    def _deadline(timeout: float | None) -> float | None:
        return None if timeout is None else time.monotonic() + timeout

    def wait(self, ticket: int, *, timeout: float | None = None, checkpoint: bool = False) -> bool:
        """Wait until record ``ticket`` is acknowledged; ``checkpoint``: send it now, covered."""
        with self._cond:
            if checkpoint:
                self._urgent = max(self._urgent, ticket)
                self._cond.notify_all()
            self._cond.wait_for(lambda: self._acked >= ticket or self._dead(), timeout)
            if self._acked >= ticket:
                return True
            if self.error is not None:
                raise self.error
            return False

    def flush(self, timeout: float | None = None, *, checkpoint: bool = False) -> bool:
        """Send everything put so far now; True once all of it is acknowledged.

        ``checkpoint``: also wait until a published checkpoint covers it.
        """
        with self._cond:
            self._flushing += 1
            ticket = self._put
            self._cond.notify_all()
        try:
            return self.wait(ticket, timeout=timeout, checkpoint=checkpoint)
        finally:
            with self._cond:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> bool:
        """Stop accepting, deliver what is pending within ``timeout``, stop the thread.

        Returns True when nothing is left; what is left stays in the spool for the next start.
        """
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout)
        with self._cond:
            self._abandon = True
            self._cond.notify_all()
            remote = self._remote
        if self._thread.is_alive() and remote is not None:
            remote.close()  # cancels the RPC in flight
        self._thread.join(5.0)
        with self._cond:
            left = self._spool.pending_count
            if not self._closed:
                self._closed = True
                self._spool.close()
            self._drop_remote()
        return left == 0

    def _dead(self) -> bool:
        return self.error is not None or self._abandon or not self._thread.is_alive()

    # --- the sender thread ------------------------------------------------------------------

    def _main(self) -> None:
        try:
            while (wait_checkpoint := self._next_batch()) is not None:
                items = self._spool.peek(self.options.batch_size)
                self._spool.sync()
                size = self._deliver(items, wait_checkpoint)
                if size is None:
                    return
                self._acknowledge(len(items), size)
        except Exception as exc:  # keep an unexpected failure visible to every caller
            _log.exception("the ledger sender stopped")
            with self._cond:
                self.error = ClientError(f"the ledger sender stopped: {exc!r}")
        finally:
            with self._cond:
                self._cond.notify_all()

    def _next_batch(self) -> bool | None:
        """Wait until a batch is due; return whether to ask for a checkpoint (None: stop)."""
        with self._cond:
            while True:
                if self._abandon or self._closed:
                    return None
                pending = self._spool.pending_count
                if pending == 0 and self._stopping:
                    return None
                wait = self._due_in(pending)
                if wait <= 0:
                    batch_end = self._acked + min(pending, self.options.batch_size)
                    # what is put from now on waits its own batch_age; what this batch
                    # leaves behind is due at once
                    self._since = None if pending <= self.options.batch_size else 0.0
                    return self._acked < self._urgent <= batch_end
                self._cond.wait(wait if wait != float("inf") else None)

    def _due_in(self, pending: int) -> float:
        """Seconds until the next batch is due (0: now, inf: nothing pending)."""
        if pending == 0:
            return float("inf")
        if pending >= self.options.batch_size or self._stopping or self._flushing:
            return 0.0
        if self._urgent > self._acked:
            return 0.0
        since = self._since if self._since is not None else time.monotonic()
        return since + self.options.batch_age - time.monotonic()

    def _acknowledge(self, count: int, covering_size: int) -> None:
        with self._cond:
            if self._closed:
                return
            self._spool.ack(count)
            self._acked += count
            self.covering_size = max(self.covering_size, covering_size)
            self.problem = None
            self.batches += 1
            self.sent += count
            if not self._spool.pending_count:
                self._since = None
            elif self._since is None:
                self._since = 0.0
            self._cond.notify_all()

    def _deliver(self, items: list[SpoolItem], wait_checkpoint: bool) -> int | None:
        """Send one batch until the log acknowledges it: the tree size that covers it.

        None when stopped or refused.
        """
        digests = [item.digest for item in items]

        def send() -> int:
            if not wait_checkpoint:  # digests only: the packed call, nothing per digest
                return self._remote_log().append_packed(digests).covering_size
            outcome = self._remote_log().append(digests, wait_for_checkpoint=True)
            if len(outcome.results) != len(digests):
                _log.warning("log answered %d results for %d", len(outcome.results), len(digests))
                raise _ShortAnswer
            return max(r.index for r in outcome.results) + 1

        def retryable(exc: Exception) -> bool:
            if isinstance(exc, _ShortAnswer):
                return True
            return isinstance(exc, LedgerError) and (
                not self._abandon and self._retryable(exc, len(digests))
            )

        try:
            return retry(
                send,
                backoff=self.options.backoff,
                retry_on=retryable,
                hint=lambda exc: exc.retry_after if isinstance(exc, PushbackError) else None,
                on_retry=self._count_retry,
                sleep=self._sleep,
            )
        except (_Abandoned, LedgerError):  # stopped, or refused (``self.error`` says why)
            return None
        except ValueError:  # closed under us by grpc
            if self._abandon:
                return None
            raise

    def _count_retry(self, attempt: int, exc: Exception, delay: float) -> None:
        self.retries += 1
        self.hinted += isinstance(exc, PushbackError)

    def _retryable(self, exc: LedgerError, count: int) -> bool:
        kind = status_name(exc)
        if not is_retryable(exc):
            message = f"the log refused a batch of {count} records: {exc}"
            self._report(f"{message}; {spool_hint(self._spool, self._address)}")
            with self._cond:
                self.error = DeliveryError(self.problem or message, status=kind)
            return False
        if self.problem is None and not isinstance(exc, PushbackError):
            self._report(
                f"cannot deliver {count} records, retrying: {exc}; "
                f"{spool_hint(self._spool, self._address)}"
            )
        else:
            _log.info("append of %d records failed (%s: %s); retrying", count, kind, exc)
        if not isinstance(exc, PushbackError):
            with self._cond:
                self._drop_remote()
        return True

    def _report(self, message: str) -> None:
        """Say at once why delivery fails (once per streak of failures)."""
        with self._cond:
            self.problem = message
        _log.warning("%s", message)
        warnings.warn(message, DeliveryWarning, stacklevel=2)

    def _sleep(self, delay: float) -> None:
        """Wait ``delay`` seconds; ``_Abandoned`` when the client is abandoned meanwhile."""
        deadline = time.monotonic() + delay
        with self._cond:
            self._cond.wait_for(lambda: self._abandon or time.monotonic() >= deadline, delay)
            if self._abandon:
                raise _Abandoned

    def _remote_log(self) -> RemoteLog:
        with self._cond:
            if self._abandon:
                raise ClientClosedError("the ledger client is closed")
            if self._remote is None:
                self._remote = self._connect()
            return self._remote

    def _drop_remote(self) -> None:
        if self._remote is not None:
            self._remote.close()
            self._remote = None


class _ShortAnswer(Exception):
    """The log answered fewer results than digests sent (retried)."""


class _Abandoned(Exception):
    """The client was abandoned while the sender waited to retry."""
