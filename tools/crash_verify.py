"""The crash harness's independent verifier: RFC 6962 §2.1 tree hashes written from the RFC with
``hashlib`` alone (no ``ledger.core.merkle``), checked against everything the harness saw.

Given every leaf of the log (in order), the roots of all published sizes the harness saw and
every acknowledged (digest -> index), it checks:

* every acknowledged digest is at its acknowledged index (nothing lost, nothing moved);
* every size seen with a signed checkpoint has exactly one root, and it is the Merkle Tree Hash
  of the first ``size`` leaves (no second root, every checkpoint consistent with the log);
* no index holds two digests, no digest two indexes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Findings", "prefix_roots", "verify_log"]


def _leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + leaf).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def prefix_roots(leaf_hashes: Iterable[bytes], sizes: set[int]) -> dict[int, bytes]:
    """MTH of the first n leaves for each n in ``sizes``, in one pass.

    Keeps the perfect subtrees of the prefix (a stack of (height, hash)); the root of a prefix
    folds them right to left, as RFC 6962 §2.1 splits at the largest power of two.
    """
    roots: dict[int, bytes] = {}
    if 0 in sizes:
        roots[0] = hashlib.sha256(b"").digest()
    stack: list[tuple[int, bytes]] = []
    for n, h in enumerate(leaf_hashes, 1):
        node = (0, h)
        while stack and stack[-1][0] == node[0]:
            height, left = stack.pop()
            node = (height + 1, _node(left, node[1]))
        stack.append(node)
        if n in sizes:
            acc = stack[-1][1]
            for _, left in reversed(stack[:-1]):
                acc = _node(left, acc)
            roots[n] = acc
    return roots


@dataclass(slots=True)
class Findings:
    """What the verifier found; ``ok`` when nothing is wrong."""

    entries: int = 0
    acknowledged: int = 0
    lost: list[str] = field(default_factory=list)
    second_roots: list[str] = field(default_factory=list)
    bad_roots: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.second_roots or self.bad_roots or self.duplicates)


def verify_log(
    leaves: list[bytes],
    acked: Mapping[bytes, int],
    roots_seen: Mapping[int, set[bytes]],
) -> Findings:
    """Check the invariants (module docstring) over the whole log."""
    found = Findings(entries=len(leaves), acknowledged=len(acked))
    digest_at = [leaf[9:41] for leaf in leaves]  # v1 leaf: version, time (8), digest (32)
    index_of: dict[bytes, int] = {}
    for i, d in enumerate(digest_at):
        if d in index_of:
            found.duplicates.append(f"digest {d.hex()} at {index_of[d]} and {i}")
        index_of.setdefault(d, i)
    for d, i in acked.items():
        if i >= len(leaves) or digest_at[i] != d:
            found.lost.append(f"acknowledged {d.hex()} at {i}: not there")
    for size, roots in roots_seen.items():
        if len(roots) > 1:
            found.second_roots.append(f"size {size}: {sorted(r.hex() for r in roots)}")
    wanted = {s for s in roots_seen if s <= len(leaves)}
    computed = prefix_roots((_leaf_hash(leaf) for leaf in leaves), wanted)
    for size, roots in roots_seen.items():
        if size > len(leaves):
            found.bad_roots.append(f"size {size} was signed but the log has {len(leaves)}")
        elif computed[size] not in roots:
            found.bad_roots.append(f"size {size}: signed root is not the tree's root")
    return found
