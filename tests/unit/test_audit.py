"""The auditor's commands on real receipts of an in-memory log (tests/audit_world.py):
``run --timeline``, ``lineage``, ``report --html``, ``index`` / ``query``, ``disclose``."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger_client.cli.main import main
from ledger_client.receipts.receipt import Receipt
from tests import processes
from tests.audit_world import SUPPORT, URL, build, tamper, write_runs
from tests.offline import OFFLINE_PROBE

RUNS = build()
KEY = RUNS.world.key.key_string()


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def invoke_json(*args: str) -> tuple[int, dict[str, Any]]:
    code, out = invoke(*args, "--json")
    return code, json.loads(out)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return write_runs(tmp_path / "runs", RUNS)


def test_timeline_rows_text_and_json(files: dict[str, Path]) -> None:
    args = ["run", str(files["support"]), "--key", KEY, "--tsa-root", str(files["root"])]
    code, out = invoke_json(*args, "--timeline")
    assert code == 0, out
    rows = out["timeline"]
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4, 5]
    assert [r["kind"] for r in rows][:2] == ["tool_call", "memory_write"]
    assert rows[1]["trust_label"] == "untrusted" and rows[1]["parents"][0]["step"] == 0
    assert rows[4]["label"] == "refund" and {p["step"] for p in rows[4]["parents"]} == {2, 3}
    assert all(r["verified"] and r["why_not"] is None for r in rows)
    checks = dict(rows[0]["checks"])
    anchored_at = checks.pop("anchored_at")
    assert checks == {
        "record": "valid", "checkpoint": "valid", "inclusion": "valid",
        "witnesses": "not_checked", "anchor": "valid",
    }  # fmt: skip
    assert anchored_at.endswith("Z") and rows[0]["index"] == 2
    code, text = invoke(*args, "--timeline")
    assert code == 0 and "step  time" in text and "tool/decision" in text
    row = r"\n4 +\S+ +\S+ +\+2 s +tool_call +refund +#3, #2 +6 +unsigned +yes\n"
    assert re.search(row, text), text


def test_timeline_names_what_failed(files: dict[str, Path]) -> None:
    tamper(files["support"], line=3)
    code, out = invoke_json("run", str(files["support"]), "--key", KEY, "--timeline")
    assert code == 1
    verdicts = [(r["step"], r["verified"]) for r in out["timeline"]]
    assert verdicts == [(0, True), (1, True), (2, True), (3, False), (4, False), (5, True)]
    assert "missing_parent" in out["timeline"][4]["why_not"]  # it rests on the altered record
    assert out["timeline"][3]["why_not"].startswith("receipt: the record hashes to")
    code, text = invoke("run", str(files["support"]), "--key", KEY, "--timeline")
    assert code == 1 and "invalid_receipt" in text and "altered" in text
    assert re.search(r"\n3 +.*NO: receipt: the record hashes to", text), text


def test_lineage_of_a_tainted_memory_write_crosses_runs(files: dict[str, Path]) -> None:
    folder = str(files["support"].parent)
    code, out = invoke_json("lineage", folder, "--key", KEY, "--tainted")
    assert code == 0, out
    found = [(r["kind"], r["label"], r["depth"]) for r in out["records"]]
    assert found == [
        ("memory_write", "note <- web", 0),
        ("parameter_construction", "refund", 1),
        ("tool_call", "refund", 2),
        ("outcome", "", 3),  # the review run rests on the refund: another run
    ]
    assert {r["run_id"] for r in out["records"]} == {SUPPORT, RUNS.review[0].run_id}
    assert all(r["verified"] for r in out["records"]) and out["unknown_parents"] == []
    policy = RUNS.digest(RUNS.support[2])
    code, out = invoke_json("lineage", folder, "--key", KEY, "--from", policy[:10])
    assert code == 0 and [r["label"] for r in out["records"]] == ["policy <- db", "refund", ""]


def test_lineage_reports_unknown_parents_and_failures(files: dict[str, Path]) -> None:
    review = RUNS.digest(RUNS.review[0])
    args = ["lineage", str(files["review"]), "--key", KEY, "--from", review, "--ancestors"]
    code, out = invoke_json(*args)
    assert code == 1 and out["unknown_parents"] == [
        {"child": review, "parent": RUNS.digest(RUNS.support[4])}
    ]
    code, text = invoke(*args)
    assert code == 1 and "unknown parent" in text
    tamper(files["support"], line=3)
    code, out = invoke_json("lineage", str(files["support"].parent), "--key", KEY, "--tainted")
    assert code == 1
    bad = [r for r in out["records"] if not r["verified"]]
    assert [r["kind"] for r in bad] == ["parameter_construction"]
    code, out = invoke_json("lineage", str(files["review"]), "--key", KEY)
    assert code == 2 and "exactly one of" in out["error"]
    code, out = invoke_json("lineage", str(files["review"]), "--key", KEY, "--from", "abcd")
    assert code == 2 and "at least 8 of its hex digits" in out["error"]


def test_report_is_self_contained_and_shows_problems(
    files: dict[str, Path], tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    args = ["report", str(files["support"].parent), "--key", KEY, "--tsa-root", str(files["root"])]
    code, out = invoke_json(*args, "--html", str(page))
    assert code == 0 and out["runs"] == 2
    html = page.read_text()
    assert "default-src 'none'" in html and "<script" not in html
    assert re.findall(r"src=", html) == []
    links = re.findall(r'href="([^"]*)"', html)  # in-page links only (parents, other runs)
    assert links and all(link.startswith("#r-") for link in links), links
    assert set(re.findall(r"https?://[^\"]*", html)) == {"http://www.w3.org/2000/svg"}
    assert SUPPORT in html and "fetch_page" in html and "untrusted" in html
    assert "all 2 run(s) verified" in html and "NOT VERIFIED" not in html
    tamper(files["support"], line=3)
    code, out = invoke_json(*args, "--html", str(page))
    assert code == 1 and out["failing_runs"] == [SUPPORT]
    html = page.read_text()
    assert "run NOT verified" in html and "altered" in html and "invalid_receipt" in html


def test_index_is_incremental_and_queries_filter(files: dict[str, Path], tmp_path: Path) -> None:
    db, folder = str(tmp_path / "audit.sqlite"), str(files["support"].parent)
    index = ["index", folder, "--db", db, "--key", KEY, "--tsa-root", str(files["root"])]
    code, out = invoke_json(*index)
    assert code == 0 and (out["indexed"], out["records"], out["skipped"]) == (2, 8, 0)
    assert (out["checkpoints"], out["tokens"]) == (1, 1)  # shared across both runs
    code, out = invoke_json(*index)
    assert (out["indexed"], out["skipped"]) == (0, 2)
    tamper(files["support"], line=3)
    os.utime(files["support"], ns=(1, 1))
    code, out = invoke_json(*index)
    assert (out["indexed"], out["skipped"], out["failed_runs"]) == (1, 1, 1)

    def query(*args: str) -> list[dict[str, Any]]:
        code, out = invoke_json("query", "--db", db, *args)
        assert code == 0, out
        return list(out["records"])

    assert [r["label"] for r in query("--trust", "untrusted")] == ["note <- web"]
    assert [r["step"] for r in query("--status", "failed")] == [3, 4]
    assert len(query("--agent", "reviewer")) == 2
    assert [r["step"] for r in query("--kind", "tool_call", "--tool", "refund")] == [4]
    assert len(query("--since", "2000-01-01T00:00:00Z", "--until", "2100-01-01T00:00:00Z")) == 8
    assert query("--since", "2100-01-01T00:00:00Z") == []
    assert len(query("--run", SUPPORT, "--limit", "2")) == 2
    code, text = invoke("query", "--db", db, "--trust", "untrusted")
    assert code == 0 and "memory_write" in text and "untrusted" in text
    assert invoke("query", "--db", db, "--since", "yesterday")[0] == 2
    assert invoke("query", "--db", str(tmp_path / "none.sqlite"))[0] == 2
    files["review"].unlink()
    code, out = invoke_json(*index)
    assert out["removed"] == 1
    rows = sqlite3.connect(db).execute("SELECT count(*) FROM records").fetchone()
    assert rows == (6,)


def test_index_exit_code_says_what_the_index_holds(files: dict[str, Path], tmp_path: Path) -> None:
    """The index is written either way, but "OK" only when every run it holds verified: a
    tampered run fails the command (exit 1) and keeps failing it while the index holds it,
    even when this call skipped it as unchanged; an unreadable file likewise."""
    db, folder = str(tmp_path / "audit.sqlite"), str(files["support"].parent)
    index = ["index", folder, "--db", db, "--key", KEY, "--tsa-root", str(files["root"])]
    code, text = invoke(*index)
    assert code == 0 and text.startswith("OK: index verified"), text
    original = files["support"].read_bytes()
    tamper(files["support"], line=3)
    support = str(files["support"].resolve())
    code, text = invoke(*index)
    assert code == 1 and text.startswith("INVALID: 1 of 2 run(s) in the index not verified")
    assert f"\n  {support}\n" in text and "OK" not in text, text
    code, out = invoke_json(*index)  # unchanged since: skipped, still held, still failing
    assert (code, out["skipped"], out["valid"], out["failing_runs"]) == (1, 2, False, [support])
    files["support"].write_bytes(original)
    code, out = invoke_json(*index)
    assert (code, out["indexed"], out["valid"], out["failing_runs"]) == (0, 1, True, [])
    junk = Path(folder) / "zz-junk.jsonl"
    junk.write_text("not json\n")
    code, out = invoke_json(*index)
    assert code == 1 and out["failing_runs"] == [str(junk.resolve())], out
    junk.unlink()
    code, out = invoke_json(*index)
    assert (code, out["removed"], out["failing_runs"]) == (0, 1, []), out


def test_disclose_one_field_and_verify_it(files: dict[str, Path], tmp_path: Path) -> None:
    out_file = tmp_path / "r2.json"
    fetch = RUNS.digest(RUNS.support[0])
    code, out = invoke_json(
        "disclose", str(files["support"]), "--digest", fetch[:12], "--path", "parameters.url",
        "--out", str(out_file),
    )  # fmt: skip
    assert code == 0, out
    assert out["disclosed"] == [{"field_path": "parameters.url", "value": URL}]
    opened = Receipt.from_json(out_file.read_text())
    assert [d.field_path for d in opened.disclosures] == ["parameters.url"]
    code, shown = invoke_json("receipt", str(out_file), "--key", KEY)
    assert code == 0 and shown["disclosures"] == [{"field_path": "parameters.url", "value": URL}]
    code, text = invoke("receipt", str(out_file), "--key", KEY)
    assert code == 0 and f'parameters.url = "{URL}"' in text
    forged = json.loads(out_file.read_text())
    forged["disclosures"][0]["value"] = "https://elsewhere.example"
    out_file.write_text(json.dumps(forged))
    assert invoke("receipt", str(out_file), "--key", KEY)[0] == 1
    code, out = invoke_json(
        "disclose", str(files["support"]), "--digest", fetch[:12], "--path", "parameters.query",
        "--out", str(out_file),
    )  # fmt: skip
    assert code == 2 and "no disclosure for 'parameters.query'" in out["error"]


def test_audit_commands_stay_offline(files: dict[str, Path], tmp_path: Path) -> None:
    done = processes.run(
        [sys.executable, "-c", OFFLINE_PROBE, "report", str(files["support"]), "--key", KEY,
         "--html", str(tmp_path / "r.html")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "IMPORTED []" in done.stdout


def test_the_one_reader_reads_what_was_written(files: dict[str, Path], tmp_path: Path) -> None:
    from dataclasses import fields

    from ledger.core.errors import FormatError
    from ledger.records.decision import DecisionRecord, record_digest
    from ledger_client.receipts.run_load import load_run

    items = load_run(files["support"])
    assert [i.record for i in items] == RUNS.support
    assert all(i.receipt.record == i.record and i.digest == RUNS.digest(i.record) for i in items)
    assert all(record_digest(i.record) == i.receipt.record_digest for i in items)
    folder = tmp_path / "folder"  # the same items as a folder of *.json, read the same way
    folder.mkdir()
    for n, line in enumerate(files["support"].read_text().splitlines()):
        (folder / f"{n:02d}.json").write_text(line)
    assert [(i.record, i.receipt) for i in load_run(folder)] == [
        (i.record, i.receipt) for i in items
    ]
    for record in RUNS.support:  # parsed once (no second validation), equal to the original
        again = DecisionRecord.from_json_obj(record.to_json_obj())
        assert again == record and all(hasattr(again, f.name) for f in fields(DecisionRecord))
    broken = files["support"].parent / "broken.jsonl"
    broken.write_text(files["support"].read_text().replace('"receipt"', '"receipts"', 1))
    with pytest.raises(FormatError, match=r"broken.jsonl:1: expected an object with 'receipt'"):
        load_run(broken)


def _edit_line(path: Path, line: int, edit: Any) -> None:
    lines = path.read_text().splitlines()
    lines[line] = edit(lines[line])
    path.write_text("\n".join(lines) + "\n")


def _refusals(files: dict[str, Path], tmp_path: Path) -> tuple[str, list[tuple[str, str]]]:
    """``run``'s error on the support run and the index's problems for it (same reader)."""
    code, out = invoke_json("run", str(files["support"]), "--key", KEY)
    assert code == 2, out
    db = str(tmp_path / "refused.sqlite")
    folder = str(files["support"].parent)
    code, indexed = invoke_json("index", folder, "--db", db, "--key", KEY, "--workers", "1")
    assert code == 1 and indexed["unreadable"] == 1, indexed  # indexed, and not all verified
    assert indexed["valid"] is False and indexed["failing_runs"] == [str(files["support"])]
    found = sqlite3.connect(db).execute(
        "SELECT path, code, message FROM problems WHERE path LIKE '%support.jsonl'"
    )
    return str(out["error"]), [(c, m) for _, c, m in found]


def test_run_and_index_refuse_a_duplicate_member_alike(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """A duplicate member name (here one the last value of which is the logged one, so a
    last-wins reader verified the run) is refused by ``run`` and by ``index`` with one message."""
    _edit_line(
        files["support"], 0, lambda text: text.replace('"agent": ', '"agent": "x", "agent": ', 1)
    )
    error, problems = _refusals(files, tmp_path)
    assert "support.jsonl:1" in error and "duplicate object member name" in error
    assert problems == [("unreadable", error)]


def test_run_and_index_refuse_a_receipt_record_of_another_json_type_alike(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """The record inside the receipt equals the one beside it as Python values (``true == 1``)
    but not as JSON: both commands refuse it (the index used to take the one beside it)."""

    def retype(text: str) -> str:
        obj = json.loads(text)
        assert obj["receipt"]["record"]["step"] == 1
        obj["receipt"]["record"]["step"] = True
        return json.dumps(obj)

    _edit_line(files["support"], 1, retype)
    error, problems = _refusals(files, tmp_path)
    assert "support.jsonl:2" in error and "record.step" in error
    assert problems == [("unreadable", error)]


def test_witness_column_counts_cosignatures_when_keys_are_given(
    files: dict[str, Path], tmp_path: Path
) -> None:
    from ledger.core.checkpoint import Checkpoint, CosignatureSigner, SignedNote

    witness = CosignatureSigner.generate("witness.example/w1")
    lines = []
    for line in files["review"].read_text().splitlines():
        obj = json.loads(line)
        note = obj["receipt"]["checkpoint"]
        checkpoint = Checkpoint.from_text(SignedNote.from_text(note).text)
        obj["receipt"]["checkpoint"] = (
            note + witness.cosign(checkpoint, 1_750_000_000).to_line() + "\n"
        )
        lines.append(json.dumps(obj))
    files["review"].write_text("\n".join(lines) + "\n")
    page = tmp_path / "w.html"
    args = ["report", str(files["review"]), "--key", KEY, "--html", str(page)]
    assert invoke(*args)[0] == 0
    assert "not checked" in page.read_text() and "1 cosigned" not in page.read_text()
    assert invoke(*args, "--witness", witness.verifier().key_string())[0] == 0
    assert page.read_text().count("1 cosigned") == 2
    other = CosignatureSigner.generate("witness.example/w2").verifier().key_string()
    assert invoke(*args, "--witness", other)[0] == 0
    assert page.read_text().count("0 cosigned") == 2
    code, out = invoke_json(*args, "--witness", "nonsense")
    assert code == 2 and "--witness" in out["error"]


def test_public_names_exist() -> None:
    import importlib

    for name in ("audit.index", "receipts.run_load", "audit.verify", "cli.audit", "cli.index",
                 "receipts.cache",
                 "receipts.disclose", "audit.lineage", "sdk.links", "sdk.otel_span",
                 "audit.report_html", "audit.run_files", "audit.timeline"):  # fmt: skip
        module = importlib.import_module(f"ledger_client.{name}")
        for public in module.__all__:
            assert hasattr(module, public), f"{name}.{public}"


def test_index_checks_find_what_verify_run_finds(files: dict[str, Path]) -> None:
    from ledger_client.audit.verify import audit_run
    from ledger_client.receipts.run_load import load_run
    from ledger_client.receipts.run_verify import verify_run
    from ledger_client.receipts.verify import ReceiptChecker

    tamper(files["support"], line=3)
    for path in (files["support"], files["review"]):
        items = load_run(str(path))
        verdict = verify_run(items, [RUNS.world.key])
        audit = audit_run(items, ReceiptChecker([RUNS.world.key]))
        mine = sorted((p.code, p.step, p.record_digest) for p, _ in audit.problems)
        assert mine == sorted((p.code, p.step, p.record_digest) for p, _ in verdict.problems)


def test_run_names_parents_in_other_runs(files: dict[str, Path]) -> None:
    code, out = invoke_json("run", str(files["review"]), "--key", KEY)
    assert code == 0 and out["external_parents"] == [RUNS.digest(RUNS.support[4])]
    code, text = invoke("run", str(files["review"]), "--key", KEY)
    assert code == 0 and f"parent in another run: {RUNS.digest(RUNS.support[4])}" in text


def test_receipt_disclose_opens_exactly_the_paths_asked() -> None:
    from ledger.core.errors import MalformedReceiptError, RecordError
    from ledger.records.commitments import commit
    from ledger_client.receipts.verify import verify_receipt
    from tests.audit_world import item as item_of

    fetch, memory = RUNS.support[0], RUNS.support[1]
    kept = RUNS.disclosures[RUNS.digest(fetch)]
    receipt = Receipt.from_json_obj(item_of(RUNS, fetch)["receipt"])
    assert receipt.disclosures == ()
    opened = receipt.disclose(["parameters.url"], kept)
    assert [(d.field_path, d.value) for d in opened.disclosures] == [("parameters.url", URL)]
    assert verify_receipt(opened, [RUNS.world.key]).disclosed == ("parameters.url",)
    assert opened.disclose([]).disclosures == ()  # from its own: nothing asked, nothing open
    with pytest.raises(MalformedReceiptError, match=r"no disclosure for 'payload\.value'"):
        receipt.disclose(["payload.value"], kept)
    _, wrong = commit("https://elsewhere.example", field_path="parameters.url")
    with pytest.raises(RecordError, match=r"parameters\.url"):
        receipt.disclose(["parameters.url"], [wrong])
    other = Receipt.from_json_obj(item_of(RUNS, memory)["receipt"])
    both = [*kept, *RUNS.disclosures[RUNS.digest(memory)]]
    assert [d.field_path for d in other.disclose(["payload.value"], both).disclosures] == [
        "payload.value"
    ]


def test_a_bad_anchor_beside_a_valid_one_fails_run_index_and_report_alike(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """``verify_run`` refuses a receipt with a failing anchor even beside a valid one; the
    part-by-part check behind ``index``, ``lineage --db`` and the report used to take the valid
    one and store the run as verified."""

    def second_anchor(text: str) -> str:
        obj = json.loads(text)
        anchors = obj["receipt"]["anchors"]
        assert len(anchors) == 1
        anchors.append(dict(anchors[0], token="MAo="))  # DER of an empty SEQUENCE: not a token
        return json.dumps(obj)

    _edit_line(files["review"], 0, second_anchor)
    roots = ["--key", KEY, "--tsa-root", str(files["root"])]
    code, out = invoke_json("run", str(files["review"]), *roots)
    assert code == 1 and out["valid"] is False, out
    db = str(tmp_path / "anchors.sqlite")
    folder = str(files["review"].parent)
    code, indexed = invoke_json("index", folder, "--db", db, *roots, "--workers", "1")
    assert code == 1 and indexed["failing_runs"] == [str(files["review"])], indexed
    with contextlib.closing(sqlite3.connect(db)) as found:
        stored = found.execute(
            "SELECT verified FROM files WHERE path LIKE '%review.jsonl'"
        ).fetchall()
        records = found.execute(
            "SELECT verified, why_not FROM records WHERE path LIKE '%review.jsonl' AND step = 0"
        ).fetchall()
    assert stored == [(0,)]
    assert [v for v, _ in records] == [0] and "anchor" in str(records[0][1])
