"""Selective disclosure: the SDK's private disclosures file, and receipts that open chosen fields.

docs/design.md "Decision record (v1)": sensitive values are salted commitments
(``SHA-256(salt || JCS(value))``, ``ledger.records.commitments``); the owner keeps the salt and
clear value and may later disclose single fields. The SDK writes what it keeps to a *private* file,
never into shared receipts unless a field path is asked for (``ledger_run(disclose=...)``):

    <run>.disclosures.jsonl   mode 0600, one line per record that has disclosures:
                              {"record_digest": <64 hex>, "disclosures": [{"field_path",
                               "salt", "value"}, ...]}   (RFC 8785 canonical JSON); a field
                              committed leaf by leaf is kept as {"field_path", "secret",
                              "value", "decoys"} (one secret, however many leaves)

``Receipt.disclose(paths, disclosures)`` makes a receipt that opens exactly ``paths`` (a field
path, or a per-leaf field's path and an RFC 6901 pointer: ``actual_outcome/text_regions/0/text``
opens that one leaf, with its salt and inclusion proof, and no sibling);
``ledger-verify disclose RECEIPT --path P --out R2`` does it from the files, and
``ledger-verify receipt R2`` checks each disclosed value against the committed digest and
prints exactly what was disclosed (``describe_disclosures``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ledger.core.errors import FormatError, InvalidRecordError
from ledger.core.jcs import Json, loads_strict
from ledger.records.commitments import Kept, disclosed_path, kept_from_json_obj
from ledger_client.receipts.receipt import Receipt

__all__ = [
    "describe_disclosures",
    "disclosed_values",
    "disclosures_for",
    "load_private_disclosures",
]

_LINE_FIELDS = {"record_digest", "disclosures"}


def load_private_disclosures(path: str | Path) -> dict[str, tuple[Kept, ...]]:
    """The private file's disclosures by record digest (hex); ``FormatError`` names the line."""
    where = Path(path)
    out: dict[str, tuple[Kept, ...]] = {}
    with where.open("rb") as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                obj = loads_strict(line)
                if not isinstance(obj, dict) or set(obj) != _LINE_FIELDS:
                    raise FormatError(f"expected exactly {sorted(_LINE_FIELDS)}")
                items = obj["disclosures"]
                if not isinstance(items, list) or not isinstance(obj["record_digest"], str):
                    raise FormatError("record_digest is a string, disclosures a list")
                out[obj["record_digest"]] = tuple(kept_from_json_obj(d) for d in items)
            except (FormatError, InvalidRecordError) as exc:
                raise FormatError(f"{where.name}:{number}: {exc}") from None
    return out


def disclosed_values(receipt: Receipt) -> list[dict[str, Json]]:
    """``[{"field_path", "value"}]``: what the receipt discloses (salts left out)."""
    return [{"field_path": disclosed_path(d), "value": d.value} for d in receipt.disclosures]


def _shown(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def describe_disclosures(receipt: Receipt) -> list[str]:
    """One line per disclosed field: ``  parameters.url = "https://..."`` (exactly what is open)."""
    if not receipt.disclosures:
        return ["disclosed values: none (every committed field stays closed)"]
    lines = [f"disclosed values ({len(receipt.disclosures)}, each opens its commitment):"]
    lines += [f"  {disclosed_path(d)} = {_shown(d.value)}" for d in receipt.disclosures]
    return lines


def disclosures_for(
    receipt: Receipt, private: Mapping[str, tuple[Kept, ...]] | None
) -> tuple[Kept, ...] | None:
    """The private disclosures of ``receipt``'s record (None: use the receipt's own)."""
    if private is None:
        return None
    return private.get(receipt.record_digest.hex(), ())
