"""Primary mode with real processes over a real SeaweedFS: kill -9 of the active writer under
append load (the standby takes over, nothing acknowledged is lost, one root per size), and a
writer SIGSTOPped past its lease that wakes after the takeover and stops before acknowledging."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from ledger.core.errors import LedgerError
from ledger_client.remote.log import RemoteLog
from tests import processes
from tests.harness import ServerProcess
from tests.objstore_world import Seaweed
from tests.primary_world import LEASE_S, Load, Pair, bucket_root_at, wait_acked
from tests.waits import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _check_no_loss(pair: Pair, address: str, acked: dict[bytes, int]) -> None:
    """Every acknowledged digest is in the serving writer's tree at its index, below the
    bucket's checkpoint."""
    size, _ = pair.bucket_checkpoint()
    client = RemoteLog(address, timeout=30)
    try:
        for digest, index in acked.items():
            assert index < size
            assert client.entry(digest).index == index
    finally:
        client.close()


def test_kill_9_under_load_the_standby_takes_over(seaweed: Seaweed, tmp_path: Path) -> None:
    pair = Pair(seaweed, tmp_path, "t/kill")
    active = pair.start("a")
    standby = pair.standby("b")
    load = Load(active.address)
    try:
        wait_acked(load, 200)
        assert not standby.done()  # it follows; it takes no appends while the lease is live
        active.kill()
        killed = time.monotonic()
        load.stop()
        b = standby.result(timeout=60)
        took = time.monotonic() - killed
        assert took < LEASE_S + 10
        acked = dict(load.acked)
        both = RemoteLog(f"{active.address},{b.address}", timeout=10)  # a client given both
        (moved,) = both.append([os.urandom(32)]).results
        assert both.address == b.address and moved.index >= len(acked)
        both.close()
        more = Load(b.address)  # the client moves to the writer that serves
        wait_acked(more, 100)
        more.stop()
        _check_no_loss(pair, b.address, {**acked, **more.acked})
        size, root = pair.bucket_checkpoint()
        assert bucket_root_at(pair, size) == root
        b.terminate()
    finally:
        load.stop()
        pair.close()


def test_a_writer_stopped_past_its_lease_wakes_fenced(seaweed: Seaweed, tmp_path: Path) -> None:
    pair = Pair(seaweed, tmp_path, "t/stop")
    active = pair.start("a")
    standby = pair.standby("b")
    client = RemoteLog(active.address, timeout=10)
    try:
        for _ in range(5):
            client.append([os.urandom(32) for _ in range(4)])
        active.proc.send_signal(signal.SIGSTOP)
        b = standby.result(timeout=60)  # the lease lapsed: the standby took the lock
        after = RemoteLog(b.address, timeout=10)
        taken = after.append([os.urandom(32)]).results[0].index
        active.proc.send_signal(signal.SIGCONT)
        with pytest.raises(LedgerError):  # its next conditional write fails: nothing acked
            client.append([os.urandom(32)])
        size, root = pair.bucket_checkpoint()
        assert size > taken and bucket_root_at(pair, size) == root
        # The stale writer says why it stopped.
        wait_until(
            lambda: "FENCED" in active.log_path.read_text() or "fenced" in
            active.log_path.read_text(), timeout=30, what="the stale writer's fence line",
        )  # fmt: skip
        after.close()
        b.terminate()
        active.kill()
    finally:
        client.close()
        pair.close()
        processes.reap()


