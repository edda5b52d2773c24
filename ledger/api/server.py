"""gRPC adapter for ``ledger.v1.LedgerService`` (proto/ledger/v1/ledger.proto).

Handlers only translate: requests through ``ledger.api.wire`` into core types, a call on the
``LogService`` (which runs reads on its reader threads, never on the event loop), and answers
back through ``ledger.api.wire``; errors become statuses through ``wire.status_of``. Health checking
(grpc.health.v1) and server reflection are registered so ``grpcurl`` works without the .proto.
"""

from __future__ import annotations

import asyncio
import ctypes
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, TypeVar

import grpc
from google.protobuf import message_factory
from google.protobuf.message import DecodeError
from grpc_health.v1 import health as grpc_health
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from ledger.api import wire
from ledger.api.auth import ADMIN_METHODS, APPEND_METHODS
from ledger.api.budget import DEFAULT_BUDGET_BYTES, ByteBudget
from ledger.api.interceptor import WrapOnce
from ledger.api.streams import (
    DEFAULT_IDLE_S,
    DEFAULT_LINGER_S,
    LINGER_ITEMS,
    Group,
    ReadDeadline,
    StreamReader,
)
from ledger.core.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    LedgerError,
    PushbackError,
    ServiceError,
    UnavailableError,
)
from ledger.core.limits import (
    DEFAULT_ANCHORED_SIZES,
    HASH_SIZE,
    MAX_ANCHORED_SIZES,
    MAX_BATCH,
    MAX_MESSAGE_BYTES,
    MAX_PROOFS_PER_CALL,
    MAX_REQUEST_BYTES,
)
from ledger.core.types import (
    AnchorOutcome,
    AppendOutcome,
    BackupOutcome,
    InclusionProof,
)
from ledger.log.sequencer import validate_items
from ledger.log.service import LogService
from ledger.net.listener import CollapsingLogger
from ledger.v1 import ledger_pb2 as pb

__all__ = [
    "ConnectionLimits",
    "LedgerServicer",
    "ServerLimits",
    "connection_options",
    "create_server",
]

# Internal errors: the first of each kind with its traceback, then one line a minute per kind.
_internal = CollapsingLogger("ledger.server.internal", first_traceback=True)
_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")
Context = grpc.aio.ServicerContext[Any, Any]
Handler = Callable[[Any, _Req, Context], Awaitable[_Resp]]


# The append methods' requests may be large (up to max_request_bytes); every other request is
# a read or a small command, held to max_read_request_bytes.
_LARGE_REQUESTS = APPEND_METHODS
# Methods that change state: once done, their answer is sent even over the byte budget.
_WRITES = APPEND_METHODS | ADMIN_METHODS
MAX_READ_REQUEST_BYTES = 64 << 10
RESERVE_WAIT_S = 1.0  # how long a read waits for room in the budget before RESOURCE_EXHAUSTED
DEFAULT_STREAMS_PER_CONNECTION = 32  # B1: two processes of 32 callers, one channel each
DEFAULT_STREAM_WINDOW_BYTES = 16 << 10  # what a stream not being read may buffer in core
# Measured with tools/bench_read_burst.py (docs/benchmarks.md "Read bursts and the memory
# bound"), rounded up: what one open stream costs besides its window (call objects, metadata,
# the handler's task), and what one connection costs besides its streams (transport, HPACK
# tables, read buffers that grew for a large message).
STREAM_OVERHEAD_BYTES = 48 << 10
CONNECTION_OVERHEAD_BYTES = 1 << 20
# A message being read sits in core, then once more in Python, and the allocator keeps some
# slack: each byte of the budget stands for up to this many in the process (measured 2.4).
COPIES_PER_BUDGET_BYTE = 3
MMAP_THRESHOLD_BYTES = 256 << 10
_M_MMAP_THRESHOLD = -3  # glibc <malloc.h>


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerLimits:
    """What bounds the server's memory (docs/operating.md "Streams and memory").

    gRPC core buffers a whole message once a read of it is pending, so no read is issued before
    the byte budget holds ``max_request_bytes`` for it (``BoundedMemory``); until then a stream
    can buffer at most its HTTP/2 window (``stream_window_bytes``, no BDP probing). The budget
    then holds each request until it is answered and each serialized answer until it is sent.
    ``memory_bound`` adds it up."""

    max_request_bytes: int = MAX_REQUEST_BYTES
    max_read_request_bytes: int = MAX_READ_REQUEST_BYTES
    max_concurrent_rpcs: int = 0  # 0: no server-wide cap (grpc's limiter costs ~40% of B5)
    max_streams_per_connection: int = DEFAULT_STREAMS_PER_CONNECTION
    stream_window_bytes: int = DEFAULT_STREAM_WINDOW_BYTES
    idle_s: float = DEFAULT_IDLE_S
    stream_linger_s: float = DEFAULT_LINGER_S  # ``ledger.api.streams``: 0 commits at once
    budget: ByteBudget = field(default_factory=lambda: ByteBudget(DEFAULT_BUDGET_BYTES))

    def core_options(self) -> list[tuple[str, int]]:
        """gRPC core channel arguments."""
        return [*_memory_options(self), ("grpc.so_reuseport", 0)]

    def memory_bound(self, connections: int) -> int:
        """Bytes the server may hold for requests and answers beyond its idle RSS with
        ``connections`` open (the connection cap): the budget (reads in progress, requests,
        answers being sent) twice over, plus per connection its overhead and every stream's
        window and overhead."""
        per_stream = self.stream_window_bytes + STREAM_OVERHEAD_BYTES
        per_connection = CONNECTION_OVERHEAD_BYTES + self.max_streams_per_connection * per_stream
        return COPIES_PER_BUDGET_BYTE * self.budget.limit + connections * per_connection


