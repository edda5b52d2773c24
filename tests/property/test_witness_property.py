"""Property: whatever a log (or anyone replaying its signed checkpoints) submits, in any order,
a witness cosigns one root per size, and each checkpoint it cosigns extends the one before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import merkle
from ledger.core.checkpoint import Checkpoint, CosignatureSigner, SignedNote
from ledger.witness.core import LogRecord, build_request, decide, parse_request
from tests.witness_fixtures import View, log_signer

SIGNER = log_signer()
WITNESS = CosignatureSigner.generate("witness.test/property")

# Two views that share a prefix of 4 entries, then diverge; checkpoints at every size 1..12.
_A, _B = View(SIGNER, "p"), View(SIGNER, "p")
NOTES: dict[tuple[str, int], str] = {}
for _view, _name in ((_A, "a"), (_B, "b")):
    for _size in range(1, 13):
        if _size == 5:
            _view.salt = _name
        NOTES[(_name, _size)] = _view.grow(1).note
VIEWS = {"a": _A, "b": _B}


def _root(note: str) -> bytes:
    return Checkpoint.from_text(SignedNote.from_text(note).text).root_hash


submission = st.tuples(
    st.sampled_from(["a", "b"]),
    st.integers(1, 12),  # checkpoint size
    st.integers(0, 12),  # old size claimed
    st.booleans(),  # a real proof from old (when it can be made) or a bogus one
)


@settings(max_examples=60, deadline=None)
@given(st.lists(submission, min_size=1, max_size=25))
def test_one_root_per_size_and_only_extensions(steps: list[tuple[str, int, int, bool]]) -> None:
    held: dict[str, LogRecord] = {}
    cosigned: dict[int, bytes] = {}
    previous: LogRecord | None = None
    for name, size, old, honest in steps:
        note = NOTES[(name, size)]
        proof: tuple[bytes, ...] = ()
        if 0 < old < size:
            proof = VIEWS[name].log.consistency_proof(old, size).hashes
            if not honest and proof:
                proof = (b"\x42" * 32, *proof[1:])
        request = parse_request(build_request(old, proof, note))
        decision = decide(request, logs={SIGNER.name: [SIGNER.verifier()]}, held=held,
                          signer=WITNESS, now=1)  # fmt: skip
        if decision.status != 200:
            continue
        root = _root(note)
        assert cosigned.setdefault(size, root) == root, "two roots cosigned for one size"
        if decision.record is not None:
            if previous is not None and previous.size > 0:
                hashes = VIEWS[name].log.consistency_proof(previous.size, size).hashes
                merkle.verify_consistency(previous.size, size, previous.root_hash, root, hashes)
                assert VIEWS[name].log.checkpoint(previous.size).root_hash == previous.root_hash
            held = {SIGNER.name: decision.record}
            previous = decision.record
