"""Packed appends: record digests without metadata as one buffer in, one packed result out.

The shape of ``AppendPacked`` (proto/ledger/v1/ledger.proto) shared by the server and the
client: ``digests`` is N x 32 bytes, sequenced in order exactly as N ``AppendItem(d)`` would be,
so the new ones take consecutive indexes from ``first_index`` and share one receive time, and
every other position is a duplicate (of a durable entry, or of an earlier position in the same
buffer) with its original index, receive time and leaf hash. Nothing per entry is a Python object
except the duplicates (rare): a compiled sequencer fills a ``PackedResult`` over buffers.
"""

from __future__ import annotations

import hashlib
from array import array
from dataclasses import dataclass

from ledger.core.errors import InvalidArgumentError
from ledger.core.limits import HASH_SIZE
from ledger.core.types import AppendResult, leaf_prefix, leaf_suffix

__all__ = ["PackedResult", "check_packed", "to_results"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PackedResult:
    """The outcome of a packed append (fields as in ``AppendPackedResponse``)."""

    count: int  # N: digests in the request
    first_index: int  # index of the first new entry (the log's size before them when none)
    timestamp_ms: int  # receive time of every new entry
    dup_positions: array[int]  # 'Q': ascending positions of duplicates in the request
    dup_indexes: array[int]  # 'Q': their original indexes
    dup_timestamps_ms: array[int]  # 'Q': their original receive times
    dup_leaf_hashes: bytes  # D x 32: their original leaf hashes

    @property
    def new_entries(self) -> int:
        """New entries: indexes ``[first_index, first_index + new_entries)``."""
        return self.count - len(self.dup_positions)

    @property
    def covering_size(self) -> int:
        """The smallest tree size that holds every digest of the request."""
        top = self.first_index + self.new_entries if self.new_entries else 0
        return max(top, max(self.dup_indexes, default=-1) + 1)


def check_packed(digests: bytes, max_items: int) -> int:
    """The number of digests in a packed buffer; refuses an empty, ragged or oversized one."""
    n, rest = divmod(len(digests), HASH_SIZE)
    if rest:
        raise InvalidArgumentError(
            f"record_digests: {len(digests)} bytes, not a multiple of {HASH_SIZE}"
        )
    if n == 0:
        raise InvalidArgumentError("record_digests: empty, want 1 or more digests")
    if n > max_items:
        raise InvalidArgumentError(f"record_digests: {n} digests in one request, max {max_items}")
    return n


def to_results(digests: bytes, result: PackedResult) -> list[AppendResult]:
    """The typed results a packed result stands for (leaf hashes of new entries recomputed
    from the digest and the receive time: a leaf without metadata)."""
    out: list[AppendResult] = []
    hashed = b"\x00" + leaf_prefix(result.timestamp_ms)
    plain = leaf_suffix(b"")
    dups = {p: k for k, p in enumerate(result.dup_positions)}
    index = result.first_index
    for position in range(result.count):
        k = dups.get(position)
        if k is not None:
            leaf_hash = result.dup_leaf_hashes[k * HASH_SIZE : (k + 1) * HASH_SIZE]
            out.append(
                AppendResult(result.dup_indexes[k], leaf_hash, result.dup_timestamps_ms[k], True)
            )
            continue
        digest = digests[position * HASH_SIZE : (position + 1) * HASH_SIZE]
        leaf_hash = hashlib.sha256(hashed + digest + plain).digest()
        out.append(AppendResult(index, leaf_hash, result.timestamp_ms, False))
        index += 1
    return out
