"""Receipts (``ledger_client.receipts.receipt`` + ``receipt_verify``) on an in-memory log, offline.

``World`` (``tests/receipt_world.py``) builds what a server would: v1 leaves, RFC 6962 proofs,
checkpoints signed with Ed25519 and RFC 3161 anchors from an in-process TSA.
"""

from __future__ import annotations

import base64
import copy
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from importlib import resources
from typing import Any

import pytest

from ledger.core import merkle
from ledger.core.checkpoint import Checkpoint, Ed25519Signer
from ledger.core.errors import (
    BoundsError,
    FormatError,
    OriginMismatchError,
    RecordError,
    SignatureError,
    TimestampError,
    VerificationError,
)
from ledger.core.tlogproof import MAX_PROOF_HASHES, TlogProof
from ledger.records.commitments import Disclosure
from ledger.records.decision import (
    record_digest,
)
from ledger_client.receipts.receipt import (
    ANCHOR_FIELDS,
    PREVIOUS_FIELDS,
    RECEIPT_FIELDS,
    RECEIPT_V1,
    MalformedReceiptError,
    Receipt,
    to_tlog_proof,
)
from ledger_client.receipts.verify import NOT_CHECKED, UNTRUSTED, VALID, verify_receipt
from tests import processes
from tests.json_schema import schema_errors
from tests.receipt_world import (
    DISCLOSED,
    DISCLOSURE,
    ORIGIN,
    RECORD,
    SALT,
    T0,
    full_receipt,
    make_record,
    roots,
    tsa,
    world,
)

# --- JSON: exact inverses, canonical, strict ------------------------------------------------------


def test_round_trip_is_exact_and_canonical() -> None:
    for receipt in [world().receipt(0, 1, anchored=False), world().receipt(5, 7), full_receipt()]:
        text = receipt.to_json()
        assert Receipt.from_json(text) == receipt
        assert Receipt.from_json(text).to_json() == text
        assert Receipt.from_json_obj(receipt.to_json_obj()) == receipt
        obj = json.loads(text)
        assert list(obj) == sorted(obj) and tuple(sorted(obj)) == tuple(sorted(RECEIPT_FIELDS))
        assert json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False) == text
        pretty = json.dumps(obj, indent=2)
        assert Receipt.from_json(pretty).to_json() == text  # any strict JSON, canonical out


def test_layout() -> None:
    obj = full_receipt().to_json_obj()
    assert obj["receipt"] == RECEIPT_V1
    assert obj["record_digest"] == record_digest(DISCLOSED).hex()
    assert obj["index"] == 11 and obj["tree_size"] == 20
    assert isinstance(obj["leaf"], str) and base64.b64decode(obj["leaf"])[0] == 1
    assert obj["disclosures"] == [DISCLOSURE.to_json_obj()]
    assert isinstance(obj["checkpoint"], str) and obj["checkpoint"].startswith(ORIGIN + "\n20\n")
    anchors = obj["anchors"]
    assert isinstance(anchors, list) and len(anchors) == 1
    assert isinstance(anchors[0], dict) and set(anchors[0]) == set(ANCHOR_FIELDS)
    previous = obj["previous"]
    assert isinstance(previous, dict) and set(previous) == set(PREVIOUS_FIELDS)


