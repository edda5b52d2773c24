"""``ledger-verify``: the offline verifier CLI (RFC 9162 proofs, C2SP checkpoints, tlog-proof).

Offline subcommands import neither grpc nor rocksdict; a subcommand that talks to a server
imports grpc lazily inside its body. Exit codes: 0 valid, 1 invalid, 2 usage or malformed input
(set in one place, ``cli_common.finish``).
"""

from __future__ import annotations

import click

from ledger_client import (
    cli_anchor,
    cli_audit,
    cli_index,
    cli_monitor,
    cli_notes,
    cli_proofs,
    cli_receipts,
    cli_tiles,
)
from ledger_client.cli_errors import CliGroup


@click.group(
    cls=CliGroup, context_settings={"help_option_names": ["-h", "--help"], "show_default": True}
)
@click.version_option(package_name="decision-ledger")
def main() -> None:
    """Verify Decision Ledger proofs, checkpoints and receipts offline."""


for _command in (
    cli_proofs.inclusion,
    cli_proofs.consistency,
    cli_notes.checkpoint,
    cli_notes.tlog_proof,
    cli_anchor.anchor,
    cli_monitor.monitor,
    cli_receipts.receipt,
    cli_receipts.run,
    cli_tiles.receipt_fetch,
    cli_tiles.receipt_upgrade,
    *cli_audit.COMMANDS,
    *cli_index.COMMANDS,
):
    main.add_command(_command)
