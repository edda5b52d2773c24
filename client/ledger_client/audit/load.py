"""Reading run files fast for the index (``ledger-verify index``): the same items as
``ledger_client.cli_receipts.load_run``, at a fraction of the cost.

docs/design.md "Receipts". ``load_run`` parses strictly (duplicate member names refused, every
value walked) and validates the record twice (beside the receipt and inside it). Indexing
200,000 receipts cannot afford that, so ``load_run_fast``:

* parses each line with the standard library's C parser (refusing NaN and Infinity; a
  duplicate member name keeps its last value, as Python's ``json`` does: harmless here, since
  the record digest and the receipt's checks bind what is verified to what was logged);
* validates the record once (``DecisionRecord.from_json_obj``) when the receipt carries the
  same record as the item (compared as parsed JSON), and builds the receipt directly from its
  decoded fields (the receipt's format checks still run in its constructor; the checkpoint
  note's, memoised, once per distinct note);
* computes the record digest once, from the JSON as read (``LoadedItem.known_digest``), which
  ``audit_verify.audit_run`` uses instead of re-serialising the record;
* falls back to the strict reader for any line it does not recognise, so malformed input gets
  the same clear error (``FormatError`` naming the file and line) as ``ledger-verify run``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rfc8785

from ledger.core.errors import FormatError
from ledger.records.decision import DecisionRecord
from ledger_client.cli.receipts import load_run
from ledger_client.receipts.receipt import RECEIPT_FIELDS, RECEIPT_V1, Receipt, ReceiptAnchor
from ledger_client.receipts.run_verify import RunItem

__all__ = ["LoadedItem", "load_run_fast"]

_FIELDS = frozenset(RECEIPT_FIELDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedItem(RunItem):
    """A ``RunItem`` that knows its record digest: SHA-256 of the RFC 8785 form of the record
    as read (equal to ``record_digest(record)``: records read and write as exact inverses)."""

    known_digest: bytes


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _receipt(obj: dict[str, Any], record: DecisionRecord | None) -> Receipt:
    """The receipt from its JSON object (shape known good), with ``record`` attached."""
    b64 = base64.b64decode
    if obj["disclosures"] or obj["previous"] is not None:
        raise ValueError("not the common shape")  # the strict reader handles these
    return Receipt(
        record_digest=bytes.fromhex(obj["record_digest"]),
        leaf=b64(obj["leaf"], validate=True),
        index=obj["index"],
        tree_size=obj["tree_size"],
        inclusion_proof=tuple(b64(h, validate=True) for h in obj["inclusion_proof"]),
        checkpoint=obj["checkpoint"],
        anchors=tuple(
            ReceiptAnchor(
                tsa=a["tsa"],
                token=b64(a["token"], validate=True),
                certificates=tuple(b64(c, validate=True) for c in a["certificates"]),
            )
            for a in obj["anchors"]
        ),
        record=record,
    )


def _item(line: bytes, source: str) -> RunItem | None:
    """The item of one line, or None when the strict reader must decide."""
    try:
        obj = json.loads(line, parse_constant=_no_constant)
        receipt_obj = obj["receipt"]
        if set(obj) - {"record", "receipt"} or set(receipt_obj) != _FIELDS:
            return None
        if receipt_obj["receipt"] != RECEIPT_V1:
            return None
        inner, beside = receipt_obj["record"], obj.get("record")
        given = beside if beside is not None else inner
        if given is None or (inner is not None and inner != given):
            return None
        record = DecisionRecord.from_json_obj(given)
        receipt = _receipt(receipt_obj, record if inner is not None else None)
        digest = hashlib.sha256(rfc8785.dumps(given)).digest()
    except (
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
        FormatError,
        rfc8785.CanonicalizationError,
    ):
        return None
    return LoadedItem(source=source, record=record, receipt=receipt, known_digest=digest)


def load_run_fast(path: str | Path) -> list[RunItem]:
    """The items of a run file (a ``*.json`` folder goes to the strict reader)."""
    where = Path(path)
    if where.is_dir():
        return load_run(str(where))
    items: list[RunItem] = []
    with where.open("rb") as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            item = _item(line, f"{where.name}:{number}")
            if item is None:
                return load_run(str(where))  # the strict reader names what is wrong
            items.append(item)
    if not items:
        raise FormatError(f"{path}: no records found")
    return items