def _return_large_buffers() -> None:
    """Have glibc's malloc map every block of 256 KiB or more on its own and unmap it when freed
    (``mallopt(M_MMAP_THRESHOLD)``; by default the threshold grows to the largest block freed, so
    megabyte messages land in heaps that never shrink and a second burst of large requests raises
    the peak again). Process-wide; nothing happens where the C library has no ``mallopt``."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    except (OSError, AttributeError):
        pass


def _memory_options(limits: ServerLimits) -> list[tuple[str, int]]:
    """The grpc core options behind ``ServerLimits.memory_bound``: one receive limit for the
    server (core has no per-method limit on the server side; ``max_read_request_bytes`` is
    enforced after the read), streams per connection and each stream's HTTP/2 window."""
    return [
        ("grpc.max_receive_message_length", limits.max_request_bytes),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_concurrent_streams", limits.max_streams_per_connection),
        ("grpc.http2.lookahead_bytes", limits.stream_window_bytes),
        # no BDP probing: a stream's window stays at stream_window_bytes instead of growing
        # to megabytes
        ("grpc.http2.bdp_probe", 0),
    ]


class BoundedMemory(WrapOnce):
    """Every read of a request message waits for room in the byte budget first (innermost
    interceptor, over every service: ledger, health, reflection).

    gRPC core buffers a whole message (up to ``max_request_bytes``) once a read of it is
    pending, and a unary handler's read is issued before Python sees the call; so unary methods
    are served as request-streaming ones that issue their single read only after the budget
    holds ``max_request_bytes`` (else RESOURCE_EXHAUSTED, nothing read). On arrival the hold
    shrinks to the message's size and lasts until the handler returns; a message over its
    method's limit (``max_read_request_bytes`` but for appends) is dropped before any handler
    holds it. The serialized answer is then held until the call is over (an answer that does
    not fit is refused, except a write's, which is sent and counted). Stream messages are
    reserved the same way while read; the stream's reader (``ledger.api.streams``) then holds
    what it keeps."""

    def __init__(self, limits: ServerLimits) -> None:
        self._budget = limits.budget
        self._reserve = limits.max_request_bytes
        self._read_limit = limits.max_read_request_bytes
        self._read_timeout_s = limits.idle_s
        super().__init__()

    def _wrap(self, method: str, handler: Any) -> Any:
        name = method.rpartition("/")[2]
        call = _Call(
            limit=self._reserve if name in _LARGE_REQUESTS else self._read_limit,
            decode=handler.request_deserializer or (lambda raw: raw),
            must_send=name in _WRITES,
        )
        if handler.unary_unary is not None:
            encode = handler.response_serializer or (lambda message: message)
            return grpc.stream_unary_rpc_method_handler(
                self._one_in(handler.unary_unary, call, encode)
            )
        if handler.unary_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                self._one_in_many_out(handler.unary_stream, call),
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                self._many_in_many_out(handler.stream_stream, call),
                response_serializer=handler.response_serializer,
            )
        return grpc.stream_unary_rpc_method_handler(
            self._many_in(handler.stream_unary, call),
            response_serializer=handler.response_serializer,
        )

    async def _read(
        self, context: Context, call: _Call, deadline: ReadDeadline | None = None
    ) -> tuple[Any, int]:
        """The next request message decoded and its size, or (None, 0) at the half-close.
        ``_reserve`` bytes are held while it is read, then its size (the caller gives that
        back). A message over
        ``call.limit`` is dropped before anything else refers to it (a handler's frame kept
        alive by the abort's traceback would keep it in memory). A read that takes longer than
        the read timeout ends the call: UNAVAILABLE, or with ``deadline`` (a stream's one timer,
        instead of one per message) ``UnavailableError`` from the stream's message source."""
        budget = self._budget
        if budget.held + self._reserve <= budget.limit:  # room: no coroutine to wait in
            budget.take(self._reserve, "a request read")
        else:
            try:
                await budget.reserve(self._reserve, "a request read", RESERVE_WAIT_S)
            except PushbackError as exc:
                context.set_trailing_metadata(wire.retry_trailer(exc))
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        try:
            if deadline is None:
                async with asyncio.timeout(self._read_timeout_s):  # no task per message
                    raw = await context.read()
            else:
                deadline.start()
                try:
                    raw = await context.read()
                except asyncio.CancelledError:
                    if (idle := deadline.expired()) is not None:
                        raise idle from None
                    raise
                finally:
                    deadline.stop()
        except TimeoutError:
            budget.give(self._reserve)
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                f"the request message did not arrive within {self._read_timeout_s:g} s",
            )
        except BaseException:
            budget.give(self._reserve)
            raise
        if raw is grpc.aio.EOF:  # type: ignore[attr-defined]
            budget.give(self._reserve)
            return None, 0
        size = len(raw)
        budget.give(self._reserve - size)
        if size > call.limit:
            del raw
            budget.give(size)
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"a request of {size} bytes is over this method's limit of {call.limit} bytes",
            )
        return call.decode(raw), size

    async def _single(self, context: Context, call: _Call) -> tuple[Any, int]:
        request, size = await self._read(context, call)
        if request is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message")
        return request, size

    def _one_in(self, behaviour: Any, call: _Call, encode: Any) -> Any:
        async def run(_requests: Any, context: Context) -> Any:
            request, held = await self._single(context, call)
            try:
                answer = encode(await behaviour(request, context))
            finally:
                self._budget.give(held)
            size = len(answer)
            if call.must_send:
                self._budget.force(size)  # the write is done: its answer is counted, never refused
            else:
                try:
                    self._budget.take(size, "an answer")
                except PushbackError as exc:
                    context.set_trailing_metadata(wire.retry_trailer(exc))
                    await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
            context.add_done_callback(lambda _: self._budget.give(size))  # type: ignore[arg-type]
            return answer

        return run

    def _one_in_many_out(self, behaviour: Any, call: _Call) -> Any:
        async def single(context: Context) -> Any:
            request, held = await self._single(context, call)
            self._budget.give(held)
            return request

        if inspect.iscoroutinefunction(behaviour):  # writes with context.write (health Watch)

            async def write(_requests: Any, context: Context) -> None:
                await behaviour(await single(context), context)

            return write

        async def run(_requests: Any, context: Context) -> AsyncIterator[Any]:
            async for answer in behaviour(await single(context), context):
                yield answer

        return run

    async def _messages(self, context: Context, call: _Call) -> AsyncIterator[Any]:
        """The request messages; no message within the read timeout -> ``UnavailableError``
        (a stream consumer ends in order on it; ``_many_in_many_out`` maps it to UNAVAILABLE)."""
        deadline = ReadDeadline(self._read_timeout_s)
        try:
            while True:
                request, size = await self._read(context, call, deadline)
                if request is None:
                    return
                self._budget.give(size)  # the consumer holds what it keeps
                yield request
        finally:
            deadline.close()

    def _many_in_many_out(self, behaviour: Any, call: _Call) -> Any:
        if inspect.iscoroutinefunction(behaviour):
            return self._many_in(behaviour, call)

        async def run(_requests: Any, context: Context) -> AsyncIterator[Any]:
            try:
                async for answer in behaviour(self._messages(context, call), context):
                    yield answer
            except UnavailableError as exc:  # an idle stream its handler did not end itself
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))

        return run

    def _many_in(self, behaviour: Any, call: _Call) -> Any:
        async def run(_requests: Any, context: Context) -> Any:
            try:
                return await behaviour(self._messages(context, call), context)
            except UnavailableError as exc:
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))

        return run


