"""Primary mode: the bucket is where the log lives; an append is acknowledged only once its
entry bundle, the tiles and a checkpoint covering it are stored there.

One commit of a new tree, after the checkpoint is signed and before anyone sees it: two round
trips, ``stage`` then ``swap`` (``commit`` does both in a row). The log pipelines them
(``ledger.log.publisher``): the next checkpoint's ``stage`` may run while this one's ``swap``
is in flight; the swaps come strictly in signing order.

1. **stage**: every tile and entry bundle the new tree has that the previous one did not, and its
   signed note as ``checkpoints/<size>``, go into one create-only object
   ``.ledger/staging/<size>-<root hex>-<previous size>`` (a 412 there is the same object: the
   name fixes both trees, so its content is the same; a tree staged over a checkpoint whose
   swap then failed is staged again under another name, never reused). Nothing here reads or
   changes the lock;
2. **swap**: ``.ledger/lock`` (readers never fetch it) is replaced by ``If-Match`` on the ETag
   this writer last wrote (no re-read), with the signed note, the staging object's name, the
   names of the staging objects swapped in but not yet known to be copied (``pending``, oldest
   first) and this writer's id. A staged tree whose ``previous`` is not the locked size (an
   earlier swap failed) is refused here.

After step 2 the checkpoint is durable in the bucket (the staging object holds its tiles and a
writer that takes over applies it), so the caller may serve it, send it to witnesses, put it in
receipts, write it to the local mark and acknowledge the appends it covers; a checkpoint whose
swap failed never leaves the process.

3. **copy**, on a background thread (``_Copier``), in swap order: the staged objects to their
   public C2SP paths, create-only (a 412 with other content is ``ObjectConflictError``), then
   ``checkpoints/<size>``, then the public ``checkpoint`` last (compare-and-swap, never
   backwards): the public checkpoint is never ahead of its tiles. A pass starts at most every
   ``COPY_EVERY_S`` and copies every swapped-in tree waiting, as the mirror does: the full tiles
   of all, the partial tiles of the newest only (an older tree's right edge is superseded: a
   reader holding its note reads the newer partial or full tile and cuts it), every
   ``checkpoints/<size>``, and one public checkpoint write for the lot. A failed copy is
   retried with ``ledger.core.backoff``; it never blocks a commit (only a backlog of
   ``MAX_PENDING`` trees does) and never affects safety: the staging objects stay, listed in the
   lock, until the public checkpoint covers them.

A 412 on the lock means "re-read the bucket", never a blind retry: the lock as stored is read
back; this writer's own body there (a retried PUT that landed) is success, anything else is
``WriterFencedError`` (another writer took the lock: stop sequencing).

A writer that starts (``open``) or takes over (``acquire``) first applies the locked checkpoint's
pending staging objects in order (step 3 again, idempotent), so a writer killed between swap and
copy leaves nothing unpublished for long, and no later swap can strand an earlier staged tree.

The lease. The lock object's ETag changes on every commit and on every ``renew`` (a swap of the
same state; ``lease_s / 3`` apart). A standby (``LockWatcher``) judges a lease lapsed when the ETag
it sees has not changed for ``lease_s`` **by its own monotonic clock**: no wall clock of either
machine is compared, so a skewed clock changes nothing. Takeover bound: the active writer's last
renewal + ``lease_s`` + one poll interval. The lease only decides *when* a standby tries; safety
comes from the swap: a stale writer that wakes fails its next conditional write and stops before
acknowledging anything.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from ledger.core import tiles
from ledger.core.backoff import Backoff
from ledger.core.checkpoint import Checkpoint
from ledger.core.errors import (
    FormatError,
    LedgerError,
    ObjectConflictError,
    StorageError,
    StoreUnreachableError,
    WriterActiveError,
    WriterFencedError,
)
from ledger.core.note import SignedNote
from ledger.core.types import PublishedCheckpoint
from ledger.objstore.bucket import Bucket
from ledger.objstore.publisher import CHECKPOINT_CACHE, TILE_CACHE, BucketPublisher
from ledger.store.contract import MemoryStore
from ledger.store.tile_reader import TileReader

__all__ = [
    "COPY_EVERY_S",
    "LOCK_KEY",
    "MAX_PENDING",
    "STAGING_PREFIX",
    "LeaseKeeper",
    "LockState",
    "LockWatcher",
    "PrimaryBucket",
    "StagedTree",
    "decode_staging",
    "encode_staging",
    "public_checkpoint",
    "read_leaves",
    "staging_name",
    "staging_size",
]

_log = logging.getLogger("ledger.objstore.primary")
LOCK_KEY = ".ledger/lock"
STAGING_PREFIX = ".ledger/staging/"
_MAGIC = b"ledger-staging/v1\n"
_PRIVATE = {"Content-Type": "application/octet-stream", "Cache-Control": "no-store"}
_TILE = {"Content-Type": "application/octet-stream", "Cache-Control": TILE_CACHE}
_BUNDLE = {**_TILE, "Content-Encoding": "gzip"}
_LATEST = {"Content-Type": "text/plain; charset=utf-8", "Cache-Control": CHECKPOINT_CACHE}

TileSource = Callable[[tiles.TileID, int], bytes]
# Swapped-in trees whose public copy may lag before a commit waits for the copier.
MAX_PENDING = 64
COPY_EVERY_S = 0.2  # one public copy pass at most this often: trees coalesce under load
_BACKLOG_WAIT_S = 10.0
_COPY_BACKOFF = Backoff(initial=0.05, maximum=2.0)


def staging_size(name: str) -> int:
    """The tree size a staging object's name fixes (0 when the name is not one)."""
    head = name[len(STAGING_PREFIX) :].partition("-")[0] if name.startswith(STAGING_PREFIX) else ""
    return int(head) if head.isdigit() else 0


