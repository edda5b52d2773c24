"""Properties of the tile layout (ledger/core/tile_layout.py) over random group commits: every full
node, tile width and bundle width reads back as first principles say, and a writer reloaded
from the stored values at any size continues exactly as the one that never stopped."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import merkle
from ledger.core.errors import StorageError
from ledger.core.merkle import CompactRange, NodeID
from ledger.core.tile_layout import StoredTiles, TileWriter
from ledger.core.tiles import frame_entry
from ledger.core.types import encode_leaf


def leaf(i: int, meta: int) -> bytes:
    return encode_leaf(hashlib.sha256(b"%d" % i).digest(), i, b"m" * meta)


batches = st.lists(
    st.tuples(st.integers(1, 300), st.sampled_from([0, 0, 0, 5])), min_size=1, max_size=6
)


@settings(max_examples=25, deadline=None)
@given(batches)
def test_reads_match_first_principles_and_reloads_continue(spec: list[tuple[int, int]]) -> None:
    values: dict[bytes, bytes] = {}

    def lookup(keys: list[bytes]) -> list[bytes | None]:
        return [values.get(k) for k in keys]

    writer = TileWriter.load(0, lookup)
    compact = CompactRange()
    leaves: list[bytes] = []
    for count, meta in spec:
        new = [leaf(i, meta) for i in range(len(leaves), len(leaves) + count)]
        nodes = compact.extend([merkle.leaf_hash(x) for x in new], with_leaves=False)
        # a writer reloaded from what is stored plans exactly what the running one plans
        reloaded = TileWriter.load(len(leaves), lookup)
        planned, writer_after = writer.plan(len(leaves), [frame_entry(x) for x in new], nodes)
        assert reloaded.plan(len(leaves), [frame_entry(x) for x in new], nodes)[0] == planned
        values.update(planned)
        writer = writer_after
        leaves += new
    size = len(leaves)
    reader = StoredTiles(lookup)
    hashes = [merkle.leaf_hash(x) for x in leaves]
    ids = [NodeID(h, j) for h in range(size.bit_length()) for j in range(size >> h)]
    assert reader.nodes(ids) == [merkle.root(hashes[n.begin : n.end]) for n in ids]
    assert reader.leaves(range(size)) == leaves
    for index in range((size + 255) // 256):
        full = min(256, size - 256 * index)
        for width in {1, full // 2 or 1, full}:
            want = b"".join(hashes[256 * index : 256 * index + width])
            assert reader.tiles([(0, index, width)]) == [want]
            bundle = b"".join(frame_entry(x) for x in leaves[256 * index : 256 * index + width])
            assert reader.bundles([(index, width)]) == [bundle]
    if size >= 256:
        tops = size // 256
        assert reader.tiles([(1, 0, tops)]) == [
            b"".join(merkle.root(hashes[256 * k : 256 * (k + 1)]) for k in range(tops))
        ]


def test_a_commit_that_does_not_extend_the_tree_is_refused() -> None:
    writer = TileWriter.load(0, lambda keys: [None] * len(keys))
    with pytest.raises(StorageError, match="does not extend"):
        writer.plan(1, [frame_entry(leaf(1, 0))], [])
