"""``ledger-verify receipt`` and ``run``: decision-record receipts and whole runs, offline.

* ``receipt FILE [--record FILE] --key VKEY [--tsa-root PEM ...]``: every part of a receipt
  (``ledger_client.receipts.verify.verify_receipt``, with the anchor time policy at the current
  time), then a short report: record digest, index, tree size, logged at (the leaf's time),
  anchored at (the earliest valid RFC 3161 genTime) and by whom: the TSA certificate subject the
  chain check proved. A receipt's own ``tsa`` label is shown only as unauthenticated. Without
  ``--tsa-root`` anchors are reported ``not checked``, never valid.
* ``run PATH --key VKEY [--tsa-root PEM ...]``: PATH is a folder of ``*.json`` files or a
  JSON-lines file; each item is ``{"record": <decision record or null>, "receipt": <receipt>}``
  (``record`` may be left out or null when the receipt carries it). Every receipt must verify;
  then, in log order (by receipt index), parents that are present must have been logged earlier
  (``parent_logged_later``) and ``ledger.records.runs.check_run`` must find the run exactly as its
  ``run_closed`` record lists it (``missing``, ``extra``, ``altered``, ``reordered``,
  ``after_close``, ``step_gap``, ...; ``ledger_client.receipts.run_verify``). Problems are named by
  code with the record's step, id, digest and file (or line); ``--json`` adds the per-step
  ``timeline``. A line whose receipt is ``null`` (the SDK wrote it while the log was down) is
  input to complete first (exit 2, naming ``ledger receipt run``). The files are read by
  ``ledger_client.receipts.run_load.load_run``, the reader every audit command uses.
  ``--timeline`` adds one row per record with its checks (``ledger_client.audit.timeline``).
  Every record's claimed time is set beside the log's leaf time (``ledger_client.audit.
  verdicts``): postdated (claimed after the leaf time plus the skew) fails; more than
  ``--max-delay`` before it is "late by Δ", a warning or, under ``--late fail`` (the default
  when ``--max-delay`` is given), a failure. A record that took inputs but names no parent is
  reported "inputs not linked" (a warning). ``--json`` has each record's ``verdict``.
  ``--agent-key VKEY`` (repeatable, for rotation): every record must carry a valid agent
  signature by one of the keys (``signature`` problems otherwise; docs/formats.md "Agent
  signatures"); an agent key named like the origin, a log key or a witness is refused. The
  run's first record's chain position is shown; with ``--tiles URL --chain-key HEX`` it is
  checked against the log (``ledger_client.audit.chain``: runs of its chain opened in the log
  and not presented are a ``chain`` problem, "run #n of chain C was opened at index i and is
  not among the files"; forks and unlogged openings fail too, "not closed" and "chain
  restarted" are warnings) and ``--json`` gains ``chain_scan``.

With ``--tsa-root``, a run whose receipts all verify but some carry no anchor yet (fetched
before the log's next scheduled anchor) is "anchors pending", exit 3: never OK, never invalid
(``ledger receipt upgrade RUN.jsonl`` adds the anchors once they exist).

The log order is the order receipts prove; the order of files or lines is not authenticated
and does not matter. Exit codes as for every subcommand (``clikit.outcome``): 0 valid, 1 a check
failed, 2 usage or malformed input, 3 anchors pending, 4 unsupported schema version.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NoReturn

import click

from ledger.core.limits import MAX_ITEM_BYTES
from ledger_client.cli.audit import time_policy, time_policy_options
from ledger_client.cli.notes import (
    iso_utc,
    read_input,
)
from ledger_client.cli.options import chain_options, load_certificates
from ledger_client.clikit.errors import EXIT_PENDING
from ledger_client.clikit.keys import log_verifiers, witness_options, witness_policy
from ledger_client.clikit.outcome import EXIT_INVALID, Outcome, finish, json_option

if TYPE_CHECKING:  # the rest is imported by the command that uses it (start-up: ``receipt``
    # loads neither the run checks nor the timeline, their verdicts or RFC 3161 parsing)
    from cryptography import x509

    from ledger.core.jcs import Json
    from ledger_client.audit.verdicts import TimePolicy
    from ledger_client.receipts.run_verify import RunItem, RunVerdict
    from ledger_client.receipts.verify import AnchorCheck, ReceiptReport

__all__ = ["receipt", "run"]

_KEY_HELP = "log verifier key name+hexid+base64 (type 0x01); repeat for several"
_ROOT_HELP = "trusted TSA root certificate(s), PEM; repeat. Without it anchors are not checked"
_ORIGIN_HELP = "expected checkpoint origin"


def _roots(paths: Sequence[str]) -> list[x509.Certificate] | None:
    """Every certificate in the ``--tsa-root`` files (PEM or DER); None when none is given."""
    return load_certificates(paths, "--tsa-root") or None


# --- receipt ----------------------------------------------------------------------------------


def _anchor_lines(report: ReceiptReport, details: dict[str, Json]) -> list[str]:
    first = report.anchored
    if first is not None:
        stamp = details["anchored_at"]
        head = f"anchored at:   {stamp} by {first.signer} (size {first.checkpoint_size})"
    elif not report.anchors:
        head = "anchored at:   no anchor in the receipt"
    else:
        head = "anchored at:   not checked (give --tsa-root PEM to check the anchors)"
    lines = [head]
    for anchor in report.anchors:
        lines.append(f"  anchor:      over size {anchor.checkpoint_size}, {_anchor_status(anchor)}")
    return lines


def _anchor_status(anchor: AnchorCheck) -> str:
    """Who stamped, as the chain check proved it; the receipt's label only as unauthenticated."""
    from ledger_client.receipts.verify import VALID

    if anchor.status == VALID:
        return f"valid, signed by {anchor.signer}"
    status = anchor.status.replace("_", " ") + (f": {anchor.detail}" if anchor.detail else "")
    return f"{status} (label {anchor.tsa!r}, unauthenticated)"


