"""The SDK's spool file (format, torn writes, acks, compaction, locking) and its sender
(batching, retries with the server's hint, fatal statuses, the overflow policy), with a fake
log in place of the server."""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import struct
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import grpc
import pytest

from ledger.core.errors import (
    InvalidArgumentError,
    PushbackError,
    UnavailableError,
    is_retryable,
)
from ledger.core.packed import PackedResult
from ledger.core.types import AppendResult
from ledger_client.remote.log import AppendOutcome, RemoteLog, translate
from ledger_client.sdk.errors import (
    ClientClosedError,
    DeliveryError,
    SpoolError,
    SpoolFullError,
)
from ledger_client.sdk.sender import Backoff, Sender, SenderOptions
from ledger_client.sdk.spool import (
    HEADER,
    FileSpool,
    MemorySpool,
    Spool,
    SpoolItem,
    encode_frame,
    read_spool,
)


def item(n: int, disclosures: bytes | None = None) -> SpoolItem:
    body = b'{"n":%d}' % n
    return SpoolItem(hashlib.sha256(body).digest(), body, disclosures)


def fill(spool: Spool, count: int, start: int = 0) -> list[SpoolItem]:
    items = [item(n) for n in range(start, start + count)]
    for i in items:
        spool.append(i)
    return items


# --- the format ----------------------------------------------------------------------------


def test_bytes_follow_the_documented_format(tmp_path: Path) -> None:
    path = tmp_path / "s.spool"
    it = item(1, b'[{"field_path":"x","salt":"00","value":1}]')
    spool = FileSpool(path)
    spool.append(it)
    spool.peek(1)
    spool.ack(1)
    raw = path.read_bytes()
    spool.close()
    assert raw[:16] == b"LDGSPOOL\x01" + bytes(7) == HEADER
    pos, frames = 16, []
    while pos < len(raw):
        kind, length = struct.unpack(">BI", raw[pos : pos + 5])
        body = raw[pos + 5 : pos + 5 + length]
        (crc,) = struct.unpack(">I", raw[pos + 5 + length : pos + 9 + length])
        assert crc == zlib.crc32(raw[pos : pos + 5 + length])
        frames.append((chr(kind), body))
        pos += 9 + length
    assert frames[0] == ("R", it.digest + it.record_json)
    assert frames[1] == ("D", it.digest + it.disclosures_json)  # type: ignore[operator]
    assert frames[2] == ("A", struct.pack(">Q", 16 + it.size))


def test_a_hand_written_spool_is_read(tmp_path: Path) -> None:
    path = tmp_path / "s.spool"
    a, b = item(1), item(2)
    acked_to = len(HEADER) + a.size
    ack = encode_frame(0x41, struct.pack(">Q", acked_to))
    path.write_bytes(HEADER + a.encode() + ack + b.encode())
    assert read_spool(path) == ([a], [b])
    spool = FileSpool(path)
    assert spool.pending_count == 1
    assert spool.peek(10) == [b]
    spool.close()


def test_items_survive_reopening_in_order(tmp_path: Path) -> None:
    path = tmp_path / "s.spool"
    spool = FileSpool(path)
    items = [*fill(spool, 5), item(99, b"[]")]
    spool.append(items[-1])
    spool.sync()
    spool.close()
    again = FileSpool(path)
    assert again.pending_count == 6
    assert again.peek(100) == items
    assert again.peek(2) == items[:2]
    again.close()


def test_acks_are_a_prefix_and_persist(tmp_path: Path) -> None:
    path = tmp_path / "s.spool"
    spool = FileSpool(path)
    items = fill(spool, 10)
    assert spool.peek(4) == items[:4]
    spool.ack(3)
    assert spool.pending_count == 7
    assert spool.peek(100) == items[3:]
    with pytest.raises(ValueError, match="ack of 8"):
        spool.ack(8)
    spool._release()  # a crash: no close(); the lock goes with the process
    again = FileSpool(path)
    assert again.peek(100) == items[3:]
    again.close()


