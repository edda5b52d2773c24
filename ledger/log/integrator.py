"""Integration (RFC 6962 §2.1): fold sequenced leaf hashes into the tree's compact range.

The compact range is all the tree the server keeps in memory (O(log n) hashes). ``integrate``
works on a copy and returns the full nodes to persist; ``adopt`` switches to the copy only
after the batch carrying those nodes is durable.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.core.merkle import CompactRange, NodeID

__all__ = ["Integrator"]


class Integrator:
    """Owns the in-memory compact range of the durable tree."""

    def __init__(self, compact: CompactRange) -> None:
        self._compact = compact.copy()

    @property
    def size(self) -> int:
        """Size of the durable tree."""
        return self._compact.size

    @property
    def compact(self) -> CompactRange:
        """The compact range of the durable tree (replaced, never changed, by ``adopt``)."""
        return self._compact

    def root(self) -> bytes:
        """Root hash of the durable tree."""
        return self._compact.root()

    def integrate(
        self, leaf_hashes: Sequence[bytes]
    ) -> tuple[list[tuple[NodeID, bytes]], CompactRange]:
        """The full nodes above the leaves that they complete, and the compact range after them.

        Level-0 nodes are the leaf hashes of the entries; stores derive them from the entries.
        """
        extended = self._compact.copy()
        nodes = extended.extend(leaf_hashes, with_leaves=False)
        return nodes, extended

    def integrate_packed(self, leaf_hashes: bytes) -> tuple[list[bytes], CompactRange]:
        """``integrate`` over packed leaf hashes: the completed nodes as one buffer per height
        ``1..`` (``CompactRange.extend_packed``), and the compact range after them."""
        extended = self._compact.copy()
        rows = extended.extend_packed(leaf_hashes)
        return rows, extended

    def adopt(self, compact: CompactRange) -> None:
        """Switch to ``compact`` once its nodes are durable."""
        self._compact = compact
