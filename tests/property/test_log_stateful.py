"""A hypothesis state machine over the ``Log`` facade with the store's fault hook armed at every
fault point (commit, checkpoint, anchor): after every step, every acknowledged entry is where it
was acknowledged, every published size has one root, the newest checkpoint matches the stored
tree, proofs verify, and a restart over the same store recovers all of it (docs/design.md
"Rules of the house", rule 4)."""

from __future__ import annotations

import hashlib

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ledger.core import merkle
from ledger.core.checkpoint import Ed25519Signer, open_checkpoint
from ledger.core.errors import LogFailedError
from ledger.core.types import Anchor, AppendItem
from ledger.log.facade import Log
from ledger.store.contract import MemoryStore

ORIGIN = "ledger.test/stateful"
SIGNER = Ed25519Signer.generate(ORIGIN)
FAULT_POINTS = ("commit", "checkpoint", "anchor")


class Injected(Exception):
    """A simulated crash inside the store."""


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.armed: str | None = None
        self.store = MemoryStore(fault=self._fault)
        self.log = self._open()
        self.acked: dict[bytes, int] = {}
        self.roots: dict[int, bytes] = {}
        self.counter = 0
        self.anchors: set[tuple[int, str]] = set()

    def _fault(self, point: str) -> None:
        if self.armed == point:
            self.armed = None
            raise Injected(point)

    def _open(self) -> Log:
        return Log(store=self.store, signer=SIGNER, origin=ORIGIN, clock_ms=lambda: 1_000)

    def _digest(self) -> bytes:
        self.counter += 1
        return hashlib.sha256(f"d{self.counter}".encode()).digest()

    @rule(point=st.sampled_from(FAULT_POINTS))
    def arm(self, point: str) -> None:
        self.armed = point

    @rule(new=st.integers(1, 40), again=st.integers(0, 3))
    def append(self, new: int, again: int) -> None:
        fresh = [self._digest() for _ in range(new)]
        old = list(self.acked)[:again]
        try:
            results = self.log.append([AppendItem(d) for d in fresh + old])
        except (Injected, LogFailedError):
            return  # not acknowledged: nothing may be assumed, and nothing may be lost
        for d, r in zip(fresh + old, results, strict=True):
            assert self.acked.setdefault(d, r.index) == r.index
            assert r.duplicate == (d in old)

    @rule()
    def publish(self) -> None:
        try:
            cp = self.log.publish()
        except (Injected, LogFailedError):
            return
        assert self.roots.setdefault(cp.size, cp.root_hash) == cp.root_hash

    @rule(tsa=st.sampled_from(["a", "b"]))
    def anchor(self, tsa: str) -> None:
        latest = self.log.latest_checkpoint()
        if latest is None:
            return
        try:
            self.log.put_anchor(Anchor(size=latest.size, tsa=tsa, token=b"t", gen_time_ms=1))
        except (Injected, LogFailedError):  # a failed store stops the log until a restart
            return
        self.anchors.add((latest.size, tsa))

    @rule()
    def restart(self) -> None:
        """A crash and a restart: a new Log over what the store durably holds."""
        self.armed = None
        self.log = self._open()

    @invariant()
    def acknowledged_entries_stay_put(self) -> None:
        for d, index in self.acked.items():
            assert self.store.find_digests([d]) == [index]
        assert self.store.load_state().size == len(self.acked)

    @invariant()
    def one_root_per_size_and_the_newest_matches_the_tree(self) -> None:
        latest = self.log.latest_checkpoint()
        if latest is None:
            return
        assert self.roots.get(latest.size, latest.root_hash) == latest.root_hash
        self.roots[latest.size] = latest.root_hash
        assert self.log.root_at(latest.size) == latest.root_hash
        open_checkpoint(latest.note, [SIGNER.verifier()], origin=ORIGIN)

    @invariant()
    def proofs_verify_against_the_signed_root(self) -> None:
        latest = self.log.latest_checkpoint()
        if latest is None or latest.size == 0:
            return
        for index in {0, latest.size // 2, latest.size - 1}:
            proof = self.log.inclusion_proof(index, latest.size)
            merkle.verify_inclusion(
                proof.leaf_hash, index, latest.size, list(proof.hashes), latest.root_hash
            )
        for size in self.roots:
            if 0 < size < latest.size:
                hashes = self.log.consistency_proof(size, latest.size).hashes
                merkle.verify_consistency(
                    size, latest.size, self.roots[size], latest.root_hash, list(hashes)
                )

    @invariant()
    def anchors_are_kept(self) -> None:
        for size, tsa in self.anchors:
            assert tsa in {a.tsa for a in self.store.get_anchors(size)}


LogMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
test_log_state_machine = LogMachine.TestCase
