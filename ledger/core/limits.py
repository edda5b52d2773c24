"""Protocol limits and wire names of ``ledger.v1`` (proto/ledger/v1/ledger.proto), defined once.

Pure constants: the server, the service, the remote client and the SDK all read them from here,
so a limit the server enforces and the limit a client plans for cannot drift apart.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_ANCHORED_SIZES",
    "HASH_SIZE",
    "MAX_ANCHORED_SIZES",
    "MAX_BATCH",
    "MAX_GROUP",
    "MAX_MESSAGE_BYTES",
    "MAX_METADATA",
    "MAX_PAGE",
    "MAX_PROOFS_PER_CALL",
    "MAX_REQUEST_BYTES",
    "RETRY_AFTER_KEY",
]

HASH_SIZE = 32  # SHA-256: every leaf hash, node, root and record digest (RFC 6962 §2.1)
MAX_METADATA = 1024  # bytes of appender metadata bound into one leaf
MAX_BATCH = 10_000  # digests in one AppendRecords / StreamAppend group
MAX_GROUP = 50_000  # digests in one group commit (many requests)
MAX_PAGE = 1_000  # entries in one GetEntries answer
MAX_PROOFS_PER_CALL = 1_000  # inclusion proofs (or receipts) in one call
DEFAULT_ANCHORED_SIZES = 100  # ListAnchoredSizes with limit 0
MAX_ANCHORED_SIZES = 10_000  # the most ListAnchoredSizes lists in one call
MAX_MESSAGE_BYTES = 16 << 20  # gRPC send/receive limit, both sides
MAX_REQUEST_BYTES = 2 << 20  # the largest request the server's gRPC core accepts (memory bound)
RETRY_AFTER_KEY = "retry-after-ms"  # trailing metadata of RESOURCE_EXHAUSTED: wait this long
