"""Receipts: everything a third party needs to check one decision record offline (v1).

Pure: no grpc, no rocksdict, no I/O. docs/design.md "Receipts"; the published JSON Schema (draft
2020-12) is ``ledger/schemas/receipt-v1.schema.json``. A receipt is one JSON object, written in
RFC 8785 canonical form (``to_json``; ``from_json`` accepts any strict JSON and is its exact
inverse). Every member is required; optional ones are ``null`` or ``[]``, never absent::

    receipt          "decision-ledger/receipt/v1"
    record_digest    SHA-256 of the record's RFC 8785 bytes, 64 lowercase hex digits
    record           the decision record (schema ledger.decision/v<N>) or null
    disclosures      [{"field_path", "salt", "value"}]: opened commitments (needs a record)
    leaf             base64 of the v1 leaf (version, log time, record digest, metadata)
    index            the leaf's 0-based index
    tree_size        size of the checkpoint below (equal to its size line)
    inclusion_proof  [base64 hash]: RFC 9162 §2.1.3 path, leaf sibling first
    checkpoint       the log's signed note (C2SP tlog-checkpoint + signed-note), verbatim
    anchors          [{"tsa", "token", "certificates"}]: RFC 3161 tokens (base64 DER) over
                     SHA-256 of the checkpoint body, with the certificates they carry
    previous         null, or {"checkpoint", "consistency_proof", "anchors"}: the checkpoint
                     this receipt was upgraded from, the RFC 9162 §2.1.4 proof from it to
                     ``checkpoint``, and its anchors (they still date the record)

Hashes are standard padded base64 (as in C2SP formats); numbers are at most 2**53 - 1. Unknown
or missing members raise ``MalformedReceiptError`` naming the field.

Construction and parsing check the format only; ``ledger_client.receipts.verify.verify_receipt``
checks the claims (and says which parts the formats leave unauthenticated). ``to_tlog_proof``
exports the inclusion part as c2sp.org/tlog-proof@v1.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any, cast

from ledger.core import accel, merkle
from ledger.core.checkpoint import Checkpoint, SignedNote
from ledger.core.errors import (
    InvalidRecordError,
    MalformedNoteError,
    MalformedReceiptError,
    UnsupportedSchemaError,
)
from ledger.core.jcs import (
    Json,
    canonical_bytes,
    index_path,
    loads_strict,
    read_int,
    read_list,
    read_matching,
    read_object,
    read_text,
    to_plain,
    wrong_type,
)
from ledger.core.limits import HASH_SIZE
from ledger.core.tlogproof import MAX_PROOF_HASHES, TlogProof
from ledger.records.commitments import (
    AnyDisclosure,
    Kept,
    check_disclosure_in,
    disclosure_from_json_obj,
    select_disclosures,
)
from ledger.records.decision import DecisionRecord

__all__ = [
    "ANCHOR_FIELDS",
    "PREVIOUS_FIELDS",
    "RECEIPT_FIELDS",
    "RECEIPT_V1",
    "RECEIPT_VERSION",
    "MalformedReceiptError",
    "PreviousCheckpoint",
    "Receipt",
    "ReceiptAnchor",
    "to_tlog_proof",
]

RECEIPT_V1 = "decision-ledger/receipt/v1"
RECEIPT_VERSION = 1  # the newest receipt format this code reads and writes
_RECEIPT_NAME = re.compile(r"decision-ledger/receipt/v([1-9][0-9]{0,8})")
RECEIPT_FIELDS = (
    "receipt", "record_digest", "record", "disclosures", "leaf", "index", "tree_size",
    "inclusion_proof", "checkpoint", "anchors", "previous",
)  # fmt: skip
ANCHOR_FIELDS = ("tsa", "token", "certificates")
PREVIOUS_FIELDS = ("checkpoint", "consistency_proof", "anchors")
_MAX = 2**53 - 1
_hex_digest = read_matching(re.compile(r"[0-9a-f]{64}"), "64 lowercase hex digits (SHA-256)")


# --- the v1 types --------------------------------------------------------------------------------


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _check_note(note: str, field: str) -> None:
    """Format only: a signed note whose text is a checkpoint (signatures: ``verify_receipt``)."""
    problem = _note_problem(note)
    if problem is not None:
        raise MalformedReceiptError(field, problem)


@lru_cache(maxsize=256)
def _note_problem(note: str) -> str | None:
    """Why ``note`` is not a checkpoint note (None: it is); many receipts share one note."""
    try:
        Checkpoint.from_text(SignedNote.from_text(note).text)
    except MalformedNoteError as exc:
        return str(exc)
    return None


_BYTES_ONLY = {bytes}
_HASH_ONLY = {merkle.HASH_SIZE}


def _check_hashes(hashes: Sequence[bytes], field: str) -> None:
    if len(hashes) > MAX_PROOF_HASHES:
        raise MalformedReceiptError(field, f"{len(hashes)} hashes, at most {MAX_PROOF_HASHES}")
    if not hashes or ({*map(type, hashes)} == _BYTES_ONLY and {*map(len, hashes)} == _HASH_ONLY):
        return  # the usual case, without naming each item (nor a Python frame per item)
    for i, h in enumerate(hashes):
        if not isinstance(h, bytes) or len(h) != merkle.HASH_SIZE:
            raise MalformedReceiptError(index_path(field, i), "expected a 32-byte hash")


def _check_position(index: object, size: object) -> None:
    """Name the first of ``index`` and ``tree_size`` that is not an integer in its range."""
    for name, value, low in (("index", index, 0), ("tree_size", size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= _MAX:
            raise MalformedReceiptError(name, f"expected an integer in [{low}, 2**53 - 1]")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiptAnchor:
    """An RFC 3161 token over a checkpoint body; ``tsa`` and ``certificates`` are unsigned."""

    tsa: str
    token: bytes
    certificates: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        if not self.tsa or not self.token or not all(self.certificates):
            raise MalformedReceiptError("anchors", "tsa, token and certificates are non-empty")
        object.__setattr__(self, "certificates", tuple(self.certificates))

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "tsa": self.tsa,
            "token": _b64(self.token),
            "certificates": [_b64(c) for c in self.certificates],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PreviousCheckpoint:
    """The checkpoint a receipt was upgraded from, the consistency proof and its anchors."""

    checkpoint: str
    consistency_proof: tuple[bytes, ...]
    anchors: tuple[ReceiptAnchor, ...] = ()

    def __post_init__(self) -> None:
        _check_note(self.checkpoint, "previous.checkpoint")
        _check_hashes(self.consistency_proof, "previous.consistency_proof")
        object.__setattr__(self, "consistency_proof", tuple(self.consistency_proof))
        object.__setattr__(self, "anchors", tuple(self.anchors))

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "checkpoint": self.checkpoint,
            "consistency_proof": [_b64(h) for h in self.consistency_proof],
            "anchors": [a.to_json_obj() for a in self.anchors],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    """One record's receipt (layout in the module docstring); construction checks the format."""

    record_digest: bytes
    leaf: bytes
    index: int
    tree_size: int
    inclusion_proof: tuple[bytes, ...]
    checkpoint: str
    anchors: tuple[ReceiptAnchor, ...] = ()
    record: DecisionRecord | None = None
    disclosures: tuple[AnyDisclosure, ...] = ()
    previous: PreviousCheckpoint | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.record_digest, bytes) or len(self.record_digest) != HASH_SIZE:
            raise MalformedReceiptError("record_digest", "expected 32 bytes")
        if not isinstance(self.leaf, bytes) or not self.leaf:
            raise MalformedReceiptError("leaf", "expected non-empty bytes")
        index, size = self.index, self.tree_size
        if not (type(index) is type(size) is int and 0 <= index <= _MAX and 1 <= size <= _MAX):
            _check_position(index, size)
        _check_hashes(self.inclusion_proof, "inclusion_proof")
        _check_note(self.checkpoint, "checkpoint")
        if self.disclosures and self.record is None:
            raise MalformedReceiptError("disclosures", "disclosures need the record")
        for name in ("inclusion_proof", "anchors", "disclosures"):
            value = getattr(self, name)
            if type(value) is not tuple:
                object.__setattr__(self, name, tuple(value))

    def to_json_obj(self) -> dict[str, Json]:
        """The receipt as plain JSON with exactly the members ``RECEIPT_FIELDS``."""
        return {
            "receipt": RECEIPT_V1,
            "record_digest": self.record_digest.hex(),
            "record": None if self.record is None else self.record.to_json_obj(),
            "disclosures": [d.to_json_obj() for d in self.disclosures],
            "leaf": _b64(self.leaf),
            "index": self.index,
            "tree_size": self.tree_size,
            "inclusion_proof": [_b64(h) for h in self.inclusion_proof],
            "checkpoint": self.checkpoint,
            "anchors": [a.to_json_obj() for a in self.anchors],
            "previous": None if self.previous is None else self.previous.to_json_obj(),
        }

    def to_json(self) -> str:
        """RFC 8785 canonical JSON text (deterministic: equal receipts give equal text)."""
        return canonical_bytes(self.to_json_obj()).decode("utf-8")

    def disclose(
        self, paths: Sequence[str], disclosures: Sequence[AnyDisclosure | Kept] | None = None
    ) -> Receipt:
        """A copy of this receipt that discloses exactly the field ``paths`` and nothing else.

        The disclosures come from ``disclosures`` (e.g. the SDK's private file) or else from
        this receipt; each is checked against the record's commitment. ``MalformedReceiptError``
        names a path with no disclosure; ``RecordError`` one whose value does not open it.
        """
        if self.record is None:
            raise MalformedReceiptError("record", "disclosing a field needs the record")
        source = self.disclosures if disclosures is None else tuple(disclosures)
        chosen, missing = select_disclosures(paths, source)
        if missing:
            known = ", ".join(sorted({d.field_path for d in source})) or "none"
            raise MalformedReceiptError(
                "disclosures", f"no disclosure for {missing[0]!r} (known paths: {known})"
            )
        obj = self.record.to_json_obj()
        for disclosure in chosen:
            check_disclosure_in(obj, disclosure)
        return replace(self, disclosures=tuple(chosen))

    @classmethod
    def from_json_obj(
        cls, obj: object, *, checked: bool = False, record: DecisionRecord | None = None
    ) -> Receipt:
        """Validate a JSON object and build the receipt (inverse of ``to_json_obj``).

        ``checked``: ``obj`` came from ``loads_strict(..., safe_numbers=True)`` (no second pass
        over its I-JSON limits). ``record``: the caller already read ``obj["record"]`` (a
        non-null record) into this record, so it is not read again.
        """
        try:
            return _read_receipt(cast(Json, obj) if checked else to_plain(obj), record)
        except MalformedReceiptError:
            raise
        except InvalidRecordError as exc:
            raise _nested("", exc) from None

    @classmethod
    def from_json(cls, text: str | bytes) -> Receipt:
        """Strictly parse JSON text (no duplicate members, NaN, ...) and validate it."""
        try:
            obj = loads_strict(text, safe_numbers=True)
        except InvalidRecordError as exc:
            raise _nested("", exc) from None
        return cls.from_json_obj(obj, checked=True)


