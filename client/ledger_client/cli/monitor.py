"""``ledger-verify monitor``: follow a log (gRPC server or C2SP tlog-tiles URL); exit 1 with
evidence on a fork or rollback.

The checks are ``ledger_client.remote.monitor`` (C2SP tlog-checkpoint signatures and origin, RFC
9162 §2.1.4 consistency, trust on first use, the optional full audit); this module only parses,
talks to the server and prints. grpc is imported inside the command, so the offline
subcommands of ``ledger-verify`` never load it.

Exit codes (``clikit.outcome``): 0 every poll passed (or the loop was interrupted), 1 a check
failed (fork, rollback, audit mismatch, bad signature: the evidence is printed; with ``--json``
one object whose ``evidence`` holds both checkpoint notes, sizes, roots and proof hashes),
2 usage, unreadable or mismatched state file, or a server that cannot be reached with ``--once``.
Without ``--once`` a server error is reported on stderr and retried at the next poll.

With ``--witness VKEY`` (repeatable) and ``--min-witnesses K``, only checkpoints cosigned by K
of those witnesses (c2sp.org/tlog-cosignature) are trusted; a checkpoint short of the quorum is
reported and retried at the next poll (with ``--once``: exit 1).
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ledger.core.errors import InconsistencyError, ServiceError, WitnessError
from ledger_client.clikit.connection import connection_from, connection_options
from ledger_client.clikit.keys import log_verifiers, witness_options, witness_policy
from ledger_client.clikit.outcome import EXIT_INVALID, Outcome, finish, json_option
from ledger_client.remote.monitor import (
    Advance,
    FetchedEntry,
    LogSource,
    Monitor,
    PollResult,
    StateFile,
    follow,
    no_progress,
)

if TYPE_CHECKING:
    from ledger_client.remote.log import RemoteLog

__all__ = ["RemoteSource", "describe_poll", "evidence_lines", "monitor"]


# --- the server, as a LogSource ------------------------------------------------------------------


class RemoteSource:
    """A ``monitor.LogSource`` over a ``RemoteLog`` (served leaf hashes are passed on, so the
    audit compares them with its own)."""

    def __init__(self, log: RemoteLog) -> None:
        self._log = log

    def latest_checkpoint(self) -> str:
        return self._log.checkpoint().note

    def consistency_proof(self, size1: int, size2: int) -> Sequence[bytes]:
        return self._log.consistency_proof(size1, size2).hashes

    def entries(self, start: int, count: int) -> Sequence[FetchedEntry]:
        page = self._log.entries(start, count)
        return [FetchedEntry(index=e.index, leaf=e.leaf, leaf_hash=e.leaf_hash) for e in page]


# --- output --------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def describe_poll(result: PollResult, audit: bool) -> tuple[dict[str, Any], list[str]]:
    """JSON details and human lines for one successful poll."""
    details: dict[str, Any] = {
        "status": result.status,
        "previous_size": result.previous_size,
        "size": result.size,
        "root_hash": _b64(result.root_hash),
        "root_hash_hex": result.root_hash.hex(),
        "audited_size": result.audited_size,
    }
    if result.status == "first-use":
        line = f"size {result.size}: trusted on first use (signature and origin checked)"
    elif result.status == "unchanged":
        line = f"size {result.size}: unchanged, same root"
    elif result.previous_size == 0:
        line = f"size 0 -> {result.size}: extends the empty tree (signature checked)"
    else:
        line = f"size {result.previous_size} -> {result.size}: consistency proof verified"
    lines = [line, f"root hash: {details['root_hash']}"]
    if audit:
        details["audited"] = result.audited
        lines.append(
            f"audited:   the first {result.audited_size} entries hash to the signed root"
            f" ({result.audited} new)"
        )
    return details, lines


def _checkpoint_lines(label: str, described: Any) -> list[str]:
    if not isinstance(described, dict):
        return []
    note = str(described.get("note", ""))
    head = f"{label}: size {described.get('size')}, root {described.get('root_hash_hex')}"
    return [head, *(f"    {line}".rstrip() for line in note.splitlines())]


def evidence_lines(evidence: dict[str, object]) -> list[str]:
    """Human lines for ``InconsistencyError.evidence``: checkpoints, proof, how to re-check."""
    lines = [f"kind: {evidence.get('kind')}", f"origin: {evidence.get('origin')}"]
    lines += _checkpoint_lines("trusted checkpoint", evidence.get("trusted"))
    lines += _checkpoint_lines("observed checkpoint", evidence.get("observed"))
    if "computed_root_hash_hex" in evidence:
        lines.append(f"root computed from the entries: {evidence['computed_root_hash_hex']}")
    proof = evidence.get("proof")
    if isinstance(proof, dict):
        hashes = [str(h) for h in proof.get("hashes", [])]
        lines.append(
            f"consistency proof {proof.get('size1')} -> {proof.get('size2')}:"
            f" {len(hashes)} hash(es)"
        )
        lines += [f"    {h}" for h in hashes]
        lines.append("re-check: " + _recheck_command(evidence, proof, hashes))
    return lines


def _recheck_command(evidence: dict[str, object], proof: dict[str, Any], hashes: list[str]) -> str:
    trusted, observed = evidence.get("trusted"), evidence.get("observed")
    root1 = trusted.get("root_hash_hex") if isinstance(trusted, dict) else None
    root2 = observed.get("root_hash_hex") if isinstance(observed, dict) else None
    words = [
        "ledger-verify consistency",
        f"--size1 {proof.get('size1')} --size2 {proof.get('size2')}",
        f"--root1 {root1} --root2 {root2}",
        *(f"--proof {h}" for h in hashes),
    ]
    return " ".join(words)


def _report_inconsistency(as_json: bool, exc: InconsistencyError) -> NoReturn:
    """Like ``finish`` on a VerificationError, plus the evidence."""
    if as_json:
        payload = {"valid": False, "check": "monitor", "error": str(exc), "evidence": exc.evidence}
        click.echo(json.dumps(payload, sort_keys=True))
    else:
        click.echo("\n".join([f"INVALID: {exc}", *evidence_lines(exc.evidence)]), err=True)
    sys.exit(EXIT_INVALID)


def _reporting_evidence(as_json: bool, run: Callable[[], Outcome]) -> Callable[[], Outcome]:
    def wrapped() -> Outcome:
        try:
            return run()
        except InconsistencyError as exc:
            _report_inconsistency(as_json, exc)

    return wrapped


@contextmanager
def _progress_bar(total: int) -> Iterator[Advance]:
    """click.progressbar on stderr (a label only when stderr is not a terminal)."""
    with click.progressbar(length=total, label="auditing entries", file=sys.stderr) as bar:
        yield bar.update


# --- running -------------------------------------------------------------------------------------


def _poll_once(mon: Monitor, audit: bool) -> Outcome:
    details, lines = describe_poll(mon.poll(full_audit=audit), audit)
    return Outcome("monitor", details, lines)


def _poll_forever(mon: Monitor, audit: bool, interval: float, as_json: bool) -> Outcome:
    """Poll until interrupted; print one line (or JSON object) per poll."""

    def on_poll(result: PollResult) -> None:
        details, lines = describe_poll(result, audit)
        click.echo(json.dumps(details, sort_keys=True) if as_json else " | ".join(lines))

    def on_error(exc: ServiceError | WitnessError) -> None:
        click.echo(f"warning: {exc} (retrying in {interval:g}s)", err=True)

    with suppress(KeyboardInterrupt):  # Ctrl-C ends a healthy watch: exit 0
        follow(mon, interval=interval, full_audit=audit, on_poll=on_poll, on_error=on_error)
    state = mon.state
    size = None if state is None else state.size
    return Outcome("monitor", {"stopped": "interrupted", "size": size}, [f"trusted size: {size}"])


@click.command()
@connection_options
@click.option(
    "--tiles", metavar="URL", help="read C2SP tlog-tiles at this URL (http, https, file), not gRPC"
)
@click.option("--key", required=True, metavar="VKEY", help="log verifier key name+hexid+base64")
@click.option(
    "--state",
    "state_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="state file (created on first use: trust on first use)",
)
@click.option("--origin", metavar="ORIGIN", help="expected origin (default: the first one seen)")
@click.option("--once", is_flag=True, help="poll once and exit")
@click.option("--full-audit", is_flag=True, help="also re-hash every entry up to the trusted size")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.0, min_open=True),
    metavar="SECONDS",
    default=10.0,
    show_default=True,
    help="seconds between polls",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.0, min_open=True),
    metavar="SECONDS",
    default=30.0,
    show_default=True,
    help="seconds per server call",
)
@witness_options
@json_option
def monitor(
    tiles: str | None,
    key: str,
    state_path: Path,
    origin: str | None,
    once: bool,
    full_audit: bool,
    interval: float,
    timeout: float,
    witnesses: tuple[str, ...],
    min_witnesses: int | None,
    as_json: bool,
    **conn: Any,
) -> None:
    """Follow a log: each new checkpoint must extend the last one trusted (state in --state).

    Reads the log over gRPC (--server, default $LEDGER_SERVER or 127.0.0.1:6962) or, with
    --tiles URL, from its C2SP tlog-tiles.
    """
    given = click.get_current_context().get_parameter_source("server")
    if tiles is not None and given is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError("give exactly one of --server HOST:PORT or --tiles URL")

    def watch(source: LogSource) -> Outcome:
        wits, required = witness_policy(witnesses, min_witnesses)
        mon = Monitor(
            source=source,
            verifier=log_verifiers([key])[0],
            store=StateFile(state_path),
            origin=origin,
            progress=_progress_bar if full_audit else no_progress,
            witnesses=wits,
            min_witnesses=required,
        )
        if once:
            return _poll_once(mon, full_audit)
        return _poll_forever(mon, full_audit, interval, as_json)

    def run() -> Outcome:
        if tiles is not None:
            from ledger_client.remote.tiles import TileClient, TileSource

            return watch(TileSource(TileClient(tiles, timeout=timeout)))
        from ledger_client.remote.log import RemoteLog  # grpc: only when a server is monitored

        with RemoteLog(connection_from(**conn), timeout=timeout) as log:
            return watch(RemoteSource(log))

    finish("monitor", as_json, _reporting_evidence(as_json, run))
