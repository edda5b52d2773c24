"""The audit index's schema version (``PRAGMA user_version``, ``audit.index.VERSION``): an index
made by an older verifier is made again by ``index`` (derived data) and refused in one line by
``query``, ``lineage --db`` and ``report --db`` (exit 2), never read with the new queries; a
newer one is refused by all. Rows of a changed or removed file go with it (records and terms
by their ids' range)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger_client.audit.index import _PAGE, VERSION, term_condition
from ledger_client.audit.lineage_index import TERM_FIELDS
from ledger_client.cli.index import _resolved
from ledger_client.cli.main import main
from tests.decision_world import DECIDE, Runs, build, write

# The schema of the index before version 2 (user_version 0): terms by path and record digest.
OLD_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files(
  path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, run_id TEXT,
  agent TEXT, records INTEGER NOT NULL, verified INTEGER NOT NULL, problems INTEGER NOT NULL,
  file_hash TEXT NOT NULL, verdict TEXT);
CREATE TABLE records(
  path TEXT NOT NULL, run_id TEXT NOT NULL, agent TEXT NOT NULL, step INTEGER NOT NULL,
  kind TEXT NOT NULL, tool TEXT, label TEXT NOT NULL, time TEXT NOT NULL,
  logged_at_ms INTEGER, log_index INTEGER NOT NULL, record_digest TEXT NOT NULL,
  trust_label TEXT, outcome TEXT, verified INTEGER NOT NULL, why_not TEXT,
  parents TEXT NOT NULL, time_difference_ms INTEGER, verdict TEXT NOT NULL, model TEXT,
  trace_id TEXT, span_id TEXT, tokens INTEGER, cost REAL, cost_currency TEXT, duration_ms INTEGER,
  file_hash TEXT);
CREATE TABLE terms(
  path TEXT NOT NULL, record_digest TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE problems(
  path TEXT NOT NULL, run_id TEXT, code TEXT NOT NULL, step INTEGER, record_digest TEXT,
  message TEXT NOT NULL);
CREATE INDEX terms_path ON terms(path);
"""


@pytest.fixture(scope="module")
def world() -> Runs:
    return build()


@pytest.fixture
def runs(world: Runs, tmp_path: Path) -> Path:
    write(tmp_path / "runs", world)
    return tmp_path / "runs"


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _index(world: Runs, runs: Path, db: Path) -> tuple[int, str]:
    key = world.world.key.key_string()
    return _invoke("index", str(runs), "--db", str(db), "--key", key, "--workers", "1", "--json")


def _readers(world: Runs, runs: Path, db: Path, tmp_path: Path) -> list[tuple[int, str]]:
    key = world.world.key.key_string()
    return [
        _invoke("query", "--db", str(db), "--run", DECIDE),
        _invoke("lineage", str(runs), "--key", key, "--tainted", "--db", str(db)),
        _invoke("report", str(runs), "--key", key, "--db", str(db), "--html",
                str(tmp_path / "report.html")),
    ]  # fmt: skip


# a row's verdict as its text (the row ``t``'s verdict id in ``verdicts``, version 3)
_TEXT = "(SELECT v.text FROM verdicts v WHERE v.id = t.verdict)"


# a term's kind by its name (before version 3, not its code)
_WHEN = " ".join(f"WHEN {n} THEN '{k}'" for k, n in TERM_FIELDS.items())
_KIND = f"CASE t.field {_WHEN} ELSE t.field END"
# a records row's file hash (a column of its own before version 3)
_HASH = "(SELECT f.file_hash FROM files f WHERE f.path = t.path)"


def _texts(columns: list[str]) -> str:
    return ", ".join(_TEXT if c == "verdict" else c for c in columns)


def _version_2_index(world: Runs, runs: Path, db: Path) -> None:
    """An index as the verifier of version 2 made it: each row with its verdict's text."""
    new = db.with_name("new.sqlite")
    assert _index(world, runs, new)[0] == 0
    shutil.copy(new, db)
    with closing(sqlite3.connect(db)) as conn:
        for table in ("files", "records"):
            conn.execute(f"ALTER TABLE {table} ADD COLUMN text TEXT")
            conn.execute(f"UPDATE {table} SET text = {_TEXT.replace('t.verdict', 'verdict')}")
            conn.execute(f"UPDATE {table} SET verdict = text")
            conn.execute(f"ALTER TABLE {table} DROP COLUMN text")
        conn.execute("ALTER TABLE records ADD COLUMN file_hash TEXT")
        conn.execute(f"UPDATE records SET file_hash = {_HASH.replace('t.path', 'records.path')}")
        conn.execute(f"UPDATE terms SET field = {_KIND.replace('t.field', 'field')}")
        conn.execute("DROP TABLE verdicts")
        conn.execute("PRAGMA user_version = 2")
        conn.commit()
        assert conn.execute("SELECT typeof(verdict) FROM records LIMIT 1").fetchone() == ("text",)