# --- reading JSON: each reader takes (JSON value, field path) ------------------------------------


def _nested(prefix: str, exc: InvalidRecordError) -> MalformedReceiptError:
    """Re-home an error of a nested reader (record, disclosure, jcs) under ``prefix``."""
    message = str(exc).removeprefix(f"{exc.field}: ")
    if exc.field in ("$", ""):
        return MalformedReceiptError(prefix or "$", message)
    joiner = "" if not prefix or exc.field.startswith("[") else "."
    return MalformedReceiptError(f"{prefix}{joiner}{exc.field}", message)


def _canonical_b64(text: str) -> bytes | None:
    """``decode_b64`` through binascii directly (a receipt holds dozens of base64 fields): the
    bytes when ``text`` is exactly their canonical padded standard base64, else None."""
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except ValueError:  # binascii.Error, or text that is not ASCII
        return None
    return raw if binascii.b2a_base64(raw, newline=False) == text.encode("ascii") else None


def _bytes_b64(value: Json, path: str) -> bytes:
    raw = _canonical_b64(value) if isinstance(value, str) else None
    if not raw:
        raise MalformedReceiptError(path, "expected non-empty canonical standard base64")
    return raw


def _hash_b64(value: Json, path: str) -> bytes:
    raw = _bytes_b64(value, path)
    if len(raw) != merkle.HASH_SIZE:
        raise MalformedReceiptError(path, f"expected a 32-byte hash, got {len(raw)} bytes")
    return raw


