"""A naive recursive RFC 6962 §2.1 reference, used only by tests.

Written straight from the RFC's recursive definitions (MTH, PATH, SUBPROOF), memoised on aligned
perfect subtrees so that sampled trees of 100,000 leaves stay cheap.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache, lru_cache

from ledger.core.merkle import NodeID


def ref_leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def ref_node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def leaf_data(i: int) -> bytes:
    """Deterministic leaf contents for leaf ``i``."""
    return b"leaf-%d" % i


@cache
def ref_leaf_hash(i: int) -> bytes:
    return ref_leaf(leaf_data(i))


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


@lru_cache(maxsize=1 << 20)
def mth(begin: int, end: int) -> bytes:
    """MTH(D[begin:end]) over the deterministic leaves."""
    n = end - begin
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return ref_leaf_hash(begin)
    k = _k(n)
    return ref_node(mth(begin, begin + k), mth(begin + k, end))


def path(m: int, begin: int, end: int) -> list[bytes]:
    """PATH(m, D[begin:end]) from RFC 6962 §2.1.1."""
    n = end - begin
    if n == 1:
        return []
    k = _k(n)
    if m < k:
        return [*path(m, begin, begin + k), mth(begin + k, end)]
    return [*path(m - k, begin + k, end), mth(begin, begin + k)]


def subproof(m: int, begin: int, end: int, complete: bool) -> list[bytes]:
    """SUBPROOF(m, D[begin:end], b) from RFC 6962 §2.1.2."""
    n = end - begin
    if m == n:
        return [] if complete else [mth(begin, end)]
    k = _k(n)
    if m <= k:
        return [*subproof(m, begin, begin + k, complete), mth(begin + k, end)]
    return [*subproof(m - k, begin + k, end, False), mth(begin, begin + k)]


def ref_inclusion(index: int, size: int) -> list[bytes]:
    return path(index, 0, size)


def ref_consistency(size1: int, size2: int) -> list[bytes]:
    return subproof(size1, 0, size2, True)


def reference_lookup(nodes: Sequence[NodeID]) -> list[bytes]:
    """A node-hash lookup backed by the reference (as storage would serve it)."""
    return [mth(n.begin, n.end) for n in nodes]


def _steps(fn: int, sn: int, steps: list[str]) -> tuple[str, ...]:
    while sn:
        if fn & 1 or fn == sn:
            steps.append("L")
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            steps.append("R")
        fn, sn = fn >> 1, sn >> 1
    return tuple(steps)


def inclusion_walk(index: int, size: int) -> tuple[str, ...] | None:
    """Left/right steps of the RFC 9162 §2.1.3.2 walk (None when out of bounds).

    Two claims with equal walks are the same computation: a proof binds the path's shape,
    the signed checkpoint binds the size.
    """
    if not 0 <= index < size:
        return None
    return _steps(index, size - 1, [])


def consistency_walk(size1: int, size2: int) -> tuple[str, ...] | None:
    """Steps of the RFC 9162 §2.1.4.2 walk (None when the policy refuses the sizes)."""
    if not 0 < size1 < size2:
        return None
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    return _steps(fn, sn, ["P" if size1 & (size1 - 1) == 0 else "-"])
