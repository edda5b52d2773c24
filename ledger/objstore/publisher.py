"""The log published to a bucket in the exact C2SP tlog-tiles layout: the bucket (or a CDN in
front of it) is a public read path with no Python on it.

``BucketPublisher.update(checkpoints)`` writes, for the published checkpoints given (any order;
sizes the bucket has are skipped):

1. every tile each tree has that the previous one did not (``ledger.core.tiles.new_tiles``: newly
   full tiles and the new partial tiles of every level, hash tiles and entry bundles), uploaded
   in parallel, each **create-only** (``If-None-Match: *``) with
   ``Cache-Control: public, max-age=31536000, immutable``. Entry bundles are stored gzip
   (``ledger.core.tiles.gzip_bundle``, mtime 0) with ``Content-Encoding: gzip``, as the HTTP
   endpoint serves them;
2. ``checkpoints/<size>``: the stored note of each checkpoint with the cosignatures it has so
   far (replaced by compare-and-swap when witnesses add more; another checkpoint body there is a
   conflict);
3. last, ``checkpoint``: the newest note, short-lived (``public, max-age=1``), written by
   compare-and-swap (``If-Match`` on the ETag this publisher last saw), so two publishers can
   never move it backwards.

All the tiles and notes of the checkpoints given to one update go up in one parallel sweep,
then ``checkpoint``: a reader never sees a checkpoint whose tiles are not all there. The mirror
overlaps updates (``start``): a later update's uploads queue behind an earlier one's, and one
finishing thread writes each ``checkpoint`` in order, after the one before it and after every
tile of its own tree; an update behind a failed one fails with it and writes no ``checkpoint``.

A create-only PUT answered 412 reads the stored object back: the same content once decompressed
(gzip bytes are not reproducible across zlib versions) is a retried or repeated upload and fine;
other content is ``ObjectConflictError`` and publishing stops (the bucket holds another history
under this log's name: the operator must look). ``publish_anchors(sizes)`` writes
``anchors/<size>`` (JSON: every RFC 3161 anchor of that checkpoint, base64 tokens) and
``anchors/latest`` (the newest anchored size), so receipts can be fetched and upgraded from the
bucket alone.

Superseded partial tiles are kept, as the mirror folder keeps them: a reader holding an older
checkpoint still finds its tree (C2SP tlog-tiles lets a log delete them once the full tile
exists; clients fall back to the full tile). Deleting them is left to a bucket lifecycle rule.
The mirror coalesces (``coalesce=True``): of the checkpoints pending when an update starts
only the newest gets partial tiles, the others only their ``checkpoints/<size>`` note, which
saves ~4 objects per checkpoint; a size that gets anchors later gets its partial tiles first
(``publish_anchors``), since receipts fetched from the bucket are of the anchored size.

Before anything, the bucket must have passed ``ledger objstore check``
(``ledger.objstore.conformance``): the first ``update`` reads the marker it leaves
(``require_conforming``) and raises ``NonConformingStoreError`` without a passing one. Resuming,
the publisher checks that the bucket's checkpoint is this log's: its origin, and the root this
log's tree has at that size.
"""

from __future__ import annotations

import json
import logging
import threading
from base64 import b64encode
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from ledger.core import tiles
from ledger.core.checkpoint import Checkpoint
from ledger.core.errors import (
    LedgerError,
    MalformedTileError,
    NonConformingStoreError,
    NotFoundError,
    NotYetPublishedError,
    ObjectConflictError,
    StorageError,
)
from ledger.core.note import SignedNote
from ledger.core.types import Anchor, PublishedCheckpoint
from ledger.objstore.bucket import Bucket, StoredObject
from ledger.store.tile_reader import TileReader

__all__ = [
    "CHECKPOINT_CACHE",
    "CONFORMANCE_KEY",
    "TILE_CACHE",
    "BucketPublisher",
    "read_conformance",
]

