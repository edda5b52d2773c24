"""The agent SDK: ``LedgerClient`` (threads) and ``AsyncLedgerClient`` (asyncio), plus the
implicit-context API (``ledger_run``, ``@decision``) re-exported from its modules.

docs/design.md "Who uses it": an agent appends a record per decision, never blocks on the log and
never loses a record. The client canonicalizes a record (RFC 8785), writes it to the spool
(``ledger_client.sdk.spool``: durable, crash-safe, format in its docstring) and returns; a
background sender (``ledger_client.sdk.sender``: batching, retries, backpressure, the overflow
policy) sends the digests to the log. Only digests go on the wire; the spool holds the record
with its commitments; clear values and salts (``Disclosure``) go to neither unless
``spool_disclosures=True``. Records left in the spool by a crashed or closed process are sent
on the next start with the same spool; the log deduplicates by digest, so each is logged once.

    client = LedgerClient("localhost:6962", spool="agent.spool")
    digest = client.submit(record)          # returns at once (unless the spool is full)
    receipt = client.append(record)         # waits for the covering checkpoint
    client.flush(5.0); client.close()       # close also runs at exit (atexit)

``close`` (and the atexit hook) waits up to ``close_timeout`` for delivery; what is still
pending stays in the spool for the next start.

Anchors: ``LedgerClient(..., wait_anchor=600)`` makes ``receipt``, ``receipts`` and ``append``
(and so a run's receipts file) return only receipts whose checkpoint carries an RFC 3161 anchor,
waiting up to that many seconds for the log's anchoring schedule; ``anchored_receipts`` does it
for one call. The client never asks the log to anchor (``AnchorNow`` is the operator's), and
``close`` never waits for anchors.

Witnesses: ``LedgerClient(..., witnesses=[VKEY, ...], min_witnesses=K)`` makes ``receipt`` and
``append`` return only receipts whose checkpoint carries K valid cosignatures of those witnesses
(c2sp.org/tlog-cosignature; ``receipt_fetch.witnessed_receipt``), waiting for them until the
timeout.

Agent identity: ``LedgerClient(..., agent_key=KEYFILE, chain=STATEFILE)`` signs every record
with the agent's Ed25519 key and numbers the agent's runs in a chain whose openings are
findable in the public log (``ledger_client.sdk.agent``; docs/formats.md "Agent chains").
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from ledger.core.backoff import DeadlinePassed, retry
from ledger.core.checkpoint import CosignatureVerifier
from ledger.core.errors import UnavailableError, is_retryable
from ledger.core.jcs import canonical_bytes
from ledger.core.limits import MAX_RECORD_BYTES
from ledger.records.commitments import (
    AnyDisclosure,
    Kept,
    check_disclosure_in,
    select_disclosures,
)
from ledger.records.decision import DecisionRecord
from ledger_client.receipts.receipt import Receipt
from ledger_client.remote.connection import Connection
from ledger_client.remote.log import RemoteLog
from ledger_client.remote.receipt_fetch import count_cosignatures, fetch_receipts, witnessed_receipt
from ledger_client.sdk.agent import AgentIdentity
from ledger_client.sdk.capture import Capture, content_digest, jsonable
from ledger_client.sdk.context import (
    ContextThreadPoolExecutor,
    Run,
    RunEntry,
    current_run,
    emit,
    ledger_run,
)
from ledger_client.sdk.decorators import UnrecordedDecisionWarning, decision, derived_from
from ledger_client.sdk.errors import (
    AnchorTimeoutError,
    ClientClosedError,
    ClientError,
    DeliveryError,
    DeliveryWarning,
    RecordTooLargeError,
    RunStateError,
    SpoolError,
    SpoolFullError,
)
from ledger_client.sdk.sender import Backoff, Sender, SenderOptions
from ledger_client.sdk.spool import FileSpool, MemorySpool, Spool, SpoolItem

__all__ = [
    "MEMORY_SPOOL_BYTES",
    "AnchorTimeoutError",
    "AsyncLedgerClient",
    "Backoff",
    "Capture",
    "ClientClosedError",
    "ClientError",
    "ContextThreadPoolExecutor",
    "DeliveryError",
    "DeliveryWarning",
    "LedgerClient",
    "RecordTooLargeError",
    "Run",
    "RunEntry",
    "RunStateError",
    "SenderOptions",
    "SpoolError",
    "SpoolFullError",
    "UnrecordedDecisionWarning",
    "content_digest",
    "current_run",
    "decision",
    "derived_from",
    "emit",
    "jsonable",
    "ledger_run",
]

MEMORY_SPOOL_BYTES = 64 << 20
_T = TypeVar("_T")


class LedgerClient:
    """A thread-safe client for agents: spool, background sender, receipts (module docstring).

    ``address``: ``host:port``, a ``Connection``, or None; the address (when None), the token
    and the TLS files come from ``LEDGER_SERVER``, ``LEDGER_TOKEN``, ``LEDGER_TLS_CA``,
    ``LEDGER_TLS_CERT`` and ``LEDGER_TLS_KEY`` unless a ``Connection`` gives them.
    ``spool``: the spool file (``None``: in memory, lost with the process, and at most
    ``MEMORY_SPOOL_BYTES`` pending). ``options``: batching, overflow and retry settings.
    ``prefer_anchored``: receipts on the earliest anchored checkpoint when there is one.
    ``witnesses`` / ``min_witnesses``: receipts only on checkpoints cosigned by that many of
    those witness keys (default: all of them when any is given).
    ``wait_anchor``: seconds to wait for an anchored checkpoint before a receipt is returned
    (None: receipts as soon as a checkpoint covers the record; module docstring).
    ``connect``: builds the ``RemoteLog`` (tests).
    ``agent_key``: the agent's private key file: every record is signed; ``chain``: the
    agent's chain state file (runs numbered, openings logged as beacons); ``chain_genesis``:
    the reason a new chain names when the state file is missing (``sdk.agent``).
    """

    def __init__(
        self,
        address: str | Connection | None = None,
        *,
        spool: str | Path | None = None,
        options: SenderOptions | None = None,
        spool_disclosures: bool = False,
        prefer_anchored: bool = True,
        rpc_timeout: float = 30.0,
        close_timeout: float = 10.0,
        register_atexit: bool = True,
        connect: Callable[[], RemoteLog] | None = None,
        witnesses: Sequence[str] = (),
        min_witnesses: int | None = None,
        wait_anchor: float | None = None,
        agent_key: str | Path | None = None,
        chain: str | Path | None = None,
        chain_genesis: str | None = None,
    ) -> None:
        if chain is not None and agent_key is None:
            raise ValueError("a chain needs an agent_key")
        self.agent = (
            None if agent_key is None else AgentIdentity(agent_key, chain, genesis=chain_genesis)
        )
        if wait_anchor is not None and wait_anchor < 0:
            raise ValueError(f"wait_anchor {wait_anchor} must be >= 0 seconds")
        self.wait_anchor = wait_anchor
        self.witnesses = [CosignatureVerifier.from_key_string(key) for key in witnesses]
        self.min_witnesses = len(self.witnesses) if min_witnesses is None else min_witnesses
        if not 0 <= self.min_witnesses <= len(self.witnesses):
            raise ValueError(f"min_witnesses {min_witnesses} needs 0..{len(self.witnesses)}")
        connection = address if isinstance(address, Connection) else Connection.resolve(address)
        self.address = connection.address
        self.options = options or SenderOptions()
        self.spool_disclosures = spool_disclosures
        self.prefer_anchored = prefer_anchored
        self.close_timeout = close_timeout
        self._connect = connect or (lambda: RemoteLog(connection, timeout=rpc_timeout))
        if spool is None:  # the backlog would be in memory: keep it small
            limit = min(self.options.max_pending_bytes, MEMORY_SPOOL_BYTES)
            self.options = replace(self.options, max_pending_bytes=limit)
        store: Spool = MemorySpool() if spool is None else FileSpool(spool)
        self.sender = Sender(store, self._connect, self.options, address=self.address)
        self._remote: RemoteLog | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._atexit = register_atexit
        if register_atexit:
            atexit.register(self._at_exit)

    # --- sending ----------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Records spooled and not yet acknowledged by the log."""
        return self.sender.pending

    def seal(self, record: DecisionRecord) -> DecisionRecord:
        """``record`` signed by the agent key (a run's first record also opens the run in the
        agent's chain, its beacons spooled first); unchanged without ``agent_key``."""
        if self.agent is None or record.signature is not None:
            return record
        return self.agent.seal(record, self._spool_beacon)

    def _spool_beacon(self, digest: bytes) -> None:
        self.sender.put(SpoolItem(digest, b""))

    def _item(self, record: DecisionRecord, disclosures: Sequence[Kept]) -> SpoolItem:
        record = self.seal(record)
        record_json = record.to_json().encode("utf-8")
        _check_size("record", record_json)
        if disclosures:
            _check_size("its disclosures", canonical_bytes([d.to_json_obj() for d in disclosures]))
            obj = record.to_json_obj()
            for disclosure in disclosures:
                check_disclosure_in(obj, disclosure)
        kept = None
        if self.spool_disclosures and disclosures:
            kept = canonical_bytes([d.to_json_obj() for d in disclosures])
        return SpoolItem(hashlib.sha256(record_json).digest(), record_json, kept)

    def submit(
        self, record: DecisionRecord, *, disclosures: Sequence[Kept] = (), block: bool = True
    ) -> bytes:
        """Spool ``record`` for sending and return its digest at once.

        ``disclosures`` are checked against the record, and spooled only with
        ``spool_disclosures``. When the spool is full: the overflow policy (``block=False``
        raises ``SpoolFullError`` instead of waiting).
        """
        item = self._item(record, disclosures)
        self.sender.put(item, block=block)
        return item.digest

    def append(
        self,
        record: DecisionRecord,
        *,
        disclosures: Sequence[Kept] = (),
        timeout: float | None = 30.0,
    ) -> Receipt:
        """Spool ``record``, have it sent now, wait for the covering checkpoint: its receipt.

        ``TimeoutError`` after ``timeout`` seconds (the record stays spooled and is sent).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        item = self._item(record, disclosures)
        ticket = self.sender.put(item)
        if not self.sender.wait(ticket, timeout=_left(deadline), checkpoint=True):
            problem = self.sender.problem
            raise TimeoutError(
                f"record {item.digest.hex()} not acknowledged in {timeout} s"
                + (f": {problem}" if problem else " (it stays spooled and is sent)")
            )
        left = _left(deadline)
        return self.receipt(
            item.digest,
            record=record,
            disclosures=select_disclosures([d.field_path for d in disclosures], disclosures)[0],
            timeout=30.0 if left is None else left,
        )

    def flush(self, timeout: float | None = None, *, checkpoint: bool = False) -> bool:
        """Send everything spooled so far now; True once the log has acknowledged all of it.

        ``checkpoint``: and once a published checkpoint covers it (receipts can be fetched).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.sender.flush(timeout, checkpoint=checkpoint):
            return False
        return not checkpoint or self._covered(self.sender.covering_size, deadline)

    def _covered(self, size: int, deadline: float | None) -> bool:
        """Poll the latest checkpoint until it has ``size`` entries (False past ``deadline``)."""

        def covering() -> bool:
            if self._remote_log().checkpoint().size < size:
                raise _NotYet
            return True

        try:
            return self._retrying(covering, deadline)
        except TimeoutError:
            return False

    def _retrying(self, call: Callable[[], _T], deadline: float | None) -> _T:
        """``call`` until it succeeds, retrying what ``is_retryable`` allows (the one retry rule)
        with backoff; a fresh channel after UNAVAILABLE. ``TimeoutError`` past ``deadline``."""

        def retryable(exc: Exception) -> bool:
            if isinstance(exc, _NotYet):
                return True
            if isinstance(exc, UnavailableError):
                self._drop_remote()
            return is_retryable(exc)

        try:
            return retry(call, backoff=self.options.backoff, retry_on=retryable, deadline=deadline)
        except DeadlinePassed:
            raise TimeoutError("the log did not answer in time") from None

    # --- receipts ---------------------------------------------------------------------------

    def _remote_log(self) -> RemoteLog:
        with self._lock:
            if self._closed:
                raise ClientClosedError("the ledger client is closed")
            if self._remote is None:
                self._remote = self._connect()
            return self._remote

    def _drop_remote(self) -> None:
        with self._lock:
            if self._remote is not None:
                self._remote.close()
                self._remote = None

    def receipt(
        self,
        digest: bytes,
        *,
        record: DecisionRecord | None = None,
        disclosures: Sequence[AnyDisclosure] = (),
        timeout: float = 30.0,
    ) -> Receipt:
        """The receipt of a logged record (``fetch_receipt``), retrying until a checkpoint
        covers it or ``timeout`` passes (``TimeoutError``)."""
        (receipt,) = self.receipts([digest], timeout=timeout)
        return replace(receipt, record=record, disclosures=tuple(disclosures))

    def receipts(self, digests: Sequence[bytes], *, timeout: float = 30.0) -> list[Receipt]:
        """Receipts of many logged records in a few round trips (``fetch_receipts``), retrying
        until a checkpoint covers them all or ``timeout`` passes (``TimeoutError``). With
        ``wait_anchor``: ``anchored_receipts`` for up to the longer of the two."""
        if self.wait_anchor is not None:
            return self.anchored_receipts(digests, timeout=max(timeout, self.wait_anchor))
        return self._receipts(digests, timeout=timeout, anchored=False)

    def anchored_receipts(
        self, digests: Sequence[bytes], *, timeout: float = 600.0
    ) -> list[Receipt]:
        """Receipts on a checkpoint that carries an RFC 3161 anchor, waiting up to ``timeout``
        seconds for the log's anchoring schedule (never asking it to anchor now);
        ``TimeoutError`` when no anchored checkpoint covers them by then."""
        return self._receipts(digests, timeout=timeout, anchored=True)

    def _receipts(
        self, digests: Sequence[bytes], *, timeout: float, anchored: bool
    ) -> list[Receipt]:
        deadline = time.monotonic() + timeout

        def fetch() -> list[Receipt]:
            found = fetch_witnessed()
            if anchored and not all(r.anchors for r in found):
                raise _NotYet
            return found

        def fetch_witnessed() -> list[Receipt]:
            remote = self._remote_log()
            found = fetch_receipts(remote, digests, prefer_anchored=self.prefer_anchored)
            if self.min_witnesses == 0:
                return found
            # All share one checkpoint: find a cosigned one for the first, then fetch them all
            # at its size (the log serves each size's note with the cosignatures it has).
            first = witnessed_receipt(remote, found[0], self.witnesses, self.min_witnesses)
            if first is None:
                raise _NotYet
            if first.tree_size != found[0].tree_size:
                found = fetch_receipts(remote, digests, tree_size=first.tree_size)
            if count_cosignatures(found[0].checkpoint, self.witnesses) < self.min_witnesses:
                raise _NotYet
            return found

        try:
            return self._retrying(fetch, deadline)
        except TimeoutError:
            quorum = f" cosigned by {self.min_witnesses} witness(es)" if self.min_witnesses else ""
            anchor = " on an anchored checkpoint" if anchored else ""
            raise TimeoutError(
                f"no receipts{quorum}{anchor} for {len(digests)} records within {timeout} s"
            ) from None

    # --- closing ----------------------------------------------------------------------------

    def close(self, timeout: float | None = None) -> bool:
        """Deliver what is pending (up to ``timeout``, default ``close_timeout``) and stop.

        True when nothing is left; otherwise the rest stays in the spool. Idempotent.
        """
        with self._lock:
            if self._closed:
                return self.sender.pending == 0
            self._closed = True
            remote, self._remote = self._remote, None
        if self._atexit:
            atexit.unregister(self._at_exit)
        if remote is not None:
            remote.close()
        return self.sender.close(self.close_timeout if timeout is None else timeout)

    def _at_exit(self) -> None:
        self.close()

    def __enter__(self) -> LedgerClient:
        return self

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _check_size(what: str, data: bytes) -> None:
    """Refuse what no verifier reads: the one size limit (docs/formats.md "Size limit")."""
    if len(data) > MAX_RECORD_BYTES:
        raise RecordTooLargeError(
            f"{what}: {len(data)} bytes (RFC 8785) is over the record size limit of "
            f"{MAX_RECORD_BYTES} bytes (MAX_RECORD_BYTES): keep large values out of the record "
            "(capture='digest' or 'commit', or record a digest of the content)"
        )


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class AsyncLedgerClient:
    """``LedgerClient`` for asyncio: the same client (``sync``), with awaitable calls.

    ``submit`` returns at once unless the spool is full and the policy is ``"block"``; then it
    waits in a worker thread, never blocking the event loop. Records emitted through
    ``ledger_run``/``@decision`` use ``sync.submit`` directly (so steps stay in order).
    """

    def __init__(
        self, address: str | Connection | LedgerClient | None = None, **kwargs: Any
    ) -> None:
        """``address`` and keyword arguments as for ``LedgerClient``, or a client to wrap."""
        if isinstance(address, LedgerClient):
            if kwargs:
                raise TypeError("options go to the wrapped LedgerClient, not here")
            self.sync = address
        else:
            self.sync = LedgerClient(address, **kwargs)

    @property
    def pending(self) -> int:
        return self.sync.pending

    async def submit(self, record: DecisionRecord, *, disclosures: Sequence[Kept] = ()) -> bytes:
        """Spool ``record``; its digest (see ``LedgerClient.submit``)."""
        try:
            return self.sync.submit(record, disclosures=disclosures, block=False)
        except SpoolFullError:
            if self.sync.options.overflow == "raise":
                raise
        return await asyncio.to_thread(self.sync.submit, record, disclosures=disclosures)

    async def append(
        self,
        record: DecisionRecord,
        *,
        disclosures: Sequence[Kept] = (),
        timeout: float | None = 30.0,
    ) -> Receipt:
        """Spool, send now, and return the receipt (see ``LedgerClient.append``)."""
        return await asyncio.to_thread(
            self.sync.append, record, disclosures=disclosures, timeout=timeout
        )

    async def receipt(
        self,
        digest: bytes,
        *,
        record: DecisionRecord | None = None,
        disclosures: Sequence[AnyDisclosure] = (),
        timeout: float = 30.0,
    ) -> Receipt:
        """See ``LedgerClient.receipt``."""
        return await asyncio.to_thread(
            self.sync.receipt, digest, record=record, disclosures=disclosures, timeout=timeout
        )

    async def receipts(self, digests: Sequence[bytes], *, timeout: float = 30.0) -> list[Receipt]:
        """See ``LedgerClient.receipts``."""
        return await asyncio.to_thread(self.sync.receipts, digests, timeout=timeout)

    async def anchored_receipts(
        self, digests: Sequence[bytes], *, timeout: float = 600.0
    ) -> list[Receipt]:
        """See ``LedgerClient.anchored_receipts``."""
        return await asyncio.to_thread(self.sync.anchored_receipts, digests, timeout=timeout)

    async def flush(self, timeout: float | None = None, *, checkpoint: bool = False) -> bool:
        """See ``LedgerClient.flush``."""
        return await asyncio.to_thread(self.sync.flush, timeout, checkpoint=checkpoint)

    async def close(self, timeout: float | None = None) -> bool:
        """See ``LedgerClient.close``."""
        return await asyncio.to_thread(self.sync.close, timeout)

    async def __aenter__(self) -> AsyncLedgerClient:
        return self

    async def __aexit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class _NotYet(Exception):
    """The condition polled for does not hold yet (retry)."""
