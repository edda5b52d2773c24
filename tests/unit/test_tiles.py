"""C2SP tlog-tiles math (``ledger.core.tiles``): paths, which tiles a tree has, bundles, proofs."""

from __future__ import annotations

import gzip
import random
import sys
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core import merkle, tiles
from ledger.core.errors import BoundsError, MalformedTileError, MalformedTilePathError
from tests import processes
from tests.reference import ref_consistency, ref_inclusion, ref_leaf_hash

# --- paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("index", "text"),
    [(0, "000"), (7, "007"), (999, "999"), (1000, "x001/000"), (1234067, "x001/x234/067")],
)
def test_format_index(index: int, text: str) -> None:
    assert tiles.format_index(index) == text


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("tile/0/000", tiles.TileID(level=0, index=0)),
        ("tile/3/x001/x234/067.p/8", tiles.TileID(level=3, index=1234067, width=8)),
        ("tile/entries/x001/000", tiles.TileID(level=0, index=1000, entries=True)),
        ("tile/entries/000.p/255", tiles.TileID(level=0, index=0, width=255, entries=True)),
        ("tile/63/000", tiles.TileID(level=63, index=0)),
    ],
)
def test_parse_tile_path(path: str, want: tiles.TileID) -> None:
    assert tiles.parse_tile_path(path) == want
    assert want.path == path


@pytest.mark.parametrize(
    "path",
    [
        "",
        "tile",
        "tile/",
        "tile/0",
        "tile/0/",
        "tiles/0/000",
        "/tile/0/000",
        "tile/00/000",  # leading zero in the level
        "tile/01/000",
        "tile/64/000",  # level > 63
        "tile/-1/000",
        "tile/0/0",  # not three digits
        "tile/0/0000",
        "tile/0/001/000",  # missing x
        "tile/0/x000/001",  # leading zero group
        "tile/0/x001",  # x on the last group
        "tile/0/000.p/0",
        "tile/0/000.p/256",
        "tile/0/000.p/08",
        "tile/0/000.p/",
        "tile/0/000.p",
        "tile/0/000/",  # trailing junk
        "tile/0/000x",
        "tile/0/000.p/8/",
        "tile/0/000.p/8x",
        "tile/0/../000",
        "tile/../checkpoint",
        "tile/entries/../../etc/passwd",
        "tile/entry/000",
        "tile/0/ 000",
        "tile/0/x１２３/000",  # non-ASCII digits
        "tile/0/" + "x999/" * 60 + "999",
    ],
)
def test_parse_rejects_malformed(path: str) -> None:
    with pytest.raises(MalformedTilePathError):
        tiles.parse_tile_path(path)


tile_ids = st.builds(
    lambda level, index, width, entries: tiles.TileID(
        level=0 if entries else level, index=index, width=width, entries=entries
    ),
    st.integers(0, tiles.MAX_LEVEL),
    st.integers(0, 2**64 - 1),
    st.integers(1, tiles.TILE_WIDTH),
    st.booleans(),
)


@given(tile_ids)
def test_path_round_trip(tile: tiles.TileID) -> None:
    assert tiles.parse_tile_path(tile.path) == tile


def test_tile_id_bounds() -> None:
    with pytest.raises(BoundsError):
        tiles.TileID(level=0, index=0, width=0)
    with pytest.raises(BoundsError):
        tiles.TileID(level=1, index=0, entries=True)
    with pytest.raises(BoundsError):
        tiles.TileID(level=64, index=0)


# --- which tiles a tree has -------------------------------------------------------------------


