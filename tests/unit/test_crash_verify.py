"""The crash harness's independent verifier agrees with ``ledger.core.merkle`` and catches a lost
entry, a moved entry, a second root and a root that is not the tree's."""

from __future__ import annotations

import hashlib

from ledger.core import merkle
from ledger.core.types import encode_leaf
from tools.crash_verify import prefix_roots, verify_log


def log_of(n: int) -> tuple[list[bytes], dict[bytes, int]]:
    digests = [hashlib.sha256(b"%d" % i).digest() for i in range(n)]
    return [encode_leaf(d, 1_000 + i) for i, d in enumerate(digests)], {
        d: i for i, d in enumerate(digests)
    }


def test_prefix_roots_match_the_log_math() -> None:
    leaves, _ = log_of(70)
    hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
    roots = prefix_roots(hashes, set(range(71)))
    for size in range(71):
        assert roots[size] == merkle.root(hashes[:size])


def test_every_violation_is_found() -> None:
    leaves, acked = log_of(20)
    hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
    roots = {s: {merkle.root(hashes[:s])} for s in (1, 7, 20)}
    assert verify_log(leaves, acked, roots).ok
    lost = verify_log(leaves[:15], acked, {7: roots[7]})
    assert len(lost.lost) == 5 and not lost.ok
    moved = dict(acked)
    moved[next(iter(moved))] = 3
    assert verify_log(leaves, moved, roots).lost
    forked = {**roots, 7: roots[7] | {b"\x00" * 32}}
    assert verify_log(leaves, acked, forked).second_roots
    assert verify_log(leaves, acked, {7: set(roots[7]), 9: {b"\x01" * 32}}).bad_roots
    assert verify_log(leaves, acked, {25: {b"\x01" * 32}}).bad_roots
