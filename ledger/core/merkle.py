"""RFC 6962 §2.1 / RFC 9162 §2.1 Merkle tree math: hashes, compact ranges, proof shapes, checks.

Pure: standard library only, no I/O. Storage supplies node hashes through a lookup callable, so
the same code serves proofs from RocksDB for any historical tree size and verifies them offline.

Nodes are addressed as ``NodeID(level, index)``: the perfect subtree over leaves
``[index * 2**level, (index + 1) * 2**level)``. Only such "full" nodes are ever stored. A proof
may also need the root of a non-full subtree on the right edge of a smaller tree (an *ephemeral*
node); a ``ProofNode`` lists the full nodes it folds from, so nothing but full nodes is read.

Edge-case policy (the RFCs leave these open; docs/formats.md "Merkle edge-case policy"
repeats it):

* every hash (leaf hash, root, proof element) must be exactly 32 bytes, else ``MalformedHashError``;
* inclusion: ``0 <= index < size`` or ``BoundsError`` (so nothing is included in an empty tree);
* consistency: ``size1 > size2`` is a ``BoundsError`` (never a proof of a rollback);
  ``size1 == size2`` needs an empty proof and equal roots (for size 0 the root of the empty tree,
  SHA-256 of nothing); ``size1 == 0 < size2`` is refused with ``BoundsError``: every tree extends
  the empty tree, so such a "proof" proves nothing and a client should trust the larger
  checkpoint on its signature alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from ledger.core import accel
from ledger.core.errors import BoundsError, MalformedHashError, ProofShapeError, RootMismatchError
from ledger.core.limits import HASH_SIZE

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "CompactRange",
    "NodeID",
    "ProofNode",
    "consistency_proof_nodes",
    "fold_proof_nodes",
    "inclusion_proof_nodes",
    "leaf_hash",
    "node_hash",
    "root",
    "root_from_inclusion_proof",
    "roots_from_consistency_proof",
    "subtree_node",
    "verify_consistency",
    "verify_inclusion",
]

EMPTY_ROOT = hashlib.sha256(b"").digest()
_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"
_sha256 = hashlib.sha256


def leaf_hash(data: bytes) -> bytes:
    """RFC 6962 §2.1: ``SHA-256(0x00 || data)``."""
    return _sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 §2.1: ``SHA-256(0x01 || left || right)``."""
    return _sha256(_NODE_PREFIX + left + right).digest()


def root(leaf_hashes: Iterable[bytes]) -> bytes:
    """Merkle Tree Hash of the leaves whose hashes are given (any range of a tree)."""
    compact = CompactRange()
    compact.extend(leaf_hashes)
    return compact.root()


class NodeID(NamedTuple):
    """The perfect subtree of ``2**level`` leaves starting at leaf ``index * 2**level``.

    A named tuple (not a dataclass) because integration creates about two per leaf.
    """

    level: int
    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose

    @property
    def begin(self) -> int:
        """First leaf covered."""
        return self.index << self.level

    @property
    def end(self) -> int:
        """One past the last leaf covered."""
        return (self.index + 1) << self.level


class ProofNode(NamedTuple):
    """One proof hash: a full node, or an ephemeral node folded from full nodes (left to right)."""

    parts: tuple[NodeID, ...]

    @property
    def ephemeral(self) -> bool:
        """True when the hash is the root of a non-full subtree."""
        return len(self.parts) > 1


# --- compact range --------------------------------------------------------------------------


