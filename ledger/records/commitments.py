"""Salted commitments to sensitive record fields, and selective disclosure of one field or leaf.

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

Per-leaf commitments (schema v2 on, docs/formats.md "Per-leaf commitments"):

* A *leaf* is a JSON scalar, an empty array or an empty object, named by its RFC 6901 JSON
  Pointer relative to the committed value (``""`` for a scalar value itself).
* Each leaf's 16-byte salt is ``HMAC-SHA-256(secret, pointer)`` truncated, from one 32-byte
  *field secret*, so the owner keeps one secret per committed field, not one salt per leaf.
* The leaf commitment is ``SHA-256(JCS([hex(salt), pointer, value]))``: it binds the pointer, so
  a leaf moved to another place does not verify.
* The record holds ``Commitment(root, leaves=N)`` (``{"commitment": "sha256-tree:N:<hex>"}``):
  the RFC 6962 Merkle tree hash over the ``N`` leaf commitments sorted bytewise (plus optional
  decoys, each ``HMAC-SHA-256(secret, "decoy:<i>")``), so key names, array lengths and order are
  hidden beyond ``N``.
* ``LeafDisclosure`` opens one leaf: the field's path in the record, the pointer, the value, the
  leaf's salt and its inclusion proof in the sorted tree; nothing else of the field.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias, TypeGuard, Union

from ledger.core.errors import InvalidRecordError, RecordError, VerificationError
from ledger.core.jcs import Json, canonical_bytes, child_path, loads_strict, parse_path, to_plain
from ledger.core.limits import HASH_SIZE
from ledger.core.merkle import leaf_hash, root, verify_inclusion

__all__ = [
    "COMMITMENT_KEY",
    "MAX_LEAVES",
    "SALT_BYTES",
    "SECRET_BYTES",
    "AnyDisclosure",
    "Commitment",
    "Disclosure",
    "JsonValue",
    "Kept",
    "LeafDisclosure",
    "LeafSecret",
    "check_disclosure_in",
    "commit",
    "commit_leaves",
    "commitment_digest",
    "disclosed_path",
    "disclosure_from_json_obj",
    "escape_token",
    "is_commitment_obj",
    "json_leaves",
    "kept_from_json_obj",
    "leaf_commitment",
    "leaf_salt",
    "resolve_field",
    "resolve_pointer",
    "select_disclosures",
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
            if cls is Commitment:  # 32 bytes from 64 hex digits, no leaves: what the
                made = object.__new__(cls)  # constructor would check holds; set directly
                _SET_DIGEST(made, bytes.fromhex(text[len(_PREFIX) :]))
                _SET_LEAVES(made, 0)
                return made
            return cls(bytes.fromhex(text[len(_PREFIX) :]))
        if isinstance(text, str) and (tree := _TREE_TEXT.fullmatch(text)):
            return cls(bytes.fromhex(tree.group(2)), int(tree.group(1)))
        raise InvalidRecordError(
            child_path(path, COMMITMENT_KEY),
            "expected 'sha256:' + 64 lowercase hex digits, or 'sha256-tree:<leaves>:' + 64",
        )


_SET_DIGEST, _SET_LEAVES = (getattr(Commitment, n).__set__ for n in ("digest", "leaves"))


def is_commitment_obj(obj: object) -> TypeGuard[Mapping[str, object]]:
    """True for an object whose only member is ``commitment`` (the reserved commitment form)."""
    if type(obj) is dict:  # the usual case, without the Mapping protocol's check
        return len(obj) == 1 and COMMITMENT_KEY in obj
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


def _check_whole_in(record_obj: Json, disclosure: Disclosure) -> None:
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


# --- per-leaf commitments (schema v2 on; docs/formats.md "Per-leaf commitments") ---------------

SECRET_BYTES = 32
_LEAF_FIELDS = ("field_path", "index", "leaves", "pointer", "proof", "salt", "value")
_SECRET_FIELDS = ("decoys", "field_path", "secret", "value")


def escape_token(key: str) -> str:
    """RFC 6901 §3: ``~`` as ``~0``, ``/`` as ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


def _unescape(token: str, pointer: str) -> str:
    if re.search(r"~(?![01])", token):
        raise InvalidRecordError("pointer", f"bad escape in {pointer!r} (RFC 6901: ~0 or ~1)")
    return token.replace("~1", "/").replace("~0", "~")


def json_leaves(value: Json, pointer: str = "") -> list[tuple[str, Json]]:
    """Every leaf of ``value`` as (RFC 6901 pointer, scalar or empty container), in order."""
    if isinstance(value, dict) and value:
        return [
            leaf
            for key, child in value.items()
            for leaf in json_leaves(child, f"{pointer}/{escape_token(key)}")
        ]
    if isinstance(value, list) and value:
        return [
            leaf for i, child in enumerate(value) for leaf in json_leaves(child, f"{pointer}/{i}")
        ]
    return [(pointer, value)]


