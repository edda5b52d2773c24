"""The wire boundary of ``ledger.v1`` (proto/ledger/v1/ledger.proto): protobuf <-> core types,
and ledger errors <-> gRPC statuses, both ways, in one place.

The server (``ledger.api.server``) and the remote client (``ledger_client.remote``) are the only
users; generated classes never travel further. Status rules follow gRPC's guidance: a request
that can never succeed is INVALID_ARGUMENT (or NOT_FOUND, FAILED_PRECONDITION, ...); one that
may succeed later without anyone changing it is OUT_OF_RANGE, RESOURCE_EXHAUSTED or UNAVAILABLE,
and ``ledger.core.errors.is_retryable`` follows from the class each status maps back to.

``STATUS_OF`` names every class of the error tree explicitly (a test fails for a class it
lacks), so a new error class cannot silently become "retry forever".
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from itertools import pairwise

import grpc

from ledger.core import errors as e
from ledger.core.limits import HASH_SIZE, RETRY_AFTER_KEY
from ledger.core.packed import PackedResult
from ledger.core.types import (
    Anchor,
    AnchorOutcome,
    AppendItem,
    AppendOutcome,
    AppendResult,
    ConsistencyProof,
    Entry,
    InclusionProof,
    PublishedCheckpoint,
    ReceiptBundle,
    StreamAck,
)
from ledger.v1 import ledger_pb2 as pb

__all__ = [
    "ERROR_OF",
    "STATUS_OF",
    "anchor_from_pb",
    "anchor_outcome_from_pb",
    "anchor_outcome_to_pb",
    "anchor_to_pb",
    "append_outcome_from_pb",
    "append_outcome_to_pb",
    "checkpoint_from_pb",
    "checkpoint_to_pb",
    "consistency_from_pb",
    "consistency_to_pb",
    "entry_from_pb",
    "entry_to_pb",
    "error_from_status",
    "fill_entry",
    "fill_inclusion",
    "inclusion_from_pb",
    "inclusion_to_pb",
    "items_from_pb",
    "items_to_pb",
    "packed_from_pb",
    "packed_to_pb",
    "receipts_from_pb",
    "receipts_to_pb",
    "retry_trailer",
    "status_of",
    "stream_ack_from_pb",
    "stream_ack_to_pb",
    "stream_packed_ack_to_pb",
]

_S = grpc.StatusCode

# Every class of the error tree -> its status (lookup walks the class's MRO, but each class is
# listed on purpose; tests/unit/test_wire.py fails for a class that is missing).
STATUS_OF: dict[type[e.LedgerError], grpc.StatusCode] = {
    e.LedgerError: _S.INTERNAL,
    # verification: a claim sent to the server that does not hold; resending will not help
    e.VerificationError: _S.FAILED_PRECONDITION,
    e.BoundsError: _S.INVALID_ARGUMENT,
    e.MalformedHashError: _S.INVALID_ARGUMENT,
    e.ProofShapeError: _S.FAILED_PRECONDITION,
    e.RootMismatchError: _S.FAILED_PRECONDITION,
    e.SignatureError: _S.FAILED_PRECONDITION,
    e.OriginMismatchError: _S.FAILED_PRECONDITION,
    e.WitnessError: _S.FAILED_PRECONDITION,
    e.TimestampError: _S.FAILED_PRECONDITION,
    e.AnchorsPendingError: _S.FAILED_PRECONDITION,
    e.RecordError: _S.FAILED_PRECONDITION,
    e.InconsistencyError: _S.FAILED_PRECONDITION,
    # format: input that does not parse
    e.FormatError: _S.INVALID_ARGUMENT,
    e.MalformedNoteError: _S.INVALID_ARGUMENT,
    e.MalformedKeyError: _S.INVALID_ARGUMENT,
    e.KeyFileModeError: _S.FAILED_PRECONDITION,
    e.MalformedProofFileError: _S.INVALID_ARGUMENT,
    e.MalformedReceiptError: _S.INVALID_ARGUMENT,
    e.InvalidRecordError: _S.INVALID_ARGUMENT,
    e.UnsupportedSchemaError: _S.INVALID_ARGUMENT,
    e.MalformedTilePathError: _S.INVALID_ARGUMENT,
    e.MalformedTileError: _S.INVALID_ARGUMENT,
    # service
    e.ServiceError: _S.UNKNOWN,
    e.InvalidArgumentError: _S.INVALID_ARGUMENT,
    e.OutOfRangeError: _S.OUT_OF_RANGE,
    e.NotYetPublishedError: _S.OUT_OF_RANGE,
    e.NotFoundError: _S.NOT_FOUND,
    e.FailedPreconditionError: _S.FAILED_PRECONDITION,
    e.ReadOnlyError: _S.FAILED_PRECONDITION,
    e.NonConformingStoreError: _S.FAILED_PRECONDITION,
    e.PushbackError: _S.RESOURCE_EXHAUSTED,
    e.UnauthenticatedError: _S.UNAUTHENTICATED,
    e.PermissionDeniedError: _S.PERMISSION_DENIED,
    e.UnavailableError: _S.UNAVAILABLE,
    e.LogFailedError: _S.UNAVAILABLE,
    e.StoreUnreachableError: _S.UNAVAILABLE,
    e.WriterFencedError: _S.UNAVAILABLE,
    e.WriterActiveError: _S.UNAVAILABLE,
    e.DeadlineExceededError: _S.DEADLINE_EXCEEDED,
    e.UnimplementedError: _S.UNIMPLEMENTED,
    e.InternalError: _S.INTERNAL,
    e.StorageError: _S.INTERNAL,
    e.DataLossError: _S.DATA_LOSS,
    e.ObjectConflictError: _S.DATA_LOSS,
    e.RemoteError: _S.UNKNOWN,
}

# The inverse: the class a client raises for a status (statuses not listed: ``RemoteError``).
ERROR_OF: dict[grpc.StatusCode, type[e.ServiceError]] = {
    _S.INVALID_ARGUMENT: e.InvalidArgumentError,
    _S.OUT_OF_RANGE: e.OutOfRangeError,
    _S.NOT_FOUND: e.NotFoundError,
    _S.FAILED_PRECONDITION: e.FailedPreconditionError,
    _S.RESOURCE_EXHAUSTED: e.PushbackError,
    _S.UNAUTHENTICATED: e.UnauthenticatedError,
    _S.PERMISSION_DENIED: e.PermissionDeniedError,
    _S.UNAVAILABLE: e.UnavailableError,
    _S.DEADLINE_EXCEEDED: e.DeadlineExceededError,
    _S.UNIMPLEMENTED: e.UnimplementedError,
    _S.INTERNAL: e.InternalError,
    _S.DATA_LOSS: e.DataLossError,
}

# Statuses outside the table that a retry may cure (transport trouble, a cancelled stream).
_RETRYABLE_OTHER = frozenset({_S.UNKNOWN, _S.ABORTED, _S.CANCELLED})
_DEFAULT_PUSHBACK = 0.05  # seconds, when RESOURCE_EXHAUSTED carries no hint


def status_of(exc: e.LedgerError) -> grpc.StatusCode:
    """The gRPC status of a ledger error (its nearest listed class)."""
    for cls in type(exc).__mro__:
        code = STATUS_OF.get(cls)
        if code is not None:
            return code
    return _S.INTERNAL


def retry_trailer(exc: e.LedgerError) -> tuple[tuple[str, str], ...]:
    """Trailing metadata for ``exc``: the ``retry-after-ms`` hint of a pushback."""
    if isinstance(exc, e.PushbackError):
        return ((RETRY_AFTER_KEY, str(int(exc.retry_after * 1000))),)
    return ()


def error_from_status(
    code: grpc.StatusCode, details: str, trailing: Iterable[tuple[str, str | bytes]] = ()
) -> e.ServiceError:
    """The ledger error for a status a server answered (``ERROR_OF``), hint included."""
    cls = ERROR_OF.get(code)
    if cls is e.PushbackError:
        return e.PushbackError(details, retry_after=_retry_after(trailing))
    if cls is not None:
        return cls(details)
    return e.RemoteError(details, status=code.name, retryable=code in _RETRYABLE_OTHER)


def _retry_after(trailing: Iterable[tuple[str, str | bytes]]) -> float:
    for key, value in trailing:
        if key == RETRY_AFTER_KEY:
            try:
                return max(0.0, int(value) / 1000)
            except (TypeError, ValueError):
                break
    return _DEFAULT_PUSHBACK


# --- append -------------------------------------------------------------------------------


def items_to_pb(
    digests: Sequence[bytes], metadata: Sequence[bytes] | None = None
) -> list[pb.AppendItem]:
    """Append items for the wire (``metadata``: one per digest, or none)."""
    metas = metadata if metadata is not None else [b""] * len(digests)
    return [pb.AppendItem(record_digest=d, metadata=m) for d, m in zip(digests, metas, strict=True)]


def items_from_pb(items: Iterable[pb.AppendItem]) -> list[AppendItem]:
    """Append items from the wire (validated by the service)."""
    return [AppendItem(i.record_digest, i.metadata) for i in items]


def append_outcome_to_pb(outcome: AppendOutcome) -> pb.AppendRecordsResponse:
    """Built with ``add()``: about 2.5x faster than constructing each sub-message (B2)."""
    response = pb.AppendRecordsResponse()
    add = response.results.add
    for r in outcome.results:
        add(
            index=r.index, leaf_hash=r.leaf_hash, timestamp_ms=r.timestamp_ms, duplicate=r.duplicate
        )
    if outcome.checkpoint is not None:
        response.checkpoint.CopyFrom(checkpoint_to_pb(outcome.checkpoint))
    for m, hashes in zip(response.results, outcome.proofs or (), strict=False):
        m.inclusion_proof.extend(hashes)
    return response


def append_outcome_from_pb(m: pb.AppendRecordsResponse, *, with_proofs: bool) -> AppendOutcome:
    """The inverse of ``append_outcome_to_pb``."""
    results = [
        AppendResult(
            index=r.index, leaf_hash=r.leaf_hash, timestamp_ms=r.timestamp_ms, duplicate=r.duplicate
        )
        for r in m.results
    ]
    checkpoint = checkpoint_from_pb(m.checkpoint) if m.HasField("checkpoint") else None
    proofs = [tuple(r.inclusion_proof) for r in m.results] if with_proofs else None
    return AppendOutcome(results=results, checkpoint=checkpoint, proofs=proofs)


def packed_to_pb(result: PackedResult) -> pb.AppendPackedResponse:
    """A packed append's result for the wire (arrays copied whole, nothing per new entry)."""
    return pb.AppendPackedResponse(
        first_index=result.first_index,
        new_entries=result.new_entries,
        timestamp_ms=result.timestamp_ms,
        duplicate_positions=result.dup_positions,
        duplicate_indexes=result.dup_indexes,
        duplicate_timestamps_ms=result.dup_timestamps_ms,
        duplicate_leaf_hashes=result.dup_leaf_hashes,
    )


