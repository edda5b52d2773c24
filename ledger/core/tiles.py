"""C2SP tlog-tiles: tile paths, which tiles a tree has, entry bundles, proofs from tiles alone.

Pure: standard library and ``ledger.core.merkle``/``limits`` only, no I/O. The project's one
home of the tlog-tiles constants (``TILE_HEIGHT``, ``TILE_WIDTH``, ``MAX_ENTRY``) and of the
entry-bundle codec: the storage layout (``ledger.core.tile_layout``), the tiles endpoint and the
offline verifier import them from here (``tests/unit/test_one_tile_codec.py`` holds it).

* A *tile* at tile level ``L`` and index ``N`` holds the hashes of the Merkle nodes of height
  ``8L`` with indexes ``256N .. 256N + W - 1``, concatenated (32 bytes each). ``W = 256`` is a
  full tile (path ``tile/<L>/<N>``); ``1 <= W <= 255`` is a partial tile (``tile/<L>/<N>.p/<W>``),
  the right edge of a tree whose size is not a multiple of ``256**(L+1)``.
* ``N`` is written in groups of three digits, each but the last prefixed with ``x``
  (1234067 -> ``x001/x234/067``); the level and the width are plain decimal, no leading zeros.
* An *entry bundle* (``tile/entries/<N>[.p/<W>]``) holds the entries ``256N .. 256N + W - 1``,
  each prefixed with its length as a big-endian uint16. For this log an entry is the v1 leaf
  (docs/formats.md "The leaf (v1)"), so its RFC 6962 leaf hash is the level-0 tile hash.
* ``TileNodeReader`` answers the full-node look-ups of the proof planners in ``ledger.core.merkle``
  from tiles: a node of height ``h`` lies in the tile of level ``h // 8``; when ``h`` is not a
  multiple of 8 it is computed from ``2**(h % 8)`` of that tile's hashes (``TileHashes`` keeps
  every interior level of a tile once it is built).
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from ledger.core import merkle
from ledger.core.errors import BoundsError, MalformedTileError, MalformedTilePathError
from ledger.core.limits import MAX_METADATA

__all__ = [
    "MAX_BUNDLE_BYTES",
    "MAX_ENTRY",
    "MAX_LEVEL",
    "TILE_HEIGHT",
    "TILE_WIDTH",
    "TileHashes",
    "TileID",
    "TileNodeReader",
    "consistency_proof",
    "decode_entry_bundle",
    "encode_entry_bundle",
    "entry_bundle_reader",
    "format_index",
    "frame_entry",
    "gunzip_bundle",
    "gzip_bundle",
    "inclusion_proof",
    "new_tiles",
    "parse_tile_path",
    "root",
    "split_entry_bundle",
    "split_hash_tile",
    "tile_width",
    "tiles_for_size",
]

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
MAX_LEVEL = 63
MAX_ENTRY = 0xFFFF  # an entry's length is a uint16
MAX_BUNDLE_BYTES = TILE_WIDTH * (2 + MAX_ENTRY)  # the most bytes an entry bundle can hold
GZIP_LEVEL = 6


def gzip_bundle(data: bytes) -> bytes:
    """An entry bundle as served with ``Content-Encoding: gzip`` (C2SP tlog-tiles allows it
    without negotiation) and stored as the mirror's ``.gz`` twin: the same bytes every time
    (no name, mtime 0), so the endpoint and the mirror agree byte for byte."""
    return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)


def gunzip_bundle(data: bytes) -> bytes:
    """A gzip-encoded answer decoded, bounded to ``MAX_BUNDLE_BYTES`` (a small answer cannot
    expand without limit); MalformedTileError when it is not whole gzip or is too large."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_BUNDLE_BYTES + 1)
    except zlib.error as exc:
        raise MalformedTileError(f"a gzip-encoded tile does not decode: {exc}") from None
    if len(out) > MAX_BUNDLE_BYTES:
        raise MalformedTileError(f"a gzip-encoded tile decodes to over {MAX_BUNDLE_BYTES} bytes")
    if not inflater.eof or inflater.unused_data:
        raise MalformedTileError("a gzip-encoded tile is cut short or has bytes after its end")
    return out


