"""A C2SP tlog-tiles client: read a log from its tiles (our HTTP endpoint, an nginx or CDN mirror,
any tlog-tiles log such as Tessera's) with the standard library only; no grpc.

* ``TileClient(base_url)``: ``checkpoint()`` fetches the latest signed note and verifies it
  (``ledger.core.checkpoint.open_checkpoint``: a valid signature by a trusted key, the expected
  origin); ``inclusion_proof`` / ``consistency_proof`` / ``root`` build RFC 9162 proofs for any
  tree size from tiles alone (``ledger.core.tiles``); ``leaves`` reads entry bundles.
* Tiles are kept in a bounded LRU (``cache_tiles`` hash tiles with their interior hashes, and
  as many entry bundles): full tiles never change; for a partial one the widest seen is kept and
  serves every narrower width. A missing partial tile is fetched as the full tile (C2SP
  tlog-tiles: a partial tile may be gone once the full one exists).
* ``TileSource``: the client as a ``ledger_client.remote.monitor.LogSource`` (``ledger-verify
  monitor --tiles URL``).
* ``base_url`` may be ``http://``, ``https://`` or ``file://`` (a mirror folder read directly),
  or several of them (a sequence, or one string with the URLs separated by commas): the same log
  behind a CDN, a bucket's own endpoint, the log's endpoint. Each request tries them in order
  and takes the first answer (C2SP tlog-tiles lets clients fetch from any mirror: nothing
  fetched is trusted); a URL that failed is tried last for the next requests, so a dead mirror
  costs one failed request, not one per tile. ``get(path)`` fetches any other object the same
  way (the bucket's ``checkpoints/<size>`` and ``anchors/<size>``).
* A failed or refused request raises ``ServiceError`` (``NotFoundError`` for a 404), a tile whose
  bytes do not parse ``MalformedTileError``. An answer with ``Content-Encoding: gzip`` (entry
  bundles, C2SP tlog-tiles) is decoded, bounded to ``tiles.MAX_BUNDLE_BYTES``. Nothing fetched
  is trusted: proofs built from tiles are only as good as their check against a signed root,
  which ``verify_*`` do.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Generic, TypeVar

from ledger.core import merkle, tiles
from ledger.core.checkpoint import Checkpoint, VerifiedCheckpoint, Verifier, open_checkpoint
from ledger.core.errors import (
    BoundsError,
    FormatError,
    MalformedTileError,
    NotFoundError,
    ServiceError,
)
from ledger.core.note import SignedNote
from ledger_client.remote.monitor import FetchedEntry

__all__ = ["TileClient", "TileSource", "http_fetch"]

Fetch = Callable[[str], bytes]  # URL -> body; raises NotFoundError / ServiceError
_K = TypeVar("_K")
_V = TypeVar("_V")


def http_fetch(timeout: float = 30.0) -> Fetch:
    """A ``Fetch`` over urllib (http, https, file), bounded to ``tiles.MAX_BUNDLE_BYTES``."""

    def fetch(url: str) -> bytes:
        request = urllib.request.Request(url, headers={"User-Agent": "ledger-verify"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                data: bytes = response.read(tiles.MAX_BUNDLE_BYTES + 1)
                encoding = (response.headers.get("Content-Encoding") or "").strip().lower()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise NotFoundError(f"{url}: 404 not found") from None
            raise ServiceError(f"{url}: HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, FileNotFoundError):
                raise NotFoundError(f"{url}: no such file") from None
            raise ServiceError(f"{url}: {exc.reason}") from None
        except (OSError, ValueError) as exc:
            raise ServiceError(f"{url}: {exc}") from None
        if len(data) > tiles.MAX_BUNDLE_BYTES:
            raise ServiceError(f"{url}: response larger than {tiles.MAX_BUNDLE_BYTES} bytes")
        if encoding == "gzip":  # entry bundles (C2SP tlog-tiles); urllib does not decode it
            try:
                return tiles.gunzip_bundle(data)
            except MalformedTileError as exc:
                raise MalformedTileError(f"{url}: {exc}") from None
        if encoding not in ("", "identity"):
            raise ServiceError(f"{url}: unsupported Content-Encoding {encoding!r}")
        return data

    return fetch


class _Lru(Generic[_K, _V]):
    def __init__(self, limit: int) -> None:
        self._limit = max(1, limit)
        self._items: OrderedDict[_K, _V] = OrderedDict()
        # The cached value without refreshing its place: a plain dict read (thread-safe, and a
        # builtin, so the proof hot path calls no Python function per node).
        self.peek: Callable[[_K], _V | None] = self._items.get

    def get(self, key: _K) -> _V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: _K, value: _V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self._limit:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class TileClient:
    """Reads one tlog-tiles log; see the module docstring. Safe to share between threads."""

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        timeout: float = 30.0,
        cache_tiles: int = 4096,
        fetch: Fetch | None = None,
    ) -> None:
        urls = base_url.split(",") if isinstance(base_url, str) else list(base_url)
        self.base_urls = [u if u.endswith("/") else u + "/" for u in (x.strip() for x in urls) if u]
        if not self.base_urls:
            raise FormatError("no tiles URL given")
        self.base_url = self.base_urls[0]
        self._raw_fetch = fetch or http_fetch(timeout)
        self._hashes: _Lru[tuple[int, int], tiles.TileHashes] = _Lru(cache_tiles)
        self._bundles: _Lru[int, list[bytes]] = _Lru(cache_tiles)
        self._lock = threading.Lock()

    def get(self, path: str) -> bytes:
        """``path`` under the first base URL that answers (module docstring); NotFoundError when
        no URL had it and at least one answered 404, ServiceError when none answered."""
        with self._lock:
            order = list(self.base_urls)
        last: ServiceError | None = None
        missing = 0
        for base in order:
            try:
                data = self._raw_fetch(base + path)
            except NotFoundError as exc:
                last, missing = exc, missing + 1
                continue
            except ServiceError as exc:
                last = exc
                with self._lock:  # a mirror that failed goes to the back of the line
                    if base in self.base_urls and len(self.base_urls) > 1:
                        self.base_urls.remove(base)
                        self.base_urls.append(base)
                continue
            return data
        assert last is not None
        if len(order) == 1:
            raise last
        if missing:  # where an answer came, it was 404: not found (the others failed)
            raise NotFoundError(f"{path}: not found at {missing} of {len(order)} URLs ({last})")
        raise ServiceError(f"no tiles URL answered {path}: {last}") from None

    # --- checkpoints --------------------------------------------------------------------------

    def checkpoint_note(self) -> str:
        """The latest signed note, unverified."""
        data = self.get("checkpoint")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ServiceError(f"{self.base_url}checkpoint is not UTF-8") from None

    def checkpoint(
        self, verifiers: Sequence[Verifier], *, origin: str | None = None
    ) -> VerifiedCheckpoint:
        """The latest checkpoint, verified with ``verifiers`` (and ``origin`` when given)."""
        return open_checkpoint(self.checkpoint_note(), verifiers, origin=origin)

    # --- tiles ----------------------------------------------------------------------------------

    def _get_tile(self, tile: tiles.TileID) -> bytes:
        try:
            return self.get(tile.path)
        except NotFoundError:
            if tile.full:
                raise
            return self.get(tile.with_width(tiles.TILE_WIDTH).path)

    def tile_hashes(self, level: int, index: int, width: int) -> tiles.TileHashes:
        """Hash tile ``(level, index)`` at ``width`` or wider, with its interior hashes."""
        with self._lock:
            cached = self._hashes.get((level, index))
        if cached is not None and cached.width >= width:
            return cached
        tile = tiles.TileID(level=level, index=index, width=width)
        data = self._get_tile(tile)
        have = min(len(data) // merkle.HASH_SIZE, tiles.TILE_WIDTH)
        built = tiles.TileHashes(tiles.split_hash_tile(data, max(width, have)))
        with self._lock:
            self._hashes.put((level, index), built)
        return built

    def bundle(self, index: int, width: int) -> list[bytes]:
        """Entries of bundle ``index``: at least ``width`` of them (more when a wider one was
        seen)."""
        with self._lock:
            cached = self._bundles.get(index)
        if cached is not None and len(cached) >= width:
            return cached
        data = self._get_tile(tiles.TileID(level=0, index=index, width=width, entries=True))
        entries = tiles.decode_entry_bundle(data, width)
        with self._lock:
            self._bundles.put(index, entries)
        return entries

    # --- proofs and entries ---------------------------------------------------------------------

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """RFC 9162 inclusion proof of leaf ``index`` in the tree of ``size``."""
        return tiles.inclusion_proof(index, size, self.tile_hashes, self._hashes.peek)

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        """RFC 9162 consistency proof ``size1`` -> ``size2``; empty for ``size1`` 0 or equal."""
        if size1 == 0 or size1 == size2:
            if size1 > size2:
                raise BoundsError(f"size1 {size1} > size2 {size2}")
            return []
        return tiles.consistency_proof(size1, size2, self.tile_hashes)

    def root(self, size: int) -> bytes:
        """The root of the tree of ``size``, from its tiles."""
        return tiles.root(size, self.tile_hashes)

    def leaves(self, start: int, count: int, size: int) -> list[bytes]:
        """Entries ``start .. start + count - 1`` of the tree of ``size`` (the leaf bytes)."""
        if not 0 <= start <= start + count <= size:
            raise BoundsError(f"entries {start}+{count} outside the tree of size {size}")
        out: list[bytes] = []
        at = start
        while at < start + count:
            index, offset = divmod(at, tiles.TILE_WIDTH)
            bundle = self.bundle(index, tiles.tile_width(0, index, size))
            take = min(tiles.TILE_WIDTH - offset, start + count - at)
            out.extend(bundle[offset : offset + take])
            at += take
        return out

    def verify_inclusion(self, leaf: bytes, index: int, size: int, root_hash: bytes) -> list[bytes]:
        """Build the inclusion proof of ``leaf`` at ``index`` and check it against ``root_hash``."""
        proof = self.inclusion_proof(index, size)
        merkle.verify_inclusion(merkle.leaf_hash(leaf), index, size, proof, root_hash)
        return proof

    def verify_consistency(self, size1: int, root1: bytes, size2: int, root2: bytes) -> list[bytes]:
        """Build the consistency proof and check it against both roots."""
        proof = self.consistency_proof(size1, size2)
        if size1 > 0:
            merkle.verify_consistency(size1, size2, root1, root2, proof)
        return proof


class TileSource:
    """A ``ledger_client.remote.monitor.LogSource`` over tiles: the monitor checks what it returns.

    ``entries`` reads from the tree of the last checkpoint fetched by ``latest_checkpoint``
    (the monitor audits only up to a checkpoint it fetched and verified).
    """

    def __init__(self, client: TileClient) -> None:
        self._client = client
        self._size = 0

    def latest_checkpoint(self) -> str:
        note = self._client.checkpoint_note()
        with suppress(FormatError):  # the monitor verifies the note and reports what is wrong
            self._size = Checkpoint.from_text(SignedNote.from_text(note).text).size
        return note

    def consistency_proof(self, size1: int, size2: int) -> Sequence[bytes]:
        return self._client.consistency_proof(size1, size2)

    def entries(self, start: int, count: int) -> Sequence[FetchedEntry]:
        count = min(count, self._size - start)
        if count <= 0:
            return []
        leaves = self._client.leaves(start, count, self._size)
        return [FetchedEntry(index=start + i, leaf=leaf) for i, leaf in enumerate(leaves)]
