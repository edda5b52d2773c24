"""The command group of both CLIs: a subcommand's module is imported when that subcommand runs.

A table names each subcommand's module, its click command and its first help paragraph, so
``ledger --help`` and ``ledger-verify --help`` list every subcommand without importing any of
their modules (click itself aside, a CLI then starts in a few tens of milliseconds).
``group.commands`` imports every module (the docs' checks and the tests walk the whole tree);
a test holds each table entry equal to its command (name, module, short help at every width).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping
from gettext import gettext as _
from typing import Any

import click

from ledger_client.clikit.errors import CliGroup

__all__ = ["CommandTable", "LazyGroup", "short_help"]

CommandTable = Mapping[str, tuple[str, str, str]]
"""Subcommand name -> (its module, the attribute holding its click command, its help's first
paragraph: what ``--help`` shortens to the terminal's width)."""


def short_help(table: CommandTable, name: str, limit: int) -> str:
    """The one line ``--help`` shows for ``name``, as click makes it from the command's help."""
    return click.Command(name, help=table[name][2]).get_short_help_str(limit)


class LazyGroup(CliGroup):
    """``CliGroup`` whose subcommands (``table``) are imported when first asked for."""

    def __init__(self, *args: Any, table: CommandTable, **kwargs: Any) -> None:
        self._table = table
        self._loaded: dict[str, click.Command] = {}
        super().__init__(*args, **kwargs)

    @property
    def commands(self) -> MutableMapping[str, click.Command]:
        """Every subcommand (each module imported)."""
        for name in self._table:
            self._command(name)
        return self._loaded

    @commands.setter
    def commands(self, value: MutableMapping[str, click.Command]) -> None:
        self._loaded.update(value)

    def load(self, name: str) -> click.Command:
        """The subcommand ``name`` of the table, its module imported now."""
        module, attribute, _ = self._table[name]
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command) and command.name == name, name
        return command

    def _command(self, name: str) -> click.Command | None:
        found = self._loaded.get(name)
        if found is None and name in self._table:
            found = self._loaded[name] = self.load(name)
        return found

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._command(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self._table, *self._loaded})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's list of subcommands, each line from the table unless its module is loaded."""
        names = [n for n in self.list_commands(ctx) if not self._hidden(n)]
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)  # as click's own
        rows = []
        for name in names:
            loaded = self._loaded.get(name)
            if loaded is not None:
                rows.append((name, loaded.get_short_help_str(limit)))
            else:
                rows.append((name, short_help(self._table, name, limit)))
        with formatter.section(_("Commands")):
            formatter.write_dl(rows)

    def _hidden(self, name: str) -> bool:
        loaded = self._loaded.get(name)
        return loaded is not None and loaded.hidden