def staging_name(size: int, root_hash: bytes, previous: int) -> str:
    """The staging object of the tree of ``size`` with ``root_hash``, holding what it has that
    the tree of ``previous`` had not (its content is fixed by the name: a 412 on it is the
    same object; with checkpoints signed ahead of their swaps, one staged over a tree whose
    swap then failed is never reused for another ``previous``)."""
    return f"{STAGING_PREFIX}{size}-{root_hash.hex()}-{previous}"


def encode_staging(objects: list[tuple[str, bytes]]) -> bytes:
    """One staging object: a header line (JSON: each path and length), then the bodies."""
    header = json.dumps([[path, len(body)] for path, body in objects]).encode()
    return _MAGIC + header + b"\n" + b"".join(body for _, body in objects)


def decode_staging(data: bytes) -> list[tuple[str, bytes]]:
    """The (path, body) pairs of a staging object; FormatError when it is damaged."""
    if not data.startswith(_MAGIC):
        raise FormatError("staging object: not a ledger staging object")
    header, sep, rest = data[len(_MAGIC) :].partition(b"\n")
    try:
        listed = json.loads(header) if sep else None
    except ValueError:
        listed = None
    if not isinstance(listed, list):
        raise FormatError("staging object: damaged header")
    out, at = [], 0
    for item in listed:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise FormatError("staging object: damaged header")
        path, length = item[0], int(item[1])
        if at + length > len(rest):
            raise FormatError("staging object: truncated")
        out.append((path, rest[at : at + length]))
        at += length
    if at != len(rest):
        raise FormatError("staging object: trailing bytes")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LockState:
    """What ``.ledger/lock`` holds: the locked checkpoint (signed note), its staging object and
    the writer that holds the lock; ``term`` counts renewals (so each renewal changes the body);
    ``pending`` names the staging objects swapped in whose public copy may not be done, oldest
    first (a lock without it: just ``staging``)."""

    writer: str
    note: str
    size: int
    root_hash: bytes
    staging: str
    term: int = 0
    pending: tuple[str, ...] = ()

    def encode(self) -> bytes:
        return json.dumps(
            {"writer": self.writer, "note": self.note, "size": self.size,
             "root": self.root_hash.hex(), "staging": self.staging, "term": self.term,
             "pending": list(self.pending)},
            sort_keys=True,
        ).encode()  # fmt: skip

    @classmethod
    def decode(cls, data: bytes) -> LockState:
        try:
            raw = json.loads(data)
            return cls(
                writer=str(raw["writer"]),
                note=str(raw["note"]),
                size=int(raw["size"]),
                root_hash=bytes.fromhex(str(raw["root"])),
                staging=str(raw["staging"]),
                term=int(raw.get("term", 0)),
                pending=tuple(str(name) for name in raw.get("pending", [])),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise FormatError(f"{LOCK_KEY}: damaged ({exc})") from None

    @property
    def waiting(self) -> tuple[str, ...]:
        """The staging objects whose public copy may not be done, oldest first."""
        return self.pending or ((self.staging,) if self.staging else ())

    @property
    def checkpoint(self) -> PublishedCheckpoint:
        body = Checkpoint.from_text(SignedNote.from_text(self.note).text)
        return PublishedCheckpoint(
            origin=body.origin, size=body.size, root_hash=body.root_hash, note=self.note
        )


class PrimaryBucket:
    """The bucket as the log's primary store, for one writer (module docstring)."""

    def __init__(
        self,
        *,
        bucket: Bucket,
        tile_source: TileSource,
        origin: str,
        writer: str,
        threads: int = 8,
    ) -> None:
        self.bucket = bucket
        self._tiles = tile_source
        self._origin = origin
        self.writer = writer
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="ledger-primary")
        self._swapping = threading.Lock()  # commit and renew (the lease thread) never overlap
        self._etag: str | None = None  # of the lock as this writer last wrote or read it
        self._unsure: list[bytes] = []  # lock bodies whose swap got no answer (may have landed)
        self.state: LockState | None = None
        self.fenced: WriterFencedError | None = None
        # Copy (create-only with read-back) and checkpoint compare-and-swap: the publisher's.
        # (It never reads a local tile here: an empty reader.)
        empty = TileReader(store=MemoryStore(), published=lambda: None)
        self._public = BucketPublisher(bucket=bucket, reader=empty, origin=origin)
        self._copier = _Copier(self)

    def close(self, drain_s: float = 5.0) -> None:
        """Stop: the public copies still queued get up to ``drain_s`` (the rest stay listed in
        the lock for the next writer), then the threads end."""
        self._copier.stop(drain_s)
        self._pool.shutdown(wait=True)
        self._public.close()

    @property
    def published_size(self) -> int:
        """The size of the newest tree this process saw fully copied to the public paths."""
        return self._copier.published

    def wait_published(self, size: int, timeout: float = 30.0) -> bool:
        """Wait until the public copy reaches ``size``; whether it did in time."""
        return self._copier.wait(size, timeout)

    # --- reading the lock -----------------------------------------------------------------

    def read_lock(self) -> LockState | None:
        """The lock as stored (remembering its ETag); None when the bucket has none yet."""
        stored = self.bucket.get(LOCK_KEY)
        if stored is None:
            self._etag = None
            return None
        state = LockState.decode(stored.body)
        if state.size and state.checkpoint.origin != self._origin:
            raise ObjectConflictError(
                f"{self.bucket.address.url}{LOCK_KEY} locks a checkpoint of "
                f"{state.checkpoint.origin!r}, not {self._origin!r}"
            )
        self._etag = stored.etag
        return state

    def open(self) -> LockState | None:
        """Start: require a conforming store, read the lock, apply its staging object. Raises
        ``WriterActiveError`` when the lock names another writer (take over with ``acquire``)."""
        self._public.require_conforming()
        state = self.read_lock()
        if state is not None and state.writer != self.writer:
            raise WriterActiveError(
                f"{self.bucket.address.url}{LOCK_KEY} is held by writer {state.writer!r}"
            )
        if state is not None:
            self.apply(state)
        self.state = state
        return state

    def acquire(self) -> LockState | None:
        """Take the lock (a start, or a standby whose watcher saw the lease lapse): a swap that
        names this writer, then the locked staging object applied. ``WriterFencedError`` when
        another write came first."""
        self._public.require_conforming()
        state = self.read_lock()
        if state is None:
            mine = LockState(writer=self.writer, note="", size=0, root_hash=b"", staging="")
            if not self.bucket.create(LOCK_KEY, mine.encode(), _PRIVATE):
                raise self._fence("another writer created the lock first")
            self._etag = self._read_etag(mine)
            self.state = mine
            return mine
        self.apply(state)
        mine = replace(state, writer=self.writer, term=state.term + 1)
        self._swap(mine)
        _log.warning(
            "took the lock of %s at size %d from writer %r",
            self.bucket.address.url,
            state.size,
            state.writer,
        )
        return mine

    # --- committing ------------------------------------------------------------------------

    def commit(self, previous: int, published: PublishedCheckpoint) -> None:
        """Stage, swap, copy (module docstring) for the signed ``published`` whose tree extends
        the locked one of size ``previous``. After it returns the checkpoint may leave the
        process; any exception means it must not."""
        self.swap(self.stage(previous, published))

    def stage(self, previous: int, published: PublishedCheckpoint) -> StagedTree:
        """Step 1 alone: the staging object of ``published`` over the tree of ``previous``.
        It may run while the previous tree's ``swap`` is in flight (nothing here reads or
        changes the lock); the swap then says whether it is used."""
        if self.fenced is not None:
            raise self.fenced
        self._copier.check()  # another history found while copying: stop committing
        jobs = tiles.new_tiles(previous, published.size)
        # Read here, not on the pool: local reads holding the GIL gain nothing from threads and
        # each hand-off costs CPU.
        objects = [(t.path, self._tiles(t, published.size)) for t in jobs]
        objects.append((f"checkpoints/{published.size}", published.note.encode()))
        name = staging_name(published.size, published.root_hash, previous)
        self.bucket.create(name, encode_staging(objects), _PRIVATE)
        return StagedTree(previous=previous, published=published, name=name, objects=objects)

    def swap(self, staged: object) -> None:
        """Step 2 for a ``stage`` result, strictly in signing order: the lock swap (module
        docstring), then the public copy is queued. After it returns the checkpoint may leave
        the process; any exception means it must not."""
        if not isinstance(staged, StagedTree):
            raise TypeError(f"primary mode: swap of {type(staged).__name__}, want StagedTree")
        with self._swapping:
            self._swap_staged(staged)

    def _swap_staged(self, staged: StagedTree) -> None:
        previous, published = staged.previous, staged.published
        if self.fenced is not None:
            raise self.fenced
        # An earlier commit of ours may have landed without its answer (a stalled store): the
        # lock is then ahead of ``previous``; the tiles still go from ``previous``.
        landed = (
            self.state is not None
            and self.state.writer == self.writer
            and previous < self.state.size <= published.size
        )
        if self.state is None or (self.state.size != previous and not landed):
            raise StorageError(
                f"primary mode: commit of size {published.size} over {previous}, but the lock "
                f"is at {None if self.state is None else self.state.size}"
            )
        self._copier.check()
        self._copier.wait_backlog(MAX_PENDING, _BACKLOG_WAIT_S)
        done = self._copier.published
        mine = LockState(
            writer=self.writer,
            note=published.note,
            size=published.size,
            root_hash=published.root_hash,
            staging=staged.name,
            term=self.state.term + 1,
            pending=(*(n for n in self.state.waiting if staging_size(n) > done), staged.name),
        )
        self._swap(mine)
        # Swapped in: durable in the bucket. The public copy follows on the copier's thread.
        self._copier.submit(mine.pending, {staged.name: staged.objects}, mine.note)

    def renew(self) -> None:
        """Renew the lease: swap the same state with the next term."""
        with self._swapping:
            if self.fenced is not None:
                raise self.fenced
            if self.state is None:
                raise StorageError("primary mode: renew before the lock was taken")
            self._swap(replace(self.state, term=self.state.term + 1))

    def _swap(self, mine: LockState) -> None:
        if self._etag is None:
            raise self._fence("the lock vanished")
        body = mine.encode()
        try:
            etag = self.bucket.swap(LOCK_KEY, body, self._etag, _PRIVATE)
        except LedgerError:
            self._unsure.append(body)  # it may still land (a stalled store answers later)
            del self._unsure[:-8]
            raise
        if etag is None:
            # 412/409: re-read the bucket, never a blind retry.
            stored = self.bucket.get(LOCK_KEY)
            if stored is not None and stored.body in self._unsure:
                # An earlier swap of ours whose answer was lost landed after all: adopt it
                # (this writer signed it), then try once more against what is stored now.
                self._etag, self.state = stored.etag, LockState.decode(stored.body)
                self._unsure.clear()
                if self.state.size > mine.size:
                    raise StorageError("primary mode: the lock moved past this commit")
                pending = sorted({*self.state.waiting, *mine.pending}, key=staging_size)
                mine = replace(mine, term=self.state.term + 1, pending=tuple(pending))
                body = mine.encode()
                etag = self.bucket.swap(LOCK_KEY, body, self._etag, _PRIVATE)
                stored = self.bucket.get(LOCK_KEY) if etag is None else None
            if etag is None and (stored is None or stored.body != body):
                holder = "nobody" if stored is None else LockState.decode(stored.body).writer
                raise self._fence(f"the lock changed under this writer (now held by {holder!r})")
            if etag is None and stored is not None:
                etag = stored.etag  # our own PUT landed on a retried request
        assert etag is not None
        self._etag = etag
        self.state = mine
        self._unsure.clear()

    def _read_etag(self, mine: LockState) -> str:
        stored = self.bucket.get(LOCK_KEY)
        if stored is None or stored.body != mine.encode():
            raise self._fence("the lock changed right after it was created")
        return stored.etag

    def _fence(self, why: str) -> WriterFencedError:
        self.fenced = WriterFencedError(
            f"{self.bucket.address.url}{LOCK_KEY}: {why}; this writer stops sequencing "
            "(another writer serves the log)"
        )
        _log.error("FENCED: %s", self.fenced)
        return self.fenced

    # --- copying ---------------------------------------------------------------------------

    def apply(self, state: LockState) -> None:
        """Copy the locked checkpoint's pending staging objects to the public paths, in order
        (idempotent); on return the public checkpoint covers the locked one."""
        if not state.size:
            return
        public = self.bucket.get("checkpoint")
        at = 0 if public is None else _note_size(public.body)
        names = [n for n in state.waiting if staging_size(n) > at]
        if names:
            for name in names:  # one tree at a time: each keeps its partial tiles
                self._copy_public([_Staged(name, staging_size(name), None)], state.note)
        self._copier.published = max(self._copier.published, at, state.size)

    def _read_staged(self, staged: _Staged) -> list[tuple[str, bytes]] | None:
        """The staged objects of ``staged``; None when the public checkpoint covers it already
        (its staging object may then be gone)."""
        if staged.objects is not None:
            return staged.objects
        stored = self.bucket.get(staged.name)
        if stored is None:
            public = self.bucket.get("checkpoint")
            if public is not None and _note_size(public.body) >= staged.size:
                return None
            raise StorageError(
                f"{self.bucket.address.url}{staged.name}: a locked checkpoint's staging "
                "object is missing"
            )
        return decode_staging(stored.body)

    def _copy_public(self, batch: Sequence[_Staged], lock_note: str) -> None:
        """One pass of step 3 for ``batch`` (consecutive swapped-in trees, oldest first): their
        tiles, their ``checkpoints/<size>``, then the public checkpoint of the newest."""
        newest = batch[-1].size
        objects: dict[str, bytes] = {}
        notes: dict[int, str] = {}
        for staged in batch:
            items = self._read_staged(staged)
            for path, body in items or ():
                if path.startswith("checkpoints/"):
                    notes[staged.size] = body.decode()
                elif staged.size == newest or _in_tree(path, newest):
                    objects[path] = body  # an older tree's partial tiles: superseded
        if newest not in notes and _checkpoint_of(lock_note).size == newest:
            notes[newest] = lock_note  # a staging object from before notes were staged

        def put(item: tuple[str, bytes]) -> int:
            path, body = item
            if path.startswith("tile/entries/"):
                return self._public._create(path, tiles.gzip_bundle(body), _BUNDLE, body)
            return self._public._create(path, body, _TILE, body)

        list(self._pool.map(put, objects.items()))
        checkpoints = [_checkpoint_of(note) for _, note in sorted(notes.items())]
        list(self._pool.map(self._public.publish_note, checkpoints))
        if newest in notes:  # else the public checkpoint covered the newest already
            self._copier.put_public_checkpoint(notes[newest], newest)


