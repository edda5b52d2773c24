"""An embedded SQLite index of verified runs, for queries across many runs.

docs/design.md "Who uses it": an auditor asks across runs (by agent, time, kind, tool, trust label,
outcome, verification status). ``ledger-verify index DIR --db audit.sqlite`` verifies every run
file under DIR (``ledger_client.audit.verify``: each receipt part by part, with checkpoint
signatures and anchor tokens verified once per distinct note/token across all runs, then the
run checks) and stores one row per record; ``ledger-verify query --db audit.sqlite`` filters.

Incremental: a file whose size and modification time (ns) are unchanged since it was indexed
is skipped; a changed file is re-verified and its rows replaced; rows of files that are gone
are deleted. The verification settings (keys, TSA roots, origin, witnesses) are fingerprinted;
other settings than last time re-index everything. Rows are written in transactions of
``_BATCH`` files (WAL journal): an interrupted index loses at most the files of the open
transaction, which the next run re-indexes, never a half-written file.

Files are read with ``ledger_client.receipts.run_load.load_run`` (the reader of
``ledger-verify run``: what it refuses, the index refuses, and the file is listed unreadable;
a file of a newer schema version with the problem ``unsupported_schema_version``)
and verified by ``workers`` processes (default: one per core), each with its own
``ReceiptChecker`` and ``VerificationCache`` (``CacheSpec`` builds them), so each distinct
checkpoint and token is verified at most once per process.

Schema (``SCHEMA``): ``files(path, size, mtime_ns, run_id, agent, records, verified,
problems)``, ``records(path, run_id, agent, step, kind, tool, label, time, logged_at_ms,
log_index, record_digest, trust_label, outcome, verified, why_not, parents,
time_difference_ms, verdict)`` and ``problems(path, run_id, code, step, record_digest,
message)``. ``time`` is the agent's claimed time, ``logged_at_ms`` the log's leaf time and
``time_difference_ms`` the second minus the first; ``verdict`` is the record's verdict
(``ledger_client.audit.verdicts``, JSON: receipt, run, time under the default time policy,
lineage) as the other views show it. An index made before these columns existed is rebuilt.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509

from ledger.core.checkpoint import CosignatureVerifier
from ledger.core.errors import FormatError, UnsupportedSchemaError
from ledger.core.note import Ed25519Verifier
from ledger_client.audit.timeline import label_of, outcome_of, timeline, trust_of
from ledger_client.audit.verify import RunAudit, audit_run
from ledger_client.receipts.run_load import load_run
from ledger_client.receipts.verify import ReceiptChecker

__all__ = ["SCHEMA", "AuditIndex", "CacheSpec", "IndexStats"]

_BATCH = 256  # files per transaction
_CHUNK = 16  # files per task sent to a worker process

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
  path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, run_id TEXT,
  agent TEXT, records INTEGER NOT NULL, verified INTEGER NOT NULL, problems INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS records(
  path TEXT NOT NULL, run_id TEXT NOT NULL, agent TEXT NOT NULL, step INTEGER NOT NULL,
  kind TEXT NOT NULL, tool TEXT, label TEXT NOT NULL, time TEXT NOT NULL,
  logged_at_ms INTEGER, log_index INTEGER NOT NULL, record_digest TEXT NOT NULL,
  trust_label TEXT, outcome TEXT, verified INTEGER NOT NULL, why_not TEXT,
  parents TEXT NOT NULL, time_difference_ms INTEGER, verdict TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS problems(
  path TEXT NOT NULL, run_id TEXT, code TEXT NOT NULL, step INTEGER, record_digest TEXT,
  message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS records_path ON records(path);
CREATE INDEX IF NOT EXISTS records_agent ON records(agent, logged_at_ms);
CREATE INDEX IF NOT EXISTS records_run ON records(run_id);
CREATE INDEX IF NOT EXISTS records_kind ON records(kind, tool);
CREATE INDEX IF NOT EXISTS records_time ON records(logged_at_ms);
CREATE INDEX IF NOT EXISTS records_digest ON records(record_digest);
CREATE INDEX IF NOT EXISTS problems_path ON problems(path);
"""
_RECORD_COLUMNS = (
    "path", "run_id", "agent", "step", "kind", "tool", "label", "time", "logged_at_ms",
    "log_index", "record_digest", "trust_label", "outcome", "verified", "why_not", "parents",
    "time_difference_ms", "verdict",
)  # fmt: skip


