"""One error tree for the whole ledger.

Every failure the ledger reports is one of these; the gRPC adapter maps them to status codes in
one table (``ledger.api.server``) and the CLIs map them to exit codes in one place.

    LedgerError
    ├── VerificationError            a well-formed claim that is false          (CLI exit 1)
    │   ├── BoundsError              index >= size, size1 > size2, ...
    │   ├── MalformedHashError       a hash that is not 32 bytes
    │   ├── ProofShapeError          wrong number of proof hashes
    │   ├── RootMismatchError        recomputed root != expected (carries both)
    │   ├── SignatureError           no known valid signature / a known key's signature fails
    │   ├── OriginMismatchError      checkpoint origin != the origin the caller expects
    │   ├── WitnessError             fewer valid witness cosignatures than required
    │   ├── TimestampError           an RFC 3161 token fails a named check (``.check``)
    │   │   └── AnchorsPendingError  anchors required, the receipt has none yet  (CLI exit 3)
    │   ├── RecordError              a record or disclosure does not match its digest
    │   └── InconsistencyError       two checkpoints that cannot both be true (fork, rollback)
    ├── FormatError                  input that does not parse                  (CLI exit 2)
    │   ├── MalformedNoteError       not a C2SP signed note / checkpoint body
    │   ├── MalformedKeyError        not a C2SP verifier or signer key string
    │   ├── KeyFileModeError         a private key file group or others may access
    │   ├── MalformedProofFileError  not a c2sp.org/tlog-proof@v1 file
    │   ├── MalformedReceiptError    not a v1 receipt (names the field)
    │   ├── MalformedTilePathError   not a canonical C2SP tlog-tiles path            (HTTP 400)
    │   ├── MalformedTileError       a tile or entry bundle whose bytes do not parse
    │   ├── InvalidRecordError       a decision record that breaks the schema (names the field)
    │   └── UnsupportedSchemaError   a schema version newer than this code reads     (CLI exit 4)
    └── ServiceError                 the log service refusing a request          gRPC status
        ├── InvalidArgumentError     bad request field; can never succeed        INVALID_ARGUMENT
        ├── OutOfRangeError          size beyond the latest checkpoint (later)   OUT_OF_RANGE
        │   └── NotYetPublishedError sequenced, no covering checkpoint yet       OUT_OF_RANGE
        ├── NotFoundError            unknown digest, checkpoint, anchor          NOT_FOUND
        ├── FailedPreconditionError  refused until the operator changes things   FAILED_PRECONDITION
        │   ├── ReadOnlyError        behind its published mark after a restore   FAILED_PRECONDITION
        │   └── NonConformingStoreError  an object store failed the conditional-write check
        ├── PushbackError            queues full; carries ``retry_after``        RESOURCE_EXHAUSTED
        ├── UnauthenticatedError     missing or bad credentials                  UNAUTHENTICATED
        ├── PermissionDeniedError    credentials without the needed scope        PERMISSION_DENIED
        ├── UnavailableError         shutting down, unreachable, timed out       UNAVAILABLE
        │   ├── LogFailedError       the writer stopped after a fault (cause)    UNAVAILABLE
        │   └── StoreUnreachableError  an object store did not answer            UNAVAILABLE
        ├── DeadlineExceededError    the call's deadline passed                  DEADLINE_EXCEEDED
        ├── UnimplementedError       the server does not know the call           UNIMPLEMENTED
        ├── InternalError            an unexpected server failure                INTERNAL
        │   └── StorageError         the store failed or holds corrupt data      INTERNAL
        │       └── DataLossError    stored data contradicts what the log signed DATA_LOSS
        │           └── ObjectConflictError  a bucket holds other bytes under a write-once key
        └── RemoteError              any other status a server answered          (its own)

Each class says whether a retry may succeed (``retryable``; ``is_retryable`` is the one retry
rule of the SDK, the sender, the monitor and the CLIs). ``ledger.api.wire`` maps every class to its
gRPC status in one table and every status back to a class (a test fails for a class without one).
"""

from __future__ import annotations

import errno
from typing import ClassVar