def packed_from_pb(m: pb.AppendPackedResponse, count: int) -> PackedResult:
    """The inverse of ``packed_to_pb`` for a request of ``count`` digests; refuses an answer
    whose parts do not fit together (``InconsistencyError``)."""
    positions = list(m.duplicate_positions)
    dups = len(positions)
    if not (
        dups == len(m.duplicate_indexes) == len(m.duplicate_timestamps_ms)
        and len(m.duplicate_leaf_hashes) == dups * HASH_SIZE
        and m.new_entries + dups == count
        and all(a < b for a, b in pairwise(positions))
        and (not positions or positions[-1] < count)
    ):
        raise e.InconsistencyError(
            f"AppendPacked answer for {count} digests does not fit together: "
            f"{m.new_entries} new, {dups} duplicate positions"
        )
    return PackedResult(
        count=count,
        first_index=m.first_index,
        timestamp_ms=m.timestamp_ms,
        dup_positions=array("Q", positions),
        dup_indexes=array("Q", m.duplicate_indexes),
        dup_timestamps_ms=array("Q", m.duplicate_timestamps_ms),
        dup_leaf_hashes=m.duplicate_leaf_hashes,
    )


def stream_ack_to_pb(position: int, results: Sequence[AppendResult]) -> pb.StreamAppendAck:
    """The ack of one durable group of a stream, starting at stream ``position``."""
    new = [r for r in results if not r.duplicate]
    ack = pb.StreamAppendAck(
        first_position=position,
        count=len(results),
        first_index=new[0].index if new else 0,
        new_entries=len(new),
        timestamp_ms=results[-1].timestamp_ms if results else 0,
    )
    for i, r in enumerate(results):
        if r.duplicate:
            ack.duplicates.add(position=position + i, index=r.index)
    return ack


