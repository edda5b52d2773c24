"""``ledger config show`` and ``config init``, and the ``--config`` option with the settings it
gives (``settings_from``: defaults < TOML file < environment < flags, ``ledger.app.settings``,
imported when a command asks for its settings: ``ledger anchor --server`` never loads it)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ledger.core.errors import FormatError
from ledger_client.clikit.errors import fail

if TYPE_CHECKING:
    from ledger.app.settings import Settings

__all__ = ["config_group", "config_init", "config_option", "settings_from"]

config_option = click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML configuration file (default: none, embedded defaults)",
)


def settings_from(
    config: Path | None, flags: Mapping[str, str] | None = None, **overrides: Any
) -> Settings:
    """The settings of ``config`` with the given flags' values (an error names the flag:
    ``flags`` maps a setting to its flag where that is not ``--setting-name``); exit 2 on a
    bad value."""
    from ledger.app.settings import load_settings

    try:
        return load_settings(config).with_overrides(flags, **overrides)
    except FormatError as exc:
        fail(str(exc), 2)


@click.group("config")
def config_group() -> None:
    """Inspect the configuration, or write a commented sample."""


@config_group.command("show")
@config_option
def config_show(config: Path | None) -> None:
    """Print the effective configuration (defaults < TOML file < environment) as JSON."""
    click.echo(json.dumps(settings_from(config).to_dict(), indent=2, sort_keys=True))


@config_group.command("init")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("ledger.toml"),
    show_default=True,
    help="where to write the sample",
)
@click.option("--force", is_flag=True, help="overwrite an existing file")
def config_init(out: Path, force: bool) -> None:
    """Write a commented sample configuration (every option, its range and default)."""
    from ledger.app.settings_sample import sample_toml

    if out.exists() and not force:
        raise FormatError(f"{out} exists; pass --force to overwrite it")
    out.write_text(sample_toml())
    click.echo(f"wrote {out}", err=True)