def _old_index(world: Runs, runs: Path, db: Path) -> None:
    """An index as the verifier before version 2 made it (its rows taken from a new one)."""
    new = db.with_name("new.sqlite")
    assert _index(world, runs, new)[0] == 0
    with closing(sqlite3.connect(new)) as src, closing(sqlite3.connect(db)) as out:
        out.executescript(OLD_SCHEMA)
        out.executemany("INSERT INTO meta VALUES (?, ?)", src.execute("SELECT * FROM meta"))
        out.executemany(
            "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            src.execute(
                "SELECT path, size, mtime_ns, run_id, agent, records, verified, problems, "
                f"file_hash, {_TEXT} FROM files t"
            ),
        )
        columns = [r[1] for r in src.execute("PRAGMA table_info(records)")][1:]  # less id
        out.executemany(
            f"INSERT INTO records VALUES ({', '.join('?' * (len(columns) + 1))})",
            src.execute(f"SELECT {_texts(columns)}, {_HASH} FROM records t ORDER BY id"),
        )
        out.executemany(
            "INSERT INTO terms VALUES (?, ?, ?, ?)",
            src.execute(
                f"SELECT r.path, r.record_digest, {_KIND}, t.value FROM terms t "
                "JOIN records r ON r.id = t.record"
            ),
        )
        out.commit()
        assert out.execute("PRAGMA user_version").fetchone() == (0,)


def test_an_older_index_is_refused_by_the_readers_and_made_again_by_index(
    world: Runs, runs: Path, tmp_path: Path
) -> None:
    db = tmp_path / "old.sqlite"
    _old_index(world, runs, db)
    for code, output in _readers(world, runs, db, tmp_path):
        assert code == 2, output
        assert output.count("\n") == 1 and "Traceback" not in output, output
        assert f"made by an older ledger-verify (version 0, this one reads {VERSION})" in output
        assert "ledger-verify index" in output
    with closing(sqlite3.connect(db)) as conn:  # refused, not changed
        assert conn.execute("PRAGMA user_version").fetchone() == (0,)
        assert "path" in {r[1] for r in conn.execute("PRAGMA table_info(terms)")}
    code, output = _index(world, runs, db)
    assert code == 0, output
    assert json.loads(output)["skipped"] == 0  # nothing taken from the old rows
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (VERSION,)
        assert [r[1] for r in conn.execute("PRAGMA table_info(terms)")] == [
            "record", "field", "value"
        ]  # fmt: skip
    answers = _readers(world, runs, db, tmp_path)
    assert answers[0][0] == 0 and "5 record(s)" in answers[0][1], answers[0]
    assert [code for code, _ in answers[1:]] == [0, 0], answers


def test_an_index_of_version_2_is_refused_by_the_readers_and_made_again_by_index(
    world: Runs, runs: Path, tmp_path: Path
) -> None:
    """Version 3 keeps each verdict text once (``verdicts``), rows naming it by its id: an
    index of version 2 (the texts in the rows) is read by no reader, and made again by
    ``index`` with the same answers as a new one."""
    db = tmp_path / "v2.sqlite"
    _version_2_index(world, runs, db)
    for code, output in _readers(world, runs, db, tmp_path):
        assert code == 2, output
        assert "made by an older ledger-verify (version 2, this one reads 3)" in output, output
    code, output = _index(world, runs, db)
    assert code == 0 and json.loads(output)["skipped"] == 0, output
    fresh = tmp_path / "fresh.sqlite"
    assert _index(world, runs, fresh)[0] == 0
    assert _rows(db) == _rows(fresh)
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (3,)
        texts = [t for (t,) in conn.execute("SELECT text FROM verdicts")]
        assert len(texts) == len(set(texts)) >= 2  # each text once: records' and runs'
        assert conn.execute("SELECT typeof(verdict) FROM records LIMIT 1").fetchone() == (
            "integer",
        )


def test_a_newer_index_is_refused_even_by_index(world: Runs, runs: Path, tmp_path: Path) -> None:
    db = tmp_path / "newer.sqlite"
    assert _index(world, runs, db)[0] == 0
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(f"PRAGMA user_version = {VERSION + 1}")
    for code, output in [_index(world, runs, db), *_readers(world, runs, db, tmp_path)]:
        assert code == 2, output
        assert f"made by a newer ledger-verify (version {VERSION + 1}" in output, output
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (VERSION + 1,)


