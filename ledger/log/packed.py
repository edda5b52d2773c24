"""Packed appends on the server: the pure sequencing path and group-commit splitting.

``Log.append_packed(digests) -> PackedResult`` (``ledger.log.facade``) is the contract a compiled
sequencer fills over buffers (``ledger.core.packed`` says what the fields mean). Here: the
straightforward pure path it replaces (``unpack_items`` then ``Log.append``, ``pack_results``),
and ``split``, which cuts a group commit's result (several requests' buffers concatenated, in
order) back into one result per request.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from ledger.core.limits import HASH_SIZE
from ledger.core.packed import PackedResult
from ledger.core.types import AppendItem, AppendResult

__all__ = ["pack_results", "split", "unpack_items"]


def unpack_items(digests: bytes) -> list[AppendItem]:
    """The buffer as typed items (the pure path; ``check_packed`` first)."""
    return [AppendItem(digests[at : at + HASH_SIZE]) for at in range(0, len(digests), HASH_SIZE)]


def pack_results(results: Sequence[AppendResult], next_index: int) -> PackedResult:
    """Typed results (``Log.append``'s) as a packed result; ``next_index``: the log's size
    after them (the first index when nothing is new)."""
    positions, indexes, times = array("Q"), array("Q"), array("Q")
    hashes: list[bytes] = []
    first, timestamp, new = next_index, 0, 0
    for position, r in enumerate(results):
        if r.duplicate:
            positions.append(position)
            indexes.append(r.index)
            times.append(r.timestamp_ms)
            hashes.append(r.leaf_hash)
        else:
            if new == 0:
                first, timestamp = r.index, r.timestamp_ms
            new += 1
    return PackedResult(
        count=len(results),
        first_index=first if new else next_index,
        timestamp_ms=timestamp,
        dup_positions=positions,
        dup_indexes=indexes,
        dup_timestamps_ms=times,
        dup_leaf_hashes=b"".join(hashes),
    )


def split(result: PackedResult, counts: Sequence[int]) -> list[PackedResult]:
    """One group's result cut into consecutive requests of ``counts`` digests each."""
    parts: list[PackedResult] = []
    offset, first, d = 0, result.first_index, 0
    for count in counts:
        end = offset + count
        start = d
        while d < len(result.dup_positions) and result.dup_positions[d] < end:
            d += 1
        positions = array("Q", (p - offset for p in result.dup_positions[start:d]))
        parts.append(
            PackedResult(
                count=count,
                first_index=first,
                timestamp_ms=result.timestamp_ms,
                dup_positions=positions,
                dup_indexes=result.dup_indexes[start:d],
                dup_timestamps_ms=result.dup_timestamps_ms[start:d],
                dup_leaf_hashes=result.dup_leaf_hashes[start * HASH_SIZE : d * HASH_SIZE],
            )
        )
        first += count - (d - start)
        offset = end
    return parts