__all__ = [
    "SHORTAGE_ERRNOS",
    "AnchorsPendingError",
    "BoundsError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "FormatError",
    "InconsistencyError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidRecordError",
    "KeyFileModeError",
    "LedgerError",
    "LogFailedError",
    "MalformedHashError",
    "MalformedKeyError",
    "MalformedNoteError",
    "MalformedProofFileError",
    "MalformedReceiptError",
    "MalformedTileError",
    "MalformedTilePathError",
    "NonConformingStoreError",
    "NotFoundError",
    "NotYetPublishedError",
    "ObjectConflictError",
    "OriginMismatchError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ProofShapeError",
    "PushbackError",
    "ReadOnlyError",
    "RecordError",
    "RemoteError",
    "RootMismatchError",
    "ServiceError",
    "SignatureError",
    "StorageError",
    "StoreUnreachableError",
    "TimestampError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnsupportedSchemaError",
    "VerificationError",
    "WitnessError",
    "WriterActiveError",
    "WriterFencedError",
    "is_resource_shortage",
    "is_retryable",
]


class LedgerError(Exception):
    """Root of every error the ledger raises on purpose.

    ``retryable``: whether the same request may succeed later without anyone changing it.
    """

    retryable: ClassVar[bool] = False


def is_retryable(exc: BaseException) -> bool:
    """The one retry rule: a ledger error whose class says a retry may succeed."""
    return isinstance(exc, LedgerError) and exc.retryable


SHORTAGE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


def is_resource_shortage(exc: BaseException) -> bool:
    """An ``open`` or ``accept`` that failed for want of a file descriptor or memory (EMFILE,
    ENFILE, ENOMEM, ENOBUFS): nothing was done, so the same call may succeed later."""
    return isinstance(exc, OSError) and exc.errno in SHORTAGE_ERRNOS


# --- verification: the input parsed, the claim is false -------------------------------------


class VerificationError(LedgerError):
    """A well-formed claim (proof, signature, token, record) that does not hold."""


class BoundsError(VerificationError):
    """A size or index violates a stated precondition (the message names the bound)."""


class MalformedHashError(VerificationError):
    """A hash that is not exactly 32 bytes."""


class ProofShapeError(VerificationError):
    """A proof with the wrong number of hashes for its sizes."""


class RootMismatchError(VerificationError):
    """The root recomputed from a proof differs from the expected root."""

    def __init__(self, message: str, *, expected: bytes, computed: bytes) -> None:
        super().__init__(f"{message}: expected {expected.hex()}, computed {computed.hex()}")
        self.expected = expected
        self.computed = computed


class SignatureError(VerificationError):
    """No trusted valid signature, or a trusted key's signature fails."""


class OriginMismatchError(VerificationError):
    """A checkpoint whose origin is not the one the caller expects."""


class WitnessError(VerificationError):
    """Fewer valid witness cosignatures than required."""


class TimestampError(VerificationError):
    """An RFC 3161 token or response that fails one named check."""

    def __init__(self, check: str, message: str) -> None:
        super().__init__(f"{check}: {message}")
        self.check = check


class AnchorsPendingError(TimestampError):
    """Anchors are required (TSA roots given) but the receipt carries none yet: everything else
    verified, and the log's next anchor will cover it (``ledger receipt upgrade``). Neither
    valid nor a failed check: its own verdict, "anchors pending". ``report``: what the
    verifier found for everything else (a ``ReceiptReport``), when it has it."""

    def __init__(self, message: str, *, report: object = None) -> None:
        super().__init__("anchor-pending", message)
        self.report = report


class RecordError(VerificationError):
    """A record, disclosure or run that does not match what was logged."""