def stream_packed_ack_to_pb(position: int, result: PackedResult) -> pb.StreamAppendAck:
    """The ack of one durable group of digests alone (appended packed), starting at stream
    ``position``: the same message ``stream_ack_to_pb`` gives for the same items appended typed
    (``timestamp_ms`` is the last item's time: a duplicate's original time when it is last)."""
    count, dups = result.count, result.dup_positions
    last_is_dup = bool(dups) and dups[-1] == count - 1
    ack = pb.StreamAppendAck(
        first_position=position,
        count=count,
        first_index=result.first_index if result.new_entries else 0,
        new_entries=result.new_entries,
        timestamp_ms=result.dup_timestamps_ms[-1] if last_is_dup else result.timestamp_ms,
    )
    if dups:
        add = ack.duplicates.add
        for p, index in zip(dups, result.dup_indexes, strict=True):
            add(position=position + p, index=index)
    return ack


def stream_ack_from_pb(m: pb.StreamAppendAck) -> StreamAck:
    """A stream ack for callers."""
    return StreamAck(
        first_position=m.first_position,
        count=m.count,
        first_index=m.first_index,
        new_entries=m.new_entries,
        duplicates={d.position: d.index for d in m.duplicates},
        timestamp_ms=m.timestamp_ms,
    )


