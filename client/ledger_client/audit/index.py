"""An embedded SQLite index of verified runs, for queries across many runs.

docs/design.md "Who uses it": an auditor asks across runs (by agent, time, kind, tool, trust label,
outcome, verification status). ``ledger-verify index DIR --db audit.sqlite`` verifies every run
file under DIR (``ledger_client.audit.verify``: each receipt part by part, with checkpoint
signatures and anchor tokens verified once per distinct note/token across all runs, then the
run checks) and stores one row per record; ``ledger-verify query --db audit.sqlite`` filters.

Incremental: a file whose size and modification time (ns) are unchanged since it was indexed is
skipped; a changed file is re-verified and its rows replaced; rows of files that are gone are
deleted. The verification settings (keys, TSA roots, origin, witnesses) are fingerprinted; other
settings than last time re-index everything. A run that finds, at the start of one of its
transactions (its last one included), that another run with other settings has emptied the index
since stops there (``FormatError``: exit 2), storing or deleting nothing more. Rows are written in
transactions of ``_BATCH`` files (WAL journal): an interrupted index loses at most the files of the
open transaction, which the next run re-indexes, never a half-written file. Into an empty index (at
least ``_BULK`` files) the rows go first and the SQL indexes are built once at the end, each in one
sorted pass (an interrupted build gets them back when the index is next opened); such a build
commits with a rollback journal and ``synchronous=FULL`` (as atomic, each new page written once
instead of to the WAL and again to the file), then goes back to WAL (its indexes built reading the
file through a memory map). While indexing, the cyclic garbage collector sets aside what was loaded
before and runs its young collections less often (``_fewer_collections``).

Files are read with ``ledger_client.receipts.run_load.load_run`` (the reader of
``ledger-verify run``: what it refuses, the index refuses, and the file is listed unreadable;
a file of a newer schema version with the problem ``unsupported_schema_version``)
and verified by ``workers`` processes (default: one per core), each with its own
``ReceiptChecker`` and ``VerificationCache`` (``CacheSpec`` builds them), so each distinct
checkpoint and token is verified at most once per process.

Schema (``SCHEMA``, version ``VERSION`` in ``PRAGMA user_version``): ``files(path, size,
mtime_ns, run_id, agent, records, verified, problems, file_hash, verdict, id)``, ``records(id,
path, run_id, agent, step, kind, tool, label, time, logged_at_ms, log_index, record_digest,
trust_label, outcome, verified, why_not, parents, time_difference_ms, verdict, ...)``,
``terms(record, field, value)`` (``field``: the kind's code, ``TERM_FIELDS``), ``problems(path,
run_id, code, step, record_digest, message)`` and ``verdicts(id, text)``. Each file indexed gets
the next ``id``; its records' ids are that id times 2**32 plus their place in the file (so a
file's rows are deleted by an id range, and copies of a record are in the order their files were
stored), and ``terms`` holds a record's search terms (``record_terms``) by its id, less those a
``records`` column holds (``COLUMN_KINDS``). ``time`` is the agent's claimed time,
``logged_at_ms`` the log's leaf time and ``time_difference_ms`` the second minus the first;
``verdict`` is the id in ``verdicts`` of the record's verdict (``ledger_client.audit.verdicts``,
JSON text: receipt, run, time under the default time policy, lineage, signature with the given
agent keys, chain with the given chain verdicts) as the other views show it, and
``files.verdict`` that of the run's verdict: each distinct text is stored once (records share a
handful), each row names it by its id. A worker sends a file's rows naming its verdicts by their
place in the file's texts (``_Done``); the main process gives each text its id
(``AuditIndex._verdict_id``). An index of an older version is made again by ``index`` (derived
data: from the run files); ``query`` and the readers (``lineage_index.open_index``) refuse it,
and an index of a newer version is refused by all (``FormatError``: one line, exit 2).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cryptography import x509

from ledger.core.checkpoint import CosignatureVerifier
from ledger.core.errors import FormatError, UnsupportedSchemaError
from ledger.core.jcs import canonical_bytes
from ledger.core.note import Ed25519Verifier
from ledger.core.timefmt import parse_rfc3339
from ledger.records.commitments import Commitment
from ledger.records.decision import DecisionRecord, MemoryWrite, Plan, RunClosed, ToolCall
from ledger_client.audit.decision import plain_strings, tags_of, usage_of
from ledger_client.audit.lineage_index import (
    INDEX_TABLES,
    INDEX_VERSION,
    TERM_FIELDS,
    check_version,
)
from ledger_client.audit.timeline import TimelineRow, label_of, outcome_of, timeline, trust_of
from ledger_client.audit.verdicts import Check, TimePolicy, Verdict, run_checks
from ledger_client.audit.verify import audit_run
from ledger_client.receipts.run_load import load_run
from ledger_client.receipts.verify import ReceiptChecker

__all__ = [
    "COLUMN_KINDS",
    "DIGEST_KINDS",
    "GROUPS",
    "SCHEMA",
    "TERM_KINDS",
    "UNREADABLE",
    "UNSUPPORTED",
    "AuditIndex",
    "CacheSpec",
    "IndexStats",
    "content_digest",
    "record_terms",
    "term_condition",
]

_BATCH = 256  # files per transaction
_MIN_CONTENT = 8  # plain strings this long or longer are found by their content
_CHUNK = 16  # files per task sent to a worker process
_MMAP = 1 << 30  # bytes of the index read through a memory map during a bulk build
_BULK = 64  # files to index into an empty index that make it build its indexes at the end
# bytes per database page of a new index (SQLite's default 4,096): half the pages to allocate,
# write and link per row stored (rows of about 500 bytes, several terms each), about a tenth
# of the main process's CPU storing rows; reading is as fast (``lineage --db`` at 10,000 runs)
_PAGE = 8192

# ``PRAGMA user_version`` of an index this verifier makes. 2: records keyed by ``id`` (the file's
# ``id`` times 2**32 plus the record's place in it), terms by that id (WITHOUT ROWID), no index on
# ``records(path)``, ``terms(path)`` or ``files(file_hash)`` (deletion goes by id; no query used
# the others). 3: verdict texts in ``verdicts``, once each, ``records.verdict`` and
# ``files.verdict`` their ids (a quarter of the file, and of the main process's CPU storing rows,
# was the same three texts again and again); no ``records.file_hash`` (its file's, in ``files``);
# ``terms.field`` a small integer (``TERM_FIELDS``), not the kind's name. An index of another
# version is rebuilt by ``index`` (derived data) and refused by the readers (``check_version``).
VERSION = INDEX_VERSION
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS verdicts(
  id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS files(
  path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, run_id TEXT,
  agent TEXT, records INTEGER NOT NULL, verified INTEGER NOT NULL, problems INTEGER NOT NULL,
  file_hash TEXT NOT NULL, verdict INTEGER, id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS records(
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL, run_id TEXT NOT NULL, agent TEXT NOT NULL, step INTEGER NOT NULL,
  kind TEXT NOT NULL, tool TEXT, label TEXT NOT NULL, time TEXT NOT NULL,
  logged_at_ms INTEGER, log_index INTEGER NOT NULL, record_digest TEXT NOT NULL,
  trust_label TEXT, outcome TEXT, verified INTEGER NOT NULL, why_not TEXT,
  parents TEXT NOT NULL, time_difference_ms INTEGER, verdict INTEGER NOT NULL, model TEXT,
  trace_id TEXT, span_id TEXT, tokens INTEGER, cost REAL, cost_currency TEXT, duration_ms INTEGER);
CREATE TABLE IF NOT EXISTS terms(
  record INTEGER NOT NULL, field NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY(record, field, value)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS problems(
  path TEXT NOT NULL, run_id TEXT, code TEXT NOT NULL, step INTEGER, record_digest TEXT,
  message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS records_agent ON records(agent, logged_at_ms);
CREATE INDEX IF NOT EXISTS records_run ON records(run_id);
CREATE INDEX IF NOT EXISTS records_kind ON records(kind, tool);
CREATE INDEX IF NOT EXISTS records_time ON records(logged_at_ms);
CREATE INDEX IF NOT EXISTS records_trust ON records(trust_label, kind);
CREATE INDEX IF NOT EXISTS records_digest ON records(record_digest);
CREATE INDEX IF NOT EXISTS problems_path ON problems(path);
CREATE INDEX IF NOT EXISTS terms_value ON terms(value, field);
"""
# the verdict texts no row names (a file's rows replaced or removed left them)
_UNUSED_VERDICTS = (
    "DELETE FROM verdicts WHERE id NOT IN (SELECT verdict FROM records) "
    "AND id NOT IN (SELECT verdict FROM files WHERE verdict IS NOT NULL)"
)
# ``run_statuses`` beside the verdicts' statuses: files not read as runs, and of newer schemas
UNREADABLE, UNSUPPORTED = "unreadable", "unsupported"
_SHIFT = 32  # a record's id: its file's id << _SHIFT | its place in the file
_RECORD_COLUMNS = (
    "path", "run_id", "agent", "step", "kind", "tool", "label", "time", "logged_at_ms",
    "log_index", "record_digest", "trust_label", "outcome", "verified", "why_not", "parents",
    "time_difference_ms", "verdict", "model", "trace_id", "span_id", "tokens", "cost",
    "cost_currency", "duration_ms", "file_hash",
)  # fmt: skip
# a records row as ``_record_rows`` makes it: the verdict last (the place of its text in the
# file's ``_Done.verdicts``, then its id in ``verdicts``)
# (``query`` reads a record's ``file_hash`` from its file's row: ``_FILE_HASH``)
_ROW_COLUMNS = ("id", *(c for c in _RECORD_COLUMNS if c not in ("verdict", "file_hash")), "verdict")
_FILE_HASH = "(SELECT f.file_hash FROM files f WHERE f.path = records.path)"
_INSERT_RECORD = (
    f"INSERT INTO records({', '.join(_ROW_COLUMNS)}) VALUES ({', '.join('?' * len(_ROW_COLUMNS))})"
)
_FILE_VERDICT = 9  # the place of the verdict in a files row
# The kinds of term a record is found by (``terms.field``), as ``query`` names them.
DIGEST_KINDS = ("record", "parent", "evidence", "input", "output", "commitment")
TERM_KINDS = (*DIGEST_KINDS, "param", "tag", "model", "agent", "trace", "span", "content")
# Kinds of term a ``records`` column holds (the column), not stored again in ``terms``: ``query``
# finds a record by its own digest through ``record_digest`` (``term_condition``).
COLUMN_KINDS = {"record": "record_digest", "model": "model", "trace": "trace_id", "span": "span_id"}


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
    terms: list[tuple[int, int | str, str]]  # (record id, field (``TERM_FIELDS``), value)
    verdicts: list[str]  # the file's distinct verdict texts: rows name them by their place
    ok: bool
    readable: bool
    checks: tuple[int, int]  # checkpoints and tokens verified for this file


