"""The public API of ``ledger_client`` (re-exported lazily from its modules) and the import
paths the README shows."""

from __future__ import annotations

import importlib

import pytest

import ledger_client
import ledger_client.sdk
from ledger_client.receipts import receipt, run_verify, verify
from ledger_client.sdk import client

HOMES = {
    **{name: client for name in ledger_client.sdk.__all__},
    **{name: receipt for name in ("MalformedReceiptError", "Receipt", "ReceiptAnchor")},
    **{name: verify for name in ("ReceiptReport", "verify_receipt")},
    **{name: run_verify for name in ("RunItem", "RunVerdict", "verify_run")},
}


@pytest.mark.parametrize("name", sorted(ledger_client.__all__))
def test_each_public_name_is_its_modules_object(name: str) -> None:
    assert getattr(ledger_client, name) is getattr(HOMES[name], name)
    assert name in dir(ledger_client)


def test_the_public_api_is_the_sdk_and_the_verifier() -> None:
    assert sorted(ledger_client.__all__) == sorted(HOMES)
    assert all(getattr(ledger_client.sdk, name) is getattr(client, name) for name in client.__all__)
    assert ledger_client.sdk.__all__ == client.__all__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'verify_everything'"):
        _ = ledger_client.verify_everything
    with pytest.raises(ImportError, match="verify_everything"):
        exec("from ledger_client import verify_everything", {})


def test_the_import_paths_the_readme_shows() -> None:
    namespace: dict[str, object] = {}
    exec(
        "from ledger_client import decision, ledger_run, LedgerClient\n"
        "from ledger_client.sdk import LedgerClient as C, decision as d, emit, ledger_run as r\n"
        "from ledger.records import Outcome\n"
        "from ledger_client.bridges.langchain import LedgerCallbackHandler\n"
        "from ledger_client.bridges.otel import LedgerSpanProcessor\n",
        namespace,
    )
    assert namespace["LedgerClient"] is namespace["C"] is client.LedgerClient
    assert namespace["decision"] is namespace["d"] and namespace["ledger_run"] is namespace["r"]
    records = importlib.import_module("ledger.records.decision")
    assert namespace["Outcome"] is records.Outcome