@dataclass(frozen=True, slots=True, kw_only=True)
class _Call:
    """One method's read rules."""

    limit: int
    decode: Callable[[bytes], Any]
    must_send: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionLimits:
    """How long a gRPC connection may live and how many there may be (grpc core channel
    arguments, ``connection_options``); limits per client address are a reverse proxy's job
    (grpc core has none). ``max_age_s = 0``: no age limit."""

    max_connections: int = 256
    idle_s: float = 300.0
    max_age_s: float = 3600.0
    age_grace_s: float = 300.0
    keepalive_s: float = 60.0
    keepalive_timeout_s: float = 20.0
    handshake_timeout_s: float = 10.0


def connection_options(limits: ConnectionLimits) -> list[tuple[str, int]]:
    """grpc core arguments for ``limits``: a connection with no call for ``idle_s`` and any
    connection older than ``max_age_s`` gets GOAWAY (its calls then have ``age_grace_s`` to
    finish), a peer silent for ``keepalive_timeout_s`` after a ping is dropped, a connection
    that has not completed its HTTP/2 (or TLS) handshake within ``handshake_timeout_s`` is
    closed, and past ``max_connections`` new connections are closed as they arrive."""

    def ms(seconds: float) -> int:
        return max(1, round(seconds * 1000))

    options = [
        ("grpc.max_allowed_incoming_connections", limits.max_connections),
        ("grpc.max_connection_idle_ms", ms(limits.idle_s)),
        ("grpc.keepalive_time_ms", ms(limits.keepalive_s)),
        ("grpc.keepalive_timeout_ms", ms(limits.keepalive_timeout_s)),
        ("grpc.server_handshake_timeout_ms", ms(limits.handshake_timeout_s)),
    ]
    if limits.max_age_s > 0:
        options.append(("grpc.max_connection_age_ms", ms(limits.max_age_s)))
        options.append(("grpc.max_connection_age_grace_ms", ms(limits.age_grace_s)))
    return options


