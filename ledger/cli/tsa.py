"""``ledger tsa``: the embedded development RFC 3161 TSA over HTTP (``ledger.tsa``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ledger_client.clikit.errors import fail

__all__ = ["tsa"]


@click.command()
@click.option("--listen", default="127.0.0.1:3161", show_default=True, help="HOST:PORT")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("ledger-data/tsa"),
    show_default=True,
    help="CA, TSA certificate, keys and serial state",
)
def tsa(listen: str, state_dir: Path) -> None:
    """Run the embedded development RFC 3161 TSA over HTTP.

    It proves nothing to a third party when the log's operator runs it: use it for
    development and tests; production anchors with independent TSAs.
    """
    from ledger.tsa.client import TsaAuthority, TsaServer, run_tsa

    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        fail(f"--listen {listen!r}: want HOST:PORT", 2)

    def ready(server: TsaServer, authority: TsaAuthority) -> None:
        click.echo(json.dumps({"event": "serving", "url": server.url,
                               "root": str(state_dir / "root.pem")}))  # fmt: skip
        sys.stdout.flush()

    run_tsa(host, int(port), state_dir, on_ready=ready)