# --- checkpoints, entries, proofs ------------------------------------------------------------


def checkpoint_to_pb(cp: PublishedCheckpoint) -> pb.Checkpoint:
    """A published checkpoint for the wire."""
    return pb.Checkpoint(note=cp.note, origin=cp.origin, size=cp.size, root_hash=cp.root_hash)


def checkpoint_from_pb(m: pb.Checkpoint) -> PublishedCheckpoint:
    """The inverse of ``checkpoint_to_pb`` (fields as sent: verify the note before use)."""
    return PublishedCheckpoint(origin=m.origin, size=m.size, root_hash=m.root_hash, note=m.note)


def fill_entry(m: pb.Entry, entry: Entry) -> None:
    """Write ``entry`` into a message in place (``add()`` of a repeated field)."""
    m.index = entry.index
    m.leaf = entry.leaf
    m.leaf_hash = entry.leaf_hash
    m.record_digest = entry.record_digest
    m.timestamp_ms = entry.timestamp_ms
    m.metadata = entry.metadata


def entry_to_pb(entry: Entry) -> pb.Entry:
    """An entry for the wire."""
    m = pb.Entry()
    fill_entry(m, entry)
    return m


def entry_from_pb(m: pb.Entry) -> Entry:
    """The inverse of ``entry_to_pb`` (the served leaf hash is kept, not recomputed)."""
    return Entry(
        index=m.index,
        leaf=m.leaf,
        leaf_hash=m.leaf_hash,
        record_digest=m.record_digest,
        timestamp_ms=m.timestamp_ms,
        metadata=m.metadata,
    )