@pytest.mark.parametrize("damage", ["truncate", "garbage", "bad_crc"])
def test_a_torn_last_write_is_dropped(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.spool"
    spool = FileSpool(path)
    items = fill(spool, 3)
    spool.close()
    raw = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(raw[:-5])
    elif damage == "garbage":
        path.write_bytes(raw + b"\x52\x00\x00")
    else:
        path.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    with caplog.at_level(logging.WARNING, "ledger_client.spool"):
        again = FileSpool(path)
    assert "torn last write" in caplog.text
    kept = items if damage == "garbage" else items[:2]
    assert again.peek(10) == kept
    if damage != "garbage":
        again.append(items[2])  # the lost item, written again after the cut
    again.close()
    assert read_spool(path) == ([], items)


def test_header_checks(tmp_path: Path) -> None:
    bad = tmp_path / "bad.spool"
    bad.write_bytes(b"NOTASPOOL" + bytes(20))
    with pytest.raises(SpoolError, match="not a version-1 spool"):
        FileSpool(bad)
    torn = tmp_path / "torn.spool"
    torn.write_bytes(HEADER[:5])  # a crash while creating it
    spool = FileSpool(torn)
    assert torn.read_bytes() == HEADER
    spool.close()


def test_one_process_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "s.spool"
    spool = FileSpool(path)
    with pytest.raises(SpoolError, match="in use"):
        FileSpool(path)
    spool.close()
    spool.close()  # idempotent
    FileSpool(path).close()
    with pytest.raises(SpoolError, match="closed"):
        spool.append(item(1))


def test_compaction_keeps_only_pending(tmp_path: Path) -> None:
    path = tmp_path / "s.spool"
    (tmp_path / "s.spool.tmp").write_bytes(b"stale")
    spool = FileSpool(path, compact_bytes=1000)
    assert not (tmp_path / "s.spool.tmp").exists()
    items = fill(spool, 100)
    spool.peek(95)
    spool.ack(95)  # 95 items acknowledged: the prefix is big, the rest small
    assert path.stat().st_size == len(HEADER) + sum(i.size for i in items[95:])
    assert spool.peek(100) == items[95:]
    more = fill(spool, 3, start=100)
    spool.close()
    assert read_spool(path) == ([], items[95:] + more)


def test_open_and_close_compact_acknowledged_items(tmp_path: Path) -> None:
    path = tmp_path / "s.spool"
    spool = FileSpool(path)
    items = fill(spool, 10)
    spool.peek(4)
    spool.ack(4)
    spool._release()  # crash
    assert len(read_spool(path)[0]) == 4
    again = FileSpool(path)  # compacts on open
    assert read_spool(path) == ([], items[4:])
    again.peek(6)
    again.ack(6)
    again.close()
    assert path.read_bytes() == HEADER


def test_a_failed_write_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.spool"
    spool = FileSpool(path)
    first = fill(spool, 1)
    real_write = os.write

    def half_then_enospc(fd: int, data: Any) -> int:
        monkeypatch.setattr(os, "write", real_write)
        real_write(fd, bytes(data)[:7])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_enospc)
    with pytest.raises(SpoolError, match="cannot write"):
        spool.append(item(2))
    assert spool.pending_count == 1
    third = item(3)
    spool.append(third)
    spool.close()
    assert read_spool(path) == ([], [*first, third])


def test_memory_spool_has_the_same_interface() -> None:
    spool = MemorySpool()
    items = fill(spool, 5)
    assert spool.pending_count == 5
    assert spool.pending_bytes == sum(i.size for i in items)
    assert spool.peek(2) == items[:2]
    spool.ack(2)
    assert spool.peek(10) == items[2:]
    with pytest.raises(ValueError):
        spool.ack(4)
    spool.ack(3)
    assert spool.pending_count == spool.pending_bytes == 0


# --- the sender, against a fake log -------------------------------------------------------------


class FakeError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, retry_ms: int | None = None) -> None:
        super().__init__(code.name)
        self._code = code
        self._retry_ms = retry_ms

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return f"fake {self._code.name}"

    def trailing_metadata(self) -> Any:
        hint = () if self._retry_ms is None else (("retry-after-ms", str(self._retry_ms)),)
        return [Metadatum(key, value) for key, value in hint]


class Metadatum(NamedTuple):
    """What grpc's trailing_metadata() yields: (key, value) pairs with names."""

    key: str
    value: str


