"""Small frozen types shared by the log's modules: the v1 leaf, entries, proofs, tree state,
and the outcomes of the admin RPCs (anchoring, backup) that the wire carries.

The leaf (the bytes hashed into the RFC 6962 tree, ``leaf_hash = SHA-256(0x00 || leaf)``), v1:

    offset  size  field
    0       1     format version, 0x01
    1       8     log receive time, unsigned milliseconds since the Unix epoch, big-endian
    9       32    record digest (SHA-256 of the RFC 8785 canonical decision record)
    41      2     metadata length N, unsigned big-endian (0..MAX_METADATA)
    43      N     metadata, opaque bytes supplied by the appender

The log's receive time never decreases across the log, even when the wall clock steps back.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ledger.core.errors import DataLossError, InvalidArgumentError
from ledger.core.limits import HASH_SIZE, MAX_METADATA

__all__ = [
    "DIGEST_SIZE",
    "LEAF_VERSION",
    "MAX_METADATA",
    "Anchor",
    "AnchorOutcome",
    "AppendItem",
    "AppendOutcome",
    "AppendResult",
    "BackupOutcome",
    "ConsistencyProof",
    "Entry",
    "InclusionProof",
    "PublishedCheckpoint",
    "ReceiptBundle",
    "StreamAck",
    "decode_leaf",
    "encode_leaf",
    "leaf_prefix",
    "leaf_suffix",
]

LEAF_VERSION = 1
DIGEST_SIZE = HASH_SIZE
_HEADER = 1 + 8 + DIGEST_SIZE + 2


def leaf_prefix(timestamp_ms: int) -> bytes:
    """The first 9 bytes of every v1 leaf received at ``timestamp_ms`` (shared by a batch)."""
    return LEAF_VERSION.to_bytes(1, "big") + timestamp_ms.to_bytes(8, "big")


def leaf_suffix(metadata: bytes) -> bytes:
    """The bytes after the record digest: metadata length and metadata."""
    return len(metadata).to_bytes(2, "big") + metadata


def encode_leaf(record_digest: bytes, timestamp_ms: int, metadata: bytes = b"") -> bytes:
    """Serialise a v1 leaf (layout in the module docstring)."""
    if len(record_digest) != DIGEST_SIZE:
        raise InvalidArgumentError(
            f"record_digest is {len(record_digest)} bytes, want {DIGEST_SIZE}"
        )
    if len(metadata) > MAX_METADATA:
        raise InvalidArgumentError(f"metadata is {len(metadata)} bytes, max {MAX_METADATA}")
    return leaf_prefix(timestamp_ms) + record_digest + leaf_suffix(metadata)


class AppendItem(NamedTuple):
    """One record digest to append, with optional small metadata bound into the leaf."""

    record_digest: bytes
    metadata: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One sequenced log entry; ``leaf_hash`` is RFC 6962's ``SHA-256(0x00 || leaf)``."""

    index: int
    leaf: bytes
    leaf_hash: bytes
    record_digest: bytes
    timestamp_ms: int
    metadata: bytes


def decode_leaf(index: int, leaf: bytes) -> Entry:
    """Parse a v1 leaf stored at ``index``."""
    if len(leaf) < _HEADER or leaf[0] != LEAF_VERSION:
        raise DataLossError(f"leaf {index} is not a v{LEAF_VERSION} leaf ({len(leaf)} bytes)")
    n = int.from_bytes(leaf[41:43], "big")
    if len(leaf) != _HEADER + n:
        raise DataLossError(f"leaf {index} metadata length {n} does not match its size")
    return Entry(
        index=index,
        leaf=leaf,
        leaf_hash=hashlib.sha256(b"\x00" + leaf).digest(),
        record_digest=leaf[9:41],
        timestamp_ms=int.from_bytes(leaf[1:9], "big"),
        metadata=leaf[43:],
    )


class AppendResult(NamedTuple):
    """What an append returns for one digest (a named tuple: one is made per appended entry)."""

    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose
    leaf_hash: bytes
    timestamp_ms: int
    duplicate: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedCheckpoint:
    """A signed checkpoint as stored: the note text and its parsed body fields."""

    origin: str
    size: int
    root_hash: bytes
    note: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InclusionProof:
    """RFC 9162 inclusion proof for ``entry`` in the tree of ``tree_size``."""

    entry: Entry
    tree_size: int
    hashes: tuple[bytes, ...]

    @property
    def leaf_hash(self) -> bytes:
        """The proven leaf hash (the entry's)."""
        return self.entry.leaf_hash


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsistencyProof:
    """RFC 9162 consistency proof from ``size1`` to ``size2``."""

    size1: int
    size2: int
    hashes: tuple[bytes, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Anchor:
    """An RFC 3161 token from one TSA over the body of the checkpoint of ``size``."""

    size: int
    tsa: str
    token: bytes
    gen_time_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AnchorOutcome:
    """What one anchoring run did."""

    size: int
    anchors: list[Anchor] = field(default_factory=list)  # newly stored
    skipped: list[str] = field(default_factory=list)  # TSAs that had already stamped it
    failures: list[str] = field(default_factory=list)  # "<tsa>: <error>"


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupOutcome:
    """Where a backup is and what it holds."""

    out_dir: Path
    tree_size: int
    checkpoint_size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendOutcome:
    """An append answered: one result per item; with waiting, the covering checkpoint, and
    with proofs asked for, one inclusion path per item at that checkpoint's size."""

    results: list[AppendResult]
    checkpoint: PublishedCheckpoint | None = None
    proofs: list[tuple[bytes, ...]] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamAck:
    """One durable-group acknowledgement of a streaming append (positions count items sent)."""

    first_position: int
    count: int
    first_index: int
    new_entries: int
    duplicates: dict[int, int]  # stream position -> original index
    timestamp_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiptBundle:
    """What receipts for many records share (one checkpoint and its anchors) and what they
    do not (one inclusion proof each, in the order asked)."""

    checkpoint: PublishedCheckpoint
    anchors: tuple[Anchor, ...]
    proofs: tuple[InclusionProof, ...]
