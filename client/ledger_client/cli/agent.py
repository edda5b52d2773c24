"""``ledger-verify agent-key`` and ``chain``: agent keys, and the runs an agent opened.

* ``agent-key create NAME --out FILE``: a new Ed25519 agent key (the log's key-file format and
  policy: ``PRIVATE+KEY+...``, created 0600, never overwritten); prints the verifier key
  (``--agent-key`` of ``run``/``chain``) and the agent's chain key (``--chain-key``: finds the
  agent's runs in the log, cannot sign). ``agent-key show FILE`` prints both again.
* ``chain PATH... --tiles URL --key VKEY --chain-key HEX``: reads every entry of the log up to
  its latest checkpoint (verified with ``--key``/``--origin``) from its tiles and reports, for
  the presented runs (receipts files, ``"receipt": null`` lines allowed, e.g. a crashed run
  written from its spool by ``ledger receipt run``), the chains of the agent: gaps (a run
  opened in the log and not presented), forks, runs whose opening is not in the log, runs not
  closed, restarts and each chain's head (``ledger_client.audit.chain``). With
  ``--agent-key`` every presented record's signature is checked too. Exit 0 (warnings such as
  "not closed" or "chain restarted" allowed), 1 gaps/forks/unlogged/bad signatures, 2 usage.

An agent key whose name is the log's origin, a log key's or a witness's is refused (exit 2):
signatures by it could be confused with the log's.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ledger.core.errors import FormatError
from ledger_client.cli.options import agent_verifiers, chain_options
from ledger_client.clikit.keys import log_verifiers, witness_options, witness_policy
from ledger_client.clikit.outcome import EXIT_INVALID, Outcome, finish, json_option

if TYPE_CHECKING:  # the rest is imported where it is used (start-up: ``run`` imports this
    # module for ``chain_verdicts``, which without --tiles needs none of it)
    from ledger.core.jcs import Json
    from ledger.core.note import Ed25519Signer, Ed25519Verifier
    from ledger.records.decision import DecisionRecord
    from ledger_client.audit.chain import ChainReport, ChainRun
    from ledger_client.audit.verdicts import Check

__all__ = ["COMMANDS", "agent_verifiers", "chain_options", "chain_verdicts", "refuse_confusable"]


def refuse_confusable(
    agents: Sequence[Ed25519Verifier],
    origin: str | None,
    log_names: Sequence[str],
    witness_names: Sequence[str],
) -> None:
    """Refuse an agent key named like the log's origin, a log key or a witness (usage)."""
    taken = {n for n in (origin, *log_names) if n}
    for agent in agents:
        if agent.name in taken:
            raise click.BadParameter(
                f"--agent-key {agent.name}: named like the log (origin or log key); refused"
            )
        if agent.name in witness_names:
            raise click.BadParameter(f"--agent-key {agent.name}: named like a witness; refused")


@click.group("agent-key")
def agent_key() -> None:
    """Create or show an agent's signing key (docs/formats.md "Agent signatures")."""


def _key_lines(signer: Ed25519Signer) -> Outcome:
    from ledger.records.agent import agent_chain_key

    vkey = signer.verifier().key_string()
    chain = agent_chain_key(signer).hex()
    details = {"agent_key": vkey, "chain_key": chain, "name": signer.name}
    return Outcome("agent-key", details, [f"agent key: {vkey}", f"chain key: {chain}"])


@agent_key.command("create")
@click.argument("name")
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="the new agent key file (mode 0600; never overwritten)",
)
@json_option
def create(name: str, out: Path, as_json: bool) -> None:
    """Write a new agent key to OUT (0600, never overwritten); print its verifier and chain
    keys."""

    from ledger.core.note import Ed25519Signer
    from ledger.fileio.keys import write_signer

    def run() -> Outcome:
        signer = Ed25519Signer.generate(name)
        try:
            write_signer(out, signer)
        except FileExistsError:
            raise click.BadParameter(f"--out {out} exists; refusing to overwrite a key") from None
        return _key_lines(signer)

    finish("agent-key", as_json, run)


@agent_key.command("show")
@click.argument("key_file", type=click.Path(dir_okay=False, path_type=Path))
@json_option
def show(key_file: Path, as_json: bool) -> None:
    """Print the verifier key and chain key of an agent key file."""
    from ledger.fileio.keys import load_signer

    finish("agent-key", as_json, lambda: _key_lines(load_signer(key_file)))


# --- chain ----------------------------------------------------------------------------------


def _records(path: Path) -> list[DecisionRecord]:
    from ledger.core.jcs import loads_strict
    from ledger.records.decision import DecisionRecord
    from ledger_client.receipts.receipt import Receipt

    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    out = []
    for file in files:
        for number, raw in enumerate(file.read_bytes().splitlines(), 1):
            if not raw.strip():
                continue
            try:
                obj = loads_strict(raw)
                if not isinstance(obj, dict):
                    raise FormatError("expected an object {record, receipt}")
                given = obj.get("record")
                if given is not None:
                    out.append(DecisionRecord.from_json_obj(given))
                    continue
                carried = Receipt.from_json_obj(obj.get("receipt")).record
                if carried is None:
                    raise FormatError("no record (in the line or its receipt)")
                out.append(carried)
            except FormatError as exc:
                raise FormatError(f"{file}:{number}: {exc}") from None
    return out