# The canonical padded standard base64 of 32 bytes: 43 digits, the last of them with its two
# low bits zero (RFC 4648 §3.5: canonical encoders set the pad bits to zero), then "=".
_HASH_B64 = re.compile(r"(?:[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=)+")
_STR_ONLY = {str}
_B64_HASH_LENGTH = {44}
_HASHES_B64 = accel.hashes_b64  # None: the pure branch of ``_hashes_b64``


def _hashes_b64(value: Json, path: str) -> tuple[bytes, ...]:
    """``read_list(value, path, _hash_b64)``, one pattern match for the whole list when every
    item is a canonical 32-byte hash (a receipt carries a dozen or more); anything else is read
    item by item, which names the first bad one."""
    decoded = _hashes_b64_plain(value) if _HASHES_B64 is None else _HASHES_B64(value)
    return read_list(value, path, _hash_b64) if decoded is None else decoded


def _hashes_b64_plain(value: object) -> tuple[bytes, ...] | None:
    """The hashes of ``value`` when it is a non-empty list of canonical base64 32-byte hashes,
    else None: the pure twin of the compiled ``accel.hashes_b64``."""
    if (
        type(value) is list
        and value
        and {*map(type, value)} == _STR_ONLY
        and {*map(len, value)} == _B64_HASH_LENGTH
        and _HASH_B64.fullmatch("".join(value))
    ):
        return tuple(map(binascii.a2b_base64, value))
    return None