class CompactRange:
    """The roots of the perfect subtrees covering leaves ``[0, size)``, largest first.

    Holds ``popcount(size)`` hashes: memory is O(log size) whatever the size of the log.
    """

    __slots__ = ("_hashes", "_size")

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        if size < 0:
            raise BoundsError(f"compact range size {size} < 0")
        if len(hashes) != size.bit_count():
            raise ProofShapeError(
                f"compact range of size {size} needs {size.bit_count()} hashes, got {len(hashes)}"
            )
        for h in hashes:
            _check_hash(h, "compact range hash")
        self._size = size
        self._hashes = list(hashes)

    @property
    def size(self) -> int:
        """Number of leaves covered."""
        return self._size

    @property
    def hashes(self) -> tuple[bytes, ...]:
        """The subtree roots, largest (leftmost) first."""
        return tuple(self._hashes)

    def append(self, leaf: bytes) -> list[tuple[NodeID, bytes]]:
        """Add one leaf hash; return every full node it completes (the leaf itself first)."""
        return self.extend((leaf,))

    def extend(
        self, leaves: Iterable[bytes], *, with_leaves: bool = True
    ) -> list[tuple[NodeID, bytes]]:
        """Add leaf hashes in order; return every full node completed, in creation order
        (level-0 nodes, the leaf hashes themselves, only ``with_leaves``).

        The hot loop of integration: hashing is inlined and each node hashed exactly once.
        """
        created: list[tuple[NodeID, bytes]] = []
        add = created.append
        stack = self._hashes
        pop, push = stack.pop, stack.append
        sha256, prefix = _sha256, _NODE_PREFIX
        node = tuple.__new__  # NodeID(level, i) without the named tuple's Python-level __new__
        index = self._size
        for leaf in leaves:
            if with_leaves:
                add((node(NodeID, (0, index)), leaf))
            h = leaf
            level = 0
            i = index
            while i & 1:
                h = sha256(prefix + pop() + h).digest()
                level += 1
                i >>= 1
                add((node(NodeID, (level, i)), h))
            push(h)
            index += 1
        self._size = index
        return created

    def extend_packed(self, leaves: bytes) -> list[bytes]:
        """``extend`` over packed leaf hashes (``N x 32`` bytes) on the selected core
        (``ledger.core.accel``): the hashes of the full nodes completed, one buffer per height
        ``1..`` (node indexes ``old_size >> h .. new_size >> h``, in order), no object per leaf.
        """
        if len(leaves) % HASH_SIZE:
            raise MalformedHashError(f"packed leaf hashes of {len(leaves)} bytes, not N x 32")
        stack, rows = accel.compact_extend(self._size, b"".join(self._hashes), leaves)
        self._hashes = [stack[i : i + HASH_SIZE] for i in range(0, len(stack), HASH_SIZE)]
        self._size += len(leaves) // HASH_SIZE
        return rows

    def root(self) -> bytes:
        """Merkle Tree Hash of leaves ``[0, size)``; SHA-256("") when empty."""
        if not self._hashes:
            return EMPTY_ROOT
        acc = self._hashes[-1]
        for h in reversed(self._hashes[:-1]):
            acc = node_hash(h, acc)
        return acc

    def copy(self) -> CompactRange:
        """An independent copy."""
        return CompactRange(self._size, self._hashes)

    def to_bytes(self) -> bytes:
        """Serialise: 8-byte big-endian size, then the hashes."""
        return self._size.to_bytes(8, "big") + b"".join(self._hashes)

    @classmethod
    def from_bytes(cls, data: bytes) -> CompactRange:
        """Inverse of ``to_bytes``."""
        if len(data) < 8 or (len(data) - 8) % HASH_SIZE:
            raise ProofShapeError(f"compact range encoding of {len(data)} bytes is malformed")
        size = int.from_bytes(data[:8], "big")
        hashes = [data[i : i + HASH_SIZE] for i in range(8, len(data), HASH_SIZE)]
        return cls(size, hashes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompactRange):
            return NotImplemented
        return self._size == other._size and self._hashes == other._hashes

    def __hash__(self) -> int:
        return hash((self._size, tuple(self._hashes)))

    def __repr__(self) -> str:
        return f"CompactRange(size={self._size}, root={self.root().hex()})"


# --- proof shapes ---------------------------------------------------------------------------


