"""``ledger-verify lineage``, ``report`` and ``disclose``: the auditor's commands, offline.

* ``lineage RUNS... --key VKEY (--from DIGEST [--descendants|--ancestors] | --tainted)``: check
  every run file read as ``run`` does, then walk the parent graph across them
  (``ledger_client.audit.lineage``), print the runs examined (each verified or not, and where
  the verdict came from), the records found (kind, step, run, tool, claimed and log time,
  log index, verdict, warnings such as ``inputs not linked``) and every unknown parent digest.
  Exit 1 when a run examined fails, a record on the path fails, a parent is unknown, or the
  ``--from`` digest is in none of the files ("source not found").
* ``report RUNS... --key VKEY --html OUT.html``: one self-contained HTML page
  (``ledger_client.audit.report_html``). Exit 1 when a run is not verified (the page is written).
  ``--tiles URL --chain-key HEX``: each run's chain check from the log's tiles (withheld runs,
  forks, restarts; ``ledger_client.cli.agent.chain_verdicts``), ``chain_scan`` in ``--json``.
  ``--db FILE``: a run file the index verified and found passing (same content and trust
  inputs, default time policy, no ``--tiles``) is taken with its stored verdict
  (``audit.verify.audit_as_run``), its run checks' source ``index``.
* ``export RUN --key VKEY --format otlp|prov --out FILE``: the run, each record with its
  verdict, as OTLP/JSON (the body of ``POST /v1/traces``) or W3C PROV-JSON
  (``ledger_client.audit.export``). Exit 1 when the run is not verified (the file is written).
* ``disclose RECEIPT --path P [--path P ...] --out R2 [--disclosures FILE] [--digest HEX]``:
  a receipt that opens exactly the paths ``P`` (``Receipt.disclose``), the values taken from
  the SDK's private disclosures file (default: beside a run file, ``<run>.disclosures.jsonl``).
  RECEIPT is a receipt, a ``{"record", "receipt"}`` item, or a run file with ``--digest``.

Options shared with ``run``: ``--tsa-root`` (anchors checked), ``--origin``, ``--witness``
(witness cosignature keys; without them witnesses are reported ``not checked``), and the time
policy (``time_policy_options``): ``--max-delay DURATION`` (default 1 h; a claimed time more
than this before the log's leaf time is "late by Δ") and ``--late warn|fail`` (default: fail
when ``--max-delay`` is given, the auditor's stated policy, else warn). Exit codes as for
every subcommand (``clikit.outcome``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ledger.core.errors import FormatError
from ledger_client.cli.options import (
    DEFAULT_MAX_DELAY_TEXT,
    agent_verifiers,
    chain_options,
    default_max_delay,
    load_certificates,
    read_input,
)
from ledger_client.clikit.outcome import EXIT_INVALID, Outcome, SharedJson, finish, json_option

if TYPE_CHECKING:  # the rest is imported by the command that uses it (start-up)
    from ledger.core.jcs import Json
    from ledger.records.decision import DecisionRecord
    from ledger_client.audit.lineage import LineageResult
    from ledger_client.audit.verdicts import TimePolicy
    from ledger_client.receipts.receipt import Receipt
    from ledger_client.receipts.verify import ReceiptChecker

__all__ = [
    "COMMANDS",
    "disclose",
    "export",
    "lineage",
    "make_checker",
    "parse_duration",
    "report",
    "time_policy",
    "time_policy_options",
    "verification_options",
]

_KEY_HELP = "log verifier key name+hexid+base64 (type 0x01); repeat for several"
_ROOT_HELP = "trusted TSA root certificate(s), PEM; repeat. Without it anchors are not checked"


def verification_options(fn: click.decorators.FC) -> click.decorators.FC:
    """``--key``, ``--tsa-root``, ``--origin``, ``--witness`` (in this order on the command)."""
    for option in reversed(
        (
            click.option(
                "--key", "keys", multiple=True, required=True, metavar="VKEY", help=_KEY_HELP
            ),
            click.option("--tsa-root", "roots", multiple=True, metavar="PEM", help=_ROOT_HELP),
            click.option("--origin", metavar="ORIGIN", help="expected checkpoint origin"),
            click.option(
                "--witness", "witnesses", multiple=True, metavar="VKEY",
                help="witness cosignature key; repeat. Without it witnesses are not checked",
            ),
        )
    ):  # fmt: skip
        fn = option(fn)
    return fn


_DURATION = re.compile(r"(\d+)\s*(s|m|min|h|d)")
_UNIT = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, what: str) -> timedelta:
    """``30s``, ``10m`` (or ``10min``), ``2h``, ``1d`` (a click usage error otherwise)."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise click.BadParameter(f"{what} {text!r}: want a duration such as 30s, 10m, 2h or 1d")
    return timedelta(seconds=int(found.group(1)) * _UNIT[found.group(2)])