def _note(value: Json, path: str) -> str:
    if not isinstance(value, str):
        raise wrong_type(path, "a signed checkpoint note (string)", value)
    _check_note(value, path)
    return value


def _anchor(value: Json, path: str) -> ReceiptAnchor:
    obj = read_object(value, path, ANCHOR_FIELDS)
    tsa, token, certs = obj["tsa"], obj["token"], obj["certificates"]
    texts = isinstance(certs, list) and all(isinstance(c, str) for c in certs)
    if isinstance(tsa, str) and isinstance(token, str) and texts:  # a batch shares one anchor
        return _shared_anchor(tsa, token, tuple(certs), path)  # type: ignore[arg-type]
    return _read_anchor(obj, path)


@lru_cache(maxsize=64)
def _shared_anchor(tsa: str, token: str, certs: tuple[str, ...], path: str) -> ReceiptAnchor:
    """``_read_anchor`` of these exact strings, read once (a frozen value: shared safely; an
    error is raised again each time, as nothing is cached for it)."""
    return _read_anchor({"tsa": tsa, "token": token, "certificates": list(certs)}, path)


def _read_anchor(obj: dict[str, Json], path: str) -> ReceiptAnchor:
    certs = read_list(obj["certificates"], f"{path}.certificates", _bytes_b64)
    return ReceiptAnchor(
        tsa=read_text(obj["tsa"], f"{path}.tsa"),
        token=_bytes_b64(obj["token"], f"{path}.token"),
        certificates=certs,
    )


# The anchors last read: (their JSON, the anchors). The receipts of a checkpoint carry the same
# anchors: an equal JSON list (Python equality of lists of objects of strings and lists of
# strings is JSON equality: a string equals only a string, a list only a list) reads the same.
_LAST_ANCHORS: list[tuple[list[Json], tuple[ReceiptAnchor, ...]]] = []


def _anchors(value: Json) -> tuple[ReceiptAnchor, ...]:
    """``read_list(value, "anchors", _anchor)``, the anchors last read when ``value`` equals
    their JSON (a frozen value: shared safely; nothing is kept for a list refused)."""
    if type(value) is list and value:
        last = _LAST_ANCHORS[0] if _LAST_ANCHORS else None
        if last is not None and last[0] == value:
            return last[1]
        anchors: tuple[ReceiptAnchor, ...] = read_list(value, "anchors", _anchor)
        if _plain_anchors(value):  # kept as a copy: the caller may change its JSON later
            dicts = cast(list[dict[str, Json]], value)
            copy = [{k: v[:] if type(v) is list else v for k, v in a.items()} for a in dicts]
            _LAST_ANCHORS[:] = [(cast(list[Json], copy), anchors)]
        return anchors
    return read_list(value, "anchors", _anchor)


def _plain_anchors(value: list[Any]) -> bool:
    """Whether ``value`` holds only objects of strings and lists of strings (read as anchors:
    then a list equal to it is the same JSON)."""
    for anchor in value:
        if type(anchor) is not dict:
            return False
        for member in anchor.values():
            if type(member) is list:
                if any(type(c) is not str for c in member):
                    return False
            elif type(member) is not str:
                return False
    return True


def _previous(value: Json, path: str) -> PreviousCheckpoint | None:
    if value is None:
        return None
    obj = read_object(value, path, PREVIOUS_FIELDS)
    return PreviousCheckpoint(
        checkpoint=_note(obj["checkpoint"], f"{path}.checkpoint"),
        consistency_proof=_hashes_b64(obj["consistency_proof"], f"{path}.consistency_proof"),
        anchors=read_list(obj["anchors"], f"{path}.anchors", _anchor),
    )


def _record(value: Json) -> DecisionRecord | None:
    try:
        return None if value is None else DecisionRecord.from_json_obj(value)
    except InvalidRecordError as exc:
        raise _nested("record", exc) from None
    except UnsupportedSchemaError as exc:
        raise exc.at("record") from None


def _disclosure(value: Json, path: str) -> AnyDisclosure:
    try:
        return disclosure_from_json_obj(value)
    except InvalidRecordError as exc:
        raise _nested(path, exc) from None


