"""An embedded SQLite index of verified runs, for queries across many runs.

DESIGN.md "Who uses it": an auditor asks across runs (by agent, time, kind, tool, trust label,
outcome, verification status). ``ledger-verify index DIR --db audit.sqlite`` verifies every run
file under DIR (``ledger_client.audit_verify``: each receipt part by part, with checkpoint
signatures and anchor tokens verified once per distinct note/token across all runs, then the
run checks) and stores one row per record; ``ledger-verify query --db audit.sqlite`` filters.

Incremental: a file whose size and modification time (ns) are unchanged since it was indexed
is skipped; a changed file is re-verified and its rows replaced; rows of files that are gone
are deleted. The verification settings (keys, TSA roots, origin, witnesses) are fingerprinted;
other settings than last time re-index everything. Each file is one transaction.

Schema (``SCHEMA``): ``files(path, size, mtime_ns, run_id, agent, records, verified,
problems)``, ``records(path, run_id, agent, step, kind, tool, label, time, logged_at_ms,
log_index, record_digest, trust_label, outcome, verified, why_not, parents)`` and
``problems(path, run_id, code, step, record_digest, message)``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import FormatError
from ledger_client.audit_verify import RunAudit, VerifyCache, audit_run
from ledger_client.receipt_verify import RunItem
from ledger_client.timeline import label_of, outcome_of, timeline, trust_of

__all__ = ["SCHEMA", "AuditIndex", "IndexStats"]

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
  parents TEXT NOT NULL);
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


class AuditIndex:
    """The SQLite file at ``db`` (created when missing); use as a context manager."""

    def __init__(self, db: str | Path) -> None:
        try:
            self.db = sqlite3.connect(str(db), isolation_level=None)
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
        with self._transaction():
            for table in ("files", "records", "problems"):
                self.db.execute(f"DELETE FROM {table}")
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('settings', ?)", (fingerprint,))

    def _transaction(self) -> Any:
        return _Transaction(self.db)

    def index(
        self,
        runs: Sequence[Path],
        cache: VerifyCache,
        load: Callable[[Path], Sequence[RunItem]],
        *,
        fingerprint: str,
        progress: Callable[[int], None] | None = None,
    ) -> IndexStats:
        """Verify and index ``runs`` (module docstring); ``load`` reads one run file."""
        self._settings(fingerprint)
        stats = IndexStats()
        known = {
            path: (size, mtime)
            for path, size, mtime in self.db.execute("SELECT path, size, mtime_ns FROM files")
        }
        seen = set()
        for n, path in enumerate(runs, 1):
            key = str(path)
            seen.add(key)
            stat = path.stat()
            if known.get(key) == (stat.st_size, stat.st_mtime_ns):
                stats.skipped += 1
            else:
                self._index_one(path, key, stat.st_size, stat.st_mtime_ns, cache, load, stats)
            if progress is not None:
                progress(n)
        gone = [p for p in known if p not in seen]
        with self._transaction():
            for path in gone:
                self._delete(path)
        stats.removed = len(gone)
        return stats

    def _delete(self, path: str) -> None:
        for table in ("files", "records", "problems"):
            self.db.execute(f"DELETE FROM {table} WHERE path = ?", (path,))

    def _index_one(
        self,
        path: Path,
        key: str,
        size: int,
        mtime_ns: int,
        cache: VerifyCache,
        load: Callable[[Path], Sequence[RunItem]],
        stats: IndexStats,
    ) -> None:
        try:
            audit: RunAudit | None = audit_run(load(path), cache)
            error = None
        except (FormatError, OSError) as exc:
            audit, error = None, str(exc)
            stats.unreadable += 1
        with self._transaction():
            self._delete(key)
            if audit is None:
                self.db.execute(
                    "INSERT INTO files VALUES (?, ?, ?, NULL, NULL, 0, 0, 1)", (key, size, mtime_ns)
                )
                self.db.execute(
                    "INSERT INTO problems VALUES (?, NULL, 'unreadable', NULL, NULL, ?)",
                    (key, error),
                )
                return
            self._insert(key, size, mtime_ns, audit)
        stats.indexed += 1
        stats.records += len(audit.checks)
        stats.failed_runs += 0 if audit.ok else 1

    def _insert(self, key: str, size: int, mtime_ns: int, audit: RunAudit) -> None:
        rows = []
        for row in timeline(audit):
            record, check = row.check.record, row.check
            rows.append(
                (
                    key, record.run_id, record.agent, record.step, record.kind,
                    getattr(record.payload, "tool", None), label_of(record), record.time,
                    check.logged_at_ms, check.index, check.digest, trust_of(record),
                    outcome_of(record), int(row.verified), row.why_not,
                    json.dumps(list(record.parent_digests)),
                )
            )  # fmt: skip
        marks = ", ".join("?" * len(_RECORD_COLUMNS))
        self.db.executemany(f"INSERT INTO records VALUES ({marks})", rows)
        self.db.executemany(
            "INSERT INTO problems VALUES (?, ?, ?, ?, ?, ?)",
            [
                (key, audit.run_id, p.code, p.step, p.record_digest, p.message)
                for p, _ in audit.problems
            ],
        )
        self.db.execute(
            "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (key, size, mtime_ns, audit.run_id, audit.agent, len(audit.checks),
             int(audit.ok), len(audit.problems)),
        )  # fmt: skip

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
            out.append(item)
        return out


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN")

    def __exit__(self, typ: object, exc: object, tb: object) -> None:
        self.db.execute("COMMIT" if typ is None else "ROLLBACK")
