"""``ledger restore``: status, accept and catch-up after a rollback of the data dir
(docs/operating.md "Faults, rollbacks and restore"; ``ledger.log.recovery`` holds the rules). Run
with the server stopped (RocksDB allows one process per data dir). Exit codes: 0 ok /
consistent, 1 refused or not consistent, 2 usage.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ledger.cli.ops import restore_command
from ledger.core.errors import LedgerError
from ledger_client.clikit.errors import fail

if TYPE_CHECKING:
    from ledger.app.settings import Settings

__all__ = ["restore"]

PAGE = 1_000


def _settings(config: Path | None, data_dir: Path | None, mark_file: Path | None) -> Settings:
    from ledger.app.settings import load_settings  # pydantic: only for a command that reads it

    try:
        return load_settings(config).with_overrides(data_dir=data_dir, mark_file=mark_file)
    except LedgerError as exc:
        fail(str(exc), 2)


def _options(fn: Any) -> Any:
    fn = click.option(
        "--mark-file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="the published high-water mark (default <data_dir>.high-water)",
    )(fn)
    fn = click.option(
        "--data-dir", type=click.Path(file_okay=False, path_type=Path), help="the log's data dir"
    )(fn)
    return click.option(
        "--config", type=click.Path(dir_okay=False, path_type=Path), help="TOML configuration"
    )(fn)


@contextmanager
def _store(path: Path, wal_recovery: str = "strict") -> Iterator[Any]:
    from ledger.store.rocks import RocksStore

    if not path.is_dir():
        fail(f"no data dir at {path}", 2)
    try:
        store = RocksStore(path, wal_recovery=wal_recovery)
    except LedgerError as exc:
        fail(str(exc), 1)
    try:
        yield store
    finally:
        store.close()


@click.group()
def restore() -> None:
    """Inspect and repair a data dir that fell behind its published high-water mark."""


@restore.command()
@_options
def status(config: Path | None, data_dir: Path | None, mark_file: Path | None) -> None:
    """Compare the data dir's tree with the published high-water mark."""
    from ledger.log.highwater import HighWaterMark
    from ledger.log.selfcheck import root_at

    settings = _settings(config, data_dir, mark_file)
    mark = HighWaterMark(settings.high_water_file)
    with _store(settings.db_dir) as store:
        try:
            state = mark.read()
        except LedgerError as exc:
            fail(str(exc), 1)
        size = store.load_state().size
        click.echo(f"tree size:       {size}")
        if state is None:
            click.echo(f"high-water mark: none at {mark.path}")
            return
        cp = state.checkpoint
        click.echo(f"high-water mark: size {cp.size}, root {cp.root_hash.hex()} ({mark.path})")
        if state.restore is not None:
            click.echo(f"restore accepted at tree size {state.restore.tree_size}: read-only")
        if size < cp.size:
            fail(
                f"behind the mark by {cp.size - size} entries: `ledger restore` accept/catch-up", 1
            )
        if root_at(store.get_nodes, cp.size) != cp.root_hash:
            fail("the tree is not the published one (different root at the mark's size)", 1)
    click.echo("consistent with the mark")


