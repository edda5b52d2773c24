from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AppendItem(_message.Message):
    __slots__ = ("record_digest", "metadata")
    RECORD_DIGEST_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    record_digest: bytes
    metadata: bytes
    def __init__(self, record_digest: _Optional[bytes] = ..., metadata: _Optional[bytes] = ...) -> None: ...

class AppendRecordsRequest(_message.Message):
    __slots__ = ("items", "wait_for_checkpoint", "include_proofs")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PROOFS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[AppendItem]
    wait_for_checkpoint: bool
    include_proofs: bool
    def __init__(self, items: _Optional[_Iterable[_Union[AppendItem, _Mapping]]] = ..., wait_for_checkpoint: _Optional[bool] = ..., include_proofs: _Optional[bool] = ...) -> None: ...

class AppendResult(_message.Message):
    __slots__ = ("index", "leaf_hash", "timestamp_ms", "duplicate", "inclusion_proof")
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
    def __init__(self, index: _Optional[int] = ..., leaf_hash: _Optional[bytes] = ..., timestamp_ms: _Optional[int] = ..., duplicate: _Optional[bool] = ..., inclusion_proof: _Optional[_Iterable[bytes]] = ...) -> None: ...

class AppendRecordsResponse(_message.Message):
    __slots__ = ("results", "checkpoint")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AppendResult]
    checkpoint: Checkpoint
    def __init__(self, results: _Optional[_Iterable[_Union[AppendResult, _Mapping]]] = ..., checkpoint: _Optional[_Union[Checkpoint, _Mapping]] = ...) -> None: ...

class StreamAppendRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[AppendItem]
    def __init__(self, items: _Optional[_Iterable[_Union[AppendItem, _Mapping]]] = ...) -> None: ...

class StreamDuplicate(_message.Message):
    __slots__ = ("position", "index")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    position: int
    index: int
    def __init__(self, position: _Optional[int] = ..., index: _Optional[int] = ...) -> None: ...

