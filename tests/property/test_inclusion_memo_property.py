"""Hypothesis: ``InclusionMemo.verify`` answers exactly as ``merkle.verify_inclusion`` does.

One memo sees many proofs of one tree in a row (as an index does), some of them altered (a
flipped bit in a hash, a hash dropped or added, another index or size, another root); each
answer (accepted, or the error's type and message) equals the full check's.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import merkle
from ledger_client.receipts.inclusion import InclusionMemo


def _leaves(size: int) -> list[bytes]:
    return [merkle.leaf_hash(i.to_bytes(4, "big")) for i in range(size)]


def _proof(hashes: list[bytes], index: int, size: int) -> tuple[bytes, ...]:
    nodes = merkle.inclusion_proof_nodes(index, size)
    levels = [hashes[:size]]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append(
            [merkle.node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
        )
    return tuple(
        merkle.fold_proof_nodes(nodes, lambda ids: [levels[i.level][i.index] for i in ids])
    )


def _answer(check: object, *args: object) -> tuple[str, str]:
    try:
        check(*args)  # type: ignore[operator]
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return "ok", ""


ALTER = st.sampled_from(["none", "none", "none", "flip", "drop", "add", "index", "size", "root"])


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 300),
    picks=st.lists(st.tuples(st.integers(0, 10**6), ALTER, st.integers(0, 255)), max_size=40),
)
def test_memo_answers_as_the_full_check(size: int, picks: list[tuple[int, str, int]]) -> None:
    hashes = _leaves(size + 1)
    root = merkle.root(hashes[:size])
    memo = InclusionMemo()
    for pick, alter, bit in picks:
        index = pick % size
        leaf, proof, at, tree, want = hashes[index], _proof(hashes, index, size), index, size, root
        if alter == "flip" and proof:
            i = bit % len(proof)
            changed = bytearray(proof[i])
            changed[bit % 32] ^= 1
            proof = (*proof[:i], bytes(changed), *proof[i + 1 :])
        elif alter == "drop" and proof:
            proof = proof[:-1]
        elif alter == "add":
            proof = (*proof, hashes[bit % len(hashes)])
        elif alter == "index":
            at = (index + 1 + bit) % size
        elif alter == "size":
            tree = size + 1
        elif alter == "root":
            want = merkle.node_hash(root, root)
        full = _answer(merkle.verify_inclusion, leaf, at, tree, proof, want)
        assert _answer(memo.verify, leaf, at, tree, proof, want) == full