def _range_node(begin: int, end: int) -> ProofNode:
    """The proof node for subtree ``[begin, end)``: full, or folded from its perfect parts."""
    parts: list[NodeID] = []
    while begin < end:
        level = (end - begin).bit_length() - 1
        # ``begin`` is aligned to the largest part in every range the RFC recursion produces.
        parts.append(NodeID(level, begin >> level))
        begin += 1 << level
    return ProofNode(tuple(parts))


def subtree_node(begin: int, end: int) -> ProofNode:
    """The node whose hash is MTH of leaves ``[begin, end)``; ``root_node(size)`` is ``(0, size)``.

    Requires ``0 <= begin < end`` and ``begin`` aligned to the largest power of two <= the width
    (true for every range the RFC recursion yields, and for ``begin == 0``).
    """
    if not 0 <= begin < end:
        raise BoundsError(f"subtree needs 0 <= begin < end, got {begin}, {end}")
    return _range_node(begin, end)


_new = tuple.__new__  # a named tuple without its Python-level __new__ (proof planning is hot)


def _full(level: int, index: int) -> ProofNode:
    return _new(ProofNode, ((_new(NodeID, (level, index)),),))


def _path_nodes(level: int, index: int, size: int) -> list[ProofNode]:
    """Nodes proving the full node ``(level, index)`` is in the tree of ``size``, bottom up.

    The path climbs ``inner`` levels to the *fork*, where it parts from the path to the tree's
    last leaf: below the fork every sibling is a full node; the fork's right sibling covers
    ``[end, size)`` and may be ephemeral; above it, only left siblings remain (the set bits of
    the fork's first leaf). Same output as the RFC 9162 §2.1.3.1 / §2.1.4.1 recursion.
    """
    inner = (index ^ (size >> level)).bit_length() - 1
    nodes = [_full(level + i, (index >> i) ^ 1) for i in range(inner)]
    fork_level = level + inner
    begin = (index >> inner) << fork_level
    end = begin + (1 << fork_level)
    if end < size:
        nodes.append(_range_node(end, size))
    for lvl in range(fork_level + 1, begin.bit_length()):
        if (begin >> lvl) & 1:
            nodes.append(_full(lvl, (begin >> lvl) ^ 1))
    return nodes


def inclusion_proof_nodes(index: int, size: int) -> list[ProofNode]:
    """Nodes of the RFC 9162 §2.1.3.1 inclusion path, leaf to root.

    Requires ``0 <= index < size``.
    """
    if not 0 <= index < size:
        raise BoundsError(f"inclusion proof needs 0 <= index < size, got {index}, {size}")
    return _path_nodes(0, index, size)


def consistency_proof_nodes(size1: int, size2: int) -> list[ProofNode]:
    """Nodes of the RFC 9162 §2.1.4.1 consistency path from ``size1`` to ``size2``.

    Requires ``0 < size1 <= size2``; for ``size1 == size2`` the proof is empty. The proof is
    the largest full subtree ending at ``size1`` (left out when ``size1`` is a power of two: the
    old root is that node) followed by that node's inclusion path in the tree of ``size2``.
    """
    if not 0 < size1 <= size2:
        raise BoundsError(f"consistency proof needs 0 < size1 <= size2, got {size1}, {size2}")
    if size1 == size2:
        return []
    level = (size1 & -size1).bit_length() - 1
    index = (size1 - 1) >> level
    nodes = _path_nodes(level, index, size2)
    return nodes if index == 0 else [_full(level, index), *nodes]


def fold_proof_nodes(
    nodes: Sequence[ProofNode], lookup: Callable[[Sequence[NodeID]], Sequence[bytes]]
) -> list[bytes]:
    """Assemble proof hashes; ``lookup`` returns the hashes of the given full nodes, in order.

    ``lookup`` is called once with every full node needed, so storage can use one multi-get.
    """
    wanted = [part for node in nodes for part in node.parts]
    found = lookup(wanted)
    if len(found) != len(wanted):
        raise ProofShapeError(f"node lookup returned {len(found)} hashes for {len(wanted)} nodes")
    proof: list[bytes] = []
    at = 0
    for node in nodes:
        parts = found[at : at + len(node.parts)]
        at += len(node.parts)
        acc = parts[-1]
        for h in reversed(parts[:-1]):
            acc = node_hash(h, acc)
        proof.append(acc)
    return proof


