"""``ledger-verify query`` finds records by what they carry and by content: each digest kind,
parameter, tag, model, trace id, disclosed text; a digest of another kind or other content
finds nothing. Copies of a run are one run; ``--count-by`` counts; the index is 0600."""

from __future__ import annotations

import gc
import json
import os
import shutil
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.records.commitments import Commitment
from ledger.records.decision import record_digest
from ledger_client.audit.index import AuditIndex, CacheSpec
from ledger_client.cli.main import main
from ledger_client.clikit.outcome import Outcome, SharedJson, finish
from ledger_client.sdk.capture import content_digest
from tests.decision_world import (
    DECIDE,
    FINAL_TEXT,
    PROMPT,
    QUERY_TEXT,
    SECRET_ACTION,
    TRACE,
    Runs,
    build,
    write,
)


@pytest.fixture(scope="module")
def world() -> Runs:
    return build()


@pytest.fixture(scope="module")
def indexed(world: Runs, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("search")
    files = write(folder / "runs", world)
    shutil.copy(files["decide"], folder / "runs" / "decide-copy.jsonl")  # a copy of one run
    db = folder / "audit.sqlite"
    result = CliRunner().invoke(
        main, ["index", str(folder / "runs"), "--db", str(db), "--key",
               world.world.key.key_string(), "--workers", "1", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return {**files, "db": db}


def _query(indexed: dict[str, Path], *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["query", "--db", str(indexed["db"]), "--json", *args])
    assert result.exit_code == 0, result.output
    answer: dict[str, Any] = json.loads(result.output)
    return answer


def _steps(indexed: dict[str, Path], *args: str) -> list[tuple[str, int]]:
    return [(r["run_id"], r["step"]) for r in _query(indexed, *args)["records"]]


def test_the_index_is_private(indexed: dict[str, Path]) -> None:
    assert stat.S_IMODE(indexed["db"].stat().st_mode) == 0o600


def test_found_by_each_digest_kind(world: Runs, indexed: dict[str, Path]) -> None:
    select, call = world.runs[DECIDE][0], world.runs[DECIDE][1]
    query = select.parameters["query"]
    assert isinstance(query, Commitment)
    cases = {
        "record": (record_digest(call).hex(), [(DECIDE, 1)]),
        "parent": (record_digest(select).hex(), [(DECIDE, 1)]),
        "evidence": (PROMPT, [(DECIDE, 0)]),
        "input": (content_digest({"order": 5531}), [(DECIDE, 1)]),
        "output": (content_digest(FINAL_TEXT), [(DECIDE, 1)]),
        "commitment": (query.digest.hex(), [(DECIDE, 0)]),
    }
    for kind, (digest, expected) in cases.items():
        assert _steps(indexed, "--digest", digest, "--digest-kind", kind) == expected, kind
        assert expected[0] in _steps(indexed, "--digest", digest), kind  # any kind
    # a digest of another kind finds nothing
    assert _steps(indexed, "--digest", PROMPT, "--digest-kind", "output") == []
    assert _steps(indexed, "--digest", content_digest(FINAL_TEXT), "--digest-kind", "input") == []
    assert _steps(indexed, "--digest", "ab" * 32) == []


def test_found_by_parameter_tag_model_trace_and_outcome(indexed: dict[str, Path]) -> None:
    assert _steps(indexed, "--param", "temperature=0.2") == [(DECIDE, 0)]
    assert _steps(indexed, "--param", "temperature=0.3") == []
    assert _steps(indexed, "--param", "top_p=0.9") == [(DECIDE, 0)]  # a model parameter
    assert _steps(indexed, "--tag", "billing") == [(DECIDE, 0)]
    assert _steps(indexed, "--tag", "billing", "--tag", "staging") == []
    assert _steps(indexed, "--model", "gpt-test-1") == [(DECIDE, 0), (DECIDE, 1)]
    assert _steps(indexed, "--trace-id", TRACE.upper()) == [(DECIDE, 0), (DECIDE, 1)]
    assert _steps(indexed, "--trace-id", "0" * 31 + "1") == []
    assert _steps(indexed, "--outcome", "schema_mismatch") == [(DECIDE, 0)]


def test_found_by_content(indexed: dict[str, Path], tmp_path: Path) -> None:
    assert _steps(indexed, "--text", FINAL_TEXT) == [(DECIDE, 1)]  # final text -> its record
    answer = tmp_path / "answer.txt"
    answer.write_text(FINAL_TEXT)
    assert _steps(indexed, "--file", str(answer)) == [(DECIDE, 1)]
    assert _steps(indexed, "--text", FINAL_TEXT + ".") == []
    # committed: not found by content, unless the auditor's disclosures file opens it
    assert _steps(indexed, "--text", QUERY_TEXT) == []
    private = str(indexed["private"])
    assert _steps(indexed, "--text", QUERY_TEXT, "--disclosures", private) == [(DECIDE, 0)]
    assert _steps(indexed, "--text", SECRET_ACTION, "--disclosures", private) == [(DECIDE, 0)]
    assert _steps(indexed, "--text", "not disclosed", "--disclosures", private) == []


def test_copies_of_a_run_are_one_run_and_counted_once(indexed: dict[str, Path]) -> None:
    rows = _query(indexed, "--run", DECIDE)["records"]
    assert len(rows) == 5 and all(r["copies"] == 2 for r in rows)
    groups = _query(indexed, "--count-by", "run")["groups"]
    assert {g["value"]: (g["records"], g["runs"]) for g in groups}[DECIDE] == (5, 1)
    by_model = {g["value"]: g for g in _query(indexed, "--count-by", "model")["groups"]}
    model = by_model["gpt-test-1"]  # copies counted once: 2 records, not 4
    assert (model["records"], model["tokens"], model["cost"], model["currency"]) == (
        2, 1620, 0.0175, "USD"
    )  # fmt: skip
    assert model["duration_ms"] == 1250
    by_tag = _query(indexed, "--count-by", "tag")["groups"]
    assert [(g["value"], g["records"]) for g in by_tag] == [("billing", 1), ("prod", 1)]


def test_bad_input_is_one_line(indexed: dict[str, Path]) -> None:
    for args in (["--digest", "xyz"], ["--param", "novalue"], ["--disclosures",
                 str(indexed["private"])]):  # fmt: skip
        result = CliRunner().invoke(main, ["query", "--db", str(indexed["db"]), *args])
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output


def _lineage(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(main, ["lineage", *args, "--json"])
    return result.exit_code, json.loads(result.output)


def test_lineage_uses_stored_verdicts_and_verifies_the_rest(
    world: Runs, indexed: dict[str, Path], tmp_path: Path
) -> None:
    key = world.world.key.key_string()
    runs = indexed["decide"].parent
    start = record_digest(world.runs[DECIDE][0]).hex()
    code, plain = _lineage(str(runs), "--key", key, "--from", start)
    assert code == 0
    code, stored = _lineage(str(runs), "--key", key, "--from", start, "--db", str(indexed["db"]))
    assert code == 0, stored
    assert {r["record_digest"] for r in stored["records"]} == {
        r["record_digest"] for r in plain["records"]
    }
    assert {r["source"] for r in stored["records"]} == {"index"}
    assert {r["source"] for r in stored["runs"]} == {"index"}
    # the stored verdicts (encoded once and spliced into the answer) are the verdicts themselves
    verdicts = {r["record_digest"]: r["verdict"] for r in plain["records"]}
    assert {r["record_digest"]: r["verdict"] for r in stored["records"]} == verdicts
    # two copies of the run are given: each record is taken from the copy stored first
    with sqlite3.connect(indexed["db"]) as conn:
        first = {
            r["record_digest"]: conn.execute(
                "SELECT path FROM records WHERE record_digest = ? ORDER BY rowid LIMIT 1",
                (r["record_digest"],),
            ).fetchone()[0]
            for r in stored["records"]
        }
    assert len(stored["records"]) > 1
    assert {r["record_digest"]: r["run_file"] for r in stored["records"]} == first
    # a copy elsewhere is the same file hash: stored; a run not in the index: verified now
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(indexed["decide"], other / "moved.jsonl")
    fresh = json.loads(indexed["chain"].read_text().splitlines()[0])
    (other / "fresh.jsonl").write_text(json.dumps(fresh) + "\n")
    code, mixed = _lineage(str(other), "--key", key, "--from", start, "--db", str(indexed["db"]))
    sources = {Path(r["run_file"]).name: r["source"] for r in mixed["runs"]}
    assert sources == {"moved.jsonl": "index", "fresh.jsonl": "verified now"}
    assert code == 1 and mixed["failed_runs"] == [str(other / "fresh.jsonl")]  # not complete
    # other trust inputs: nothing is taken from the index
    code, again = _lineage(str(runs), "--key", key, "--from", start, "--db", str(indexed["db"]),
                           "--max-delay", "2h")  # fmt: skip
    assert {r["source"] for r in again["runs"]} == {"verified now"}


def _tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(db) as conn:
        out = {t: sorted(conn.execute(f"SELECT * FROM {t}"), key=repr)
               for t in ("files", "records", "terms", "problems")}  # fmt: skip
        out["indexes"] = sorted(conn.execute("SELECT name, sql FROM sqlite_master "
                                             "WHERE type = 'index'"))  # fmt: skip
    return out


def test_a_new_index_built_in_bulk_equals_one_built_file_by_file(
    world: Runs, indexed: dict[str, Path], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    for n in range(70):  # enough files for the bulk build (rows first, SQL indexes at the end)
        shutil.copy(indexed["decide"], runs / f"decide-{n:02d}.jsonl")
    key = world.world.key.key_string()

    def index(db: Path, *dirs: Path) -> None:
        args = ["index", *map(str, dirs), "--db", str(db), "--key", key, "--workers", "1"]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output

    index(tmp_path / "bulk.sqlite", runs)  # empty index, 70 files: bulk
    index(tmp_path / "one.sqlite", runs / "decide-00.jsonl")  # then file by file
    index(tmp_path / "one.sqlite", runs)
    bulk, one = _tables(tmp_path / "bulk.sqlite"), _tables(tmp_path / "one.sqlite")
    assert len(bulk["records"]) == 70 * 5 and len(bulk["indexes"]) >= 10
    assert bulk == one
    with sqlite3.connect(tmp_path / "bulk.sqlite") as conn:  # built with a rollback journal
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)  # then back to WAL


def test_a_bulk_build_commits_with_a_rollback_journal_then_goes_back_to_wal(
    world: Runs, indexed: dict[str, Path], tmp_path: Path
) -> None:
    runs = [tmp_path / f"decide-{n:02d}.jsonl" for n in range(70)]
    for path in runs:
        shutil.copy(indexed["decide"], path)
    spec = CacheSpec((world.world.key.key_string(),), (), None, ())
    seen: list[tuple[str, int, int]] = []
    collector, frozen = gc.get_threshold(), gc.get_freeze_count()
    with AuditIndex(tmp_path / "bulk.sqlite") as ix:

        def progress(done: int) -> None:
            mode = ix.db.execute("PRAGMA journal_mode").fetchone()[0]
            mapped = ix.db.execute("PRAGMA mmap_size").fetchone()[0]
            seen.append((mode, ix.db.execute("PRAGMA synchronous").fetchone()[0], mapped > 0))
            # young collections at most every 20,000 allocations (never more often than the
            # process had them: an in-process mypy run of another test sets 200,000)
            assert gc.get_threshold()[0] >= max(20_000, collector[0]) and gc.get_freeze_count()

        stats, _ = ix.index(runs, spec, fingerprint="f", progress=progress)
        assert stats.indexed == 70
        assert set(seen) == {("delete", 2, True)}  # FULL, read through a memory map
        assert ix.db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert ix.db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        assert ix.db.execute("PRAGMA mmap_size").fetchone() == (0,)
        assert gc.get_threshold() == collector  # as it was; so is what was frozen before
        assert gc.get_freeze_count() >= frozen if frozen else gc.get_freeze_count() == 0
        changed = runs[0].stat().st_mtime_ns + 1_000_000
        os.utime(runs[0], ns=(changed, changed))  # indexed again, into a non-empty index: WAL
        assert ix.index(runs, spec, fingerprint="f", progress=progress)[0].indexed == 1
        assert seen[-1] == ("wal", 1, False)
    answer = _query({"db": tmp_path / "bulk.sqlite"}, "--run", DECIDE)["records"]
    assert len(answer) == 5 and all(r["copies"] == 70 for r in answer)


def test_indexing_never_collects_more_often_nor_thaws_the_callers_frozen_objects(
    world: Runs, indexed: dict[str, Path], tmp_path: Path
) -> None:
    """A caller that collects less often than the index would (mypy's API sets 200,000) keeps
    its setting while indexing; objects it froze are still frozen afterwards."""
    runs = [tmp_path / f"decide-{n:02d}.jsonl" for n in range(3)]
    for path in runs:
        shutil.copy(indexed["decide"], path)
    spec = CacheSpec((world.world.key.key_string(),), (), None, ())
    seen: list[int] = []
    collector = gc.get_threshold()
    gc.freeze()
    frozen = gc.get_freeze_count()
    gc.set_threshold(500_000, *collector[1:])
    try:
        with AuditIndex(tmp_path / "a.sqlite") as ix:
            ix.index(runs, spec, fingerprint="f", progress=lambda n: seen.append(
                gc.get_threshold()[0]))  # fmt: skip
        assert seen == [500_000] * 3 and gc.get_threshold()[0] == 500_000
        assert gc.get_freeze_count() >= frozen > 0
    finally:
        gc.set_threshold(*collector)
        gc.unfreeze()


def test_shared_json_is_encoded_once_and_spliced_exactly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shared = SharedJson()
    verdict = {"status": "ok", "checks": [{"name": "time", "status": "ok", "message": "é \x00"}]}
    lookalike = "\x00shared-not-the-token-0"
    answer: dict[str, Any] = {"records": [{"verdict": verdict}] * 2, "note": lookalike}
    placed = {
        **answer,
        "records": [{"verdict": shared.put(r["verdict"])} for r in answer["records"]],
    }
    assert len(shared.texts) == 1  # one value, one encoding
    with pytest.raises(SystemExit):
        finish("x", True, lambda: Outcome("x", placed, [], shared.texts))
    expected = json.dumps({"valid": True, "check": "x", **answer}, sort_keys=True)
    assert capsys.readouterr().out == expected + "\n"


def test_a_verdicts_stored_text_is_its_json_whichever_checks_it_shares() -> None:
    """``_verdict_text`` finds a verdict's text by its checks' identities first: the text is
    ``json.dumps(verdict.to_json_obj())`` for verdicts of shared checks, of new checks, and of
    new checks made where freed ones were (their ids taken again)."""
    from ledger_client.audit.index import _verdict_text
    from ledger_client.audit.verdicts import Check, Verdict

    shared = Check(name="receipt", status="ok", message="valid")
    for n in range(300):
        fresh = Check(name="lineage", status="warning", message=f"inputs not linked {n % 7}")
        for verdict in (Verdict(checks=(shared, fresh)), Verdict(checks=(shared,))):
            assert _verdict_text(verdict) == json.dumps(verdict.to_json_obj())
        del fresh, verdict  # its check's id may be taken by the next one's