@dataclass(slots=True)
class IndexStats:
    """What one ``index`` call did."""

    indexed: int = 0
    skipped: int = 0
    removed: int = 0
    records: int = 0
    failed_runs: int = 0
    unreadable: int = 0

    def to_json_obj(self) -> dict[str, int]:
        return {
            "indexed": self.indexed,
            "skipped": self.skipped,
            "removed": self.removed,
            "records": self.records,
            "failed_runs": self.failed_runs,
            "unreadable": self.unreadable,
        }


@dataclass(frozen=True, slots=True)
class CacheSpec:
    """What a worker process needs to build its ``ReceiptChecker`` (picklable)."""

    keys: tuple[str, ...]
    roots_der: tuple[bytes, ...]
    origin: str | None
    witnesses: tuple[str, ...]

    def build(self) -> ReceiptChecker:
        return ReceiptChecker(
            [Ed25519Verifier.from_key_string(k) for k in self.keys],
            tsa_roots=[x509.load_der_x509_certificate(d) for d in self.roots_der] or None,
            origin=self.origin,
            witnesses=[CosignatureVerifier.from_key_string(w) for w in self.witnesses],
        )


@dataclass(frozen=True, slots=True)
class _Done:
    """One file's outcome, as plain rows (sent back from a worker process)."""

    key: str
    size: int
    mtime_ns: int
    file_row: tuple[Any, ...]
    records: list[tuple[Any, ...]]
    problems: list[tuple[Any, ...]]
    ok: bool
    readable: bool
    checks: tuple[int, int]  # checkpoints and tokens verified for this file


_CHECKER: list[ReceiptChecker] = []  # the worker's checker and cache (one per process)


def _start_worker(spec: CacheSpec) -> None:
    _CHECKER[:] = [spec.build()]


def _audit_file(job: tuple[str, int, int]) -> _Done:
    key, size, mtime_ns = job
    checker = _CHECKER[0]
    stats = checker.cache.stats
    before = (stats["checkpoints"], stats["tokens"])
    try:
        audit = audit_run(load_run(key), checker)
    except (FormatError, OSError) as exc:
        code = "unsupported_schema_version" if isinstance(exc, UnsupportedSchemaError) else None
        problem = (key, None, code or "unreadable", None, None, str(exc))
        row: tuple[Any, ...] = (key, size, mtime_ns, None, None, 0, 0, 1)
        return _Done(key, size, mtime_ns, row, [], [problem], False, False, (0, 0))
    used = (stats["checkpoints"] - before[0], stats["tokens"] - before[1])
    row = (key, size, mtime_ns, audit.run_id, audit.agent, len(audit.checks), int(audit.ok),
           len(audit.problems))  # fmt: skip
    problems = [
        (key, audit.run_id, p.code, p.step, p.record_digest, p.message) for p, _ in audit.problems
    ]
    return _Done(key, size, mtime_ns, row, _record_rows(key, audit), problems, audit.ok, True, used)


def _record_rows(key: str, audit: RunAudit) -> list[tuple[Any, ...]]:
    rows = []
    for row in timeline(audit):
        record, check = row.check.record, row.check
        rows.append(
            (
                key, record.run_id, record.agent, record.step, record.kind,
                getattr(record.payload, "tool", None), label_of(record), record.time,
                check.logged_at_ms, check.index, check.digest, trust_of(record),
                outcome_of(record), int(row.verified), row.why_not,
                json.dumps(list(record.parent_digests)), row.to_json_obj()["time_difference_ms"],
                json.dumps(row.verdict.to_json_obj()),
            )
        )  # fmt: skip
    return rows