class FakeLog:
    """Stands in for ``RemoteLog.append``; ``script`` yields an error or None per call."""

    def __init__(self, script: Callable[[int], grpc.RpcError | None] = lambda _: None) -> None:
        self.calls: list[tuple[float, list[bytes], bool]] = []
        self.logged: list[bytes] = []
        self.script = script
        self.gate = threading.Event()
        self.gate.set()
        self.connects = 0

    def connect(self) -> RemoteLog:
        self.connects += 1
        return self  # type: ignore[return-value]

    def close(self) -> None:
        pass

    def append(self, digests: Sequence[bytes], *, wait_for_checkpoint: bool) -> AppendOutcome:
        self.gate.wait(10)
        self.calls.append((time.monotonic(), list(digests), wait_for_checkpoint))
        error = self.script(len(self.calls))
        if error is not None:
            raise translate(error, "fake")
        results = []
        for d in digests:
            duplicate = d in self.logged
            if not duplicate:
                self.logged.append(d)
            index = self.logged.index(d)
            results.append(
                AppendResult(index=index, leaf_hash=b"", timestamp_ms=0, duplicate=duplicate)
            )
        return AppendOutcome(results=results, checkpoint=None, proofs=[])

    def append_packed(self, digests: Sequence[bytes]) -> PackedResult:
        """``RemoteLog.append_packed``: the same log, answered in the packed form."""
        outcome = self.append(digests, wait_for_checkpoint=False)
        new = [r for r in outcome.results if not r.duplicate]
        dups = [(n, r) for n, r in enumerate(outcome.results) if r.duplicate]
        return PackedResult(
            count=len(digests),
            first_index=new[0].index if new else len(self.logged),
            timestamp_ms=0,
            dup_positions=array("Q", [n for n, _ in dups]),
            dup_indexes=array("Q", [r.index for _, r in dups]),
            dup_timestamps_ms=array("Q", [0] * len(dups)),
            dup_leaf_hashes=bytes(32 * len(dups)),
        )


FAST = Backoff(initial=0.001, maximum=0.01)


def sender(spool: Spool, log: FakeLog, **options: Any) -> Sender:
    options.setdefault("backoff", FAST)
    return Sender(spool, log.connect, SenderOptions(**options))


def test_batches_by_size_and_in_order() -> None:
    log = FakeLog()
    log.gate.clear()
    s = sender(MemorySpool(), log, batch_size=10, batch_age=60)
    items = [item(n) for n in range(35)]
    tickets = [s.put(i) for i in items]
    assert tickets == list(range(1, 36))
    log.gate.set()
    assert s.flush(5)
    assert log.logged == [i.digest for i in items]
    assert [len(c[1]) for c in log.calls][:3] == [10, 10, 10]
    assert s.close(1)


def test_batches_by_age() -> None:
    log = FakeLog()
    s = sender(MemorySpool(), log, batch_size=1000, batch_age=0.15)
    start = time.monotonic()
    ticket = s.put(item(1))
    assert s.wait(ticket, timeout=5)
    assert 0.1 <= log.calls[0][0] - start < 1.0
    assert log.calls[0][2] is False
    assert s.close(1)


def test_waiting_for_a_receipt_sends_now_and_asks_for_the_checkpoint() -> None:
    log = FakeLog()
    s = sender(MemorySpool(), log, batch_size=1000, batch_age=60)
    s.put(item(1))
    ticket = s.put(item(2))
    assert s.wait(ticket, timeout=5, checkpoint=True)
    assert log.calls == [(log.calls[0][0], [item(1).digest, item(2).digest], True)]
    s.close(1)


def test_retries_honour_the_servers_hint() -> None:
    errors = {1: FakeError(grpc.StatusCode.RESOURCE_EXHAUSTED, retry_ms=200),
              2: FakeError(grpc.StatusCode.UNAVAILABLE)}  # fmt: skip
    log = FakeLog(lambda n: errors.get(n))
    s = sender(MemorySpool(), log, batch_age=0)
    s.put(item(1))
    assert s.flush(5)
    times = [c[0] for c in log.calls]
    assert len(times) == 3 and s.retries == 2 and s.hinted == 1
    assert times[1] - times[0] >= 0.19  # the hint, not the 1 ms backoff
    assert times[2] - times[1] < 0.15
    assert log.connects == 2  # a fresh channel after UNAVAILABLE, none after pushback
    s.close(1)


