"""The one way the project replaces a file, and the one place it asks the disk to flush.

``write_file(path, data)``: a temporary file in the same folder (``.<name>.<random>.tmp``),
the data written and fsynced, renamed over ``path``, then the folder fsynced; on any failure
the temporary file is removed and ``path`` is untouched. A crash at any instant leaves the old
file or the new one, whole. Options:

* ``mode``: the new file's permission bits, exactly (the umask does not apply). The temporary
  file is created owner-only (0600) and only then widened, so a secret (``mode=0o600``) is
  never readable by anyone else at any instant and is never chmod-ed. ``None``: what
  ``open(path, "w")`` gives (0666 less the umask).
* ``exclusive``: fail with ``FileExistsError`` when ``path`` exists (a hard link, not a
  rename, puts it in place), for files that must never be silently replaced (keys).
* ``sync=False``: rename without fsyncing file or folder, for callers that make a whole batch
  durable at once afterwards (``sync_filesystem``).

Files the writer keeps open (the high-water mark, the acknowledged size) are opened with
``open_fd``: an ``open`` short of file descriptors or memory (EMFILE, ENFILE, ENOMEM: nothing
was written yet) is retried with ``ledger.core.backoff.SHORTAGE_BACKOFF`` for up to
``OPEN_RETRY_S`` seconds, logged once with the number of failures, never once per attempt.

Append-only journals that flush a file they append to use ``fsync_fd`` / ``fdatasync_fd``;
a new entry in a folder is made durable with ``fsync_dir``. Nothing outside ``ledger.fileio``
calls ``os.replace``, ``os.rename`` or ``os.fsync`` (``tests/unit/test_one_of_each.py``).
"""

from __future__ import annotations

import glob
import os
import secrets
import stat
import time
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from ledger.core.backoff import SHORTAGE_BACKOFF, Episodes, retry
from ledger.core.errors import is_resource_shortage

__all__ = [
    "fdatasync_fd",
    "fsync_dir",
    "fsync_fd",
    "open_fd",
    "remove_temporaries",
    "replace_file",
    "sync_filesystem",
    "write_file",
]

Data = bytes | str | Iterable[bytes]
_BUFFER = 1 << 20


def fsync_fd(fd: int) -> None:
    """Flush an open file's data and metadata to the disk."""
    os.fsync(fd)


def fdatasync_fd(fd: int) -> None:
    """Flush an open file's data (and the metadata needed to read it back) to the disk."""
    os.fdatasync(fd)


OPEN_RETRY_S = 30.0


def _warn(message: str, *args: object) -> None:
    import logging  # only when a shortage is logged: the CLIs' start-up does not load logging

    logging.getLogger("ledger.fileio").warning(message, *args)


def open_fd(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open``, retried while the process is short of descriptors or memory (module
    docstring); any other error, or a shortage past ``OPEN_RETRY_S``, is raised."""
    episode = Episodes()

    def failed(attempt: int, exc: Exception, wait: float) -> None:
        if episode.failed():
            _warn("cannot open %s: %s; retrying with backoff", path, exc)

    fd = retry(
        lambda: os.open(path, flags, mode),
        backoff=SHORTAGE_BACKOFF,
        retry_on=is_resource_shortage,
        deadline=time.monotonic() + OPEN_RETRY_S,
        on_retry=failed,
    )
    if (count := episode.recovered()) is not None:
        _warn("opened %s after %d failed attempts", path, count)
    return fd


def replace_file(source: Path, target: Path) -> None:
    """Rename ``source`` over ``target`` (the caller made ``source`` durable first, and syncs
    the folder after: ``fsync_dir``)."""
    os.replace(source, target)


def fsync_dir(folder: Path) -> None:
    """Make the entries of ``folder`` (a file created, renamed or removed there) durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(folder: Path) -> None:
    """Flush every write to the filesystem holding ``folder`` (Linux ``syncfs``, else ``sync``)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        import ctypes  # here: loaded only by the few callers that flush a whole filesystem

        libc = ctypes.CDLL(None, use_errno=True)
        syncfs = getattr(libc, "syncfs", None)
        if syncfs is None or syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def _chunks(data: Data) -> Iterable[bytes]:
    if isinstance(data, str):
        return (data.encode("utf-8"),)
    if isinstance(data, bytes | bytearray | memoryview):
        return (bytes(data),)
    return data


def _write_all(fd: int, chunks: Iterable[bytes]) -> None:
    """Write every chunk, gathering small ones into writes of about ``_BUFFER`` bytes."""
    pending = bytearray()
    for chunk in chunks:
        if len(pending) + len(chunk) > _BUFFER:
            _write_out(fd, pending)
            pending.clear()
        if len(chunk) >= _BUFFER:
            _write_out(fd, chunk)  # large: as it is, no copy
        else:
            pending += chunk
    _write_out(fd, pending)


def _write_out(fd: int, data: bytes | bytearray) -> None:
    written = os.write(fd, data) if data else 0
    while written < len(data):  # a short write: go on from where it stopped
        written += os.write(fd, data[written:])


def _temporary(path: Path) -> Path:
    return path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"


def remove_temporaries(path: Path) -> int:
    """Delete the temporary files a crash in ``write_file(path, ...)`` left behind (only for
    callers that hold ``path`` exclusively, e.g. under a lock); return how many."""
    found = [p for p in path.parent.glob(f".{glob.escape(path.name)}.*.tmp") if p.is_file()]
    for stale in found:
        stale.unlink(missing_ok=True)
    return len(found)


def write_file(
    path: Path,
    data: Data,
    *,
    mode: int | None = None,
    exclusive: bool = False,
    sync: bool = True,
) -> None:
    """Replace ``path`` with ``data`` whole or not at all (module docstring)."""
    folder = path.parent
    temp = _temporary(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o666 if mode is None else 0o600)
    try:
        try:
            if mode is not None and stat.S_IMODE(os.fstat(fd).st_mode) != mode:
                os.fchmod(fd, mode)  # before any byte is written; never wider than asked
            _write_all(fd, _chunks(data))
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            os.link(temp, path)
            os.unlink(temp)
        else:
            os.replace(temp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    if sync:
        fsync_dir(folder)