def time_policy_options(fn: click.decorators.FC) -> click.decorators.FC:
    """``--max-delay``, ``--late`` (module docstring) and ``--agent-key`` (repeatable: every
    record must be signed by one of them; docs/formats.md "Agent signatures")."""
    fn = click.option(
        "--agent-key", "agent_keys", multiple=True, metavar="VKEY",
        help="agent key: every record must carry its signature; repeat (rotation)",
    )(fn)  # fmt: skip
    fn = click.option(
        "--late", type=click.Choice(["warn", "fail"]), default=None,
        help="a late record: a warning or a failure (default: fail when --max-delay is given)",
    )(fn)  # fmt: skip
    return click.option(
        "--max-delay", "max_delay", metavar="DURATION", default=None,
        help=f"the log may log a record this long after its claimed time without a warning "
        f"(default {DEFAULT_MAX_DELAY_TEXT}); e.g. 10m, 2h, 1d",
    )(fn)  # fmt: skip


def time_policy(
    max_delay: str | None, late: str | None, agent_keys: Sequence[str] = ()
) -> TimePolicy:
    """The auditor's policy from ``--max-delay``, ``--late`` and ``--agent-key``."""
    from ledger_client.audit.verdicts import TimePolicy

    delay = default_max_delay() if max_delay is None else parse_duration(max_delay, "--max-delay")
    fails = (max_delay is not None) if late is None else late == "fail"
    agents = agent_verifiers(agent_keys)
    return TimePolicy(max_delay=delay, late_fails=fails, agent_keys=agents)


def make_checker(
    keys: Sequence[str], roots: Sequence[str], origin: str | None, witnesses: Sequence[str]
) -> ReceiptChecker:
    """A ``ReceiptChecker`` from the command-line values (bad keys or PEMs: exit 2)."""
    return checker_of(trust_inputs(keys, roots, origin, witnesses))


def trust_inputs(
    keys: Sequence[str], roots: Sequence[str], origin: str | None, witnesses: Sequence[str]
) -> tuple[Any, ...]:
    """The command-line trust inputs parsed (bad keys or PEMs: exit 2), for ``checker_of``."""
    from ledger_client.clikit.keys import log_verifiers

    wits = []
    if witnesses:  # ledger.core.checkpoint only with --witness (start-up)
        from ledger.core.checkpoint import CosignatureVerifier

        try:
            wits = [CosignatureVerifier.from_key_string(w) for w in witnesses]
        except FormatError as exc:
            raise FormatError(f"--witness: {exc}") from None
    return log_verifiers(keys), load_certificates(roots, "--tsa-root") or None, origin, wits


def checker_of(trust: tuple[Any, ...]) -> ReceiptChecker:
    """The ``ReceiptChecker`` of parsed trust inputs (``trust_inputs``)."""
    from ledger_client.receipts.verify import ReceiptChecker

    verifiers, roots, origin, witnesses = trust
    return ReceiptChecker(verifiers, tsa_roots=roots, origin=origin, witnesses=witnesses)


