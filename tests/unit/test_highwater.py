"""The published high-water mark: the file (atomic, damaged), start refusal when the tree is
behind or off the mark, read-only after an accepted restore, and catch-up."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import DataLossError, FormatError, LogFailedError, ReadOnlyError
from ledger.core.tile_layout import TileWriter
from ledger.core.types import AppendItem
from ledger.log.facade import Log
from ledger.log.highwater import SLOT_BYTES, HighWaterMark, MarkState, RestoreRecord
from ledger.store.contract import MemoryStore

ORIGIN = "ledger.test/highwater"
SIGNER = Ed25519Signer.generate(ORIGIN)


def items(n: int, tag: str = "") -> list[AppendItem]:
    return [AppendItem(hashlib.sha256(f"{tag}{i}".encode()).digest()) for i in range(n)]


def open_log(store: MemoryStore, mark: HighWaterMark) -> Log:
    return Log(store=store, signer=SIGNER, origin=ORIGIN, mark=mark)


def copy_store(store: MemoryStore) -> MemoryStore:
    """A backup of the data dir as it is now."""
    other = MemoryStore()
    other._state = store._state
    other._values = dict(store._values)
    other._digests = dict(store._digests)
    other._checkpoints = dict(store._checkpoints)
    other._writer = TileWriter.load(store._state.size, other._lookup)
    return other


def test_every_checkpoint_is_in_the_mark_before_it_is_returned(tmp_path: Path) -> None:
    mark = HighWaterMark(tmp_path / "m")
    seen = []
    store = MemoryStore(fault=lambda point: seen.append((point, mark.read())))
    log = open_log(store, mark)
    log.append(items(3))
    cp = log.publish()
    point, state = seen[-1]
    assert point == "checkpoint" and state is not None and state.checkpoint == cp
    assert not (tmp_path / "m.tmp").exists()


def test_a_damaged_mark_refuses_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "m"
    path.write_text('{"format": "decision-ledger/high-water/v1", "note": "junk"}')
    with pytest.raises(FormatError, match=r"damaged.*never delete it"):
        HighWaterMark(path).read()


def test_a_rolled_back_data_dir_is_refused_then_read_only_then_caught_up(tmp_path: Path) -> None:
    mark = HighWaterMark(tmp_path / "m")
    store = MemoryStore()
    log = open_log(store, mark)
    log.append(items(10))
    log.publish()
    backup = copy_store(store)
    log.append(items(15, "later"))
    published = log.publish()
    with pytest.raises(DataLossError, match=r"has 10 entries, but a checkpoint of size 25"):
        open_log(copy_store(backup), mark)
    state = mark.read()
    assert state is not None
    mark.write(
        MarkState(checkpoint=state.checkpoint, restore=RestoreRecord(tree_size=10, accepted_ms=1))
    )
    restored = open_log(backup, mark)
    assert restored.read_only is not None
    with pytest.raises(ReadOnlyError, match="read-only"):
        restored.append(items(1, "new"))
    assert restored.publish().size == 10  # nothing is signed while behind the mark
    assert restored.inclusion_proof(3, 10).tree_size == 10  # reads are served
    missing = store.get_leaves(range(10, 25))
    with pytest.raises(DataLossError, match="not this log"):
        restored.catch_up([*missing[:-1], missing[0]])
    assert restored.size == 10
    assert restored.catch_up(missing) == published
    assert restored.read_only is None and mark.read() == MarkState(checkpoint=published)
    restored.append(items(2, "new"))
    assert restored.publish().size == 27


def test_a_tree_that_is_not_the_published_one_is_refused(tmp_path: Path) -> None:
    mark = HighWaterMark(tmp_path / "m")
    log = open_log(MemoryStore(), mark)
    log.append(items(4))
    log.publish()
    other = MemoryStore()
    Log(store=other, signer=SIGNER, origin=ORIGIN).append(items(6, "fork"))
    with pytest.raises(DataLossError, match="not the one that was published"):
        open_log(other, mark)


def test_a_checkpoint_only_in_the_mark_is_stored_again(tmp_path: Path) -> None:
    mark = HighWaterMark(tmp_path / "m")
    crash = {"on": False}

    def fault(point: str) -> None:
        if crash["on"] and point == "checkpoint":
            raise OSError("crash between the mark and the store")

    store = MemoryStore(fault=fault)
    log = open_log(store, mark)
    log.append(items(5))
    crash["on"] = True
    with pytest.raises(LogFailedError, match="crash between the mark and the store"):
        log.publish()
    crash["on"] = False
    reopened = open_log(store, mark)
    latest = reopened.latest_checkpoint()
    assert latest is not None and latest.size == 5 and store.get_checkpoint(5) == latest


def test_a_torn_mark_write_leaves_the_previous_mark(tmp_path: Path) -> None:
    mark = HighWaterMark(tmp_path / "m")
    log = open_log(MemoryStore(), mark)
    log.append(items(2))
    first = log.publish()
    log.append(items(3, "more"))
    second = log.publish()
    assert HighWaterMark(tmp_path / "m").read() == MarkState(checkpoint=second)
    raw = bytearray((tmp_path / "m").read_bytes())
    slot = 2 % 2 * SLOT_BYTES + 40  # inside the newest slot's body: a write cut short
    raw[slot] ^= 0xFF
    (tmp_path / "m").write_bytes(bytes(raw))
    assert HighWaterMark(tmp_path / "m").read() == MarkState(checkpoint=first)
    (tmp_path / "m").write_bytes(bytes(2 * SLOT_BYTES))
    with pytest.raises(FormatError, match="no intact slot"):
        HighWaterMark(tmp_path / "m").read()


def test_a_mark_kept_open_is_not_written_once_deleted(tmp_path: Path) -> None:
    mark = HighWaterMark(tmp_path / "m")
    log = open_log(MemoryStore(), mark)
    log.append(items(2))
    published = log.publish()  # the mark is written, and its file stays open
    (tmp_path / "m").unlink()
    with pytest.raises(FileNotFoundError, match="deleted"):
        mark.write(MarkState(checkpoint=published))
    mark.close()