def _mutated(path: Sequence[str | int], value: object, *, delete: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = copy.deepcopy(full_receipt().to_json_obj())
    node: Any = obj
    for part in path[:-1]:
        node = node[part]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return obj


MALFORMED: list[tuple[str, dict[str, Any]]] = [
    ("extra", _mutated(["extra"], 1)),
    ("inclusion_proof", _mutated(["inclusion_proof"], [base64.b64encode(bytes(32)).decode()] * 65)),
    ("anchors", _mutated(["anchors"], None)),
    ("leaf", _mutated(["leaf"], None, delete=True)),
    ("receipt", _mutated(["receipt"], "decision-ledger/receipt/2")),
    ("record_digest", _mutated(["record_digest"], "AB" * 32)),
    ("record_digest", _mutated(["record_digest"], ("ab " * 22)[:64])),  # 21 bytes, with spaces
    ("record_digest", _mutated(["record_digest"], "ab" * 31 + " a")),
    ("record_digest", _mutated(["record_digest"], "ab" * 32 + "ab")),
    ("leaf", _mutated(["leaf"], "not base64!")),
    ("leaf", _mutated(["leaf"], "")),
    ("index", _mutated(["index"], -1)),
    ("index", _mutated(["index"], "3")),
    ("tree_size", _mutated(["tree_size"], 0)),
    ("inclusion_proof[0]", _mutated(["inclusion_proof", 0], base64.b64encode(b"x" * 31).decode())),
    ("inclusion_proof[1]", _mutated(["inclusion_proof", 1], "QUFB")),
    ("checkpoint", _mutated(["checkpoint"], "not a note\n")),
    ("anchors[0].token", _mutated(["anchors", 0, "token"], 5)),
    ("anchors[0].color", _mutated(["anchors", 0, "color"], "red")),
    ("anchors[0].tsa", _mutated(["anchors", 0, "tsa"], "")),
    ("previous.consistency_proof", _mutated(["previous", "consistency_proof"], "x")),
    ("previous.anchors", _mutated(["previous", "anchors"], None, delete=True)),
    ("previous.checkpoint", _mutated(["previous", "checkpoint"], 7)),
    ("record.step", _mutated(["record", "step"], -2)),
    ("record.extra", _mutated(["record", "extra"], 1)),
    ("disclosures[0].salt", _mutated(["disclosures", 0, "salt"], "XYZ")),
    ("disclosures", _mutated(["record"], None)),
]


@pytest.mark.parametrize(("field", "obj"), MALFORMED, ids=[f for f, _ in MALFORMED])
def test_malformed_receipts_name_the_field(field: str, obj: dict[str, Any]) -> None:
    with pytest.raises(MalformedReceiptError) as info:
        Receipt.from_json(json.dumps(obj))
    assert info.value.field == field, str(info.value)
    assert str(info.value).startswith(field + ": ")


def test_anchors_read_again_after_their_json_changed() -> None:
    """Receipts of a checkpoint share their anchors, read once; a JSON changed in place after
    it was read (its lists and objects the same objects) is read again, as any other."""
    obj = full_receipt().to_json_obj()
    first = Receipt.from_json_obj(copy.deepcopy(obj))
    assert Receipt.from_json_obj(copy.deepcopy(obj)).anchors == first.anchors
    same: Any = copy.deepcopy(obj)
    assert Receipt.from_json_obj(same).anchors == first.anchors
    anchor: Any = same["anchors"][0]
    anchor["tsa"] = "another"
    assert Receipt.from_json_obj(same).anchors[0].tsa == "another"
    anchor["certificates"].append(base64.b64encode(b"cert").decode())
    assert Receipt.from_json_obj(same).anchors[0].certificates == (b"cert",)
    anchor["certificates"][0] = "not base64!"
    with pytest.raises(MalformedReceiptError) as info:
        Receipt.from_json_obj(same)
    assert info.value.field == "anchors[0].certificates[0]"
    anchor["certificates"][0] = 7  # no longer strings only: not kept, read each time
    for _ in range(2):
        with pytest.raises(MalformedReceiptError):
            Receipt.from_json_obj(same)
    assert Receipt.from_json_obj(copy.deepcopy(obj)).anchors == first.anchors


def test_a_proof_over_the_hash_limit_is_refused_when_read() -> None:
    """The reader makes a receipt without ``__post_init__``'s checks that it already made, not
    this one: a checked list of hashes may still be too long, which the reader refuses."""
    obj = _mutated(["inclusion_proof"], [base64.b64encode(bytes(32)).decode()] * 65)
    with pytest.raises(MalformedReceiptError) as info:
        Receipt.from_json(json.dumps(obj))
    assert str(info.value) == f"inclusion_proof: 65 hashes, at most {MAX_PROOF_HASHES}"


def test_malformed_text() -> None:
    cases: list[tuple[str | bytes, str]] = [
        ("[]", "$"),
        ('{"a": 1, "a": 2}', "a"),
        ("nope", "$"),
        (b"\xff", "$"),
    ]
    for text, field in cases:
        with pytest.raises(MalformedReceiptError) as info:
            Receipt.from_json(text)
        assert info.value.field == field
    assert issubclass(MalformedReceiptError, FormatError)


def test_direct_construction_is_checked() -> None:
    good = world().receipt(5, 7)
    for change, field in [
        ({"record_digest": b"x"}, "record_digest"),
        ({"index": True}, "index"),
        ({"tree_size": 2**53}, "tree_size"),
        ({"inclusion_proof": (b"x",)}, "inclusion_proof[0]"),
        ({"inclusion_proof": (bytes(32),) * 65}, "inclusion_proof"),
        ({"disclosures": (DISCLOSURE,)}, "disclosures"),
    ]:
        with pytest.raises(MalformedReceiptError) as info:
            replace(good, **change)  # type: ignore[arg-type]
        assert info.value.field == field
    assert replace(good, inclusion_proof=list(good.inclusion_proof)) == good  # type: ignore[arg-type]


# --- verification ---------------------------------------------------------------------------------


def test_valid_receipt_report() -> None:
    receipt = world().receipt(5, 7, record=RECORD)
    report = verify_receipt(receipt, [world().key], tsa_roots=roots(), origin=ORIGIN)
    assert report.record_digest == record_digest(RECORD) and report.record == RECORD
    assert (report.index, report.tree_size, report.origin) == (5, 7, ORIGIN)
    assert report.logged_at_ms == T0 + 5000
    assert report.signed_by == (f"{ORIGIN}+{world().key.key_id.hex()}",)
    (anchor,) = report.anchors
    assert anchor.status == VALID and anchor.checkpoint_size == 7
    assert report.anchored is anchor and anchor.gen_time is not None
    assert anchor.signer == tsa().tsa_cert.subject.rfc4514_string()
    out = report.to_json_obj()
    assert out["logged_at"] == "2025-06-15T15:06:45Z" and out["anchors_checked"] is True
    assert out["anchored_by"] == anchor.signer and out["previous_size"] is None
    assert out["record"] == {"kind": "tool_call", "run_id": "run-r", "step": 3,
                             "record_id": RECORD.record_id}  # fmt: skip


def test_digest_only_receipt_and_given_record() -> None:
    receipt = world().receipt(5, 9)
    report = verify_receipt(receipt, [world().key], record=RECORD)
    assert report.record == RECORD
    with pytest.raises(RecordError, match="given record"):
        verify_receipt(receipt, [world().key], record=make_record(4))
    with pytest.raises(RecordError, match="receipt's record"):
        verify_receipt(replace(receipt, record=make_record(4)), [world().key])


def test_anchors_not_checked_without_roots() -> None:
    report = verify_receipt(world().receipt(5, 7), [world().key])
    assert report.anchors_checked is False and report.anchored is None
    assert [a.status for a in report.anchors] == [NOT_CHECKED]
    assert report.to_json_obj()["anchored_at"] is None


def test_anchor_trust() -> None:
    other = tsa("Other TSA")
    receipt = world().receipt(5, 7)
    with pytest.raises(TimestampError) as info:  # the only anchor chains to no given root
        verify_receipt(receipt, [world().key], tsa_roots=[other.root_cert])
    assert info.value.check == "anchor"
    both = replace(receipt, anchors=(*receipt.anchors, world().anchor(7, other)))
    report = verify_receipt(both, [world().key], tsa_roots=[other.root_cert])
    assert [a.status for a in report.anchors] == [UNTRUSTED, VALID]
    assert report.anchored is report.anchors[1]
    with pytest.raises(TimestampError, match="carries no anchor"):
        verify_receipt(world().receipt(5, 7, anchored=False), [world().key], tsa_roots=roots())
    wrong_size = replace(receipt, anchors=(world().anchor(8),))
    with pytest.raises(TimestampError) as info:
        verify_receipt(wrong_size, [world().key], tsa_roots=roots())
    assert info.value.check == "imprint"


def test_disclosures() -> None:
    receipt = world().receipt(11, 12, record=DISCLOSED, disclosures=(DISCLOSURE,))
    assert verify_receipt(receipt, [world().key]).disclosed == ("payload.value",)
    lie = Disclosure("payload.value", {"address": "2 Main St"}, SALT)
    with pytest.raises(RecordError, match=r"payload\.value"):
        verify_receipt(replace(receipt, disclosures=(lie,)), [world().key])


def test_leaf_checkpoint_and_size_failures() -> None:
    receipt = world().receipt(5, 7)
    with pytest.raises(RecordError, match="logs record digest"):
        verify_receipt(replace(receipt, record_digest=bytes(32)), [world().key])
    with pytest.raises(RecordError, match="leaf"):
        verify_receipt(replace(receipt, leaf=b"\x02" + receipt.leaf[1:]), [world().key])
    with pytest.raises(SignatureError):
        verify_receipt(receipt, [Ed25519Signer.generate(ORIGIN).verifier()])
    with pytest.raises(OriginMismatchError):
        verify_receipt(receipt, [world().key], origin="elsewhere.example")
    with pytest.raises(BoundsError, match="tree_size 8"):
        verify_receipt(replace(receipt, tree_size=8), [world().key])
    with pytest.raises(VerificationError):
        verify_receipt(replace(receipt, index=4), [world().key])


def test_previous_checkpoint() -> None:
    receipt = full_receipt()
    report = verify_receipt(receipt, [world().key], tsa_roots=roots())
    assert report.previous_size == 13 and report.tree_size == 20
    assert [a.checkpoint_size for a in report.anchors] == [20, 13]
    assert report.anchored is not None and report.anchored.checkpoint_size == 13
    assert receipt.previous is not None
    bad_proof = replace(receipt.previous, consistency_proof=(bytes(32),) * 3)
    with pytest.raises(VerificationError):
        verify_receipt(replace(receipt, previous=bad_proof), [world().key])
    too_old = replace(receipt.previous, checkpoint=world().note(11), anchors=())
    too_old = replace(too_old, consistency_proof=world().consistency(11, 20))
    with pytest.raises(BoundsError, match="does not hold 11"):
        verify_receipt(replace(receipt, previous=too_old), [world().key])


def test_tlog_proof_export() -> None:
    receipt = world().receipt(5, 7)
    proof = to_tlog_proof(receipt)
    assert TlogProof.from_text(proof.to_text()) == proof
    assert proof.extra == receipt.leaf and proof.index == 5
    assert to_tlog_proof(receipt, with_leaf=False).extra is None
    cp = Checkpoint.from_text(proof.checkpoint_note.split("\n\n")[0] + "\n")
    merkle.verify_inclusion(merkle.leaf_hash(proof.extra), 5, 7, proof.proof, cp.root_hash)


# --- the published JSON Schema --------------------------------------------------------------------


def load_schemas() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    folder = resources.files("ledger.records").joinpath("schemas")
    receipt = json.loads(folder.joinpath("receipt-v1.schema.json").read_text())
    v1, v2, v3 = (
        json.loads(folder.joinpath(f"decision-record-v{n}.schema.json").read_text())
        for n in (1, 2, 3)
    )
    return receipt, v1, v2, v3


def merged_schema() -> dict[str, Any]:
    """The receipt schema with every record schema resolvable by its $id, for the evaluator
    (the evaluator resolves "#/$defs/..." at the root: each version's definitions include the
    earlier ones')."""
    receipt, v1, v2, v3 = load_schemas()
    assert not set(receipt["$defs"]) & set(v3["$defs"])
    assert set(v1["$defs"]) <= set(v2["$defs"]) <= set(v3["$defs"])
    ids = {v["$id"]: v for v in (v1, v2, v3)}
    receipt["$defs"] = {**receipt["$defs"], **v3["$defs"], **ids}
    return receipt


def test_schema_file_matches_the_module() -> None:
    schema, record, v2, v3 = load_schemas()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert tuple(schema["required"]) == RECEIPT_FIELDS == tuple(schema["properties"])
    assert schema["additionalProperties"] is False
    assert schema["properties"]["receipt"] == {"const": RECEIPT_V1}
    assert tuple(schema["$defs"]["anchor"]["required"]) == ANCHOR_FIELDS
    assert tuple(schema["$defs"]["previous"]["required"]) == PREVIOUS_FIELDS
    assert record["$id"] in json.dumps(schema["properties"]["record"])
    assert v2["$id"] in json.dumps(schema["properties"]["record"])
    assert v3["$id"] in json.dumps(schema["properties"]["record"])


def test_schema_agrees_with_the_parser() -> None:
    schema = merged_schema()
    for receipt in [world().receipt(0, 1, anchored=False), full_receipt()]:
        assert schema_errors(schema, receipt.to_json_obj(), schema) == []
    for field, obj in MALFORMED:
        assert schema_errors(schema, obj, schema), field


def test_pure_modules_import_neither_grpc_nor_rocksdict() -> None:
    probe = (
        "import sys\n"
        "import ledger_client.receipts.receipt, ledger_client.receipts.verify\n"
        "import ledger_client.remote.receipt_fetch, ledger_client.receipts.run_verify\n"
        "import ledger_client.sdk.run_file, ledger.timestamp.policy\n"
        "print([m for m in ('grpc', 'rocksdict', 'google.protobuf') if m in sys.modules])\n"
    )
    out = processes.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
