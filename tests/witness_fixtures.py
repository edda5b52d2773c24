"""Test helpers for witnesses: a real log over an in-memory store, and request bodies."""

from __future__ import annotations

import hashlib

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.types import PublishedCheckpoint
from ledger.log.facade import Log
from ledger.log.sequencer import AppendItem
from ledger.store.contract import MemoryStore
from ledger.witness.core import build_request

ORIGIN = "ledger.test/witness"


class View:
    """One view of a log: a real ``Log`` whose entries are salted by ``salt``."""

    def __init__(self, signer: Ed25519Signer, salt: str = "") -> None:
        self.signer = signer
        self.salt = salt
        # a fixed clock: views given the same digests have the same leaves (a shared prefix)
        self.log = Log(store=MemoryStore(), signer=signer, origin=signer.name, clock_ms=lambda: 1)
        self._next = 0

    def grow(self, n: int) -> PublishedCheckpoint:
        """Append ``n`` entries and publish."""
        items = [
            AppendItem(hashlib.sha256(f"{self.salt}{self._next + i}".encode()).digest())
            for i in range(n)
        ]
        self._next += n
        self.log.append(items)
        return self.log.publish()

    def request(self, old: int, size: int | None = None) -> bytes:
        """An add-checkpoint body for the checkpoint of ``size`` (default latest) from ``old``."""
        checkpoint = self.log.checkpoint(size or 0)
        proof: tuple[bytes, ...] = ()
        if 0 < old < checkpoint.size:
            proof = self.log.consistency_proof(old, checkpoint.size).hashes
        return build_request(old, proof, checkpoint.note)


def log_signer(origin: str = ORIGIN) -> Ed25519Signer:
    return Ed25519Signer.generate(origin)