def _in_tree(path: str, size: int) -> bool:
    """Whether the tile at ``path`` belongs to the tree of ``size``: a full tile always does,
    a partial one only when it is that tree's right edge."""
    tile = tiles.parse_tile_path(path)
    return tile.full or tiles.tile_width(tile.level, tile.index, size) == tile.width


def _checkpoint_of(note: str) -> PublishedCheckpoint:
    body = Checkpoint.from_text(SignedNote.from_text(note).text)
    return PublishedCheckpoint(
        origin=body.origin, size=body.size, root_hash=body.root_hash, note=note
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class StagedTree:
    """A staging object written (``PrimaryBucket.stage``), waiting for its swap."""

    previous: int
    published: PublishedCheckpoint
    name: str
    objects: list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class _Staged:
    """A swapped-in tree waiting for its public copy: its staging object's name, its size and
    the staged objects (None: read them back from the staging object)."""

    name: str
    size: int
    objects: list[tuple[str, bytes]] | None


class _Copier:
    """Step 3 on a thread of its own, in swap order (module docstring)."""

    def __init__(self, primary: PrimaryBucket) -> None:
        self._primary = primary
        self._queue: deque[_Staged] = deque()
        self._lock_note = ""
        self._cond = threading.Condition()
        self._stopping = False
        self._deadline = 0.0
        self._thread: threading.Thread | None = None
        self.published = 0  # the newest size whose public copy is done
        self.broken: LedgerError | None = None  # a conflict (another history) or a bug
        self._etag: str | None = None  # of the public checkpoint as this process wrote it
        self._garbage: list[str] = []  # staging objects the public checkpoint covers

    def submit(self, pending: Sequence[str], objects: dict[str, list[tuple[str, bytes]]],
               lock_note: str) -> None:  # fmt: skip
        """Queue the trees of ``pending`` not copied or queued yet (objects in memory when in
        ``objects``, else read back from their staging objects)."""
        with self._cond:
            queued = {staged.name for staged in self._queue}
            for name in pending:
                size = staging_size(name)
                if size > self.published and name not in queued:
                    self._queue.append(_Staged(name, size, objects.get(name)))
            self._lock_note = lock_note
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ledger-public-copy", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def check(self) -> None:
        if self.broken is not None:
            raise self.broken

    def wait_backlog(self, limit: int, timeout: float) -> None:
        """Block while more than ``limit`` trees wait; ``StoreUnreachableError`` after
        ``timeout``."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._queue) < limit, timeout):
                raise StoreUnreachableError(
                    f"{self._primary.bucket.address.url}: {len(self._queue)} checkpoints wait "
                    "for their public copy; the bucket does not keep up"
                )

    def wait(self, size: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.published >= size, timeout)

    def stop(self, drain_s: float) -> None:
        with self._cond:
            self._stopping = True
            self._deadline = time.monotonic() + drain_s
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=drain_s + 10)

    def _run(self) -> None:
        attempt = 0
        due = 0.0
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue) or self._stopping)
                # Let more trees join this pass (not while stopping: drain at once).
                self._cond.wait_for(lambda: self._stopping, due - time.monotonic())
                if not self._queue or (self._stopping and time.monotonic() > self._deadline):
                    if self._queue:
                        _log.warning(
                            "stopping with %d checkpoints not copied to the public paths (the "
                            "next writer copies them from the staging objects)",
                            len(self._queue),
                        )
                    break
                batch = list(self._queue)
                note = self._lock_note
            try:
                self._primary._copy_public(batch, note)
            except ObjectConflictError as exc:
                _log.error("public copy: %s", exc)
                with self._cond:
                    self.broken = exc
                    self._queue.clear()
                    self._cond.notify_all()
                return
            except LedgerError as exc:
                wait = _COPY_BACKOFF.delay(attempt)
                attempt += 1
                _log.warning("public copy up to size %d: %s (retry in %.2f s)",
                             batch[-1].size, exc, wait)  # fmt: skip
                with self._cond:
                    self._cond.wait_for(
                        lambda: self._stopping and time.monotonic() > self._deadline, wait
                    )
                continue
            except Exception as exc:  # a bug: stop committing loudly rather than pile up
                _log.exception("public copy up to size %d failed", batch[-1].size)
                with self._cond:
                    self.broken = StorageError(f"primary mode: the public copy failed ({exc})")
                    self._queue.clear()
                    self._cond.notify_all()
                return
            attempt = 0
            due = time.monotonic() + COPY_EVERY_S
            with self._cond:
                for _ in batch:
                    self._queue.popleft()
                self.published = max(self.published, batch[-1].size)
                self._cond.notify_all()
            self._collect([staged.name for staged in batch])
        self._collect([])  # stopping: the rest of the garbage

    def put_public_checkpoint(self, note: str, size: int) -> None:
        """The public ``checkpoint`` to ``note`` by compare-and-swap, never backwards: the ETag
        this process last wrote first, re-read only when the swap fails."""
        bucket, body = self._primary.bucket, note.encode()
        etag = self._etag
        for _ in range(5):
            if etag is not None:
                fresh = bucket.swap("checkpoint", body, etag, _LATEST)
                if fresh is not None:
                    self._etag = fresh
                    return
            stored = bucket.get("checkpoint")
            if stored is None:
                if bucket.create("checkpoint", body, _LATEST):
                    self._etag = self._etag_of(body)
                    return
                continue
            if _note_size(stored.body) >= size:
                self._etag = None
                return  # never backwards (a later writer got there first)
            etag = stored.etag
        raise StorageError(f"{bucket.address.url}checkpoint: lost the swap five times")

    def _etag_of(self, body: bytes) -> str | None:
        stored = self._primary.bucket.get("checkpoint")
        return stored.etag if stored is not None and stored.body == body else None

    def _collect(self, names: list[str]) -> None:
        """Delete staging objects the public checkpoint now covers, a few at a time (garbage
        only: a writer that applies the lock skips trees the public checkpoint covers)."""
        self._garbage += names
        if len(self._garbage) < 16 and not self._stopping:
            return
        garbage, self._garbage = self._garbage, []
        if not garbage:
            return
        try:
            self._primary.bucket.delete_many(garbage)
        except LedgerError as exc:
            _log.warning("could not delete %d staging objects: %s", len(garbage), exc)


def _note_size(body: bytes) -> int:
    lines = body.split(b"\n", 2)
    return int(lines[1]) if len(lines) > 2 and lines[1].isdigit() else 0


def read_leaves(bucket: Bucket, start: int, size: int) -> list[bytes]:
    """Leaves ``start..size-1`` from the public entry bundles of the tree of ``size`` (a
    standby following the bucket; a writer rebuilding its local cache)."""
    out: list[bytes] = []
    for index in range(start // tiles.TILE_WIDTH, -(-size // tiles.TILE_WIDTH)):
        width = tiles.tile_width(0, index, size)
        tile = tiles.TileID(level=0, index=index, width=width, entries=True)
        stored = bucket.get(tile.path)
        if stored is None:
            raise StorageError(f"{bucket.address.url}{tile.path}: missing below the checkpoint")
        data = stored.body
        if stored.content_encoding.lower() == "gzip" or data[:2] == b"\x1f\x8b":
            data = tiles.gunzip_bundle(data)
        leaves = tiles.decode_entry_bundle(data, width)
        base = index * tiles.TILE_WIDTH
        out += leaves[max(0, start - base) :]
    return out


def public_checkpoint(bucket: Bucket) -> str | None:
    """The bucket's public ``checkpoint`` note (None: none yet)."""
    stored = bucket.get("checkpoint")
    return None if stored is None else stored.body.decode("utf-8", "replace")


class LeaseKeeper:
    """The active writer's lease: ``renew`` every ``lease_s / 3`` on a thread of its own;
    ``on_fenced`` is told once when a renewal finds another writer (the caller halts the log),
    ``on_renewed`` after each renewal the store answered (the bucket is reachable).
    A renewal the store does not answer is retried at the next tick: the lease may lapse, and
    then the next commit's swap is what fails."""

    def __init__(
        self,
        primary: PrimaryBucket,
        *,
        lease_s: float,
        on_fenced: Callable[[WriterFencedError], None],
        on_renewed: Callable[[], None] = lambda: None,
    ) -> None:
        self._primary = primary
        self._every = max(0.05, lease_s / 3)
        self._on_fenced = on_fenced
        self._on_renewed = on_renewed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledger-lease", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._primary.renew()
            except WriterFencedError as exc:
                self._on_fenced(exc)
                return
            except LedgerError as exc:
                _log.warning("lease renewal: %s", exc)
                continue
            self._on_renewed()


class LockWatcher:
    """A standby's view of the lock: the lease lapsed when the lock's ETag has not changed for
    ``lease_s`` by this process's monotonic clock (module docstring)."""

    def __init__(
        self, bucket: Bucket, *, lease_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._bucket = bucket
        self._lease_s = lease_s
        self._clock = clock
        self._etag: str | None = None
        self._since = clock()
        self.state: LockState | None = None

    def poll(self) -> bool:
        """Read the lock; True when the lease has lapsed (or there is no lock at all)."""
        stored = self._bucket.get(LOCK_KEY)
        now = self._clock()
        if stored is None:
            self.state = None
            return True
        if stored.etag != self._etag:
            self._etag, self._since = stored.etag, now
            self.state = LockState.decode(stored.body)
            return False
        return now - self._since >= self._lease_s

    @property
    def lease_s(self) -> float:
        return self._lease_s
