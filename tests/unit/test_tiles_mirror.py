"""The static tile mirror and the tile reader over an in-memory store: what is written, in which
order, and what a crash in the middle leaves (never a checkpoint whose tiles are missing)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from ledger.app.settings import Settings, load_settings
from ledger.core import tiles
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import NotFoundError, NotYetPublishedError, StorageError
from ledger.core.types import PublishedCheckpoint
from ledger.http.mirror import TileMirror, write_renamed
from ledger.http.mirror_process import MirrorProcess
from ledger.log.facade import Log
from ledger.log.sequencer import AppendItem
from ledger.store.contract import MemoryStore
from ledger.store.rocks import RocksStore
from ledger.store.tile_reader import TileReader
from ledger_client.remote.tiles import TileClient

ORIGIN = "ledger.test/mirror"


class _Fixture:
    def __init__(self) -> None:
        self.store = MemoryStore()
        self.log = Log(store=self.store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        self.reader = TileReader(store=self.store, published=self.log.latest_checkpoint)

    def grow(self, count: int) -> PublishedCheckpoint:
        for at in range(0, count, 10_000):
            items = [AppendItem(os.urandom(32)) for _ in range(min(10_000, count - at))]
            self.log.append(items)
        return self.log.publish()


@pytest.fixture
def log() -> _Fixture:
    return _Fixture()


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def test_reader_serves_only_the_published_tree(log: _Fixture) -> None:
    with pytest.raises(NotYetPublishedError):
        log.reader.read(tiles.TileID(level=0, index=0, width=1))
    cp = log.grow(300)
    log.log.append([AppendItem(os.urandom(32))])  # sequenced, not published
    assert len(log.reader.read(tiles.TileID(level=0, index=1, width=44))) == 44 * 32
    with pytest.raises(NotFoundError):
        log.reader.read(tiles.TileID(level=0, index=1, width=45))
    with pytest.raises(NotFoundError):
        log.reader.read(tiles.TileID(level=1, index=0, width=2))
    full = log.reader.read(tiles.TileID(level=0, index=0))
    assert log.reader.read(tiles.TileID(level=0, index=0, width=3)) == full[:96]
    bundle = log.reader.read(tiles.TileID(level=0, index=1, width=44, entries=True))
    assert tiles.decode_entry_bundle(bundle, 44) == log.store.get_leaves(range(256, 300))
    assert cp.size == 300


def test_mirror_writes_every_tile_then_the_checkpoint(log: _Fixture, tmp_path: Path) -> None:
    mirror = TileMirror(directory=tmp_path, reader=log.reader, origin=ORIGIN)
    sizes = []
    for count in (5, 300, 1, 70_000):
        cp = log.grow(count)
        sizes.append(cp.size)
        mirror.update([cp])
    files = _files(tmp_path)
    assert files.pop("checkpoint").decode() == cp.note
    want = set().union(*({t.path for t in tiles.tiles_for_size(s)} for s in sizes))
    twins = {path + ".gz" for path in want if path.startswith("tile/entries/")}
    assert twins and set(files) == want | twins  # every entry bundle has its gzip_static twin
    for path in twins:
        assert gzip.decompress(files.pop(path)) == files[path.removesuffix(".gz")], path
    for path, data in files.items():
        assert data == log.reader.read(tiles.parse_tile_path(path)), path
    client = TileClient(tmp_path.as_uri())
    assert client.root(cp.size) == cp.root_hash
    assert mirror.update([cp]) == 0  # nothing new


def test_several_checkpoints_in_one_update_keep_each_partial(log: _Fixture, tmp_path: Path) -> None:
    cps = [log.grow(n) for n in (3, 4, 250, 2)]
    TileMirror(directory=tmp_path, reader=log.reader, origin=ORIGIN).update(cps[::-1])
    names = set(_files(tmp_path))
    for size in (3, 7, 257):
        assert {t.path for t in tiles.tiles_for_size(size)} <= names
    assert (tmp_path / "checkpoint").read_text() == cps[-1].note


def test_a_crash_mid_update_never_publishes_missing_tiles(log: _Fixture, tmp_path: Path) -> None:
    first = log.grow(1000)
    TileMirror(directory=tmp_path, reader=log.reader, origin=ORIGIN).update([first])
    second = log.grow(3000)
    written: list[Path] = []

    def crash_after_ten(path: Path, data: bytes) -> None:
        if len(written) >= 10:
            raise OSError("simulated crash")
        write_renamed(path, data)
        written.append(path)

    crashing = TileMirror(
        directory=tmp_path, reader=log.reader, origin=ORIGIN, write_file=crash_after_ten
    )
    with pytest.raises(OSError, match="simulated"):
        crashing.update([second])
    assert (tmp_path / "checkpoint").read_text() == first.note  # the old checkpoint stands
    assert not list(tmp_path.rglob(".*.tmp"))  # no torn files
    client = TileClient(tmp_path.as_uri())
    assert client.root(first.size) == first.root_hash
    written[-1].write_bytes(b"torn by the crash")  # a tile whose bytes never reached the disk
    torn = written.pop()
    mtimes = {p: p.stat().st_mtime_ns for p in written}
    # restart: a fresh mirror resumes from its checkpoint file and never rewrites a tile
    TileMirror(directory=tmp_path, reader=log.reader, origin=ORIGIN).update([second])
    assert (tmp_path / "checkpoint").read_text() == second.note
    assert all(p.stat().st_mtime_ns == m for p, m in mtimes.items())  # intact: not rewritten
    assert torn.read_bytes() == log.reader.read(
        tiles.parse_tile_path(torn.relative_to(tmp_path).as_posix())
    )
    assert TileClient(tmp_path.as_uri()).root(second.size) == second.root_hash


def test_mirror_refuses_another_logs_folder(log: _Fixture, tmp_path: Path) -> None:
    (tmp_path / "checkpoint").write_text("other.example/log\n5\nAAAA\n\n— x y\n")
    mirror = TileMirror(directory=tmp_path, reader=log.reader, origin=ORIGIN)
    with pytest.raises(StorageError, match="another log"):
        mirror.update([log.grow(3)])


def test_mirror_process_follows_a_primary(tmp_path: Path) -> None:
    """The server's mirror child reads a real RocksDB as a secondary and mirrors each checkpoint."""
    store = RocksStore(tmp_path / "db")
    try:
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        child = MirrorProcess(
            db_dir=tmp_path / "db",
            secondary_dir=tmp_path / "secondary",
            directory=tmp_path / "mirror",
            origin=ORIGIN,
        )
        try:
            for n in (10, 500, 20):
                log.append([AppendItem(os.urandom(32)) for _ in range(n)])
                child.submit(log.publish())
        finally:
            child.stop()
        latest = log.latest_checkpoint()
        assert latest is not None
        assert (tmp_path / "mirror" / "checkpoint").read_text() == latest.note
        assert TileClient((tmp_path / "mirror").as_uri()).root(530) == latest.root_hash
        with pytest.raises(StorageError, match="another log"):
            MirrorProcess(db_dir=tmp_path / "db", secondary_dir=tmp_path / "secondary",
                          directory=tmp_path / "mirror", origin="other.example/log")  # fmt: skip
    finally:
        store.close()


def test_settings_tiles(tmp_path: Path) -> None:
    assert Settings().tiles_address(6962) == "127.0.0.1:6963"
    assert Settings(listen="127.0.0.1:0").tiles_address(41000) == "127.0.0.1:0"
    assert Settings(tiles_listen="off").tiles_address(6962) is None
    config = tmp_path / "c.toml"
    config.write_text('[tiles]\nlisten = "127.0.0.1:8080"\ndir = "mirror"\n')
    settings = load_settings(config)
    assert settings.tiles_listen == "127.0.0.1:8080" and settings.tiles_dir == Path("mirror")
