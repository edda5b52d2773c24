"""Never sign below known evidence (issue 22 item 1), as an attacker or an unlucky operator
would meet it: real ``ledger serve`` and ``ledger witness serve`` processes, real sockets, real
RocksDB.

* A whole-host snapshot restore (the data dir *and* its high-water mark beside it) starts
  halted: reads served, nothing signed or appended, health NOT_SERVING, ``/metrics`` and one
  log line naming the evidence (before: it started silently and re-signed published sizes).
* A witness reporting a larger size, below the quorum, is an alert; the log goes on.
* A non-empty data dir without a mark starts read-only until a witness quorum agrees, or until
  ``ledger restore accept``.
* Witnesses down at start: read-only until they answer, unless the logged override is set.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ledger.core.checkpoint import CosignatureVerifier, Ed25519Signer, open_checkpoint
from ledger.core.errors import FailedPreconditionError
from ledger.fileio.keys import write_signer
from ledger_client.remote.log import RemoteLog
from tests import processes
from tests.harness import ORIGIN, ServerProcess
from tests.witness_harness import FakeWitness, WitnessProcess, make_witness_key, start_witnesses

pytestmark = [pytest.mark.integration]

_T = TypeVar("_T")


def digests(n: int, tag: str) -> list[bytes]:
    return [hashlib.sha256(f"{tag}-{i}".encode()).digest() for i in range(n)]


def wait_for(predicate: Callable[[], _T], timeout: float = 20.0, what: str = "it") -> _T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def health(address: str) -> int:
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service="ledger.v1.LedgerService")
        return int(stub.Check(request, timeout=10).status)


def metric(server: ServerProcess, name: str) -> float:
    with urllib.request.urlopen(f"http://{server.ready['metrics']}/metrics", timeout=10) as r:
        text = r.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    assert found is not None, f"{name} not in /metrics"
    return float(found.group(1))


@dataclass
class World:
    tmp: Path
    key_file: Path
    signer: Ed25519Signer
    witness_keys: list[tuple[Path, str]]
    witnesses: list[WitnessProcess]

    def config(self, quorum: int, *extra: str, witnesses: int | None = None) -> Path:
        chosen = self.witnesses[: len(self.witnesses) if witnesses is None else witnesses]
        entries = "".join(
            f'[[witness]]\nname = "w{i}"\nurl = "{w.url}"\nkey = "{self.witness_keys[i][1]}"\n'
            "timeout_s = 3\n\n"
            for i, w in enumerate(chosen)
        )
        path = self.tmp / f"log-{quorum}-{len(chosen)}.toml"
        head = "\n".join(extra)
        path.write_text(f"[witnessing]\nquorum = {quorum}\n{head}\n\n{entries}")
        return path

    def log(self, config: Path, *flags: str) -> ServerProcess:
        return ServerProcess(self.tmp / "data", self.key_file, "--config", str(config), *flags)

    def cosigners(self, note: str) -> int:
        witnesses = [CosignatureVerifier.from_key_string(k) for _, k in self.witness_keys]
        verified = open_checkpoint(note, [self.signer.verifier()], witnesses=witnesses)
        return len(verified.cosignatures)

    def restart_witness(self, i: int, old: WitnessProcess) -> None:
        key_file, _ = self.witness_keys[i]
        self.witnesses[i] = WitnessProcess(
            key_file, self.tmp / f"w{i}", [self.signer.verifier().key_string()], old.address
        )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    signer = Ed25519Signer.generate(ORIGIN)
    key_file = tmp_path / "log.key"
    write_signer(key_file, signer)
    keys = [make_witness_key(tmp_path, f"w{i}.test") for i in range(2)]
    witnesses = start_witnesses([k for k, _ in keys], tmp_path, [signer.verifier().key_string()])
    world = World(tmp_path, key_file, signer, keys, witnesses)
    try:
        yield world
    finally:
        for w in world.witnesses:
            if w.proc.poll() is None:
                w.stop()


def grow(world: World, server: ServerProcess, tag: str, n: int, cosigned_by: int) -> int:
    with RemoteLog(server.address, timeout=30) as remote:
        out = remote.append(digests(n, tag), wait_for_checkpoint=True)
        assert out.checkpoint is not None
        size = out.checkpoint.size
        if cosigned_by:
            wait_for(
                lambda: world.cosigners(remote.checkpoint(size).note) >= cosigned_by,
                what=f"{cosigned_by} cosignatures on size {size}",
            )
    return size


def snapshot(tmp: Path, into: str) -> None:
    """A copy of everything beside the data dir: the data dir, its mark and acked size."""
    (tmp / into).mkdir()
    for name in ("data", "data.high-water", "data.high-water.acked"):
        src = tmp / name
        if src.is_dir():
            shutil.copytree(src, tmp / into / name)
        elif src.exists():
            shutil.copy2(src, tmp / into / name)


def put_back(tmp: Path, snap: str) -> None:
    shutil.rmtree(tmp / "data")
    for name in ("data.high-water", "data.high-water.acked"):
        (tmp / name).unlink(missing_ok=True)
    for src in (tmp / snap).iterdir():
        if src.is_dir():
            shutil.copytree(src, tmp / src.name)
        else:
            shutil.copy2(src, tmp / src.name)


def test_a_snapshot_restored_with_its_mark_is_halted_before_it_signs(world: World) -> None:
    config = world.config(quorum=2)
    log = world.log(config)
    try:
        assert grow(world, log, "one", 20, cosigned_by=2) == 20
    finally:
        assert log.terminate() == 0
    snapshot(world.tmp, "snap")
    log = world.log(config)
    try:
        assert grow(world, log, "two", 30, cosigned_by=2) == 50
    finally:
        assert log.terminate() == 0
    tiles = world.tmp / "tiles"  # a copy of the published tiles (a mirror, a CDN, a bucket)
    exported = ledger("tiles", "export", "--data-dir", str(world.tmp / "data"), "--out", str(tiles))
    assert exported.returncode == 0, exported.stderr
    put_back(world.tmp, "snap")  # data dir + mark + acked size, as a host snapshot has them

    log = world.log(config)
    try:
        with RemoteLog(log.address, timeout=30) as remote:
            assert remote.checkpoint().size == 20  # reads are served
            with pytest.raises(FailedPreconditionError, match=r"halted on evidence.*size 50"):
                remote.append(digests(5, "three"))
            time.sleep(0.5)
            assert remote.checkpoint().size == 20  # nothing new signed
            with pytest.raises(Exception, match="21"):
                remote.checkpoint(21)
        assert health(log.address) == health_pb2.HealthCheckResponse.NOT_SERVING
        assert metric(log, "ledger_evidence_halted") == 1
        assert metric(log, "ledger_read_only") == 1
    finally:
        log.terminate()
    lines = [line for line in log.log_path.read_text().splitlines() if "HALTED" in line]
    assert len(lines) == 1 and ("w0" in lines[0] or "w1" in lines[0])
    assert "size 50" in lines[0]

    # the way out: catch up from any copy of the published tiles, checked against its root
    restore_config = world.tmp / "restore.toml"
    restore_config.write_text(
        f'[log]\norigin = "{ORIGIN}"\ndata_dir = "{world.tmp / "data"}"\n'
        f'key_file = "{world.key_file}"\n'
    )
    caught = ledger("restore", "catch-up", "--config", str(restore_config),
                    "--from-tiles", tiles.as_uri())  # fmt: skip
    assert caught.returncode == 0, caught.stderr
    assert "tree size 50" in caught.stdout
    log = world.log(config)
    try:
        assert grow(world, log, "three", 5, cosigned_by=2) == 55
    finally:
        assert log.terminate() == 0


def test_a_larger_size_from_fewer_witnesses_than_the_quorum_is_an_alert(world: World) -> None:
    config = world.config(quorum=2)
    log = world.log(config)
    try:
        assert grow(world, log, "one", 10, cosigned_by=2) == 10
    finally:
        assert log.terminate() == 0
    snapshot(world.tmp, "snap")
    old = world.witnesses[0]
    old.stop(signal.SIGKILL)  # w0 misses what follows
    log = world.log(config)
    try:
        assert grow(world, log, "two", 15, cosigned_by=1) == 25
    finally:
        assert log.terminate() == 0
    world.restart_witness(0, old)
    put_back(world.tmp, "snap")

    log = world.log(config)  # w0 knows 10, w1 knows 25: one larger, quorum 2
    try:
        assert wait_for(lambda: metric(log, "ledger_evidence_alert") == 1, what="alert")
        assert metric(log, "ledger_evidence_halted") == 0
        assert health(log.address) == health_pb2.HealthCheckResponse.SERVING
        with RemoteLog(log.address, timeout=30) as remote:
            remote.append(digests(3, "three"), wait_for_checkpoint=True)
    finally:
        log.terminate()
    text = log.log_path.read_text()
    assert re.search(r"EVIDENCE ALERT \(1 of quorum 2\).*w1.*size 25", text)


def test_a_data_dir_without_its_mark_waits_for_the_witnesses(world: World) -> None:
    config = world.config(quorum=2)
    log = world.log(config)
    try:
        grow(world, log, "one", 10, cosigned_by=2)
    finally:
        assert log.terminate() == 0
    (world.tmp / "data.high-water").unlink()
    log = world.log(config)  # both witnesses are at 10: a quorum agrees, read-write
    try:
        assert grow(world, log, "two", 5, cosigned_by=0) == 15
    finally:
        assert log.terminate() == 0
    assert (world.tmp / "data.high-water").exists()


def ledger(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ledger", *args]
    return processes.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_a_data_dir_without_its_mark_and_no_witness_needs_restore_accept(world: World) -> None:
    config = world.tmp / "plain.toml"
    config.write_text(
        f'[log]\norigin = "{ORIGIN}"\ndata_dir = "{world.tmp / "data"}"\n'
        f'key_file = "{world.key_file}"\n'
    )
    log = world.log(config)
    try:
        assert grow(world, log, "one", 10, cosigned_by=0) == 10
    finally:
        assert log.terminate() == 0
    (world.tmp / "data.high-water").unlink()
    log = world.log(config)
    try:
        with RemoteLog(log.address, timeout=30) as remote:
            assert remote.checkpoint().size == 10
            with pytest.raises(FailedPreconditionError, match="no high-water mark"):
                remote.append(digests(1, "two"))
    finally:
        assert log.terminate() == 0
    accepted = ledger("restore", "accept", "--config", str(config))
    assert accepted.returncode == 0, accepted.stderr
    assert "accepted without a mark" in accepted.stdout
    log = world.log(config)
    try:
        assert grow(world, log, "two", 5, cosigned_by=0) == 15
    finally:
        assert log.terminate() == 0


def test_witnesses_down_at_start_hold_the_log_unless_overridden(world: World) -> None:
    config = world.config(1, "start_timeout_s = 1", witnesses=1)
    log = world.log(config)
    try:
        grow(world, log, "one", 10, cosigned_by=1)
    finally:
        assert log.terminate() == 0
    old = world.witnesses[0]
    old.stop()

    log = world.log(config)
    try:
        with RemoteLog(log.address, timeout=30) as remote:
            with pytest.raises(FailedPreconditionError, match="0 of 1 witnesses answered"):
                remote.append(digests(1, "two"))
            world.restart_witness(0, old)  # back: its cosignature lifts the hold

            def appended() -> bool:
                try:
                    remote.append(digests(1, "two"))
                except FailedPreconditionError:
                    return False
                return True

            wait_for(appended, what="the hold to lift")
    finally:
        assert log.terminate() == 0
    world.witnesses[0].stop()

    log = world.log(config, "--witness-start-override")
    try:
        with RemoteLog(log.address, timeout=30) as remote:
            remote.append(digests(1, "three"))
    finally:
        assert log.terminate() == 0
    assert "start_override" in log.log_path.read_text()


@pytest.mark.parametrize(
    ("status", "kind", "body", "halts"),
    [
        (409, "text/plain", b"another root at this size\n", True),  # 409 at the submitted size
        (422, "text/plain", b"the proof does not verify\n", True),
        (409, "text/x.tlog.size", b"3\n", False),  # a size the tree holds: catch-up, no halt
    ],
)
def test_witness_answers_that_are_evidence_halt(
    world: World, status: int, kind: str, body: bytes, halts: bool
) -> None:
    fake = FakeWitness(status, kind, body)
    try:
        config = world.tmp / "fake.toml"
        config.write_text(
            f'[witnessing]\nquorum = 1\n\n[[witness]]\nname = "fake"\nurl = "{fake.url}"\n'
            f'key = "{world.witness_keys[0][1]}"\ntimeout_s = 3\n'
        )
        log = world.log(config)
        try:
            with RemoteLog(log.address, timeout=30) as remote:
                remote.append(digests(10, "one"), wait_for_checkpoint=True)
                if halts:
                    wait_for(lambda: metric(log, "ledger_evidence_halted") == 1, what="the halt")
                    with pytest.raises(FailedPreconditionError, match="halted on evidence: fork"):
                        remote.append(digests(1, "two"))
                    assert health(log.address) == health_pb2.HealthCheckResponse.NOT_SERVING
                else:
                    time.sleep(1.0)  # it re-proves from size 3, and again, and gives up
                    assert metric(log, "ledger_evidence_halted") == 0
                    remote.append(digests(1, "two"), wait_for_checkpoint=True)
        finally:
            log.terminate()
    finally:
        fake.stop()