def presented_runs(paths: Sequence[str]) -> list[tuple[ChainRun, list[DecisionRecord]]]:
    """Each PATH's run: its first record, whether it closed, and all its records."""
    from ledger_client.audit.chain import ChainRun

    runs = []
    for path in paths:
        records = sorted(_records(Path(path)), key=lambda r: r.step)
        by_run: dict[str, list[DecisionRecord]] = {}
        for record in records:
            by_run.setdefault(record.run_id, []).append(record)
        for run_records in by_run.values():
            first = run_records[0]
            if first.step != 0:
                raise FormatError(f"{path}: run {first.run_id} has no step 0 record")
            closed = any(r.kind == "run_closed" for r in run_records)
            runs.append((ChainRun(first=first, closed=closed, source=path), run_records))
    return runs


def _chain_key(text: str) -> bytes:
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        key = b""
    if len(key) != 32:
        raise click.BadParameter("--chain-key: 64 hex digits (`ledger-verify agent-key show`)")
    return key


@click.command("chain")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--tiles", required=True, metavar="URL", help="the log's C2SP tlog-tiles base URL")
@click.option("--key", "keys", multiple=True, required=True, metavar="VKEY", help="log key")
@click.option("--origin", metavar="ORIGIN", help="expected checkpoint origin")
@click.option("--chain-key", required=True, metavar="HEX", help="the agent's chain key")
@click.option("--agent-key", "agent_keys", multiple=True, metavar="VKEY", help="agent key; repeat")
@witness_options
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.0, min_open=True),
    default=30.0,
    help="seconds for each request to the tiles endpoint",
)
@json_option
def chain(
    paths: tuple[str, ...],
    tiles: str,
    keys: tuple[str, ...],
    origin: str | None,
    chain_key: str,
    agent_keys: tuple[str, ...],
    witnesses: tuple[str, ...],
    min_witnesses: int | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Find every run the agent opened in the log: gaps, forks, restarts, chain heads."""

    def run() -> Outcome:
        from ledger.core.types import decode_leaf
        from ledger_client.audit.chain import scan_chains
        from ledger_client.remote.tiles import TileClient

        verifiers = log_verifiers(keys)
        wits, _ = witness_policy(witnesses, min_witnesses)
        agents = agent_verifiers(agent_keys)
        refuse_confusable(agents, origin, [k.name for k in verifiers], [w.name for w in wits])
        secret = _chain_key(chain_key)
        runs = presented_runs(paths)
        client = TileClient(tiles, timeout=timeout)
        size = client.checkpoint(verifiers, origin=origin).checkpoint.size
        leaves = client.leaves(0, size, size)
        entries = ((i, decode_leaf(i, leaf).record_digest) for i, leaf in enumerate(leaves))
        report = scan_chains(entries, secret, [r for r, _ in runs])
        details: dict[str, Json] = {"tree_size": size, **report.to_json_obj()}
        lines = [f"log: {size} entries read from {tiles}", *report.lines()]
        bad_signatures = _signatures(runs, agents, lines) if agents else []
        details["signatures"] = bad_signatures
        if not report.ok or bad_signatures:
            _invalid(as_json, details, lines)
        return Outcome("chain", details, lines)

    finish("chain", as_json, run)


def _signatures(
    runs: list[tuple[ChainRun, list[DecisionRecord]]],
    agents: Sequence[Ed25519Verifier],
    lines: list[str],
) -> list[Json]:
    from ledger.records.agent import verify_record_signature

    bad: list[Json] = []
    for run, records in runs:
        for record in records:
            problem, _ = verify_record_signature(record, agents)
            if problem is not None:
                where = f"run {record.run_id} step {record.step} [{run.source}]"
                bad.append({"code": "signature", "message": f"{where}: {problem}"})
                lines.append(f"  signature: {where}: {problem}")
    return bad


def _invalid(as_json: bool, details: dict[str, Json], lines: list[str]) -> None:
    summary = "runs withheld, forked, unlogged or badly signed"
    if as_json:
        click.echo(json.dumps({**details, "valid": False, "check": "chain", "error": summary}))
    else:
        click.echo("\n".join([f"INVALID: {summary}", *lines]), err=True)
    sys.exit(EXIT_INVALID)


def chain_verdicts(
    paths: Sequence[str],
    tiles: str | None,
    chain_key: str | None,
    keys: Sequence[str],
    origin: str | None,
    *,
    timeout: float = 30.0,
    skip_unreadable: bool = False,
) -> tuple[dict[str, Check], ChainReport | None, int | None]:
    """Each presented run's chain check (run id -> check), the scan's report and the tree
    size read, from the log's tiles (``--tiles``/``--chain-key``; both or neither).
    ``skip_unreadable``: a file that does not load is left out (``index`` records it)."""
    if tiles is None and chain_key is None:
        return {}, None, None
    if tiles is None or chain_key is None:
        raise click.BadParameter("--tiles and --chain-key go together")
    from ledger.core.types import decode_leaf
    from ledger_client.audit.chain import scan_chains
    from ledger_client.remote.tiles import TileClient

    secret = _chain_key(chain_key)
    if skip_unreadable:
        runs = []
        for path in paths:
            try:
                runs += presented_runs([path])
            except (FormatError, OSError):
                continue
    else:
        runs = presented_runs(paths)
    client = TileClient(tiles, timeout=timeout)
    size = client.checkpoint(log_verifiers(keys), origin=origin).checkpoint.size
    leaves = client.leaves(0, size, size)
    entries = ((i, decode_leaf(i, leaf).record_digest) for i, leaf in enumerate(leaves))
    report = scan_chains(entries, secret, [r for r, _ in runs])
    return dict(report.run_checks), report, size


COMMANDS = (agent_key, chain)