def trust_fingerprint(
    keys: Sequence[str],
    roots: Sequence[str],
    origin: str | None,
    witnesses: Sequence[str],
    *,
    agent_keys: Sequence[str] = (),
    chain: tuple[str, str, int] | None = None,
) -> str:
    """The trust inputs an index was made with (``index``), as ``lineage --db`` compares them:
    with the agent keys and, when the tiles were read, the chain key, the tiles URL and the
    tree size scanned (a grown log can show a gap an unchanged file did not). TSA roots count
    by the content of their files, not their paths: a root file replaced in place is other
    trust (roots read from stdin never match, so nothing stored is taken under them)."""
    root_files = tuple(
        secrets.token_hex(16)
        if r == "-"
        else hashlib.sha256(read_input(r, "--tsa-root")).hexdigest()
        for r in roots
    )
    trust: list[object] = [tuple(sorted(keys)), root_files, origin, tuple(witnesses)]
    if agent_keys or chain is not None:
        trust += [tuple(sorted(a.strip() for a in agent_keys)), chain]
    return hashlib.sha256(repr(trust).encode()).hexdigest()


def _fail(
    check: str,
    as_json: bool,
    summary: str,
    details: dict[str, Json],
    lines: list[str],
    *,
    code: int = EXIT_INVALID,
    head: str = "INVALID",
) -> NoReturn:
    if as_json:
        payload = {"valid": False, "check": check, "error": summary, **details}
        click.echo(json.dumps(payload, sort_keys=True))
    else:
        click.echo("\n".join([f"{head}: {summary}", *lines]), err=True)
    sys.exit(code)


# --- lineage ----------------------------------------------------------------------------------


def _runs_lines(result: LineageResult) -> list[str]:
    failed = len(result.failed_runs)
    return [
        f"runs examined: {len(result.runs)} ({failed} not verified)",
        *(r.line() for r in result.runs),
    ]


def _lineage_lines(result: LineageResult) -> list[str]:
    from ledger_client.audit.timeline import label_of

    lines = _runs_lines(result)
    lines.append(f"{result.direction} of {', '.join(s[:16] for s in result.start) or 'nothing'}:")
    for node in result.nodes:
        c, r = node.check, node.check.record
        verdict = node.row.verdict_text() if not node.problems else f"NO: {node.why_not}"
        label = label_of(r)
        tool = f" {label}" if label else ""
        parents = node.row.parent_text()
        lines.append(
            f"  [{node.depth}] {r.kind}{tool} (step {r.step}, run {r.run_id}, agent {r.agent}) "
            f"time {r.time} logged {node.to_json_obj()['logged_at']} index {c.index} "
            f"{c.digest[:16]}{f' parents {parents}' if parents else ''}: {verdict} "
            f"[{node.source}]"
        )
    for child, parent in result.unknown_parents:
        lines.append(f"  unknown parent {parent} of {child[:16]}: in none of the given runs")
    return lines


@click.command("lineage")
@click.argument("runs", nargs=-1, required=True, metavar="RUNS...")
@verification_options
@click.option("--from", "start", metavar="DIGEST", help="the record to start from (hex or prefix)")
@click.option("--descendants", "direction", flag_value="descendants", default=True,
              help="records that rest on it (default)")  # fmt: skip
@click.option("--ancestors", "direction", flag_value="ancestors", help="records it rests on")
@click.option("--tainted", is_flag=True, help="start from every untrusted memory write")
@click.option("--label", "labels", multiple=True, metavar="LABEL",
              help="trust label counted as tainted (default: untrusted); repeat")  # fmt: skip