class AuditIndex:
    """The SQLite file at ``db`` (created when missing); use as a context manager."""

    def __init__(self, db: str | Path) -> None:
        try:
            self.db = sqlite3.connect(str(db), isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
            columns = {r[1] for r in self.db.execute("PRAGMA table_info(records)")}
            if "verdict" not in columns:  # made by an older verifier: rebuilt
                for table in ("files", "records", "problems", "meta"):
                    self.db.execute(f"DROP TABLE {table}")
                self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise FormatError(f"{db}: not an audit index ({exc})") from None

    def __enter__(self) -> AuditIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.db.close()

    def _settings(self, fingerprint: str) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
        if row is not None and row[0] == fingerprint:
            return
        with _Transaction(self.db):
            for table in ("files", "records", "problems"):
                self.db.execute(f"DELETE FROM {table}")
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('settings', ?)", (fingerprint,))

    def index(
        self,
        runs: Sequence[Path],
        spec: CacheSpec,
        *,
        fingerprint: str,
        workers: int = 1,
        progress: Callable[[int], None] | None = None,
    ) -> tuple[IndexStats, dict[str, int]]:
        """Verify and index ``runs`` (module docstring) with ``workers`` processes; the stats
        and how many distinct checkpoints and tokens were verified."""
        self._settings(fingerprint)
        stats = IndexStats()
        known = {
            path: (size, mtime)
            for path, size, mtime in self.db.execute("SELECT path, size, mtime_ns FROM files")
        }
        todo = []
        for path in runs:
            stat = path.stat()
            if known.get(str(path)) == (stat.st_size, stat.st_mtime_ns):
                stats.skipped += 1
            else:
                todo.append((str(path), stat.st_size, stat.st_mtime_ns))
        verified = {"checkpoints": 0, "tokens": 0}
        for n, done in enumerate(self._audit(todo, spec, workers), 1):
            self._store(done, stats, verified, commit=n % _BATCH == 0 or n == len(todo))
            if progress is not None:
                progress(stats.skipped + n)
        present = {str(r) for r in runs}
        gone = [p for p in known if p not in present]
        with _Transaction(self.db):
            for path in gone:
                self._delete(path)
        stats.removed = len(gone)
        return stats, verified

    def _audit(
        self, todo: list[tuple[str, int, int]], spec: CacheSpec, workers: int
    ) -> Iterator[_Done]:
        if workers <= 1 or len(todo) < 2 * _CHUNK:
            _start_worker(spec)
            yield from map(_audit_file, todo)
            return
        with ProcessPoolExecutor(workers, initializer=_start_worker, initargs=(spec,)) as pool:
            yield from pool.map(_audit_file, todo, chunksize=_CHUNK)

    def _store(
        self, done: _Done, stats: IndexStats, verified: dict[str, int], *, commit: bool
    ) -> None:
        if not self.db.in_transaction:
            self.db.execute("BEGIN")
        self._delete(done.key)
        self.db.execute("INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)", done.file_row)
        marks = ", ".join("?" * len(_RECORD_COLUMNS))
        self.db.executemany(f"INSERT INTO records VALUES ({marks})", done.records)
        self.db.executemany("INSERT INTO problems VALUES (?, ?, ?, ?, ?, ?)", done.problems)
        if commit:
            self.db.execute("COMMIT")
        stats.indexed += done.readable
        stats.unreadable += not done.readable
        stats.records += len(done.records)
        stats.failed_runs += done.readable and not done.ok
        verified["checkpoints"] += done.checks[0]
        verified["tokens"] += done.checks[1]

    def _delete(self, path: str) -> None:
        for table in ("files", "records", "problems"):
            self.db.execute(f"DELETE FROM {table} WHERE path = ?", (path,))

    def query(
        self, where: Sequence[tuple[str, Sequence[object]]], limit: int
    ) -> list[dict[str, Any]]:
        """Records matching every ``(SQL condition, its ? values)``, oldest first."""
        clause = " AND ".join(cond for cond, _ in where) or "1"
        values = [value for _, group in where for value in group]
        cursor = self.db.execute(
            f"SELECT {', '.join(_RECORD_COLUMNS)} FROM records WHERE {clause} "
            "ORDER BY logged_at_ms, log_index LIMIT ?",
            [*values, limit],
        )
        out = []
        for row in cursor:
            item = dict(zip(_RECORD_COLUMNS, row, strict=True))
            item["verified"] = bool(item["verified"])
            item["parents"] = json.loads(item["parents"])
            item["verdict"] = json.loads(item["verdict"])
            out.append(item)
        return out


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN")

    def __exit__(self, typ: object, exc: object, tb: object) -> None:
        self.db.execute("COMMIT" if typ is None else "ROLLBACK")