def resolve_pointer(value: Json, pointer: str) -> Json:
    """The member of ``value`` at RFC 6901 ``pointer``; ``RecordError`` when there is none."""
    if pointer == "":
        return value
    if not pointer.startswith("/"):
        raise InvalidRecordError("pointer", f"{pointer!r} does not start with '/' (RFC 6901)")
    node = value
    for token in pointer[1:].split("/"):
        key = _unescape(token, pointer)
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif (
            isinstance(node, list) and re.fullmatch(r"0|[1-9][0-9]*", key) and int(key) < len(node)
        ):
            node = node[int(key)]
        else:
            raise RecordError(f"{pointer}: no such member")
    return node


def leaf_salt(secret: bytes, pointer: str) -> bytes:
    """``HMAC-SHA-256(secret, UTF-8 pointer)`` truncated to ``SALT_BYTES``."""
    return hmac.new(secret, pointer.encode("utf-8"), hashlib.sha256).digest()[:SALT_BYTES]


def leaf_commitment(salt: bytes, pointer: str, value: Json) -> bytes:
    """``SHA-256(JCS([hex(salt), pointer, value]))`` (32 bytes)."""
    if len(salt) != SALT_BYTES:
        raise InvalidRecordError("salt", f"a salt is exactly {SALT_BYTES} bytes")
    return hashlib.sha256(canonical_bytes([salt.hex(), pointer, value], safe_numbers=True)).digest()


def _decoy(secret: bytes, i: int) -> bytes:
    return hmac.new(secret, f"decoy:{i}".encode(), hashlib.sha256).digest()


@dataclass(frozen=True, slots=True)
class LeafSecret:
    """What the owner keeps for one per-leaf committed field: its path, value, secret, decoys."""

    field_path: str
    value: Json
    secret: bytes
    decoys: int = 0

    def __post_init__(self) -> None:
        parse_path(self.field_path)
        if not isinstance(self.secret, bytes) or len(self.secret) != SECRET_BYTES:
            raise InvalidRecordError("secret", f"a field secret is exactly {SECRET_BYTES} bytes")
        if isinstance(self.decoys, bool) or not isinstance(self.decoys, int) or self.decoys < 0:
            raise InvalidRecordError("decoys", "a decoy count is an integer >= 0")
        object.__setattr__(self, "value", to_plain(self.value, "value", safe_numbers=True))

    def _sorted(self) -> list[tuple[bytes, str | None]]:
        leaves: list[tuple[bytes, str | None]] = [
            (leaf_commitment(leaf_salt(self.secret, p), p, v), p)
            for p, v in json_leaves(self.value)
        ]
        leaves += [(_decoy(self.secret, i), None) for i in range(self.decoys)]
        return sorted(leaves)

    def commitment(self) -> Commitment:
        """The record form of this field: the tree root and the leaf count."""
        ordered = self._sorted()
        if len(ordered) > MAX_LEAVES:
            raise InvalidRecordError(self.field_path or "$", f"more than {MAX_LEAVES} leaves")
        return Commitment(root(leaf_hash(c) for c, _ in ordered), len(ordered))

    def disclose(self, pointer: str) -> LeafDisclosure:
        """The disclosure of the one leaf at ``pointer`` (``RecordError`` if it is no leaf)."""
        ordered = self._sorted()
        where = [i for i, (_, p) in enumerate(ordered) if p == pointer]
        if not where:
            raise RecordError(f"{self.field_path}{pointer}: not a leaf of the committed value")
        hashes = [leaf_hash(c) for c, _ in ordered]
        return LeafDisclosure(
            field_path=self.field_path,
            pointer=pointer,
            value=resolve_pointer(self.value, pointer),
            salt=leaf_salt(self.secret, pointer),
            index=where[0],
            leaves=len(ordered),
            proof=tuple(_path(where[0], hashes)),
        )

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "decoys": self.decoys,
            "field_path": self.field_path,
            "secret": self.secret.hex(),
            "value": self.value,
        }

    @classmethod
    def from_json_obj(cls, obj: object) -> LeafSecret:
        if not isinstance(obj, Mapping) or set(obj) != set(_SECRET_FIELDS):
            raise InvalidRecordError("$", f"a leaf secret has exactly {list(_SECRET_FIELDS)}")
        decoys, path = obj["decoys"], obj["field_path"]
        if not isinstance(decoys, int) or not isinstance(path, str):
            raise InvalidRecordError("$", "decoys is an integer and field_path a string")
        return cls(
            path, to_plain(obj["value"], "value", safe_numbers=True), _hex(obj, "secret"), decoys
        )


