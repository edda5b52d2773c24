"""Hypothesis: generated proofs verify against the reference root; every mutation fails.

Trees of up to 100,000 leaves, compared with the naive RFC 6962 reference in tests/reference.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core import merkle
from ledger.core.errors import VerificationError
from tests.reference import (
    consistency_walk,
    inclusion_walk,
    mth,
    ref_consistency,
    ref_inclusion,
    ref_leaf_hash,
)
from tests.reference import reference_lookup as lookup

MAX_SIZE = 100_000


def flip(h: bytes, bit: int) -> bytes:
    b = bytearray(h)
    b[bit // 8 % len(b)] ^= 1 << (bit % 8)
    return bytes(b)


def proof_mutations(proof: list[bytes], bit: int) -> list[list[bytes]]:
    out: list[list[bytes]] = [
        [*proof, proof[-1] if proof else b"\x00" * 32],
        [*proof, b"\x07" * 32],
    ]
    for i in range(len(proof)):
        out.append([*proof[:i], flip(proof[i], bit), *proof[i + 1 :]])
        out.append(proof[:i] + proof[i + 1 :])
        out.append([*proof[:i], proof[i], *proof[i:]])
    return out


sizes = st.integers(min_value=1, max_value=MAX_SIZE)


@given(size=sizes, data=st.data(), bit=st.integers(0, 255))
def test_inclusion_verifies_and_mutations_fail(size: int, data: st.DataObject, bit: int) -> None:
    index = data.draw(st.integers(0, size - 1))
    proof = merkle.fold_proof_nodes(merkle.inclusion_proof_nodes(index, size), lookup)
    assert proof == ref_inclusion(index, size)
    leaf, root = ref_leaf_hash(index), mth(0, size)
    merkle.verify_inclusion(leaf, index, size, proof, root)
    for bad in proof_mutations(proof, bit):
        with pytest.raises(VerificationError):
            merkle.verify_inclusion(leaf, index, size, bad, root)
    with pytest.raises(VerificationError):
        merkle.verify_inclusion(flip(leaf, bit), index, size, proof, root)
    with pytest.raises(VerificationError):
        merkle.verify_inclusion(leaf, index, size, proof, flip(root, bit))
    for i2, s2 in ((index + 1, size), (index - 1, size), (index, size + 1), (index, size - 1)):
        if inclusion_walk(i2, s2) != inclusion_walk(index, size):
            with pytest.raises(VerificationError):
                merkle.verify_inclusion(leaf, i2, s2, proof, root)


@given(size2=st.integers(2, MAX_SIZE), data=st.data(), bit=st.integers(0, 255))
def test_consistency_verifies_and_mutations_fail(size2: int, data: st.DataObject, bit: int) -> None:
    size1 = data.draw(st.integers(1, size2 - 1))
    proof = merkle.fold_proof_nodes(merkle.consistency_proof_nodes(size1, size2), lookup)
    assert proof == ref_consistency(size1, size2)
    root1, root2 = mth(0, size1), mth(0, size2)
    merkle.verify_consistency(size1, size2, root1, root2, proof)
    for bad in proof_mutations(proof, bit):
        with pytest.raises(VerificationError):
            merkle.verify_consistency(size1, size2, root1, root2, bad)
    with pytest.raises(VerificationError):
        merkle.verify_consistency(size1, size2, root2, root1, proof)  # swapped unequal roots
    with pytest.raises(VerificationError):
        merkle.verify_consistency(size2, size1, root2, root1, proof)  # size1 > size2
    with pytest.raises(VerificationError):
        merkle.verify_consistency(size1, size2, flip(root1, bit), root2, proof)
    with pytest.raises(VerificationError):
        merkle.verify_consistency(size1, size2, root1, flip(root2, bit), proof)
    for s1, s2 in ((size1 + 1, size2), (size1 - 1, size2), (size1, size2 + 1), (size1, size2 - 1)):
        if consistency_walk(s1, s2) != consistency_walk(size1, size2):
            with pytest.raises(VerificationError):
                merkle.verify_consistency(s1, s2, root1, root2, proof)


@given(st.lists(st.binary(min_size=32, max_size=32), max_size=300), st.integers(0, 300))
def test_compact_range_split_and_restore(leaves: list[bytes], cut: int) -> None:
    whole = merkle.CompactRange()
    whole.extend(leaves)
    part = merkle.CompactRange()
    part.extend(leaves[:cut])
    restored = merkle.CompactRange.from_bytes(part.to_bytes())
    restored.extend(leaves[cut:])
    assert restored == whole
    assert whole.root() == merkle.root(leaves)