@click.option(
    "--db",
    metavar="FILE",
    help="an audit index: its stored verdicts for unchanged runs, the rest verified now",
)
@time_policy_options
@json_option
def lineage(
    runs: tuple[str, ...],
    keys: tuple[str, ...],
    roots: tuple[str, ...],
    origin: str | None,
    witnesses: tuple[str, ...],
    start: str | None,
    direction: str,
    tainted: bool,
    labels: tuple[str, ...],
    db: str | None,
    max_delay: str | None,
    late: str | None,
    agent_keys: tuple[str, ...],
    as_json: bool,
) -> None:
    """Check every run given, then walk the parent graph from a record (or every tainted
    memory write)."""

    def check() -> Outcome:
        from ledger_client.audit.run_files import run_path_names, run_paths

        if (start is None) == (not tainted):
            raise click.BadParameter("give exactly one of --from DIGEST and --tainted")
        if db is not None:  # the policy and checker are made only if a run is verified now
            if max_delay is not None:
                parse_duration(max_delay, "--max-delay")
            agent_verifiers(agent_keys)
            # bad keys: exit 2 now; the TSA roots are parsed only if a run is verified now
            # (the fingerprint reads their files: a root file the index was not made with
            # takes nothing from it, so every run is then verified and a bad PEM refused)
            trust_inputs(keys, (), origin, witnesses)
            if not Path(db).is_file():
                raise FormatError(f"--db {db}: no such index (make one with `ledger-verify index`)")
            default_policy = max_delay is None and late is None  # what the index stored under
            fingerprint = trust_fingerprint(keys, roots, origin, witnesses, agent_keys=agent_keys)
            from ledger_client.audit.lineage_index import IndexedLineage, open_index

            store = open_index(db)
            try:
                indexed = IndexedLineage(
                    run_path_names([str(Path(r).resolve()) for r in runs]),
                    store,
                    fingerprint if default_policy else "",
                    lambda: checker_of(trust_inputs(keys, roots, origin, witnesses)),
                    lambda: time_policy(max_delay, late, agent_keys),
                )
                if tainted:
                    starts = indexed.tainted_starts(labels or ("untrusted",))
                else:
                    assert start is not None
                    found = indexed.find(start)
                    if found is None:
                        summary = f"source not found: {start} is in none of the given runs"
                        details = {**indexed.walk([], direction).to_json_obj(), "source": start}
                        _fail("lineage", as_json, summary, details, [])
                    starts = [found]
                answer = indexed.walk(starts, direction)
            finally:
                store.close()
            if not answer.ok:
                details, lines = answer.to_json_obj(), [] if as_json else answer.lines()
                bad = answer.verified.count(False)
                summary = (
                    f"{len(answer.failed_runs)} run(s) not verified, {bad} record(s) not "
                    f"verified, {len(answer.unknown)} unknown parent(s)"
                )
                _fail("lineage", as_json, summary, details, lines)
            if not as_json:
                return Outcome("lineage", answer.to_json_obj(), answer.lines())
            # the records and runs spliced in as their JSON texts, written from the rows (the
            # answer ``to_json_obj`` gives, as json.dumps writes it; a test holds them equal);
            # the placeholders carry a random token: no string of the answer spells one
            shared = SharedJson()
            details = {
                **answer.head(),
                "runs": shared.put_text("runs", answer.runs_pieces()),
                "records": shared.put_text("records", answer.records_pieces()),
            }
            return Outcome("lineage", details, [], shared.texts)
        from ledger_client.audit.lineage import Lineage
        from ledger_client.receipts.run_load import load_run

        policy = time_policy(max_delay, late, agent_keys)
        checker = make_checker(keys, roots, origin, witnesses)
        graph = Lineage(((str(p), load_run(p)) for p in run_paths(runs)), checker, policy=policy)
        if tainted:
            result = graph.walk(graph.tainted_starts(labels or ("untrusted",)), "descendants")
        else:
            assert start is not None
            found = graph.find(start)
            if found is None:
                empty = graph.walk([], direction)
                details = {**empty.to_json_obj(), "source": start}
                names = ", ".join(r.run_file for r in empty.runs)
                summary = f"source not found: {start} is in none of the {len(empty.runs)} run(s)"
                _fail("lineage", as_json, summary, details, [f"runs examined: {names}"])
            result = graph.walk([found], direction)
        details, lines = result.to_json_obj(), _lineage_lines(result)
        if not result.ok:
            bad = sum(1 for n in result.nodes if not n.verified)
            summary = (
                f"{len(result.failed_runs)} run(s) not verified, {bad} record(s) not verified, "
                f"{len(result.unknown_parents)} unknown parent(s)"
            )
            _fail("lineage", as_json, summary, details, lines)
        if tainted and not result.nodes:
            lines.append(f"no record labelled {', '.join(labels or ('untrusted',))} in any run")
        return Outcome("lineage", details, [f"{len(result.nodes)} record(s)", *lines])

    finish("lineage", as_json, check)