def describe_receipt(report: ReceiptReport) -> list[str]:
    """Human lines for a verified receipt."""
    details = report.to_json_obj()
    record = report.record
    about = "not given (digest only)"
    if record is not None:
        about = f"{record.kind}, step {record.step} of run {record.run_id} ({record.record_id})"
    lines = [
        f"record digest: {report.record_digest.hex()}",
        f"record:        {about}",
        f"index:         {report.index} (tree size {report.tree_size}, {report.origin})",
        f"logged at:     {details['logged_at']} (the log's time, from the leaf)",
        *(f"signed by:     {name}" for name in report.signed_by),
        *(
            f"cosigned by:   {c.name}+{c.key_id.hex()} at "
            f"{iso_utc(datetime.fromtimestamp(c.timestamp, UTC))}"
            for c in report.cosigned_by
        ),
        *_anchor_lines(report, details),
    ]
    if report.disclosed:
        lines.append(f"disclosed:     {', '.join(report.disclosed)}")
    if report.previous_size is not None:
        lines.append(f"previous:      size {report.previous_size}, consistent with this one")
    return lines


@click.command("receipt")
@click.argument("file", metavar="FILE|-")
@click.option("--record", "record_file", metavar="FILE", help="the decision record (JSON)")
@click.option("--key", "keys", multiple=True, required=True, metavar="VKEY", help=_KEY_HELP)
@click.option("--tsa-root", "roots", multiple=True, metavar="PEM", help=_ROOT_HELP)
@click.option("--origin", metavar="ORIGIN", help=_ORIGIN_HELP)
@witness_options
@json_option
def receipt(
    file: str,
    record_file: str | None,
    keys: tuple[str, ...],
    roots: tuple[str, ...],
    origin: str | None,
    witnesses: tuple[str, ...],
    min_witnesses: int | None,
    as_json: bool,
) -> None:
    """Check a decision-record receipt: record, leaf, proofs, checkpoint, anchors, witnesses."""

    from ledger.records.decision import DecisionRecord
    from ledger_client.receipts.disclose import describe_disclosures, disclosed_values
    from ledger_client.receipts.receipt import Receipt
    from ledger_client.receipts.verify import verify_receipt

    def check() -> Outcome:
        verifiers, trusted = log_verifiers(keys), _roots(roots)
        wits, required = witness_policy(witnesses, min_witnesses)
        parsed = Receipt.from_json(read_input(file, "receipt", MAX_ITEM_BYTES))
        record = None
        if record_file is not None:
            record = DecisionRecord.from_json(read_input(record_file, "record", MAX_ITEM_BYTES))
        report = verify_receipt(
            parsed,
            verifiers,
            tsa_roots=trusted,
            origin=origin,
            record=record,
            witnesses=wits,
            min_witnesses=required,
        )
        details = {**report.to_json_obj(), "disclosures": disclosed_values(parsed)}
        return Outcome(
            "receipt", details, [*describe_receipt(report), *describe_disclosures(parsed)]
        )

    finish("receipt", as_json, check)