_log = logging.getLogger("ledger.objstore")
TILE_CACHE = "public, max-age=31536000, immutable"
CHECKPOINT_CACHE = "public, max-age=1"
NOTE_CACHE = "public, max-age=60"
CONFORMANCE_KEY = ".ledger/conformance.json"
_TILE = {"Content-Type": "application/octet-stream", "Cache-Control": TILE_CACHE}
_BUNDLE = {**_TILE, "Content-Encoding": "gzip"}
_NOTE = {"Content-Type": "text/plain; charset=utf-8", "Cache-Control": NOTE_CACHE}
_LATEST = {"Content-Type": "text/plain; charset=utf-8", "Cache-Control": CHECKPOINT_CACHE}
_JSON = {"Content-Type": "application/json", "Cache-Control": CHECKPOINT_CACHE}

T = TypeVar("T")
Progress = Callable[[int], None]
AnchorSource = Callable[[int], list[Anchor]]
NoteSource = Callable[[int], PublishedCheckpoint | None]


def read_conformance(bucket: Bucket) -> dict[str, object] | None:
    """The marker ``ledger objstore check`` left in the bucket (None: never checked)."""
    stored = bucket.get(CONFORMANCE_KEY)
    if stored is None:
        return None
    try:
        marker = json.loads(stored.body)
    except (ValueError, UnicodeDecodeError):
        return None
    return marker if isinstance(marker, dict) else None


def _body_of(note: str) -> str:
    """The checkpoint body of a signed note (what cosignatures do not change)."""
    return SignedNote.from_text(note).text


@dataclass(frozen=True, slots=True, kw_only=True)
class Published:
    """What one ``update`` did."""

    from_size: int
    size: int
    created: int  # objects this update created
    existing: int  # create-only PUTs answered 412 with the same content


