"""Turning an agent's Python values into record evidence: digests, commitments or content.

docs/design.md "Decision record (v1)": evidence holds digests of what a decision saw, never its
content. ``jsonable`` maps a Python value to JSON by fixed rules, and ``content_digest`` is
SHA-256 over its RFC 8785 canonical bytes (``ledger.core.jcs``), as 64 lowercase hex digits, so
anyone holding the same value can recompute it. Rules of ``jsonable``:

* ``None``, ``bool``, ``str``: themselves; ``int`` and finite ``float`` within +-(2**53 - 1):
  themselves, other numbers: their ``repr`` (a string);
* ``bytes``: ``{"base64": <standard base64>}``;
* mappings: objects with ``str(key)`` keys; lists and tuples: arrays; sets: arrays sorted by
  the canonical bytes of their items;
* dataclass instances: objects of their fields; objects with ``to_json_obj()`` or pydantic's
  ``model_dump(mode="json")``: what those return;
* anything else: ``repr(value)`` (give such values a ``to_json_obj`` for a stable digest).

A plain digest of a low-entropy value (``"yes"``, a small number) can be guessed by whoever
sees the record; ``Capture.COMMIT`` (the default of ``@decision`` and the bridges) uses salted
commitments (``ledger.records.commitments``) instead: a non-empty object or array is committed
leaf by leaf (``sha256-tree:``, one field secret kept), so one leaf of a tool's output can be
disclosed alone; any other value whole (``sha256:``, value and salt kept).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import math
from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Any

from ledger.core.jcs import MAX_SAFE_INTEGER, Json, canonical_bytes, child_path
from ledger.records.commitments import Kept, commit, commit_leaves

__all__ = [
    "Capture",
    "CapturedValue",
    "capture_arguments",
    "capture_value",
    "content_digest",
    "jsonable",
]

_MAX_DEPTH = 48


class Capture(StrEnum):
    """What of a decorated function's arguments and result goes into its record."""

    DIGEST = "digest"  # unsalted evidence digests only: guessable for low-entropy values
    COMMIT = "commit"  # salted commitments in the record; disclosures kept by the SDK (default)
    CONTENT = "content"  # the values themselves, in clear


def _number(value: int | float) -> Json:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value if abs(value) <= MAX_SAFE_INTEGER else repr(value)


def _object(value: object, depth: int) -> Json:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: jsonable(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)
        }
    for method, kwargs in (("to_json_obj", {}), ("model_dump", {"mode": "json"})):
        convert = getattr(value, method, None)
        if callable(convert):
            return jsonable(convert(**kwargs), depth + 1)
    return repr(value)


def jsonable(value: object, depth: int = 0) -> Json:
    """``value`` as plain JSON by the rules in the module docstring."""
    if depth > _MAX_DEPTH:
        return repr(value)
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        items = [jsonable(v, depth + 1) for v in value]
        return sorted(items, key=lambda item: canonical_bytes(item, safe_numbers=True))
    return _object(value, depth)


def content_digest(value: object) -> str:
    """SHA-256 of the RFC 8785 bytes of ``jsonable(value)``, 64 lowercase hex digits."""
    return hashlib.sha256(canonical_bytes(jsonable(value), safe_numbers=True)).hexdigest()


@dataclasses.dataclass(frozen=True, slots=True)
class CapturedValue:
    """One value as a record holds it: ``digest`` for evidence, ``value`` for the record field.

    ``value`` is ``None`` (digest only), a ``Commitment`` or the JSON content; ``disclosure``
    opens a commitment (its field path is the one given to ``capture_value``): a
    ``Disclosure`` for a whole-field commitment, a ``LeafSecret`` for a per-leaf one.
    """

    digest: str
    value: Any
    disclosure: Kept | None = None


def capture_value(value: object, mode: Capture, field_path: str) -> CapturedValue:
    """Capture ``value`` for the record field ``field_path`` under ``mode``."""
    plain = jsonable(value)
    if mode is Capture.COMMIT and isinstance(plain, dict | list) and plain:
        tree, secret = commit_leaves(plain, field_path=field_path)
        return CapturedValue(tree.digest.hex(), tree, secret)
    if mode is Capture.COMMIT:
        commitment, disclosure = commit(plain, field_path=field_path)
        return CapturedValue(commitment.digest.hex(), commitment, disclosure)
    digest = hashlib.sha256(canonical_bytes(plain, safe_numbers=True)).hexdigest()
    return CapturedValue(digest, plain if mode is Capture.CONTENT else None)


def capture_arguments(
    arguments: Mapping[str, object], mode: Capture, clear: Collection[str] = ()
) -> tuple[str, dict[str, Any], list[Kept]]:
    """(digest of all arguments, the ``parameters`` field, disclosures) under ``mode``.

    With ``COMMIT`` the digest is the SHA-256 of the canonical object of the per-argument
    commitments (salted, so it reveals nothing); otherwise of the arguments themselves. With
    ``COMMIT``, an argument named in ``clear`` (``"parameters.<name>"``, or ``"parameters"``
    for all) is kept in clear.
    """
    if mode is not Capture.COMMIT:
        whole = capture_value(dict(arguments), mode, "parameters")
        return whole.digest, dict(whole.value) if whole.value is not None else {}, []
    parameters: dict[str, Any] = {}
    disclosures: list[Kept] = []
    for name, value in arguments.items():
        path = child_path("parameters", name)
        if "parameters" in clear or path in clear:
            parameters[name] = jsonable(value)
            continue
        captured = capture_value(value, mode, path)
        parameters[name] = captured.value
        assert captured.disclosure is not None
        disclosures.append(captured.disclosure)
    digest = hashlib.sha256(canonical_bytes(parameters)).hexdigest()
    return digest, dict(parameters), disclosures