def _guarded(fn: Handler[_Req, _Resp]) -> Handler[_Req, _Resp]:
    """Turn ledger errors into statuses with their message; never leak a traceback."""

    @wraps(fn)
    async def wrapper(self: Any, request: _Req, context: Context) -> _Resp:
        try:
            return await fn(self, request, context)
        except LedgerError as exc:
            context.set_trailing_metadata(wire.retry_trailer(exc))
            await context.abort(wire.status_of(exc), str(exc))
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception:
            _internal.exception("internal error in %s", fn.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error (see server log)")
        raise AssertionError("unreachable")  # abort() always raises

    return wrapper


def _inclusions_to_pb(proofs: Sequence[InclusionProof]) -> pb.GetInclusionProofsResponse:
    response = pb.GetInclusionProofsResponse(tree_size=proofs[0].tree_size)
    for p in proofs:
        wire.fill_inclusion(response.proofs.add(), p)
    return response


def _digest(value: bytes, field: str) -> bytes:
    if len(value) != HASH_SIZE:
        raise InvalidArgumentError(f"{field}: {len(value)} bytes, want {HASH_SIZE}")
    return value


class LedgerServicer:
    """Implements ``ledger.v1.LedgerService`` over a ``LogService`` (and nothing else)."""

    def __init__(
        self,
        service: LogService,
        *,
        anchor_now: Callable[[], Awaitable[AnchorOutcome]] | None = None,
        backup: Callable[[str], Awaitable[BackupOutcome]] | None = None,
        limits: ServerLimits | None = None,
    ) -> None:
        self._service = service
        self._anchor_now = anchor_now
        self._backup = backup
        self._limits = limits or ServerLimits()

    @_guarded
    async def AppendRecords(
        self, request: pb.AppendRecordsRequest, context: Context
    ) -> pb.AppendRecordsResponse:
        results = await self._service.append(wire.items_from_pb(request.items))
        if not request.wait_for_checkpoint:
            return wire.append_outcome_to_pb(AppendOutcome(results=results))
        cp = await self._service.wait_for_checkpoint(max(r.index for r in results) + 1)
        proofs = None
        if request.include_proofs:
            found = await self._service.inclusion_proofs([r.index for r in results], (), cp.size)
            proofs = [p.hashes for p in found]
        return wire.append_outcome_to_pb(
            AppendOutcome(results=results, checkpoint=cp, proofs=proofs)
        )

    @_guarded
    async def AppendPacked(
        self, request: pb.AppendPackedRequest, context: Context
    ) -> pb.AppendPackedResponse:
        return wire.packed_to_pb(await self._service.append_packed(request.record_digests))

    async def StreamAppend(
        self, raw_messages: AsyncIterator[bytes], context: Context
    ) -> AsyncIterator[pb.StreamAppendAck]:
        """Append groups as they come; acknowledge each once durable. A malformed message, an
        idle stream or an exhausted budget ends the stream with its status, after the
        acknowledgements of everything committed before it (``ledger.api.streams``)."""
        reader = StreamReader(raw_messages, _stream_items, budget=self._limits.budget)
        read_task = asyncio.create_task(reader.fill())
        position = 0
        loop = asyncio.get_running_loop()
        linger = self._limits.stream_linger_s
        committed = -linger  # when the last commit of this stream ended
        try:
            while True:
                await reader.settle(LINGER_ITEMS, committed + linger - loop.time())
                if (group := await reader.take()) is None:
                    break
                try:
                    if isinstance(group, bytes):  # digests only: no per-item objects
                        packed = await self._service.append_packed(group)
                        ack = wire.stream_packed_ack_to_pb(position, packed)
                    else:
                        ack = wire.stream_ack_to_pb(position, await self._service.append(group))
                except LedgerError as exc:
                    context.set_trailing_metadata(wire.retry_trailer(exc))
                    await context.abort(wire.status_of(exc), f"stream position {position}: {exc}")
                committed = loop.time()
                yield ack
                position += ack.count
            if (error := reader.error) is not None:
                context.set_trailing_metadata(wire.retry_trailer(error))
                await context.abort(
                    wire.status_of(error),
                    f"stream position {position} (every item before it is acknowledged): {error}",
                )
        finally:
            read_task.cancel()
            reader.close()

    @_guarded
    async def GetCheckpoint(
        self, request: pb.GetCheckpointRequest, context: Context
    ) -> pb.Checkpoint:
        return wire.checkpoint_to_pb(await self._service.checkpoint(request.size))

    @_guarded
    async def GetInclusionProof(
        self, request: pb.GetInclusionProofRequest, context: Context
    ) -> pb.InclusionProof:
        which = request.WhichOneof("leaf")
        if which is None:
            raise InvalidArgumentError("leaf: set index or record_digest")
        if which == "record_digest":
            digest = _digest(request.record_digest, "record_digest")
            proofs = await self._service.inclusion_proofs((), [digest], request.tree_size)
        else:
            proofs = await self._service.inclusion_proofs([request.index], (), request.tree_size)
        return wire.inclusion_to_pb(proofs[0])

    @_guarded
    async def GetInclusionProofs(
        self, request: pb.GetInclusionProofsRequest, context: Context
    ) -> pb.GetInclusionProofsResponse:
        total = len(request.indexes) + len(request.record_digests)
        if not 0 < total <= MAX_PROOFS_PER_CALL:
            raise InvalidArgumentError(
                f"indexes + record_digests: {total} requested, want 1..{MAX_PROOFS_PER_CALL}"
            )
        digests = [_digest(d, f"record_digests[{i}]") for i, d in enumerate(request.record_digests)]
        proofs = await self._service.inclusion_proofs(
            list(request.indexes), digests, request.tree_size
        )
        return await self._service.offload(_inclusions_to_pb, proofs)

    @_guarded
    async def GetConsistencyProof(
        self, request: pb.GetConsistencyProofRequest, context: Context
    ) -> pb.ConsistencyProof:
        proof = await self._service.consistency_proof(request.size1, request.size2)
        return wire.consistency_to_pb(proof)

    @_guarded
    async def GetEntries(
        self, request: pb.GetEntriesRequest, context: Context
    ) -> pb.GetEntriesResponse:
        entries = await self._service.entries(request.start, request.count)
        response = pb.GetEntriesResponse()
        for entry in entries:
            wire.fill_entry(response.entries.add(), entry)
        return response

    @_guarded
    async def GetEntry(self, request: pb.GetEntryRequest, context: Context) -> pb.Entry:
        digest = _digest(request.record_digest, "record_digest")
        return wire.entry_to_pb(await self._service.entry(digest))

    @_guarded
    async def GetAnchors(
        self, request: pb.GetAnchorsRequest, context: Context
    ) -> pb.GetAnchorsResponse:
        checkpoint, anchors = await self._service.anchors(request.size)
        return pb.GetAnchorsResponse(
            checkpoint=wire.checkpoint_to_pb(checkpoint),
            anchors=[wire.anchor_to_pb(a) for a in anchors],
        )

    @_guarded
    async def GetReceipts(
        self, request: pb.GetReceiptsRequest, context: Context
    ) -> pb.GetReceiptsResponse:
        count = len(request.record_digests)
        if not 0 < count <= MAX_PROOFS_PER_CALL:
            raise InvalidArgumentError(
                f"record_digests: {count} requested, want 1..{MAX_PROOFS_PER_CALL}"
            )
        digests = [_digest(d, f"record_digests[{i}]") for i, d in enumerate(request.record_digests)]
        bundle = await self._service.receipts(
            digests, request.tree_size, prefer_anchored=request.prefer_anchored
        )
        return await self._service.offload(wire.receipts_to_pb, bundle)

    @_guarded
    async def ListAnchoredSizes(
        self, request: pb.ListAnchoredSizesRequest, context: Context
    ) -> pb.ListAnchoredSizesResponse:
        limit = request.limit or DEFAULT_ANCHORED_SIZES
        if limit > MAX_ANCHORED_SIZES:
            raise InvalidArgumentError(f"limit: {limit}, max {MAX_ANCHORED_SIZES}")
        return pb.ListAnchoredSizesResponse(sizes=await self._service.anchored_sizes(limit))

    @_guarded
    async def AnchorNow(
        self, request: pb.AnchorNowRequest, context: Context
    ) -> pb.AnchorNowResponse:
        if self._anchor_now is None:
            raise FailedPreconditionError("no TSA is configured on this server")
        return wire.anchor_outcome_to_pb(await self._anchor_now())

    @_guarded
    async def Backup(self, request: pb.BackupRequest, context: Context) -> pb.BackupResponse:
        if self._backup is None:
            raise FailedPreconditionError("backups are not enabled on this server")
        if not request.out_dir:
            raise InvalidArgumentError("out_dir: empty, want a path on the server's host")
        done = await self._backup(request.out_dir)
        return pb.BackupResponse(
            out_dir=str(done.out_dir),
            tree_size=done.tree_size,
            checkpoint_size=done.checkpoint_size,
        )


def _parse(cls: Any, raw: bytes) -> Any:
    try:
        return cls.FromString(raw)
    except DecodeError as exc:
        raise InvalidArgumentError(f"malformed {cls.DESCRIPTOR.name} message: {exc}") from None


# One AppendItem that carries a 32-byte digest and nothing else, as every protobuf encoder
# writes it: field 1 (items, 34 bytes) holding field 1 (record_digest, 32 bytes).
_DIGEST_ITEM = b"\x0a\x22\x0a\x20"
_DIGEST_ITEM_SIZE = len(_DIGEST_ITEM) + HASH_SIZE


def _stream_items(raw: bytes) -> Group:
    """One StreamAppend message's items, validated (an empty message adds nothing): packed
    digests (N x 32 bytes) when every item is a digest alone in its canonical encoding, typed
    items otherwise (the same items either way; issue 23, one digest per message)."""
    n, rest = divmod(len(raw), _DIGEST_ITEM_SIZE)
    if n and not rest and n <= MAX_BATCH:
        if n == 1:
            if raw[:4] == _DIGEST_ITEM:
                return raw[4:]
        elif all(raw[k::_DIGEST_ITEM_SIZE] == bytes([b]) * n for k, b in enumerate(_DIGEST_ITEM)):
            packed = bytearray(raw)
            for step in range(_DIGEST_ITEM_SIZE, HASH_SIZE, -1):  # drop each item's 4-byte head
                del packed[::step]
            return bytes(packed)
    items = wire.items_from_pb(_parse(pb.StreamAppendRequest, raw).items)
    return list(validate_items(items, MAX_BATCH)) if items else []


def _unary(behaviour: Any, cls: Any) -> Any:
    """A unary method over raw bytes (``BoundedMemory`` read them within their limit)."""

    async def handler(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            request = _parse(cls, raw)
        except InvalidArgumentError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return await behaviour(request, context)

    return handler


def _streaming(behaviour: Any) -> Any:
    """Streams get raw messages: ``ledger.api.streams`` parses them one at a time."""

    async def handler(raw_iterator: AsyncIterator[bytes], context: Any) -> AsyncIterator[Any]:
        async for response in behaviour(raw_iterator, context):
            yield response

    return handler


def _register(servicer: LedgerServicer, server: grpc.aio.Server) -> None:
    """Register every RPC of the service, parsing requests ourselves so that bytes that are not
    the request message get INVALID_ARGUMENT (grpc's own deserializer would answer INTERNAL)."""
    service = pb.DESCRIPTOR.services_by_name["LedgerService"]
    handlers = {}
    for method in service.methods:
        request_cls = message_factory.GetMessageClass(method.input_type)
        response_cls = message_factory.GetMessageClass(method.output_type)
        behaviour = getattr(servicer, method.name)
        if method.client_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _streaming(behaviour),
                response_serializer=response_cls.SerializeToString,
            )
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary(behaviour, request_cls),
                response_serializer=response_cls.SerializeToString,
            )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),)
    )


