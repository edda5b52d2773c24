"""A small synchronous gRPC client for ``ledger.v1.LedgerService`` (proto/ledger/v1/ledger.proto).

The only client-side module that imports grpc; conversions and the status table live in
``ledger.api.wire``, shared with the server. Callers see the plain types of ``ledger.core.types``
and the ledger's own errors: every gRPC failure is raised as the ``ledger.core.errors`` class its
status maps to (``UnavailableError``, ``PushbackError`` with its ``retry_after``, ...), whose
``retryable`` is the one retry rule. Credentials (a bearer token in the ``authorization`` metadata
of every call) and TLS (server CA, client certificate for mTLS) come from a ``Connection``, by
default resolved from ``LEDGER_SERVER``, ``LEDGER_TOKEN`` and ``LEDGER_TLS_*``. Import it lazily
from anything the offline verifier loads.

Failures explain themselves (``explain``): a refused connection, a plaintext client against a
TLS server (grpc says "Socket closed"), a TLS client against a plaintext
server (an SSL handshake error) and a refused credential get a hint naming the option to fix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import grpc

from ledger.api import wire
from ledger.core.errors import LedgerError, RemoteError, ServiceError
from ledger.core.limits import HASH_SIZE, MAX_MESSAGE_BYTES
from ledger.core.packed import PackedResult
from ledger.core.types import (
    Anchor,
    AppendOutcome,
    ConsistencyProof,
    Entry,
    InclusionProof,
    PublishedCheckpoint,
    ReceiptBundle,
    StreamAck,
)
from ledger.v1 import ledger_pb2 as pb
from ledger.v1 import ledger_pb2_grpc as pb_grpc
from ledger_client.remote.connection import Connection

__all__ = ["AppendOutcome", "RemoteLog", "StreamAck", "explain", "status_name", "translate"]

_T = TypeVar("_T")


_REFUSED = ("connection refused", "connect: refused")
# "failed to connect to all addresses" starts every connect failure: not a sign of TLS
_PLAIN_AT_TLS = ("socket closed", "connection reset", "end of stream")
_TLS_AT_PLAIN = ("ssl", "handshake", "wrong_version_number", "wrong version number", "tsi_")


def explain(code: grpc.StatusCode, details: str, *, tls: bool | None) -> str | None:
    """A hint for a failure whose grpc details do not say what to do, else None.

    ``tls``: whether the client spoke TLS (None: unknown, no TLS hint).
    """
    text = details.lower()
    if code == grpc.StatusCode.UNAVAILABLE:
        if any(word in text for word in _REFUSED):
            return "connection refused: no server listens there (wrong port, or not running?)"
        if tls is True and any(word in text for word in _TLS_AT_PLAIN + _PLAIN_AT_TLS):
            return (
                "TLS handshake failed: the server may not be using TLS (drop --tls-ca / "
                "LEDGER_TLS_CA), or wants a client certificate (--tls-cert/--tls-key), "
                "or does not trust this one"
            )
        if tls is False and any(word in text for word in _PLAIN_AT_TLS):
            return "the server may be using TLS: pass --tls-ca / LEDGER_TLS_CA"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return "authentication failed: check --token / LEDGER_TOKEN or the client certificate"
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return "this identity lacks the scope the call needs (token or certificate scopes)"
    return None


def translate(exc: grpc.RpcError, address: str, *, tls: bool | None = None) -> ServiceError:
    """The ledger error for a failed call to ``address``: its class from the status, a message
    naming the server, the status, the details and ``explain``'s hint, and the retry hint."""
    code = exc.code() if callable(getattr(exc, "code", None)) else grpc.StatusCode.UNKNOWN
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    trailing = exc.trailing_metadata() if callable(getattr(exc, "trailing_metadata", None)) else ()
    pairs = [(item.key, item.value) for item in trailing or ()]
    hint = explain(code, details or "", tls=tls)
    message = f"{address}: {code.name}: {details}" + (f" ({hint})" if hint else "")
    return wire.error_from_status(code, message, pairs)


def status_name(exc: LedgerError) -> str:
    """The gRPC status name a ledger error travels as (``INVALID_ARGUMENT``, ...)."""
    if isinstance(exc, RemoteError):
        return exc.status
    return wire.status_of(exc).name


