"""``ledger witness``: run a c2sp.org/tlog-witness, make its key, show its evidence and state.

* ``ledger witness keygen NAME [--out FILE]``: a tlog-cosignature key (type 0x04, Ed25519
  ``cosignature/v1``; key ID = SHA-256(NAME || 0x0A || 0x04 || key)[:4]); prints the verifier
  key that logs and clients configure (``--witness VKEY``).
* ``ledger witness serve [--config FILE] [--key FILE] [--state-dir DIR] [--listen H:P]
  [--log VKEY ...]``: serve ``POST /add-checkpoint``; ``--log`` adds a log whose origin is its
  key's name. Settings: defaults < the ``[witness]`` table of ``--config`` <
  ``LEDGER_WITNESS_*`` < flags (``ledger.app.settings.WitnessServeSettings``). The first stdout
  line is JSON: address, URL, verifier key, logs.
* ``ledger witness evidence --state-dir DIR [--json]``: the misbehaviour it kept.
* ``ledger witness state --state-dir DIR``: the latest checkpoint cosigned per log.
* ``ledger witnesses --data-dir DIR``: the *log's* view of its witnesses
  (``ledger.log.witnessing``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ledger.cli.keys import create_key_file
from ledger.core.checkpoint import CosignatureSigner, Ed25519Verifier
from ledger.core.errors import FormatError, LedgerError
from ledger_client.clikit.errors import fail

__all__ = ["witness", "witnesses"]


@click.group()
def witness() -> None:
    """Run a tlog-witness that cosigns checkpoints only when they extend what it cosigned."""


@witness.command()
@click.argument("name")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="key file")
@click.option("--force", is_flag=True, help="overwrite an existing key file")
def keygen(name: str, out: Path | None, force: bool) -> None:
    """Create a cosigner key NAME (type 0x04, file mode 0600); print its verifier key."""
    create_key_file(CosignatureSigner, name, out, force, what="witness")


_state_dir = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("witness-data"),
    show_default=True,
    help="the witness's state folder (state journal, evidence)",
)


@witness.command()
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), help="TOML file")
@click.option(
    "--key",
    "key_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="the witness's cosigner key file (type 0x04, `ledger witness keygen`)",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="state folder (state journal, evidence)",
)
@click.option("--listen", help="HOST:PORT (port 0 picks a free port)")
@click.option("--log", "log_keys", multiple=True, metavar="VKEY", help="a log's verifier key")
def serve(
    config: Path | None,
    key_file: Path | None,
    state_dir: Path | None,
    listen: str | None,
    log_keys: tuple[str, ...],
) -> None:
    """Serve POST /add-checkpoint until SIGTERM/SIGINT."""
    import asyncio

    from ledger.app.settings import WitnessLog, load_witness_settings
    from ledger.witness.server import LogKeys, WitnessSettings, run_witness

    try:
        loaded = load_witness_settings(config)
        extra = tuple(
            WitnessLog(origin=Ed25519Verifier.from_key_string(text).name, keys=(text,))
            for text in log_keys
        )
        loaded = loaded.with_overrides(
            {"key_file": "--key", "logs": "--log"},
            key_file=key_file,
            state_dir=state_dir,
            listen=listen,
            logs=loaded.logs + extra,
        )
    except LedgerError as exc:
        fail(str(exc), 2)
    settings = WitnessSettings(
        key_file=loaded.key_file,
        state_dir=loaded.state_dir,
        listen=loaded.listen,
        logs=tuple(LogKeys(origin=log.origin, keys=log.keys) for log in loaded.logs),
        body_timeout_s=loaded.body_timeout_s,
        header_timeout_s=loaded.header_timeout_s,
        max_connections=loaded.max_connections,
        max_per_address=loaded.max_per_address,
    )
    if not settings.logs:
        fail("no log to witness: give --log VKEY or [[witness.log]] entries in --config", 2)

    def ready(opened: Any, port: int) -> None:
        host = settings.listen.rpartition(":")[0]
        line = {
            "event": "serving",
            "address": f"{host}:{port}",
            "url": f"http://{host}:{port}",
            "verifier_key": opened.verifier_key,
            "logs": sorted({log.origin for log in settings.logs}),
            "state_dir": str(settings.state_dir),
        }
        click.echo(json.dumps(line))
        sys.stdout.flush()

    try:
        asyncio.run(run_witness(settings, ready))
    except FormatError as exc:  # a bad key file, listen address or state file
        fail(str(exc), 2)
    except (LedgerError, OSError) as exc:  # the state folder is in use, the port is taken
        fail(str(exc), 1)


@witness.command()
@_state_dir
@click.option("--json", "as_json", is_flag=True, help="print the evidence file as JSON")
def evidence(state_dir: Path, as_json: bool) -> None:
    """Show evidence of misbehaviour: two signed checkpoints that cannot both be honest."""
    from ledger.witness.state import load_evidence

    try:
        doc = load_evidence(state_dir)
    except LedgerError as exc:
        fail(str(exc), 2)
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return
    items = doc["items"]
    click.echo(f"{len(items)} item(s) of evidence ({doc['dropped']} more dropped: bound reached)")
    for item in items:
        click.echo(f"\n{item['kind']} for {item['origin']} (time {item['time']}): {item['detail']}")
        click.echo(f"old size {item['old_size']}, {len(item['proof'])} proof hash(es)")
        click.echo("cosigned checkpoint:\n" + item["cosigned"].rstrip("\n"))
        click.echo("contradicting checkpoint:\n" + item["submitted"].rstrip("\n"))


@witness.command()
@_state_dir
def state(state_dir: Path) -> None:
    """Show the latest checkpoint cosigned for each log (JSON)."""
    from ledger.witness.state import load_records

    try:
        records = load_records(state_dir)
    except LedgerError as exc:
        fail(str(exc), 2)
    out = {r.origin: {"size": r.size, "root_hash": r.root_hash.hex()} for r in records.values()}
    click.echo(json.dumps(out, indent=2, sort_keys=True))


@click.command("witnesses")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("ledger-data"),
    show_default=True,
    help="the log's data folder",
)
def witnesses(data_dir: Path) -> None:
    """The log's view of its witnesses: last cosigned size, last error, quorum latency."""
    from ledger.log.witnessing import load_status

    try:
        click.echo(json.dumps(load_status(data_dir), indent=2, sort_keys=True))
    except LedgerError as exc:
        fail(str(exc), 1)
