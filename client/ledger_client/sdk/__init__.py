"""The agent SDK: ``LedgerClient``, ``@decision``, ``ledger_run`` and their helpers.

Owns: the clients (``client``), the run context and decorators (``context``, ``decorators``),
captured values, the field classification and links (``capture``, ``classify``, ``links``), the
run context in threads and child processes (``propagate``), the durable spool and the
background sender (``spool``, ``spool_format``, ``sender``), run files (``run_file``), the
agent key and chain state (``agent``) and the SDK's errors (``errors``). The public names are
re-exported here lazily (PEP 562), so importing one SDK module (the spool, a run file) does not
load grpc.

May import: ``ledger.core``, ``ledger.records``, ``ledger.fileio``, ``ledger_client.receipts``,
``ledger_client.remote``; library ``multiprocessing`` (child processes joining a run).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger_client.sdk.client import (
        MEMORY_SPOOL_BYTES,
        AnchorTimeoutError,
        AsyncLedgerClient,
        Backoff,
        Capture,
        ClientClosedError,
        ClientError,
        ContextThreadPoolExecutor,
        DeliveryError,
        DeliveryWarning,
        LedgerClient,
        RecordTooLargeError,
        Run,
        RunEntry,
        RunStateError,
        SenderOptions,
        SpoolError,
        SpoolFullError,
        UnrecordedDecisionWarning,
        content_digest,
        current_run,
        decision,
        derived_from,
        emit,
        jsonable,
        ledger_run,
    )

__all__ = [
    "MEMORY_SPOOL_BYTES",
    "AnchorTimeoutError",
    "AsyncLedgerClient",
    "Backoff",
    "Capture",
    "ClientClosedError",
    "ClientError",
    "ContextThreadPoolExecutor",
    "DeliveryError",
    "DeliveryWarning",
    "LedgerClient",
    "RecordTooLargeError",
    "Run",
    "RunEntry",
    "RunStateError",
    "SenderOptions",
    "SpoolError",
    "SpoolFullError",
    "UnrecordedDecisionWarning",
    "content_digest",
    "current_run",
    "decision",
    "derived_from",
    "emit",
    "jsonable",
    "ledger_run",
]


def __getattr__(name: str) -> Any:
    """The public names of ``ledger_client.sdk.client``, loaded on first use (PEP 562), so that
    importing one SDK module (the spool, a run file) does not load grpc."""
    if name in __all__:
        return getattr(importlib.import_module("ledger_client.sdk.client"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
