"""``ledger-verify index`` and ``query``: many runs in an embedded SQLite database.

* ``index DIR... --db audit.sqlite --key VKEY [--tsa-root PEM ...]``: verify and index every
  run file under DIR (``ledger_client.audit.index``; incremental). Prints what it did. The
  index is written either way; the exit code is what it holds, as for ``report``: 0 when every
  run in it verified, 1 when some did not (or could not be read: listed as ``failing_runs``;
  ``query --status failed`` gives their records), 3 when the only failures are anchors still
  pending, 4 when the rest are files of a newer schema version, 2 on bad input.
  ``--agent-key VKEY`` (repeatable) checks every record's signature and
  ``--tiles URL --chain-key HEX`` each run's place in its agent's chain
  (``ledger_client.audit.chain``); both go into the stored verdicts and the trust inputs.
* ``query --db audit.sqlite [--agent A] [--run R] [--kind K] [--tool T] [--since T]
  [--until T] [--trust LABEL] [--outcome O] [--status verified|failed] [--limit N] [--json]``:
  matching records, oldest first (by the log's time), as a table or one JSON object. Times are
  RFC 3339 (``2026-11-30T08:00:00Z``) and compare with the log's time from the leaf.
  Also by what a record carries: ``--digest HEX [--digest-kind record|parent|evidence|input|
  output|commitment]``, ``--param NAME=VALUE``, ``--tag``, ``--model``, ``--trace-id``,
  ``--span-id``; by content: ``--text TEXT`` or ``--file F`` (its digests as the SDK takes
  them, matched against inputs, outputs, evidence and plain values; with ``--disclosures FILE``
  also the committed values that file opens to it). A record held by several files (copies of
  one run) is one row with ``copies``. ``--count-by agent|model|kind|tool|outcome|run|status|
  trust|tag|trace``: counts per group with token, cost and duration sums.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

import click
from cryptography.hazmat.primitives.serialization import Encoding

from ledger.core.errors import FormatError
from ledger.core.timefmt import parse_rfc3339
from ledger_client.audit.index import (
    DIGEST_KINDS,
    GROUPS,
    UNSUPPORTED,
    AuditIndex,
    CacheSpec,
    content_digest,
    term_condition,
)
from ledger_client.audit.run_files import run_paths
from ledger_client.audit.verdicts import OK, PENDING, WARNING, format_delta
from ledger_client.audit.verify import iso_ms
from ledger_client.cli.agent import (
    agent_verifiers,
    chain_options,
    chain_verdicts,
    refuse_confusable,
)
from ledger_client.cli.audit import _fail as fail
from ledger_client.cli.audit import make_checker, trust_fingerprint, verification_options
from ledger_client.clikit.errors import EXIT_PENDING, EXIT_UNSUPPORTED
from ledger_client.clikit.outcome import PENDING as PENDING_STATUS
from ledger_client.clikit.outcome import UNSUPPORTED as UNSUPPORTED_STATUS
from ledger_client.clikit.outcome import Outcome, finish, json_option
from ledger_client.receipts.disclose import load_private_disclosures

__all__ = ["COMMANDS", "index", "query"]


_LISTED = 20  # failing runs named in the text answer (``--json`` names them all)


def _progress(total: int) -> Any:
    if not sys.stderr.isatty():
        return None
    return lambda n: click.echo(f"\rindexed {n}/{total}", err=True, nl=n == total)


def _resolved(paths: Iterable[Path]) -> list[Path]:
    """``[p.resolve() for p in paths]``, each folder resolved once: a path that is not a
    symbolic link resolves to its folder's resolved path and its own name (10,000 run files:
    one ``lstat`` each, not one per part of the path)."""
    folders: dict[Path, Path] = {}
    out = []
    for path in paths:
        if path.name in ("", ".", "..") or path.is_symlink():
            out.append(path.resolve())
            continue
        parent = path.parent
        at = folders.get(parent)
        if at is None:
            at = folders[parent] = parent.resolve()
        out.append(at / path.name)
    return out


@click.command("index")
@click.argument("dirs", nargs=-1, required=True, metavar="DIR...")
@click.option("--db", required=True, metavar="FILE", help="the SQLite index (created if missing)")
@verification_options
@click.option("--workers", type=click.IntRange(0, 64), default=0,
              help="processes verifying files (default 0: one per core)")  # fmt: skip
@click.option("--agent-key", "agent_keys", multiple=True, metavar="VKEY",
              help="agent key: every record must be signed by one; repeat")  # fmt: skip
@chain_options
@json_option
def index(
    dirs: tuple[str, ...],
    db: str,
    keys: tuple[str, ...],
    roots: tuple[str, ...],
    origin: str | None,
    witnesses: tuple[str, ...],
    workers: int,
    agent_keys: tuple[str, ...],
    tiles: str | None,
    chain_key: str | None,
    as_json: bool,
) -> None:
    """Verify and index the run files under DIR into an SQLite database (incrementally)."""

    def check() -> Outcome:
        checker = make_checker(keys, roots, origin, witnesses)  # checks the options (exit 2)
        spec = CacheSpec(
            keys=tuple(keys),
            roots_der=tuple(c.public_bytes(Encoding.DER) for c in checker.tsa_roots),
            origin=origin,
            witnesses=tuple(witnesses),
        )
        agents = agent_verifiers(agent_keys)
        refuse_confusable(agents, origin, [k.split("+", 1)[0] for k in keys], [
            w.split("+", 1)[0] for w in witnesses])  # fmt: skip
        paths = _resolved(run_paths(dirs))
        chains, scan, size = chain_verdicts(
            [str(p) for p in paths], tiles, chain_key, keys, origin, skip_unreadable=True
        )
        scanned = None if tiles is None or chain_key is None or size is None else (
            chain_key.strip().lower(), tiles, size)  # fmt: skip
        fingerprint = trust_fingerprint(
            keys, roots, origin, witnesses, agent_keys=agent_keys, chain=scanned
        )
        with AuditIndex(db, rebuild=True) as store:  # an older index: made again
            stats, verified = store.index(
                paths,
                spec,
                fingerprint=fingerprint,
                workers=workers or os.cpu_count() or 1,
                progress=_progress(len(paths)),
                agent_keys=agent_keys,
                chains=chains,
            )
            statuses = store.run_statuses()
        failing = [path for path, status in statuses if status not in (OK, WARNING)]
        worst = {status for _, status in statuses if status not in (OK, WARNING)}
        details: dict[str, Any] = {**stats.to_json_obj(), "db": db, **verified}
        details |= {"runs": len(statuses), "failing_runs": failing}
        lines = [
            f"runs: {stats.indexed} indexed, {stats.skipped} unchanged, {stats.removed} removed, "
            f"{stats.unreadable} unreadable",
            f"records indexed: {stats.records}; runs not verified: {stats.failed_runs}",
            f"distinct checkpoints verified: {verified['checkpoints']}, "
            f"anchor tokens verified: {verified['tokens']}",
        ]
        if scan is not None:
            details["chain_scan"] = {"tree_size": size, **scan.to_json_obj()}
            lines += ["chains (from the log's tiles):", *scan.lines()]
        if failing:  # the index is written; what it holds is not all verified
            shown = [f"  {path}" for path in failing[:_LISTED]]
            more = len(failing) - len(shown)
            lines += [
                "runs in the index not verified (query --status failed lists their records):",
                *shown, *([f"  ... and {more} more (--json lists them all)"] if more else []),
            ]  # fmt: skip
            of = f"{len(failing)} of {len(statuses)} run(s) in the index"
            if worst == {PENDING}:
                fail("index", as_json, f"{of}: anchors pending (nothing else failed)",
                     {**details, "status": PENDING_STATUS}, lines, code=EXIT_PENDING,
                     head="ANCHORS PENDING")  # fmt: skip
            if worst <= {PENDING, UNSUPPORTED}:  # newer input is never reported as invalid
                fail("index", as_json, f"{of}: unsupported schema version (nothing failed)",
                     {**details, "status": UNSUPPORTED_STATUS}, lines, code=EXIT_UNSUPPORTED,
                     head="UNSUPPORTED")  # fmt: skip
            fail("index", as_json, f"{of} not verified", details, lines)
        return Outcome("index", details, lines)

    finish("index", as_json, check)


def _time_ms(value: str, option: str) -> int:
    try:
        moment = parse_rfc3339(value)
    except ValueError as exc:
        raise click.BadParameter(f"{option} {value!r}: {exc}") from None
    return int(moment.timestamp() * 1000)


def _filters(options: dict[str, Any]) -> list[tuple[str, list[object]]]:
    """(SQL condition, its values) for every filter given."""
    where: list[tuple[str, list[object]]] = []
    for name, column in (("agent", "agent"), ("run", "run_id"), ("kind", "kind"),
                         ("trust", "trust_label")):  # fmt: skip
        if options[name] is not None:
            where.append((f"{column} = ?", [options[name]]))
    if (tool := options["tool"]) is not None:
        where.append(("(tool = ? OR label = ?)", [tool, tool]))
    if (outcome := options["outcome"]) is not None:
        where.append(("(outcome = ? OR outcome LIKE ?)", [outcome, f"{outcome}:%"]))
    for name, cond in (("since", "logged_at_ms >= ?"), ("until", "logged_at_ms <= ?")):
        if options[name] is not None:
            where.append((cond, [_time_ms(options[name], f"--{name}")]))
    if options["status"] is not None:
        where.append(("verified = ?", [int(options["status"] == "verified")]))
    for name, column in (("model", "model"), ("trace_id", "trace_id"), ("span_id", "span_id")):
        if options[name] is not None:
            where.append((f"{column} = ?", [options[name].lower() if "_id" in name else
                                            options[name]]))  # fmt: skip
    terms: list[tuple[tuple[str, ...], list[str]]] = []
    if options["digest"] is not None:
        kinds: tuple[str, ...] = (
            (options["digest_kind"],) if options["digest_kind"] else DIGEST_KINDS
        )
        terms.append((kinds, [_hex(options["digest"])]))
    for param in options["param"]:
        name, sep, _ = param.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"--param {param!r}: give NAME=VALUE")
        terms.append((("param",), [param]))
    terms += [(("tag",), [tag]) for tag in options["tag"]]
    content = _content(options)
    if content is not None:
        terms.append(content)
    where += [term_condition(kinds, values) for kinds, values in terms]
    return where


_CONTENT_KINDS = ("input", "output", "evidence", "content")


def _hex(text: str) -> str:
    value = text.strip().lower().removeprefix("sha256:")
    if len(value) != 64 or set(value) - set("0123456789abcdef"):
        raise click.BadParameter(f"--digest {text!r}: give 64 hex digits")
    return value


def _content(options: dict[str, Any]) -> tuple[tuple[str, ...], list[str]] | None:
    """Terms finding ``--text`` or ``--file`` content: its digests as the SDK takes them
    (the canonical JSON of the text, of the file's text and of its JSON value, and the raw
    bytes), and with ``--disclosures`` the commitments the auditor's file opens to it."""
    text, path = options["text"], options["file"]
    if text is None and path is None:
        if options["disclosures"] is not None:
            raise click.BadParameter("--disclosures: give --text or --file to look for")
        return None
    if text is not None and path is not None:
        raise click.BadParameter("--text and --file: give one")
    raw = text.encode("utf-8") if text is not None else Path(path).read_bytes()
    values: list[Any] = []
    try:
        decoded = raw.decode("utf-8")
        values.append(decoded)
        if path is not None:
            values.append(json.loads(decoded))
    except (UnicodeDecodeError, json.JSONDecodeError):
        pass
    digests = {hashlib.sha256(raw).hexdigest()}
    for value in values:
        try:
            digests.add(content_digest(value))
        except (TypeError, ValueError):
            continue
    kinds: tuple[str, ...] = _CONTENT_KINDS
    if options["disclosures"] is not None:
        private = load_private_disclosures(options["disclosures"])
        opened = [
            d.commitment().digest.hex()
            for ds in private.values()
            for d in ds
            if any(d.value == v for v in values)
        ]
        if opened:
            digests.update(opened)
            kinds = (*kinds, "commitment")
    return kinds, sorted(digests)


