"""The derived dedup table survives ``kill -9``: a real ``ledger serve`` is killed with SIGKILL
under packed and typed appends (the table growing several times meanwhile), restarted, and
every digest it acknowledged, appended again, is answered as a duplicate with its original
index and time; new digests mixed in are new. Then the table file is deleted and the log,
restarted, rebuilds it from the entry bundles and answers the same."""

from __future__ import annotations

import hashlib
import random
import threading
import time
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import LedgerError
from ledger.core.packed import to_results
from ledger.fileio.keys import write_signer
from ledger_client.remote.log import RemoteLog
from tests.harness import ORIGIN, ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CYCLES = 3


class Load:
    """Writer threads (two packed, two typed) appending until the server dies."""

    def __init__(self, address: str, cycle: int) -> None:
        self.address = address
        self.cycle = cycle
        self.acked: dict[bytes, tuple[int, int]] = {}  # digest -> (index, time)
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(t,)) for t in range(4)]
        for t in self.threads:
            t.start()

    def run(self, worker: int) -> None:
        rng = random.Random(self.cycle * 100 + worker)
        with RemoteLog(self.address, timeout=10) as log:
            for n in range(10**9):
                batch = [
                    hashlib.sha256(f"dedup-{self.cycle}-{worker}-{n}-{i}".encode()).digest()
                    for i in range(rng.choice([1, 50, 500, 1000]))
                ]
                batch.append(batch[0])  # a duplicate inside the request too
                try:
                    if worker % 2:
                        results = log.append(batch).results
                    else:
                        packed = b"".join(batch)
                        results = to_results(packed, log.append_packed(packed))
                except LedgerError:
                    return
                with self.lock:
                    for d, r in zip(batch, results, strict=True):
                        self.acked.setdefault(d, (r.index, r.timestamp_ms))

    def join(self) -> None:
        for t in self.threads:
            t.join(timeout=30)


def check_duplicates(address: str, acked: dict[bytes, tuple[int, int]], tag: str) -> None:
    """Every acknowledged digest appended again answers its original index and time; fresh
    digests in the same requests are new."""
    digests = list(acked)
    with RemoteLog(address, timeout=30) as log:
        for start in range(0, len(digests), 900):
            chunk = digests[start : start + 900]
            fresh = [hashlib.sha256(f"{tag}-{start}-{i}".encode()).digest() for i in range(3)]
            packed = b"".join(fresh + chunk)
            results = to_results(packed, log.append_packed(packed))
            assert [r.duplicate for r in results[:3]] == [False] * 3
            for d, r in zip(chunk, results[3:], strict=True):
                assert r.duplicate and (r.index, r.timestamp_ms) == acked[d], d.hex()
        if digests:
            typed = log.append(digests[:500]).results
            for d, r in zip(digests, typed, strict=False):
                assert r.duplicate and (r.index, r.timestamp_ms) == acked[d]


def test_kill_minus_nine_then_every_acknowledged_digest_is_a_duplicate(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    key_file = tmp_path / "signer.key"
    write_signer(key_file, signer)
    data_dir = tmp_path / "data"
    acked: dict[bytes, tuple[int, int]] = {}
    rng = random.Random(23)
    for cycle in range(CYCLES):
        server = ServerProcess(data_dir, key_file)
        try:
            check_duplicates(server.address, acked, f"check-{cycle}")
            load = Load(server.address, cycle)
            time.sleep(rng.uniform(1.0, 2.5))
        finally:
            server.kill()
        load.join()
        for d, answer in load.acked.items():
            assert acked.setdefault(d, answer) == answer
    assert len(acked) > 5_000, "the load never got going; the test proved nothing"
    table = data_dir / "db" / "LEDGER-DEDUP"
    assert table.stat().st_size > 8192 + 12 * 4096, "the table never grew"
    server = ServerProcess(data_dir, key_file)
    try:
        check_duplicates(server.address, acked, "after")
    finally:
        assert server.terminate() == 0
    table.unlink()
    server = ServerProcess(data_dir, key_file)
    try:
        check_duplicates(server.address, acked, "rebuilt")
    finally:
        assert server.terminate() == 0
    assert "rebuilt from the entry bundles (there is none)" in server.log_path.read_text()