def commit_leaves(
    value: object, *, field_path: str = "", decoys: int = 0, secret: bytes | None = None
) -> tuple[Commitment, LeafSecret]:
    """Commit ``value`` leaf by leaf with a fresh (or the given) 32-byte field secret."""
    kept = LeafSecret(
        field_path,
        to_plain(value, "value", safe_numbers=True),
        secrets.token_bytes(SECRET_BYTES) if secret is None else secret,
        decoys,
    )
    return kept.commitment(), kept


def _path(m: int, hashes: Sequence[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.1 PATH(m, D[n]), leaf to root."""
    if len(hashes) <= 1:
        return []
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    if m < k:
        return [*_path(m, hashes[:k]), root(hashes[k:])]
    return [*_path(m - k, hashes[k:]), root(hashes[:k])]


def _hex(obj: Mapping[str, object], name: str) -> bytes:
    text = obj[name]
    if not isinstance(text, str) or not _HEX.fullmatch(text):
        raise InvalidRecordError(name, "expected lowercase hex")
    return bytes.fromhex(text)


@dataclass(frozen=True, slots=True)
class LeafDisclosure:
    """One leaf of a per-leaf committed field: where, what, its salt and inclusion proof."""

    field_path: str
    pointer: str
    value: Json
    salt: bytes
    index: int
    leaves: int
    proof: tuple[bytes, ...]

    def __post_init__(self) -> None:
        parse_path(self.field_path)
        if self.pointer and not self.pointer.startswith("/"):
            raise InvalidRecordError("pointer", f"{self.pointer!r} does not start with '/'")
        for token in self.pointer[1:].split("/") if self.pointer else ():
            _unescape(token, self.pointer)
        if len(self.salt) != SALT_BYTES:
            raise InvalidRecordError("salt", f"a salt is exactly {SALT_BYTES} bytes")
        if any(len(h) != HASH_SIZE for h in self.proof):
            raise InvalidRecordError("proof", "proof hashes are 32 bytes")
        if not 0 <= self.index < self.leaves <= MAX_LEAVES:
            raise InvalidRecordError("index", "need 0 <= index < leaves")
        object.__setattr__(self, "value", to_plain(self.value, "value", safe_numbers=True))

    def leaf(self) -> bytes:
        """This leaf's commitment."""
        return leaf_commitment(self.salt, self.pointer, self.value)

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "field_path": self.field_path,
            "index": self.index,
            "leaves": self.leaves,
            "pointer": self.pointer,
            "proof": [h.hex() for h in self.proof],
            "salt": self.salt.hex(),
            "value": self.value,
        }

    @classmethod
    def from_json_obj(cls, obj: object) -> LeafDisclosure:
        """Inverse of ``to_json_obj``; ``InvalidRecordError`` naming the member."""
        if not isinstance(obj, Mapping) or set(obj) != set(_LEAF_FIELDS):
            raise InvalidRecordError("$", f"a leaf disclosure has exactly {list(_LEAF_FIELDS)}")
        index, leaves, path, pointer = (
            obj["index"],
            obj["leaves"],
            obj["field_path"],
            obj["pointer"],
        )
        proof = obj["proof"]
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in (index, leaves)):
            raise InvalidRecordError("index", "index and leaves are integers")
        if not isinstance(path, str) or not isinstance(pointer, str):
            raise InvalidRecordError("pointer", "field_path and pointer are strings")
        if not isinstance(proof, list) or not all(
            isinstance(h, str) and _HEX.fullmatch(h) for h in proof
        ):
            raise InvalidRecordError("proof", "expected a list of lowercase hex hashes")
        return cls(
            field_path=path,
            pointer=pointer,
            value=to_plain(obj["value"], "value", safe_numbers=True),
            salt=_hex(obj, "salt"),
            index=int(index),
            leaves=int(leaves),
            proof=tuple(bytes.fromhex(h) for h in proof),
        )

    def to_json(self) -> str:
        return canonical_bytes(self.to_json_obj()).decode("utf-8")

    @classmethod
    def from_json(cls, text: str | bytes) -> LeafDisclosure:
        return cls.from_json_obj(loads_strict(text))


