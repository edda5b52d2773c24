"""``Evidence.observe_checkpoint`` over a real RocksDB store: the path a mirror, a monitor or the
object-store bucket feeds. A log-signed checkpoint beyond the tree halts and lands in the mark
(so a restart refuses); another root at a held size halts; a checkpoint that is not this log's
is ignored; a consistent one lifts the read-only start of a data dir without its mark."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ledger.core.checkpoint import Checkpoint, Ed25519Signer, sign_checkpoint
from ledger.core.errors import DataLossError, ReadOnlyError
from ledger.core.types import AppendItem
from ledger.log.evidence import Evidence
from ledger.log.facade import Log
from ledger.log.highwater import AckedSize, HighWaterMark, acked_path
from ledger.store.rocks import RocksStore

ORIGIN = "ledger.test/evidence"
SIGNER = Ed25519Signer.generate(ORIGIN)


def items(n: int, tag: str) -> list[AppendItem]:
    return [AppendItem(hashlib.sha256(f"{tag}{i}".encode()).digest()) for i in range(n)]


def open_log(tmp_path: Path) -> tuple[Log, RocksStore, Evidence]:
    store = RocksStore(tmp_path / "db")
    mark = HighWaterMark(tmp_path / "mark")
    log = Log(
        store=store,
        signer=SIGNER,
        origin=ORIGIN,
        mark=mark,
        acked=AckedSize(acked_path(mark.path)),
    )
    evidence = Evidence(log=log, verifiers=[SIGNER.verifier()], witnesses=[], quorum=1)
    return log, store, evidence


def note(size: int, root: bytes, signer: Ed25519Signer = SIGNER) -> str:
    return sign_checkpoint(Checkpoint(origin=ORIGIN, size=size, root_hash=root), signer)


def test_a_larger_checkpoint_halts_and_a_restart_refuses(tmp_path: Path) -> None:
    log, store, evidence = open_log(tmp_path)
    try:
        log.append(items(10, "a"))
        log.publish()
        evidence.observe_checkpoint("mirror", note(25, b"\x01" * 32))
        assert evidence.halted is not None and evidence.halted.kind == "larger"
        assert log.halted is not None and "mirror" in log.halted
        with pytest.raises(ReadOnlyError, match="halted on evidence"):
            log.append(items(1, "b"))
        assert log.publish().size == 10  # nothing new signed
    finally:
        store.close()
    with pytest.raises(DataLossError, match="has 10 entries, but a checkpoint of size 25"):
        open_log(tmp_path)


def test_another_root_at_a_held_size_halts(tmp_path: Path) -> None:
    log, store, evidence = open_log(tmp_path)
    try:
        log.append(items(10, "a"))
        log.publish()
        evidence.observe_checkpoint("monitor", note(5, b"\x02" * 32))
        assert evidence.halted is not None and evidence.halted.kind == "fork"
        with pytest.raises(ReadOnlyError):
            log.append(items(1, "b"))
    finally:
        store.close()


def test_a_checkpoint_of_another_key_is_not_evidence(tmp_path: Path) -> None:
    log, store, evidence = open_log(tmp_path)
    try:
        log.append(items(10, "a"))
        log.publish()
        evidence.observe_checkpoint(
            "mirror", note(25, b"\x01" * 32, Ed25519Signer.generate(ORIGIN))
        )
        assert evidence.halted is None and log.read_only is None
        log.append(items(1, "b"))
    finally:
        store.close()


def test_a_consistent_checkpoint_lifts_a_start_without_the_mark(tmp_path: Path) -> None:
    log, store, _ = open_log(tmp_path)
    try:
        log.append(items(10, "a"))
        published = log.publish()
    finally:
        store.close()
    (tmp_path / "mark").unlink()
    log, store, evidence = open_log(tmp_path)
    try:
        assert log.unconfirmed is not None
        with pytest.raises(ReadOnlyError, match="no high-water mark"):
            log.append(items(1, "b"))
        evidence.observe_checkpoint("mirror", published.note)
        assert log.read_only is None
        assert HighWaterMark(tmp_path / "mark").read() is not None
        log.append(items(1, "b"))
    finally:
        store.close()