_COLUMNS = ("logged_at", "claimed", "log-agent", "agent", "run_id", "step", "kind",
            "tool/decision", "trust", "outcome", "index", "verified")  # fmt: skip


def _difference(ms: int | None) -> str:
    if ms is None:
        return "?"
    return ("-" if ms < 0 else "+") + format_delta(timedelta(milliseconds=ms))


def _verified(row: dict[str, Any]) -> str:
    """``yes``, ``yes (warning: late by 1 d; ...)`` or ``NO: why``."""
    if not row["verified"]:
        return f"NO: {(row['why_not'] or '')[:60]}"
    warned = [c["message"] for c in row["verdict"]["checks"] if c["status"] == "warning"]
    return f"yes (warning: {'; '.join(warned)})" if warned else "yes"


def _groups(by: str, groups: list[dict[str, Any]]) -> list[str]:
    head = (by, "records", "runs", "tokens", "cost", "currency", "duration_ms")
    cells = [head] + [
        tuple("-" if g[k] is None else str(g[k]) for k in ("value", *head[1:])) for g in groups
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    return [f"{len(groups)} group(s)"] + [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]


def _table(rows: list[dict[str, Any]]) -> list[str]:
    cells = [_COLUMNS] + [
        (
            iso_ms(r["logged_at_ms"]) or "?", r["time"], _difference(r["time_difference_ms"]),
            r["agent"], r["run_id"][:18], str(r["step"]),
            r["kind"], (r["label"] or "")[:36], r["trust_label"] or "-", r["outcome"] or "-",
            str(r["log_index"]), _verified(r),
        )
        for r in rows
    ]  # fmt: skip
    widths = [max(len(c[i]) for c in cells) for i in range(len(_COLUMNS))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]


@click.command("query")
@click.option("--db", required=True, metavar="FILE", help="an index made by `ledger-verify index`")
@click.option("--agent", help="agent name")
@click.option("--run", help="run id")
@click.option("--kind", help="record kind, e.g. memory_write")
@click.option("--tool", help="tool (tool_call, parameter_construction) or decision label")
@click.option("--since", metavar="TIME", help="logged at or after (RFC 3339)")
@click.option("--until", metavar="TIME", help="logged at or before (RFC 3339)")
@click.option("--trust", metavar="LABEL", help="memory_write trust label, e.g. untrusted")
@click.option("--outcome", help="passed, failed, or error (any error) / error:TYPE")
@click.option("--status", type=click.Choice(["verified", "failed"]), help="verification status")
@click.option(
    "--digest", metavar="HEX", help="a digest the record carries (any kind, or --digest-kind)"
)
@click.option("--digest-kind", type=click.Choice(DIGEST_KINDS), help="which digest --digest is")
@click.option(
    "--param", multiple=True, metavar="NAME=VALUE", help="a plain parameter value; repeat"
)
@click.option("--tag", multiple=True, metavar="TAG", help="a tag the record carries; repeat")
@click.option("--model", help="the model named by the record")
@click.option("--trace-id", "trace_id", metavar="HEX", help="OpenTelemetry trace id (32 hex)")
@click.option("--span-id", "span_id", metavar="HEX", help="OpenTelemetry span id (16 hex)")
@click.option(
    "--text", metavar="TEXT", help="records whose input, output, evidence or value is this text"
)
@click.option("--file", type=click.Path(exists=True, dir_okay=False), help="... or this file")
@click.option(
    "--disclosures",
    type=click.Path(exists=True, dir_okay=False),
    metavar="FILE",
    help="the auditor's disclosures file: --text/--file also find committed values",
)
@click.option(
    "--count-by",
    "count_by",
    type=click.Choice(sorted(GROUPS)),
    help="count matching records by this, with token, cost and duration sums",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 1_000_000),
    default=1000,
    show_default=True,
    help="at most this many rows",
)
@json_option
def query(db: str, limit: int, as_json: bool, **options: Any) -> None:
    """Query an audit index: records by agent, run, kind, tool, time, trust, outcome, status."""

    def check() -> Outcome:
        if not Path(db).is_file():
            raise FormatError(f"--db {db}: no such index (make one with `ledger-verify index`)")
        by = options.pop("count_by")
        with AuditIndex(db) as store:
            where = _filters(options)
            if by is not None:
                groups = store.count_by(where, by)
                return Outcome("query", {"count_by": by, "groups": groups}, _groups(by, groups))
            rows = store.query(where, limit)
        details: dict[str, Any] = {"count": len(rows), "records": rows}
        lines = [f"{len(rows)} record(s)", *(_table(rows) if rows else [])]
        return Outcome("query", details, lines)

    finish("query", as_json, check)


COMMANDS = (index, query)