class RemoteLog:
    """Blocking calls to a log server at ``address`` (``host:port``)."""

    def __init__(self, address: str | Connection | None = None, *, timeout: float = 30.0) -> None:
        """``address``: ``host:port`` (token and TLS from the environment, see
        ``ledger_client.remote.connection``), a ``Connection``, or None for all of it from there.

        Several servers (an active writer and its standbys, ``docs/operating.md`` "Primary mode
        and a standby (two machines and a bucket)") are given separated by commas: a call that
        fails UNAVAILABLE (nothing listening, a writer that stopped, a bucket away) moves to the
        next one and is tried there, each server at most once per call; an append re-sent so
        keeps its index (the dedup index), and a call every server refused raises the last
        error."""
        conn = address if isinstance(address, Connection) else Connection.resolve(address)
        self._conn = conn
        self.addresses = [a.strip() for a in conn.address.split(",") if a.strip()]
        self._at = 0
        self.address = self.addresses[0] if self.addresses else conn.address
        self.tls = conn.tls
        self.timeout = timeout
        self._md = () if conn.token is None else (("authorization", f"Bearer {conn.token}"),)
        self._connect()

    def _connect(self) -> None:
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ]
        if self._conn.tls:
            ca, key, chain = self._conn.read_tls()
            creds = grpc.ssl_channel_credentials(ca, key, chain)
            self._channel = grpc.secure_channel(self.address, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(self.address, options=options)
        self._stub = pb_grpc.LedgerServiceStub(self._channel)  # type: ignore[no-untyped-call]

    def _next_server(self) -> None:
        self._channel.close()
        self._at = (self._at + 1) % len(self.addresses)
        self.address = self.addresses[self._at]
        self._connect()

    @property
    def _opts(self) -> dict[str, Any]:
        return {"timeout": self.timeout, "metadata": self._md}

    def _call(self, fn: Callable[[], _T]) -> _T:
        for tries_left in range(len(self.addresses) - 1, -1, -1):
            try:
                return fn()
            except grpc.RpcError as exc:
                error = translate(exc, self.address, tls=self.tls)
                code = exc.code() if callable(getattr(exc, "code", None)) else None
                if tries_left == 0 or code != grpc.StatusCode.UNAVAILABLE:
                    raise error from None
                self._next_server()
        raise AssertionError("unreachable")  # the loop returns or raises

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def __enter__(self) -> RemoteLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(
        self,
        digests: Sequence[bytes],
        *,
        metadata: Sequence[bytes] | None = None,
        wait_for_checkpoint: bool = False,
        include_proofs: bool = False,
    ) -> AppendOutcome:
        """Append record digests; optionally wait for the covering checkpoint (and proofs)."""
        request = pb.AppendRecordsRequest(
            items=wire.items_to_pb(digests, metadata),
            wait_for_checkpoint=wait_for_checkpoint,
            include_proofs=include_proofs,
        )
        response = self._call(lambda: self._stub.AppendRecords(request, **self._opts))
        with_proofs = wait_for_checkpoint and include_proofs
        return wire.append_outcome_from_pb(response, with_proofs=with_proofs)

    def append_packed(self, digests: bytes | Sequence[bytes]) -> PackedResult:
        """Append record digests without metadata in one packed call (``AppendPacked``): N x 32
        bytes, or the digests to concatenate. ``ledger.core.packed.to_results`` expands the
        answer into per-digest results."""
        packed = digests if isinstance(digests, bytes) else b"".join(digests)
        request = pb.AppendPackedRequest(record_digests=packed)
        response = self._call(lambda: self._stub.AppendPacked(request, **self._opts))
        return wire.packed_from_pb(response, len(packed) // HASH_SIZE)

    def stream_append(self, batches: Iterable[Sequence[bytes]]) -> Iterator[StreamAck]:
        """Stream batches of digests; yield the server's durable-group acks."""
        requests = (pb.StreamAppendRequest(items=wire.items_to_pb(b)) for b in batches)
        try:
            for ack in self._stub.StreamAppend(requests, **self._opts):
                yield wire.stream_ack_from_pb(ack)
        except grpc.RpcError as exc:
            raise translate(exc, self.address, tls=self.tls) from None

    def checkpoint(self, size: int = 0) -> PublishedCheckpoint:
        """The latest checkpoint, or the one published for ``size``."""
        request = pb.GetCheckpointRequest(size=size)
        m = self._call(lambda: self._stub.GetCheckpoint(request, **self._opts))
        return wire.checkpoint_from_pb(m)

    def inclusion_proof(
        self, *, index: int | None = None, record_digest: bytes | None = None, tree_size: int = 0
    ) -> InclusionProof:
        """Inclusion proof by index or record digest at ``tree_size`` (0: latest)."""
        request = pb.GetInclusionProofRequest(tree_size=tree_size)
        if record_digest is not None:
            request.record_digest = record_digest
        elif index is not None:
            request.index = index
        m = self._call(lambda: self._stub.GetInclusionProof(request, **self._opts))
        return wire.inclusion_from_pb(m)

    def inclusion_proofs(
        self, indexes: Sequence[int] = (), record_digests: Sequence[bytes] = (), tree_size: int = 0
    ) -> list[InclusionProof]:
        """Batched inclusion proofs at one tree size."""
        request = pb.GetInclusionProofsRequest(
            indexes=list(indexes), record_digests=list(record_digests), tree_size=tree_size
        )
        m = self._call(lambda: self._stub.GetInclusionProofs(request, **self._opts))
        return [wire.inclusion_from_pb(p) for p in m.proofs]

    def consistency_proof(self, size1: int, size2: int = 0) -> ConsistencyProof:
        """Consistency proof from ``size1`` to ``size2`` (0: latest)."""
        request = pb.GetConsistencyProofRequest(size1=size1, size2=size2)
        m = self._call(lambda: self._stub.GetConsistencyProof(request, **self._opts))
        return wire.consistency_from_pb(m)

    def entries(self, start: int, count: int) -> list[Entry]:
        """A page of published entries."""
        request = pb.GetEntriesRequest(start=start, count=count)
        m = self._call(lambda: self._stub.GetEntries(request, **self._opts))
        return [wire.entry_from_pb(e) for e in m.entries]

    def entry(self, record_digest: bytes) -> Entry:
        """The entry of a record digest."""
        request = pb.GetEntryRequest(record_digest=record_digest)
        return wire.entry_from_pb(self._call(lambda: self._stub.GetEntry(request, **self._opts)))

    def receipts(
        self, record_digests: Sequence[bytes], *, tree_size: int = 0, prefer_anchored: bool = True
    ) -> ReceiptBundle:
        """One checkpoint, its anchors and an inclusion proof per digest, in one call."""
        request = pb.GetReceiptsRequest(
            record_digests=list(record_digests),
            tree_size=tree_size,
            prefer_anchored=prefer_anchored,
        )
        m = self._call(lambda: self._stub.GetReceipts(request, **self._opts))
        return wire.receipts_from_pb(m)

    def anchors(self, size: int = 0) -> tuple[PublishedCheckpoint, list[Anchor]]:
        """The checkpoint of ``size`` (0: newest anchored) and its RFC 3161 anchors."""
        request = pb.GetAnchorsRequest(size=size)
        m = self._call(lambda: self._stub.GetAnchors(request, **self._opts))
        return wire.checkpoint_from_pb(m.checkpoint), [wire.anchor_from_pb(a) for a in m.anchors]

    def anchored_sizes(self, limit: int = 0) -> list[int]:
        """Anchored checkpoint sizes, newest first."""
        request = pb.ListAnchoredSizesRequest(limit=limit)
        m = self._call(lambda: self._stub.ListAnchoredSizes(request, **self._opts))
        return list(m.sizes)

    def anchor_now(self) -> tuple[int, list[Anchor], list[str]]:
        """Ask the server to anchor its latest checkpoint now (an admin call)."""
        m = self._call(
            lambda: self._stub.AnchorNow(
                pb.AnchorNowRequest(), timeout=self.timeout, metadata=self._md
            )
        )
        outcome = wire.anchor_outcome_from_pb(m)
        return outcome.size, outcome.anchors, outcome.failures

    def backup(self, out_dir: str) -> tuple[str, int, int]:
        """Ask the server for a consistent backup into ``out_dir`` on its host (an admin call);
        return (where, tree size, newest checkpoint size)."""
        request = pb.BackupRequest(out_dir=out_dir)
        m = self._call(lambda: self._stub.Backup(request, **self._opts))
        return m.out_dir, m.tree_size, m.checkpoint_size