@restore.command()
@_options
@click.option(
    "--salvage-wal", is_flag=True, help="open a damaged WAL keeping the records before the damage"
)
def accept(
    config: Path | None, data_dir: Path | None, mark_file: Path | None, salvage_wal: bool
) -> None:
    """Accept the data dir as it is: the log starts read-only until `catch-up` completes."""
    from ledger.log.highwater import AckedSize, HighWaterMark, MarkState, RestoreRecord, acked_path
    from ledger.log.selfcheck import root_at

    settings = _settings(config, data_dir, mark_file)
    mark = HighWaterMark(settings.high_water_file)
    acked = AckedSize(acked_path(mark.path))
    with _store(settings.db_dir, "salvage" if salvage_wal else "strict") as store:
        size = store.load_state().size
        try:
            recorded = acked.read()
            if recorded is not None and size < recorded:
                acked.write(size)
                click.echo(
                    f"accepted the loss of entries {size}..{recorded - 1} (acknowledged, missing "
                    f"from the data dir): {acked.path} now says {size}"
                )
        finally:
            acked.close()
        state = mark.read()
        if state is None:
            latest = store.latest_checkpoint()
            if latest is None:
                fail(f"no high-water mark at {mark.path} and no stored checkpoint", 2)
                return
            mark.write(MarkState(checkpoint=latest))
            click.echo(
                f"accepted without a mark: recorded the stored checkpoint {latest.size} in "
                f"{mark.path}; the log starts read-write"
            )
            return
        cp = state.checkpoint
        if size >= cp.size:
            if root_at(store.get_nodes, cp.size) != cp.root_hash:
                fail("the tree is not the published one; accepting it cannot make it consistent", 1)
            click.echo("the tree already reaches the mark: nothing to accept")
            return
        record = RestoreRecord(tree_size=size, accepted_ms=time.time_ns() // 1_000_000)
        mark.write(MarkState(checkpoint=cp, restore=record))
    click.echo(
        f"accepted: tree size {size}, {cp.size - size} entries behind the mark; the log will "
        "serve reads only until `ledger restore catch-up` brings the missing entries back"
    )


@restore.command("catch-up")
@_options
@click.option(
    "--from-data-dir",
    "source_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="a stopped copy of this log that has the missing entries",
)
@click.option("--from-server", "source_server", help="HOST:PORT of a server of this log")
@click.option(
    "--from-tiles",
    "source_tiles",
    help="URL (http(s):// or file://) of any copy of this log's published tiles",
)
def catch_up(
    config: Path | None,
    data_dir: Path | None,
    mark_file: Path | None,
    source_dir: Path | None,
    source_server: str | None,
    source_tiles: str | None,
) -> None:
    """Copy the missing entries verbatim from another copy of this log, checked against the
    mark's root (and, from tiles, the tiles' verified checkpoint) before any is stored; then
    the log is read-write again."""
    from ledger.fileio.keys import load_signer
    from ledger.log.facade import Log
    from ledger.log.highwater import HighWaterMark

    if sum(s is not None for s in (source_dir, source_server, source_tiles)) != 1:
        fail(
            "give exactly one of --from-data-dir DIR, --from-server HOST:PORT or --from-tiles URL",
            2,
        )
    settings = _settings(config, data_dir, mark_file)
    with _store(settings.db_dir) as store:
        try:
            signer = load_signer(settings.signer_key_file)
            mark = HighWaterMark(settings.high_water_file)
            log = Log(store=store, signer=signer, origin=settings.origin, mark=mark)
            if source_tiles is not None:
                target, leaves = _leaves_from_tiles(source_tiles, signer, settings.origin, log.size)
                if log.read_only is None and target.size <= log.size:
                    click.echo("the tiles hold nothing beyond this tree: nothing to catch up")
                    return
                cp = log.catch_up(leaves, target)
                click.echo(f"caught up from tiles: tree size {log.size} (checkpoint {cp.size})")
                return
            if log.read_only is None:
                click.echo("the tree is consistent with the mark: nothing to catch up")
                return
            leaves = _leaves_from(source_dir, source_server, log.size)
            cp = log.catch_up(leaves)
        except LedgerError as exc:
            fail(str(exc), 1)
    click.echo(f"caught up: tree size {log.size}, consistent with the mark (size {cp.size})")


def _leaves_from(source_dir: Path | None, source_server: str | None, start: int) -> list[bytes]:
    if source_dir is not None:
        with _store(source_dir / "db" if (source_dir / "db").is_dir() else source_dir) as src:
            end = src.load_state().size
            return [
                leaf
                for at in range(start, end, PAGE)
                for leaf in src.get_leaves(range(at, min(at + PAGE, end)))
            ]
    from ledger_client.remote.log import RemoteLog

    assert source_server is not None
    leaves: list[bytes] = []
    try:
        with RemoteLog(source_server, timeout=60) as remote:
            end = remote.checkpoint().size
            while start + len(leaves) < end:
                leaves.extend(e.leaf for e in remote.entries(start + len(leaves), PAGE))
    except LedgerError as exc:
        fail(f"{source_server}: {exc}", 1)
    return leaves


def _leaves_from_tiles(url: str, signer: Any, origin: str, start: int) -> tuple[Any, list[bytes]]:
    """The tiles' checkpoint (verified with this log's key) and its leaves from ``start``."""
    from ledger.core.types import PublishedCheckpoint
    from ledger_client.remote.tiles import TileClient

    client = TileClient(url)
    note = client.checkpoint_note()
    verified = client.checkpoint([signer.verifier()], origin=origin).checkpoint
    target = PublishedCheckpoint(
        origin=verified.origin, size=verified.size, root_hash=verified.root_hash, note=note
    )
    leaves: list[bytes] = []
    while start + len(leaves) < target.size:
        at = start + len(leaves)
        leaves.extend(client.leaves(at, min(PAGE, target.size - at), target.size))
    return target, leaves


restore.add_command(restore_command)  # from-backup (ledger.cli.ops)