# --- report -----------------------------------------------------------------------------------


@click.command("report")
@click.argument("runs", nargs=-1, required=True, metavar="RUNS...")
@verification_options
@click.option("--html", "out", required=True, metavar="OUT.html", help="where to write the page")
@click.option(
    "--disclosures",
    "private_file",
    metavar="FILE",
    help="the auditor's disclosures file: shows the committed values it opens",
)
@click.option("--workers", type=click.IntRange(0, 64), default=0,
              help="processes checking run files (default 0: one per core)")  # fmt: skip
@click.option(
    "--db",
    metavar="FILE",
    help="an audit index: the runs it verified (same file, same trust inputs) are not "
    "verified again",
)
@time_policy_options
@chain_options
@json_option
def report(
    runs: tuple[str, ...],
    keys: tuple[str, ...],
    roots: tuple[str, ...],
    origin: str | None,
    witnesses: tuple[str, ...],
    out: str,
    private_file: str | None,
    workers: int,
    db: str | None,
    max_delay: str | None,
    late: str | None,
    agent_keys: tuple[str, ...],
    tiles: str | None,
    chain_key: str | None,
    as_json: bool,
) -> None:
    """Write self-contained HTML: timeline, decisions, parent graph, checks, problems (more
    than 20 runs: an overview page and one page per run in OUT-runs/)."""

    def check() -> Outcome:
        from cryptography.hazmat.primitives.serialization import Encoding

        from ledger.fileio.durable import sync_filesystem, write_file
        from ledger_client.audit.index import CacheSpec
        from ledger_client.audit.parallel import audit_runs, report_pages
        from ledger_client.audit.report_html import (
            PAGE_RUNS,
            PagePlan,
            RunSummary,
            overview_page,
            plan_pages,
            render_report,
        )
        from ledger_client.audit.run_files import run_paths
        from ledger_client.audit.verdicts import PENDING, Verdict
        from ledger_client.cli.agent import chain_verdicts
        from ledger_client.clikit.errors import EXIT_PENDING
        from ledger_client.receipts.disclose import load_private_disclosures

        policy = time_policy(max_delay, late, agent_keys)
        checker = make_checker(keys, roots, origin, witnesses)
        private = load_private_disclosures(private_file) if private_file else None
        spec = CacheSpec(
            keys=tuple(keys),
            roots_der=tuple(c.public_bytes(Encoding.DER) for c in checker.tsa_roots),
            origin=origin,
            witnesses=tuple(witnesses),
        )
        paths = list(run_paths(runs))
        chains, scan, size = chain_verdicts([str(p) for p in paths], tiles, chain_key, keys, origin)
        policy = replace(policy, chains=chains)
        processes = workers or os.cpu_count() or 1
        stored = frozenset[str]()
        if db is not None:
            if not Path(db).is_file():
                raise FormatError(f"--db {db}: no such index (make one with `ledger-verify index`)")
            if max_delay is None and late is None and tiles is None:  # what the index stored
                stored = _passing_runs(db, paths, keys, roots, origin, witnesses, agent_keys)
        target = Path(out)
        checked = {"anchors_checked": bool(checker.tsa_roots), "witnesses_checked": bool(witnesses)}
        verdicts: list[tuple[str | None, Verdict]]
        if len(paths) <= PAGE_RUNS:
            audits = audit_runs(paths, spec, processes, checker, stored=stored)
            found: dict[int, Verdict] = {}
            page = render_report(audits, verdicts=found, policy=policy, private=private, **checked)
            write_file(target, page.encode("utf-8"))
            verdicts = [(a.run_id, found[id(a)]) for _, a in audits]
        else:  # each process checks its share of the runs and writes their pages
            folder = target.with_name(target.stem + "-runs")
            folder.mkdir(parents=True, exist_ok=True)

            def plan_of(summaries: list[RunSummary]) -> PagePlan:
                return plan_pages(summaries, folder=folder.name, overview=target.name, **checked)

            summaries, plan, shown = report_pages(
                [str(p) for p in paths], spec, processes, plan_of, folder, checker=checker,
                stored=stored, policy=policy, private=private,
            )  # fmt: skip
            sync_filesystem(folder)  # the pages made durable together: one sync, not one each
            write_file(target, overview_page(plan, summaries, shown).encode("utf-8"))
            verdicts = [(s.run_id, v) for s, v in zip(summaries, shown, strict=True)]
        failing = [run for run, v in verdicts if not v.ok]
        pending = [run for run, v in verdicts if v.status == PENDING]
        details: dict[str, Any] = {
            "html": out,
            "runs": len(verdicts),
            "failing_runs": failing,
            "pending_runs": pending,
            "verdicts": [{"run_id": run, **v.to_json_obj()} for run, v in verdicts],
        }
        lines = [f"wrote {out}: {len(verdicts)} run(s), {len(failing)} not verified"]
        if scan is not None:
            details["chain_scan"] = {"tree_size": size, **scan.to_json_obj()}
            lines += ["chains (from the log's tiles):", *scan.lines()]
        if failing and len(pending) == len(failing):
            summary = f"{len(pending)} run(s) anchors pending (nothing else failed)"
            _fail("report", as_json, summary, {**details, "status": "anchors_pending"}, lines,
                  code=EXIT_PENDING, head="ANCHORS PENDING")  # fmt: skip
        if failing:
            _fail("report", as_json, f"{len(failing)} run(s) not verified", details, lines)
        return Outcome("report", details, lines)

    finish("report", as_json, check)