_CHECKER: list[ReceiptChecker] = []  # the worker's checker and cache (one per process)
_POLICY: list[TimePolicy] = [TimePolicy()]  # the worker's policy (agent keys, chain verdicts)


def _start_worker(spec: CacheSpec, trust: tuple[tuple[str, ...], Mapping[str, Check]]) -> None:
    """``trust``: the agent keys (vkey strings: picklable) and the chain verdicts by run id."""
    _CHECKER[:] = [spec.build()]
    agents = tuple(Ed25519Verifier.from_key_string(k) for k in trust[0])
    _POLICY[:] = [TimePolicy(agent_keys=agents, chains=dict(trust[1]))]


def _start_pool_worker(spec: CacheSpec, trust: tuple[tuple[str, ...], Mapping[str, Check]]) -> None:
    """A worker process's start: ``_start_worker``, then the collector as ``_fewer_collections``
    sets it (for the process's life: it only indexes)."""
    _start_worker(spec, trust)
    gc.freeze()
    before = gc.get_threshold()
    gc.set_threshold(max(_YOUNG, before[0]), *before[1:])


_YOUNG = 20_000  # container allocations between young collections while indexing (default 700)


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """While indexing, what was loaded before (modules, the checker) is set aside from the
    cyclic collector (``gc.freeze``) and the young generation is collected every ``_YOUNG``
    container allocations instead of 700: indexing makes millions of short-lived containers
    (parsed JSON, records, rows), freed by their reference counts, which the default would scan
    again and again (about 3 % of a worker's CPU). Only when collections run changes; what is
    collected, and every answer, is the same. A caller's own settings win where they collect
    less often (mypy's API, for one, sets 200,000), and objects it froze stay frozen."""
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    gc.freeze()
    gc.set_threshold(max(_YOUNG, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if not frozen:  # unfreeze() thaws every frozen object, the caller's too
            gc.unfreeze()


def _audit_file(job: tuple[str, int, int, int]) -> _Done:
    key, size, mtime_ns, number = job
    checker = _CHECKER[0]
    stats = checker.cache.stats
    before = (stats["checkpoints"], stats["tokens"])
    try:
        data = Path(key).read_bytes()  # read once: hashed, then its lines read
        file_hash = hashlib.sha256(data).hexdigest()
        audit = audit_run(load_run(key, data), checker)
        if len(audit.checks) >> _SHIFT:  # its records' ids would reach the next file's
            raise FormatError(f"{key}: {len(audit.checks)} records (at most 2**{_SHIFT})")
    except (FormatError, OSError) as exc:
        code = "unsupported_schema_version" if isinstance(exc, UnsupportedSchemaError) else None
        problem = (key, None, code or "unreadable", None, None, str(exc))
        row: tuple[Any, ...] = (key, size, mtime_ns, None, None, 0, 0, 1, "", None, number)
        return _Done(key, size, mtime_ns, row, [], [problem], [], [], False, False, (0, 0))
    used = (stats["checkpoints"] - before[0], stats["tokens"] - before[1])
    rows = timeline(audit, _POLICY[0])
    verdict = run_checks(audit, [(r.check, r.verdict) for r in rows])
    problems = [
        (key, audit.run_id, p.code, p.step, p.record_digest, p.message) for p, _ in audit.problems
    ]
    records, terms, texts = _record_rows(key, rows, number << _SHIFT)
    texts.append(_verdict_text(verdict))  # the run's verdict: the last text
    row = (key, size, mtime_ns, audit.run_id, audit.agent, len(audit.checks), int(audit.ok),
           len(audit.problems), file_hash, len(texts) - 1, number)  # fmt: skip
    return _Done(
        key, size, mtime_ns, row, records, problems, terms, texts, audit.ok, True, used
    )  # fmt: skip


def _record_rows(
    key: str, rows: Sequence[TimelineRow], first: int
) -> tuple[list[tuple[Any, ...]], list[tuple[int, int | str, str]], list[str]]:
    """The records rows of a file (ids from ``first`` on; ``_ROW_COLUMNS``), their terms and
    the distinct verdict texts the rows name (each row its verdict's place in them)."""
    records = []
    terms: list[tuple[int, int | str, str]] = []
    texts: list[str] = []
    places: dict[str, int] = {}  # a verdict text -> its place in ``texts``
    code = TERM_FIELDS.get  # a term's kind as stored
    shown: dict[int, tuple[int, int, str | None]] = {}  # id(verdict) -> its stored columns
    for rid, row in enumerate(rows, first):
        record, check = row.check.record, row.check
        tokens, cost, currency, duration = usage_of(record)
        otel = record.otel
        verdict = row.verdict
        columns = shown.get(id(verdict))  # the rows keep each verdict alive: ids are unique
        if columns is None:
            text = _verdict_text(verdict)
            place = places.get(text)
            if place is None:
                place = places[text] = len(texts)
                texts.append(text)
            columns = shown[id(verdict)] = (place, int(row.verified), row.why_not)
        parents = record.parent_digests  # hex digests: their JSON list written directly
        records.append(
            (
                rid, key, record.run_id, record.agent, record.step, record.kind,
                getattr(record.payload, "tool", None), label_of(record), record.time,
                check.logged_at_ms, check.index, check.digest, trust_of(record),
                outcome_of(record), columns[1], columns[2],
                '["' + '", "'.join(parents) + '"]' if parents else "[]",
                _difference_ms(record.time, check.logged_at_ms), record.model,
                otel.trace_id if otel else None, otel.span_id if otel else None,
                tokens, cost, currency, duration, columns[0],
            )
        )  # fmt: skip
        terms += [(rid, code(f, f), v) for f, v in record_terms(record, check.digest, stored=True)]
    return records, terms, texts


_TEXTS: dict[Verdict, str] = {}  # a worker's verdicts as stored (records share a handful)
# The same texts by the identities of the verdict's checks (records share most of their
# ``Check`` values: a verdict made of the very same checks has the same text), each with the
# checks, kept alive so that no other object takes their ids while they are keys. Found first:
# a verdict's hash hashes every check (each a dataclass ``__hash__`` in Python).
_BY_CHECKS: dict[tuple[int, ...], tuple[tuple[Check, ...], str]] = {}


def _verdict_text(verdict: Verdict) -> str:
    """The verdict's JSON text, written once per distinct verdict (a frozen value)."""
    checks = verdict.checks
    ids = tuple(map(id, checks))
    kept = _BY_CHECKS.get(ids)
    if kept is not None:
        return kept[1]
    text = _TEXTS.get(verdict)
    if text is None:
        if len(_TEXTS) >= 4096:
            _TEXTS.clear()
        text = _TEXTS[verdict] = json.dumps(verdict.to_json_obj())
    if len(_BY_CHECKS) >= 4096:
        _BY_CHECKS.clear()
    _BY_CHECKS[ids] = (checks, text)
    return text


@lru_cache(maxsize=4096)
def _claimed_ms(claimed: str) -> int | None:
    try:
        return int(parse_rfc3339(claimed).timestamp() * 1000)
    except ValueError:
        return None


def _difference_ms(claimed: str, leaf_ms: int | None) -> int | None:
    """``time_json(...)["difference_ms"]``: the leaf time minus the claimed time (records of
    a run often claim the same few times: each parsed once)."""
    at = _claimed_ms(claimed)
    return None if leaf_ms is None or at is None else leaf_ms - at


def _commitments(value: object) -> Iterator[str]:
    if isinstance(value, Commitment):
        yield value.digest.hex()
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _commitments(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _commitments(item)


_LEAVES = (int, float, bool, type(None))


def _scan(value: object, commitments: list[str], texts: list[str] | None) -> None:
    """One walk for ``_commitments`` (into ``commitments``) and, unless None, ``plain_strings``
    (into ``texts``), in their order; exact built-in types first."""
    kind = type(value)
    if kind is str:
        if texts is not None:
            texts.append(value)  # type: ignore[arg-type]
    elif kind is dict:
        for item in value.values():  # type: ignore[attr-defined]
            inner = type(item)  # the usual members read here, the rest walked
            if inner is str:
                if texts is not None:
                    texts.append(item)
            elif inner is Commitment:
                commitments.append(item.digest.hex())
            elif inner not in _LEAVES:
                _scan(item, commitments, texts)
    elif kind is list or kind is tuple:
        for item in value:  # type: ignore[attr-defined]
            _scan(item, commitments, texts)
    elif kind is Commitment:
        commitments.append(value.digest.hex())  # type: ignore[attr-defined]
    elif kind not in _LEAVES:
        commitments += _commitments(value)
        if texts is not None:
            texts += plain_strings(value)


def _scalar(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


def record_terms(
    record: DecisionRecord, digest: str, *, stored: bool = False
) -> list[tuple[str, str]]:
    """(kind, value) of every term the record is found by (module docstring); ``stored``: less
    those a ``records`` column holds (``COLUMN_KINDS``), the ``terms`` rows of the record."""
    out = [] if stored else [("record", digest)]
    if record.parent_digests:
        out += [("parent", p) for p in record.parent_digests]
    if record.evidence:
        out += [("evidence", d) for d in record.evidence.values()]
    payload = record.payload
    if type(payload) is ToolCall:
        if payload.inputs_used:
            out += [("input", d) for d in payload.inputs_used]
        if payload.outputs_generated:
            out += [("output", d) for d in payload.outputs_generated]
    commitments: list[str] = []
    texts: list[str] = []
    # parameters, candidate actions, expected and actual outcome, a memory write's value; a
    # plan's steps (commitments only): in this order (a run_closed's steps hold neither)
    expected, actual = record.expected_outcome, record.actual_outcome
    if record.parameters:
        _scan(record.parameters, commitments, texts)
    if record.candidates:
        _scan([c.action for c in record.candidates], commitments, texts)
    if expected is not None:
        _scan(expected, commitments, texts)
    if actual is not None:
        _scan(actual, commitments, texts)
    if type(payload) is MemoryWrite:
        _scan(payload.value, commitments, texts)
    elif type(payload) is Plan:
        _scan(payload.steps, commitments, None)
    elif type(payload) is not RunClosed:  # a payload type added later: scanned as before
        _scan(getattr(payload, "value", None), commitments, texts)
        _scan(getattr(payload, "steps", None), commitments, None)
    if commitments:
        out += [("commitment", c) for c in commitments]
    for params in (record.parameters, record.model_parameters):
        if params:
            for name, value in params.items():
                kind = type(value)
                if kind is str:
                    out.append(("param", f"{name}={value}"))
                elif kind is not dict and kind is not list and kind is not Commitment:
                    shown = _scalar(value)  # a number, true or false (or a subclass)
                    if shown is not None:
                        out.append(("param", f"{name}={shown}"))
    tags = tags_of(record)
    if tags:
        out += [("tag", t) for t in tags]
    if not stored:
        if record.model:
            out.append(("model", record.model))
        if record.otel is not None:
            out += [("trace", record.otel.trace_id), ("span", record.otel.span_id)]
    # plain strings only (``plain_strings``): commitments hide their content
    if texts:
        out += [("content", content_digest(t)) for t in texts if len(t) >= _MIN_CONTENT]
    if actual is not None or expected is not None:
        for whole in (actual, expected):
            if whole is not None and not isinstance(whole, str) and not _has_commitment(whole):
                out.append(("content", content_digest(whole)))
    return out


def _has_commitment(value: object) -> bool:
    return next(_commitments(value), None) is not None


def content_digest(value: object) -> str:
    """SHA-256 of the RFC 8785 bytes of a JSON value: the SDK's digest of a captured value
    (``ledger_client.sdk.capture.content_digest``) for plain JSON."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


class AuditIndex:
    """The SQLite file at ``db`` (created when missing); use as a context manager. An index
    of another ``VERSION`` is refused (``FormatError``), or with ``rebuild`` (``index``) and
    older, emptied and made again."""

    def __init__(self, db: str | Path, *, rebuild: bool = False) -> None:
        try:
            if str(db) != ":memory:":  # private to the auditor: created 0600 (owner only)
                os.close(os.open(db, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
            self.db = sqlite3.connect(str(db), isolation_level=None)
            self._verdict_ids: dict[str, int] = {}  # verdict text -> its id (``index``)
            self._fingerprint = ""  # the settings ``index`` stores under
            try:
                if check_version(self.db, db, older=rebuild):
                    version = self.db.execute("PRAGMA user_version").fetchone()[0]
                    if version != VERSION:  # made by an older verifier: rebuilt
                        for table in INDEX_TABLES:
                            self.db.execute(f"DROP TABLE IF EXISTS {table}")
            except FormatError:
                self.db.close()
                raise
            self.db.execute(f"PRAGMA page_size = {_PAGE}")  # a new file's only (empty, no WAL)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
            self.db.execute(f"PRAGMA user_version = {VERSION}")
        except sqlite3.DatabaseError as exc:
            raise FormatError(f"{db}: not an audit index ({exc})") from None
        except OSError as exc:
            raise FormatError(f"{db}: cannot open ({exc.strerror})") from None

    def __enter__(self) -> AuditIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.db.close()

    def _settings_are(self, fingerprint: str) -> bool:
        """Whether the index was made under the verification settings ``fingerprint``."""
        row = self.db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
        return row is not None and bool(row[0] == fingerprint)

    def _settings(self, fingerprint: str) -> None:
        if self._settings_are(fingerprint):
            return
        with _Transaction(self.db):
            for table in ("files", "records", "problems", "terms", "verdicts"):
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
        agent_keys: Sequence[str] = (),
        chains: Mapping[str, Check] | None = None,
    ) -> tuple[IndexStats, dict[str, int]]:
        """Verify and index ``runs`` (module docstring) with ``workers`` processes; the stats
        and how many distinct checkpoints and tokens were verified. ``agent_keys`` (vkeys) and
        ``chains`` (run id -> chain check, ``ledger_client.audit.chain``) go into the stored
        verdicts; ``fingerprint`` must cover them."""
        trust = (tuple(agent_keys), dict(chains or {}))
        self._settings(fingerprint)
        self._fingerprint = fingerprint
        stats = IndexStats()
        known = {
            path: (size, mtime)
            for path, size, mtime in self.db.execute("SELECT path, size, mtime_ns FROM files")
        }
        todo = []
        number = self.db.execute("SELECT max(id) FROM files").fetchone()[0] or 0
        for path in dict.fromkeys(runs):  # each file once, even when given twice
            stat = path.stat()
            if known.get(str(path)) == (stat.st_size, stat.st_mtime_ns):
                stats.skipped += 1
            else:  # each file indexed gets the next id (its records' ids follow from it)
                number += 1
                todo.append((str(path), stat.st_size, stat.st_mtime_ns, number))
        verified = {"checkpoints": 0, "tokens": 0}
        bulk = not known and len(todo) >= _BULK
        if bulk:  # a new index: rows first, then each index sorted in one pass
            self._journal(bulk=True)
            for (name,) in self.db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
            ).fetchall():
                self.db.execute(f"DROP INDEX {name}")
        with _fewer_collections():
            for n, done in enumerate(self._audit(todo, spec, workers, trust), 1):
                commit = n % _BATCH == 0 or n == len(todo)
                self._store(done, stats, verified, commit=commit, fresh=bulk)
                if progress is not None:
                    progress(stats.skipped + n)
        if bulk:
            self.db.executescript(SCHEMA)
            self._journal(bulk=False)
        present = {str(r) for r in runs}
        gone = [p for p in known if p not in present]
        with _Transaction(self.db, immediate=True):
            self._check_settings()  # else the paths gone here could be another run's rows
            for path in gone:
                self._delete(path)
            if known:  # rows replaced or removed: the texts no row names any more go too
                self.db.execute(_UNUSED_VERDICTS)
        stats.removed = len(gone)
        return stats, verified

    def _journal(self, *, bulk: bool) -> None:
        """A bulk build into an empty index commits with a rollback journal (``synchronous``
        FULL): its new pages are written once, not to the WAL and again to the file; each
        transaction is as atomic as under WAL. Then back to WAL. A journal mode another
        connection keeps (it cannot change then) is left as it is. While bulk, the file is
        also read through a memory map (``_MMAP`` bytes): the indexes built at the end read
        every table page, without a copy per page read (a quarter of the build's CPU)."""
        mode, synchronous = ("DELETE", "FULL") if bulk else ("WAL", "NORMAL")
        self.db.execute(f"PRAGMA mmap_size={_MMAP if bulk else 0}")
        try:
            self.db.execute(f"PRAGMA journal_mode={mode}")
        except sqlite3.OperationalError:
            return
        self.db.execute(f"PRAGMA synchronous={synchronous}")

    def _audit(
        self,
        todo: list[tuple[str, int, int, int]],
        spec: CacheSpec,
        workers: int,
        trust: tuple[tuple[str, ...], Mapping[str, Check]],
    ) -> Iterator[_Done]:
        if workers <= 1 or len(todo) < 2 * _CHUNK:
            _start_worker(spec, trust)
            yield from map(_audit_file, todo)
            return
        initargs = (spec, trust)
        with ProcessPoolExecutor(
            workers, initializer=_start_pool_worker, initargs=initargs
        ) as pool:
            yield from pool.map(_audit_file, todo, chunksize=_CHUNK)

    def _store(
        self,
        done: _Done,
        stats: IndexStats,
        verified: dict[str, int],
        *,
        commit: bool,
        fresh: bool = False,
    ) -> None:
        """Replace the rows of ``done``'s file (``fresh``: the index held no file before
        this call, so there are none to delete)."""
        if not self.db.in_transaction:  # the write lock first, then the ids it may name
            self.db.execute("BEGIN IMMEDIATE")
            self._check_settings()
            self._verdict_ids = dict(self.db.execute("SELECT text, id FROM verdicts"))
        if not fresh:
            self._delete(done.key)
        file_row, records = done.file_row, done.records
        if done.verdicts:  # the rows' places in the file's verdict texts -> the texts' ids
            ids = [self._verdict_id(text) for text in done.verdicts]
            at = _FILE_VERDICT
            file_row = (*file_row[:at], ids[file_row[at]], *file_row[at + 1 :])
            records = [(*r[:-1], ids[r[-1]]) for r in records]
        self.db.execute("INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", file_row)
        self.db.executemany(_INSERT_RECORD, records)
        if done.problems:
            self.db.executemany("INSERT INTO problems VALUES (?, ?, ?, ?, ?, ?)", done.problems)
        # a record naming one value twice under one kind (a tag, a content digest) keeps one
        self.db.executemany("INSERT OR IGNORE INTO terms VALUES (?, ?, ?)", done.terms)
        if commit:
            self.db.execute("COMMIT")
        stats.indexed += done.readable
        stats.unreadable += not done.readable
        stats.records += len(done.records)
        stats.failed_runs += done.readable and not done.ok
        verified["checkpoints"] += done.checks[0]
        verified["tokens"] += done.checks[1]

    def _check_settings(self) -> None:
        """Under the write lock: refuse to go on when another ``index`` run with other settings
        has emptied the index since this run's last transaction (rows stored now would be
        verified under settings the index no longer names)."""
        if not self._settings_are(self._fingerprint):
            self.db.execute("ROLLBACK")
            raise FormatError(
                "another `index` run with other settings (keys, TSA roots, origin, witnesses, "
                "agent keys or chain) emptied this index while this one ran; what this run "
                "stored since is gone with it: run it again once the other is done"
            )

    def _verdict_id(self, text: str) -> int:
        """The id of a verdict text in ``verdicts`` (stored once: added when new). The ids
        known are read again as each transaction starts, under its write lock (another
        ``index`` of the same file may have added or removed texts in between), and an id is
        never given twice (``AUTOINCREMENT``): a reader never finds another text under it."""
        found = self._verdict_ids.get(text)
        if found is None:
            cursor = self.db.execute("INSERT INTO verdicts(text) VALUES (?)", (text,))
            found = self._verdict_ids[text] = int(cursor.lastrowid or 0)
        return found

    def _delete(self, path: str) -> None:
        """The rows of the file ``path``: its records and terms by their ids' range."""
        row = self.db.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
        if row is not None:
            first = row[0] << _SHIFT
            last = first + (1 << _SHIFT) - 1
            self.db.execute("DELETE FROM records WHERE id BETWEEN ? AND ?", (first, last))
            self.db.execute("DELETE FROM terms WHERE record BETWEEN ? AND ?", (first, last))
        for table in ("files", "problems"):
            self.db.execute(f"DELETE FROM {table} WHERE path = ?", (path,))

    def query(
        self, where: Sequence[tuple[str, Sequence[object]]], limit: int
    ) -> list[dict[str, Any]]:
        """Records matching every ``(SQL condition, its ? values)``, oldest first; a record in
        several files (copies of one run) is one row, ``copies`` naming how many files hold it
        (``path`` the first)."""
        clause, values = _where(where)
        read = ", ".join(_FILE_HASH if c == "file_hash" else c for c in _RECORD_COLUMNS)
        cursor = self.db.execute(
            f"SELECT {read}, COUNT(DISTINCT path) FROM records "
            f"WHERE {clause} GROUP BY record_digest ORDER BY logged_at_ms, log_index LIMIT ?",
            [*values, limit],
        )
        out = []
        verdicts: dict[int, Any] = {}  # a verdict's id -> its text read (rows share a few)
        for row in cursor:
            item = dict(zip((*_RECORD_COLUMNS, "copies"), row, strict=True))
            item["verified"] = bool(item["verified"])
            item["parents"] = json.loads(item["parents"])
            found = verdicts.get(item["verdict"])
            if found is None:
                found = verdicts[item["verdict"]] = json.loads(self._verdict_text(item["verdict"]))
            item["verdict"] = found
            out.append(item)
        return out

    def _verdict_text(self, verdict: int) -> str:
        """The text of the verdict ``verdict`` (its id; an id with no text: ``FormatError``)."""
        row = self.db.execute("SELECT text FROM verdicts WHERE id = ?", (verdict,)).fetchone()
        if row is None:
            raise FormatError(f"the index holds no verdict {verdict!r}; make it again")
        return str(row[0])

    def count_by(
        self, where: Sequence[tuple[str, Sequence[object]]], by: str
    ) -> list[dict[str, Any]]:
        """Matching records (each once, copies of a run counted once) grouped by ``by`` (a
        ``GROUPS`` name): per group the records, runs, and the token, cost and duration sums."""
        clause, values = _where(where)
        if by == "tag":
            source = (  # a record's copies have the same tags: those of the row taken
                f"SELECT r.*, t.value AS tag FROM (SELECT * FROM records WHERE {clause} "
                "GROUP BY record_digest) r JOIN terms t ON t.record = r.id "
                f"AND t.field = {TERM_FIELDS['tag']} GROUP BY r.record_digest, t.value"
            )
            key = "tag"
        else:
            key = GROUPS[by]
            source = f"SELECT * FROM records WHERE {clause} GROUP BY record_digest"
        cursor = self.db.execute(
            f"SELECT {key}, COUNT(*), COUNT(DISTINCT run_id), SUM(tokens), SUM(cost), "
            f"GROUP_CONCAT(DISTINCT cost_currency), SUM(duration_ms) FROM ({source}) "
            "GROUP BY 1 ORDER BY 2 DESC, 1",
            values,
        )
        return [
            {"value": v, "records": n, "runs": runs, "tokens": tokens,
             "cost": None if cost is None else round(cost, 9), "currency": currency,
             "duration_ms": ms}
            for v, n, runs, tokens, cost, currency, ms in cursor
        ]  # fmt: skip

    def run_statuses(self) -> list[tuple[str, str]]:
        """(path, status) of every file the index holds, by path: the status of its stored
        run verdict (``verdicts.STATUSES``), ``UNREADABLE`` for a file that could not be read
        as a run, ``UNSUPPORTED`` for one of a schema version newer than this tool."""
        cursor = self.db.execute(
            "SELECT path, json_extract(v.text, '$.status'), f.verdict IS NULL AND EXISTS(SELECT "
            "1 FROM problems p WHERE p.path = f.path AND p.code = 'unsupported_schema_version') "
            "FROM files f LEFT JOIN verdicts v ON v.id = f.verdict ORDER BY path"
        )
        return [
            (path, UNSUPPORTED if newer else UNREADABLE if status is None else status)
            for path, status, newer in cursor
        ]

    def stored_runs(self, fingerprint: str) -> dict[str, tuple[str, int, int, str, str | None]]:
        """path -> (file hash, size, mtime_ns, run verdict JSON, run id) of the files indexed
        under the trust inputs ``fingerprint`` (empty when the index was made under others)."""
        if not self._settings_are(fingerprint):
            return {}
        return {
            path: (file_hash, size, mtime, verdict or "", run_id)
            for path, file_hash, size, mtime, verdict, run_id in self.db.execute(
                "SELECT path, file_hash, size, mtime_ns, v.text, run_id FROM files f "
                "LEFT JOIN verdicts v ON v.id = f.verdict WHERE file_hash != ''"
            )
        }


# ``query --count-by`` names -> the records column they group by.
GROUPS = {
    "agent": "agent", "model": "model", "kind": "kind", "tool": "tool", "outcome": "outcome",
    "run": "run_id", "status": "verified", "trust": "trust_label", "tag": "tag",
    "trace": "trace_id",
}  # fmt: skip


def term_condition(kinds: Sequence[str], values: Sequence[str]) -> tuple[str, list[object]]:
    """The SQL condition (and its values) on ``records`` for "a term of one of ``kinds`` has
    one of ``values``": the digests of the records with such ``terms`` rows, and with the kind
    ``record`` the values themselves (``COLUMN_KINDS``; other column kinds are not asked
    here: ``query`` filters their columns)."""
    stored = [k for k in kinds if k != "record"]
    wanted = ", ".join("?" * len(values))
    parts: list[str] = []
    args: list[object] = []
    if stored:
        parts.append(
            "SELECT r.record_digest FROM terms t CROSS JOIN records r ON r.id = t.record "
            f"WHERE t.field IN ({', '.join('?' * len(stored))}) AND t.value IN ({wanted})"
        )
        args += [*(TERM_FIELDS.get(k, k) for k in stored), *values]
    if len(stored) < len(kinds):
        parts.append(f"VALUES {', '.join('(?)' for _ in values)}")
        args += values
    return f"record_digest IN ({' UNION ALL '.join(parts)})", args


def _where(where: Sequence[tuple[str, Sequence[object]]]) -> tuple[str, list[object]]:
    clause = " AND ".join(cond for cond, _ in where) or "1"
    return clause, [value for _, group in where for value in group]


class _Transaction:
    """``BEGIN`` (``immediate``: with the write lock at once) ... ``COMMIT``, or ``ROLLBACK``
    on an exception (unless the transaction was already rolled back)."""

    def __init__(self, db: sqlite3.Connection, *, immediate: bool = False) -> None:
        self.db = db
        self.begin = "BEGIN IMMEDIATE" if immediate else "BEGIN"

    def __enter__(self) -> None:
        self.db.execute(self.begin)

    def __exit__(self, typ: object, exc: object, tb: object) -> None:
        if typ is None:
            self.db.execute("COMMIT")
        elif self.db.in_transaction:
            self.db.execute("ROLLBACK")
