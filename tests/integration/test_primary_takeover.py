"""Primary mode with real processes over a real SeaweedFS: kill -9 of the active writer under
append load (the standby takes over, nothing acknowledged is lost, one root per size), and a
writer SIGSTOPped past its lease that wakes after the takeover and stops before acknowledging."""

from __future__ import annotations

import json
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
from tests.witness_harness import WitnessProcess, make_witness_key, start_witnesses

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
            # A stalled store: every bucket request is bounded and the gate then fails fast,
            # so the client (5 s deadline) sees UNAVAILABLE naming the bucket, never
            # DEADLINE_EXCEEDED; nothing is acknowledged.
            time.sleep(3 * LEASE_S)  # a stall longer than the lease renewals' period
            assert load.statuses == {"UNAVAILABLE"}, (load.statuses, load.last_error)
            assert "s3://ledger/t/away" in load.last_error
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


def _cosigned(data_dir: Path, name: str) -> int:
    """The size witness ``name`` last cosigned, as the writer's ``witnesses.json`` says."""
    try:
        doc = json.loads((data_dir / "witnesses.json").read_text())
    except (OSError, ValueError):
        return 0
    return next((w["cosigned_size"] or 0 for w in doc["witnesses"] if w["name"] == name), 0)


def test_a_bucket_older_than_a_witness_is_refused_at_takeover(
    seaweed: Seaweed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bucket rolled back below what one witness (of a quorum of two) cosigned: the writer
    that takes it over halts before signing anything (an alert would let it sign a second
    root at the witness's size)."""
    monkeypatch.setenv("LEDGER_OBJECT_STORE_LEASE_S", str(LEASE_S))
    pair = Pair(seaweed, tmp_path, "t/witness")
    log_key = pair.signer.verifier().key_string()
    keys = [make_witness_key(tmp_path, f"w{i}.test") for i in range(2)]
    witnesses = start_witnesses([k for k, _ in keys], tmp_path, [log_key])
    config = tmp_path / "witnesses.toml"
    config.write_text("[witnessing]\nquorum = 2\nstart_timeout_s = 5\n\n" + "".join(
        f'[[witness]]\nname = "w{i}"\nurl = "{w.url}"\nkey = "{keys[i][1]}"\ntimeout_s = 3\n\n'
        for i, w in enumerate(witnesses)))  # fmt: skip
    active = ServerProcess(tmp_path / "a", pair.key, *pair.args("a"), "--config", str(config))
    client = RemoteLog(active.address, timeout=10)
    try:
        client.append([os.urandom(32) for _ in range(10)], wait_for_checkpoint=True)
        assert pair.bucket_checkpoint()[0] == 10  # waits for the public copy, behind the ack
        old = {name: pair.bucket.get(name) for name in (".ledger/lock", "checkpoint")}
        witnesses[1].stop(signal.SIGKILL)  # w1 misses what follows
        client.append([os.urandom(32) for _ in range(15)], wait_for_checkpoint=True)
        wait_until(lambda: _cosigned(tmp_path / "a", "w0") == 25, timeout=30,
                   what="w0's cosignature of size 25")  # fmt: skip
        client.close()
        assert active.terminate() == 0
        for name, stored in old.items():  # the bucket restored from a copy taken at size 10
            assert stored is not None
            pair.bucket.put(name, stored.body, {"Content-Type": "text/plain"})
        witnesses[1] = WitnessProcess(
            keys[1][0], tmp_path / "w1", [log_key], witnesses[1].address
        )  # w1 is back, at 10: it agrees with the bucket; w0 holds 25

        taker = ServerProcess(
            tmp_path / "c", pair.key, *pair.args("c"), "--standby", "--config", str(config)
        )  # a standby with its own data dir: it follows the bucket to 10 and takes the lock
        after = RemoteLog(taker.address, timeout=10)
        with pytest.raises(LedgerError, match=r"older than witness w0's \(size 25\)"):
            after.append([os.urandom(32)])
        after.close()
        assert pair.bucket_checkpoint()[0] == 10  # nothing signed over the rolled-back bucket
        assert "HALTED" in taker.log_path.read_text()
        assert f"s3://{seaweed.bucket}/t/witness" in taker.log_path.read_text()
        taker.terminate()
    finally:
        client.close()
        for w in witnesses:
            if w.proc.poll() is None:
                w.stop()
        pair.close()
