"""Tile-shaped storage layout (C2SP tlog-tiles): the Merkle tree as tiles, entries as bundles.

Pure: no I/O. Both stores (``ledger.store.contract.MemoryStore``,
``ledger.store.rocks.RocksStore``) keep exactly these values under exactly these keys; they
differ only in where the bytes live.

* **Entry bundle** ``N`` (key ``b"B" || N (8)``): entries ``[256 N, 256 N + w)``, each a
  big-endian uint16 length and the exact v1 leaf bytes (the tlog-tiles entry bundle format).
* **Tile value** ``(L, N)`` (key ``b"T" || L (1) || N (8)``): tile level ``L`` holds Merkle
  nodes of height ``8 L``; tile ``N`` of it covers nodes ``[256 N, 256 N + w)`` of that height.
  The value is the tile's *rows*, concatenated, 32 bytes per hash: row ``r`` holds the full
  nodes of height ``8 L + r`` inside the tile (``w >> r`` of them, ``r = 0..7``). Row 0 is the
  tile as served (``value[:32 w]``); rows 1..7 are the interior nodes proofs need and a tile
  does not carry. Level 0 stores rows 3..7 only (``LEVEL0_FIRST_ROW``): its row 0 (the leaf
  hashes) and rows 1..2 (nodes over 2 and 4 leaves) are derived from the entry bundle a proof
  reads anyway (at most 4 leaf hashes and 3 interior hashes per node), which saves 56 bytes
  per entry; rows 3..7 cost 7.75 bytes per entry. Deriving row 3 too would save 4 bytes more
  and cost each proof 8 more leaf hashes, about twice the CPU rows 1..2 add (measured in
  docs/benchmarks.md "Storage layout tiles-2, 2026-12-01 (load average 9.7–16)").
  This is layout ``tiles-2``; ``tiles-1`` stored level-0 rows 1..7 (``ledger.store.migrate``
  converts it).

A group commit rewrites the right-edge (partial) bundle and one partial tile value per level;
values left of the edge are full and written once. A tile of width ``w`` is a prefix of every
wider tile of the same index, so every partial width published in a checkpoint stays servable
by truncation. ``TileWriter`` computes the values a commit writes; ``StoredTiles`` answers
node, leaf, tile and bundle reads over any batched key-value lookup. The tile constants and the
entry-bundle codec are ``ledger.core.tiles``'s (the one home of both).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ledger.core.accel import bundle_leaf_hashes
from ledger.core.errors import MalformedTileError, StorageError
from ledger.core.limits import HASH_SIZE
from ledger.core.merkle import NodeID
from ledger.core.tiles import TILE_HEIGHT, TILE_WIDTH, entry_bundle_reader, split_entry_bundle

__all__ = [
    "LEVEL0_FIRST_ROW",
    "Lookup",
    "StoredTiles",
    "TileWriter",
    "bundle_key",
    "entry_range",
    "is_full",
    "is_value_key",
    "tile_key",
]

_sha256 = hashlib.sha256
_INDEX_MASK = (1 << 56) - 1

Lookup = Callable[[list[bytes]], list[bytes | None]]
"""A batched read: the value of each key, or None (one multi-get in RocksDB)."""


def bundle_key(index: int) -> bytes:
    """Key of entry bundle ``index``."""
    return b"B" + index.to_bytes(8, "big")


def tile_key(level: int, index: int) -> bytes:
    """Key of the tile value at tile level ``level``, index ``index``."""
    return b"T" + level.to_bytes(1, "big") + index.to_bytes(8, "big")


_KEY_LENGTHS = {b"B": 9, b"T": 10}  # ``bundle_key`` and ``tile_key``


def is_value_key(key: bytes) -> bool:
    """Whether ``key`` has the shape of a ``bundle_key`` or a ``tile_key``."""
    return len(key) == _KEY_LENGTHS.get(key[:1])


def entry_range(key: bytes) -> tuple[int, int]:
    """The entries ``[start, end)`` the bundle or tile value at logical ``key`` covers when
    full (a tile value of level ``L`` covers ``256 ** (L + 1)`` entries)."""
    if key[:1] == b"B":
        index, shift = int.from_bytes(key[1:9], "big"), TILE_HEIGHT
    else:
        index, shift = int.from_bytes(key[2:10], "big"), TILE_HEIGHT * (key[1] + 1)
    return index << shift, (index + 1) << shift


def is_full(key: bytes, size: int) -> bool:
    """Whether the bundle or tile value at ``key`` is full at tree ``size``: it holds all 256
    of its entries or nodes, so no later commit changes it (a value right of it may not exist
    yet)."""
    return size >= entry_range(key)[1]


LEVEL0_FIRST_ROW = 3
"""The lowest row a level-0 tile value stores (rows below it are derived from the bundle)."""


def _first_row(level: int) -> int:
    """The lowest row stored in a tile value: ``LEVEL0_FIRST_ROW`` at level 0, 0 above."""
    return LEVEL0_FIRST_ROW if level == 0 else 0


def _rows(level: int) -> int:
    """Rows stored in a tile value: level 0 keeps rows 3..7, higher levels rows 0..7."""
    return TILE_HEIGHT - _first_row(level)


def _total(base: int, rows: int) -> int:
    return sum(base >> k for k in range(rows))


# Value length (in hashes) -> base width (the width of the lowest stored row), per row count;
# the sum is strictly increasing in base.
_BASE = {
    rows: {_total(b, rows): b for b in range((TILE_WIDTH >> (TILE_HEIGHT - rows)) + 1)}
    for rows in (_rows(0), _rows(1))
}
# Offsets (in hashes) of row k, per base width: _OFFSETS[base][k].
_OFFSETS = [[_total(b, k) for k in range(TILE_HEIGHT + 1)] for b in range(TILE_WIDTH + 1)]


def _base(value: bytes, level: int) -> int:
    """Base width of a stored tile value: the width of its lowest stored row (row 0 above
    level 0; at level 0, row 3: the bundle width over 8)."""
    base = _BASE[_rows(level)].get(len(value) // HASH_SIZE)
    if base is None or len(value) % HASH_SIZE:
        raise StorageError(f"tile value at level {level} has a malformed length {len(value)}")
    return base


# --- entry bundles ---------------------------------------------------------------------------


def _leaf_hashes(value: bytes) -> bytes:
    """Row 0 of a level-0 tile from its stored bundle (``accel.bundle_leaf_hashes``: the
    compiled core when built); a stored bundle that does not parse is a store fault."""
    try:
        return bundle_leaf_hashes(value)
    except ValueError as exc:
        raise StorageError(f"stored entry bundle of {len(value)} bytes: {exc}") from None


def _split(value: bytes) -> list[bytes]:
    """The leaves of a stored bundle (``tiles.split_entry_bundle``); a stored bundle that does not
    parse is a store fault."""
    try:
        return split_entry_bundle(value)
    except MalformedTileError as exc:
        raise StorageError(f"stored entry bundle of {len(value)} bytes: {exc}") from None


# --- writing -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Bundle:
    """The right-edge entry bundle being extended."""

    index: int
    data: bytearray


@dataclass(slots=True)
class _Tile:
    """The right-edge tile of one level being extended: its rows (row 0 unused at level 0)."""

    index: int
    rows: list[bytearray]
    dirty: bool = False

    @classmethod
    def empty(cls, index: int) -> _Tile:
        return cls(index, [bytearray() for _ in range(TILE_HEIGHT)])

    def copy(self) -> _Tile:
        return _Tile(self.index, [bytearray(r) for r in self.rows])

    def value(self, level: int) -> bytes:
        return b"".join(self.rows[_first_row(level) :])


class TileWriter:
    """The right edge of the layout (partial bundle and tiles), and the values a commit writes.

    ``plan`` works on copies and returns the writer after the commit; a store keeps the old one
    until the commit is durable, so a failed commit leaves it exactly where the durable store is.
    """

    def __init__(self, size: int, bundle: _Bundle, tiles: dict[int, _Tile]) -> None:
        self.size = size
        self._bundle = bundle
        self._tiles = tiles
        self._edges: dict[bytes, bytes] | None = None  # ``edge``'s values, once asked

    def edge(self, key: bytes) -> bytes | None:
        """The value at logical ``key`` when it is this writer's right-edge bundle or tile
        (the stored value after the commits it has planned), else None. A writer is never
        changed once made (``plan`` makes another), so its edge values are made once, on the
        first call."""
        edges = self._edges
        if edges is None:
            edges = {}
            if self._bundle.data:
                edges[bundle_key(self._bundle.index)] = bytes(self._bundle.data)
            for lvl, tile in self._tiles.items():
                if value := tile.value(lvl):
                    edges[tile_key(lvl, tile.index)] = value
            self._edges = edges
        return edges.get(key)

    @classmethod
    def load(cls, size: int, lookup: Lookup) -> TileWriter:
        """The right edge of a durable tree of ``size`` entries, read back from the store."""
        levels = [lvl for lvl in range(8) if size >> (TILE_HEIGHT * lvl) or lvl == 0]
        keys = [bundle_key(size >> TILE_HEIGHT)]
        keys += [tile_key(lvl, size >> (TILE_HEIGHT * (lvl + 1))) for lvl in levels]
        values = lookup(keys)
        bundle = bytearray(values[0] or b"")
        if (size & (TILE_WIDTH - 1)) and not values[0]:
            raise StorageError(f"the partial entry bundle at size {size} is missing")
        tiles = {}
        for lvl, value in zip(levels, values[1:], strict=True):
            rows = _rows(lvl)
            width = (size >> (TILE_HEIGHT * lvl)) & (TILE_WIDTH - 1)
            base = _base(value, lvl) if value else 0
            first = _first_row(lvl)
            if base != width >> first:
                raise StorageError(f"the right-edge tile at level {lvl} does not match size {size}")
            offsets = _OFFSETS[base]
            tile = tiles[lvl] = _Tile.empty(size >> (TILE_HEIGHT * (lvl + 1)))
            for k in range(rows):
                at, end = offsets[k] * HASH_SIZE, offsets[k + 1] * HASH_SIZE
                tile.rows[first + k] += (value or b"")[at:end]
        return cls(size, _Bundle(size >> TILE_HEIGHT, bundle), tiles)

    def plan(
        self,
        first: int,
        entries: Sequence[bytes],
        nodes: Iterable[tuple[NodeID, bytes]],
    ) -> tuple[dict[bytes, bytes], TileWriter]:
        """The values to write for framed entries ``first..`` (``tiles.frame_entry``) and the nodes
        (height >= 1) they complete, and the writer after them."""
        if first != self.size:
            raise StorageError(f"a commit from index {first} does not extend a tree of {self.size}")
        writes: dict[bytes, bytes] = {}
        bundle = self._add_entries(first, entries, writes)
        tiles = {lvl: tile.copy() for lvl, tile in self._tiles.items()}
        for (height, index), h in nodes:
            if height < LEVEL0_FIRST_ROW:
                continue  # derived from the bundle when read
            lvl, row = height >> 3, height & 7
            n = index >> (TILE_HEIGHT - row)
            tile = tiles.get(lvl)
            if tile is None or tile.index != n:
                if tile is not None and tile.dirty:  # now full: written this once
                    writes[tile_key(lvl, tile.index)] = tile.value(lvl)
                tile = tiles[lvl] = _Tile.empty(n)
            tile.rows[row] += h
            tile.dirty = True
        for lvl, tile in tiles.items():
            if tile.dirty:
                writes[tile_key(lvl, tile.index)] = tile.value(lvl)
                tile.dirty = False
        return writes, TileWriter(first + len(entries), bundle, tiles)

    def plan_packed(
        self, first: int, framed: bytes, step: int, rows: Sequence[bytes]
    ) -> tuple[dict[bytes, bytes], TileWriter]:
        """``plan`` over buffers: ``framed`` holds the new entries framed, ``step`` bytes each
        (leaves without metadata), ``rows[h - 1]`` the hashes of the nodes of height ``h``
        they complete (``CompactRange.extend_packed``). The same values as ``plan``, built
        with a few slices per tile instead of an object per entry or node."""
        if first != self.size:
            raise StorageError(f"a commit from index {first} does not extend a tree of {self.size}")
        if step <= 0 or len(framed) % step:
            raise StorageError(f"framed entries of {len(framed)} bytes are not {step} bytes each")
        count = len(framed) // step
        writes: dict[bytes, bytes] = {}
        bundle = self._bundle
        at = 0
        while at < count:
            index = first + at
            n = index >> TILE_HEIGHT
            data = bundle.data if n == bundle.index else b""
            take = min(count - at, TILE_WIDTH - (index & (TILE_WIDTH - 1)))
            bundle = _Bundle(n, bytearray(data) + framed[at * step : (at + take) * step])
            writes[bundle_key(n)] = bytes(bundle.data)
            at += take
        tiles = dict(self._tiles)
        pieces: dict[int, dict[int, list[tuple[int, bytes]]]] = {}  # level -> tile -> rows
        for height, row_hashes in enumerate(rows[LEVEL0_FIRST_ROW - 1 :], LEVEL0_FIRST_ROW):
            lvl, row = height >> 3, height & 7
            span = TILE_WIDTH >> row  # nodes of this height in one tile
            index = first >> height  # the first node completed at this height
            end = len(row_hashes) // HASH_SIZE
            done = 0
            while done < end:
                take = min(end - done, span - (index & (span - 1)))
                part = row_hashes[done * HASH_SIZE : (done + take) * HASH_SIZE]
                pieces.setdefault(lvl, {}).setdefault(index // span, []).append((row, part))
                done += take
                index += take
        for lvl, by_tile in pieces.items():
            for n in sorted(by_tile):
                old = tiles.get(lvl)
                tile = old.copy() if old is not None and old.index == n else _Tile.empty(n)
                for row, part in by_tile[n]:
                    tile.rows[row] += part
                writes[tile_key(lvl, n)] = tile.value(lvl)
                tiles[lvl] = tile
        return writes, TileWriter(first + count, bundle, tiles)

    def _add_entries(
        self, first: int, entries: Sequence[bytes], writes: dict[bytes, bytes]
    ) -> _Bundle:
        bundle = _Bundle(self._bundle.index, bytearray(self._bundle.data))
        at = 0
        while at < len(entries):
            index = first + at
            n = index >> TILE_HEIGHT
            if n != bundle.index:
                bundle = _Bundle(n, bytearray())
            take = min(len(entries) - at, TILE_WIDTH - (index & (TILE_WIDTH - 1)))
            bundle.data += b"".join(entries[at : at + take])
            writes[bundle_key(n)] = bytes(bundle.data)
            at += take
        return bundle


# --- reading -------------------------------------------------------------------------------


class StoredTiles:
    """Nodes, leaves, tiles and entry bundles answered from the stored values (one batched
    lookup per call); anything the caller says must be there raises ``StorageError`` if not."""

    def __init__(self, lookup: Lookup) -> None:
        self._lookup = lookup

    def _values(self, keys: list[bytes], what: str) -> dict[bytes, bytes]:
        distinct = list(dict.fromkeys(keys))
        found = self._lookup(distinct)
        values = {}
        for key, value in zip(distinct, found, strict=True):
            if value is None:
                raise StorageError(f"missing {what} {key.hex()}")
            values[key] = value
        return values

    def leaves(self, indexes: Sequence[int]) -> list[bytes]:
        """The leaves at ``indexes``."""
        if not indexes:
            return []
        keys = [bundle_key(i >> TILE_HEIGHT) for i in indexes]
        values = self._values(keys, "entry bundle")
        readers: dict[bytes, Callable[[int], bytes]] = {}
        out = []
        for i, key in zip(indexes, keys, strict=True):
            entry = readers.get(key)
            if entry is None:
                try:
                    entry = readers[key] = entry_bundle_reader(values[key])
                except MalformedTileError as exc:
                    raise StorageError(f"stored entry bundle {key.hex()}: {exc}") from None
            leaf = entry(i & (TILE_WIDTH - 1))
            if not leaf:
                raise StorageError(f"missing entry {i}")
            out.append(leaf)
        return out

    def nodes(self, ids: Sequence[NodeID]) -> list[bytes]:
        """Hashes of full nodes (any height; height 0 is the leaf hash of the entry).

        Proofs ask for thousands of nodes in a few hundred values: each value's key and base
        width are worked out once, each node is then two shifts and a slice. Nodes of height
        below ``LEVEL0_FIRST_ROW`` are hashed from their leaves (each leaf hashed once per call).
        """
        if not ids:
            return []
        low = [(h, j) for h, j in ids if h < LEVEL0_FIRST_ROW]
        derived = iter(self._derived(low)) if low else iter(())
        # a tile value as one integer: level (above bit 56) and tile index
        tiles = {
            (h >> 3) << 56 | j >> (TILE_HEIGHT - (h & 7)) for h, j in ids if h >= LEVEL0_FIRST_ROW
        }
        keys = {t: tile_key(t >> 56, t & _INDEX_MASK) for t in tiles}
        values = self._values(list(keys.values()), "tile value") if keys else {}
        bases = {t: _base(values[key], t >> 56) for t, key in keys.items()}
        out = []
        for h, j in ids:
            if h < LEVEL0_FIRST_ROW:
                out.append(next(derived))
                continue
            level, row = h >> 3, h & 7
            t = level << 56 | j >> (TILE_HEIGHT - row)
            pos = j & ((TILE_WIDTH >> row) - 1)
            stored = row - _first_row(level)
            base = bases[t]
            if pos >= base >> stored:
                raise StorageError(f"missing tree node {NodeID(h, j)}")
            at = (_OFFSETS[base][stored] + pos) * HASH_SIZE
            out.append(values[keys[t]][at : at + HASH_SIZE])
        return out

    def _derived(self, low: list[tuple[int, int]]) -> list[bytes]:
        """Hashes of nodes of height below ``LEVEL0_FIRST_ROW`` (height 0: leaf hashes), from
        their leaves: one read of the bundles that hold them (a node lies in one bundle)."""
        keys = {n: bundle_key(n) for n in {j << h >> TILE_HEIGHT for h, j in low}}
        values = self._values(list(keys.values()), "entry bundle")
        readers: dict[int, Callable[[int], bytes]] = {}
        for n, key in keys.items():
            try:
                readers[n] = entry_bundle_reader(values[key])
            except MalformedTileError as exc:
                raise StorageError(f"stored entry bundle {key.hex()}: {exc}") from None
        out = []
        mask = TILE_WIDTH - 1
        for h, j in low:
            first = j << h
            entry = readers[first >> TILE_HEIGHT]
            level = []
            for i in range(first, first + (1 << h)):
                leaf = entry(i & mask)
                if not leaf:
                    raise StorageError(f"missing entry {i}")
                level.append(_sha256(b"\x00" + leaf).digest())
            while len(level) > 1:
                level = [
                    _sha256(b"\x01" + level[k] + level[k + 1]).digest()
                    for k in range(0, len(level), 2)
                ]
            out.append(level[0])
        return out

    def tiles(self, ids: Sequence[tuple[int, int, int]]) -> list[bytes]:
        """Tiles ``(level, index, width)`` as served: ``width`` hashes of height ``8 level``."""
        for level, index, width in ids:
            if not 0 < width <= TILE_WIDTH or level < 0 or index < 0:
                raise StorageError(f"no tile ({level}, {index}) of width {width}")
        low = [(i, w) for lvl, i, w in ids if lvl == 0]
        low_tiles = iter([_leaf_hashes(bundle) for bundle in self.bundles(low)])
        keys = [tile_key(lvl, i) for lvl, i, _ in ids if lvl]
        values = self._values(keys, "tile") if keys else {}
        out = []
        for level, index, width in ids:
            row = next(low_tiles) if level == 0 else values[tile_key(level, index)]
            if level and _base(row, level) < width:
                raise StorageError(f"tile ({level}, {index}) is narrower than {width}")
            out.append(row[: width * HASH_SIZE])
        return out

    def bundles(self, ids: Sequence[tuple[int, int]]) -> list[bytes]:
        """Entry bundles ``(index, width)`` as served: the first ``width`` entries."""
        for index, width in ids:
            if not 0 < width <= TILE_WIDTH or index < 0:
                raise StorageError(f"no entry bundle {index} of width {width}")
        keys = [bundle_key(i) for i, _ in ids]
        values = self._values(keys, "entry bundle") if keys else {}
        out = []
        for (index, width), key in zip(ids, keys, strict=True):
            value = values[key]
            leaves = _split(value)
            if len(leaves) < width:
                raise StorageError(f"entry bundle {index} is narrower than {width}")
            cut = len(value) if len(leaves) == width else sum(len(x) + 2 for x in leaves[:width])
            out.append(value[:cut])
        return out
