"""The published high-water mark: the newest checkpoint the log ever handed out, kept outside
RocksDB so that a rolled-back data dir (a flipped WAL byte, a restored backup) cannot carry its
own, older idea of "published" back with it (DESIGN "never two roots for one size").

The mark is one small file at a location configured apart from the data dir
(``[log] mark_file``). It is replaced atomically: written to ``<path>.tmp``, fsynced, renamed
over the old file, and the folder fsynced, before the checkpoint is stored or returned to
anyone. Format (UTF-8 JSON, one object)::

    {"format": "decision-ledger/high-water/v1",
     "note": "<the signed checkpoint note, C2SP tlog-checkpoint>",
     "restore": null | {"tree_size": N, "accepted_ms": T}}

``restore`` is set by ``ledger restore accept`` when the operator starts a data dir whose tree is
behind the mark on purpose: the log then serves reads, refuses appends and signs nothing until
its tree is consistent with the mark again (``ledger restore catch-up``), which clears it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ledger.checkpoint import Checkpoint
from ledger.errors import FormatError, LedgerError
from ledger.note import SignedNote
from ledger.types import PublishedCheckpoint

__all__ = ["FORMAT", "HighWaterMark", "MarkState", "RestoreRecord"]

FORMAT = "decision-ledger/high-water/v1"
MAX_MARK_BYTES = 64 << 10


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoreRecord:
    """An operator accepted starting from a tree behind the mark (read-only until caught up)."""

    tree_size: int
    accepted_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkState:
    """What the mark file holds."""

    checkpoint: PublishedCheckpoint
    restore: RestoreRecord | None = None


def checkpoint_from_note(note: str) -> PublishedCheckpoint:
    """Parse a signed checkpoint note (signature not checked: the log wrote it)."""
    body = Checkpoint.from_text(SignedNote.from_text(note).text)
    return PublishedCheckpoint(
        origin=body.origin, size=body.size, root_hash=body.root_hash, note=note
    )


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class HighWaterMark:
    """The mark file at ``path`` (format in the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._tmp = self.path.with_name(self.path.name + ".tmp")

    def read(self) -> MarkState | None:
        """The mark, or None when no checkpoint was ever published with this mark file."""
        try:
            raw = self.path.read_bytes()[: MAX_MARK_BYTES + 1]
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FormatError(f"cannot read the high-water mark {self.path}: {exc}") from exc
        try:
            doc = json.loads(raw)
            if len(raw) > MAX_MARK_BYTES or doc.get("format") != FORMAT:
                raise ValueError(f"not a {FORMAT} file")
            restore = doc.get("restore")
            return MarkState(
                checkpoint=checkpoint_from_note(doc["note"]),
                restore=None
                if restore is None
                else RestoreRecord(
                    tree_size=int(restore["tree_size"]), accepted_ms=int(restore["accepted_ms"])
                ),
            )
        except (ValueError, KeyError, TypeError, AttributeError, LedgerError) as exc:
            raise FormatError(
                f"the high-water mark {self.path} is damaged ({exc}); it is the only record of "
                "what was published: restore it from a copy, never delete it to make the log start"
            ) from exc

    def write(self, state: MarkState) -> None:
        """Replace the mark atomically and durably."""
        restore = state.restore
        doc = {
            "format": FORMAT,
            "note": state.checkpoint.note,
            "restore": None
            if restore is None
            else {"tree_size": restore.tree_size, "accepted_ms": restore.accepted_ms},
        }
        data = json.dumps(doc, indent=1).encode() + b"\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self._tmp, self.path)
        _fsync_dir(self.path.parent)
