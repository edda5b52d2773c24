"""Backups of a log: a consistent RocksDB checkpoint plus the data dir's binding.

A backup directory holds ``db/`` (a RocksDB checkpoint: every column family at one sequence
number, so entries, nodes, dedup keys, tree state, checkpoints and anchors agree) and
``log.json`` (the binding: origin and verifier keys). The signer key is *not* copied: keep it
(and its backup) apart from the data. ``backup_store`` works on an open store, so the running
server takes it through the ``Backup`` admin RPC; ``backup_data_dir`` opens a stopped log.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ledger.core.errors import FailedPreconditionError, InvalidArgumentError
from ledger.core.types import BackupOutcome
from ledger.ops.binding import BINDING_FILE
from ledger.store.rocks import RocksStore

__all__ = ["backup_data_dir", "backup_store", "read_backup"]


def _prepare(out: Path) -> None:
    if not out.is_absolute():
        raise InvalidArgumentError(f"out_dir: {out} is relative; give an absolute path")
    if out.exists():
        raise InvalidArgumentError(f"out_dir: {out} exists; backups never overwrite")
    if not out.parent.is_dir():
        raise InvalidArgumentError(f"out_dir: {out.parent} is not a directory")


def backup_store(store: RocksStore, data_dir: Path, out: Path) -> BackupOutcome:
    """Back up an open store (safe while the log serves) into ``out`` (must not exist)."""
    _prepare(out)
    binding = data_dir / BINDING_FILE
    if not binding.exists():
        raise FailedPreconditionError(f"{binding} is missing: the data dir is not bound")
    out.mkdir(mode=0o700)
    try:
        store.backup_to(out / "db")
        shutil.copy2(binding, out / BINDING_FILE)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return read_backup(out)


def backup_data_dir(data_dir: Path, out: Path) -> BackupOutcome:
    """Back up a stopped log (a running server holds the RocksDB lock: use the RPC)."""
    _prepare(out)
    store = RocksStore(data_dir / "db", create=False)
    try:
        return backup_store(store, data_dir, out)
    finally:
        store.close()


def read_backup(path: Path) -> BackupOutcome:
    """Open a backup's database and say what it holds."""
    if not (path / "db" / "CURRENT").exists() or not (path / BINDING_FILE).exists():
        raise FailedPreconditionError(f"{path} is not a backup (want db/ and {BINDING_FILE})")
    store = RocksStore(path / "db", create=False, memtable_mb=4, cache_mb=8)
    try:
        latest = store.latest_checkpoint()
        return BackupOutcome(
            out_dir=path,
            tree_size=store.load_state().size,
            checkpoint_size=latest.size if latest else 0,
        )
    finally:
        store.close()
