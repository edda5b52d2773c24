"""Errors of the agent SDK (``ledger_client.sdk``), under the ledger's one error tree.

LedgerError                      (ledger.core.errors)
└── ClientError                  the agent-side client cannot do what was asked
    ├── SpoolError               the spool file is unusable: locked by another process,
    │                            not a spool, unwritable, or corrupted while in use
    ├── SpoolFullError           the overflow policy refused a record (``overflow="raise"``,
    │                            or ``"block"`` waited past its timeout); nothing was written
    ├── DeliveryError            the log refused a batch for good (a non-retryable gRPC
    │                            status); the records stay in the spool
    ├── ClientClosedError        the client was closed
    └── RunStateError            no run is open here, or the run is already closed

DeliveryWarning (a ``UserWarning``, not an error): the log cannot be reached or refuses the
client (connection refused, TLS mismatch, bad credentials); the records stay spooled and the
message names how they get delivered later.
"""

from __future__ import annotations

from ledger.core.errors import LedgerError

__all__ = [
    "AnchorTimeoutError",
    "ClientClosedError",
    "ClientError",
    "DeliveryError",
    "DeliveryWarning",
    "RecordTooLargeError",
    "RunStateError",
    "SpoolError",
    "SpoolFullError",
]


class ClientError(LedgerError):
    """The agent-side client cannot do what was asked."""


class SpoolError(ClientError):
    """The spool file is locked by another process, not a spool, unwritable or corrupted."""


class SpoolFullError(ClientError):
    """The overflow policy refused a record; it was not written anywhere."""


class DeliveryError(ClientError):
    """The log refused a batch with a non-retryable status; the records stay spooled."""

    def __init__(self, message: str, *, status: str) -> None:
        super().__init__(message)
        self.status = status


class RecordTooLargeError(ClientError, ValueError):
    """A record (or the disclosures kept for it) over ``ledger.core.limits.MAX_RECORD_BYTES``,
    refused before it is spooled: no verifier would read it (docs/formats.md "Size limit")."""


class ClientClosedError(ClientError):
    """The client is closed."""


class RunStateError(ClientError):
    """No run is open in this context, or the run is already closed."""


class AnchorTimeoutError(TimeoutError):
    """A run waited (``wait_anchor``) and no anchor covered it in time; its receipts file was
    written without anchors (``ledger receipt upgrade`` adds them later)."""


class DeliveryWarning(UserWarning):
    """The log cannot be reached or refuses the client; the records stay spooled."""