def _rows(db: Path) -> dict[str, Any]:
    """The index's rows less the ids (verdicts by their texts): records, terms by their
    record's path and digest."""
    with closing(sqlite3.connect(db)) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(records)")][1:]
        return {
            "records": sorted(conn.execute(f"SELECT {_texts(columns)} FROM records t")),
            "run verdicts": sorted(conn.execute(f"SELECT path, {_TEXT} FROM files t")),
            "terms": sorted(
                conn.execute(
                    "SELECT r.path, r.record_digest, t.field, t.value FROM terms t "
                    "JOIN records r ON r.id = t.record"
                )
            ),
            "orphans": conn.execute(
                "SELECT count(*) FROM terms WHERE record NOT IN (SELECT id FROM records)"
            ).fetchall(),
            "files": sorted(conn.execute("SELECT path, run_id, records FROM files")),
            "problems": sorted(conn.execute("SELECT * FROM problems")),
        }


def test_a_changed_or_removed_file_takes_its_rows_with_it(
    world: Runs, runs: Path, tmp_path: Path
) -> None:
    db = tmp_path / "audit.sqlite"
    copy = runs / "decide-copy.jsonl"
    shutil.copy(runs / "decide.jsonl", copy)
    assert _index(world, runs, db)[0] == 0
    before = _rows(db)
    changed = copy.stat().st_mtime_ns + 1_000_000
    os.utime(copy, ns=(changed, changed))  # indexed again: its rows replaced
    code, output = _index(world, runs, db)
    assert code == 0 and json.loads(output)["indexed"] == 1, output
    assert _rows(db) == before
    copy.unlink()  # gone: its rows deleted
    code, output = _index(world, runs, db)
    assert code == 0 and json.loads(output)["removed"] == 1, output
    fresh = tmp_path / "fresh.sqlite"
    assert _index(world, runs, fresh)[0] == 0
    after = _rows(db)
    assert after == _rows(fresh) and after != before
    assert after["orphans"] == [(0,)] and after["terms"]


def test_a_database_of_someone_elses_with_a_files_table_is_refused_never_dropped(
    world: Runs, runs: Path, tmp_path: Path
) -> None:
    db = tmp_path / "app.sqlite"
    with closing(sqlite3.connect(db)) as conn:
        conn.executescript(
            "CREATE TABLE files(name TEXT, owner TEXT);"
            "CREATE TABLE records(id INTEGER, body TEXT);"
            "INSERT INTO files VALUES ('budget.xlsx', 'ana');"
            "INSERT INTO records VALUES (1, 'kept');"
        )
    code, output = _index(world, runs, db)
    assert code == 2, output
    assert output.count("\n") == 1 and "Traceback" not in output, output
    assert "not an audit index" in output, output
    with closing(sqlite3.connect(db)) as conn:  # untouched
        assert conn.execute("SELECT * FROM files").fetchall() == [("budget.xlsx", "ana")]
        assert conn.execute("SELECT * FROM records").fetchall() == [(1, "kept")]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert tables == {"files", "records"}


def test_a_new_index_is_made_of_8_kib_pages_and_an_old_file_keeps_its_own(
    world: Runs, runs: Path, tmp_path: Path
) -> None:
    """A new index file gets pages of ``_PAGE`` bytes (fewer pages to write per row stored);
    a database that already has pages (an index made before, rebuilt) keeps its page size."""
    db = tmp_path / "audit.sqlite"
    assert _index(world, runs, db)[0] == 0
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA page_size").fetchone() == (_PAGE,) == (8192,)
    old = tmp_path / "old.sqlite"
    _old_index(world, runs, old)
    with closing(sqlite3.connect(old)) as conn:
        before = conn.execute("PRAGMA page_size").fetchone()
    assert _index(world, runs, old)[0] == 0
    with closing(sqlite3.connect(old)) as conn:
        assert conn.execute("PRAGMA page_size").fetchone() == before
        assert conn.execute("PRAGMA user_version").fetchone() == (VERSION,)


