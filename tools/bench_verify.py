"""Checking sampled benchmark proofs against a signed checkpoint (RFC 9162 §2.1.3, §2.1.4).

The benchmark asks for proofs at random historical sizes, where the server may never have
published a checkpoint. A sampled proof is checked without trusting the server: the root it
implies at its size is recomputed from the proof alone, and that root is then tied to the
newest *signed* root by a consistency proof (``ledger.core.merkle`` only; no ``ledger.log``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.core import merkle
from ledger.core.errors import VerificationError
from ledger.core.types import ConsistencyProof, InclusionProof
from ledger_client.remote.log import RemoteLog

__all__ = ["Head", "Tally", "check_consistency", "check_inclusion"]


@dataclass(frozen=True, slots=True)
class Head:
    """The newest signed checkpoint's size and root (signature checked by the caller)."""

    size: int
    root: bytes


@dataclass(slots=True)
class Tally:
    """How many sampled proofs verified, how many did not, and the first failure."""

    ok: int = 0
    bad: int = 0
    first_failure: str = ""

    def record(self, failure: str | None) -> None:
        """Count one checked proof (``failure`` is None when it verified)."""
        if failure is None:
            self.ok += 1
            return
        self.bad += 1
        self.first_failure = self.first_failure or failure


def _link_to_head(remote: RemoteLog, head: Head, size: int, root: bytes) -> None:
    """Prove that ``root`` is the root at ``size`` of the tree the signed head commits to."""
    if size == head.size:
        if root != head.root:
            raise VerificationError(f"root at size {size} is not the signed root")
        return
    proof = remote.consistency_proof(size, head.size)
    merkle.verify_consistency(size, head.size, root, head.root, proof.hashes)


def _root_via_inclusion(proof: InclusionProof, index: int, size: int) -> bytes:
    """The root at ``size`` implied by a proof for leaf ``index`` (its leaf hash rechecked)."""
    if proof.entry.index != index or proof.tree_size != size:
        raise VerificationError(
            f"asked for leaf {index} at size {size}, got {proof.entry.index} at {proof.tree_size}"
        )
    if merkle.leaf_hash(proof.entry.leaf) != proof.leaf_hash:
        raise VerificationError(f"leaf hash of entry {index} does not match its leaf")
    return merkle.root_from_inclusion_proof(proof.leaf_hash, index, size, proof.hashes)


def check_inclusion(remote: RemoteLog, head: Head, proof: InclusionProof, index: int) -> str | None:
    """None when ``proof`` (for ``index``) verifies against the signed head, else why not."""
    try:
        root = _root_via_inclusion(proof, index, proof.tree_size)
        _link_to_head(remote, head, proof.tree_size, root)
    except VerificationError as exc:
        return f"inclusion {index}@{proof.tree_size}: {exc}"
    return None


def _root_at(remote: RemoteLog, size: int) -> bytes:
    """The root at ``size``, from the inclusion proof of its last leaf (checked later)."""
    proof = remote.inclusion_proof(index=size - 1, tree_size=size)
    return _root_via_inclusion(proof, size - 1, size)


def check_consistency(remote: RemoteLog, head: Head, proof: ConsistencyProof) -> str | None:
    """None when ``proof`` verifies between roots tied to the signed head, else why not."""
    try:
        root1 = _root_at(remote, proof.size1)
        root2 = _root_at(remote, proof.size2)
        merkle.verify_consistency(proof.size1, proof.size2, root1, root2, proof.hashes)
        _link_to_head(remote, head, proof.size2, root2)
    except VerificationError as exc:
        return f"consistency {proof.size1}->{proof.size2}: {exc}"
    return None
