"""``ledger anchor``: anchor the latest checkpoint now, through the running server or on a
stopped log's data dir."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ledger.cli.config import config_option, settings_from
from ledger.core.errors import LedgerError
from ledger_client.clikit.connection import connection_from, connection_options
from ledger_client.clikit.errors import fail

if TYPE_CHECKING:
    from ledger.app.settings import Settings

__all__ = ["anchor"]


@click.command()
@config_option
@connection_options
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="work on a stopped log's data dir instead of a server")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--wait", is_flag=True, help="return once an anchor is stored (asking again)")
@click.option("--timeout", type=click.FloatRange(0), default=120.0, help="--wait limit, seconds")
def anchor(
    config: Path | None,
    data_dir: Path | None,
    as_json: bool,
    wait: bool,
    timeout: float,
    **conn: Any,
) -> None:
    """Anchor the latest checkpoint now with every configured TSA (for cron).

    By default, ask the running server (its AnchorNow RPC: an admin call, so give a token
    with the admin scope unless the server is an open development log). With --data-dir (or
    --config), work on the store directly: only while the server is stopped (RocksDB allows
    one process per data dir). A checkpoint is never stamped twice by the same TSA. With
    --wait, ask again (backing off) until an anchor of that checkpoint or a later one is stored.
    """
    source = click.get_current_context().get_parameter_source("server")
    local = data_dir is not None or config is not None
    if local and source is click.core.ParameterSource.COMMANDLINE:
        fail("give exactly one of --server ADDR or --data-dir DIR (or --config FILE)", 2)
    size, stored, failures = _anchor_waiting(config, data_dir, conn if not local else None, wait,
                                             timeout)  # fmt: skip
    if as_json:
        click.echo(json.dumps({"size": size, "anchored": stored, "failures": failures}))
    else:
        click.echo(f"checkpoint size {size}: anchored by {', '.join(stored) or 'no new TSA'}")
        for failure in failures:
            click.echo(f"failed: {failure}", err=True)
    sys.exit(1 if failures and not stored else 0)


def _anchor_waiting(
    config: Path | None,
    data_dir: Path | None,
    conn: dict[str, Any] | None,
    wait: bool,
    timeout: float,
) -> tuple[int, list[str], list[str]]:
    from ledger.cli.receipt import anchored_local, anchored_remote, wait_for_anchor

    once: Callable[[], tuple[int, list[str], list[str]]]
    if conn is not None:
        connection = connection_from(**conn)
        once, stored_from = (
            partial(_anchor_remote, connection),
            partial(anchored_remote, connection),
        )
    else:
        settings = settings_from(config, data_dir=data_dir)
        once, stored_from = (
            partial(_anchor_local, settings),
            partial(anchored_local, settings.db_dir),
        )
    if not wait:
        return once()
    try:
        return wait_for_anchor(once, stored_from, timeout=timeout)
    except TimeoutError as exc:
        fail(str(exc), 1)


def _anchor_remote(connection: Any) -> tuple[int, list[str], list[str]]:
    from ledger_client.remote.log import RemoteLog

    try:
        with RemoteLog(connection, timeout=120) as remote:
            size, anchors, failures = remote.anchor_now()
    except LedgerError as exc:
        fail(str(exc), 1)
    return size, [a.tsa for a in anchors], failures


def _anchor_local(settings: Settings) -> tuple[int, list[str], list[str]]:
    from ledger.app.tsa_setup import setup_tsas
    from ledger.fileio.keys import load_signer
    from ledger.log.anchoring import Anchorer
    from ledger.log.facade import Log
    from ledger.log.highwater import HighWaterMark
    from ledger.store.rocks import RocksStore

    try:
        store = RocksStore(settings.db_dir)
    except LedgerError as exc:
        fail(f"{exc} (is the server running? then use --server)", 1)
    try:
        # the same check as `ledger serve` at start: a tree behind or off its high-water mark
        # (a rolled-back or another log's data dir) is refused before anything is stamped
        mark = HighWaterMark(settings.high_water_file)
        signer = load_signer(settings.signer_key_file)
        # the key names its log (`ledger serve` refuses any other origin)
        log = Log(store=store, signer=signer, origin=signer.name, mark=mark)
        tsas = setup_tsas(settings)
        try:
            outcome = Anchorer(log=log, tsas=tsas.targets).anchor_latest()
        finally:
            tsas.close()
    except LedgerError as exc:
        fail(str(exc), 1)
    finally:
        store.close()
    return outcome.size, [a.tsa for a in outcome.anchors], outcome.failures
