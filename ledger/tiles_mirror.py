"""A static C2SP tlog-tiles mirror: the log as files in exactly the URL layout, for nginx, an
object-store sync or a CDN origin to serve with no Python on the read path.

``TileMirror.update(checkpoints)`` writes, for each published checkpoint in turn, every tile its
tree has that the previous one did not (newly full tiles and the new partial tiles of every
level, hash tiles and entry bundles), then the newest checkpoint as ``checkpoint``:

* every file is written crash-safely: a temporary file in the same folder, fsync, rename; the
  folders are fsynced before the checkpoint is renamed into place, so after a crash at any
  instant a reader never sees a checkpoint whose tiles are missing;
* full tiles are written once and never rewritten; every partial tile is kept (``.p/W`` for each
  checkpoint size, as the HTTP endpoint keeps serving it);
* the mirror resumes from the size in its ``checkpoint`` file; a folder holding another log's
  checkpoint, or a size beyond the log's, is refused.

``MirrorWorker`` runs updates on a thread of its own, after each publish of the server, taking
every checkpoint queued since its last update at once (so it never falls behind by more than
one update).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

from ledger import tiles
from ledger.errors import StorageError
from ledger.tile_reader import TileReader
from ledger.types import PublishedCheckpoint

__all__ = ["MirrorWorker", "TileMirror", "write_atomically"]

_log = logging.getLogger("ledger.mirror")
FileWriter = Callable[[Path, bytes], None]
Progress = Callable[[int], None]


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` as a whole or not at all: temp file, fsync, rename (the folder is not
    fsynced here; ``TileMirror`` fsyncs the folders it touched before publishing)."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class TileMirror:
    """The mirror in ``directory`` of the log that ``reader`` reads."""

    def __init__(
        self,
        *,
        directory: Path,
        reader: TileReader,
        origin: str,
        write_file: FileWriter = write_atomically,
        writers: int = 16,
    ) -> None:
        self.directory = directory
        self._reader = reader
        self._origin = origin
        self._write = write_file
        self._writers = writers
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
            raise StorageError(
                f"checkpoint of another origin given to the mirror of {self._origin}"
            )
        folders: set[Path] = set()
        jobs: list[tuple[Path, tiles.TileID, int]] = []
        for checkpoint in todo:
            for tile in tiles.new_tiles(size, checkpoint.size):
                path = self.directory / tile.path
                if path.exists():  # written whole by an earlier update: tiles never change
                    if progress is not None:
                        progress(1)
                    continue
                self._make_folder(path.parent, folders)
                jobs.append((path, tile, checkpoint.size))
            size = checkpoint.size
        # fsync is what a write costs: run them side by side (journal commits are shared).
        with ThreadPoolExecutor(max_workers=self._writers, thread_name_prefix="mirror") as pool:
            for _ in pool.map(self._write_tile, jobs):
                if progress is not None:
                    progress(1)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            _fsync_dir(folder)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._write(self.checkpoint_path, todo[-1].note.encode())
        _fsync_dir(self.directory)
        self._size = size
        return len(jobs) + 1

    def _make_folder(self, folder: Path, folders: set[Path]) -> None:
        """Create ``folder``; remember it and its new parents for the fsync before publishing."""
        if folder in folders:
            return
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            folders.update(p for p in folder.parents if self.directory in (p, *p.parents))
        folders.add(folder)

    def _write_tile(self, job: tuple[Path, tiles.TileID, int]) -> None:
        path, tile, size = job
        self._write(path, self._reader.read(tile, size))


def _size(checkpoint: PublishedCheckpoint) -> int:
    return checkpoint.size


class MirrorWorker:
    """Runs ``TileMirror.update`` on its own thread for each checkpoint submitted."""

    def __init__(self, mirror: TileMirror) -> None:
        self.mirror = mirror
        self._pending: list[PublishedCheckpoint] = []
        self._wake = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="ledger-mirror", daemon=True)
        self._thread.start()

    def submit(self, checkpoint: PublishedCheckpoint) -> None:
        """Queue a published checkpoint (cheap: called on the event loop after each publish)."""
        with self._wake:
            self._pending.append(checkpoint)
            self._wake.notify()

    def stop(self, timeout: float = 30.0) -> None:
        """Mirror what is queued, then stop the thread."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._stopping:
                    self._wake.wait()
                batch, self._pending = self._pending, []
                if not batch and self._stopping:
                    return
            try:
                self.mirror.update(batch)
            except Exception as exc:  # keep the server up; the next update catches up
                _log.error("tile mirror update failed: %s", exc)
