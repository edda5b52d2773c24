"""Merkle core against the naive RFC 6962 reference, exhaustively for sizes up to 64."""

from __future__ import annotations

import pytest

from ledger.core import merkle
from ledger.core.errors import (
    BoundsError,
    MalformedHashError,
    ProofShapeError,
    RootMismatchError,
    VerificationError,
)
from tests.reference import (
    inclusion_walk as walk,
)
from tests.reference import (
    mth,
    ref_consistency,
    ref_inclusion,
    ref_leaf_hash,
)
from tests.reference import reference_lookup as lookup

MAX = 64


def inclusion(index: int, size: int) -> list[bytes]:
    return merkle.fold_proof_nodes(merkle.inclusion_proof_nodes(index, size), lookup)


def consistency(size1: int, size2: int) -> list[bytes]:
    return merkle.fold_proof_nodes(merkle.consistency_proof_nodes(size1, size2), lookup)


def test_hashes_and_empty_root() -> None:
    assert merkle.EMPTY_ROOT.hex().startswith("e3b0c442")
    assert merkle.root([]) == merkle.EMPTY_ROOT
    assert merkle.leaf_hash(b"") == bytes.fromhex(
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    )


@pytest.mark.parametrize("size", range(MAX + 1))
def test_root_matches_reference(size: int) -> None:
    assert merkle.root(ref_leaf_hash(i) for i in range(size)) == mth(0, size)


def test_compact_range_nodes_and_serialisation() -> None:
    cr = merkle.CompactRange()
    for i in range(MAX):
        for node, h in cr.append(ref_leaf_hash(i)):
            assert h == mth(node.begin, node.end)
        assert cr.root() == mth(0, i + 1)
        assert merkle.CompactRange.from_bytes(cr.to_bytes()) == cr
        assert len(cr.hashes) == (i + 1).bit_count()


def test_compact_range_rejects_bad_state() -> None:
    with pytest.raises(ProofShapeError):
        merkle.CompactRange(3, [b"\x00" * 32])
    with pytest.raises(ProofShapeError):
        merkle.CompactRange.from_bytes(b"\x00" * 9)
    with pytest.raises(MalformedHashError):
        merkle.CompactRange(1, [b"\x00" * 31])


@pytest.mark.parametrize("size", range(1, MAX + 1))
def test_inclusion_all_indexes(size: int) -> None:
    root = mth(0, size)
    for index in range(size):
        proof = inclusion(index, size)
        assert proof == ref_inclusion(index, size)
        merkle.verify_inclusion(ref_leaf_hash(index), index, size, proof, root)
        # A wrong index or size fails unless the RFC walk is literally the same computation
        # (e.g. leaf 0 of size 3 and of size 4): a proof binds the path shape, the signed
        # checkpoint binds the size (docs/formats.md "Merkle edge-case policy").
        for bad_index, bad_size in (
            (index + 1, size),
            (index - 1, size),
            (index, size + 1),
            (index, size - 1),
            (index, size * 2),
            (index, size // 2),
        ):
            if walk(bad_index, bad_size) == walk(index, size):
                continue
            with pytest.raises(VerificationError):
                merkle.verify_inclusion(ref_leaf_hash(index), bad_index, bad_size, proof, root)


@pytest.mark.parametrize("size2", range(1, MAX + 1))
def test_consistency_all_pairs(size2: int) -> None:
    root2 = mth(0, size2)
    for size1 in range(1, size2 + 1):
        proof = consistency(size1, size2)
        assert proof == ref_consistency(size1, size2)
        merkle.verify_consistency(size1, size2, mth(0, size1), root2, proof)
        if size1 < size2:
            with pytest.raises(VerificationError):
                merkle.verify_consistency(size2, size1, root2, mth(0, size1), proof)
            if mth(0, size1) != root2:
                with pytest.raises(VerificationError):
                    merkle.verify_consistency(size1, size2, root2, mth(0, size1), proof)


def test_mismatch_carries_both_roots() -> None:
    proof = inclusion(3, 7)
    wrong = b"\x11" * 32
    with pytest.raises(RootMismatchError) as info:
        merkle.verify_inclusion(ref_leaf_hash(3), 3, 7, proof, wrong)
    assert info.value.expected == wrong
    assert info.value.computed == mth(0, 7)


def test_policy_edges() -> None:
    empty = merkle.EMPTY_ROOT
    merkle.verify_consistency(0, 0, empty, empty, [])
    with pytest.raises(RootMismatchError):
        merkle.verify_consistency(0, 0, b"\x01" * 32, b"\x01" * 32, [])
    with pytest.raises(BoundsError):
        merkle.verify_consistency(0, 5, empty, mth(0, 5), [])
    with pytest.raises(BoundsError):
        merkle.verify_consistency(5, 4, mth(0, 5), mth(0, 4), [])
    with pytest.raises(ProofShapeError):
        merkle.verify_consistency(4, 4, mth(0, 4), mth(0, 4), [mth(0, 4)])
    with pytest.raises(MalformedHashError):
        merkle.verify_consistency(1, 1, b"short", b"short", [])
    with pytest.raises(BoundsError):
        merkle.verify_inclusion(ref_leaf_hash(0), 0, 0, [], empty)
    with pytest.raises(BoundsError):
        merkle.verify_inclusion(ref_leaf_hash(0), -1, 3, [], mth(0, 3))
    with pytest.raises(MalformedHashError):
        merkle.verify_inclusion(b"WrongLeaf", 0, 1, [], mth(0, 1))


def test_proof_node_plans_are_logarithmic() -> None:
    size = 2**40 + 12345
    nodes = merkle.inclusion_proof_nodes(2**39 + 7, size)
    assert len(nodes) <= 41
    assert sum(len(n.parts) for n in nodes) <= 2 * 41
    assert any(n.ephemeral for n in merkle.consistency_proof_nodes(1000, size))
