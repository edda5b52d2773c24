from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf.internal import containers as _containers

DESCRIPTOR: _descriptor.FileDescriptor

class AppendItem(_message.Message):
    __slots__ = ("metadata", "record_digest")
    RECORD_DIGEST_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    record_digest: bytes
    metadata: bytes
    def __init__(self, record_digest: bytes | None = ..., metadata: bytes | None = ...) -> None: ...

class AppendRecordsRequest(_message.Message):
    __slots__ = ("items", "wait_for_checkpoint")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[AppendItem]
    wait_for_checkpoint: bool
    def __init__(
        self,
        items: _Iterable[AppendItem | _Mapping] | None = ...,
        wait_for_checkpoint: bool | None = ...,
    ) -> None: ...

class AppendResult(_message.Message):
    __slots__ = ("duplicate", "inclusion_proof", "index", "leaf_hash", "timestamp_ms")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LEAF_HASH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    INCLUSION_PROOF_FIELD_NUMBER: _ClassVar[int]
    index: int
    leaf_hash: bytes
    timestamp_ms: int
    duplicate: bool
    inclusion_proof: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(
        self,
        index: int | None = ...,
        leaf_hash: bytes | None = ...,
        timestamp_ms: int | None = ...,
        duplicate: bool | None = ...,
        inclusion_proof: _Iterable[bytes] | None = ...,
    ) -> None: ...

class AppendRecordsResponse(_message.Message):
    __slots__ = ("checkpoint", "results")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AppendResult]
    checkpoint: Checkpoint
    def __init__(
        self,
        results: _Iterable[AppendResult | _Mapping] | None = ...,
        checkpoint: Checkpoint | _Mapping | None = ...,
    ) -> None: ...

class StreamAppendRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[AppendItem]
    def __init__(self, items: _Iterable[AppendItem | _Mapping] | None = ...) -> None: ...

class StreamDuplicate(_message.Message):
    __slots__ = ("index", "position")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    position: int
    index: int
    def __init__(self, position: int | None = ..., index: int | None = ...) -> None: ...

class StreamAppendAck(_message.Message):
    __slots__ = (
        "count",
        "duplicates",
        "first_index",
        "first_position",
        "new_entries",
        "timestamp_ms",
    )
    FIRST_POSITION_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    NEW_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    first_position: int
    count: int
    first_index: int
    new_entries: int
    duplicates: _containers.RepeatedCompositeFieldContainer[StreamDuplicate]
    timestamp_ms: int
    def __init__(
        self,
        first_position: int | None = ...,
        count: int | None = ...,
        first_index: int | None = ...,
        new_entries: int | None = ...,
        duplicates: _Iterable[StreamDuplicate | _Mapping] | None = ...,
        timestamp_ms: int | None = ...,
    ) -> None: ...