def _guide_config(name: str, pair: Pair) -> str:
    """The operator guide's TOML block after ``<!-- primary-setup: NAME -->``, pointed at the
    test's bucket (the guide's text otherwise as written)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "operating.md").read_text()
    block = text.split(f"<!-- primary-setup: {name} -->\n```toml\n", 1)[1].split("```", 1)[0]
    block = block.replace("s3://my-log-bucket/ledger", f"s3://{pair.seaweed.bucket}/{pair.prefix}")
    block = block.replace("https://s3.example.net", pair.seaweed.endpoint)
    return block.replace("lease_s = 10", f"lease_s = {LEASE_S}")


def test_the_operator_guides_two_machine_setup(seaweed: Seaweed, tmp_path: Path) -> None:
    pair = Pair(seaweed, tmp_path, "t/guide")
    files = {}
    for name in ("active", "standby"):
        files[name] = tmp_path / f"{name}.toml"
        files[name].write_text(_guide_config(name, pair))
    active = ServerProcess(tmp_path / "a", pair.key, "--config", str(files["active"]))
    standby = pair.submit(
        ServerProcess, tmp_path / "b", pair.key, "--config", str(files["standby"]), "--standby"
    )
    client = RemoteLog(active.address, timeout=10)
    try:
        first = [os.urandom(32) for _ in range(50)]
        acked = {d: r.index for d, r in zip(first, client.append(first).results, strict=True)}
        active.kill()
        b = standby.result(timeout=60)
        _check_no_loss(pair, b.address, acked)
        again = RemoteLog(b.address, timeout=10)
        # A spool's re-send during the failover: the same index, never a second one.
        assert [r.index for r in again.append(first).results] == [acked[d] for d in first]
        lock = pair.bucket.get(".ledger/lock")
        assert lock is not None and b'"writer": "machine-b"' in lock.body
        again.close()
        b.terminate()
    finally:
        client.close()
        pair.close()


def test_a_bucket_older_than_the_local_mark_is_refused(seaweed: Seaweed, tmp_path: Path) -> None:
    pair = Pair(seaweed, tmp_path, "t/old")
    active = pair.start("a")
    client = RemoteLog(active.address, timeout=10)
    client.append([os.urandom(32) for _ in range(20)])
    client.close()
    assert active.terminate() == 0
    fresh = Pair(seaweed, tmp_path / "fresh", "t/old-copy")  # an empty (older) bucket
    fresh.key.write_bytes(pair.key.read_bytes())
    with pytest.raises(RuntimeError, match="older than the local mark"):
        ServerProcess(tmp_path / "a", pair.key, *fresh.args("a"))
    pair.close()
    fresh.close()


@pytest.mark.parametrize("skew_ms", [30_000, -30_000])
def test_a_standby_with_a_skewed_clock_takes_over(
    seaweed: Seaweed, tmp_path: Path, skew_ms: int
) -> None:
    pair = Pair(seaweed, tmp_path, f"t/skew{skew_ms}")
    active = pair.start("a")
    skewed = tmp_path / "skewed.toml"
    skewed.write_text(f"[log]\nclock_offset_ms = {skew_ms}\n")
    standby = pair.submit(
        ServerProcess, tmp_path / "b", pair.key, *pair.args("b"), "--standby",
        "--config", str(skewed),
    )  # fmt: skip
    client = RemoteLog(active.address, timeout=10)
    try:
        first = client.append([os.urandom(32) for _ in range(20)]).results
        time.sleep(LEASE_S)  # the standby follows for a while with its skewed clock
        active.kill()
        killed = time.monotonic()
        b = standby.result(timeout=60)
        assert time.monotonic() - killed < LEASE_S + 10  # the lease ignores wall clocks
        after = RemoteLog(b.address, timeout=10)
        later = after.append([os.urandom(32) for _ in range(20)]).results
        times = [r.timestamp_ms for r in first + later]
        assert times == sorted(times)  # leaf times never go back, whatever the clock says
        _check_no_loss(pair, b.address, {})
        after.close()
        b.terminate()
    finally:
        client.close()
        pair.close()


def test_the_bucket_stopped_mid_load(private_seaweed: Seaweed, tmp_path: Path) -> None:
    """Appends fail (retryably) while the bucket is stalled, nothing acknowledged is missing from
    it, and the log resumes by itself when it answers again."""
    seaweed = private_seaweed  # it SIGSTOPs the store: a SeaweedFS of its own
    pair = Pair(seaweed, tmp_path, "t/away")
    active = pair.start("a")
    load = Load(active.address)
    try:
        wait_acked(load, 100)
        seaweed.proc.send_signal(signal.SIGSTOP)
        try:
            errors = load.errors
            wait_until(lambda: load.errors > errors + 3, timeout=60, what="failing appends")
            # A stalled store: a commit fails UNAVAILABLE after the bucket's timeouts (2 s x 2),
            # but calls queued behind it (and behind a stalled lease renewal) reach the
            # client's 5 s deadline first. Both are retryable; nothing is acknowledged.
            assert load.statuses <= {"UNAVAILABLE", "DEADLINE_EXCEEDED"}, load.statuses
            stalled = len(load.acked)
        finally:
            seaweed.proc.send_signal(signal.SIGCONT)
        wait_acked(load, stalled + 100)  # resumed, same process
        load.stop()
        _check_no_loss(pair, active.address, dict(load.acked))
        active.terminate()
    finally:
        load.stop()
        pair.close()
