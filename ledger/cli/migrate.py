"""``ledger migrate-storage``: convert a data dir of the per-entry layout, or of tile layout
``tiles-1``, to the current tile layout (``ledger.store.migrate``), in place, while the server
is stopped."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ledger.core.errors import LedgerError

__all__ = ["migrate_storage"]


@click.command("migrate-storage")
@click.option(
    "--db",
    "db_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="the RocksDB directory (DATA_DIR/db)",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="the stopped log's data dir (its RocksDB is <data-dir>/db)",
)
def migrate_storage(db_dir: Path | None, data_dir: Path | None) -> None:
    """Convert a stopped log's data dir to the current storage layout (safe to rerun)."""
    if (db_dir is None) == (data_dir is None):
        click.echo("error: give exactly one of --db DIR or --data-dir DIR", err=True)
        sys.exit(2)
    path = db_dir if db_dir is not None else Path(str(data_dir)) / "db"
    from ledger.store.migrate import migrate

    try:
        size = migrate(path, note=lambda message: click.echo(message, err=True))
    except LedgerError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(f"{path}: tile layout, {size:,} entries")
