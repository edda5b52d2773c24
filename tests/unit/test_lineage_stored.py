"""``ledger-verify lineage --db`` at scale: a subcommand imports only its own modules, and the
answer from stored verdicts, written as a stream, is the answer ``json.dumps`` gives."""

from __future__ import annotations

import gc
import itertools
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from ledger.core.note import Ed25519Signer
from ledger.records.decision import (
    DecisionRecord,
    MemoryWrite,
    ToolCall,
    new_record_id,
    record_digest,
)
from ledger.records.runs import run_closed_record, run_steps
from ledger_client.audit.index import AuditIndex
from ledger_client.audit.lineage_index import (
    _COLUMNS,
    _VERDICT,
    FROM_INDEX,
    IndexedLineage,
    _collector_paused,
    _list_text,
    _pieces,
    _text,
    _verdict_text,
    open_index,
    stored_runs,
    verdict_of,
)
from ledger_client.audit.run_files import run_path_names, run_paths
from ledger_client.audit.verdicts import DEFAULT_MAX_DELAY, format_delta
from ledger_client.audit.verdicts import FROM_INDEX as VERDICT_FROM_INDEX
from ledger_client.cli.audit import make_checker, trust_fingerprint
from ledger_client.cli.main import COMMANDS, main
from ledger_client.cli.options import DEFAULT_MAX_DELAY_TEXT
from ledger_client.clikit.outcome import Outcome, _write_joined, finish
from tests import processes
from tests.decision_world import CHAIN, FAN, build, write
from tests.receipt_world import T0, TIME, World


def test_every_subcommand_is_listed_and_loads_by_its_name() -> None:
    loaded = main.commands
    assert sorted(loaded) == sorted(COMMANDS)
    assert all(isinstance(c, click.Command) and c.name == n for n, c in loaded.items())
    assert format_delta(DEFAULT_MAX_DELAY) == DEFAULT_MAX_DELAY_TEXT