class GetCheckpointRequest(_message.Message):
    __slots__ = ("size",)
    SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    def __init__(self, size: int | None = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ("note", "origin", "root_hash", "size")
    NOTE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ROOT_HASH_FIELD_NUMBER: _ClassVar[int]
    note: str
    origin: str
    size: int
    root_hash: bytes
    def __init__(
        self,
        note: str | None = ...,
        origin: str | None = ...,
        size: int | None = ...,
        root_hash: bytes | None = ...,
    ) -> None: ...

class GetInclusionProofRequest(_message.Message):
    __slots__ = ("index", "record_digest", "tree_size")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RECORD_DIGEST_FIELD_NUMBER: _ClassVar[int]
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    index: int
    record_digest: bytes
    tree_size: int
    def __init__(
        self,
        index: int | None = ...,
        record_digest: bytes | None = ...,
        tree_size: int | None = ...,
    ) -> None: ...

class InclusionProof(_message.Message):
    __slots__ = ("entry", "hashes", "index", "leaf_hash", "tree_size")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    LEAF_HASH_FIELD_NUMBER: _ClassVar[int]
    HASHES_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    index: int
    tree_size: int
    leaf_hash: bytes
    hashes: _containers.RepeatedScalarFieldContainer[bytes]
    entry: Entry
    def __init__(
        self,
        index: int | None = ...,
        tree_size: int | None = ...,
        leaf_hash: bytes | None = ...,
        hashes: _Iterable[bytes] | None = ...,
        entry: Entry | _Mapping | None = ...,
    ) -> None: ...

class GetInclusionProofsRequest(_message.Message):
    __slots__ = ("indexes", "record_digests", "tree_size")
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    RECORD_DIGESTS_FIELD_NUMBER: _ClassVar[int]
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    indexes: _containers.RepeatedScalarFieldContainer[int]
    record_digests: _containers.RepeatedScalarFieldContainer[bytes]
    tree_size: int
    def __init__(
        self,
        indexes: _Iterable[int] | None = ...,
        record_digests: _Iterable[bytes] | None = ...,
        tree_size: int | None = ...,
    ) -> None: ...

class GetInclusionProofsResponse(_message.Message):
    __slots__ = ("proofs", "tree_size")
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PROOFS_FIELD_NUMBER: _ClassVar[int]
    tree_size: int
    proofs: _containers.RepeatedCompositeFieldContainer[InclusionProof]
    def __init__(
        self,
        tree_size: int | None = ...,
        proofs: _Iterable[InclusionProof | _Mapping] | None = ...,
    ) -> None: ...

class GetConsistencyProofRequest(_message.Message):
    __slots__ = ("size1", "size2")
    SIZE1_FIELD_NUMBER: _ClassVar[int]
    SIZE2_FIELD_NUMBER: _ClassVar[int]
    size1: int
    size2: int
    def __init__(self, size1: int | None = ..., size2: int | None = ...) -> None: ...

class ConsistencyProof(_message.Message):
    __slots__ = ("hashes", "size1", "size2")
    SIZE1_FIELD_NUMBER: _ClassVar[int]
    SIZE2_FIELD_NUMBER: _ClassVar[int]
    HASHES_FIELD_NUMBER: _ClassVar[int]
    size1: int
    size2: int
    hashes: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(
        self,
        size1: int | None = ...,
        size2: int | None = ...,
        hashes: _Iterable[bytes] | None = ...,
    ) -> None: ...

class GetEntriesRequest(_message.Message):
    __slots__ = ("count", "start")
    START_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    start: int
    count: int
    def __init__(self, start: int | None = ..., count: int | None = ...) -> None: ...

class Entry(_message.Message):
    __slots__ = ("index", "leaf", "leaf_hash", "metadata", "record_digest", "timestamp_ms")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LEAF_FIELD_NUMBER: _ClassVar[int]
    LEAF_HASH_FIELD_NUMBER: _ClassVar[int]
    RECORD_DIGEST_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    index: int
    leaf: bytes
    leaf_hash: bytes
    record_digest: bytes
    timestamp_ms: int
    metadata: bytes
    def __init__(
        self,
        index: int | None = ...,
        leaf: bytes | None = ...,
        leaf_hash: bytes | None = ...,
        record_digest: bytes | None = ...,
        timestamp_ms: int | None = ...,
        metadata: bytes | None = ...,
    ) -> None: ...

class GetEntriesResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    def __init__(self, entries: _Iterable[Entry | _Mapping] | None = ...) -> None: ...

class GetEntryRequest(_message.Message):
    __slots__ = ("record_digest",)
    RECORD_DIGEST_FIELD_NUMBER: _ClassVar[int]
    record_digest: bytes
    def __init__(self, record_digest: bytes | None = ...) -> None: ...

class Anchor(_message.Message):
    __slots__ = ("certificates", "gen_time_ms", "message_imprint", "size", "token", "tsa")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TSA_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IMPRINT_FIELD_NUMBER: _ClassVar[int]
    GEN_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATES_FIELD_NUMBER: _ClassVar[int]
    size: int
    tsa: str
    token: bytes
    message_imprint: bytes
    gen_time_ms: int
    certificates: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(
        self,
        size: int | None = ...,
        tsa: str | None = ...,
        token: bytes | None = ...,
        message_imprint: bytes | None = ...,
        gen_time_ms: int | None = ...,
        certificates: _Iterable[bytes] | None = ...,
    ) -> None: ...

class GetAnchorsRequest(_message.Message):
    __slots__ = ("size",)
    SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    def __init__(self, size: int | None = ...) -> None: ...

class GetAnchorsResponse(_message.Message):
    __slots__ = ("anchors", "checkpoint")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    ANCHORS_FIELD_NUMBER: _ClassVar[int]
    checkpoint: Checkpoint
    anchors: _containers.RepeatedCompositeFieldContainer[Anchor]
    def __init__(
        self,
        checkpoint: Checkpoint | _Mapping | None = ...,
        anchors: _Iterable[Anchor | _Mapping] | None = ...,
    ) -> None: ...

class ListAnchoredSizesRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: int | None = ...) -> None: ...

class ListAnchoredSizesResponse(_message.Message):
    __slots__ = ("sizes",)
    SIZES_FIELD_NUMBER: _ClassVar[int]
    sizes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, sizes: _Iterable[int] | None = ...) -> None: ...

class AnchorNowRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AnchorNowResponse(_message.Message):
    __slots__ = ("anchors", "failures", "size")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ANCHORS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    size: int
    anchors: _containers.RepeatedCompositeFieldContainer[Anchor]
    failures: _containers.RepeatedScalarFieldContainer[str]
    def __init__(
        self,
        size: int | None = ...,
        anchors: _Iterable[Anchor | _Mapping] | None = ...,
        failures: _Iterable[str] | None = ...,
    ) -> None: ...