def _brute_tiles(size: int) -> set[tiles.TileID]:
    """Every tile of every level, from the definition (nodes of height 8L, 256 per tile)."""
    out = set()
    level = 0
    while (count := size >> (8 * level)) > 0:
        for index in range(0, count, 256):
            width = min(256, count - index)
            out.add(tiles.TileID(level=level, index=index // 256, width=width))
            if level == 0:
                out.add(tiles.TileID(level=0, index=index // 256, width=width, entries=True))
        level += 1
    return out


@pytest.mark.parametrize("size", [0, 1, 255, 256, 257, 65535, 65536, 65537, 16777216 + 5])
def test_tiles_for_size(size: int) -> None:
    assert set(tiles.tiles_for_size(size)) == _brute_tiles(size)


@given(st.integers(0, 300_000), st.integers(0, 300_000))
def test_new_tiles_are_the_difference(a: int, b: int) -> None:
    old, new = sorted((a, b))
    got = tiles.new_tiles(old, new)
    assert len(got) == len(set(got))
    assert set(got) == set(tiles.tiles_for_size(new)) - set(tiles.tiles_for_size(old))


def test_new_tiles_bounds() -> None:
    with pytest.raises(BoundsError):
        tiles.new_tiles(5, 4)


# --- contents ---------------------------------------------------------------------------------


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=256))
def test_entry_bundle_round_trip(entries: list[bytes]) -> None:
    data = tiles.encode_entry_bundle(entries)
    assert tiles.decode_entry_bundle(data, len(entries)) == entries
    assert tiles.decode_entry_bundle(data, 1) == entries[:1]  # a wider bundle stands in


@pytest.mark.parametrize(
    ("data", "width"),
    [
        (b"", 1),
        (b"\x00", 1),  # truncated length
        (b"\x00\x05abc", 1),  # truncated entry
        (b"\x00\x01a", 2),  # too few entries
        (b"\x00\x01a\x00", 1),  # stray byte
        (b"\x00\x00" * 257, 1),  # more than 256 entries
    ],
)
def test_entry_bundle_rejects(data: bytes, width: int) -> None:
    with pytest.raises(MalformedTileError):
        tiles.decode_entry_bundle(data, width)


def test_entry_too_long() -> None:
    with pytest.raises(BoundsError):
        tiles.encode_entry_bundle([b"x" * 65536])


def test_split_hash_tile() -> None:
    data = bytes(range(64))
    assert tiles.split_hash_tile(data, 2) == [data[:32], data[32:]]
    assert tiles.split_hash_tile(data, 1) == [data[:32]]
    for bad, width in ((data[:-1], 1), (data, 3), (b"", 1), (b"\x00" * 32 * 257, 1)):
        with pytest.raises(MalformedTileError):
            tiles.split_hash_tile(bad, width)


def test_tile_hashes_interior_levels() -> None:
    leaves = [ref_leaf_hash(i) for i in range(256)]
    tile = tiles.TileHashes(leaves)
    assert tile.node(8, 0) == merkle.root(leaves)
    assert tile.node(3, 5) == merkle.root(leaves[40:48])
    partial = tiles.TileHashes(leaves[:13])
    assert len(partial.levels[2]) == 3 * 32  # 13 >> 2 full nodes of height 2
    with pytest.raises(BoundsError):
        partial.node(2, 3)
    with pytest.raises(MalformedTileError):
        tiles.TileHashes([])


# --- proofs from tiles ------------------------------------------------------------------------


class _MemoryTiles:
    """Tiles of the reference tree (leaf i = ``ref_leaf_hash(i)``), built on demand."""

    def __init__(self, size: int) -> None:
        self.levels = [[ref_leaf_hash(i) for i in range(size)]]
        while len(self.levels[-1]) >= 256:
            below = self.levels[-1]
            self.levels.append(
                [merkle.root(below[i : i + 256]) for i in range(0, len(below) - 255, 256)]
            )
        self.fetched: list[tuple[int, int, int]] = []

    def fetch(self, level: int, index: int, width: int) -> tiles.TileHashes:
        self.fetched.append((level, index, width))
        hashes = self.levels[level][index * 256 : index * 256 + width]
        assert len(hashes) == width, "the reader asked for a tile beyond the tree"
        return tiles.TileHashes(hashes)


@pytest.fixture(scope="module")
def big() -> _MemoryTiles:
    return _MemoryTiles(70_000)  # > 65,536: level-2 tiles exist


def _sizes(rng: random.Random) -> list[int]:
    fixed = [1, 2, 255, 256, 257, 511, 512, 65535, 65536, 65537, 70_000]
    return fixed + [rng.randint(1, 70_000) for _ in range(40)]


def test_proofs_from_tiles_match_the_reference(big: _MemoryTiles) -> None:
    rng = random.Random(12)
    for size in _sizes(rng):
        fetch: Callable[[int, int, int], tiles.TileHashes] = big.fetch
        root = tiles.root(size, fetch)
        for index in {0, size - 1, rng.randrange(size)}:
            proof = tiles.inclusion_proof(index, size, fetch)
            merkle.verify_inclusion(ref_leaf_hash(index), index, size, proof, root)
        size1 = rng.randint(1, size)
        proof = tiles.consistency_proof(size1, size, fetch)
        merkle.verify_consistency(size1, size, tiles.root(size1, fetch), root, proof)
        if size <= 2000:  # the naive recursion is slow; compare it on small trees
            assert proof == ref_consistency(size1, size)
            assert tiles.inclusion_proof(size - 1, size, fetch) == ref_inclusion(size - 1, size)


def test_reader_asks_only_for_tiles_of_the_tree(big: _MemoryTiles) -> None:
    big.fetched.clear()
    tiles.inclusion_proof(65_600, 65_601, big.fetch)
    assert all(w == tiles.tile_width(lvl, i, 65_601) for lvl, i, w in big.fetched)
    with pytest.raises(BoundsError):
        tiles.TileNodeReader(10, big.fetch).node(merkle.NodeID(4, 0))


def test_pure() -> None:
    """The tile math is pure core: it loads no network, storage or HTTP library."""
    probe = (
        "import sys, ledger.core.tiles\n"
        "bad = [m for m in ('grpc', 'rocksdict', 'aiohttp', 'urllib.request', 'socket')"
        " if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = processes.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_gunzip_bundle_is_bounded_and_whole() -> None:
    bundle = tiles.encode_entry_bundle([b"a" * 100, b"b"])
    packed = tiles.gzip_bundle(bundle)
    assert packed == tiles.gzip_bundle(bundle)  # the same bytes every time (mtime 0)
    assert tiles.gunzip_bundle(packed) == bundle
    with pytest.raises(MalformedTileError, match="cut short"):
        tiles.gunzip_bundle(packed[:-4])
    with pytest.raises(MalformedTileError, match="cut short"):
        tiles.gunzip_bundle(packed + b"x")
    with pytest.raises(MalformedTileError, match="does not decode"):
        tiles.gunzip_bundle(b"not gzip at all")
    bomb = gzip.compress(bytes(tiles.MAX_BUNDLE_BYTES + 1))
    with pytest.raises(MalformedTileError, match="over"):
        tiles.gunzip_bundle(bomb)
