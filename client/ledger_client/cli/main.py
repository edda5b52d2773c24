"""``ledger-verify``: the offline verifier CLI (RFC 9162 proofs, C2SP checkpoints, tlog-proof).

Offline subcommands import neither grpc nor rocksdict; a subcommand that talks to a server
imports grpc lazily inside its body. Exit codes: 0 valid, 1 invalid, 2 usage or malformed input
(set in one place, ``ledger_client.clikit.outcome.finish``).
"""

from __future__ import annotations

import click

from ledger_client.cli import agent as cli_agent
from ledger_client.cli import anchor as cli_anchor
from ledger_client.cli import audit as cli_audit
from ledger_client.cli import index as cli_index
from ledger_client.cli import monitor as cli_monitor
from ledger_client.cli import notes as cli_notes
from ledger_client.cli import proofs as cli_proofs
from ledger_client.cli import receipts as cli_receipts
from ledger_client.cli import tiles as cli_tiles
from ledger_client.clikit.errors import CliGroup


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
    *cli_agent.COMMANDS,
):
    main.add_command(_command)
