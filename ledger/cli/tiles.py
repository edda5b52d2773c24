"""``ledger tiles export``: build or catch up a static C2SP tlog-tiles mirror from a stopped log,
in a folder (``--out``) or in an S3-compatible bucket (``--bucket``, ``ledger.objstore``: the
bucket must have passed ``ledger objstore check``; it resumes from the bucket's checkpoint).

The mirror (``ledger.http.mirror``) is written crash-safely and resumes from its own
``checkpoint`` file, so an interrupted export is simply run again. RocksDB allows one process
per data dir: while the server runs, configure ``[tiles] dir`` instead (it mirrors after each
checkpoint). Exit codes: 0 ok, 1 the store or the folder refused, 2 usage.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ledger.core.errors import FormatError, LedgerError, StorageError

if TYPE_CHECKING:
    from ledger.app.settings import Settings
    from ledger.core.types import PublishedCheckpoint
    from ledger.store.rocks import RocksStore

__all__ = ["tiles_group"]


@click.group("tiles")
def tiles_group() -> None:
    """C2SP tlog-tiles: the static mirror."""


@contextmanager
def _checked_store(settings: Settings) -> Iterator[tuple[RocksStore, PublishedCheckpoint]]:
    """The stopped log's store and its latest checkpoint, whose root the stored tree matches."""
    from ledger.core import merkle
    from ledger.store.rocks import RocksStore

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
        yield store, latest
    finally:
        store.close()


def _export(data_dir: Path | None, config: Path | None, out: Path) -> tuple[int, int, int]:
    """Mirror the latest checkpoint into ``out``; return (old size, new size, files written)."""
    from ledger.app.settings import load_settings
    from ledger.core.tiles import new_tiles
    from ledger.http.mirror import TileMirror
    from ledger.store.tile_reader import TileReader

    settings = load_settings(config).with_overrides(data_dir=data_dir)
    with _checked_store(settings) as (store, latest):
        reader = TileReader(store=store, published=lambda: latest)
        mirror = TileMirror(directory=out, reader=reader, origin=latest.origin)
        old = mirror.mirrored_size()
        if old > latest.size:
            raise StorageError(f"{out} mirrors size {old}, beyond the log's {latest.size}")
        total = len(new_tiles(old, latest.size))
        with click.progressbar(length=total, label="writing tiles", file=sys.stderr) as bar:
            written = mirror.update([latest], progress=bar.update)
        return old, latest.size, written


def _export_bucket(
    data_dir: Path | None, config: Path | None, url: str, endpoint: str | None, region: str | None
) -> tuple[int, int, int]:
    """Publish the latest checkpoint to the bucket; return (old size, new size, objects)."""
    from ledger.app.settings import load_settings
    from ledger.cli.objstore import bucket_address
    from ledger.core.tiles import new_tiles
    from ledger.objstore.bucket import Bucket
    from ledger.objstore.publisher import BucketPublisher
    from ledger.store.tile_reader import TileReader

    settings = load_settings(config).with_overrides(data_dir=data_dir)
    address = bucket_address(config, url, endpoint, region)
    with _checked_store(settings) as (store, latest):
        publisher = BucketPublisher(
            bucket=Bucket(address),
            reader=TileReader(store=store, published=lambda: latest),
            origin=latest.origin,
            notes=store.get_checkpoint,
            anchors=store.get_anchors,
        )
        try:
            publisher.require_conforming()
            old = publisher.published_size()
            if old > latest.size:
                raise StorageError(
                    f"{address.url} holds size {old}, beyond the log's {latest.size}"
                )
            total = len(new_tiles(old, latest.size))
            with click.progressbar(length=total, label="uploading tiles", file=sys.stderr) as bar:
                done = publisher.update([latest], progress=bar.update)
            publisher.publish_anchors(store.anchored_sizes(1000))
        finally:
            publisher.close()
        return old, latest.size, done.created


@tiles_group.command("export")
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), help="TOML file")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), help="log data dir")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="mirror folder")
@click.option("--bucket", "url", help="s3://BUCKET[/PREFIX]: upload to object storage instead")
@click.option("--endpoint", help="S3-compatible endpoint (default: [object_store] endpoint)")
@click.option("--region", help="the bucket's region (default: [object_store] region)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def export(
    config: Path | None,
    data_dir: Path | None,
    out: Path | None,
    url: str | None,
    endpoint: str | None,
    region: str | None,
    as_json: bool,
) -> None:
    """Write (or catch up) the tile mirror of a stopped log in --out, or upload it to --bucket."""
    if data_dir is None and config is None:
        raise click.UsageError("give --data-dir DIR (or --config FILE)")
    if (out is None) == (url is None):
        raise click.UsageError("give either --out DIR or --bucket s3://BUCKET[/PREFIX]")
    try:
        if url is not None:
            old, size, written = _export_bucket(data_dir, config, url, endpoint, region)
        else:
            assert out is not None
            old, size, written = _export(data_dir, config, out)
    except FormatError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except (LedgerError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    where = str(out) if url is None else url
    if as_json:
        click.echo(json.dumps({"from_size": old, "size": size, "files": written, "out": where}))
    else:
        click.echo(f"mirror {where}: size {old} -> {size}, {written} file(s) written")