def fill_inclusion(m: pb.InclusionProof, proof: InclusionProof) -> None:
    """Write ``proof`` into a message in place."""
    m.index = proof.entry.index
    m.tree_size = proof.tree_size
    m.leaf_hash = proof.leaf_hash
    m.hashes.extend(proof.hashes)
    fill_entry(m.entry, proof.entry)


def inclusion_to_pb(proof: InclusionProof) -> pb.InclusionProof:
    """An inclusion proof for the wire."""
    m = pb.InclusionProof()
    fill_inclusion(m, proof)
    return m


def inclusion_from_pb(m: pb.InclusionProof) -> InclusionProof:
    """The inverse of ``inclusion_to_pb``; refuses a proof whose index or leaf hash disagree
    with its entry (the two copies must match)."""
    entry = entry_from_pb(m.entry)
    if m.index != entry.index or m.leaf_hash != entry.leaf_hash:
        raise e.InconsistencyError(
            f"proof for index {m.index} carries the entry of index {entry.index} "
            "or a different leaf hash"
        )
    return InclusionProof(entry=entry, tree_size=m.tree_size, hashes=tuple(m.hashes))


def consistency_to_pb(proof: ConsistencyProof) -> pb.ConsistencyProof:
    """A consistency proof for the wire."""
    return pb.ConsistencyProof(size1=proof.size1, size2=proof.size2, hashes=list(proof.hashes))


def consistency_from_pb(m: pb.ConsistencyProof) -> ConsistencyProof:
    """The inverse of ``consistency_to_pb``."""
    return ConsistencyProof(size1=m.size1, size2=m.size2, hashes=tuple(m.hashes))


# --- anchors and receipts -------------------------------------------------------------------


def anchor_to_pb(anchor: Anchor) -> pb.Anchor:
    """A stored anchor for the wire (imprint and certificates are read from the token)."""
    # RFC 3161 (asn1crypto, X.509) loads at the first anchor sent, not with every server
    from ledger.timestamp.rfc3161 import token_certificates, token_imprint

    return pb.Anchor(
        size=anchor.size,
        tsa=anchor.tsa,
        token=anchor.token,
        message_imprint=token_imprint(anchor.token),
        gen_time_ms=anchor.gen_time_ms,
        certificates=token_certificates(anchor.token),
    )


def anchor_from_pb(m: pb.Anchor) -> Anchor:
    """The inverse of ``anchor_to_pb`` (the token is the anchor; the rest is derived)."""
    return Anchor(size=m.size, tsa=m.tsa, token=m.token, gen_time_ms=m.gen_time_ms)


def receipts_to_pb(bundle: ReceiptBundle) -> pb.GetReceiptsResponse:
    """A receipt bundle for the wire."""
    response = pb.GetReceiptsResponse(
        checkpoint=checkpoint_to_pb(bundle.checkpoint),
        anchors=[anchor_to_pb(a) for a in bundle.anchors],
    )
    for proof in bundle.proofs:
        fill_inclusion(response.proofs.add(), proof)
    return response


def receipts_from_pb(m: pb.GetReceiptsResponse) -> ReceiptBundle:
    """The inverse of ``receipts_to_pb``."""
    return ReceiptBundle(
        checkpoint=checkpoint_from_pb(m.checkpoint),
        anchors=tuple(anchor_from_pb(a) for a in m.anchors),
        proofs=tuple(inclusion_from_pb(p) for p in m.proofs),
    )


def anchor_outcome_to_pb(outcome: AnchorOutcome) -> pb.AnchorNowResponse:
    """What an AnchorNow run did, for the wire."""
    return pb.AnchorNowResponse(
        size=outcome.size,
        anchors=[anchor_to_pb(a) for a in outcome.anchors],
        failures=list(outcome.failures),
    )


def anchor_outcome_from_pb(m: pb.AnchorNowResponse) -> AnchorOutcome:
    """The inverse of ``anchor_outcome_to_pb`` (skipped TSAs are not sent)."""
    return AnchorOutcome(
        size=m.size, anchors=[anchor_from_pb(a) for a in m.anchors], failures=list(m.failures)
    )
