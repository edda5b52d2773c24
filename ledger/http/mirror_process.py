"""The static tile mirror of a running server, in a process of its own.

Writing the mirror in the server's process would make it fight the event loop and the writer
thread for the GIL: every syscall of a file write gives the GIL up and waits up to a switch
interval to get it back, so under append load a few hundred tiles a second took seconds. The
server therefore starts ``python -m ledger.http.mirror_process``, which opens the store as a
RocksDB *secondary* instance (read-only, following the primary with ``catch_up``) and runs
``TileMirror`` there. The server only writes one JSON line per published checkpoint to the
child's standard input (``MirrorProcess.submit``, cheap, on the event loop); the child takes
every line queued since its last update at once.

Protocol: the child prints ``{"ready": true}`` (or ``{"error": "..."}`` and exits 1) on stdout
once the mirror folder is checked; each input line is ``{"size": N}``, a published checkpoint
whose note the child reads from the store; end of input makes it finish what it read and exit 0.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

from ledger.core.errors import LedgerError, StorageError
from ledger.core.types import PublishedCheckpoint
from ledger.store.rocks import RocksStore

__all__ = ["ChildPipe", "MirrorProcess", "main", "stop_child"]

_log = logging.getLogger("ledger.mirror")
START_TIMEOUT_S = 60.0


class MirrorProcess:
    """The mirror child process of a server (module docstring)."""

    def __init__(self, *, db_dir: Path, secondary_dir: Path, directory: Path, origin: str) -> None:
        cmd = [sys.executable, "-m", "ledger.http.mirror_process",
               str(db_dir), str(secondary_dir), str(directory), origin]  # fmt: skip
        child = ChildPipe(cmd, "the tile mirror", f"tiles dir {directory}")
        self._proc, self._stdin = child.proc, child.stdin

    def submit(self, checkpoint: PublishedCheckpoint) -> None:
        """Queue a published checkpoint: one non-blocking write of its size to the child's pipe
        (atomic: far below PIPE_BUF; the child reads the stored note). If the child is thousands
        of checkpoints behind, the size is dropped (the next update covers its tiles, not its own
        partial tiles)."""
        data = (json.dumps({"size": checkpoint.size}) + "\n").encode()
        try:
            os.write(self._stdin, data)
        except BlockingIOError:
            _log.warning("tile mirror is behind: checkpoint %d left to the next", checkpoint.size)
        except OSError as exc:
            _log.error("tile mirror process is gone (exit %s): %s", self._proc.poll(), exc)

    def stop(self, timeout: float = 120.0) -> None:
        """Let the child mirror what it was given, then wait for it to exit."""
        stop_child(self._proc, timeout)


class ChildPipe:
    """A mirror child spoken to in JSON lines (the tile mirror here, the bucket mirror of
    ``ledger.objstore.mirror``): started, its first line read within ``START_TIMEOUT_S``
    (``{"ready": true, ...}`` or ``{"error": ...}``: then stopped and raised as ``StorageError``
    prefixed with ``where``), its standard input made non-blocking so that a stuck child never
    blocks the event loop."""

    def __init__(self, cmd: list[str], name: str, where: str) -> None:
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        try:
            answer = json.loads(line) if line else {"error": f"{name} did not start"}
        except json.JSONDecodeError:
            answer = {"error": f"{name} said {line!r}"}
        if not isinstance(answer, dict) or not answer.get("ready"):
            stop_child(self.proc, 120.0)
            error = answer.get("error") if isinstance(answer, dict) else answer
            raise StorageError(f"{where}: {error}")
        self.answer: dict[str, object] = answer
        self.stdin = self.proc.stdin.fileno()
        os.set_blocking(self.stdin, False)


def stop_child(proc: subprocess.Popen[str], timeout: float) -> None:
    """Close the child's input (it finishes what it read), wait for it (killed after
    ``timeout``), close its output."""
    if proc.stdin is not None and not proc.stdin.closed:
        with suppress(OSError):
            proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        with suppress(OSError, ValueError):
            proc.stdout.close()


# --- the child -----------------------------------------------------------------------------------


def _read_batch(fd: int, pending: bytearray) -> tuple[list[dict[str, object]], bool]:
    """Block for input, then take everything already queued: (complete lines, end of input)."""
    end = False
    chunk = os.read(fd, 1 << 20)
    while True:
        if not chunk:
            end = True
            break
        pending += chunk
        if not select.select([fd], [], [], 0)[0]:
            break
        chunk = os.read(fd, 1 << 20)
    *complete, rest = bytes(pending).split(b"\n")
    pending[:] = rest
    return [json.loads(line) for line in complete if line.strip()], end


def _checkpoints(store: RocksStore, lines: list[dict[str, object]]) -> list[PublishedCheckpoint]:
    """The stored checkpoints of the sizes given (the store was caught up first)."""
    found = [store.get_checkpoint(int(str(line["size"]))) for line in lines]
    return [c for c in found if c is not None]


def main(argv: list[str]) -> int:
    """Run the mirror child: ``DB_DIR SECONDARY_DIR MIRROR_DIR ORIGIN``."""
    from ledger.http.mirror import TileMirror
    from ledger.store.tile_reader import TileReader

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    db_dir, secondary_dir, directory, origin = argv
    try:
        store = RocksStore(
            db_dir, secondary=secondary_dir, memtable_mb=4, cache_mb=16, tiles_only=True
        )
        mirror = TileMirror(
            directory=Path(directory),
            reader=TileReader(store=store, published=lambda: None, cache_bytes=0),
            origin=origin,
        )
        mirror.mirrored_size()
    except LedgerError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 1
    print(json.dumps({"ready": True}), flush=True)
    done = False
    pending = bytearray()
    while not done:
        lines, done = _read_batch(sys.stdin.fileno(), pending)
        if not lines:
            continue
        try:
            store.catch_up()
            mirror.update(_checkpoints(store, lines))
        except (LedgerError, OSError) as exc:  # keep going: the next update catches up
            _log.error("tile mirror update failed: %s", exc)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
