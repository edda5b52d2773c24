"""Crash safety for real: ``ledger serve`` killed with SIGKILL at random moments under load.

After every restart: every acknowledged entry is present at its acknowledged index, the tree
opens at exactly its durable state, every checkpoint ever seen is consistent with the newest,
and no size ever had two roots.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from pathlib import Path

import pytest

from ledger.core import merkle
from ledger.core.checkpoint import Ed25519Signer, open_checkpoint
from ledger.core.errors import LedgerError
from ledger.fileio.keys import write_signer
from ledger_client.remote.log import RemoteLog
from tests.harness import ORIGIN, ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CYCLES = 12


class Load:
    """Writer threads appending until the server dies; they record what was acknowledged."""

    def __init__(self, address: str, cycle: int, signer: Ed25519Signer) -> None:
        self.address = address
        self.cycle = cycle
        self.verifier = signer.verifier()
        self.acked: dict[bytes, int] = {}
        self.checkpoints: dict[int, bytes] = {}
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(t,)) for t in range(4)]
        for t in self.threads:
            t.start()

    def run(self, worker: int) -> None:
        rng = random.Random(self.cycle * 100 + worker)
        with RemoteLog(self.address, timeout=10) as log:
            for n in itertools_count():
                batch = [
                    hashlib.sha256(f"{self.cycle}-{worker}-{n}-{i}".encode()).digest()
                    for i in range(rng.choice([1, 5, 50, 100]))
                ]
                try:
                    out = log.append(batch, wait_for_checkpoint=rng.random() < 0.3)
                except LedgerError:
                    return
                with self.lock:
                    for d, r in zip(batch, out.results, strict=True):
                        self.acked[d] = r.index
                    if out.checkpoint is not None:
                        self.record(out.checkpoint.note)

    def record(self, note: str) -> None:
        cp = open_checkpoint(note, [self.verifier], origin=ORIGIN).checkpoint
        assert self.checkpoints.get(cp.size, cp.root_hash) == cp.root_hash
        self.checkpoints[cp.size] = cp.root_hash

    def join(self) -> None:
        for t in self.threads:
            t.join(timeout=30)


def itertools_count() -> range:
    return range(10**9)


def test_kill_minus_nine_under_load(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    key_file = tmp_path / "signer.key"
    write_signer(key_file, signer)
    data_dir = tmp_path / "data"
    acked: dict[bytes, int] = {}
    roots: dict[int, bytes] = {}
    rng = random.Random(6962)
    last: dict[bytes, int] = {}
    for cycle in range(CYCLES):
        server = ServerProcess(data_dir, key_file)
        verify_after_restart(server.address, signer, sample(acked, last, rng), roots)
        load = Load(server.address, cycle, signer)
        time.sleep(rng.uniform(0.05, 0.5))
        server.kill()
        load.join()
        for size, root in load.checkpoints.items():
            assert roots.setdefault(size, root) == root, f"two roots for size {size}"
        acked.update(load.acked)
        last = load.acked
    server = ServerProcess(data_dir, key_file)
    try:
        verify_after_restart(server.address, signer, acked, roots)
    finally:
        assert server.terminate() == 0
    assert len(acked) > 1000, "the load never got going; the test proved nothing"


def sample(acked: dict[bytes, int], last: dict[bytes, int], rng: random.Random) -> dict[bytes, int]:
    """Everything the last cycle acknowledged, and 1,000 older entries (all of them at the end)."""
    older = rng.sample(sorted(acked), min(1000, len(acked)))
    return {**{d: acked[d] for d in older}, **last}


def verify_after_restart(
    address: str, signer: Ed25519Signer, acked: dict[bytes, int], roots: dict[int, bytes]
) -> None:
    with RemoteLog(address, timeout=30) as log:
        latest = log.checkpoint()
        cp = open_checkpoint(latest.note, [signer.verifier()], origin=ORIGIN).checkpoint
        assert roots.setdefault(cp.size, cp.root_hash) == cp.root_hash
        assert cp.size >= (max(acked.values()) + 1 if acked else 0)
        digests = list(acked)
        for start in range(0, len(digests), 1000):
            chunk = digests[start : start + 1000]
            proofs = log.inclusion_proofs(record_digests=chunk, tree_size=cp.size)
            for d, p in zip(chunk, proofs, strict=True):
                assert p.entry.index == acked[d], "an acknowledged entry moved or vanished"
                merkle.verify_inclusion(p.leaf_hash, p.entry.index, cp.size, p.hashes, cp.root_hash)
        for size, root in roots.items():
            if 0 < size <= cp.size:
                proof = log.consistency_proof(size, cp.size)
                merkle.verify_consistency(size, cp.size, root, cp.root_hash, proof.hashes)