def _passing_runs(
    db: str,
    paths: Sequence[Path],
    keys: Sequence[str],
    roots: Sequence[str],
    origin: str | None,
    witnesses: Sequence[str],
    agent_keys: Sequence[str],
) -> frozenset[str]:
    """The run files (``str(path)``) whose passing verdict the index ``db`` holds for the
    same content and trust inputs (``audit.lineage_index.stored_files``)."""
    from ledger_client.audit.lineage_index import open_index, passing, stored_files

    fingerprint = trust_fingerprint(keys, roots, origin, witnesses, agent_keys=agent_keys)
    names = {str(p.resolve()): str(p) for p in paths}  # the index holds resolved paths
    conn = open_index(db)
    try:
        found = stored_files(conn, fingerprint, list(names))
    finally:
        conn.close()
    return frozenset(names[path] for path, (_, known) in found.items() if passing(known[3]))


@click.command("export")
@click.argument("run_file", metavar="RUN")
@verification_options
@click.option("--format", "form", type=click.Choice(["otlp", "prov"]), required=True,
              help="otlp: OTLP/JSON (POST /v1/traces body); prov: W3C PROV-JSON")  # fmt: skip
@click.option("--out", required=True, metavar="FILE", help="where to write the JSON")
@time_policy_options
@json_option
def export(
    run_file: str,
    keys: tuple[str, ...],
    roots: tuple[str, ...],
    origin: str | None,
    witnesses: tuple[str, ...],
    form: str,
    out: str,
    max_delay: str | None,
    late: str | None,
    agent_keys: tuple[str, ...],
    as_json: bool,
) -> None:
    """Export a verified run, each record with its verdict, as OTLP/JSON or PROV-JSON."""

    def check() -> Outcome:
        from ledger.fileio.durable import write_file
        from ledger_client.audit.export import otlp_json, prov_json
        from ledger_client.audit.timeline import timeline
        from ledger_client.audit.verdicts import run_checks
        from ledger_client.audit.verify import audit_as_run
        from ledger_client.receipts.run_load import load_run

        policy = time_policy(max_delay, late, agent_keys)
        checker = make_checker(keys, roots, origin, witnesses)
        audit = audit_as_run(load_run(run_file), checker)
        rows = timeline(audit, policy)
        doc = otlp_json(rows) if form == "otlp" else prov_json(rows)
        write_file(Path(out), json.dumps(doc, indent=1).encode("utf-8") + b"\n")
        verdict = run_checks(audit, [(r.check, r.verdict) for r in rows])
        details: dict[str, Any] = {
            "out": out,
            "format": form,
            "records": len(rows),
            "run_id": audit.run_id,
            "verdict": verdict.to_json_obj(),
        }
        lines = [f"wrote {out}: {len(rows)} record(s) of run {audit.run_id} as {form}"]
        if not verdict.ok:
            _fail("export", as_json, "run not verified (exported with its verdicts)", details,
                  lines)  # fmt: skip
        return Outcome("export", details, lines)

    finish("export", as_json, check)


