"""ledger_client: the agent SDK, the offline verifier (``ledger-verify``) and the client side of
the log's protocols. Installed under the import name ``ledger_client`` (the folder is
``client/``).

Owns: the public API, re-exported here and loaded on first use (PEP 562), so that importing
``ledger_client`` loads nothing else and the offline verifier never loads grpc::

    from ledger_client import LedgerClient, decision, ledger_run    # the agent SDK
    from ledger_client import Receipt, verify_receipt, verify_run   # the offline verifier

The packages: ``receipts`` (receipts and runs, verified offline), ``remote`` (the network: gRPC,
tiles, fetching receipts, following a log), ``sdk`` (recording an agent's decisions), ``audit``
(many runs: lineage, timelines, reports, an index), ``cli`` (``ledger-verify``) and ``bridges``
(LangChain, OpenTelemetry). Anything not re-exported here or in ``ledger_client.sdk`` may change.

May import: ``ledger_client.sdk``, ``ledger_client.receipts``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger_client.receipts.receipt import MalformedReceiptError, Receipt, ReceiptAnchor
    from ledger_client.receipts.run_verify import RunItem, RunVerdict, verify_run
    from ledger_client.receipts.verify import ReceiptReport, verify_receipt
    from ledger_client.sdk import (
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

__version__ = "0.1.0"

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
    "MalformedReceiptError",
    "Receipt",
    "ReceiptAnchor",
    "ReceiptReport",
    "RecordTooLargeError",
    "Run",
    "RunEntry",
    "RunItem",
    "RunStateError",
    "RunVerdict",
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
    "verify_receipt",
    "verify_run",
]

_VERIFIER = {
    "MalformedReceiptError": "ledger_client.receipts.receipt",
    "Receipt": "ledger_client.receipts.receipt",
    "ReceiptAnchor": "ledger_client.receipts.receipt",
    "ReceiptReport": "ledger_client.receipts.verify",
    "RunItem": "ledger_client.receipts.run_verify",
    "RunVerdict": "ledger_client.receipts.run_verify",
    "verify_receipt": "ledger_client.receipts.verify",
    "verify_run": "ledger_client.receipts.run_verify",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562); the SDK's names come
    from ``ledger_client.sdk``, itself lazy."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_VERIFIER.get(name, "ledger_client.sdk")), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