def test_run_paths_are_resolved_as_path_resolve_resolves_them(tmp_path: Path) -> None:
    """``index`` resolves each folder once (``_resolved``): the same paths as ``Path.resolve``
    for plain files, a link to a file (its target), a file in a linked folder, a folder given
    with ``..`` in it, a relative path and a run folder."""
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    for name in ("a.jsonl", "sub/b.jsonl", "target.jsonl"):
        (real / name).write_text("{}\n")
    (real / "link.jsonl").symlink_to(real / "target.jsonl")
    (tmp_path / "linked").symlink_to(real, target_is_directory=True)
    (real / "run").mkdir()
    given = [
        real / "a.jsonl", real / "sub" / "b.jsonl", real / "link.jsonl",
        tmp_path / "linked" / "a.jsonl", tmp_path / "linked" / "sub" / "..",
        real / "sub" / ".." / "a.jsonl", Path(os.path.relpath(real / "a.jsonl")), real / "run",
        tmp_path / "linked" / "link.jsonl",
    ]  # fmt: skip
    assert _resolved(given) == [p.resolve() for p in given]
    assert _resolved(given)[2] == real / "target.jsonl"


def test_query_rows_carry_their_files_hash(world: Runs, runs: Path, tmp_path: Path) -> None:
    """A record's ``file_hash`` (read from its file's row since version 3) is the SHA-256 of
    the file its ``path`` names, a copy of a run's records each that of the first copy."""
    shutil.copy(runs / "decide.jsonl", runs / "decide-copy.jsonl")
    with (runs / "decide-copy.jsonl").open("a") as extra:
        extra.write("\n")  # the same records, another file hash
    db = tmp_path / "audit.sqlite"
    assert _index(world, runs, db)[0] == 0
    code, output = _invoke("query", "--db", str(db), "--json")
    assert code == 0, output
    rows = json.loads(output)["records"]
    assert len(rows) > 5 and any(r["copies"] == 2 for r in rows)
    for row in rows:
        digest = hashlib.sha256(Path(row["path"]).read_bytes()).hexdigest()
        assert row["file_hash"] == digest, row["path"]


def test_terms_are_stored_by_their_kinds_codes(world: Runs, runs: Path, tmp_path: Path) -> None:
    """``terms.field`` holds each kind's code (``TERM_FIELDS``), and ``term_condition`` finds
    a term by its kind's name: by its code, or for a kind with no code, by the name stored."""
    db = tmp_path / "audit.sqlite"
    assert _index(world, runs, db)[0] == 0
    with closing(sqlite3.connect(db)) as conn:
        fields = conn.execute("SELECT DISTINCT typeof(field), field FROM terms").fetchall()
        assert {"parent", "tag", "commitment"} <= {k for k, n in TERM_FIELDS.items()
                                                   if ("integer", n) in fields}  # fmt: skip
        assert {kind for kind, _ in fields} == {"integer"}
        record, value = conn.execute(
            "SELECT record, value FROM terms WHERE field = ?", (TERM_FIELDS["tag"],)
        ).fetchone()
        conn.execute("INSERT INTO terms VALUES (?, 'novel', 'x')", (record,))
        for kinds, wanted in ((["tag"], value), (["novel"], "x"), (["tag", "novel"], "x")):
            clause, args = term_condition(kinds, [wanted])
            found = conn.execute(f"SELECT id FROM records WHERE {clause}", args).fetchall()
            assert (record,) in found, kinds
        clause, args = term_condition(["parent"], [value])
        assert conn.execute(f"SELECT id FROM records WHERE {clause}", args).fetchall() == []


def _tampered_copy(runs: Path) -> Path:
    """A copy of ``decide.jsonl`` whose first record names another agent (its run fails, with a
    verdict text of its own), named to be indexed after the others."""
    lines = (runs / "decide.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["record"]["agent"] = "someone-else"
    copy = runs / "zz-tampered.jsonl"
    copy.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    return copy


def _dangling(db: Path) -> list[Any]:
    """Rows naming a verdict id with no text, and texts no row names."""
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM records WHERE verdict NOT IN (SELECT id FROM verdicts))"
            " + (SELECT count(*) FROM files WHERE verdict NOT IN (SELECT id FROM verdicts)),"
            " (SELECT count(*) FROM verdicts WHERE id NOT IN (SELECT verdict FROM records)"
            " AND id NOT IN (SELECT verdict FROM files WHERE verdict IS NOT NULL))"
        ).fetchall()


def _run_beside(
    monkeypatch: pytest.MonkeyPatch, after: int, other: Callable[[], tuple[int, str]]
) -> list[tuple[int, str]]:
    """Make the next ``index`` commit a transaction per file and run ``other`` (another
    ``index`` on the same database) once, after it stored its file number ``after`` (from 0);
    the list gets ``other``'s (exit code, output)."""
    from ledger_client.audit import index as index_module

    monkeypatch.setattr(index_module, "_BATCH", 1)  # a transaction per file
    audit = index_module.AuditIndex._audit
    beside: list[tuple[int, str]] = []

    def with_another_run_beside(self: Any, *args: Any) -> Any:
        for n, done in enumerate(audit(self, *args)):
            yield done  # stored and committed before the generator goes on
            if n == after and not beside:
                beside.append((-1, ""))  # the run beside does not start a third
                beside[0] = other()

    monkeypatch.setattr(index_module.AuditIndex, "_audit", with_another_run_beside)
    return beside


