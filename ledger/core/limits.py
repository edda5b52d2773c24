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
    "MAX_ITEM_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_METADATA",
    "MAX_PAGE",
    "MAX_PROOFS_PER_CALL",
    "MAX_RECEIPT_BYTES",
    "MAX_RECEIPT_OVERHEAD",
    "MAX_RECORD_BYTES",
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

# The one size limit of decision records (docs/formats.md "Size limit"). A record's RFC 8785 form
# is at most MAX_RECORD_BYTES, and so are the canonical bytes of the disclosures kept for it; the
# SDK refuses anything larger where the record is made. Readers accept that plus the rest of a
# receipt (proofs, signed notes with cosignatures, anchor tokens with their certificates, the
# previous checkpoint): MAX_RECEIPT_OVERHEAD. No earlier SDK refused a record at all, and every
# earlier reader refused run items over 1 MiB, record beside and inside the receipt together:
# these bounds accept everything any earlier reader did.
MAX_RECORD_BYTES = 1 << 20  # one record, RFC 8785 bytes (and its disclosures, likewise)
MAX_RECEIPT_OVERHEAD = 256 << 10  # a receipt without its record and disclosures
MAX_RECEIPT_BYTES = 2 * MAX_RECORD_BYTES + MAX_RECEIPT_OVERHEAD  # record + disclosures + rest
MAX_ITEM_BYTES = MAX_RECORD_BYTES + MAX_RECEIPT_BYTES  # a run item: the record beside its receipt