class BucketPublisher:
    """Publishes the log that ``reader`` reads into ``bucket`` (module docstring)."""

    def __init__(
        self,
        *,
        bucket: Bucket,
        reader: TileReader,
        origin: str,
        notes: NoteSource | None = None,
        anchors: AnchorSource | None = None,
        threads: int = 16,
    ) -> None:
        self.bucket = bucket
        self._reader = reader
        self._origin = origin
        self._notes = notes
        self._anchors = anchors
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="ledger-objstore")
        self._finisher = ThreadPoolExecutor(1, thread_name_prefix="ledger-objstore-finish")
        self._plan_lock = threading.Lock()  # ``start``: the planned size and the tail
        self._planned: int | None = None  # the size of the newest update started
        self._tail: Future[Published] | None = None  # the newest update started
        self._sweeps = 0
        self._lock = threading.Lock()
        self._size: int | None = None
        self._etag: str | None = None  # of ``checkpoint`` as last written or read
        self._note = ""
        self._notes_sent: dict[int, str] = {}
        self._anchors_sent: dict[int, bytes] = {}
        self._edges: set[int] = set()  # sizes whose partial tiles are in the bucket
        self.stopped: ObjectConflictError | None = None
        self._conforming = False  # the bucket's conformance marker was read and passed

    def close(self) -> None:
        """Stop the upload threads."""
        self._finisher.shutdown(wait=True)
        self._pool.shutdown(wait=True)

    # --- state --------------------------------------------------------------------------------

    def require_conforming(self) -> None:
        """NonConformingStoreError unless the bucket passed ``ledger objstore check``."""
        marker = read_conformance(self.bucket)
        if marker is None:
            raise NonConformingStoreError(
                f"{self.bucket.address.url}: the store was never checked for atomic conditional "
                "writes; run `ledger objstore check` first"
            )
        if marker.get("passed") is not True:
            raise NonConformingStoreError(
                f"{self.bucket.address.url}: the store failed `ledger objstore check` "
                f"({marker.get('detail', 'no detail')}); it is refused for publishing"
            )

    def bucket_checkpoint(self) -> str | None:
        """The ``checkpoint`` note in the bucket (None: none yet); remembers its ETag."""
        stored = self.bucket.get("checkpoint")
        if stored is None:
            self._etag, self._note = None, ""
            return None
        try:
            note = stored.body.decode("utf-8")
        except UnicodeDecodeError:
            raise StorageError(f"{self.bucket.address.url}checkpoint is not UTF-8") from None
        self._etag, self._note = stored.etag, note
        return note

    def published_size(self) -> int:
        """The size of the bucket's checkpoint (0 without one); another origin, or another root
        than this log's at that size, is refused (ObjectConflictError)."""
        if self._size is None:
            note = self.bucket_checkpoint()
            size = 0 if note is None else self._size_of(note)
            if note is not None:
                self._check_root(note, size)
            self._size = size
        return self._size

    def _check_root(self, note: str, size: int) -> None:
        """The bucket's tree must be this log's: same root at the bucket's size (when the log
        holds that size; a bucket ahead of the log is the start's evidence check, not this)."""
        try:
            stated = Checkpoint.from_text(SignedNote.from_text(note).text)
        except LedgerError as exc:
            raise ObjectConflictError(f"{self.bucket.address.url}checkpoint: {exc}") from None
        try:
            ours = tiles.root(size, self._tile_hashes(size))
        except (NotFoundError, NotYetPublishedError, StorageError):
            return  # the log does not hold that size (a bucket ahead: the start's evidence)
        if ours != stated.root_hash:
            raise ObjectConflictError(
                f"{self.bucket.address.url}checkpoint has root {stated.root_hash.hex()} at size "
                f"{size}, this log {ours.hex()}: the bucket holds another history; "
                "publishing stops"
            )

    def _tile_hashes(self, size: int) -> tiles.TileFetch:
        def fetch(level: int, index: int, width: int) -> tiles.TileHashes:
            data = self._reader.read(tiles.TileID(level=level, index=index, width=width), size)
            return tiles.TileHashes(tiles.split_hash_tile(data, width))

        return fetch

    def _size_of(self, note: str) -> int:
        lines = note.split("\n", 2)
        if len(lines) < 3 or lines[0] != self._origin or not lines[1].isdigit():
            raise ObjectConflictError(
                f"{self.bucket.address.url}checkpoint is not a checkpoint of {self._origin!r}: "
                "refusing to publish into another log's bucket"
            )
        return int(lines[1])

    # --- publishing ---------------------------------------------------------------------------

    def update(
        self,
        checkpoints: Sequence[PublishedCheckpoint],
        progress: Progress | None = None,
        *,
        coalesce: bool = False,
    ) -> Published:
        """Publish ``checkpoints`` (module docstring); raises ObjectConflictError on a conflict
        (and refuses every later update), StoreUnreachableError when the store does not answer
        (a later update retries from the bucket's checkpoint).

        ``coalesce`` (the mirror): only the newest checkpoint's tree gets tiles, so the partial
        tiles of the intermediate sizes are never uploaded (their notes still are; a reader
        holding one reads the newest partial tile, or the full one, and cuts it)."""
        return self.start(checkpoints, progress, coalesce=coalesce).result()

    def start(
        self,
        checkpoints: Sequence[PublishedCheckpoint],
        progress: Progress | None = None,
        *,
        coalesce: bool = False,
    ) -> Future[Published]:
        """``update`` without waiting (the mirror): this update's tiles and notes go to the
        upload pool at once, behind those of the updates started before it (its tiles are the
        ones its tree has that the previous update's tree has not), and one finishing thread
        writes its ``checkpoint`` once they are all in the bucket *and* the update before it
        wrote its own: checkpoints in order, each after every tile of its tree. An update whose
        predecessor failed fails with the same error and writes no ``checkpoint``; one started
        after that failure plans again from the bucket's checkpoint."""
        if self.stopped is not None:
            raise self.stopped
        try:
            if not self._conforming:
                self.require_conforming()
                self._conforming = True
            with self._plan_lock:
                return self._start(checkpoints, progress, coalesce)
        except ObjectConflictError as exc:
            self.stopped = exc
            _log.error("PUBLISHING STOPPED: %s", exc)
            raise
        except Exception:
            self._size = None  # unknown: read the bucket's checkpoint again next time
            raise

    def _start(
        self, checkpoints: Sequence[PublishedCheckpoint], progress: Progress | None, coalesce: bool
    ) -> Future[Published]:
        prev = self._tail
        if prev is not None and prev.done() and prev.exception() is not None:
            prev, self._planned = None, None  # it failed: plan from the bucket again
        start = size = self._planned if self._planned is not None else self.published_size()
        todo = sorted({c.size: c for c in checkpoints if c.size > size}.values(), key=_size)
        if any(c.origin != self._origin for c in todo):
            raise StorageError(f"a checkpoint of another origin for the bucket of {self._origin}")
        jobs: list[tuple[tiles.TileID, int]] = []
        edges: list[int] = []  # sizes whose partial tiles this sweep uploads
        for checkpoint in todo[-1:] if coalesce else todo:  # new tiles, in one parallel sweep
            jobs += [(t, checkpoint.size) for t in tiles.new_tiles(size, checkpoint.size)]
            size = checkpoint.size
            edges.append(size)
        notes = [self._pool.submit(self.publish_note, c) for c in todo]  # beside the tiles
        uploads = [self._pool.submit(self._put_tile, *job) for job in jobs]
        self._planned = size
        self._sweeps += 1
        tail = self._finisher.submit(
            self._finish,
            self._sweeps,
            prev,
            start,
            size,
            todo[-1:],
            uploads,
            notes,
            progress,
            edges,
        )
        self._tail = tail
        return tail

    def _finish(
        self,
        sweep: int,
        prev: Future[Published] | None,
        start: int,
        size: int,
        newest: list[PublishedCheckpoint],
        uploads: list[Future[int]],
        notes: list[Future[None]],
        progress: Progress | None,
        edges: list[int],
    ) -> Published:
        """On the finishing thread: wait for the update before and for this one's uploads,
        then write ``checkpoint``."""
        created = existing = 0
        try:
            if prev is not None:
                prev.result()  # its failure is this update's: no checkpoint over missing tiles
            for upload in uploads:
                made = upload.result()
                created += made
                existing += 1 - made
                if progress is not None:
                    progress(1)
            for note in notes:
                note.result()
            if newest:
                self._put_latest(newest[-1])
                created += 1
        except ObjectConflictError as exc:
            self.stopped = self.stopped or exc
            _log.error("PUBLISHING STOPPED: %s", exc)
            raise
        except Exception:
            with self._plan_lock:
                if self._sweeps == sweep:  # no later update chained on this one
                    self._planned = None
            self._size = None
            raise
        self._mark_edges(edges)  # only now: a failed sweep's sizes get their tiles from _put_edge
        self._size = size
        return Published(from_size=start, size=size, created=created, existing=existing)

    def after_updates(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` on the finishing thread after the updates started so far (the mirror's
        cosignature and anchor refresh: never beside a ``checkpoint`` write)."""
        return self._finisher.submit(work)

    def _put_tile(self, tile: tiles.TileID, size: int) -> int:
        data = self._reader.read(tile, size)
        if tile.entries:
            return self._create(tile.path, tiles.gzip_bundle(data), _BUNDLE, data)
        return self._create(tile.path, data, _TILE, data)

    def _create(self, name: str, body: bytes, headers: dict[str, str], content: bytes) -> int:
        """Create-only; 1 when created, 0 when the same content was there, else a conflict."""
        if self.bucket.create(name, body, headers):
            return 1
        stored = self.bucket.get(name)
        if stored is not None and _content(stored) == content:
            return 0
        raise ObjectConflictError(
            f"{self.bucket.address.url}{name} exists with other content than this log's "
            f"({'missing on read-back' if stored is None else f'{len(stored.body)} bytes'}): "
            "the bucket holds another history; publishing stops"
        )

    def publish_note(self, checkpoint: PublishedCheckpoint) -> None:
        """``checkpoints/<size>``: the stored note with its cosignatures (module docstring)."""
        name = f"checkpoints/{checkpoint.size}"
        note = checkpoint.note
        with self._lock:
            if self._notes_sent.get(checkpoint.size) == note:
                return
        body = note.encode()
        if not self.bucket.create(name, body, _NOTE):
            stored = self.bucket.get(name)
            if stored is None or stored.body != body:
                old = "" if stored is None else stored.body.decode("utf-8", "replace")
                if stored is None or _body_of(old) != _body_of(note):
                    raise ObjectConflictError(
                        f"{self.bucket.address.url}{name} holds another checkpoint of size "
                        f"{checkpoint.size}: two roots for one size; publishing stops"
                    )
                if len(old) < len(note) and self.bucket.swap(name, body, stored.etag, _NOTE):
                    pass  # more cosignatures now; a lost race leaves the other writer's
        with self._lock:
            self._notes_sent[checkpoint.size] = note
            if len(self._notes_sent) > 256:
                self._notes_sent.pop(min(self._notes_sent))

    def _put_latest(self, checkpoint: PublishedCheckpoint) -> None:
        """``checkpoint`` by compare-and-swap, never backwards."""
        body = checkpoint.note.encode()
        for _ in range(3):
            if self._etag is None:
                done = self.bucket.create("checkpoint", body, _LATEST)
                etag = self.bucket.get("checkpoint") if done else None
                if etag is not None and etag.body == body:
                    self._etag, self._note = etag.etag, checkpoint.note
                    return
            else:
                new = self.bucket.swap("checkpoint", body, self._etag, _LATEST)
                if new is not None:
                    self._etag, self._note = new, checkpoint.note
                    return
            # someone else wrote it: read it back and judge
            theirs = self.bucket_checkpoint()
            if theirs is not None and theirs == checkpoint.note:
                return
            if theirs is not None and self._size_of(theirs) >= checkpoint.size:
                raise ObjectConflictError(
                    f"{self.bucket.address.url}checkpoint was moved to size "
                    f"{self._size_of(theirs)} by another writer while this log published "
                    f"{checkpoint.size}: two publishers for one bucket; publishing stops"
                )
        raise StorageError(f"{self.bucket.address.url}checkpoint: lost the swap three times")

    def refresh_latest(self, checkpoint: PublishedCheckpoint) -> None:
        """Re-publish the newest checkpoint when witnesses added cosignatures to it."""
        if checkpoint.size == self._size and checkpoint.note != self._note:
            self.publish_note(checkpoint)
            if len(checkpoint.note) > len(self._note):
                self._put_latest(checkpoint)

    def publish_anchors(self, sizes: Sequence[int]) -> int:
        """``anchors/<size>`` for each of ``sizes`` with anchors, then ``anchors/latest``."""
        if self._anchors is None:
            return 0
        written = 0
        for size in sorted(sizes):
            anchors = self._anchors(size)
            if not anchors:
                continue
            body = json.dumps(
                {"size": size, "anchors": [
                    {"tsa": a.tsa, "token": b64encode(a.token).decode(),
                     "gen_time_ms": a.gen_time_ms} for a in anchors]},
                sort_keys=True,
            ).encode()  # fmt: skip
            if self._anchors_sent.get(size) == body:
                continue
            self._put_edge(size)  # receipts from the bucket read the tree of that size
            name = f"anchors/{size}"
            if not self.bucket.create(name, body, _JSON):
                stored = self.bucket.get(name)
                if stored is not None and stored.body != body:
                    self.bucket.swap(name, body, stored.etag, _JSON)  # a TSA more since
            self._anchors_sent[size] = body
            written += 1
        if written:
            newest = max(self._anchors_sent)
            self.bucket.put("anchors/latest", str(newest).encode(), _LATEST)
        return written

    def _put_edge(self, size: int) -> None:
        """The partial tiles of the tree of ``size`` (a size ``update(coalesce=True)`` gave no
        tiles of its own), create-only like every tile."""
        if size in self._edges:
            return
        edge = [(t, size) for t in tiles.tiles_for_size(size) if not t.full]
        for _ in self._pool.map(lambda job: self._put_tile(*job), edge):
            pass
        self._mark_edges([size])

    def _mark_edges(self, sizes: Sequence[int]) -> None:
        """Remember sizes whose partial tiles are in the bucket (uploads done, not planned)."""
        with self._plan_lock:
            self._edges.update(sizes)
            while len(self._edges) > 4096:
                self._edges.discard(min(self._edges))


def _content(stored: StoredObject) -> bytes:
    """What an object holds once decompressed (gzip entry bundles)."""
    if stored.content_encoding.lower() == "gzip" or stored.body[:2] == b"\x1f\x8b":
        try:
            return tiles.gunzip_bundle(stored.body)
        except MalformedTileError:
            return stored.body
    return stored.body


def _size(checkpoint: PublishedCheckpoint) -> int:
    return checkpoint.size