def _digest_bytes(value: Json) -> bytes:
    """``bytes.fromhex(_hex_digest(value, "record_digest"))``: the bytes of exactly 64
    lowercase hex digits, else the reader names the problem. ``fromhex`` reads hex digits of
    either case and spaces between bytes: 64 characters that give 32 bytes hold no space, and
    a lowercase text (``islower``: no upper-case letter) has no upper-case digit."""
    if type(value) is str and len(value) == 64 and value.islower():
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = b""
        if len(raw) == HASH_SIZE:
            return raw
    return bytes.fromhex(_hex_digest(value, "record_digest"))


def _receipt_version(value: Json) -> None:
    """A receipt of a newer format than v1 is ``UnsupportedSchemaError`` (upgrade the reader),
    reported before its members are read, so it is never taken for a malformed v1 receipt."""
    name = value.get("receipt") if isinstance(value, dict) else None
    if name == RECEIPT_V1:
        return
    match = _RECEIPT_NAME.fullmatch(name) if isinstance(name, str) else None
    if match is not None and int(match.group(1)) > RECEIPT_VERSION:
        raise UnsupportedSchemaError(int(match.group(1)), RECEIPT_VERSION, where="receipt")


def _read_receipt(value: Json, record: DecisionRecord | None = None) -> Receipt:
    _receipt_version(value)
    obj = read_object(value, "", RECEIPT_FIELDS)
    if obj["receipt"] != RECEIPT_V1:
        raise MalformedReceiptError("receipt", f"expected {RECEIPT_V1!r}, got {obj['receipt']!r}")
    digest = _digest_bytes(obj["record_digest"])
    record = _record(obj["record"]) if record is None else record
    given = obj["disclosures"]
    disclosures = () if given == [] else read_list(given, "disclosures", _disclosure)
    leaf = _bytes_b64(obj["leaf"], "leaf")
    index = read_int(obj["index"], "index")
    tree_size = read_int(obj["tree_size"], "tree_size", minimum=1)
    proof = _hashes_b64(obj["inclusion_proof"], "inclusion_proof")
    checkpoint = _note(obj["checkpoint"], "checkpoint")
    anchors = _anchors(obj["anchors"])
    previous = _previous(obj["previous"], "previous")
    # What ``Receipt.__post_init__`` checks that the readers above did not (they read a
    # 32-byte digest, a non-empty leaf, integers in range, 32-byte hashes and a checkpoint
    # note): then the receipt is made without checking it all again.
    if len(proof) > MAX_PROOF_HASHES or (disclosures and record is None):
        return Receipt(
            record_digest=digest, record=record, disclosures=disclosures, leaf=leaf,
            index=index, tree_size=tree_size, inclusion_proof=proof, checkpoint=checkpoint,
            anchors=anchors, previous=previous,
        )  # fmt: skip  # raises, naming the problem
    made = object.__new__(Receipt)  # each slot set by its own setter (``object.__setattr__``'s)
    _SET_RECORD_DIGEST(made, digest)
    _SET_LEAF(made, leaf)
    _SET_INDEX(made, index)
    _SET_TREE_SIZE(made, tree_size)
    _SET_INCLUSION_PROOF(made, proof)
    _SET_CHECKPOINT(made, checkpoint)
    _SET_ANCHORS(made, anchors)
    _SET_RECORD(made, record)
    _SET_DISCLOSURES(made, disclosures)
    _SET_PREVIOUS(made, previous)
    return made


_SET = {f.name: getattr(Receipt, f.name).__set__ for f in fields(Receipt)}
(
    _SET_RECORD_DIGEST, _SET_LEAF, _SET_INDEX, _SET_TREE_SIZE, _SET_INCLUSION_PROOF,
    _SET_CHECKPOINT, _SET_ANCHORS, _SET_RECORD, _SET_DISCLOSURES, _SET_PREVIOUS,
) = (
    _SET[name] for name in (
        "record_digest", "leaf", "index", "tree_size", "inclusion_proof", "checkpoint",
        "anchors", "record", "disclosures", "previous",
    )
)  # fmt: skip


def to_tlog_proof(receipt: Receipt, *, with_leaf: bool = True) -> TlogProof:
    """The receipt as c2sp.org/tlog-proof@v1; ``extra`` carries the leaf (unauthenticated
    until its hash is checked against the proof, as the spec allows for data needed to
    reconstruct the record hash)."""
    return TlogProof(
        index=receipt.index,
        proof=receipt.inclusion_proof,
        checkpoint_note=receipt.checkpoint,
        extra=receipt.leaf if with_leaf else None,
    )