# --- run --------------------------------------------------------------------------------------


def _describe_run(verdict: RunVerdict) -> list[str]:
    run = verdict.run
    lines = [
        f"run:           {run.run_id} ({verdict.records} records, "
        f"{verdict.receipts_valid} valid receipts)",
        f"closed by:     {run.closed_by or '(no run_closed record)'}",
    ]
    if not verdict.anchors_checked:
        lines.append("anchors:       not checked (give --tsa-root PEM to check them)")
    for parent in run.external_parents:  # lineage across runs: `ledger-verify lineage`
        lines.append(f"parent in another run: {parent}")
    for problem, source in verdict.problems:
        where = "run" if problem.step is None else f"step {problem.step}"
        origin = f" [{source}]" if source else ""
        lines.append(f"  {problem.code}: {where}{origin}: {problem.message}")
    return lines


def _record_checks(
    verdict: RunVerdict, items: Sequence[RunItem], policy: TimePolicy
) -> tuple[list[Json], list[str], list[Json]]:
    """Each record's time, lineage, signature and chain checks (JSON), their text lines, and
    the failures as problems (``postdated``, ``late``, ``signature``)."""
    from ledger_client.audit.verdicts import (
        FAILED,
        WARNING,
        Verdict,
        chain_check,
        lineage_check,
        signature_check,
        time_check,
        time_json,
    )

    by_digest = {item.digest: item for item in items}
    step_of = {item.digest: item.record.step for item in items}
    out: list[Json] = []
    lines: list[str] = []
    problems: list[Json] = []
    for result in verdict.timeline:
        item = by_digest.get(result.record_digest or "")
        if item is None:
            continue
        record = item.record
        chain = chain_check(record, policy)
        checks = Verdict(
            checks=(
                time_check(record, result.logged_at_ms, policy),
                lineage_check(record, step_of),
                signature_check(record, policy.agent_keys),
                *(() if chain is None else (chain,)),
            )
        )
        times = time_json(record, result.logged_at_ms)
        out.append(
            {
                "step": record.step,
                "record_digest": item.digest,
                "source": item.source,
                "time": times["claimed"],
                "logged_at": times["logged"],
                "time_difference_ms": times["difference_ms"],
                "verdict": checks.to_json_obj(),
            }
        )
        for check in checks.checks:
            if check.status in (WARNING, FAILED):
                lines.append(f"  {check.name}: step {record.step} [{item.source}]: {check.message}")
            if check.status == FAILED and check.name in ("time", "signature", "chain"):
                code = "postdated" if check.message.startswith("postdated") else "late"
                code = check.name if check.name in ("signature", "chain") else code
                problems.append(
                    {
                        "code": code, "message": check.message, "step": record.step,
                        "record_id": record.record_id, "record_digest": item.digest,
                        "source": item.source,
                    }
                )  # fmt: skip
    return out, lines, problems


def _agent_summary(items: Sequence[RunItem], policy: TimePolicy) -> tuple[Json, list[str]]:
    """Who signed the run (the first record's claim, checked with ``--agent-key``) and its
    chain position (``chain C #n``; ``ledger-verify chain`` checks it against the log)."""
    from ledger_client.audit.verdicts import chain_check, signature_check

    first = next((item.record for item in items if item.record.step == 0), None)
    if first is None:
        return None, []
    signature = signature_check(first, policy.agent_keys)
    chain = chain_check(first, policy)
    summary: dict[str, Json] = {
        "signature": signature.to_json_obj(),
        "chain": None if first.chain is None else first.chain.to_json_obj(),  # type: ignore[dict-item]
    }
    lines = [f"agent:         {first.agent}, signature {signature.message or signature.status}"]
    if chain is not None:
        lines.append(f"chain:         {chain.message}")
    return summary, lines