def _check_leaf_in(record_obj: Json, disclosure: LeafDisclosure) -> None:
    """Check that ``disclosure`` opens one leaf of the per-leaf commitment at its field path.

    ``record_obj`` is a record's JSON object (the caller checks its digest first). Raises
    ``RecordError`` when the field is not a per-leaf commitment, the leaf count differs, or the
    leaf (its pointer, value or salt) is not in the committed tree."""
    path = disclosure.field_path
    target = resolve_field(record_obj, path)
    if not is_commitment_obj(target):
        raise RecordError(f"{path or '$'}: the field is not a commitment")
    committed = Commitment.from_json_obj(target, path)
    if not committed.per_leaf:
        raise RecordError(f"{path or '$'}: a whole-field commitment; disclose the whole field")
    if committed.leaves != disclosure.leaves:
        raise RecordError(
            f"{path}: the record commits to {committed.leaves} leaves, the disclosure says "
            f"{disclosure.leaves}"
        )
    try:
        verify_inclusion(
            leaf_hash(disclosure.leaf()),
            disclosure.index,
            disclosure.leaves,
            disclosure.proof,
            committed.digest,
        )
    except VerificationError as exc:
        raise RecordError(
            f"{path}{disclosure.pointer}: the disclosed leaf is not in the committed tree ({exc})"
        ) from None


AnyDisclosure: TypeAlias = Disclosure | LeafDisclosure
Kept: TypeAlias = Disclosure | LeafSecret  # what the owner keeps for one committed field


def check_disclosure_in(
    record_obj: Json, disclosure: Disclosure | LeafDisclosure | LeafSecret
) -> None:
    """Check that ``disclosure`` opens the commitment at its field path in ``record_obj``.

    ``record_obj`` is a record's JSON object; the caller checks that record's digest first.
    A ``Disclosure`` opens a whole-field commitment, a ``LeafDisclosure`` one leaf of a per-leaf
    commitment, a ``LeafSecret`` (the owner's) the whole per-leaf commitment. Raises
    ``RecordError`` if the field is absent, not a commitment of that form, or does not match.
    """
    if isinstance(disclosure, LeafDisclosure):
        _check_leaf_in(record_obj, disclosure)
    elif isinstance(disclosure, LeafSecret):
        path = disclosure.field_path
        target = resolve_field(record_obj, path)
        if not is_commitment_obj(target):
            raise RecordError(f"{path or '$'}: the field is not a commitment")
        if Commitment.from_json_obj(target, path) != disclosure.commitment():
            raise RecordError(f"{path}: the kept value and secret do not give the commitment")
    else:
        _check_whole_in(record_obj, disclosure)


def disclosure_from_json_obj(obj: object) -> AnyDisclosure:
    """A whole-field ``Disclosure`` or (with a ``pointer`` member) a ``LeafDisclosure``."""
    if isinstance(obj, Mapping) and "pointer" in obj:
        return LeafDisclosure.from_json_obj(obj)
    return Disclosure.from_json_obj(obj)


def kept_from_json_obj(obj: object) -> Kept:
    """A kept ``Disclosure`` or (with a ``secret`` member) a ``LeafSecret``."""
    if isinstance(obj, Mapping) and "secret" in obj:
        return LeafSecret.from_json_obj(obj)
    return Disclosure.from_json_obj(obj)


def disclosed_path(disclosure: AnyDisclosure | Kept) -> str:
    """Where a disclosure opens: the field path, and for one leaf its pointer after it
    (``actual_outcome/text_regions/0/text``)."""
    if isinstance(disclosure, LeafDisclosure):
        return disclosure.field_path + disclosure.pointer
    return disclosure.field_path


def select_disclosures(
    paths: Sequence[str], kept: Sequence[AnyDisclosure | Kept]
) -> tuple[list[AnyDisclosure], list[str]]:
    """The disclosures that open exactly ``paths`` (each a field path, or a per-leaf field's path
    followed by an RFC 6901 pointer), and the paths nothing opens. The path of a per-leaf field
    itself opens each of its leaves (one ``LeafDisclosure`` per leaf)."""
    whole = {disclosed_path(d): d for d in kept if not isinstance(d, LeafSecret)}
    secrets_ = [d for d in kept if isinstance(d, LeafSecret)]
    chosen: list[AnyDisclosure] = []
    missing: list[str] = []
    for path in dict.fromkeys(paths):
        found = whole.get(path)
        if found is not None:
            assert not isinstance(found, LeafSecret)
            chosen.append(found)
            continue
        whole_tree = [s for s in secrets_ if s.field_path == path]
        if whole_tree:  # every leaf, each opened alone
            chosen += [whole_tree[0].disclose(p) for p, _ in json_leaves(whole_tree[0].value)]
            continue
        owner = [s for s in secrets_ if path.startswith(s.field_path + "/")]
        try:
            owner.sort(key=lambda s: -len(s.field_path))
            chosen.append(owner[0].disclose(path[len(owner[0].field_path) :]))
        except (IndexError, RecordError, InvalidRecordError):
            missing.append(path)
    return chosen, missing
