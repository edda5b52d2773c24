"""Reading C2SP tlog-tiles from the log's store: the one seam between tiles and storage.

The store keeps the tree as tiles and the entries as entry bundles (``ledger.core.tile_layout``), so
a tile or a bundle is one native read (``Store.get_tiles`` / ``get_entry_bundles``), cut to the
width asked; the store serves any width up to its committed size, and this reader caps it at
the published size.

Only tiles of the published tree are served: a tile is readable when the tree of the latest
published checkpoint has it at least at the width asked (a prefix of a full tile is the partial
tile of an earlier size, and a partial width of a tile that is now full is served cut to width,
as C2SP tlog-tiles allows). Full tiles never change, so a bounded LRU keeps the recently read ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from ledger.core import merkle, tiles
from ledger.core.errors import NotFoundError, NotYetPublishedError, StorageError
from ledger.core.types import PublishedCheckpoint
from ledger.store.contract import Store

__all__ = ["DEFAULT_CACHE_BYTES", "TileReader"]

DEFAULT_CACHE_BYTES = 32 << 20


class _FullTileCache:
    """An LRU of full tiles (immutable), bounded in bytes; safe across threads."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._bytes = 0
        self._items: OrderedDict[tiles.TileID, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, tile: tiles.TileID) -> bytes | None:
        with self._lock:
            data = self._items.get(tile)
            if data is not None:
                self._items.move_to_end(tile)
            return data

    def put(self, tile: tiles.TileID, data: bytes) -> None:
        if len(data) > self._max:
            return
        with self._lock:
            if tile in self._items:
                return
            self._items[tile] = data
            self._bytes += len(data)
            while self._bytes > self._max:
                _, old = self._items.popitem(last=False)
                self._bytes -= len(old)


class TileReader:
    """Tiles and entry bundles of the published tree, read from a ``Store``.

    ``published`` returns the latest published checkpoint (None before the first one). Safe to
    call from several reader threads while the writer commits (the store's contract).
    """

    def __init__(
        self,
        *,
        store: Store,
        published: Callable[[], PublishedCheckpoint | None],
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self._store = store
        self._published = published
        self._cache = _FullTileCache(cache_bytes)

    def checkpoint(self) -> PublishedCheckpoint:
        """The latest published checkpoint."""
        latest = self._published()
        if latest is None:
            raise NotYetPublishedError("no checkpoint has been published yet; retry shortly")
        return latest

    def read(self, tile: tiles.TileID, size: int | None = None) -> bytes:
        """The bytes of ``tile`` in the tree of ``size`` (default: the latest published size).

        ``NotFoundError`` when that tree does not have the tile at that width.
        """
        if size is None:
            size = self.checkpoint().size
        have = tiles.tile_width(tile.level, tile.index, size)
        if have < tile.width:
            raise NotFoundError(f"{tile.path}: not in the published tree of size {size}")
        full = tile.with_width(tiles.TILE_WIDTH)
        if have == tiles.TILE_WIDTH and (data := self._cache.get(full)) is not None:
            return data if tile.full else self._cut(tile, data)
        data = self._read_stored(tile if have < tiles.TILE_WIDTH else full)
        if have == tiles.TILE_WIDTH:
            self._cache.put(full, data)
            return data if tile.full else self._cut(tile, data)
        return data

    @staticmethod
    def _cut(tile: tiles.TileID, data: bytes) -> bytes:
        if tile.entries:
            return tiles.encode_entry_bundle(tiles.decode_entry_bundle(data, tile.width))
        return data[: merkle.HASH_SIZE * tile.width]

    def _read_stored(self, tile: tiles.TileID) -> bytes:
        if tile.entries:
            (bundle,) = self._store.get_entry_bundles([(tile.index, tile.width)])
            return bundle
        (data,) = self._store.get_tiles([(tile.level, tile.index, tile.width)])
        if len(data) != merkle.HASH_SIZE * tile.width:
            raise StorageError(f"{tile.path}: the store returned {len(data)} bytes")
        return data
