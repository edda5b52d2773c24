"""Lineage over an audit index: the stored verdicts of unchanged runs, the rest verified now.

docs/auditing.md "Lineage at scale". ``ledger-verify lineage RUNS... --db audit.sqlite`` answers
as ``audit.lineage`` does, without reading every run file again: a run file the index holds
for the same trust inputs (the fingerprint of keys, TSA roots, origin and witnesses the index
was made with, under the default time policy) and the same content is taken with the verdicts
the index stored for it (``source: index``). The same content means: the same path, size and
modification time as when indexed (the index's own rule for "unchanged"), or else the same
SHA-256 file hash as an indexed file (a copy). Every other run given is verified now as
``audit.lineage`` verifies it (``source: verified now``). Nothing given is left unchecked: a run
that fails, stored or fresh, makes the answer fail.

The walk reads the index's parent terms (``terms.field``: ``TERM_FIELDS``) for the stored runs and
the loaded records for the fresh ones; the answer has the shape of ``LineageResult.to_json_obj``
(records with depth, verdicts and their source; unknown parents; runs examined: a run taken
from the index carries its verdict's ``status``, and its checks in full when it failed).
``--json`` writes each stored record and run as its text, made from its row with its keys in
sorted order (``IndexedResult.records_pieces``), not as a dict then encoded: the same bytes as
``json.dumps`` of the plain answer (``IndexedResult.to_json_obj``; tests hold them equal).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from json.encoder import encode_basestring_ascii
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.core.errors import FormatError
from ledger.core.timefmt import from_epoch_ms, rfc3339_millis

if TYPE_CHECKING:  # imported when a run is verified now (start-up: ``cli.main``)
    from ledger_client.audit.lineage import Lineage
    from ledger_client.audit.verdicts import TimePolicy
    from ledger_client.receipts.verify import ReceiptChecker

__all__ = [
    "FROM_INDEX",
    "INDEX_TABLES",
    "INDEX_VERSION",
    "TERM_FIELDS",
    "IndexedLineage",
    "IndexedResult",
    "check_version",
    "open_index",
    "passing",
    "stored_files",
    "stored_runs",
    "verdict_of",
]

FROM_INDEX = "index"  # ``audit.verdicts.FROM_INDEX`` (a test keeps them equal)
# ``PRAGMA user_version`` of the index ``audit.index`` makes (its ``SCHEMA``), and its tables
INDEX_VERSION = 3
# (``verdicts`` since version 3: each distinct verdict text once, rows naming it by its id)
INDEX_TABLES = ("meta", "files", "records", "terms", "problems", "verdicts")
_EVERY_VERSION = INDEX_TABLES[:5]  # the tables an index of every version holds
# ``terms.field`` (since version 3): the kind of a term as a small integer; a kind not named
# here is stored as its name
TERM_FIELDS = {
    "parent": 1, "evidence": 2, "input": 3, "output": 4, "commitment": 5, "param": 6, "tag": 7,
    "content": 8,
}  # fmt: skip

_COLUMNS = (
    "path", "run_id", "agent", "step", "kind", "label", "trust_label", "time", "logged_at_ms",
    "log_index", "record_digest", "parents", "time_difference_ms", "verified", "why_not",
    "verdict",
)  # fmt: skip


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while the index is read and the answer written (tens
    of thousands of rows and texts, none in a cycle: its passes over them cost about 8 % of
    a ``--tainted`` walk), then as it was, the objects made meanwhile in its oldest
    generation. Also a decorator."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()  # what was made meanwhile goes to the oldest generation, not through
        gc.unfreeze()  # a first pass over every young object (a cycle is still collected)
        if enabled:
            gc.enable()


def _pieces(texts: list[str], ends: list[str] | None = None) -> list[str]:
    """``f"[{', '.join(texts)}]"`` as pieces to write one after another (never joined); with
    ``ends``, each text followed by its end (``texts[i] + ends[i]`` for each i)."""
    if not texts:
        return ["[]"]
    if ends is None:
        out = [", "] * (2 * len(texts) + 1)
        out[1::2] = texts
    else:
        out = [", "] * (3 * len(texts) + 1)
        out[1::3] = texts
        out[2::3] = ends
    out[0], out[-1] = "[", "]"
    return out


@dataclass(slots=True)
class IndexedResult:
    """The answer (``LineageResult``'s JSON shape) and whether it passed. ``records`` are the
    answer's records as dicts (built when first asked for); ``texts`` the same records as
    ``json.dumps(record, sort_keys=True)`` writes them, each text followed by its end in
    ``ends`` (what records share, from ``"trust_label"`` on, is one str, not copied into
    each), made from the rows without the dicts (``records_pieces``, ``runs_pieces``: what
    ``--json`` writes; a test holds them equal)."""

    direction: str
    start: list[str]
    texts: list[str]
    ends: list[str]  # per record: the rest of its text ("" when ``texts`` holds it whole)
    verified: list[bool]  # per record
    not_linked: list[str]  # record digests whose lineage check warns
    unknown: list[tuple[str, str]]
    runs: list[dict[str, Any]]
    run_texts: list[str]
    plain: Callable[[], list[dict[str, Any]]] = field(repr=False)
    _records: list[dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def records(self) -> list[dict[str, Any]]:
        if self._records is None:
            self._records = self.plain()
        return self._records

    @property
    def failed_runs(self) -> list[str]:
        return [str(r["run_file"]) for r in self.runs if not r["verified"]]

    @property
    def ok(self) -> bool:
        return all(self.verified) and not self.unknown and not self.failed_runs

    def head(self) -> dict[str, Any]:
        """The answer less its records and runs."""
        return {
            "direction": self.direction,
            "start": list(self.start),
            "unknown_parents": [{"child": c, "parent": p} for c, p in self.unknown],
            "verified": sum(self.verified),
            "failed_runs": self.failed_runs,
            "not_linked": list(self.not_linked),
        }

    def to_json_obj(self) -> dict[str, Any]:
        """The answer as dicts, built the plain way (``records_pieces`` writes the same)."""
        return {
            **self.head(),
            "records": list(self.records),
            "runs": list(self.runs),
            "not_linked": [
                r["record_digest"]
                for r in self.records
                if any(
                    c["name"] == "lineage" and c["status"] == "warning"
                    for c in r["verdict"]["checks"]
                )
            ],
            "verified": sum(1 for r in self.records if r["verified"]),
        }

    def records_pieces(self) -> list[str]:
        """``json.dumps(self.to_json_obj()["records"], sort_keys=True)`` as pieces (``texts``
        and their separators) to write one after another."""
        return _pieces(self.texts, self.ends)

    def runs_pieces(self) -> list[str]:
        """``json.dumps(self.runs, sort_keys=True)`` as pieces, from ``run_texts``."""
        return _pieces(self.run_texts)

    def lines(self) -> list[str]:
        stored = sum(1 for r in self.runs if r["source"] == FROM_INDEX)
        out = [
            f"runs examined: {len(self.runs)} ({len(self.failed_runs)} not verified; "
            f"{stored} from the index, {len(self.runs) - stored} verified now)",
            *(f"  run {r['run_id']} ({r['run_file']}): NOT VERIFIED [{r['source']}]"
              for r in self.runs if not r["verified"]),
            f"{self.direction} of {', '.join(s[:16] for s in self.start) or 'nothing'}:",
        ]  # fmt: skip
        for r in self.records:
            state = "yes" if r["verified"] else f"NO: {r['why_not']}"
            out.append(
                f"  [{r['depth']}] {r['kind']} {r['label'] or ''} (step {r['step']}, run "
                f"{r['run_id']}, agent {r['agent']}) logged {r['logged_at']} index {r['index']} "
                f"{str(r['record_digest'])[:16]}: {state} [{r['source']}]"
            )
        out += [
            f"  unknown parent {p} of {c[:16]}: in none of the given runs" for c, p in self.unknown
        ]
        return out


# a records row as read: (a leading value (the parent digest a child was found by), rowid,
# *_COLUMNS, known); rows from the children query keep their leading value (no copy per row).
# The ``verdict`` column is read as NULL and ``known`` holds the verdict's id in ``verdicts``
# (``IndexedLineage._columns``): its text is read once per walk (``IndexedLineage._known``)
_Row = tuple[Any, ...]
# a record of the answer, as sorted: (depth, time, log index, the order found, digest)
_Node = tuple[int, str, Any, int, str]
(_ROWID, _PATH, _RUN_ID, _AGENT, _STEP, _KIND, _LABEL, _TRUST, _TIME, _LOGGED, _INDEX, _DIGEST,
 _PARENTS, _DIFFERENCE, _VERIFIED, _WHY_NOT, _VERDICT) = range(1, 2 + len(_COLUMNS))  # fmt: skip
_KNOWN = _VERDICT + 1
assert _COLUMNS.index("verdict") == _VERDICT - 2 and _COLUMNS.index("run_id") == _RUN_ID - 2
assert _COLUMNS[-1] == "verdict"
assert _COLUMNS.index("parents") == _PARENTS - 2 and _COLUMNS.index("why_not") == _WHY_NOT - 2

_quote = encode_basestring_ascii  # a str as ``json.dumps`` writes it (ensure_ascii)


def _text(value: Any) -> str:
    """``json.dumps(value, sort_keys=True)``, a str, an int and None written directly."""
    kind = type(value)
    if kind is str:
        return _quote(value)
    if value is None:
        return "null"
    if kind is int:
        return int.__repr__(value)
    return json.dumps(value, sort_keys=True)


def _list_text(items: list[Any]) -> str:
    """``json.dumps(list(items), sort_keys=True)``, a list of str written by ``_quote`` (in
    C: cheaper than testing whether a str needs escaping, ``str.isalnum`` costs more)."""
    if type(items) is not list:
        return json.dumps(list(items), sort_keys=True)
    try:
        return f"[{', '.join(map(_quote, items))}]"
    except TypeError:  # not all str
        return json.dumps(items, sort_keys=True)


def _verdict_text(row: _Row, known: Mapping[Any, Any]) -> Any:
    """A row's stored verdict: its column, or else the text of its id (``known``)."""
    verdict, place = row[_VERDICT], row[_KNOWN]
    return known[place] if verdict is None and place is not None else verdict


def _status(head: str, whole: Callable[[], str]) -> str:
    """A stored run verdict's status from the first 40 characters of its text (``whole``:
    the text, read when they do not tell); ``failed`` when none was stored."""
    if not head:
        return "failed"
    if head.startswith('{"status": "'):  # stored as json.dumps({"status": ..., "checks": ...})
        found = head[12:].split('"', 1)
        if len(found) == 2:
            return found[0]
    return str(json.loads(whole())["status"])


# What marks a database as an audit index of an older version (user_version 0, 2; columns
# grew over time): all of ``_EVERY_VERSION``, ``meta(key, value)`` and these ``records`` columns.
# An older index is dropped and made again by ``index`` only then, so a database of someone
# else's that happens to hold a ``files`` or ``records`` table is never dropped.
_VERSION_0_RECORDS = {"path", "run_id", "record_digest"}


def _older_index(conn: sqlite3.Connection) -> bool:
    columns = {
        table: [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        for table in _EVERY_VERSION
    }
    return (
        all(columns.values())
        and columns["meta"] == ["key", "value"]
        and set(columns["records"]) >= _VERSION_0_RECORDS
    )


def check_version(conn: sqlite3.Connection, db: str | Path, *, older: bool = False) -> bool:
    """Whether the database holds an audit index (any of ``INDEX_TABLES``); one of another
    version than ``INDEX_VERSION`` is refused (``FormatError``, one line), unless ``older``
    (``index``, which rebuilds it: derived data) and it is older."""
    found = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
        f"({', '.join('?' * len(INDEX_TABLES))})",
        INDEX_TABLES,
    ).fetchone()[0]
    if not found:
        return False
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == INDEX_VERSION:
        return True
    if older and version < INDEX_VERSION:
        if _older_index(conn):  # surely ours: it is dropped and made again
            return True
        raise FormatError(
            f"{db}: not an audit index (it holds tables named as the index's, of another shape); "
            "give --db a file of its own"
        )
    which = "an older" if version < INDEX_VERSION else "a newer"
    raise FormatError(
        f"{db}: an audit index made by {which} ledger-verify (version {version}, this one reads "
        f"{INDEX_VERSION}); make it again with `ledger-verify index ... --db {db}`"
    )


def open_index(db: str | Path) -> sqlite3.Connection:
    """An audit index opened to read (``audit.index.AuditIndex`` makes and fills it); a file
    that is not an SQLite database: ``FormatError``, as ``AuditIndex`` words it; an index of
    another version: ``FormatError`` (``check_version``)."""
    try:
        conn = sqlite3.connect(str(db), isolation_level=None)
        try:
            check_version(conn, db)
        except FormatError:
            conn.close()
            raise
        conn.execute("PRAGMA query_only = 1")  # reads only
        conn.execute(f"PRAGMA mmap_size = {1 << 30}")  # pages read in place, not copied
    except sqlite3.DatabaseError as exc:
        raise FormatError(f"{db}: not an audit index ({exc})") from None
    return conn


def stored_runs(
    conn: sqlite3.Connection, fingerprint: str
) -> dict[str, tuple[str, int, int, str, str | None]]:
    """``AuditIndex.stored_runs``: path -> (file hash, size, mtime_ns, the first 40 characters
    of the run verdict's JSON, run id) of the files indexed under the trust inputs
    ``fingerprint``; empty when the index was made under others (``open_index`` refuses an
    index of another version). ``verdict_of`` reads a verdict whole."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
    except sqlite3.OperationalError:  # no tables: nothing indexed
        return {}
    if row is None or row[0] != fingerprint:
        return {}
    # the verdict's head as ``substr(verdict, 1, 40) or ""`` (no verdict, or an empty one:
    # ""); each row taken as it is read (the path last), no tuple made again in Python
    rows = conn.execute(
        "SELECT file_hash, size, mtime_ns, CASE WHEN v.text IS NULL OR length(v.text) = 0 "
        "THEN '' ELSE substr(v.text, 1, 40) END, run_id, path FROM files f "
        "LEFT JOIN verdicts v ON v.id = f.verdict WHERE file_hash != ''"
    ).fetchall()
    return dict(zip(map(itemgetter(5), rows), map(itemgetter(slice(0, 5)), rows), strict=True))


def verdict_of(conn: sqlite3.Connection, path: str) -> str:
    """The stored run verdict's JSON text of the file ``path`` ("" when none was stored)."""
    row = conn.execute(
        "SELECT v.text FROM files f LEFT JOIN verdicts v ON v.id = f.verdict WHERE f.path = ?",
        (path,),
    ).fetchone()
    return str(row[0] or "") if row else ""


def stored_files(
    conn: sqlite3.Connection, fingerprint: str, paths: Sequence[str]
) -> dict[str, tuple[str, tuple[str, int, int, str, str | None]]]:
    """Given path -> (the indexed path, ``stored_runs``' entry) for each of ``paths`` the index
    holds under ``fingerprint`` with the same content (module docstring): the same path,
    size and modification time, or else the same SHA-256 file hash (a copy)."""
    stored = stored_runs(conn, fingerprint)
    by_hash: dict[str, str] | None = None
    out = {}
    stat = os.stat
    for path in paths:
        key = path
        info = stat(path)
        known = stored.get(key)
        if known is None or known[1] != info.st_size or known[2] != info.st_mtime_ns:
            if by_hash is None:
                by_hash = {h: p for p, (h, *_) in stored.items()}
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            key = by_hash.get(digest, "")
            known = stored.get(key) if key else None
        if known is not None:
            out[path] = (key, known)
    return out


def passing(head: str) -> bool:
    """Whether a stored run verdict (its first 40 characters, ``stored_runs``) passed."""
    return head.startswith(('{"status": "ok"', '{"status": "warning"'))


class _VerdictTexts(dict[Any, Any]):
    """A verdict's id -> its text in ``verdicts``, each read when first asked for (records
    share a handful); an id the index holds no text for: ``FormatError``."""

    def __init__(self, db: sqlite3.Connection) -> None:
        super().__init__()
        self.db = db

    def __missing__(self, verdict: Any) -> Any:
        row = self.db.execute("SELECT text FROM verdicts WHERE id = ?", (verdict,)).fetchone()
        if row is None:
            raise FormatError(f"the index holds no verdict {verdict!r}; make it again")
        self[verdict] = row[0]
        return row[0]


class _NoneFresh:
    """``Lineage`` over no runs (every run given is stored)."""

    def __init__(self) -> None:
        self.items: dict[str, Any] = {}
        self.children: dict[str, list[str]] = {}
        self.runs: tuple[Any, ...] = ()

    @_collector_paused()
    def tainted_starts(self, labels: Sequence[str]) -> list[str]:
        return []

    def node(self, digest: str, depth: int) -> Any:
        raise KeyError(digest)


class IndexedLineage:
    """The given runs, split into stored (index) and fresh (verified now) (module docstring).
    ``checker`` and ``policy`` make the ``ReceiptChecker`` and the auditor's time policy for
    the fresh runs (only when there are any; no ``policy``: the default)."""

    @_collector_paused()
    def __init__(
        self,
        paths: Sequence[str],
        db: sqlite3.Connection,
        fingerprint: str,
        checker: Callable[[], ReceiptChecker],
        policy: Callable[[], TimePolicy] | None = None,
    ) -> None:
        self.db = db
        # stored verdict text -> its JSON (shared), its warnings, and (for the answer's text)
        # the verdict and warnings as json.dumps(sort_keys=True) writes them, and whether the
        # lineage check warns ("inputs not linked")
        self._verdicts: dict[str, tuple[dict[str, Any], list[str], str, str, bool]] = {}
        self._parent_lists: dict[str, list[str]] = {}  # record digest -> its parents, parsed
        self._seconds: dict[int, str] = {}  # seconds since the epoch -> their RFC 3339 text
        self._quoted: dict[int, str] = {}  # the same, quoted as JSON, less ``000Z"``
        # a row's (trust label, verdict, verified, why not) -> ``_tail``'s answer
        self._tails: dict[tuple[Any, Any, Any, Any, Any], Any] = {}
        self._read: dict[str, _Row] = {}  # rows read before a walk (``tainted_starts``)
        self._known = _VerdictTexts(db)  # a verdict's id -> its text (``_columns``)
        matched = stored_files(db, fingerprint, paths)
        self.runs: list[dict[str, Any]] = []
        self.run_texts: list[str] = []  # each of ``runs`` as json.dumps(sort_keys=True) writes it
        self.stored_paths: list[str] = []
        fresh: list[tuple[str, Any]] = []
        statuses: dict[str, str] = {}  # a verdict's first 40 characters -> its status
        ends: dict[str, str] = {}  # a status -> a passing run's text after its run id
        runs, texts, stored = self.runs, self.run_texts, self.stored_paths
        for path in paths:
            key, known = matched.get(path, ("", None))
            if known is None:
                from ledger_client.receipts.run_load import load_run

                fresh.append((path, load_run(path)))
                continue
            stored.append(key)
            head, run_id = known[3], known[4]
            status = statuses.get(head)
            if status is None:
                status = _status(head, partial(verdict_of, db, key))
                if not head or (head.startswith('{"status": "') and '"' in head[12:]):
                    statuses[head] = status  # told by the head alone, as ``_status`` reads it
            verified = status in ("ok", "warning")
            run: dict[str, Any] = {
                "run_file": path,
                "run_id": run_id,
                "verified": verified,
                "source": FROM_INDEX,
                "status": status,
            }
            if verified:  # as json.dumps(run, sort_keys=True) writes it
                end = ends.get(status)
                if end is None:
                    end = ends[status] = (
                        f', "source": "{FROM_INDEX}", "status": {_quote(status)}, '
                        '"verified": true}'
                    )
                texts.append(
                    f'{{"run_file": {_quote(path)}, "run_id": '
                    f"{_quote(run_id) if type(run_id) is str else _text(run_id)}{end}"
                )
            else:  # the checks of a failing run, in full
                whole = verdict_of(db, key)
                run["verdict"] = json.loads(whole) if whole else {"status": status}
                texts.append(json.dumps(run, sort_keys=True))
            runs.append(run)
        self.fresh: Lineage | _NoneFresh = _NoneFresh()
        if fresh:
            from ledger_client.audit.lineage import Lineage

            self.fresh = Lineage(fresh, checker(), policy=policy() if policy else None)
        for examined in self.fresh.runs:
            self.runs.append(examined.to_json_obj())
            self.run_texts.append(json.dumps(self.runs[-1], sort_keys=True))
        self.given = set(self.stored_paths)

    def _rows(self, digests: Sequence[str]) -> dict[str, _Row]:
        out: dict[str, _Row] = {}
        for start in range(0, len(digests), 500):
            part = digests[start : start + 500]
            marks = ", ".join("?" * len(part))
            self._keep(
                out,
                self.db.execute(
                    f"SELECT record_digest, rowid, {self._columns()} FROM records "
                    f"WHERE record_digest IN ({marks})",
                    part,
                ),
            )
        self._parse_parents(out)
        return out

    def _keep(self, out: dict[str, _Row], found: Iterable[_Row]) -> None:
        """Rows ``(lead, rowid, *_COLUMNS)`` of the given runs into ``out``: per digest, the
        row stored first (the least rowid) when copies of a record are given."""
        given = self.given
        for row in found:
            if row[_PATH] in given:
                digest = row[_DIGEST]
                had = out.get(digest)
                if had is None or had[_ROWID] > row[_ROWID]:
                    out[digest] = row

    def _columns(self, table: str = "") -> str:
        """``_COLUMNS`` (of ``table``: "r." or "") as a row is read: ``verdict`` as NULL, then
        ``known``: the verdict's id (its text in ``_known``)."""
        head = ", ".join(f"{table}{c}" for c in _COLUMNS[:-1])
        return f"{head}, NULL, {table}verdict"

    def _parse_parents(self, out: dict[str, _Row]) -> None:
        lists = self._parent_lists
        kept = [(d, row) for d, row in out.items() if d not in lists]
        texts = [row[_PARENTS] for _, row in kept]
        if all(texts):  # every row's parent list in one parse (else each parsed on demand)
            parsed = json.loads(f"[{','.join(texts)}]")
            for (digest, _), parents in zip(kept, parsed, strict=True):
                lists[digest] = parents

    def find(self, given: str) -> str | None:
        """A full digest from hex or a unique prefix of at least 8 hex digits."""
        text = given.strip().lower()
        if len(text) < 8 or set(text) - set("0123456789abcdef"):
            raise FormatError(f"--from {given}: give a digest or at least 8 of its hex digits")
        found = {
            d
            for d, path in self.db.execute(
                "SELECT record_digest, path FROM records WHERE record_digest >= ? AND "
                "record_digest < ?",
                (text, text + "g"),
            )
            if path in self.given
        }
        found |= {d for d in self.fresh.items if d.startswith(text)}
        if len(found) > 1:
            raise FormatError(f"--from {given}: {len(found)} records with this digest prefix")
        return next(iter(found), None)

    def tainted_starts(self, labels: Sequence[str]) -> list[str]:
        """The digests of the given runs' memory writes labelled one of ``labels``; their
        rows are kept for ``walk`` (the rows ``_rows`` would choose: every copy of a record
        has its label and kind, so each copy given is read here)."""
        marks = ", ".join("?" * len(labels))
        found: dict[str, _Row] = {}
        self._keep(
            found,
            self.db.execute(
                f"SELECT record_digest, rowid, {self._columns()} FROM records "
                f"WHERE trust_label IN ({marks}) AND kind = 'memory_write'",
                list(labels),
            ),
        )
        self._read.update(found)
        return sorted({*found, *self.fresh.tainted_starts(labels)})

    def _children(self, digests: Sequence[str], rows: dict[str, _Row]) -> dict[str, list[str]]:
        """parent digest -> the records resting on it (``run_closed`` records left out; a
        digest with none: not a key); the rows of children not yet in ``rows`` go there (as
        ``_rows`` would choose them)."""
        known = self.fresh.children  # a fresh record's children first, as ``Lineage`` has them
        out = {d: list(known[d]) for d in digests if d in known} if known else {}
        columns = self._columns("r.")
        new: dict[str, _Row] = {}
        given = self.given
        found: set[tuple[str, str]] = set()
        for start in range(0, len(digests), 500):
            part = list(digests[start : start + 500])
            marks = ", ".join("?" * len(part))
            hits = self.db.execute(  # by the parent digest first, then the child's id
                f"SELECT t.value, r.rowid, {columns} FROM terms t CROSS JOIN records r ON "
                f"r.id = t.record WHERE t.field = {TERM_FIELDS['parent']} "
                f"AND t.value IN ({marks}) AND r.kind != 'run_closed'",
                part,
            ).fetchall()
            for hit in hits:  # ``_keep`` and the children lists in one pass
                if hit[_PATH] in given:
                    parent, child = hit[0], hit[_DIGEST]
                    if (parent, child) not in found:
                        found.add((parent, child))
                        listed = out.get(parent)
                        if listed is None:
                            out[parent] = [child]
                        else:
                            listed.append(child)
                    had = new.get(child)
                    if had is None or had[_ROWID] > hit[_ROWID]:
                        new[child] = hit
        fresh = {d: row for d, row in new.items() if d not in rows}
        self._parse_parents(fresh)
        rows.update(fresh)
        return out

    @_collector_paused()
    def walk(self, starts: Sequence[str], direction: str) -> IndexedResult:
        """Breadth-first from ``starts`` over stored and fresh records, one level at a time
        (one query per level and 500 records)."""
        depth = {s: 0 for s in starts}
        read = self._read
        rows = {d: read[d] for d in starts if d in read}
        self._parse_parents(rows)
        rows.update(self._rows([d for d in starts if d not in read]))
        fresh = self.fresh.items
        level = list(starts)
        unknown: list[tuple[str, str]] = []
        while level:
            if direction == "descendants":
                nexts = self._children(level, rows)
            else:
                nexts = {d: self._parents(d, rows) for d in level}
            wanted = sorted({o for os in nexts.values() for o in os if o not in rows})
            rows.update(self._rows(wanted))
            following = []
            for digest in level:
                below = depth[digest] + 1
                for other in nexts.get(digest, ()):
                    if other not in rows and other not in fresh:
                        if (digest, other) not in unknown:
                            unknown.append((digest, other))
                    elif other not in depth:
                        depth[other] = below
                        following.append(other)
            level = following
        lists = self._parent_lists  # the stored rows' parents, parsed
        listed = lists.get
        parents_of = {
            d: found if (found := listed(d)) is not None else self._parents(d, rows) for d in depth
        }
        missing = sorted({p for ps in parents_of.values() for p in ps} - rows.keys() - fresh.keys())
        rows.update(self._rows(missing))
        absent = {p for p in missing if p not in rows}
        if absent:  # parents in none of the given runs, in the order of the records
            seen = set(unknown)
            for d, parents in parents_of.items():
                for parent in parents:
                    if parent in absent and (d, parent) not in seen:
                        seen.add((d, parent))
                        unknown.append((d, parent))
        # the order of ``records``: (depth, time, index), as the plain answer's stable sort
        # puts them (ties in the order found: ``seq``)
        order: list[tuple[int, str, Any, int, str]] = []
        for seq, (d, n) in enumerate(depth.items()):
            if fresh and d in fresh:
                item = fresh[d][0]
                order.append((n, str(item.record.time), item.receipt.index, seq, d))
            else:
                row = rows[d]
                order.append((n, str(row[_TIME]), row[_INDEX], seq, d))
        order.sort()
        texts, ends, verified, not_linked = self._fragments(order, rows)
        return IndexedResult(
            direction, list(starts), texts, ends, verified, not_linked, unknown, self.runs,
            self.run_texts, partial(self._nodes, order, rows),
        )  # fmt: skip

    def _nodes(self, order: list[_Node], rows: dict[str, _Row]) -> list[dict[str, Any]]:
        return [self._node(d, n, rows) for n, _, _, _, d in order]

    def _parents(self, digest: str, rows: dict[str, _Row]) -> list[str]:
        if digest in rows:
            found = self._parent_lists.get(digest)
            if found is None:  # parsed once per row (``_rows`` parses them in bulk)
                found = self._parent_lists[digest] = json.loads(rows[digest][_PARENTS])
            return found
        item = self.fresh.items.get(digest)
        return list(item[0].record.parent_digests) if item else []

    def _iso_ms(self, ms: int | None) -> str | None:
        """``iso_ms``, its date and time formatted once per second (records share seconds)."""
        if ms is None:
            return None
        second, milli = divmod(ms, 1000)
        head = self._seconds.get(second)
        if head is None:
            # ``audit.verify.iso_ms`` of the whole second, less ".000Z"
            head = self._seconds[second] = rfc3339_millis(from_epoch_ms(second * 1000))[:-5]
        return f"{head}.{milli:03d}Z"

    def _verdict(self, text: str) -> tuple[dict[str, Any], list[str], str, str, bool]:
        """A stored verdict's JSON text read once (records share a handful of verdicts)."""
        shared = self._verdicts.get(text)
        if shared is None:
            verdict = json.loads(text)
            checks = verdict["checks"]
            warned = [c["message"] for c in checks if c["status"] == "warning"]
            shared = self._verdicts[text] = (
                verdict,
                warned,
                json.dumps(verdict, sort_keys=True),
                json.dumps(warned, sort_keys=True),
                any(c["name"] == "lineage" and c["status"] == "warning" for c in checks),
            )
        return shared

    def _node(self, digest: str, depth: int, rows: dict[str, _Row]) -> dict[str, Any]:
        """The answer's record ``digest`` as a dict (``_fragment`` writes it as text)."""
        if digest in self.fresh.items:
            return self.fresh.node(digest, depth).to_json_obj()
        row = rows[digest]
        shared = self._verdict(_verdict_text(row, self._known))
        return {
            "record_digest": digest,
            "depth": depth,
            "kind": row[_KIND],
            "step": row[_STEP],
            "run_id": row[_RUN_ID],
            "run_file": row[_PATH],
            "agent": row[_AGENT],
            "label": row[_LABEL],
            "trust_label": row[_TRUST],
            "time": row[_TIME],
            "logged_at": self._iso_ms(row[_LOGGED]),
            "index": row[_INDEX],
            "time_difference_ms": row[_DIFFERENCE],
            "parents": list(self._parents(digest, rows)),
            "verified": bool(row[_VERIFIED]),
            "why_not": row[_WHY_NOT],
            "warnings": list(shared[1]),
            "verdict": shared[0],
            "source": FROM_INDEX,
        }

    def _fragments(
        self, nodes: list[_Node], rows: dict[str, _Row]
    ) -> tuple[list[str], list[str], list[bool], list[str]]:
        """The answer's records (``_Node``), each as ``json.dumps(self._node(...),
        sort_keys=True)`` writes it (its keys in sorted order), in two parts (a text and its
        end); whether each is verified; the digests of those whose lineage check warns. A
        stored record is written from its row (``_stored_fragments``), a fresh one from its
        dict."""
        fresh = self.fresh.items
        stored = [node for node in nodes if node[4] not in fresh] if fresh else nodes
        lines, ends, verified, warns = self._stored_fragments(stored, rows)
        if len(stored) < len(nodes):  # fresh records, in their places
            made = iter(zip(lines, ends, verified, warns, strict=True))
            lines, ends, verified, warns = [], [], [], []
            for n, _, _, _, d in nodes:
                if d in fresh:
                    plain = self._node(d, n, rows)
                    lines.append(json.dumps(plain, sort_keys=True))
                    ends.append("")
                    verified.append(bool(plain["verified"]))
                    checks = plain["verdict"]["checks"]
                    warns.append(
                        any(c["name"] == "lineage" and c["status"] == "warning" for c in checks)
                    )
                else:
                    line, end, ok, warned = next(made)
                    lines.append(line)
                    ends.append(end)
                    verified.append(ok)
                    warns.append(warned)
        not_linked = [node[4] for node, warned in zip(nodes, warns, strict=True) if warned]
        return lines, ends, verified, not_linked

    def _stored_fragments(
        self, nodes: list[_Node], rows: dict[str, _Row]
    ) -> tuple[list[str], list[str], list[bool], list[bool]]:
        """``_fragments`` of stored records: texts and their ends, verified, lineage warns. A
        row of the column types the index writes (text, integer, null where allowed) is
        written in one f-string, its strings by ``_quote``, followed by its end: the text from
        ``"trust_label"`` to the end, made once for each (trust label, verdict, verified, why
        not) (``_tail``); any other row by ``_record_text`` (its end ""). Each second's
        logged time is written once."""
        quote, lists, tails, seconds = _quote, self._parent_lists, self._tails, self._quoted
        lines: list[str] = []
        ends: list[str] = []
        verified: list[bool] = []
        warns: list[bool] = []
        line, end_, ok_, warn_ = lines.append, ends.append, verified.append, warns.append
        for depth, _, _, _, digest in nodes:
            row = rows[digest]
            index, step, difference = row[_INDEX], row[_STEP], row[_DIFFERENCE]
            logged = row[_LOGGED]
            shared = (row[_TRUST], row[_VERDICT], row[_VERIFIED], row[_WHY_NOT], row[_KNOWN])
            tail = tails.get(shared)
            if tail is None:
                tail = self._tail(shared)  # a verdict not JSON: raises, as the plain answer does
            ok_(tail[1])
            warn_(tail[2])
            parents = lists.get(digest)
            if parents is None:
                parents = self._parents(digest, rows)
            if (
                type(index) is not int
                or type(step) is not int
                or (difference is not None and type(difference) is not int)
                or tail[0] is None
            ):
                line(self._record_text(digest, depth, row, _list_text(parents), tail[3], tail[1]))
                end_("")
                continue
            if logged is None:
                at = "null"
            elif type(logged) is int:
                second, milli = divmod(logged, 1000)
                head = seconds.get(second)
                if head is None:  # ``quote(self._iso_ms(logged))`` less its milliseconds
                    whole = self._iso_ms(second * 1000)
                    assert whole is not None
                    head = seconds[second] = quote(whole)[:-5]
                at = f'{head}{milli:03d}Z"'
            else:
                line(self._record_text(digest, depth, row, _list_text(parents), tail[3], tail[1]))
                end_("")
                continue
            text = _list_text(parents)
            try:  # a string column holding another type: ``quote`` refuses it (TypeError)
                line(
                    f'{{"agent": {quote(row[_AGENT])}, "depth": {depth}, "index": {index}, '
                    f'"kind": {quote(row[_KIND])}, "label": {quote(row[_LABEL])}, '
                    f'"logged_at": {at}, "parents": {text}, '
                    f'"record_digest": {quote(digest)}, "run_file": {quote(row[_PATH])}, '
                    f'"run_id": {quote(row[_RUN_ID])}, "source": "{FROM_INDEX}", '
                    f'"step": {step}, "time": {quote(row[_TIME])}, '
                    f'"time_difference_ms": {"null" if difference is None else difference}, '
                )
                end_(tail[0])
            except TypeError:
                line(self._record_text(digest, depth, row, text, tail[3], tail[1]))
                end_("")
        return lines, ends, verified, warns

    def _tail(
        self, ends: tuple[Any, Any, Any, Any, Any]
    ) -> tuple[str | None, bool, bool, tuple[dict[str, Any], list[str], str, str, bool]]:
        """For a row's (trust label, verdict, verified, why not, known): the record's text
        from ``"trust_label"`` to its end (None when a string column holds another type: the
        row is then written by ``_record_text``), verified, whether the lineage check warns,
        and the verdict read (``_verdict``). Kept in ``_tails`` when the text is made."""
        trust, verdict, verified, why, known = ends
        if verdict is None and known is not None:  # the text of its id
            verdict = self._known[known]
        shared = self._verdicts.get(verdict) or self._verdict(verdict)
        ok = bool(verified)
        try:
            text: str | None = (
                f'"trust_label": {"null" if trust is None else _quote(trust)}, '
                f'"verdict": {shared[2]}, "verified": {"true" if ok else "false"}, '
                f'"warnings": {shared[3]}, "why_not": {"null" if why is None else _quote(why)}}}'
            )
        except TypeError:
            return None, ok, shared[4], shared
        made = self._tails[ends] = (text, ok, shared[4], shared)
        return made

    def _record_text(
        self,
        digest: str,
        depth: int,
        row: _Row,
        parents: str,
        shared: tuple[dict[str, Any], list[str], str, str, bool],
        ok: bool,
    ) -> str:
        """A stored record as ``_stored_fragments`` writes it, each value by ``_text``."""
        return (
            f'{{"agent": {_text(row[_AGENT])}, "depth": {depth}, "index": {_text(row[_INDEX])}, '
            f'"kind": {_text(row[_KIND])}, "label": {_text(row[_LABEL])}, '
            f'"logged_at": {_text(self._iso_ms(row[_LOGGED]))}, "parents": {parents}, '
            f'"record_digest": {_text(digest)}, "run_file": {_text(row[_PATH])}, '
            f'"run_id": {_text(row[_RUN_ID])}, "source": "{FROM_INDEX}", '
            f'"step": {_text(row[_STEP])}, "time": {_text(row[_TIME])}, '
            f'"time_difference_ms": {_text(row[_DIFFERENCE])}, '
            f'"trust_label": {_text(row[_TRUST])}, "verdict": {shared[2]}, '
            f'"verified": {"true" if ok else "false"}, "warnings": {shared[3]}, '
            f'"why_not": {_text(row[_WHY_NOT])}}}'
        )
