"""A small synchronous gRPC client for ``ledger.v1.LedgerService`` (proto/ledger/v1/ledger.proto).

The only client-side module that imports grpc and the generated code; it converts protobuf into
the plain types of ``ledger.types`` so callers never see generated classes. Import it lazily
from anything the offline verifier loads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from ledger.types import (
    Anchor,
    AppendResult,
    ConsistencyProof,
    Entry,
    InclusionProof,
    PublishedCheckpoint,
)
from ledger.v1 import ledger_pb2 as pb
from ledger.v1 import ledger_pb2_grpc as pb_grpc

__all__ = ["AppendOutcome", "RemoteLog", "StreamAck"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendOutcome:
    """An AppendRecords answer: per-digest results, and with waiting, checkpoint and proofs."""

    results: list[AppendResult]
    checkpoint: PublishedCheckpoint | None
    proofs: list[tuple[bytes, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamAck:
    """One durable-batch acknowledgement of a streaming append."""

    first_position: int
    count: int
    first_index: int
    new_entries: int
    duplicates: dict[int, int]  # stream position -> original index


def _checkpoint(m: Any) -> PublishedCheckpoint:
    return PublishedCheckpoint(origin=m.origin, size=m.size, root_hash=m.root_hash, note=m.note)


def _entry(m: Any) -> Entry:
    return Entry(
        index=m.index,
        leaf=m.leaf,
        record_digest=m.record_digest,
        timestamp_ms=m.timestamp_ms,
        metadata=m.metadata,
    )


def _inclusion(m: Any) -> InclusionProof:
    return InclusionProof(
        entry=_entry(m.entry), leaf_hash=m.leaf_hash, tree_size=m.tree_size, hashes=tuple(m.hashes)
    )


def _items(digests: Sequence[bytes], metadata: Sequence[bytes] | None) -> list[Any]:
    metas = metadata if metadata is not None else [b""] * len(digests)
    return [pb.AppendItem(record_digest=d, metadata=m) for d, m in zip(digests, metas, strict=True)]


class RemoteLog:
    """Blocking calls to a log server at ``address`` (``host:port``)."""

    def __init__(self, address: str, *, timeout: float = 30.0) -> None:
        self.address = address
        self.timeout = timeout
        self._channel = grpc.insecure_channel(
            address,
            options=[
                ("grpc.max_receive_message_length", 16 << 20),
                ("grpc.max_send_message_length", 16 << 20),
            ],
        )
        self._stub = pb_grpc.LedgerServiceStub(self._channel)

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
    ) -> AppendOutcome:
        """Append record digests; optionally wait for the covering checkpoint and proofs."""
        request = pb.AppendRecordsRequest(
            items=_items(digests, metadata), wait_for_checkpoint=wait_for_checkpoint
        )
        response = self._stub.AppendRecords(request, timeout=self.timeout)
        results = [
            AppendResult(
                index=r.index,
                leaf_hash=r.leaf_hash,
                timestamp_ms=r.timestamp_ms,
                duplicate=r.duplicate,
            )
            for r in response.results
        ]
        waited = response.HasField("checkpoint")
        return AppendOutcome(
            results=results,
            checkpoint=_checkpoint(response.checkpoint) if waited else None,
            proofs=[tuple(r.inclusion_proof) for r in response.results] if waited else [],
        )

    def stream_append(self, batches: Iterable[Sequence[bytes]]) -> Iterator[StreamAck]:
        """Stream batches of digests; yield the server's durable-batch acks."""
        requests = (pb.StreamAppendRequest(items=_items(b, None)) for b in batches)
        for ack in self._stub.StreamAppend(requests, timeout=self.timeout):
            yield StreamAck(
                first_position=ack.first_position,
                count=ack.count,
                first_index=ack.first_index,
                new_entries=ack.new_entries,
                duplicates={d.position: d.index for d in ack.duplicates},
            )

    def checkpoint(self, size: int = 0) -> PublishedCheckpoint:
        """The latest checkpoint, or the one published for ``size``."""
        return _checkpoint(
            self._stub.GetCheckpoint(pb.GetCheckpointRequest(size=size), timeout=self.timeout)
        )

    def inclusion_proof(
        self, *, index: int | None = None, record_digest: bytes | None = None, tree_size: int = 0
    ) -> InclusionProof:
        """Inclusion proof by index or record digest at ``tree_size`` (0: latest)."""
        request = pb.GetInclusionProofRequest(tree_size=tree_size)
        if record_digest is not None:
            request.record_digest = record_digest
        elif index is not None:
            request.index = index
        return _inclusion(self._stub.GetInclusionProof(request, timeout=self.timeout))

    def inclusion_proofs(
        self, indexes: Sequence[int] = (), record_digests: Sequence[bytes] = (), tree_size: int = 0
    ) -> list[InclusionProof]:
        """Batched inclusion proofs at one tree size."""
        request = pb.GetInclusionProofsRequest(
            indexes=list(indexes), record_digests=list(record_digests), tree_size=tree_size
        )
        response = self._stub.GetInclusionProofs(request, timeout=self.timeout)
        return [_inclusion(p) for p in response.proofs]

    def consistency_proof(self, size1: int, size2: int = 0) -> ConsistencyProof:
        """Consistency proof from ``size1`` to ``size2`` (0: latest)."""
        m = self._stub.GetConsistencyProof(
            pb.GetConsistencyProofRequest(size1=size1, size2=size2), timeout=self.timeout
        )
        return ConsistencyProof(size1=m.size1, size2=m.size2, hashes=tuple(m.hashes))

    def entries(self, start: int, count: int) -> list[Entry]:
        """A page of published entries."""
        m = self._stub.GetEntries(
            pb.GetEntriesRequest(start=start, count=count), timeout=self.timeout
        )
        return [_entry(e) for e in m.entries]

    def entry(self, record_digest: bytes) -> Entry:
        """The entry of a record digest."""
        m = self._stub.GetEntry(
            pb.GetEntryRequest(record_digest=record_digest), timeout=self.timeout
        )
        return _entry(m)

    def anchors(self, size: int = 0) -> tuple[PublishedCheckpoint, list[Anchor]]:
        """The checkpoint of ``size`` (0: newest anchored) and its RFC 3161 anchors."""
        m = self._stub.GetAnchors(pb.GetAnchorsRequest(size=size), timeout=self.timeout)
        anchors = [
            Anchor(size=a.size, tsa=a.tsa, token=a.token, gen_time_ms=a.gen_time_ms)
            for a in m.anchors
        ]
        return _checkpoint(m.checkpoint), anchors

    def anchored_sizes(self, limit: int = 0) -> list[int]:
        """Anchored checkpoint sizes, newest first."""
        m = self._stub.ListAnchoredSizes(
            pb.ListAnchoredSizesRequest(limit=limit), timeout=self.timeout
        )
        return list(m.sizes)

    def anchor_now(self) -> tuple[int, list[Anchor], list[str]]:
        """Ask the server to anchor its latest checkpoint now (localhost only)."""
        m = self._stub.AnchorNow(pb.AnchorNowRequest(), timeout=self.timeout)
        anchors = [
            Anchor(size=a.size, tsa=a.tsa, token=a.token, gen_time_ms=a.gen_time_ms)
            for a in m.anchors
        ]
        return m.size, anchors, list(m.failures)
