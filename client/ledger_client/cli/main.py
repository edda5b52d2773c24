"""``ledger-verify``: the offline verifier CLI (RFC 9162 proofs, C2SP checkpoints, tlog-proof).

Offline subcommands import neither grpc nor rocksdict; a subcommand that talks to a server
imports grpc lazily inside its body. Exit codes: 0 valid, 1 invalid, 2 usage or malformed input
(set in one place, ``ledger_client.clikit.outcome.finish``).

Start-up: a subcommand's module is imported when that subcommand runs (``COMMANDS``: name ->
module and attribute), so ``ledger-verify lineage`` does not load the report, the monitor or
the tiles client. ``main.commands`` (help, the docs' checks) loads every subcommand.
"""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping
from typing import Any

import click

from ledger_client.clikit.errors import CliGroup

__all__ = ["COMMANDS", "main"]

# subcommand -> (module of ledger_client.cli, its click command); listed in help by name
COMMANDS: dict[str, tuple[str, str]] = {
    "inclusion": ("proofs", "inclusion"),
    "consistency": ("proofs", "consistency"),
    "checkpoint": ("notes", "checkpoint"),
    "tlog-proof": ("notes", "tlog_proof"),
    "anchor": ("anchor", "anchor"),
    "monitor": ("monitor", "monitor"),
    "receipt": ("receipts", "receipt"),
    "run": ("receipts", "run"),
    "receipt-fetch": ("tiles", "receipt_fetch"),
    "receipt-upgrade": ("tiles", "receipt_upgrade"),
    "lineage": ("audit", "lineage"),
    "report": ("audit", "report"),
    "export": ("audit", "export"),
    "disclose": ("audit", "disclose"),
    "index": ("index", "index"),
    "query": ("index", "query"),
    "agent-key": ("agent", "agent_key"),
    "chain": ("agent", "chain"),
}


def load_command(name: str) -> click.Command:
    """The subcommand ``name`` (``COMMANDS``), its module imported now."""
    module, attribute = COMMANDS[name]
    command = getattr(importlib.import_module(f"ledger_client.cli.{module}"), attribute)
    assert isinstance(command, click.Command) and command.name == name, name
    return command


class _LazyGroup(CliGroup):
    """``CliGroup`` whose subcommands are imported when first asked for (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._loaded: dict[str, click.Command] = {}
        super().__init__(*args, **kwargs)

    @property
    def commands(self) -> MutableMapping[str, click.Command]:
        """Every subcommand (each module imported)."""
        for name in COMMANDS:
            self._command(name)
        return self._loaded

    @commands.setter
    def commands(self, value: MutableMapping[str, click.Command]) -> None:
        self._loaded.update(value)

    def _command(self, name: str) -> click.Command | None:
        found = self._loaded.get(name)
        if found is None and name in COMMANDS:
            found = self._loaded[name] = load_command(name)
        return found

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._command(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self._loaded})


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
)
@click.version_option(package_name="decision-ledger")
def main() -> None:
    """Verify Decision Ledger proofs, checkpoints and receipts offline."""