class InconsistencyError(VerificationError):
    """Two checkpoints that cannot both be honest: a fork or a rollback (evidence attached)."""

    def __init__(self, message: str, *, evidence: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.evidence = evidence or {}


# --- format: the input does not parse ---------------------------------------------------------


class FormatError(LedgerError, ValueError):
    """Input that does not parse as the format it claims to be."""


class MalformedNoteError(FormatError):
    """Text that is not a C2SP signed note or checkpoint."""


class MalformedKeyError(FormatError):
    """A string that is not a C2SP verifier key or signer key."""


class KeyFileModeError(FormatError):
    """A private key (or other secret) file that group or others may read or write."""


class MalformedProofFileError(FormatError):
    """A file that is not c2sp.org/tlog-proof@v1."""


class MalformedReceiptError(FormatError):
    """A receipt that does not parse as v1; ``field`` names where (``anchors[0].token``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class MalformedTilePathError(FormatError):
    """A path that is not a canonical C2SP tlog-tiles tile or entry-bundle path."""


class MalformedTileError(FormatError):
    """A hash tile or entry bundle whose bytes do not parse (wrong length, truncated entry)."""


class InvalidRecordError(FormatError):
    """A decision record that breaks the v1 schema; ``field`` names where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class UnsupportedSchemaError(FormatError):
    """A record (or receipt) of a schema version newer than this code reads: the reader must
    be upgraded; nothing is known to be wrong with the input. ``where`` names the item."""

    def __init__(self, version: int, supported: int, *, where: str = "") -> None:
        prefix = f"{where}: " if where else ""
        super().__init__(
            f"{prefix}unsupported schema version {version} (this version reads up to "
            f"{supported}), upgrade ledger-verify"
        )
        self.version = version
        self.supported = supported
        self.where = where

    def at(self, where: str) -> UnsupportedSchemaError:
        """The same error, located at ``where`` (a file and line)."""
        inner = f"{where}: {self.where}" if self.where else where
        return UnsupportedSchemaError(self.version, self.supported, where=inner)


# --- service: the log refuses a request -------------------------------------------------------


class ServiceError(LedgerError):
    """The log service refusing or failing a request."""


class InvalidArgumentError(ServiceError):
    """A request field that is wrong; the message names the field and the bound."""


class OutOfRangeError(ServiceError):
    """A size beyond what the log has published; it may be there later."""

    retryable = True


class NotYetPublishedError(OutOfRangeError):
    """The entry is sequenced but no published checkpoint covers it yet."""


class NotFoundError(ServiceError):
    """An unknown record digest, checkpoint size or anchor."""


class FailedPreconditionError(ServiceError):
    """Refused until the operator changes something (no TSA configured, a refused token)."""


class PushbackError(ServiceError):
    """The log is saturated; retry after ``retry_after`` seconds."""

    retryable = True

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UnauthenticatedError(ServiceError):
    """A request without valid credentials."""


class PermissionDeniedError(ServiceError):
    """Valid credentials without the scope the call needs."""


class UnavailableError(ServiceError):
    """The log is shutting down, unreachable, or did not answer in time; retry."""

    retryable = True


class DeadlineExceededError(ServiceError):
    """The call's deadline passed before the answer came."""

    retryable = True


class UnimplementedError(ServiceError):
    """The server does not implement the call (an older server)."""


class InternalError(ServiceError):
    """An unexpected failure inside the server (the server log has the cause)."""

    retryable = True


class StorageError(InternalError):
    """The store failed or holds data that contradicts itself."""


class DataLossError(StorageError):
    """Stored data contradicts what the log signed or published (a rollback, a damaged node,
    entry or index): the log refuses to answer rather than answer wrongly."""

    retryable = False


class ObjectConflictError(DataLossError):
    """An object store holds, under a key the log writes once, other content than the log's
    (another log, or a rewritten history in the bucket): publishing stops."""


class StoreUnreachableError(UnavailableError):
    """An object store did not answer (network, credentials, throttling): publishing waits."""


class WriterFencedError(UnavailableError):
    """Primary mode: the bucket's lock shows another writer (a standby took over, or a second
    active writer); this one stops sequencing and never acknowledges again (retry elsewhere)."""


class WriterActiveError(UnavailableError):
    """Primary mode: another writer holds a live lease on the bucket's lock; a standby waits."""


class NonConformingStoreError(FailedPreconditionError):
    """An object store that has not passed the conditional-write check (``ledger objstore
    check``) is refused for anything that relies on conditional writes."""


class ReadOnlyError(FailedPreconditionError):
    """The log was restored behind its published high-water mark and takes no appends until
    its tree is consistent with the mark again (``ledger restore``)."""


class LogFailedError(UnavailableError):
    """The log's writer stopped after a fault; ``__cause__`` is the fault. Appends fail at once
    until the log is restarted (retryable: clients keep their records and retry)."""


class RemoteError(ServiceError):
    """A status the ledger's own table does not produce (CANCELLED, ABORTED, UNKNOWN, ...)."""

    def __init__(self, message: str, *, status: str, retryable: bool) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable  # type: ignore[misc]
