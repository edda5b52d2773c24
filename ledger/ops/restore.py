"""``ledger restore``: put a backup back as a log's data, never as a silent rollback.

Steps (``restore``): the backup must be a backup (``db/`` + ``log.json``) of the same log
(origin) as the target data dir, if that has one; its newest checkpoint must not be older than
the newest checkpoint the log has published (``published_sizes``: the target's own newest
checkpoint, a checkpoint note the log published that monitors or witnesses saw, and, later,
the published high-water mark of issue 14), because serving an older tree again is a rollback
that witnesses and monitors flag; ``force`` overrides that one check. The backup is copied
next to the target, fsck runs on the copy, and only a clean copy replaces ``db/`` (the old one
is kept as ``db.before-restore-<unix time>``, never deleted).

What the backup carries beside the database goes back too: the binding keeps the stricter
access state of the two (a closed log, or a closed target, stays closed: a restore never
reopens a log), the token hashes become the tokens file when the target has none (an existing
tokens file is kept: it may hold revocations newer than the backup), and the backup's ``trust``
folder (TSA roots, witness settings) becomes ``<data_dir>/trust``, whose roots ``ledger fsck``
trusts for the restored log's anchors (the previous folder is kept as
``trust.before-restore-<unix time>``). The published high-water mark is never in a backup: a
restored log that is behind its published size, or has no mark at all, starts read-only
(``ledger.log.evidence``) until the witnesses or ``ledger restore accept`` say otherwise.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ledger.core.checkpoint import open_checkpoint
from ledger.core.errors import FailedPreconditionError, InconsistencyError
from ledger.core.note import Ed25519Verifier
from ledger.fileio.private import write_private
from ledger.ops.backup import TOKENS_FILE, TRUST_DIR, read_backup
from ledger.ops.binding import (
    BINDING_FILE,
    AccessEvent,
    Binding,
    read_binding,
    write_binding,
)
from ledger.ops.fsck import FsckReport, fsck
from ledger.store.rocks import RocksStore

__all__ = ["RestoreOutcome", "published_size_of_note", "restore"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoreOutcome:
    """What a restore did."""

    data_dir: Path
    tree_size: int
    checkpoint_size: int
    newest_published: int
    replaced: Path | None
    report: FsckReport
    access: str = "open"
    tokens_restored: bool = False
    trust_restored: bool = False


def published_size_of_note(note: str, binding: Binding) -> int:
    """The size of a checkpoint the log published (verified with the bound keys)."""
    keys = [Ed25519Verifier.from_key_string(k) for k in (binding.verifier_key,
                                                         *binding.previous_keys)]  # fmt: skip
    return open_checkpoint(note, keys, origin=binding.origin).checkpoint.size


def _target_newest(data_dir: Path) -> int:
    if not (data_dir / "db" / "CURRENT").exists():
        return 0
    store = RocksStore(data_dir / "db", create=False, memtable_mb=4, cache_mb=8)
    try:
        latest = store.latest_checkpoint()
        return latest.size if latest else 0
    finally:
        store.close()


def restore(
    backup: Path,
    data_dir: Path,
    *,
    published_notes: Sequence[str] = (),
    published_sizes: Sequence[int] = (),
    force: bool = False,
    run_fsck: Callable[[Path], FsckReport] = fsck,
    now: Callable[[], float] = time.time,
    tokens_file: Path | None = None,
) -> RestoreOutcome:
    """Restore ``backup`` into ``data_dir`` (the log must be stopped); the token hashes go to
    ``tokens_file`` (default ``<data_dir>/tokens.json``) when that does not exist."""
    held = read_backup(backup)
    bound = read_binding(backup)
    assert bound is not None  # read_backup checked the file exists
    current = read_binding(data_dir) if data_dir.exists() else None
    if current is not None and current.origin != bound.origin:
        raise FailedPreconditionError(
            f"the backup is of log {bound.origin!r}, the data dir holds {current.origin!r}"
        )
    newest = max(
        [_target_newest(data_dir), *published_sizes]
        + [published_size_of_note(n, current or bound) for n in published_notes]
    )
    if held.checkpoint_size < newest and not force:
        raise InconsistencyError(
            f"the backup's newest checkpoint has size {held.checkpoint_size}, but the log has "
            f"published size {newest}: serving it would be a rollback that witnesses and "
            "monitors flag (use --force only if you will publish the fork's explanation)",
            evidence={"backup_size": held.checkpoint_size, "published_size": newest},
        )
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    staging_dir = data_dir / "restore-check"
    shutil.rmtree(staging_dir, ignore_errors=True)
    staging_dir.mkdir(mode=0o700)
    shutil.copytree(backup / "db", staging_dir / "db")
    shutil.copy2(backup / BINDING_FILE, staging_dir / BINDING_FILE)
    if (backup / TRUST_DIR).is_dir():
        shutil.copytree(backup / TRUST_DIR, staging_dir / TRUST_DIR)
    key = data_dir / "signer.key"
    if key.exists():
        shutil.copy2(key, staging_dir / "signer.key")
    report = run_fsck(staging_dir)
    if not report.ok:
        shutil.rmtree(staging_dir, ignore_errors=True)
        raise FailedPreconditionError(
            f"fsck of the restored copy failed ({len(report.problems)} problem(s); first: "
            f"{report.problems[0]}); nothing was changed"
        )
    replaced = None
    if (data_dir / "db").exists():
        replaced = data_dir / f"db.before-restore-{int(now())}"
        (data_dir / "db").rename(replaced)
    (staging_dir / "db").rename(data_dir / "db")
    restored = current or bound
    if bound.closed and not restored.closed:  # the stricter state of the two
        event = AccessEvent(
            state="closed", at=int(now()), by="ledger restore", reason="the backup's log is closed"
        )
        restored = replace(
            restored, access="closed", access_events=(*restored.access_events, event)
        )
    if restored != current:
        write_binding(data_dir, restored)
    trust_restored = (staging_dir / TRUST_DIR).is_dir()
    if trust_restored:
        if (data_dir / TRUST_DIR).exists():
            (data_dir / TRUST_DIR).rename(data_dir / f"{TRUST_DIR}.before-restore-{int(now())}")
        (staging_dir / TRUST_DIR).rename(data_dir / TRUST_DIR)
    tokens = tokens_file or data_dir / TOKENS_FILE
    tokens_restored = (backup / TOKENS_FILE).exists() and not tokens.exists()
    if tokens_restored:
        tokens.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(tokens, (backup / TOKENS_FILE).read_bytes())
    shutil.rmtree(staging_dir, ignore_errors=True)
    return RestoreOutcome(
        data_dir=data_dir,
        tree_size=held.tree_size,
        checkpoint_size=held.checkpoint_size,
        newest_published=newest,
        replaced=replaced,
        report=report,
        access=restored.access,
        tokens_restored=tokens_restored,
        trust_restored=trust_restored,
    )