def _fail(as_json: bool, details: dict[str, Json], lines: list[str]) -> NoReturn:
    """Report a run with problems (like ``finish`` on a failed check) and exit 1, or 3 when the
    only problems are anchors not issued yet ("anchors pending": neither OK nor invalid)."""
    from ledger_client.receipts.run_verify import ANCHORS_PENDING

    problems = details["problems"]
    count = len(problems) if isinstance(problems, list) else 0
    if details["status"] == ANCHORS_PENDING:
        head, code = "ANCHORS PENDING", EXIT_PENDING
        summary = (
            f"{count} record(s) of run {details['run_id']} not anchored yet; everything else "
            "verified (after the log's next anchor: `ledger receipt upgrade FILE`, then again)"
        )
    else:
        head, code = "INVALID", EXIT_INVALID
        summary = f"{count} problem(s) in run {details['run_id']}"
    if as_json:
        payload = {"valid": False, "check": "run", "error": summary, **details}
        click.echo(json.dumps(payload, sort_keys=True))
    else:
        click.echo("\n".join([f"{head}: {summary}", *lines]), err=True)
    sys.exit(code)


@click.command("run")
@click.argument("path", metavar="PATH")
@click.option("--key", "keys", multiple=True, required=True, metavar="VKEY", help=_KEY_HELP)
@click.option("--tsa-root", "roots", multiple=True, metavar="PEM", help=_ROOT_HELP)
@click.option("--origin", metavar="ORIGIN", help=_ORIGIN_HELP)
@witness_options
@click.option("--timeline", is_flag=True, help="one row per record (ledger_client.audit.timeline)")
@click.option(
    "--disclosures",
    "private_file",
    metavar="FILE",
    help="with --timeline: the auditor's disclosures file (shows committed values it opens)",
)
@time_policy_options
@chain_options
@json_option
def run(
    path: str,
    keys: tuple[str, ...],
    roots: tuple[str, ...],
    origin: str | None,
    witnesses: tuple[str, ...],
    min_witnesses: int | None,
    timeline: bool,
    private_file: str | None,
    max_delay: str | None,
    late: str | None,
    agent_keys: tuple[str, ...],
    tiles: str | None,
    chain_key: str | None,
    as_json: bool,
) -> None:
    """Check a run (folder of *.json or JSON-lines of {record, receipt}): complete, in order."""
    from ledger_client.audit.timeline import run_timeline
    from ledger_client.cli.agent import chain_verdicts, refuse_confusable
    from ledger_client.receipts.disclose import load_private_disclosures
    from ledger_client.receipts.run_load import load_run
    from ledger_client.receipts.run_verify import verify_run
    from ledger_client.receipts.verify import ReceiptChecker

    def check() -> Outcome:
        verifiers, trusted = log_verifiers(keys), _roots(roots)
        wits, required = witness_policy(witnesses, min_witnesses)
        policy = time_policy(max_delay, late, agent_keys)
        names = [k.name for k in verifiers]
        refuse_confusable(policy.agent_keys, origin, names, [w.name for w in wits])
        items = load_run(path)
        chains, scan, size = chain_verdicts([path], tiles, chain_key, keys, origin)
        policy = replace(policy, chains=chains)
        checker = ReceiptChecker(
            verifiers,
            tsa_roots=trusted,
            origin=origin,
            witnesses=wits,
            min_witnesses=required,
        )
        verdict = verify_run(items, (), checker=checker)
        details, lines = verdict.to_json_obj(), _describe_run(verdict)
        details["external_parents"] = list(verdict.run.external_parents)
        details["records_checked"], notes, late_problems = _record_checks(verdict, items, policy)
        problems = details["problems"]
        assert isinstance(problems, list)
        problems += late_problems
        lines += notes
        details["agent"], agent_lines = _agent_summary(items, policy)
        lines[2:2] = agent_lines
        if scan is not None:
            details["chain_scan"] = {"tree_size": size, **scan.to_json_obj()}
            lines += ["chains (from the log's tiles):", *scan.lines()]
        if timeline:
            details["timeline"], rows = run_timeline(
                items, verifiers, trusted, origin, problems=verdict.problems, witnesses=wits,
                cache=checker.cache, policy=policy,
                private=load_private_disclosures(private_file) if private_file else None,
            )  # fmt: skip
            lines += rows
        if not verdict.ok or late_problems:
            _fail(as_json, details, lines)
        return Outcome("run", details, lines)

    finish("run", as_json, check)