class StreamAppendAck(_message.Message):
    __slots__ = ("first_position", "count", "first_index", "new_entries", "duplicates", "timestamp_ms")
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
    def __init__(self, first_position: _Optional[int] = ..., count: _Optional[int] = ..., first_index: _Optional[int] = ..., new_entries: _Optional[int] = ..., duplicates: _Optional[_Iterable[_Union[StreamDuplicate, _Mapping]]] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class AppendPackedRequest(_message.Message):
    __slots__ = ("record_digests",)
    RECORD_DIGESTS_FIELD_NUMBER: _ClassVar[int]
    record_digests: bytes
    def __init__(self, record_digests: _Optional[bytes] = ...) -> None: ...

class AppendPackedResponse(_message.Message):
    __slots__ = ("first_index", "new_entries", "timestamp_ms", "duplicate_positions", "duplicate_indexes", "duplicate_timestamps_ms", "duplicate_leaf_hashes")
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    NEW_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_POSITIONS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_INDEXES_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_TIMESTAMPS_MS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_LEAF_HASHES_FIELD_NUMBER: _ClassVar[int]
    first_index: int
    new_entries: int
    timestamp_ms: int
    duplicate_positions: _containers.RepeatedScalarFieldContainer[int]
    duplicate_indexes: _containers.RepeatedScalarFieldContainer[int]
    duplicate_timestamps_ms: _containers.RepeatedScalarFieldContainer[int]
    duplicate_leaf_hashes: bytes
    def __init__(self, first_index: _Optional[int] = ..., new_entries: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., duplicate_positions: _Optional[_Iterable[int]] = ..., duplicate_indexes: _Optional[_Iterable[int]] = ..., duplicate_timestamps_ms: _Optional[_Iterable[int]] = ..., duplicate_leaf_hashes: _Optional[bytes] = ...) -> None: ...

class GetCheckpointRequest(_message.Message):
    __slots__ = ("size",)
    SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    def __init__(self, size: _Optional[int] = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ("note", "origin", "size", "root_hash")
    NOTE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ROOT_HASH_FIELD_NUMBER: _ClassVar[int]
    note: str
    origin: str
    size: int
    root_hash: bytes
    def __init__(self, note: _Optional[str] = ..., origin: _Optional[str] = ..., size: _Optional[int] = ..., root_hash: _Optional[bytes] = ...) -> None: ...

class GetInclusionProofRequest(_message.Message):
    __slots__ = ("index", "record_digest", "tree_size")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RECORD_DIGEST_FIELD_NUMBER: _ClassVar[int]
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    index: int
    record_digest: bytes
    tree_size: int
    def __init__(self, index: _Optional[int] = ..., record_digest: _Optional[bytes] = ..., tree_size: _Optional[int] = ...) -> None: ...

class InclusionProof(_message.Message):
    __slots__ = ("index", "tree_size", "leaf_hash", "hashes", "entry")
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
    def __init__(self, index: _Optional[int] = ..., tree_size: _Optional[int] = ..., leaf_hash: _Optional[bytes] = ..., hashes: _Optional[_Iterable[bytes]] = ..., entry: _Optional[_Union[Entry, _Mapping]] = ...) -> None: ...

class GetInclusionProofsRequest(_message.Message):
    __slots__ = ("indexes", "record_digests", "tree_size")
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    RECORD_DIGESTS_FIELD_NUMBER: _ClassVar[int]
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    indexes: _containers.RepeatedScalarFieldContainer[int]
    record_digests: _containers.RepeatedScalarFieldContainer[bytes]
    tree_size: int
    def __init__(self, indexes: _Optional[_Iterable[int]] = ..., record_digests: _Optional[_Iterable[bytes]] = ..., tree_size: _Optional[int] = ...) -> None: ...

class GetInclusionProofsResponse(_message.Message):
    __slots__ = ("tree_size", "proofs")
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PROOFS_FIELD_NUMBER: _ClassVar[int]
    tree_size: int
    proofs: _containers.RepeatedCompositeFieldContainer[InclusionProof]
    def __init__(self, tree_size: _Optional[int] = ..., proofs: _Optional[_Iterable[_Union[InclusionProof, _Mapping]]] = ...) -> None: ...

class GetConsistencyProofRequest(_message.Message):
    __slots__ = ("size1", "size2")
    SIZE1_FIELD_NUMBER: _ClassVar[int]
    SIZE2_FIELD_NUMBER: _ClassVar[int]
    size1: int
    size2: int
    def __init__(self, size1: _Optional[int] = ..., size2: _Optional[int] = ...) -> None: ...

class ConsistencyProof(_message.Message):
    __slots__ = ("size1", "size2", "hashes")
    SIZE1_FIELD_NUMBER: _ClassVar[int]
    SIZE2_FIELD_NUMBER: _ClassVar[int]
    HASHES_FIELD_NUMBER: _ClassVar[int]
    size1: int
    size2: int
    hashes: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, size1: _Optional[int] = ..., size2: _Optional[int] = ..., hashes: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetEntriesRequest(_message.Message):
    __slots__ = ("start", "count")
    START_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    start: int
    count: int
    def __init__(self, start: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class Entry(_message.Message):
    __slots__ = ("index", "leaf", "leaf_hash", "record_digest", "timestamp_ms", "metadata")
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
    def __init__(self, index: _Optional[int] = ..., leaf: _Optional[bytes] = ..., leaf_hash: _Optional[bytes] = ..., record_digest: _Optional[bytes] = ..., timestamp_ms: _Optional[int] = ..., metadata: _Optional[bytes] = ...) -> None: ...

class GetEntriesResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    def __init__(self, entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ...) -> None: ...

class GetEntryRequest(_message.Message):
    __slots__ = ("record_digest",)
    RECORD_DIGEST_FIELD_NUMBER: _ClassVar[int]
    record_digest: bytes
    def __init__(self, record_digest: _Optional[bytes] = ...) -> None: ...

class Anchor(_message.Message):
    __slots__ = ("size", "tsa", "token", "message_imprint", "gen_time_ms", "certificates")
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
    def __init__(self, size: _Optional[int] = ..., tsa: _Optional[str] = ..., token: _Optional[bytes] = ..., message_imprint: _Optional[bytes] = ..., gen_time_ms: _Optional[int] = ..., certificates: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetAnchorsRequest(_message.Message):
    __slots__ = ("size",)
    SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    def __init__(self, size: _Optional[int] = ...) -> None: ...

class GetAnchorsResponse(_message.Message):
    __slots__ = ("checkpoint", "anchors")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    ANCHORS_FIELD_NUMBER: _ClassVar[int]
    checkpoint: Checkpoint
    anchors: _containers.RepeatedCompositeFieldContainer[Anchor]
    def __init__(self, checkpoint: _Optional[_Union[Checkpoint, _Mapping]] = ..., anchors: _Optional[_Iterable[_Union[Anchor, _Mapping]]] = ...) -> None: ...

class GetReceiptsRequest(_message.Message):
    __slots__ = ("record_digests", "tree_size", "prefer_anchored")
    RECORD_DIGESTS_FIELD_NUMBER: _ClassVar[int]
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PREFER_ANCHORED_FIELD_NUMBER: _ClassVar[int]
    record_digests: _containers.RepeatedScalarFieldContainer[bytes]
    tree_size: int
    prefer_anchored: bool
    def __init__(self, record_digests: _Optional[_Iterable[bytes]] = ..., tree_size: _Optional[int] = ..., prefer_anchored: _Optional[bool] = ...) -> None: ...

class GetReceiptsResponse(_message.Message):
    __slots__ = ("checkpoint", "anchors", "proofs")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    ANCHORS_FIELD_NUMBER: _ClassVar[int]
    PROOFS_FIELD_NUMBER: _ClassVar[int]
    checkpoint: Checkpoint
    anchors: _containers.RepeatedCompositeFieldContainer[Anchor]
    proofs: _containers.RepeatedCompositeFieldContainer[InclusionProof]
    def __init__(self, checkpoint: _Optional[_Union[Checkpoint, _Mapping]] = ..., anchors: _Optional[_Iterable[_Union[Anchor, _Mapping]]] = ..., proofs: _Optional[_Iterable[_Union[InclusionProof, _Mapping]]] = ...) -> None: ...

class ListAnchoredSizesRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class ListAnchoredSizesResponse(_message.Message):
    __slots__ = ("sizes",)
    SIZES_FIELD_NUMBER: _ClassVar[int]
    sizes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, sizes: _Optional[_Iterable[int]] = ...) -> None: ...

class AnchorNowRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = ("out_dir",)
    OUT_DIR_FIELD_NUMBER: _ClassVar[int]
    out_dir: str
    def __init__(self, out_dir: _Optional[str] = ...) -> None: ...

class BackupResponse(_message.Message):
    __slots__ = ("out_dir", "tree_size", "checkpoint_size")
    OUT_DIR_FIELD_NUMBER: _ClassVar[int]
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_SIZE_FIELD_NUMBER: _ClassVar[int]
    out_dir: str
    tree_size: int
    checkpoint_size: int
    def __init__(self, out_dir: _Optional[str] = ..., tree_size: _Optional[int] = ..., checkpoint_size: _Optional[int] = ...) -> None: ...

class AnchorNowResponse(_message.Message):
    __slots__ = ("size", "anchors", "failures")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ANCHORS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    size: int
    anchors: _containers.RepeatedCompositeFieldContainer[Anchor]
    failures: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, size: _Optional[int] = ..., anchors: _Optional[_Iterable[_Union[Anchor, _Mapping]]] = ..., failures: _Optional[_Iterable[str]] = ...) -> None: ...