# --- verification (RFC 9162 §2.1.3.2 and §2.1.4.2) ------------------------------------------


def _check_hash(value: bytes, what: str) -> None:
    if len(value) != HASH_SIZE:
        raise MalformedHashError(f"{what} is {len(value)} bytes, want {HASH_SIZE}")


def _check_proof(proof: Sequence[bytes], want: int) -> None:
    if len(proof) != want:
        raise ProofShapeError(f"proof has {len(proof)} hashes, want {want}")
    for i, h in enumerate(proof):
        _check_hash(h, f"proof hash {i}")


def root_from_inclusion_proof(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes]
) -> bytes:
    """Recompute the root that ``proof`` claims for leaf ``index`` of a tree of ``size``.

    Requires ``0 <= index < size``, 32-byte hashes and exactly the RFC's number of proof hashes.
    """
    _check_hash(leaf_hash, "leaf hash")
    _check_proof(proof, len(inclusion_proof_nodes(index, size)))
    fn, sn, r = index, size - 1, leaf_hash
    for p in proof:
        if sn == 0:  # unreachable after the length check; kept as the RFC states it
            raise ProofShapeError("inclusion proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofShapeError("inclusion proof is shorter than the path to the root")
    return r


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` with ``root``.

    Returns None; raises a ``VerificationError`` subclass on any failure.
    """
    _check_hash(root, "root hash")
    computed = root_from_inclusion_proof(leaf_hash, index, size, proof)
    if computed != root:
        raise RootMismatchError("inclusion proof root mismatch", expected=root, computed=computed)


def roots_from_consistency_proof(
    size1: int, size2: int, root1: bytes, proof: Sequence[bytes]
) -> tuple[bytes, bytes]:
    """Recompute (old root, new root) from a consistency proof. Requires ``0 < size1 < size2``."""
    if not 0 < size1 < size2:
        raise BoundsError(f"consistency walk needs 0 < size1 < size2, got {size1}, {size2}")
    _check_hash(root1, "root1")
    _check_proof(proof, len(consistency_proof_nodes(size1, size2)))
    path = list(proof)
    if size1 & (size1 - 1) == 0:  # size1 is a power of two: the old root is the first node
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofShapeError("consistency proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofShapeError("consistency proof is shorter than the path to the root")
    return fr, sr


def verify_consistency(
    size1: int, size2: int, root1: bytes, root2: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of ``size2`` with ``root2`` extends the tree of ``size1`` with ``root1``.

    Returns None; raises a ``VerificationError`` subclass on any failure (policy in module doc).
    """
    if size1 < 0 or size2 < 0:
        raise BoundsError(f"tree sizes must be >= 0, got {size1}, {size2}")
    if size1 > size2:
        raise BoundsError(f"size1 {size1} > size2 {size2}: a log never shrinks")
    _check_hash(root1, "root1")
    _check_hash(root2, "root2")
    if size1 == size2:
        _check_proof(proof, 0)
        if size1 == 0 and root1 != EMPTY_ROOT:
            raise RootMismatchError("root of the empty tree", expected=EMPTY_ROOT, computed=root1)
        if root1 != root2:
            raise RootMismatchError("equal sizes, different roots", expected=root1, computed=root2)
        return
    if size1 == 0:
        raise BoundsError(
            "size1 is 0: every tree extends the empty tree, so there is nothing to prove"
        )
    old, new = roots_from_consistency_proof(size1, size2, root1, proof)
    if old != root1:
        raise RootMismatchError("consistency proof old root mismatch", expected=root1, computed=old)
    if new != root2:
        raise RootMismatchError("consistency proof new root mismatch", expected=root2, computed=new)