def test_translate_reads_the_retry_hint_and_the_retry_rule() -> None:
    pushback = translate(FakeError(grpc.StatusCode.RESOURCE_EXHAUSTED, 1500), "fake")
    assert isinstance(pushback, PushbackError) and pushback.retry_after == 1.5
    assert is_retryable(pushback)
    unavailable = translate(FakeError(grpc.StatusCode.UNAVAILABLE), "fake")
    assert isinstance(unavailable, UnavailableError) and is_retryable(unavailable)
    refused = translate(FakeError(grpc.StatusCode.INVALID_ARGUMENT), "fake")
    assert isinstance(refused, InvalidArgumentError) and not is_retryable(refused)


def test_backoff_grows_and_is_capped() -> None:
    b = Backoff(initial=0.1, maximum=1.0, multiplier=2.0, jitter=0.0)
    assert [b.delay(i, 0.5) for i in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert Backoff(jitter=0.2).delay(0, 0.0) == pytest.approx(0.04)


def test_a_fatal_status_stops_and_is_reported(tmp_path: Path) -> None:
    log = FakeLog(lambda _: FakeError(grpc.StatusCode.INVALID_ARGUMENT))
    spool = FileSpool(tmp_path / "s.spool")
    s = sender(spool, log, batch_age=0)
    ticket = s.put(item(1))
    with pytest.raises(DeliveryError, match="INVALID_ARGUMENT") as info:
        s.wait(ticket, timeout=5)
    assert info.value.status == "INVALID_ARGUMENT"
    with pytest.raises(DeliveryError):
        s.put(item(2))
    assert not s.close(1)
    assert read_spool(tmp_path / "s.spool") == ([], [item(1)])  # kept for the next start


def test_overflow_raise_refuses_at_once() -> None:
    log = FakeLog()
    log.gate.clear()
    s = sender(MemorySpool(), log, max_pending=3, overflow="raise", batch_age=0)
    fill_tickets = [s.put(item(n)) for n in range(3)]
    with pytest.raises(SpoolFullError, match="3 records"):
        s.put(item(3))
    assert s.pending == 3 == fill_tickets[-1]
    log.gate.set()
    assert s.flush(5)
    s.put(item(3))  # room again
    assert s.flush(5)
    assert log.logged == [item(n).digest for n in range(4)]
    s.close(1)


def test_overflow_block_waits_for_room_then_times_out() -> None:
    log = FakeLog()
    log.gate.clear()
    s = sender(MemorySpool(), log, max_pending=2, batch_size=2, block_timeout=0.2, batch_age=0)
    s.put(item(0))
    s.put(item(1))
    start = time.monotonic()
    with pytest.raises(SpoolFullError, match=r"still full after 0\.2 s"):
        s.put(item(2))
    assert time.monotonic() - start >= 0.19
    with pytest.raises(SpoolFullError, match="spool full"):
        s.put(item(2), block=False)
    threading.Timer(0.1, log.gate.set).start()
    s.put(item(2))  # blocks until the gate opens and the first batch is acknowledged
    assert s.flush(5)
    assert log.logged == [item(n).digest for n in range(3)]
    s.close(1)


def test_overflow_counts_bytes_too() -> None:
    log = FakeLog()
    log.gate.clear()
    limit = item(0).size * 2
    s = sender(MemorySpool(), log, max_pending_bytes=limit, overflow="raise")
    s.put(item(0))
    s.put(item(1))
    with pytest.raises(SpoolFullError, match="bytes"):
        s.put(item(2))
    log.gate.set()
    s.close(5)


def test_close_leaves_undelivered_items_in_the_spool(tmp_path: Path) -> None:
    log = FakeLog(lambda _: FakeError(grpc.StatusCode.UNAVAILABLE))
    path = tmp_path / "s.spool"
    s = sender(FileSpool(path), log, batch_age=0)
    items = [item(n) for n in range(4)]
    for i in items:
        s.put(i)
    start = time.monotonic()
    assert not s.close(0.3)
    assert time.monotonic() - start < 3
    with pytest.raises(ClientClosedError):
        s.put(item(9))
    assert read_spool(path) == ([], items)
    resumed_log = FakeLog()
    resumed_log.gate.clear()
    resumed = sender(FileSpool(path), resumed_log)
    assert resumed.pending == 4
    resumed_log.gate.set()
    assert resumed.flush(5)
    assert resumed_log.logged == [i.digest for i in items]
    assert resumed.close(1)
    assert read_spool(path) == ([], [])
