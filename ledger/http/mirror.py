"""A static C2SP tlog-tiles mirror: the log as files in exactly the URL layout, for nginx, an
object-store sync or a CDN origin to serve with no Python on the read path.

``TileMirror.update(checkpoints)`` writes, for each published checkpoint in turn, every tile its
tree has that the previous one did not (newly full tiles and the new partial tiles of every
level, hash tiles and entry bundles), then the newest checkpoint as ``checkpoint``:

* crash safety: each tile goes to a temporary file in its folder and is renamed into place;
  then one ``syncfs`` (``sync`` where there is none) makes every tile and folder of the update
  durable at once (one journal commit per update, not one fsync per file); only then is the
  checkpoint written (temporary file, fsync, rename, fsync of the folder). So after a crash at
  any instant a reader never sees a checkpoint whose tiles are missing or torn;
* every entry bundle also gets a ``.gz`` twin (``ledger.core.tiles.gzip_bundle``, the bytes the
  HTTP endpoint sends) for nginx ``gzip_static``, written before the bundle itself;
* full tiles are written once and never rewritten; every partial tile is kept (``.p/W`` for
  each checkpoint size, as the HTTP endpoint keeps serving it). A tile file found already in
  place (left by an update that crashed before its checkpoint) is kept when its bytes are right
  and replaced when a crash tore it;
* the mirror resumes from the size in its ``checkpoint`` file; a folder holding another log's
  checkpoint is refused.

A running server mirrors from a process of its own (``ledger.http.mirror_process``), taking
every checkpoint published since its last update at once (so it never falls behind by more than
one update); ``ledger tiles export`` runs the same update on a stopped log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path

from ledger.core import tiles
from ledger.core.errors import StorageError
from ledger.core.types import PublishedCheckpoint
from ledger.fileio.durable import sync_filesystem, write_file
from ledger.store.tile_reader import TileReader

__all__ = ["TileMirror", "gz_twin", "write_renamed"]

FileWriter = Callable[[Path, bytes], None]
Progress = Callable[[int], None]


def write_renamed(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (temp file, rename); durable after ``syncfs``."""
    write_file(path, data, mode=0o644, sync=False)


class TileMirror:
    """The mirror in ``directory`` of the log that ``reader`` reads."""

    def __init__(
        self,
        *,
        directory: Path,
        reader: TileReader,
        origin: str,
        write_file: FileWriter = write_renamed,
    ) -> None:
        self.directory = directory
        self._reader = reader
        self._origin = origin
        self._write = write_file
        self._size: int | None = None

    @property
    def checkpoint_path(self) -> Path:
        """Where the mirror's checkpoint lives."""
        return self.directory / "checkpoint"

    def mirrored_size(self) -> int:
        """The size of the checkpoint in the folder (0 without one)."""
        if self._size is None:
            self._size = self._read_size()
        return self._size

    def _read_size(self) -> int:
        try:
            text = self.checkpoint_path.read_text("utf-8")
        except FileNotFoundError:
            return 0
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"mirror checkpoint {self.checkpoint_path}: {exc}") from None
        lines = text.split("\n", 2)
        if len(lines) < 3 or lines[0] != self._origin or not lines[1].isdigit():
            raise StorageError(
                f"{self.checkpoint_path} is not a checkpoint of {self._origin!r}: refusing to "
                "mirror into another log's folder"
            )
        return int(lines[1])

    def update(
        self, checkpoints: Sequence[PublishedCheckpoint], progress: Progress | None = None
    ) -> int:
        """Mirror ``checkpoints`` (any order); return the number of files written."""
        size = self.mirrored_size()
        todo = sorted({c.size: c for c in checkpoints if c.size > size}.values(), key=_size)
        if not todo:
            return 0
        if any(c.origin != self._origin for c in todo):
            raise StorageError(f"a checkpoint of another origin for the mirror of {self._origin}")
        written = 0
        for checkpoint in todo:
            for tile in tiles.new_tiles(size, checkpoint.size):
                written += self._write_tile(tile, checkpoint.size)
                if progress is not None:
                    progress(1)
            size = checkpoint.size
        self.directory.mkdir(parents=True, exist_ok=True)
        sync_filesystem(self.directory)  # every tile and folder above is durable now
        write_file(self.checkpoint_path, todo[-1].note.encode(), mode=0o644)
        self._size = size
        return written + 1

    def _write_tile(self, tile: tiles.TileID, size: int) -> int:
        path = self.directory / tile.path
        data = self._reader.read(tile, size)
        files = [(path, data)]
        if tile.entries:  # its gzip twin first, for nginx ``gzip_static``
            files.insert(0, (gz_twin(path), tiles.gzip_bundle(data)))
        written = 0
        for where, body in files:
            if where.exists():  # left by an update that crashed before its checkpoint
                with suppress(OSError):
                    if where.read_bytes() == body:
                        continue
            where.parent.mkdir(parents=True, exist_ok=True)
            self._write(where, body)
            written += 1
        return written


def gz_twin(path: Path) -> Path:
    """The ``.gz`` file beside ``path`` that nginx ``gzip_static`` serves in its place."""
    return path.with_name(path.name + ".gz")


def _size(checkpoint: PublishedCheckpoint) -> int:
    return checkpoint.size