def _loaded_by(*args: str) -> set[str]:
    probe = (
        "import json, sys\nfrom ledger_client.cli.main import main\n"
        f"try:\n    main({list(args)!r})\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = processes.run([sys.executable, "-c", probe], capture_output=True, text=True,
                        timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_lineage_loads_neither_the_report_nor_the_monitor() -> None:
    loaded = _loaded_by("lineage", "--help")
    heavy = ("ledger_client.audit.report_html", "ledger_client.audit.export",
             "ledger_client.cli.monitor", "ledger_client.remote", "ledger_client.audit.index",
             "ledger_client.receipts", "cryptography.x509", "asyncio")  # fmt: skip
    assert sorted(m for m in loaded if m.startswith(heavy)) == []
    assert "ledger_client.cli.audit" in loaded


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    world = build()
    folder = tmp_path_factory.mktemp("stored")
    files = write(folder / "runs", world)
    lines = files["chain"].read_text().splitlines(keepends=True)
    cut = folder / "damaged" / "cut.jsonl"  # the chain less its fifth record: not verified
    cut.parent.mkdir()
    cut.write_text("".join(lines[:4] + lines[5:]))
    db = folder / "audit.sqlite"
    key = world.world.key.key_string()
    result = CliRunner().invoke(main, ["index", str(folder / "runs"), str(cut.parent), "--db",
                                       str(db), "--key", key, "--workers", "1"])  # fmt: skip
    assert result.exit_code == 1, result.output  # indexed; the cut run is not verified
    assert result.output.startswith("INVALID: 1 of 4 run(s) in the index not verified")
    return {"world": world, "files": files, "db": db, "key": key, "cut": cut}


def test_lineage_from_stored_verdicts_parses_the_keys_without_loading_cryptography(
    indexed: dict[str, Any],
) -> None:
    """Every run stored: the ``--key`` values are parsed (a bad one: exit 2), never used to
    verify, so ``cryptography`` (its bindings: tens of ms at start) is not loaded."""
    folder = str(indexed["files"]["chain"].parent)
    args = ["lineage", folder, "--key", indexed["key"], "--db", str(indexed["db"]), "--tainted"]
    loaded = _loaded_by(*args, "--json")
    assert sorted(m for m in loaded if m.split(".")[0] in ("cryptography", "_cffi_backend")) == []
    assert "ledger.core.note" in loaded
    bad = [a if a != indexed["key"] else indexed["key"][:-4] + "AAAA" for a in args]
    result = CliRunner().invoke(main, bad)
    assert result.exit_code == 2 and "--key" in result.output


def _stored_answer(indexed: dict[str, Any], folder: Path, args: list[str]) -> str:
    """The answer as ``json.dumps`` writes it, from ``IndexedLineage`` directly."""
    key = indexed["key"]
    with open_index(indexed["db"]) as conn:
        lineage = IndexedLineage(
            run_path_names([str(folder.resolve())]), conn,
            trust_fingerprint([key], [], None, []), lambda: make_checker([key], [], None, []),
        )  # fmt: skip
        if args[0] == "--tainted":
            starts = lineage.tainted_starts(["untrusted"])
        else:
            starts = [str(lineage.find(args[1]))]
        answer = lineage.walk(starts, "ancestors" if "--ancestors" in args else "descendants")
    assert answer.ok and {r["source"] for r in answer.runs} == {"index"}
    return json.dumps({"valid": True, "check": "lineage", **answer.to_json_obj()}, sort_keys=True)


def test_the_stored_answer_is_written_as_json_dumps_writes_it(indexed: dict[str, Any]) -> None:
    world, files = indexed["world"], indexed["files"]
    folder = files["chain"].parent
    first, last = world.runs[FAN][0], world.runs[CHAIN][-2]
    for args in (["--tainted"], ["--from", world.digest(first)],
                 ["--from", world.digest(last), "--ancestors"]):  # fmt: skip
        given = [str(folder), "--key", indexed["key"], "--db", str(indexed["db"]), "--json"]
        result = CliRunner().invoke(main, ["lineage", *given, *args])
        assert result.exit_code == 0, result.output
        assert result.output == _stored_answer(indexed, folder, args) + "\n"
        assert len(json.loads(result.output)["records"]) > 1


def test_a_stored_failing_run_shows_its_stored_verdict(indexed: dict[str, Any]) -> None:
    cut = indexed["cut"]
    with sqlite3.connect(indexed["db"]) as conn:
        stored = conn.execute(
            "SELECT v.text FROM files f JOIN verdicts v ON v.id = f.verdict WHERE f.path = ?",
            (str(cut),),
        ).fetchone()
    start = indexed["world"].digest(indexed["world"].runs[CHAIN][0])
    result = CliRunner().invoke(main, ["lineage", str(cut), "--key", indexed["key"], "--db",
                                       str(indexed["db"]), "--json", "--from", start])  # fmt: skip
    assert result.exit_code == 1, result.output
    (run,) = json.loads(result.output)["runs"]
    assert run["source"] == "index" and run["verified"] is False
    assert run["verdict"] == json.loads(stored[0]) and run["status"] == "failed"


def test_stored_runs_are_read_as_the_index_keeps_them(indexed: dict[str, Any]) -> None:
    fingerprint = trust_fingerprint([indexed["key"]], [], None, [])
    with AuditIndex(indexed["db"]) as store:
        kept = store.stored_runs(fingerprint)
    with open_index(indexed["db"]) as conn:
        read = stored_runs(conn, fingerprint)
        assert stored_runs(conn, "another") == {}
        assert {p: verdict_of(conn, p) for p in read} == {p: v[3] for p, v in kept.items()}
    assert read == {p: (*v[:3], v[3][:40], v[4]) for p, v in kept.items()} and len(read) == 4
    assert FROM_INDEX == VERDICT_FROM_INDEX


def test_stored_run_heads_are_read_as_the_plain_query_reads_them(
    indexed: dict[str, Any], tmp_path: Path
) -> None:
    """``stored_runs`` reads each verdict's head in SQL (``CASE``, then ``itemgetter``): the
    same entries as the plain query and ``verdict or ""`` for verdicts of every kind SQLite
    may hold (none, empty text, an empty blob, a number, a long text not ASCII), and a
    verdict id with no text in ``verdicts`` read as none."""
    db = tmp_path / "copy.sqlite"
    db.write_bytes(indexed["db"].read_bytes())
    fingerprint = trust_fingerprint([indexed["key"]], [], None, [])
    odd: list[Any] = [None, "", b"", 0, 0.0, "é☃" * 40, b"\x00abc", '{"status": "ok"}']
    with sqlite3.connect(db) as conn:
        paths = [r[0] for r in conn.execute("SELECT path FROM files ORDER BY path")]
        for n, value in enumerate([*odd, "missing"]):
            if value is None or value == "missing":
                verdict = None if value is None else 1_000_000
            else:
                verdict = conn.execute("INSERT INTO verdicts(text) VALUES (?)", (value,)).lastrowid
            conn.execute("UPDATE files SET verdict = ? WHERE path = ?",
                         (verdict, paths[n % len(paths)]))  # fmt: skip
            plain = {
                path: (file_hash, size, mtime, verdict or "", run_id)
                for path, file_hash, size, mtime, verdict, run_id in conn.execute(
                    "SELECT path, file_hash, size, mtime_ns, substr(v.text, 1, 40), run_id "
                    "FROM files f LEFT JOIN verdicts v ON v.id = f.verdict WHERE file_hash != ''"
                )
            }
            read = stored_runs(conn, fingerprint)
            assert read == plain and len(read) == 4, value
            assert [type(v[3]) for v in read.values()] == [type(v[3]) for v in plain.values()]


def _chain_row(indexed: dict[str, Any]) -> tuple[IndexedLineage, str, Any]:
    """The lineage over the indexed chain run, a record's digest and its stored row."""
    key, world = indexed["key"], indexed["world"]
    digest = world.digest(world.runs[CHAIN][3])
    with open_index(indexed["db"]) as conn:
        lineage = IndexedLineage(
            run_path_names([str(indexed["files"]["chain"].parent)]), conn,
            trust_fingerprint([key], [], None, []), lambda: make_checker([key], [], None, []),
        )  # fmt: skip
        return lineage, digest, lineage._rows([digest])[digest]


def test_records_sharing_a_verdict_and_a_second_are_each_written_as_their_plain_record(
    indexed: dict[str, Any],
) -> None:
    """``_stored_fragments`` writes what rows share once (the text from the trust label on,
    each second's logged time): rows that differ only in one of those columns, or in the
    milliseconds of one second (before and after the epoch), are each their plain record."""
    lineage, _, row = _chain_row(indexed)
    columns = {c: 2 + i for i, c in enumerate(_COLUMNS)}
    changes: list[dict[str, Any]] = [
        {}, {"verified": 0}, {"verified": 1, "why_not": "x"}, {"trust_label": None},
        {"trust_label": "trusted", "why_not": None}, {"trust_label": 3}, {"why_not": 2.5},
        {"logged_at_ms": 1_780_000_000_001}, {"logged_at_ms": 1_780_000_000_999},
        {"logged_at_ms": 1_780_000_000_000}, {"logged_at_ms": -1}, {"logged_at_ms": -1000},
        {"logged_at_ms": -999}, {"logged_at_ms": 0}, {"verified": 0, "trust_label": None},
        {"verdict": json.dumps({"status": "ok", "checks": [{"name": "lineage",
                                "status": "warning", "message": "m"}]})},
    ]  # fmt: skip
    rows: dict[str, Any] = {}
    nodes = []
    for n, change in enumerate(changes * 2):  # each twice: the second from what is kept
        changed = list(row)
        changed[columns["record_digest"]] = name = f"{n:064x}"
        for column, value in change.items():
            changed[columns[column]] = value
        rows[name] = tuple(changed)
        nodes.append((n % 3, "", 0, n, name))
    lineage._parse_parents(rows)
    texts, ends, verified, warns = lineage._stored_fragments(nodes, rows)
    plain = [lineage._node(d, n, rows) for n, _, _, _, d in nodes]
    assert [t + e for t, e in zip(texts, ends, strict=True)] == [
        json.dumps(p, sort_keys=True) for p in plain
    ]
    assert verified == [p["verified"] for p in plain]
    assert warns == [
        any(c["name"] == "lineage" and c["status"] == "warning" for c in p["verdict"]["checks"])
        for p in plain
    ]


def test_verdicts_are_read_by_their_ids_as_their_texts(
    indexed: dict[str, Any], tmp_path: Path
) -> None:
    """Rows name their verdict by its id in ``verdicts`` (read as NULL in the verdict column,
    the id in ``known``): the walk's answer is the plain answer, each record with the text
    of its id (one with a quote, one stored as a BLOB, one spaced otherwise: each as it is);
    an id with no text is refused in one line."""
    db = tmp_path / "copy.sqlite"
    db.write_bytes(indexed["db"].read_bytes())
    key, folder = indexed["key"], str(indexed["files"]["chain"].parent)
    fingerprint = trust_fingerprint([key], [], None, [])

    def walk(starts: Any, direction: str) -> Any:
        with open_index(db) as conn:
            lineage = IndexedLineage(
                run_path_names([folder]), conn, fingerprint,
                lambda: make_checker([key], [], None, []),
            )  # fmt: skip
            return lineage.walk(starts(lineage), direction)

    world = indexed["world"]
    chain = (lambda g: [world.digest(world.runs[CHAIN][0])], "descendants")
    found = [r["record_digest"] for r in walk(*chain).records]
    assert len(found) >= 4
    with sqlite3.connect(db) as conn:
        (common,) = conn.execute(
            "SELECT v.text FROM records r JOIN verdicts v ON v.id = r.verdict "
            "WHERE r.record_digest = ?",
            (found[0],),
        ).fetchone()
        quoted = json.loads(common)
        quoted["checks"][0]["message"] = "it's 'quoted'"
        changes = [json.dumps(quoted), common.encode(), common.replace('"status"', '"status" ')]
        for digest, verdict in zip(found[:3], changes, strict=True):
            made = conn.execute("INSERT INTO verdicts(text) VALUES (?)", (verdict,)).lastrowid
            conn.execute("UPDATE records SET verdict = ? WHERE record_digest = ?", (made, digest))
        stored = {
            d: conn.execute(
                "SELECT v.text FROM records r JOIN verdicts v ON v.id = r.verdict "
                "WHERE r.record_digest = ?",
                (d,),
            ).fetchone()[0]
            for d in found
        }
    assert [stored[d] for d in found[:3]] == changes
    tainted = (lambda g: g.tainted_starts(["untrusted"]), "descendants")
    last = (lambda g: [found[-1]], "ancestors")
    for starts, direction in (chain, tainted, last):
        result = walk(starts, direction)
        plain = result.to_json_obj()["records"]
        assert "".join(result.records_pieces()) == json.dumps(plain, sort_keys=True)
        for record in plain:
            if record["record_digest"] in stored:
                assert record["verdict"] == json.loads(stored[record["record_digest"]])
    with open_index(db) as conn:
        lineage = IndexedLineage(
            run_path_names([folder]), conn, fingerprint, lambda: make_checker([key], [], None, [])
        )
        rows = lineage._rows(found)
        for digest in found:
            assert rows[digest][_VERDICT] is None
            assert _verdict_text(rows[digest], lineage._known) == stored[digest]
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE records SET verdict = 1000000 WHERE record_digest = ?", (found[1],))
    result = CliRunner().invoke(main, ["lineage", folder, "--key", key, "--db", str(db),
                                       "--from", found[0]])  # fmt: skip
    assert result.exit_code == 2 and "holds no verdict 1000000" in result.output, result.output
    assert result.output.count("\n") == 1


def test_run_path_names_are_the_run_paths(tmp_path: Path) -> None:
    for name in ("b.jsonl", "a/c.jsonl", "a/b/d.jsonl", "a.jsonl", "x.disclosures.jsonl",
                 ".jsonl", "z/e.json", "a b/f.jsonl"):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    for given in ([str(tmp_path)], [str(tmp_path) + "/"], [str(tmp_path / "a" / "c.jsonl")],
                  [str(tmp_path / "z"), str(tmp_path / "a")]):  # fmt: skip
        assert run_path_names(given) == [str(p) for p in run_paths(given)]
    assert len(run_path_names([str(tmp_path)])) == 5


def test_runs_verified_now_are_held_to_the_auditors_time_policy(indexed: dict[str, Any]) -> None:
    """Under another time policy nothing is taken from the index, and the runs verified now
    are judged under that policy, as without ``--db``."""
    world, folder = indexed["world"], indexed["files"]["chain"].parent
    start = world.digest(world.runs[FAN][0])
    given = [str(folder), "--key", indexed["key"], "--json", "--from", start, "--max-delay", "1s"]
    plain = CliRunner().invoke(main, ["lineage", *given])
    stored = CliRunner().invoke(main, ["lineage", *given, "--db", str(indexed["db"])])
    assert plain.exit_code == stored.exit_code == 1
    answers = [json.loads(r.output) for r in (plain, stored)]
    verdicts = [{r["record_digest"]: r["verdict"] for r in a["records"]} for a in answers]
    assert verdicts[0] == verdicts[1]
    assert {c["status"] for v in verdicts[1].values() for c in v["checks"]
            if c["name"] == "time"} == {"failed"}  # fmt: skip


# --- the answer's text, written from the rows, against the plain answer ------------------------

ODD_AGENT = 'agënt "q" ☃\\'  # not ASCII, a quote and a backslash: escaped as json.dumps does


def _odd_runs(folder: Path) -> tuple[str, dict[str, Path], list[str]]:
    """Two runs whose strings json.dumps escapes: ``a`` holds an untrusted write and a record
    on it, ``b`` a record resting on ``a``'s (a link across runs) and a second untrusted
    write. Returns the log key, the run files and the digests of ``a``'s records."""
    a_run, b_run = 'odd-a "é"', "odd-b\u2028"

    def record(run: str, step: int, payload: Any, parents: list[DecisionRecord]) -> Any:
        return DecisionRecord(
            record_id=new_record_id(now_ms=T0 + step, rand=(len(run) + step).to_bytes(10, "big")),
            run_id=run, step=step, time=TIME, agent=ODD_AGENT if step else "agent-ä",
            parent_digests=tuple(record_digest(p).hex() for p in parents), payload=payload,
        )  # fmt: skip

    write_a = record(a_run, 0, MemoryWrite(key='nöte "k"', value="v", source="wéb\\\x07",
                                           trust_label="untrusted"), [])  # fmt: skip
    call_a = record(a_run, 1, ToolCall(tool='tôol "x"'), [write_a])
    call_b = record(b_run, 0, ToolCall(tool="b\ttool"), [call_a])
    write_b = record(b_run, 1, MemoryWrite(key="k", value="w", source="s",
                                           trust_label="untrusted"), [call_b])  # fmt: skip
    runs = {
        name: [*body, run_closed_record(run, run_steps(body), agent=ODD_AGENT, time=TIME)]
        for name, run, body in (("a", a_run, [write_a, call_a]), ("b", b_run, [call_b, write_b]))
    }
    every = [r for body in runs.values() for r in body]
    world = World([record_digest(r) for r in every])
    folder.mkdir()
    files = {}
    for name, body in runs.items():
        files[name] = folder / f"{name}.jsonl"
        files[name].write_text("".join(
            json.dumps({"record": r.to_json_obj(),
                        "receipt": world.receipt(every.index(r), len(every),
                                                 anchored=False).to_json_obj()}) + "\n"
            for r in body
        ))  # fmt: skip
    return world.key.key_string(), files, [record_digest(r).hex() for r in runs["a"][:2]]


def _texts_and_plain(db: Path, folder: Path, key: str, starts: Any, direction: str) -> list[str]:
    with open_index(db) as conn:
        lineage = IndexedLineage(
            run_path_names([str(folder)]), conn, trust_fingerprint([key], [], None, []),
            lambda: make_checker([key], [], None, []),
        )  # fmt: skip
        answer = lineage.walk(starts(lineage), direction)
    plain = answer.to_json_obj()
    written = {**answer.head(), "records": "RECORDS", "runs": "RUNS"}
    text = json.dumps(written, sort_keys=True)
    records, runs = "".join(answer.records_pieces()), "".join(answer.runs_pieces())
    text = text.replace('"RECORDS"', records).replace('"RUNS"', runs)
    assert answer.verified == [r["verified"] for r in plain["records"]]
    return [text, json.dumps(plain, sort_keys=True)]


def test_the_answer_written_from_rows_is_the_plain_answer(tmp_path: Path) -> None:
    """``records_pieces``/``runs_pieces`` (each record written from its row) give
    the bytes ``json.dumps`` gives for the plain answer (``to_json_obj``): stored records with
    strings to escape, and a run verified now beside them (run ``b`` changed since indexed)."""
    key, files, (write_a, call_a) = _odd_runs(tmp_path / "runs")
    db = tmp_path / "audit.sqlite"
    result = CliRunner().invoke(main, ["index", str(tmp_path / "runs"), "--db", str(db),
                                       "--key", key, "--workers", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    cases = (
        (lambda g: g.tainted_starts(["untrusted"]), "descendants"),
        (lambda g: [write_a], "descendants"),
        (lambda g: [call_a], "ancestors"),
    )
    folder = tmp_path / "runs"
    for starts, direction in cases:
        text, plain = _texts_and_plain(db, folder, key, starts, direction)
        assert text == plain and "\\u00eb" in text and '"source": "index"' in text
    # b reformatted: the same items, another file hash, so verified now
    b = files["b"]
    b.write_text("".join(json.dumps(json.loads(line), indent=None, separators=(",", ":")) + "\n"
                         for line in b.read_text().splitlines()))  # fmt: skip
    for starts, direction in cases:
        text, plain = _texts_and_plain(db, folder, key, starts, direction)
        assert text == plain and '"source": "verified now"' in text
    tainted = CliRunner().invoke(main, ["lineage", str(folder), "--key", key, "--db", str(db),
                                        "--json", "--tainted"])  # fmt: skip
    assert tainted.exit_code == 0, tainted.output
    plain = json.loads(_texts_and_plain(db, folder, key, cases[0][0], "descendants")[1])
    expected = json.dumps({"valid": True, "check": "lineage", **plain}, sort_keys=True)
    assert tainted.output == expected + "\n"


@pytest.mark.parametrize(
    "values",
    [["a", 'q"\\', "é☃\x00\u2028", ""], [0, -1, 2**70], [None, "x", 3, 1.5, float("nan")],
     [True, False, 1], [1.0, float("inf")], ["a", None], ["ab" * 32, "0f" * 32], ["a b", "~"],
     ["a\x7f", "b"], [], [["x"], {"b": 1, "a": 2}]],
)  # fmt: skip
def test_a_column_is_written_as_json_dumps_writes_each_value(values: list[Any]) -> None:
    assert [_text(v) for v in values] == [json.dumps(v, sort_keys=True) for v in values]
    assert _list_text(values) == json.dumps(values, sort_keys=True)
    assert _list_text(tuple(values)) == json.dumps(values, sort_keys=True)  # type: ignore[arg-type]
    strings = [str(v) for v in values]
    assert _list_text(strings) == json.dumps(strings)
    assert "".join(_pieces([json.dumps(s) for s in strings])) == json.dumps(strings)
    halves = [(t[: len(t) // 2], t[len(t) // 2 :]) for t in (json.dumps(s) for s in strings)]
    split = _pieces([h for h, _ in halves], [e for _, e in halves])
    assert "".join(split) == json.dumps(strings)


def test_a_row_of_other_column_types_is_written_as_its_plain_record(
    indexed: dict[str, Any],
) -> None:
    """A row whose values are not of the types the index writes (SQLite keeps what it is
    given) is written value by value, still as ``json.dumps`` writes the plain record."""
    lineage, digest, row = _chain_row(indexed)
    columns = {c: 2 + i for i, c in enumerate(_COLUMNS)}  # a row: (lead, rowid, *_COLUMNS)
    odd: list[dict[str, Any]] = [
        {}, {"log_index": 1.5}, {"step": "3"}, {"time_difference_ms": 2.25}, {"agent": 7},
        {"label": None, "logged_at_ms": None, "trust_label": "ü", "why_not": 'a "b"'},
        {"time_difference_ms": None, "kind": 1.0}, {"logged_at_ms": 1_780_000_000_123},
        {"verified": 0, "run_id": None}, {"step": True}, {"time": float("nan")},
    ]  # fmt: skip
    for changes in odd:
        changed = list(row)
        for name, value in changes.items():
            changed[columns[name]] = value
        rows = {digest: tuple(changed)}
        texts, ends, verified, _ = lineage._stored_fragments([(2, "", 0, 0, digest)], rows)
        text = [t + e for t, e in zip(texts, ends, strict=True)]
        assert text == [json.dumps(lineage._node(digest, 2, rows), sort_keys=True)], changes
        assert verified == [bool(changed[columns["verified"]])]


def test_spliced_pieces_are_written_where_their_placeholders_were(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``finish`` writes a spliced value given as pieces (a long answer, never joined) and one
    given as a text at each place its placeholder held, as ``str.replace`` would put them."""
    records, runs = [{"a": "é", "b": [1, None]}, {"c": '"q"'}], [{"run_file": "x"}]
    pieces = _pieces([json.dumps(r, sort_keys=True) for r in records])
    marks = {n: f"\x00{n}-0123456789abcdef" for n in ("records", "runs", "twice")}
    details = {**marks, "also": marks["twice"], "note": "\x00records-not-the-token"}
    spliced: dict[str, str | list[str]] = {
        json.dumps(marks["records"]): pieces, json.dumps(marks["runs"]): json.dumps(runs),
        json.dumps(marks["twice"]): pieces,
    }  # fmt: skip
    with pytest.raises(SystemExit):
        finish("x", True, lambda: Outcome("x", details, [], spliced))
    answer = {"records": records, "runs": runs, "twice": records, "also": records}
    expected = {"valid": True, "check": "x", **answer, "note": details["note"]}
    assert capsys.readouterr().out == json.dumps(expected, sort_keys=True) + "\n"
    for size in (1, 2, 5, 100):  # written in chunks of about ``size`` characters, in order
        _write_joined(["ab", "", "c", "def", "g"], size=size)
        assert capsys.readouterr().out == "abcdefg"


def test_pieces_are_written_in_chunks_of_at_most_the_size_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``_write_joined``: every piece once, in order; each write at most ``size`` characters
    unless it is one longer piece, and no two writes in a row that would fit in one."""
    pieces = ["x" * n for n in (3, 0, 7, 1, 12, 2, 2, 0, 5, 30, 1)] + ["é", "", "yz"]

    class Out:
        def __init__(self) -> None:
            self.writes: list[str] = []

        def write(self, text: str) -> int:
            self.writes.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    for size in (1, 2, 5, 8, 13, 100):
        out = Out()
        monkeypatch.setattr(sys, "stdout", out)
        _write_joined(pieces, size=size)
        assert "".join(out.writes) == "".join(pieces)
        assert all(len(w) <= size or w in pieces for w in out.writes), size
        lengths = [len(w) for w in out.writes]
        assert all(a + b > size for a, b in itertools.pairwise(lengths)), size
    out = Out()
    monkeypatch.setattr(sys, "stdout", out)
    _write_joined([], size=4)
    assert "".join(out.writes) == ""


def test_the_collector_is_paused_for_a_walk_and_then_as_it_was() -> None:
    seen = []

    @_collector_paused()
    def probe() -> None:
        seen.append(gc.isenabled())

    for before in (True, False):
        (gc.enable if before else gc.disable)()
        try:
            probe()
            with pytest.raises(KeyError), _collector_paused():
                raise KeyError("x")
            assert gc.isenabled() is before
        finally:
            gc.enable()
    assert seen == [False, False]


def test_records_tied_on_depth_time_and_index_stay_in_the_order_found(tmp_path: Path) -> None:
    """Three logs: records at the same depth, claimed time and log index tie; the stored
    answer keeps them in the order the walk found them (the starts sorted, then each child
    after the one found before it), the records those without ``--db`` are."""
    folder, keys = tmp_path / "runs", []
    folder.mkdir()
    for n, name in enumerate(("b", "a", "c")):
        run = f"tie-{name}"
        write_ = DecisionRecord(
            record_id=new_record_id(now_ms=T0, rand=(n + 1).to_bytes(10, "big")), run_id=run,
            step=0, time=TIME, agent="agent-t", parent_digests=(),
            payload=MemoryWrite(key="k", value=name, source="web", trust_label="untrusted"),
        )  # fmt: skip
        call = DecisionRecord(
            record_id=new_record_id(now_ms=T0 + 1, rand=(n + 1).to_bytes(10, "big")), run_id=run,
            step=1, time=TIME, agent="agent-t", parent_digests=(record_digest(write_).hex(),),
            payload=ToolCall(tool=f"tool-{name}"),
        )  # fmt: skip
        body = [write_, call]
        body.append(run_closed_record(run, run_steps(body), agent="agent-t", time=TIME))
        signer = Ed25519Signer(name=f"log-{name}.example", seed=bytes([n + 7]) * 32)
        world = World([record_digest(r) for r in body], signer)  # each record's index as in a
        keys.append(world.key.key_string())  # ... the other logs: ties across logs
        (folder / f"{name}.jsonl").write_text("".join(
            json.dumps({"record": r.to_json_obj(),
                        "receipt": world.receipt(i, len(body), anchored=False).to_json_obj()})
            + "\n" for i, r in enumerate(body)
        ))  # fmt: skip
    given = [str(folder), *(a for k in keys for a in ("--key", k)), "--json", "--tainted"]
    db = tmp_path / "audit.sqlite"
    indexed = CliRunner().invoke(main, ["index", *given[:-2], "--db", str(db), "--workers", "1"])
    assert indexed.exit_code == 0, indexed.output
    answers = [
        CliRunner().invoke(main, ["lineage", *given, *extra]) for extra in ([], ["--db", str(db)])
    ]
    assert [a.exit_code for a in answers] == [0, 0], answers[1].output
    plain, stored = ([r["record_digest"] for r in json.loads(a.output)["records"]] for a in answers)
    assert len(plain) == 6 and sorted(stored) == sorted(plain)
    found = json.loads(answers[1].output)["records"]
    assert len({(r["depth"], r["time"], r["index"]) for r in found}) == 2  # three-way ties
    starts = [r["record_digest"] for r in found if r["depth"] == 0]
    assert (
        starts == sorted(starts) and [r["parents"][0] for r in found if r["depth"] == 1] == starts
    )
