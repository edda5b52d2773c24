"""Hypothesis: every receipt round-trips and verifies; every change to an authenticated part fails.

Authenticated parts (mutated here, each must be rejected): the record digest, the record, the
leaf, the index, the tree size, every inclusion and consistency proof hash (and the proofs'
lengths), both checkpoints' bodies and the log's signatures on them, and the signed content
(TSTInfo) of each anchor token when TSA roots are given. A mutation may be refused as malformed
(``FormatError``) or as false (``VerificationError``); it is never accepted.

Unauthenticated by the formats, and so documented rather than rejected: signature lines of keys
the verifier does not know (C2SP signed-note: "a verifier must ignore signatures from unknown
keys"): adding one, a witness cosignature included, leaves the receipt valid with the same
report. An anchor's ``tsa`` label and ``certificates`` list are helpers (see receipt_verify).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ledger.core.checkpoint import (
    Checkpoint,
    CosignatureSigner,
    Ed25519Signer,
    NoteSignature,
    SignedNote,
    add_signatures,
)
from ledger.core.errors import FormatError, VerificationError
from ledger.core.jcs import read_list
from ledger.records.decision import record_digest
from ledger.timestamp.asn1 import parse_signed_token
from ledger_client.receipts import receipt as receipt_module
from ledger_client.receipts.receipt import Receipt, _hash_b64, _hashes_b64
from ledger_client.receipts.verify import VALID, verify_receipt
from tests.receipt_world import World, filler, make_record, roots

SIZE = 24
RECORDS = {i: make_record(i) for i in (0, 7, 16, 23)}
Obj = dict[str, Any]


@cache
def world() -> World:
    digests = filler(SIZE, "p")
    for i, record in RECORDS.items():
        digests[i] = record_digest(record)
    return World(digests)


@st.composite
def receipts(draw: st.DrawFn, needs: str = "") -> Receipt:
    """A receipt for any leaf at any size, with its record when known, maybe upgraded.

    ``needs`` is "record" (a leaf with a known record, carried) or "previous" (upgraded).
    """
    size = draw(st.integers(2 if needs == "previous" else 1, SIZE))
    known = [i for i in RECORDS if i < size]
    if needs == "record" and known:
        index = draw(st.sampled_from(known))
    else:
        index = draw(st.integers(0, size - (2 if needs == "previous" else 1)))
    old = draw(st.integers(index + 1, size - 1) if needs == "previous" else st.none())
    if not needs:
        old = draw(st.none() | st.integers(index + 1, size))
    record = RECORDS.get(index) if needs == "record" or draw(st.booleans()) else None
    w = world()
    if old is None or old == size:
        return w.receipt(index, size, record=record)
    return w.upgrade(w.receipt(index, old, record=record), size)


def _flip(raw: bytes, bit: int) -> bytes:
    bit %= len(raw) * 8
    out = bytearray(raw)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def _flip_b64(text: str, bit: int) -> str:
    return base64.b64encode(_flip(base64.b64decode(text), bit)).decode()


def _flip_body(note: str, bit: int) -> str:
    body = note[: note.rindex("\n\n") + 1]
    pos = (bit // 7) % len(body)
    changed = chr(ord(body[pos]) ^ (1 << (bit % 7)))
    return body[:pos] + changed + note[pos + 1 :]


def _flip_signature(note: str, bit: int) -> str:
    signed = SignedNote.from_text(note)
    sig = signed.signatures[0]
    raw = _flip(sig.key_id + sig.signature, bit)
    line = NoteSignature(name=sig.name, key_id=raw[:4], signature=raw[4:])
    return SignedNote(text=signed.text, signatures=(line,)).to_text()


def _flip_tst_info(token_b64: str, bit: int) -> str:
    token = base64.b64decode(token_b64)
    econtent = parse_signed_token(token).econtent
    start = token.find(econtent)
    assert start > 0 and token.count(econtent) == 1
    offset = start * 8 + bit % (len(econtent) * 8)
    return base64.b64encode(_flip(token, offset)).decode()


def _at(
    path: tuple[str | int, ...], change: Callable[[Any, int], Any]
) -> Callable[[Obj, int], bool]:
    """A mutator of the JSON member at ``path``; False when the receipt has no such part."""

    def mutate(obj: Obj, bit: int) -> bool:
        node: Any = obj
        for part in path[:-1]:
            if node is None or (isinstance(node, list) and len(node) <= int(part)):
                return False
            node = node[part]
        last = path[-1]
        if node is None or (isinstance(node, list) and len(node) <= int(last)):
            return False
        node[last] = change(node[last], bit)
        return True

    return mutate


def _hex_flip(value: str, bit: int) -> str:
    return _flip(bytes.fromhex(value), bit).hex()


def _proof_hash(name: tuple[str, ...]) -> Callable[[Obj, int], bool]:
    def mutate(obj: Obj, bit: int) -> bool:
        node: Any = obj
        for part in name:
            node = node and node[part]
        if not node:
            return False
        i = bit % len(node)
        node[i] = _flip_b64(node[i], bit // len(node))
        return True

    return mutate


def _resize(name: tuple[str, ...], grow: bool) -> Callable[[Obj, int], bool]:
    def mutate(obj: Obj, bit: int) -> bool:
        node: Any = obj
        for part in name:
            node = node and node[part]
        if node is None or (not grow and not node):
            return False
        if grow:
            node.append(base64.b64encode(hashlib.sha256(bytes([bit % 256])).digest()).decode())
        else:
            node.pop()
        return True

    return mutate


def _record_field(obj: Obj, bit: int) -> bool:
    if obj["record"] is None:
        return False
    obj["record"]["agent"] = f"mallory-{bit}"
    return True


PREVIOUS = ("previous body", "previous signature", "consistency hash", "consistency longer",
            "consistency shorter", "previous anchor TSTInfo")  # fmt: skip
MUTATIONS: dict[str, Callable[[Obj, int], bool]] = {
    "record_digest": _at(("record_digest",), _hex_flip),
    "record": _record_field,
    "leaf": _at(("leaf",), _flip_b64),
    "index+1": _at(("index",), lambda v, _: v + 1),
    "index-1": _at(("index",), lambda v, _: v - 1),
    "tree_size+1": _at(("tree_size",), lambda v, _: v + 1),
    "tree_size-1": _at(("tree_size",), lambda v, _: v - 1),
    "inclusion hash": _proof_hash(("inclusion_proof",)),
    "inclusion longer": _resize(("inclusion_proof",), grow=True),
    "inclusion shorter": _resize(("inclusion_proof",), grow=False),
    "checkpoint body": _at(("checkpoint",), _flip_body),
    "checkpoint signature": _at(("checkpoint",), _flip_signature),
    "anchor TSTInfo": _at(("anchors", 0, "token"), _flip_tst_info),
    "previous body": _at(("previous", "checkpoint"), _flip_body),
    "previous signature": _at(("previous", "checkpoint"), _flip_signature),
    "consistency hash": _proof_hash(("previous", "consistency_proof")),
    "consistency longer": _resize(("previous", "consistency_proof"), grow=True),
    "consistency shorter": _resize(("previous", "consistency_proof"), grow=False),
    "previous anchor TSTInfo": _at(("previous", "anchors", 0, "token"), _flip_tst_info),
}


def check(receipt: Receipt) -> None:
    verify_receipt(receipt, [world().key], tsa_roots=roots())


@given(receipts())
def test_every_receipt_round_trips_and_verifies(receipt: Receipt) -> None:
    text = receipt.to_json()
    assert Receipt.from_json(text) == receipt and Receipt.from_json(text).to_json() == text
    report = verify_receipt(receipt, [world().key], tsa_roots=roots())
    assert report.index == receipt.index and report.tree_size == receipt.tree_size
    assert all(a.status == VALID for a in report.anchors)
    assert (report.previous_size is None) == (receipt.previous is None)


def _needs(part: str) -> str:
    return "record" if part == "record" else "previous" if part in PREVIOUS else ""


@pytest.mark.parametrize("part", list(MUTATIONS))
@given(data=st.data(), bit=st.integers(0, 2**16))
def test_changing_an_authenticated_part_is_rejected(
    part: str, data: st.DataObject, bit: int
) -> None:
    receipt = data.draw(receipts(_needs(part)))
    obj: Obj = copy.deepcopy(receipt.to_json_obj())
    assume(MUTATIONS[part](obj, bit))
    with pytest.raises((VerificationError, FormatError)):
        check(Receipt.from_json(json.dumps(obj)))


def _other_lines(note: str, seed: int) -> str:
    text = SignedNote.from_text(note).text
    stranger = Ed25519Signer(name="stranger.example", seed=hashlib.sha256(b"%d" % seed).digest())
    witness = CosignatureSigner(name="witness.example", seed=hashlib.sha256(b"w").digest())
    lines = [
        NoteSignature(name=stranger.name, key_id=stranger.key_id, signature=stranger.sign(b"x")),
        witness.cosign(Checkpoint.from_text(text), 1_750_000_000),
        NoteSignature(name=world().signer.name, key_id=b"\x00\x01\x02\x03", signature=b"junk"),
    ]
    return add_signatures(note, lines)


@given(receipt=receipts(), seed=st.integers(0, 1000))
def test_unknown_signers_lines_are_ignored(receipt: Receipt, seed: int) -> None:
    """Documented: lines by keys the verifier does not know are not authenticated."""
    before = verify_receipt(receipt, [world().key], tsa_roots=roots())
    noisy = Receipt.from_json_obj(
        {**receipt.to_json_obj(), "checkpoint": _other_lines(receipt.checkpoint, seed)}
    )
    assert noisy != receipt
    after = verify_receipt(noisy, [world().key], tsa_roots=roots())
    assert after == before  # same report: the extra lines changed nothing that was checked


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(min_size=32, max_size=32), max_size=6),
    st.integers(0, 5),
    st.integers(0, 43),
    st.sampled_from([*_B64, "", "é", "AA"]),
)
def test_a_proofs_hashes_read_at_once_as_one_by_one(
    hashes: list[bytes], which: int, at: int, char: str
) -> None:
    """``_hashes_b64`` (one pattern for the whole list) answers exactly as reading each item
    with ``_hash_b64``: the same hashes, or the same error naming the same item."""
    texts: list[object] = [base64.b64encode(h).decode() for h in hashes]
    if texts:
        i = which % len(texts)
        text = str(texts[i])
        texts[i] = text[:at] + char + text[at + 1 :]
    for value in (texts, [*texts, 7], "not a list"):
        try:
            expected: object = read_list(value, "inclusion_proof", _hash_b64)  # type: ignore[arg-type]
        except FormatError as exc:
            expected = str(exc)
        try:
            got: object = _hashes_b64(value, "inclusion_proof")  # type: ignore[arg-type]
        except FormatError as exc:
            got = str(exc)
        assert got == expected


_HEXISH = st.text(alphabet="0123456789abcdefABCDEF \t\ng\u00e9\u0660", min_size=60, max_size=68)
_LOWER_HEX = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


def _digest_answer(read: Callable[[Any], bytes], value: Any) -> object:
    try:
        return read(value)
    except FormatError as exc:
        return type(exc).__name__, str(exc)


@given(st.one_of(_HEXISH, _LOWER_HEX, st.none(), st.integers()), st.integers(0, 63), st.data())
def test_a_record_digest_reads_as_its_pattern_reads_it(
    value: Any, at: int, data: st.DataObject
) -> None:
    """``_digest_bytes`` (``bytes.fromhex`` first) answers as the pattern reader does."""
    if isinstance(value, str) and len(value) == 64 and data.draw(st.booleans()):
        value = value[:at] + data.draw(st.sampled_from("AF g\u00e9")) + value[at + 1 :]

    def plain(v: Any) -> bytes:
        return bytes.fromhex(receipt_module._hex_digest(v, "record_digest"))

    assert _digest_answer(receipt_module._digest_bytes, value) == _digest_answer(plain, value)
