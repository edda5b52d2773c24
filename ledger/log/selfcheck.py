"""The log checks itself before it signs and before it serves (RFC 9162 §2.1.3/§2.1.4 proofs,
re-verified on the server; issue 14).

RocksDB's block checksums catch damaged bytes on disk, not a wrong value written with a valid
checksum (a bug, a tool, a restored file). So:

* before a new checkpoint is signed, a consistency proof from the previous published checkpoint
  to the new tree is assembled from stored nodes and verified against the previous signed root
  and the new root (``check_extends``);
* every proof is verified against the signed root of its size before it is sent; a size that
  is not a checkpoint size is first tied to the newest signed root by a consistency proof from
  stored nodes (``RootCheck.root``);
* entries read back are checked against the tree: each group of 8 leaves against the lowest
  stored node above it (height 3, ``ledger.core.tile_layout.LEVEL0_FIRST_ROW``: nodes below it
  are hashed from the leaves themselves, so checking against them would prove nothing), leaves
  past the last full group against the compact range's subtrees (``check_leaves``).

A failed check raises ``DataLossError`` naming what disagrees; never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ledger.core import merkle
from ledger.core.errors import DataLossError, VerificationError
from ledger.core.merkle import CompactRange, NodeID
from ledger.core.tile_layout import LEVEL0_FIRST_ROW
from ledger.core.types import ConsistencyProof, InclusionProof, PublishedCheckpoint

__all__ = [
    "RootCheck",
    "check_extends",
    "check_inclusion",
    "check_leaves",
    "prove_consistency",
    "proven_root",
]

NodeReader = Callable[[Sequence[NodeID]], list[bytes]]
LeafReader = Callable[[Sequence[int]], list[bytes]]
_ROOT_CACHE = 4096


def prove_consistency(get_nodes: NodeReader, size1: int, size2: int) -> tuple[bytes, ...]:
    """The consistency proof ``size1 -> size2`` from stored nodes (empty when trivial)."""
    if size1 == 0 or size1 == size2:
        return ()
    plan = merkle.consistency_proof_nodes(size1, size2)
    return tuple(merkle.fold_proof_nodes(plan, get_nodes))


def root_at(get_nodes: NodeReader, size: int) -> bytes:
    """Root hash of the stored tree at ``size``."""
    if size == 0:
        return merkle.EMPTY_ROOT
    return merkle.fold_proof_nodes([merkle.subtree_node(0, size)], get_nodes)[0]


def check_extends(
    get_nodes: NodeReader, old: PublishedCheckpoint, size: int, root_hash: bytes
) -> None:
    """Prove from stored nodes that the tree ``(size, root_hash)`` extends ``old``."""
    if old.size == 0:
        return
    try:
        proof = prove_consistency(get_nodes, old.size, size)
        merkle.verify_consistency(old.size, size, old.root_hash, root_hash, proof)
    except VerificationError as exc:
        raise DataLossError(
            f"refusing to sign size {size} (root {root_hash.hex()}): the stored tree does not "
            f"prove it consistent with the published checkpoint of size {old.size} (root "
            f"{old.root_hash.hex()}): {exc}. A stored node or the tree state is damaged; the log "
            "stops taking appends"
        ) from exc


class RootCheck:
    """Roots of sizes up to the newest signed checkpoint, each proven consistent with it."""

    def __init__(self, get_nodes: NodeReader) -> None:
        self._get_nodes = get_nodes
        self._cache: set[tuple[int, bytes, bytes]] = set()

    def root(self, size: int, latest: PublishedCheckpoint) -> bytes:
        """The root at ``size`` (<= latest.size) from stored nodes, tied to ``latest``."""
        if size == latest.size:
            return latest.root_hash
        root = root_at(self._get_nodes, size)
        self.tie(size, root, latest)
        return root

    def tie(self, size: int, root: bytes, latest: PublishedCheckpoint) -> None:
        """Prove from stored nodes that ``(size, root)`` is consistent with ``latest``."""
        if size == latest.size and root == latest.root_hash:
            return
        key = (size, root, latest.root_hash)
        if key in self._cache:
            return
        try:
            proof = prove_consistency(self._get_nodes, size, latest.size)
            merkle.verify_consistency(size, latest.size, root, latest.root_hash, proof)
        except VerificationError as exc:
            raise DataLossError(
                f"the stored tree at size {size} is not consistent with the signed checkpoint "
                f"of size {latest.size}: {exc}; a stored node is damaged, no proof is served"
            ) from exc
        if len(self._cache) >= _ROOT_CACHE:
            self._cache.clear()
        self._cache.add(key)


def proven_root(proof: InclusionProof, latest: PublishedCheckpoint, roots: RootCheck) -> bytes:
    """The root an inclusion proof leads to, tied to the signed ``latest`` (one read of the
    consistency nodes; the proof's own path stands in for reading the root's nodes)."""
    if proof.tree_size == latest.size:
        return latest.root_hash
    try:
        root = merkle.root_from_inclusion_proof(
            merkle.leaf_hash(proof.entry.leaf), proof.entry.index, proof.tree_size, proof.hashes
        )
    except VerificationError as exc:
        raise DataLossError(f"an inclusion proof from stored nodes is malformed: {exc}") from exc
    roots.tie(proof.tree_size, root, latest)
    return root


def check_inclusion(proofs: Sequence[InclusionProof], root_hash: bytes) -> None:
    """Verify each proof (leaf hash recomputed from its entry) against the signed root."""
    for p in proofs:
        try:
            merkle.verify_inclusion(
                merkle.leaf_hash(p.entry.leaf), p.entry.index, p.tree_size, p.hashes, root_hash
            )
        except VerificationError as exc:
            raise DataLossError(
                f"the inclusion proof of index {p.entry.index} at size {p.tree_size} does not "
                f"verify against the signed root {root_hash.hex()} ({exc}); a stored entry or "
                "node is damaged, the proof is not sent"
            ) from exc


def check_consistency(proof: ConsistencyProof, root1: bytes, root2: bytes) -> None:
    """Verify a consistency proof against the roots of its sizes before it is sent."""
    try:
        merkle.verify_consistency(proof.size1, proof.size2, root1, root2, proof.hashes)
    except VerificationError as exc:
        raise DataLossError(
            f"the consistency proof {proof.size1} -> {proof.size2} does not verify against "
            f"the signed roots ({exc}); a stored node is damaged, the proof is not sent"
        ) from exc


def check_leaves(
    compact: CompactRange,
    indexes: Sequence[int],
    leaves: Sequence[bytes],
    *,
    get_nodes: NodeReader,
    get_leaves: LeafReader,
) -> None:
    """Check leaves read back (all below ``compact.size``) against the committed tree: each
    against the lowest stored node over it, or the compact range's subtree over it."""
    size = compact.size
    group = 1 << LEVEL0_FIRST_ROW
    full = size - size % group  # leaves under full stored nodes of height LEVEL0_FIRST_ROW
    hashes = {i: merkle.leaf_hash(leaf) for i, leaf in zip(indexes, leaves, strict=True)}
    groups = sorted({i >> LEVEL0_FIRST_ROW for i in hashes if i < full})
    spans = [(k * group, group) for k in groups]
    edge: list[tuple[int, int]] = []  # the compact range's subtrees past ``full``
    if any(i >= full for i in hashes):
        at = full
        for height in reversed(range(LEVEL0_FIRST_ROW)):
            if (size - full) >> height & 1:
                edge.append((at, 1 << height))
                at += 1 << height
    wanted = sorted(
        {i for first, n in spans + edge for i in range(first, first + n) if i not in hashes}
    )
    for i, leaf in zip(wanted, get_leaves(wanted), strict=True):
        hashes[i] = merkle.leaf_hash(leaf)
    stored = get_nodes([NodeID(LEVEL0_FIRST_ROW, k) for k in groups])
    stack = compact.hashes[len(compact.hashes) - len(edge) :]
    for (first, n), node in zip(spans + edge, [*stored, *stack], strict=True):
        if merkle.root([hashes[i] for i in range(first, first + n)]) == node:
            continue
        if n == 1:
            raise DataLossError(
                f"entry {first} does not match the tree's last leaf hash; not served"
            )
        raise DataLossError(
            f"entries {first} to {first + n - 1} do not match the "
            f"{'stored tree node' if first < full else 'tree state'} over them; "
            "a stored entry is damaged, it is not served"
        )
