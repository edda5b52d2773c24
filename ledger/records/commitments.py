"""Salted commitments to sensitive record fields, and selective disclosure of one field.

docs/design.md "Decision record (v1)": a sensitive value ``v`` is replaced in a record by the object
``{"commitment": "sha256:<hex>"}`` where ``<hex>`` is ``SHA-256(salt || JCS(v))`` (RFC 8785
canonical bytes, ``ledger.core.jcs``). The log and auditors see only the digest; the owner keeps
``(field_path, value, salt)`` as a ``Disclosure`` and may later reveal that one field. Deleting
the salt and the value erases the content while every proof over the record stays valid.

The salt is exactly ``SALT_BYTES`` (16, i.e. 128 bits) long. A fixed length keeps the
commitment binding: with salts of varying length the bytes ``salt || JCS(12)`` equal
``(salt || b"1") || JCS(2)``, and the owner could "disclose" 2 for a committed 12.

An object whose *only* member is ``commitment`` is a commitment everywhere in a record (its
value must then be ``sha256:`` + 64 lowercase hex digits, or from schema v2 on the per-leaf form
``sha256-tree:<leaves>:`` + 64 hex digits); objects with more members are data.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias, TypeGuard, Union

from ledger.core.errors import InvalidRecordError, RecordError
from ledger.core.jcs import Json, canonical_bytes, child_path, loads_strict, parse_path, to_plain
from ledger.core.limits import HASH_SIZE

__all__ = [
    "COMMITMENT_KEY",
    "MAX_LEAVES",
    "SALT_BYTES",
    "Commitment",
    "Disclosure",
    "JsonValue",
    "check_disclosure_in",
    "commit",
    "commitment_digest",
    "is_commitment_obj",
    "resolve_field",
]

SALT_BYTES = 16
COMMITMENT_KEY = "commitment"
_PREFIX = "sha256:"
_COMMITMENT_TEXT = re.compile(r"sha256:[0-9a-f]{64}")
_TREE_PREFIX = "sha256-tree:"
_TREE_TEXT = re.compile(r"sha256-tree:([1-9][0-9]{0,6}):([0-9a-f]{64})")
MAX_LEAVES = 1_048_576  # a record is at most 1 MiB, so it never holds more leaves than bytes
_HEX = re.compile(r"(?:[0-9a-f]{2})*")
_DISCLOSURE_FIELDS = ("field_path", "salt", "value")

JsonValue: TypeAlias = Union[
    bool, int, float, str, "Commitment", Sequence["JsonValue"], Mapping[str, "JsonValue"], None
]


@dataclass(frozen=True, slots=True, repr=False)
class Commitment:
    """A commitment in a record: whole-field or per-leaf.

    * ``leaves == 0``: ``{"commitment": "sha256:<hex>"}``, SHA-256 over ``salt || JCS(value)``.
    * ``leaves >= 1`` (schema v2 on): ``{"commitment": "sha256-tree:<leaves>:<hex>"}``, the
      Merkle root over the sorted commitments of the value's ``leaves`` JSON leaves
      (``ledger.records.leaves``), so one leaf can be disclosed alone.
    """

    digest: bytes
    leaves: int = 0

    def __repr__(self) -> str:
        return f"Commitment({self.text()})"

    def __post_init__(self) -> None:
        if not isinstance(self.digest, bytes) or len(self.digest) != HASH_SIZE:
            raise InvalidRecordError(COMMITMENT_KEY, "a commitment digest is exactly 32 bytes")
        if isinstance(self.leaves, bool) or not isinstance(self.leaves, int):
            raise InvalidRecordError(COMMITMENT_KEY, "a leaf count is an integer")
        if not 0 <= self.leaves <= MAX_LEAVES:
            raise InvalidRecordError(COMMITMENT_KEY, f"a leaf count is 0 to {MAX_LEAVES}")

    @property
    def per_leaf(self) -> bool:
        """True for a per-leaf (tree) commitment."""
        return self.leaves > 0

    def text(self) -> str:
        """``sha256:<hex>`` or ``sha256-tree:<leaves>:<hex>``."""
        if self.leaves:
            return f"{_TREE_PREFIX}{self.leaves}:{self.digest.hex()}"
        return _PREFIX + self.digest.hex()

    def to_json_obj(self) -> dict[str, str]:
        """The record form: ``{"commitment": "sha256:<64 lowercase hex>"}`` (or the tree form)."""
        return {COMMITMENT_KEY: self.text()}

    @classmethod
    def from_json_obj(cls, obj: object, path: str = "") -> Commitment:
        """Parse the record form; ``path`` names the field in error messages."""
        if not is_commitment_obj(obj):
            raise InvalidRecordError(path or "$", 'expected {"commitment": "sha256:<hex>"}')
        text = obj[COMMITMENT_KEY]
        if isinstance(text, str) and _COMMITMENT_TEXT.fullmatch(text):
            return cls(bytes.fromhex(text[len(_PREFIX) :]))
        if isinstance(text, str) and (tree := _TREE_TEXT.fullmatch(text)):
            return cls(bytes.fromhex(tree.group(2)), int(tree.group(1)))
        raise InvalidRecordError(
            child_path(path, COMMITMENT_KEY),
            "expected 'sha256:' + 64 lowercase hex digits, or 'sha256-tree:<leaves>:' + 64",
        )


def is_commitment_obj(obj: object) -> TypeGuard[Mapping[str, object]]:
    """True for an object whose only member is ``commitment`` (the reserved commitment form)."""
    return isinstance(obj, Mapping) and len(obj) == 1 and COMMITMENT_KEY in obj


def _check_salt(salt: object) -> bytes:
    if not isinstance(salt, bytes) or len(salt) != SALT_BYTES:
        raise InvalidRecordError("salt", f"a salt is exactly {SALT_BYTES} bytes")
    return salt


def commitment_digest(value: object, salt: bytes) -> bytes:
    """``SHA-256(salt || JCS(value))``; requires a ``SALT_BYTES``-long salt."""
    return hashlib.sha256(_check_salt(salt) + canonical_bytes(value, safe_numbers=True)).digest()


@dataclass(frozen=True, slots=True)
class Disclosure:
    """What the owner reveals for one committed field: its path, clear value and salt."""

    field_path: str
    value: Json
    salt: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.field_path, str):
            raise InvalidRecordError("field_path", "expected a string")
        parse_path(self.field_path)
        _check_salt(self.salt)
        object.__setattr__(self, "value", to_plain(self.value, "value", safe_numbers=True))

    def commitment(self) -> Commitment:
        """The commitment this disclosure opens."""
        return Commitment(commitment_digest(self.value, self.salt))

    def at(self, field_path: str) -> Disclosure:
        """The same value and salt, placed at ``field_path`` in a record."""
        return replace(self, field_path=field_path)

    def to_json_obj(self) -> dict[str, Json]:
        """``{"field_path": ..., "salt": <hex>, "value": ...}``."""
        return {"field_path": self.field_path, "salt": self.salt.hex(), "value": self.value}

    @classmethod
    def from_json_obj(cls, obj: object) -> Disclosure:
        """Inverse of ``to_json_obj``; raises ``InvalidRecordError`` naming the field."""
        if not isinstance(obj, Mapping) or set(obj) != set(_DISCLOSURE_FIELDS):
            raise InvalidRecordError("$", f"a disclosure has exactly {list(_DISCLOSURE_FIELDS)}")
        salt = obj["salt"]
        if not isinstance(salt, str) or not _HEX.fullmatch(salt):
            raise InvalidRecordError("salt", "expected lowercase hex")
        path = obj["field_path"]
        if not isinstance(path, str):
            raise InvalidRecordError("field_path", "expected a string")
        return cls(path, to_plain(obj["value"], "value", safe_numbers=True), bytes.fromhex(salt))

    def to_json(self) -> str:
        """RFC 8785 canonical JSON text of ``to_json_obj()``."""
        return canonical_bytes(self.to_json_obj()).decode("utf-8")

    @classmethod
    def from_json(cls, text: str | bytes) -> Disclosure:
        """Inverse of ``to_json``."""
        return cls.from_json_obj(loads_strict(text))


def commit(
    value: JsonValue, salt: bytes | None = None, *, field_path: str = ""
) -> tuple[Commitment, Disclosure]:
    """Commit to ``value`` with a fresh (or the given) 16-byte salt.

    Put the ``Commitment`` in the record in place of the value; keep the ``Disclosure`` private
    (set or change its ``field_path`` with ``Disclosure.at``).
    """
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    disclosure = Disclosure(field_path, to_plain(value, "value", safe_numbers=True), salt)
    return disclosure.commitment(), disclosure


def resolve_field(record_obj: Json, path: str) -> Json:
    """The member of a record's JSON object at field path ``path`` (``RecordError`` if none)."""
    node = record_obj
    for part in parse_path(path):
        if isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
            continue
        if not (isinstance(node, dict) and isinstance(part, str) and part in node):
            raise RecordError(f"{path or '$'}: the record has no such field")
        node = node[part]
    return node


def check_disclosure_in(record_obj: Json, disclosure: Disclosure) -> None:
    """Check that the field ``disclosure.field_path`` of ``record_obj`` commits to its value.

    ``record_obj`` is a record's JSON object; the caller checks that record's digest first.
    Raises ``RecordError`` if the field is absent, not a commitment, or does not match.
    """
    path = disclosure.field_path
    target = resolve_field(record_obj, path)
    if not is_commitment_obj(target):
        raise RecordError(f"{path or '$'}: the field is not a commitment")
    committed = Commitment.from_json_obj(target, path)
    if committed.per_leaf:
        raise RecordError(f"{path or '$'}: a per-leaf commitment; disclose one leaf of it")
    opened = disclosure.commitment()
    if committed != opened:
        raise RecordError(
            f"{path}: disclosed value and salt give {opened.text()}, "
            f"the record commits to {committed.text()}"
        )
