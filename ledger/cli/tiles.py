"""``ledger tiles export``: build or catch up a static C2SP tlog-tiles mirror from a stopped log.

The mirror (``ledger.http.mirror``) is written crash-safely and resumes from its own
``checkpoint`` file, so an interrupted export is simply run again. RocksDB allows one process
per data dir: while the server runs, configure ``[tiles] dir`` instead (it mirrors after each
checkpoint). Exit codes: 0 ok, 1 the store or the folder refused, 2 usage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ledger.app.settings import load_settings
from ledger.core.errors import FormatError, LedgerError, StorageError

__all__ = ["tiles_group"]


@click.group("tiles")
def tiles_group() -> None:
    """C2SP tlog-tiles: the static mirror."""


def _export(data_dir: Path | None, config: Path | None, out: Path) -> tuple[int, int, int]:
    """Mirror the latest checkpoint into ``out``; return (old size, new size, files written)."""
    from ledger.core import merkle
    from ledger.core.tiles import new_tiles
    from ledger.http.mirror import TileMirror
    from ledger.store.rocks import RocksStore
    from ledger.store.tile_reader import TileReader

    settings = load_settings(config).with_overrides(data_dir=data_dir)
    if not (settings.db_dir / "CURRENT").is_file():
        raise FormatError(f"{settings.data_dir} holds no log (no RocksDB in {settings.db_dir})")
    store = RocksStore(settings.db_dir)
    try:
        latest = store.latest_checkpoint()
        if latest is None:
            raise StorageError(f"{settings.db_dir}: no checkpoint has been published yet")
        root = merkle.fold_proof_nodes([merkle.subtree_node(0, latest.size)], store.get_nodes)
        if latest.size and root[0] != latest.root_hash:
            raise StorageError(f"stored tree at size {latest.size} does not match its checkpoint")
        reader = TileReader(store=store, published=lambda: latest)
        mirror = TileMirror(directory=out, reader=reader, origin=latest.origin)
        old = mirror.mirrored_size()
        if old > latest.size:
            raise StorageError(f"{out} mirrors size {old}, beyond the log's {latest.size}")
        total = len(new_tiles(old, latest.size))
        with click.progressbar(length=total, label="writing tiles", file=sys.stderr) as bar:
            written = mirror.update([latest], progress=bar.update)
        return old, latest.size, written
    finally:
        store.close()


@tiles_group.command("export")
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), help="TOML file")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), help="log data dir")
@click.option(
    "--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="mirror folder"
)
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def export(config: Path | None, data_dir: Path | None, out: Path, as_json: bool) -> None:
    """Write (or catch up) the tile mirror of a stopped log in --out."""
    if data_dir is None and config is None:
        raise click.UsageError("give --data-dir DIR (or --config FILE)")
    try:
        old, size, written = _export(data_dir, config, out)
    except FormatError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except (LedgerError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps({"from_size": old, "size": size, "files": written, "out": str(out)}))
    else:
        click.echo(f"mirror {out}: size {old} -> {size}, {written} file(s) written")