def set_health(health: Any, name: str, serving: bool) -> Awaitable[None]:
    """Set the gRPC health of the named service ``name`` on the servicer a ``health_hook``
    was given."""
    status = health_pb2.HealthCheckResponse
    return health.set(name, status.SERVING if serving else status.NOT_SERVING)  # type: ignore[no-any-return]


async def create_server(
    service: LogService,
    listen: str,
    *,
    anchor_now: Callable[[], Awaitable[AnchorOutcome]] | None = None,
    backup: Callable[[str], Awaitable[BackupOutcome]] | None = None,
    credentials: grpc.ServerCredentials | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor[Any, Any]] = (),
    limits: ServerLimits | None = None,
    connections: ConnectionLimits | None = None,
    health_hook: Callable[[Any], None] | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Build and start a gRPC server on ``listen`` (port 0 picks one); return it and its port.

    With ``credentials`` it speaks TLS (``grpc.ssl_server_credentials``), else plaintext; the
    ``interceptors`` (authentication, access log) see every call; ``limits`` bound memory
    (message size, streams, the in-flight byte budget); ``connections`` bound connections
    (``connection_options``). Health reports SERVING once started:
    callers start it only after the log has recovered."""
    limits = limits or ServerLimits()
    _return_large_buffers()
    server = grpc.aio.server(
        interceptors=[*interceptors, BoundedMemory(limits)],
        options=limits.core_options() + connection_options(connections or ConnectionLimits()),
        maximum_concurrent_rpcs=limits.max_concurrent_rpcs or None,
    )
    servicer = LedgerServicer(service, anchor_now=anchor_now, backup=backup, limits=limits)
    _register(servicer, server)
    health = grpc_health.aio.HealthServicer()  # type: ignore[attr-defined]
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    names = (
        pb.DESCRIPTOR.services_by_name["LedgerService"].full_name,
        health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        reflection.SERVICE_NAME,
    )
    reflection.enable_server_reflection(names, server)
    try:
        if credentials is None:
            port = server.add_insecure_port(listen)
        else:
            port = server.add_secure_port(listen, credentials)
    except RuntimeError as exc:  # grpc raises RuntimeError when it cannot bind
        raise ServiceError(f"cannot listen on {listen}: {exc}") from None
    if port == 0:
        raise ServiceError(f"cannot listen on {listen}")
    await server.start()
    await health.set("", health_pb2.HealthCheckResponse.SERVING)
    await health.set(names[0], health_pb2.HealthCheckResponse.SERVING)
    pending: set[asyncio.Task[None]] = set()

    def not_serving(_fault: Exception) -> None:  # the writer stopped: tell load balancers
        for name in ("", names[0]):
            task = asyncio.ensure_future(
                health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
            )
            pending.add(task)
            task.add_done_callback(pending.discard)

    service.add_failure_listener(not_serving)
    if health_hook is not None:  # more named services (the bucket mirror's "ledger.objstore")
        health_hook(health)
    return server, port