def test_an_index_run_beside_another_names_each_verdict_by_its_id(
    world: Runs, runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ``index`` runs on one database (overlapping cron jobs): the second one stores its
    rows between two of the first one's transactions, adding verdict texts the first one then
    needs. The first one reads the ids again under each transaction's write lock: no UNIQUE
    failure (a traceback before), every row names its own text, as a fresh index holds."""
    _tampered_copy(runs)
    db = tmp_path / "audit.sqlite"
    beside = _run_beside(monkeypatch, 0, lambda: _index(world, runs, db))
    key = world.world.key.key_string()
    result = CliRunner().invoke(
        main, ["index", str(runs), "--db", str(db), "--key", key, "--workers", "1", "--json"]
    )
    assert result.exit_code == 1 and beside[0][0] == 1, (result.output, beside)  # the tampered run
    # before: "error: unexpected IntegrityError: UNIQUE constraint failed: verdicts.text"
    assert json.loads(result.output)["failed_runs"] == 1, result.output
    monkeypatch.undo()
    fresh = tmp_path / "fresh.sqlite"
    assert _index(world, runs, fresh)[0] == 1
    assert _rows(db) == _rows(fresh)
    assert _dangling(db) == [(0, 0)]


def test_verdict_texts_no_row_names_go_with_their_rows(
    world: Runs, runs: Path, tmp_path: Path
) -> None:
    """A removed (or changed) file's verdict texts that no other row names are deleted with its
    rows (a failed run's text holds its problems): the texts left are a fresh index's."""
    db = tmp_path / "audit.sqlite"
    copy = _tampered_copy(runs)
    assert _index(world, runs, db)[0] == 1
    with closing(sqlite3.connect(db)) as conn:
        (failed,) = conn.execute(
            "SELECT verdict FROM files WHERE path LIKE '%zz-tampered%'"
        ).fetchone()
    copy.unlink()
    code, output = _index(world, runs, db)
    assert code == 0 and json.loads(output)["removed"] == 1, output
    fresh = tmp_path / "fresh.sqlite"
    assert _index(world, runs, fresh)[0] == 0
    with closing(sqlite3.connect(db)) as conn, closing(sqlite3.connect(fresh)) as other:
        texts = sorted(conn.execute("SELECT text FROM verdicts"))
        assert texts == sorted(other.execute("SELECT text FROM verdicts"))
        assert conn.execute("SELECT 1 FROM verdicts WHERE id = ?", (failed,)).fetchall() == []
    assert _dangling(db) == [(0, 0)]


# the world's three run files: the other run comes after the first one or after the last one
@pytest.mark.parametrize("after", [0, 2], ids=["after-the-first-file", "after-the-last-file"])
def test_an_index_run_whose_settings_another_run_replaced_stops(
    world: Runs, runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    """Two ``index`` runs on one database with other settings: the second one empties the
    index between two of the first one's transactions and stores its own rows. The first one
    then stops with exit 2 and one line, storing nothing more: before, it went on storing rows
    verified under settings the index no longer named beside the second one's. When the other
    run comes after its last file, its last transaction (rows of files gone) stops the same
    way; before, it reported an index of its own that held the other run's rows."""
    from ledger.core.checkpoint import Ed25519Signer

    db = tmp_path / "audit.sqlite"
    other_key = Ed25519Signer.generate("other.example/log").verifier().key_string()
    key = world.world.key.key_string()
    beside = _run_beside(monkeypatch, after, lambda: _invoke(
        "index", str(runs), "--db", str(db), "--key", key, "--key", other_key,
        "--workers", "1", "--json",
    ))  # fmt: skip
    result = CliRunner().invoke(
        main, ["index", str(runs), "--db", str(db), "--key", key, "--workers", "1", "--json"]
    )
    assert beside[0][0] == 0, beside
    assert result.exit_code == 2, result.output
    assert "another `index` run with other settings" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    monkeypatch.undo()
    fresh = tmp_path / "fresh.sqlite"
    code, _ = _invoke(
        "index", str(runs), "--db", str(fresh), "--key", key, "--key", other_key,
        "--workers", "1", "--json",
    )  # fmt: skip
    assert code == 0
    assert _rows(db) == _rows(fresh)  # the second run's index, nothing of the first
    assert _dangling(db) == [(0, 0)]
