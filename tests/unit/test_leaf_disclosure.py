"""Per-leaf commitments (docs/formats.md "Per-leaf commitments"): one JSON leaf disclosed alone,
its pointer bound, RFC 6901 escapes, decoys, and the whole disclose/verify path through the
``ledger-verify`` commands with the output scanned for sibling values and salts."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.core import jcs
from ledger.core.errors import InvalidRecordError, RecordError
from ledger.core.merkle import leaf_hash, root
from ledger.records.commitments import (
    Commitment,
    LeafDisclosure,
    LeafSecret,
    check_disclosure_in,
    commit,
    commit_leaves,
    disclosure_from_json_obj,
    escape_token,
    json_leaves,
    kept_from_json_obj,
    leaf_commitment,
    leaf_salt,
    resolve_pointer,
    select_disclosures,
)
from ledger.records.decision import (
    DecisionRecord,
    ToolCall,
    new_record_id,
    record_digest,
    verify_disclosure,
)
from ledger_client.cli.main import main
from tests.receipt_world import World, filler

SECRET = bytes(range(32))
OUTPUT: dict[str, Any] = {
    "text_regions": [
        {"text": "Jane Roe", "box": [10, 20, 110, 40]},
        {"text": "born 1970-01-31", "box": [10, 50, 140, 70]},
    ],
    "a/b~c": "slashed key",
    "empty": [],
    "pages": 2,
}
SIBLINGS = ["born 1970-01-31", "slashed key", "Jane Roe"]


def tool_record(outcome: Commitment) -> DecisionRecord:
    return DecisionRecord(
        record_id=new_record_id(now_ms=1_750_000_000_000, rand=bytes(10)),
        run_id="run-leaf",
        step=0,
        time="2025-06-15T15:06:40Z",
        agent="ocr-agent",
        payload=ToolCall(tool="ocr"),
        actual_outcome=outcome,
    )


def committed(decoys: int = 0) -> tuple[DecisionRecord, LeafSecret]:
    tree, kept = commit_leaves(OUTPUT, field_path="actual_outcome", secret=SECRET, decoys=decoys)
    return tool_record(tree), kept


def test_leaves_salts_and_root_follow_the_spec() -> None:
    leaves = json_leaves(jcs.to_plain(OUTPUT))
    assert ("/a~1b~0c", "slashed key") in leaves and ("/empty", []) in leaves
    assert ("/text_regions/0/box/3", 40) in leaves and len(leaves) == 13
    salt = leaf_salt(SECRET, "/pages")
    assert salt == hmac.new(SECRET, b"/pages", hashlib.sha256).digest()[:16]
    assert (
        leaf_commitment(salt, "/pages", 2)
        == hashlib.sha256(
            json.dumps([salt.hex(), "/pages", 2], separators=(",", ":")).encode()
        ).digest()
    )
    record, kept = committed()
    tree = record.actual_outcome
    assert isinstance(tree, Commitment) and tree.leaves == 13
    expected = sorted(leaf_commitment(leaf_salt(SECRET, p), p, v) for p, v in leaves)
    assert tree.digest == root(leaf_hash(c) for c in expected)
    assert tree.to_json_obj() == {"commitment": f"sha256-tree:13:{tree.digest.hex()}"}
    assert DecisionRecord.from_json(record.to_json()) == record
    check_disclosure_in(record.to_json_obj(), kept)  # the owner's secret opens the whole tree
    assert kept_from_json_obj(kept.to_json_obj()) == kept


def test_one_leaf_discloses_alone_and_verifies() -> None:
    record, kept = committed()
    opened = kept.disclose("/text_regions/0/text")
    assert opened.value == "Jane Roe" and opened.leaves == 13
    verify_disclosure(record.to_json(), opened, record_digest(record))
    text = opened.to_json()
    assert disclosure_from_json_obj(json.loads(text)) == opened
    other_salts = [leaf_salt(SECRET, p).hex() for p, _ in json_leaves(jcs.to_plain(OUTPUT))]
    other_salts.remove(opened.salt.hex())
    for secret in [*SIBLINGS[:2], *other_salts, SECRET.hex(), "box", "text_regions/1"]:
        assert secret not in text, secret


def test_a_leaf_moved_to_another_pointer_or_changed_fails() -> None:
    record, kept = committed()
    opened = kept.disclose("/text_regions/0/text")
    obj = record.to_json_obj()
    moved = LeafDisclosure(**{**_fields(opened), "pointer": "/text_regions/1/text"})
    changed = LeafDisclosure(**{**_fields(opened), "value": "John Roe"})
    elsewhere = LeafDisclosure(**{**_fields(opened), "index": (opened.index + 1) % 13})
    for bad in (moved, changed, elsewhere):
        with pytest.raises(RecordError, match="not in the committed tree"):
            check_disclosure_in(obj, bad)
    wrong_count = LeafDisclosure(**{**_fields(opened), "leaves": 14})
    with pytest.raises(RecordError, match="commits to 13 leaves"):
        check_disclosure_in(obj, wrong_count)
    with pytest.raises(RecordError, match="per-leaf commitment; disclose one leaf"):
        check_disclosure_in(obj, commit(OUTPUT, field_path="actual_outcome")[1])


def _fields(d: LeafDisclosure) -> dict[str, Any]:
    return {name: getattr(d, name) for name in LeafDisclosure.__slots__}


def test_rfc6901_escapes() -> None:
    assert escape_token("a/b~c") == "a~1b~0c"
    value = jcs.to_plain({"a/b~c": {"~1": 5}, "m~n": [0, 1]})
    assert resolve_pointer(value, "/a~1b~0c/~01") == 5
    assert resolve_pointer(value, "/m~0n/1") == 1
    assert resolve_pointer(value, "") == value
    for bad in ["/a~2", "a"]:
        with pytest.raises(InvalidRecordError):
            resolve_pointer(value, bad)
    with pytest.raises(RecordError):
        resolve_pointer(value, "/m~0n/01")
    record, kept = committed()
    opened = kept.disclose("/a~1b~0c")
    assert opened.value == "slashed key"
    check_disclosure_in(record.to_json_obj(), opened)


def test_decoys_pad_the_leaf_count_and_still_verify() -> None:
    record, kept = committed(decoys=7)
    assert isinstance(record.actual_outcome, Commitment) and record.actual_outcome.leaves == 20
    check_disclosure_in(record.to_json_obj(), kept.disclose("/pages"))
    with pytest.raises(RecordError, match="not a leaf"):
        kept.disclose("/text_regions/0")  # an inner node is not a leaf


def test_select_by_path_and_whole_field() -> None:
    record, kept = committed()
    chosen, missing = select_disclosures(
        ["actual_outcome/pages", "actual_outcome/nope", "parameters.x"], [kept]
    )
    assert [d.pointer for d in chosen if isinstance(d, LeafDisclosure)] == ["/pages"]
    assert missing == ["actual_outcome/nope", "parameters.x"]
    every, _ = select_disclosures(["actual_outcome"], [kept])
    assert len(every) == 13
    for d in every:
        check_disclosure_in(record.to_json_obj(), d)


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_disclose_and_verify_commands_show_the_leaf_and_nothing_else(tmp_path: Path) -> None:
    record, kept = committed()
    digests = filler(6, "leaf")
    digests[2] = record_digest(record)
    world = World(digests)
    receipt = world.receipt(2, 6, anchored=False, record=record)
    receipt_path = tmp_path / "r.json"
    receipt_path.write_text(receipt.to_json())
    private = tmp_path / "r.disclosures.jsonl"
    line = {"record_digest": record_digest(record).hex(), "disclosures": [kept.to_json_obj()]}
    private.write_bytes(jcs.canonical_bytes(line) + b"\n")
    out = tmp_path / "r2.json"
    key = world.key.key_string()
    code, text = invoke(
        "disclose", str(receipt_path), "--path", "actual_outcome/text_regions/0/text",
        "--out", str(out), "--disclosures", str(private),
    )  # fmt: skip
    assert code == 0, text
    assert 'actual_outcome/text_regions/0/text = "Jane Roe"' in text
    code, verified = invoke("receipt", str(out), "--key", key)
    assert code == 0, verified
    assert 'actual_outcome/text_regions/0/text = "Jane Roe"' in verified
    code, as_json = invoke("receipt", str(out), "--key", key, "--json")
    assert code == 0, as_json
    salts = [leaf_salt(SECRET, p).hex() for p, _ in json_leaves(jcs.to_plain(OUTPUT))]
    salts.remove(leaf_salt(SECRET, "/text_regions/0/text").hex())
    for output in (out.read_text(), text, verified, as_json):
        for secret in [*SIBLINGS[:2], *salts, SECRET.hex()]:
            assert secret not in output, secret
    # a leaf moved in the disclosed receipt fails verification
    moved = json.loads(out.read_text())
    moved["disclosures"][0]["pointer"] = "/text_regions/1/text"
    out.write_text(json.dumps(moved))
    code, refused = invoke("receipt", str(out), "--key", key)
    assert code != 0 and "not in the committed tree" in refused
