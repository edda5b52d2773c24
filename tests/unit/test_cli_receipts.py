"""``ledger-verify receipt`` and ``run`` on receipts of an in-memory log (tests/receipt_world)."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.records.decision import SCHEMA_VERSION, record_digest
from ledger_client.cli.main import main
from ledger_client.receipts.receipt import Receipt
from tests import processes
from tests.offline import OFFLINE_PROBE
from tests.receipt_world import (
    INTRUDER,
    RECORDS,
    RUN,
    item,
    items,
    key,
    make_record,
    tsa,
    world,
)


def write(tmp_path: Path, name: str, data: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


def folder(tmp_path: Path, entries: Sequence[dict[str, Any]]) -> str:
    where = tmp_path / "run"
    where.mkdir()
    for n, entry in enumerate(entries):
        (where / f"{n:03d}.json").write_text(json.dumps(entry))
    return str(where)


def jsonl(tmp_path: Path, entries: Sequence[dict[str, Any]]) -> str:
    return write(tmp_path, "run.jsonl", "".join(json.dumps(e) + "\n" for e in entries))


def root(tmp_path: Path) -> str:
    return write(tmp_path, "root.pem", tsa().root_pem())


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def invoke_json(*args: str) -> tuple[int, dict[str, Any]]:
    code, out = invoke(*args, "--json")
    payload: dict[str, Any] = json.loads(out)
    return code, payload


def codes(payload: dict[str, Any]) -> list[str]:
    return sorted(p["code"] for p in payload["problems"])


# --- receipt --------------------------------------------------------------------------------------


def receipt_file(tmp_path: Path, receipt: Receipt | None = None) -> str:
    receipt = receipt or world().receipt(5, 9)
    return write(tmp_path, "r.json", receipt.to_json())


def test_receipt_valid_with_anchor(tmp_path: Path) -> None:
    args = ["receipt", receipt_file(tmp_path), "--key", world().key.key_string()]
    code, out = invoke_json(*args, "--tsa-root", root(tmp_path))
    assert code == 0, out
    assert out["valid"] is True and out["check"] == "receipt"
    assert (out["index"], out["tree_size"], out["anchors_checked"]) == (5, 9, True)
    assert out["record_digest"] == record_digest(make_record(3)).hex()
    assert out["logged_at"].endswith("Z") and out["anchored_at"].endswith("Z")
    assert out["anchored_by"] == tsa().tsa_cert.subject.rfc4514_string()
    code, text = invoke(*args, "--tsa-root", root(tmp_path))
    assert code == 0 and text.startswith("OK: receipt verified")
    for label in ["record digest:", "index:", "logged at:", "anchored at:", "signed by:"]:
        assert label in text


def test_receipt_without_roots_says_not_checked(tmp_path: Path) -> None:
    code, text = invoke("receipt", receipt_file(tmp_path), "--key", world().key.key_string())
    assert code == 0 and "not checked" in text
    code, out = invoke_json("receipt", receipt_file(tmp_path), "--key", world().key.key_string())
    assert out["anchors_checked"] is False and out["anchored_at"] is None
    assert [a["status"] for a in out["anchors"]] == ["not_checked"]


def test_receipt_with_record_file(tmp_path: Path) -> None:
    base = ["receipt", receipt_file(tmp_path), "--key", world().key.key_string()]
    good = write(tmp_path, "good.json", make_record(3).to_json())
    code, out = invoke_json(*base, "--record", good)
    assert code == 0 and out["record"]["step"] == 3
    other = write(tmp_path, "other.json", make_record(4).to_json())
    code, out = invoke_json(*base, "--record", other)
    assert code == 1 and "given record" in out["error"]
    bad = write(tmp_path, "bad.json", '{"step": 1}')
    assert invoke(*base, "--record", bad)[0] == 2


def test_receipt_failures_and_malformed_input(tmp_path: Path) -> None:
    receipt = world().receipt(5, 9)
    obj = receipt.to_json_obj()
    proof = obj["inclusion_proof"]
    assert isinstance(proof, list)
    proof[0] = "A" * 43 + "="
    tampered = write(tmp_path, "t.json", json.dumps(obj))
    code, out = invoke_json("receipt", tampered, "--key", world().key.key_string())
    assert code == 1 and out["valid"] is False and "mismatch" in out["error"]
    code, out = invoke_json(
        "receipt", receipt_file(tmp_path), "--key", world().key.key_string(), "--tsa-root",
        write(tmp_path, "other.pem", tsa("Other TSA").root_pem()),
    )  # fmt: skip
    assert code == 1 and "no anchor verifies" in out["error"]
    extra = write(tmp_path, "x.json", json.dumps({**receipt.to_json_obj(), "note": 1}))
    code, out = invoke_json("receipt", extra, "--key", world().key.key_string())
    assert code == 2 and out["error"] == "note: unknown field"
    assert invoke("receipt", receipt_file(tmp_path), "--key", "garbage")[0] == 2
    assert invoke("receipt", receipt_file(tmp_path))[0] == 2  # --key is required
    assert invoke("receipt", str(tmp_path / "absent.json"), "--key", key())[0] == 2


# --- run ------------------------------------------------------------------------------------------


def test_complete_run_folder_and_jsonl(tmp_path: Path) -> None:
    for path in [folder(tmp_path, items()), jsonl(tmp_path, items())]:
        code, out = invoke_json("run", path, "--key", key(), "--tsa-root", root(tmp_path))
        assert code == 0, out
        assert out["valid"] is True and out["problems"] == []
        assert (out["run_id"], out["records"], out["receipts_valid"]) == (RUN, 5, 5)
        assert out["closed_by"] == record_digest(RECORDS[-1]).hex()
    code, text = invoke("run", jsonl(tmp_path, items()[::-1]), "--key", key())
    assert code == 0 and "anchors:       not checked" in text  # line order is not authenticated


def test_removed_record_is_missing(tmp_path: Path) -> None:
    entries = items()
    del entries[2]
    code, out = invoke_json("run", folder(tmp_path, entries), "--key", key())
    assert code == 1 and out["valid"] is False
    assert codes(out) == ["missing", "missing_parent"]
    missing = next(p for p in out["problems"] if p["code"] == "missing")
    assert missing["step"] == 2 and missing["record_digest"] == record_digest(RECORDS[2]).hex()
    timeline = {(t["step"], t["kind"]): t["status"] for t in out["timeline"]}
    assert timeline == {
        (0, "tool_call"): "verified",
        (1, "tool_call"): "verified",
        (2, None): "missing",  # left out by the presenter, listed by the closure
        (3, "tool_call"): "missing_parent",
        (4, "run_closed"): "verified",
    }
    assert [t["index"] for t in out["timeline"]] == [3, 4, None, 6, 7]


def test_complete_run_timeline_is_all_verified(tmp_path: Path) -> None:
    code, out = invoke_json("run", jsonl(tmp_path, items()), "--key", key())
    assert code == 0
    assert [t["status"] for t in out["timeline"]] == ["verified"] * 5
    assert [t["step"] for t in out["timeline"]] == [0, 1, 2, 3, 4]
    assert all(t["logged_at_ms"] for t in out["timeline"])


def test_inserted_record_is_extra(tmp_path: Path) -> None:
    code, out = invoke_json("run", jsonl(tmp_path, [*items(), item(INTRUDER)]), "--key", key())
    # logged after run_closed at a later step, the intruder also makes run_closed not last
    assert code == 1 and codes(out) == ["after_close", "extra", "reordered"]
    named = {p["code"]: p for p in out["problems"]}
    assert named["extra"]["record_id"] == INTRUDER.record_id
    assert named["extra"]["source"] == "run.jsonl:6"
    assert named["reordered"]["record_digest"] == record_digest(RECORDS[-1]).hex()


def test_altered_record_is_named(tmp_path: Path) -> None:
    entries = items()
    entries[1]["record"]["agent"] = "mallory"
    path = folder(tmp_path, entries)
    code, out = invoke_json("run", path, "--key", key())
    assert code == 1
    assert codes(out) == ["altered", "invalid_receipt", "missing_parent"]
    named = {p["code"]: p for p in out["problems"]}
    assert named["altered"]["step"] == 1 and named["invalid_receipt"]["source"] == "001.json"
    code, text = invoke("run", path, "--key", key())
    assert code == 1 and text.startswith("INVALID: 3 problem(s) in run run-cli")
    assert "altered: step 1 [001.json]" in text


def test_records_logged_out_of_order_are_reordered(tmp_path: Path) -> None:
    order = (0, 2, 1, 3, 4)  # step 2 was logged before step 1
    code, out = invoke_json("run", folder(tmp_path, items(order)), "--key", key())
    assert code == 1
    assert codes(out) == ["parent_logged_later", "reordered"]
    late = next(p for p in out["problems"] if p["code"] == "parent_logged_later")
    assert late["step"] == 2


def test_malformed_run_input(tmp_path: Path) -> None:
    code, out = invoke_json("run", jsonl(tmp_path, [*items()[:2], {"receipt": 1}]), "--key", key())
    assert code == 2 and out["error"].startswith("run.jsonl:3: ")
    write(tmp_path, "bad.jsonl", "{nope\n")
    assert invoke("run", str(tmp_path / "bad.jsonl"), "--key", key())[0] == 2
    (tmp_path / "empty").mkdir()
    code, out = invoke_json("run", str(tmp_path / "empty"), "--key", key())
    assert code == 2 and "no records" in out["error"]
    unknown = [{**items()[0], "comment": "x"}]
    assert invoke("run", jsonl(tmp_path, unknown), "--key", key())[0] == 2


def unanchored(entries: list[dict[str, Any]], at: Sequence[int]) -> list[dict[str, Any]]:
    """``entries`` with the anchors of the receipts at ``at`` removed (fetched before one)."""
    for i in at:
        entries[i]["receipt"] = {**entries[i]["receipt"], "anchors": []}
    return entries


def test_unanchored_run_is_anchors_pending_never_ok_nor_invalid(tmp_path: Path) -> None:
    path = jsonl(tmp_path, unanchored(items(), [0, 3]))
    args = ["run", path, "--key", key(), "--tsa-root", root(tmp_path)]
    code, out = invoke_json(*args)
    assert code == 3 and out["valid"] is False, out
    assert (out["status"], out["anchors_pending"], out["receipts_valid"]) == (
        "anchors_pending", 2, 5,
    )  # fmt: skip
    assert codes(out) == ["anchors_pending", "anchors_pending"]
    timeline = [t["status"] for t in out["timeline"]]
    assert timeline == ["anchors_pending", "verified", "verified", "anchors_pending", "verified"]
    assert out["timeline"][0]["index"] is not None  # everything but the anchor was verified
    code, text = invoke(*args)
    assert code == 3 and text.startswith("ANCHORS PENDING: 2 record(s) of run run-cli")
    assert "ledger receipt upgrade" in text and "altered" not in text
    # without --tsa-root anchors are not asked for: valid, "not checked"
    assert invoke("run", path, "--key", key())[0] == 0
    # the HTML report: its own banner and exit code
    html = tmp_path / "report.html"
    code, out = invoke_json("report", path, "--key", key(), "--tsa-root", root(tmp_path),
                            "--html", str(html))  # fmt: skip
    assert code == 3 and out["status"] == "anchors_pending" and out["pending_runs"] == [RUN]
    page = html.read_text()
    assert "anchors pending: 2 record(s) not anchored yet" in page and "NOT verified" not in page
    # the index is written; its exit code says what it holds: anchors pending only (3)
    db, indexed = str(tmp_path / "audit.sqlite"), [str(Path(path).resolve())]
    index = ["index", path, "--db", db, "--key", key(), "--tsa-root", root(tmp_path)]
    code, out = invoke_json(*index)
    assert code == 3 and out["status"] == "anchors_pending" and out["failing_runs"] == indexed
    code, text = invoke(*index)
    assert code == 3 and text.startswith("ANCHORS PENDING: 1 of 1 run(s) in the index"), text
    # a pending anchor beside a real failure: invalid (exit 1), both named
    broken = unanchored(items(), [0])
    broken[2]["record"]["agent"] = "mallory"
    code, out = invoke_json("run", jsonl(tmp_path, broken), "--key", key(), "--tsa-root",
                            root(tmp_path))  # fmt: skip
    assert code == 1 and out["status"] == "invalid" and "anchors_pending" in codes(out)
    code, out = invoke_json(*index)  # the same file, now with a real failure too: invalid
    assert code == 1 and out["valid"] is False and out["failing_runs"] == indexed, out
    # one receipt: the same verdict and exit code
    receipt = write(tmp_path, "r.json", world().receipt(5, 9, anchored=False).to_json())
    code, out = invoke_json("receipt", receipt, "--key", world().key.key_string(),
                            "--tsa-root", root(tmp_path))  # fmt: skip
    assert code == 3 and out["status"] == "anchors_pending" and "no anchor yet" in out["error"]


NEWER = SCHEMA_VERSION + 1  # a version this code does not read


def test_newer_schema_version_is_unsupported_not_altered(tmp_path: Path) -> None:
    entries = items()
    entries[1]["record"] = {**entries[1]["record"], "schema": f"ledger.decision/v{NEWER}", "new": 1}
    code, out = invoke_json("run", jsonl(tmp_path, entries), "--key", key())
    assert code == 4 and out["valid"] is False, out
    assert out["status"] == "unsupported_schema_version" and out["schema_version"] == NEWER
    assert out["error"].startswith(f"run.jsonl:2: unsupported schema version {NEWER}")
    assert out["error"].endswith("upgrade ledger-verify")
    code, text = invoke("run", jsonl(tmp_path, entries), "--key", key())
    assert code == 4 and text.startswith(
        f"UNSUPPORTED: run.jsonl:2: unsupported schema version {NEWER}"
    )
    assert "altered" not in text and "INVALID" not in text
    # the index lists the file with its own problem, never as altered
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "newer.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    db = str(tmp_path / "audit.sqlite")
    code, text = invoke("index", str(tmp_path / "runs"), "--db", db, "--key", key())
    assert code == 4 and text.startswith("UNSUPPORTED: 1 of 1 run(s) in the index"), text
    with sqlite3.connect(db) as conn:
        found = conn.execute("SELECT code, message FROM problems").fetchall()
    assert [code for code, _ in found] == ["unsupported_schema_version"]
    assert f"unsupported schema version {NEWER}" in found[0][1]
    newer = {**world().receipt(5, 9).to_json_obj(), "receipt": "decision-ledger/receipt/v3"}
    path = write(tmp_path, "r3.json", json.dumps(newer))
    code, out = invoke_json("receipt", path, "--key", key())
    assert code == 4 and "receipt: unsupported schema version 3" in out["error"]


def test_unknown_item_fields_are_all_named(tmp_path: Path) -> None:
    unknown = [{**items()[0], "comment": "x", "agent_note": "y"}]
    code, out = invoke_json("run", jsonl(tmp_path, unknown), "--key", key())
    assert code == 2
    assert out["error"] == (
        "run.jsonl:1: unknown fields 'agent_note', 'comment' (only 'record' and 'receipt')"
    )


@pytest.mark.parametrize("command", ["receipt", "run"])
def test_real_subprocess_and_no_grpc_or_rocksdict_import(tmp_path: Path, command: str) -> None:
    target = receipt_file(tmp_path) if command == "receipt" else jsonl(tmp_path, items())
    signer_key = world().key.key_string() if command == "receipt" else key()
    probe = OFFLINE_PROBE
    args = [command, target, "--key", signer_key, "--tsa-root", root(tmp_path)]
    proc = processes.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "IMPORTED []" in proc.stdout