# --- disclose ---------------------------------------------------------------------------------


def _attached(receipt: Receipt, record: DecisionRecord | None) -> Receipt:
    """The receipt carrying its record (needed to disclose a field of it)."""
    from ledger.records.decision import record_digest

    if receipt.record is not None or record is None:
        return receipt
    if record_digest(record) != receipt.record_digest:
        raise FormatError("the record beside the receipt is not the one it is for")
    return replace(receipt, record=record)


def _receipt_from(path: str, digest: str | None) -> Receipt:
    """A receipt from a receipt file, a ``{record, receipt}`` item, or a run file + digest."""
    from ledger.core.jcs import loads_strict
    from ledger.core.limits import MAX_ITEM_BYTES
    from ledger.records.decision import DecisionRecord
    from ledger_client.cli.options import read_input
    from ledger_client.receipts.receipt import Receipt
    from ledger_client.receipts.run_load import load_run

    if digest is not None:
        found = [i for i in load_run(path) if i.digest.startswith(digest.lower())]
        if len(digest) < 8 or len(found) != 1:
            raise FormatError(f"--digest {digest}: {len(found)} records of {path} match")
        return _attached(found[0].receipt, found[0].record)
    obj = loads_strict(read_input(path, "receipt", MAX_ITEM_BYTES))
    if isinstance(obj, dict) and "receipt" in obj and set(obj) <= {"record", "receipt"}:
        given = obj.get("record")
        record = None if given is None else DecisionRecord.from_json_obj(given)
        return _attached(Receipt.from_json_obj(obj["receipt"]), record)
    return Receipt.from_json_obj(obj)


def _private_default(path: str) -> Path | None:
    where = Path(path)
    candidate = where.with_name(f"{where.stem}.disclosures.jsonl")
    return candidate if candidate.is_file() else None


@click.command("disclose")
@click.argument("receipt_file", metavar="RECEIPT")
@click.option("--path", "paths", multiple=True, required=True, metavar="FIELD",
              help="field path to disclose, e.g. parameters.url; repeat")  # fmt: skip
@click.option("--out", required=True, metavar="R2", help="where to write the new receipt")
@click.option("--disclosures", "private", metavar="FILE",
              help="the SDK's private disclosures file (default: beside a run file)")  # fmt: skip
@click.option("--digest", metavar="HEX", help="the record, when RECEIPT is a run file")
@json_option
def disclose(
    receipt_file: str,
    paths: tuple[str, ...],
    out: str,
    private: str | None,
    digest: str | None,
    as_json: bool,
) -> None:
    """Write a receipt that discloses exactly the given field paths of its record."""

    def check() -> Outcome:
        from ledger.core.jcs import canonical_bytes
        from ledger_client.receipts.disclose import (
            describe_disclosures,
            disclosed_values,
            load_private_disclosures,
        )

        receipt = _receipt_from(receipt_file, digest)
        source = Path(private) if private else _private_default(receipt_file)
        kept = None
        if source is not None:
            kept = load_private_disclosures(source).get(receipt.record_digest.hex(), ())
        opened = receipt.disclose(paths, kept)
        Path(out).write_bytes(canonical_bytes(opened.to_json_obj()) + b"\n")
        details: dict[str, Any] = {"out": out, "disclosed": disclosed_values(opened)}
        lines = [f"wrote {out}", *describe_disclosures(opened)]
        return Outcome("disclose", details, lines)

    finish("disclose", as_json, check)


COMMANDS = (lineage, report, export, disclose)