_MAX_INDEX = 1 << 64
_HASH = merkle.HASH_SIZE
_NUMBER = re.compile(r"0|[1-9][0-9]*")
_GROUPS = re.compile(r"(?:x[0-9]{3}/)*[0-9]{3}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TileID:
    """One tile: a hash tile of ``level`` (or, with ``entries``, an entry bundle) and its width."""

    level: int
    index: int
    width: int = TILE_WIDTH
    entries: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.level <= MAX_LEVEL or (self.entries and self.level != 0):
            raise BoundsError(f"tile level {self.level} outside 0..{MAX_LEVEL}")
        if not 0 <= self.index < _MAX_INDEX:
            raise BoundsError(f"tile index {self.index} outside 0..2**64-1")
        if not 1 <= self.width <= TILE_WIDTH:
            raise BoundsError(f"tile width {self.width} outside 1..{TILE_WIDTH}")

    @property
    def full(self) -> bool:
        """True for a full tile (width 256)."""
        return self.width == TILE_WIDTH

    @property
    def path(self) -> str:
        """The tile's path below the log's prefix, e.g. ``tile/0/x001/x234/067.p/8``."""
        kind = "entries" if self.entries else str(self.level)
        suffix = "" if self.full else f".p/{self.width}"
        return f"tile/{kind}/{format_index(self.index)}{suffix}"

    def with_width(self, width: int) -> TileID:
        """The same tile at another width."""
        return TileID(level=self.level, index=self.index, width=width, entries=self.entries)


def format_index(index: int) -> str:
    """``N`` in three-digit groups, all but the last prefixed with ``x`` (0 -> ``000``)."""
    groups = []
    while True:
        groups.append(f"{index % 1000:03d}")
        index //= 1000
        if index == 0:
            break
    return "/".join([*(f"x{g}" for g in reversed(groups[1:])), groups[0]])


def _number(text: str, what: str, path: str) -> int:
    if not _NUMBER.fullmatch(text):
        raise MalformedTilePathError(f"{path!r}: {what} {text!r} is not a decimal without zeros")
    return int(text)


def parse_tile_path(path: str) -> TileID:
    """Parse ``tile/<L>/<N>[.p/<W>]`` or ``tile/entries/<N>[.p/<W>]`` (no leading slash).

    Only the canonical form is accepted: ``MalformedTilePathError`` names what is wrong.
    """
    if len(path) > 200:
        raise MalformedTilePathError(f"tile path of {len(path)} characters is too long")
    head, _, rest = path.partition("/")
    kind, _, rest = rest.partition("/")
    if head != "tile" or not kind:
        raise MalformedTilePathError(f"{path!r}: want tile/<L>/<N> or tile/entries/<N>")
    entries = kind == "entries"
    level = 0 if entries else _number(kind, "level", path)
    if level > MAX_LEVEL:
        raise MalformedTilePathError(f"{path!r}: level {level} > {MAX_LEVEL}")
    width = TILE_WIDTH
    digits, dot, partial = rest.partition(".p/")
    if dot:
        width = _number(partial, "width", path)
        if not 1 <= width < TILE_WIDTH:
            raise MalformedTilePathError(f"{path!r}: partial width {width} outside 1..255")
    if not _GROUPS.fullmatch(digits):
        raise MalformedTilePathError(f"{path!r}: index {digits!r} is not x-prefixed 3-digit groups")
    index = int(digits.replace("x", "").replace("/", ""))
    if format_index(index) != digits:
        raise MalformedTilePathError(f"{path!r}: index {digits!r} has leading zero groups")
    if index >= _MAX_INDEX:
        raise MalformedTilePathError(f"{path!r}: index {index} >= 2**64")
    return TileID(level=level, index=index, width=width, entries=entries)


# --- which tiles a tree has --------------------------------------------------------------------


def tile_width(level: int, index: int, size: int) -> int:
    """Width of tile ``(level, index)`` in the tree of ``size``; 0 when the tree lacks it."""
    count = size >> (TILE_HEIGHT * level)  # full nodes of height 8 * level
    return max(0, min(TILE_WIDTH, count - index * TILE_WIDTH))


def _level_tiles(level: int, old: int, new: int, entries: bool) -> Iterator[TileID]:
    """Tiles of ``level`` in the tree of ``new`` that the tree of ``old`` does not have."""
    old_count = old >> (TILE_HEIGHT * level)
    new_count = new >> (TILE_HEIGHT * level)
    for index in range(old_count // TILE_WIDTH, new_count // TILE_WIDTH):
        yield TileID(level=level, index=index, entries=entries)
    width = new_count % TILE_WIDTH
    if width and new_count != old_count:
        yield TileID(level=level, index=new_count // TILE_WIDTH, width=width, entries=entries)


def new_tiles(old_size: int, new_size: int) -> list[TileID]:
    """Tiles (hash tiles of every level, then entry bundles) of the tree of ``new_size`` that the
    tree of ``old_size`` does not have: newly full tiles and the new right-edge partial tiles.

    Requires ``0 <= old_size <= new_size``.
    """
    if not 0 <= old_size <= new_size:
        raise BoundsError(f"new tiles need 0 <= old_size <= new_size, got {old_size}, {new_size}")
    tiles: list[TileID] = []
    level = 0
    while new_size >> (TILE_HEIGHT * level):
        tiles.extend(_level_tiles(level, old_size, new_size, entries=False))
        level += 1
    tiles.extend(_level_tiles(0, old_size, new_size, entries=True))
    return tiles


def tiles_for_size(size: int) -> list[TileID]:
    """Every tile, full and partial, of every level, that the tree of ``size`` has."""
    return new_tiles(0, size)


# --- tile contents -----------------------------------------------------------------------------


def split_hash_tile(data: bytes, width: int) -> list[bytes]:
    """The ``width`` hashes of a hash tile; ``MalformedTileError`` if its length is not
    ``32 * width`` (a longer tile is accepted and cut: a full tile may stand in for a partial one).
    """
    if len(data) < _HASH * width or len(data) % _HASH or len(data) > _HASH * TILE_WIDTH:
        raise MalformedTileError(f"hash tile of {len(data)} bytes cannot hold {width} hashes")
    return [data[i : i + _HASH] for i in range(0, _HASH * width, _HASH)]


# --- entry bundles: the project's one codec (storage layout, tiles endpoint, verifier) --------

_PLAIN = 43  # a v1 leaf without metadata: version (1) || time (8) || digest (32) || length (2)
_PLAIN_LOW = bytes([_PLAIN])
_STEP = _PLAIN + 2
_FRAMES = tuple(n.to_bytes(2, "big") for n in range(_PLAIN + MAX_METADATA + 1))


def frame_entry(entry: bytes) -> bytes:
    """One entry as an entry bundle holds it: its big-endian uint16 length, then its bytes."""
    n = len(entry)
    if n < len(_FRAMES):
        return _FRAMES[n] + entry
    if n > MAX_ENTRY:
        raise BoundsError(f"entry of {n} bytes, the most is {MAX_ENTRY}")
    return n.to_bytes(2, "big") + entry


def encode_entry_bundle(entries: Iterable[bytes]) -> bytes:
    """Each entry prefixed with its big-endian uint16 length, concatenated."""
    parts = []
    for i, entry in enumerate(entries):
        if len(entry) > MAX_ENTRY:
            raise BoundsError(f"entry {i} is {len(entry)} bytes, the most is {MAX_ENTRY}")
        parts.append(frame_entry(entry))
    return b"".join(parts)


def _uniform(data: bytes) -> bool:
    """True when every entry is a v1 leaf without metadata (43 bytes): then entry ``k`` starts at
    ``45 k`` (checked with two slices in C, not a loop)."""
    n = len(data) // _STEP
    return (
        len(data) == n * _STEP and data[1::_STEP] == _PLAIN_LOW * n and data[0::_STEP] == bytes(n)
    )


def split_entry_bundle(data: bytes) -> list[bytes]:
    """Every entry of a bundle, in order (fast when no entry carries metadata);
    ``MalformedTileError`` when the bytes end inside a length or an entry."""
    if _uniform(data):
        return [data[i + 2 : i + _STEP] for i in range(0, len(data), _STEP)]
    entries: list[bytes] = []
    at = 0
    while at < len(data):
        if at + 2 > len(data):
            raise MalformedTileError(f"entry bundle ends inside the length of entry {len(entries)}")
        end = at + 2 + int.from_bytes(data[at : at + 2], "big")
        if end > len(data):
            raise MalformedTileError(f"entry bundle ends inside entry {len(entries)}")
        entries.append(data[at + 2 : end])
        at = end
    return entries


def decode_entry_bundle(data: bytes, width: int) -> list[bytes]:
    """The first ``width`` entries of a bundle (a full bundle may stand in for a partial one)."""
    entries = split_entry_bundle(data)
    if not width <= len(entries) <= TILE_WIDTH:
        raise MalformedTileError(
            f"entry bundle holds {len(entries)} entries, want {width}..{TILE_WIDTH}"
        )
    return entries[:width]


def entry_bundle_reader(data: bytes) -> Callable[[int], bytes]:
    """A look-up of entry ``k`` of a bundle (``b""`` past its end): sliced in place when no entry
    carries metadata, else the bundle is split once."""
    if _uniform(data):
        return lambda k: data[k * _STEP + 2 : (k + 1) * _STEP]
    entries = split_entry_bundle(data)
    return lambda k: entries[k] if k < len(entries) else b""


class TileHashes:
    """A hash tile with every interior level computed once: ``levels[r]`` holds the full nodes
    of height ``8L + r`` inside the tile (``width >> r`` of them), concatenated (one ``bytes``
    per level, so a big cache of tiles costs the garbage collector nothing to scan)."""

    __slots__ = ("levels", "width")

    def __init__(self, hashes: Sequence[bytes]) -> None:
        if not 1 <= len(hashes) <= TILE_WIDTH:
            raise MalformedTileError(f"a tile holds 1..{TILE_WIDTH} hashes, got {len(hashes)}")
        self.width = len(hashes)
        level = list(hashes)
        self.levels = [b"".join(level)]
        node = merkle.node_hash
        while len(level) > 1:
            level = [node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            self.levels.append(b"".join(level))

    def node(self, height: int, offset: int) -> bytes:
        """The full node ``height`` levels above the tile's base, ``offset`` from its left."""
        at = offset * _HASH
        found = self.levels[height][at : at + _HASH]
        if len(found) != _HASH:
            raise BoundsError(f"no full node {offset} at height {height} in a tile of {self.width}")
        return found


# --- proofs from tiles -------------------------------------------------------------------------

TileFetch = Callable[[int, int, int], TileHashes]  # (level, index, width) -> hashes of the tile
TilePeek = Callable[[tuple[int, int]], "TileHashes | None"]  # (level, index) -> cached tile


class TileNodeReader:
    """A ``merkle.fold_proof_nodes`` look-up for the tree of ``size``, reading tiles via ``fetch``.

    ``fetch(level, index, width)`` returns the tile at (at least) the width it has in the tree of
    ``size``; it may cache. ``peek((level, index))``, when given, returns a cached tile (any
    width) or None without fetching: the hot path of proofs built from a warm cache.
    """

    def __init__(self, size: int, fetch: TileFetch, peek: TilePeek | None = None) -> None:
        self._size = size
        self._fetch = fetch
        self._peek = peek

    def __call__(self, ids: Sequence[merkle.NodeID]) -> list[bytes]:
        size, fetch, peek = self._size, self._fetch, self._peek
        out = []
        tile: TileHashes | None = None
        last = (-1, -1)  # the previous node's tile: a proof path asks for up to 8 in a row
        for level, index in ids:
            if (index + 1) << level > size:
                raise BoundsError(f"node ({level}, {index}) is not full in the tree of {size}")
            height = level & 7  # level % TILE_HEIGHT, and below level // TILE_HEIGHT, inlined
            first = index << height  # its leftmost descendant at height 8 * (level // 8)
            key = (level >> 3, first >> 8)
            if key != last or tile is None:
                tile = None if peek is None else peek(key)
                if tile is None or (
                    tile.width < TILE_WIDTH and tile.width < tile_width(*key, size)
                ):
                    tile = fetch(key[0], key[1], tile_width(key[0], key[1], size))
                last = key
            at = ((first & 255) >> height) << 5  # offset * 32 bytes
            out.append(tile.levels[height][at : at + 32])
        return out

    def node(self, node: merkle.NodeID) -> bytes:
        """The hash of a full node of the tree of ``size``."""
        return self([node])[0]


def inclusion_proof(
    index: int, size: int, fetch: TileFetch, peek: TilePeek | None = None
) -> list[bytes]:
    """RFC 9162 §2.1.3.1 inclusion proof of leaf ``index`` in the tree of ``size``, from tiles."""
    plan = merkle.inclusion_proof_nodes(index, size)
    return merkle.fold_proof_nodes(plan, TileNodeReader(size, fetch, peek))


def consistency_proof(size1: int, size2: int, fetch: TileFetch) -> list[bytes]:
    """RFC 9162 §2.1.4.1 consistency proof from ``size1`` to ``size2`` (``0 < size1 <= size2``)."""
    plan = merkle.consistency_proof_nodes(size1, size2)
    return merkle.fold_proof_nodes(plan, TileNodeReader(size2, fetch))


def root(size: int, fetch: TileFetch) -> bytes:
    """The Merkle Tree Hash of the tree of ``size``, from its tiles."""
    if size == 0:
        return merkle.EMPTY_ROOT
    return merkle.fold_proof_nodes([merkle.subtree_node(0, size)], TileNodeReader(size, fetch))[0]
