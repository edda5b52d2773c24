"""The log facade: sequencing, integration and publishing composed over one store.

Synchronous and single-writer (``append`` and ``publish`` hold one lock); reads run concurrently.
Recovery on open: the tree state comes from the store, and the newest stored checkpoint must
match the durable tree at its size (recomputed from stored nodes), or the log refuses to open;
so must the published high-water mark kept outside the data dir (``ledger.log.recovery``).
RFC 9162 §2.1.3/§2.1.4 proofs are served for any size up to the latest published checkpoint,
with one batched node read per request. Before it signs and before it serves, the log checks
itself against what it signed (``ledger.log.selfcheck``): a failed check is ``DataLossError``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import NoReturn

from ledger.core import merkle
from ledger.core.checkpoint import NoteSignature, SignedNote, Signer, add_signatures
from ledger.core.errors import (
    DataLossError,
    InvalidArgumentError,
    LogFailedError,
    NotFoundError,
    NotYetPublishedError,
    OutOfRangeError,
    ReadOnlyError,
    StoreUnreachableError,
    WriterFencedError,
)
from ledger.core.limits import HASH_SIZE, MAX_ANCHORED_SIZES, MAX_GROUP, MAX_PAGE
from ledger.core.packed import PackedResult, check_packed
from ledger.core.types import (
    Anchor,
    AppendItem,
    AppendResult,
    ConsistencyProof,
    Entry,
    InclusionProof,
    PublishedCheckpoint,
    ReceiptBundle,
    decode_leaf,
)
from ledger.log import selfcheck
from ledger.log.clock import BoundedClock
from ledger.log.highwater import AckedSize, HighWaterMark, MarkState
from ledger.log.integrator import Integrator
from ledger.log.publisher import Gate, Publisher, Signed
from ledger.log.recovery import check_against_mark, leave_read_only
from ledger.log.sequencer import PackedSequenced, Sequencer, validate_items
from ledger.store.contract import Store, TreeState

__all__ = ["Log", "wall_clock_ms"]


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch (the default clock)."""
    return time.time_ns() // 1_000_000


class Log:
    """A transparency log over an injected store, signer, origin and clock."""

    def __init__(
        self,
        *,
        store: Store,
        signer: Signer,
        origin: str,
        clock_ms: Callable[[], int] | None = None,
        max_batch: int = MAX_GROUP,
        mark: HighWaterMark | None = None,
        acked: AckedSize | None = None,
        gate: Gate | None = None,
    ) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._publishing = threading.Lock()  # step 3 of publishing: one at a time, in order
        # The mark and a swapped checkpoint's store (step 3) take this one, not the writer's
        # lock, so they never wait behind a group commit; always taken last.
        self._marking = threading.Lock()
        self._cosign_lock = threading.Lock()
        self._max_batch = max_batch
        self._failure: Exception | None = None
        self.failure_listeners: list[Callable[[Exception], None]] = []
        state = store.load_state()
        self._integrator = Integrator(state.compact)
        self._sequencer = Sequencer(
            store=store,
            clock_ms=clock_ms or BoundedClock(),
            next_index=state.size,
            last_timestamp_ms=state.last_timestamp_ms,
            check_leaves=self._check_leaves,
        )
        self._publisher = Publisher(
            store=store,
            signer=signer,
            origin=origin,
            mark=mark,
            check=self._check_extends,
            gate=gate,
        )
        self._roots = selfcheck.RootCheck(store.get_nodes)
        self._check_recovered(state)
        self._mark = mark
        self._acked = acked
        self._restored: str | None = None  # why appends are refused after a forced restore
        self._unconfirmed: str | None = None  # read-only until evidence shows it is not behind
        self._halted: str | None = None  # evidence that the tree is behind or forked
        self.halt_listeners: list[Callable[[str], None]] = []
        if mark is not None:
            if mark.read() is None and (state.size > 0 or self._publisher.latest is not None):
                self._unconfirmed = (
                    f"the data dir holds {state.size} entries but there is no high-water mark "
                    f"at {mark.path}: the log is read-only until a witness quorum or a "
                    "verified copy of its checkpoint shows the tree is not behind, or until "
                    "`ledger restore accept`"
                )
            else:
                self._restored = check_against_mark(self, mark, self._publisher)
        if acked is not None and self._restored is None:
            self._check_acked(acked, state.size)

    # --- read-only states --------------------------------------------------------------------

    @property
    def read_only(self) -> str | None:
        """Why appends and signing are refused (None: read-write)."""
        return self._halted or self._restored or self._unconfirmed

    @property
    def unconfirmed(self) -> str | None:
        """Why the log waits for evidence that its tree is not behind (None: it does not)."""
        return self._unconfirmed

    @property
    def halted(self) -> str | None:
        """The evidence the log halted on (None: not halted)."""
        return self._halted

    def hold(self, reason: str) -> None:
        """Refuse appends and signing until ``confirm`` (a start that evidence did not clear)."""
        with self._lock:
            if self._unconfirmed is None:
                self._unconfirmed = reason

    def confirm(self, why: str) -> bool:
        """Lift an unconfirmed hold (recording a mark when there is none); True when lifted."""
        with self._lock, self._marking:
            if self._unconfirmed is None:
                return False
            if self._mark is not None and self._mark.read() is None:
                latest = self._publisher.latest
                if latest is not None:
                    self._mark.write(MarkState(checkpoint=latest))
            self._unconfirmed = None
            return True

    def halt(self, reason: str, checkpoint: PublishedCheckpoint | None = None) -> bool:
        """Stop signing and appending on evidence (``ledger.log.evidence``); True the first
        time. A larger checkpoint this log signed goes to the high-water mark first, so a
        restart refuses too."""
        with self._lock, self._marking:
            if self._halted is not None:
                return False
            self._halted = reason
            if checkpoint is not None and self._mark is not None:
                state = self._mark.read()
                if state is None or state.checkpoint.size < checkpoint.size:
                    self._mark.write(MarkState(checkpoint=checkpoint))
        for listener in self.halt_listeners:
            listener(reason)
        return True

    def _check_acked(self, acked: AckedSize, size: int) -> None:
        recorded = acked.read()
        if recorded is not None and size < recorded:
            raise DataLossError(
                f"entries {size}..{recorded - 1} acknowledged but missing: the acknowledged "
                f"size {acked.path} says {recorded}, the tree in the data dir has {size} (the "
                "storage lost synced WAL writes). The log refuses, so that no acknowledged "
                "index is given to another record. Restore a copy holding them, or accept the "
                "loss with `ledger restore accept`"
            )

    # --- writes ----------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Size of the durable (integrated) tree."""
        return self._integrator.size

    @property
    def origin(self) -> str:
        """The log's origin."""
        return self._publisher.origin

    def append(self, items: Sequence[AppendItem]) -> list[AppendResult]:
        """Sequence, integrate and durably commit one batch; return a result per item.

        Items are validated here unless they come as ``ValidItems`` (checked once already).
        A batch without metadata takes the packed path (``append_digests``: the same results).
        """
        batch = validate_items(items, self._max_batch)
        if not any(item.metadata for item in batch):
            return self.append_digests(b"".join([item.record_digest for item in batch])).results()
        with self._lock:
            self._raise_if_failed()
            if self.read_only is not None:
                raise ReadOnlyError(self.read_only)
            sequenced = self._sequencer.sequence(batch)
            if not sequenced.entries:
                return sequenced.results
            nodes, compact = self._integrator.integrate(sequenced.leaf_hashes)
            state = TreeState(compact=compact, last_timestamp_ms=sequenced.last_timestamp_ms)
            self._commit_group(
                lambda: self._store.commit(sequenced.batch(nodes, state)), sequenced.next_index
            )
            self._sequencer.adopt(sequenced)
            self._integrator.adopt(compact)
            return sequenced.results

    def _commit_group(self, commit: Callable[[], None], next_index: int) -> None:
        """One group commit: ``commit`` (the store's synced write), then the acknowledged size
        synced before any append of the group is acked; any failure stops the log."""
        try:
            commit()
            if self._acked is not None:
                self._acked.write(next_index)
        except Exception as exc:
            self._set_failure(exc)
            raise LogFailedError(
                f"the group commit failed ({type(exc).__name__}: {exc}); the log stops "
                "appending. Nothing acknowledged is lost: fix the cause (for example free "
                "disk space) and restart the server"
            ) from exc

    def append_packed(self, digests: bytes) -> PackedResult:
        """``append`` for N x 32 bytes of digests without metadata (``ledger.core.packed``):
        the same sequencing, one durable commit, a packed result, over buffers on the selected
        core (``append_digests``)."""
        out = self.append_digests(digests)
        return PackedResult(
            count=out.count,
            first_index=out.first_index,
            timestamp_ms=out.timestamp_ms if out.new_entries else 0,
            dup_positions=out.dup_positions,
            dup_indexes=out.dup_indexes,
            dup_timestamps_ms=out.dup_timestamps_ms,
            dup_leaf_hashes=out.dup_leaf_hashes,
        )

    def publish(self) -> PublishedCheckpoint:
        """Sign and store a checkpoint for the durable tree (no-op when nothing is new): the
        three steps of ``ledger.log.publisher`` in a row."""
        signed = self.prepare_publish()
        if signed is None:
            latest = self._publisher.latest
            if latest is None:
                raise NotYetPublishedError("the first checkpoint is still on its way")
            return latest
        return self.complete_publish(self.stage_publish(signed))

    def prepare_publish(self) -> Signed | None:
        """Step 1 of ``publish``: sign a checkpoint of the durable tree, extending the newest
        signed one (None: nothing new, or read-only with a published checkpoint). Nobody sees
        it before ``complete_publish`` returns it."""
        with self._lock:
            self._raise_if_failed()
            if self.read_only is not None:  # never sign while behind the published mark
                if self._publisher.latest is None:
                    raise ReadOnlyError(self.read_only)
                return None
            try:
                return self._publisher.sign(self._integrator.size, self._integrator.root())
            except Exception as exc:  # DataLossError: not consistent with what was signed
                self._raise_publish_failed(exc)

    def stage_publish(self, signed: Signed) -> Signed:
        """Step 2 (primary mode: the staging object; no lock: commits and the previous
        checkpoint's swap go on meanwhile). Never raises: a failure surfaces at step 3."""
        return self._publisher.stage(signed)

    def complete_publish(self, signed: Signed) -> PublishedCheckpoint:
        """Step 3, strictly in the order ``prepare_publish`` signed: the swap (primary mode),
        then the mark and the store; the checkpoint may be seen only once this returns. A
        failure drops every checkpoint signed after the latest published one."""
        with self._publishing:
            try:
                self._raise_if_failed()
                if self._halted is not None:
                    raise ReadOnlyError(self._halted)
                self._publisher.swap(signed)
            except Exception as exc:
                with self._lock:
                    self._publisher.drop(signed, exc)
                if isinstance(exc, LogFailedError | ReadOnlyError):
                    raise
                self._raise_publish_failed(exc)
            with self._marking:  # not the writer's lock: a commit may run meanwhile
                if self._halted is not None:  # halted on evidence meanwhile: not served
                    raise ReadOnlyError(self._halted)
                try:
                    return self._publisher.store(signed)
                except Exception as exc:
                    self._raise_publish_failed(exc)

    def _raise_publish_failed(self, exc: Exception) -> NoReturn:
        """Raise for a failed publish step; all but a store that is away stop the log."""
        if isinstance(exc, StoreUnreachableError):
            raise exc  # primary mode, bucket away: nothing signed leaves; the next one retries
        self._set_failure(exc)
        if isinstance(exc, DataLossError | WriterFencedError):  # fenced: another writer serves
            raise exc
        raise LogFailedError(
            f"publishing a checkpoint failed ({type(exc).__name__}: {exc}); the log "
            "stops appending. Nothing acknowledged is lost: fix the cause (for example "
            "free disk space) and restart the server"
        ) from exc

    def catch_up(
        self, leaves: Sequence[bytes], target: PublishedCheckpoint | None = None
    ) -> PublishedCheckpoint:
        """Append the missing ``leaves`` verbatim and leave read-only mode once the tree matches
        the published mark again (and ``target``, a verified checkpoint of this log from a copy
        of its tiles, beyond the mark: the way out of a halt on witness evidence); the leaves
        are checked before any is stored: together they must rebuild the published roots."""
        with self._lock, self._marking:
            behind = target is not None and target.size > self.size
            if self._mark is None or (self._restored is None and not behind):
                raise InvalidArgumentError("catch-up: the log is not behind its published mark")
            published = leave_read_only(self, self._mark, leaves, self._integrator, target)
            self._publisher.adopt(published)
            self._restored = self._unconfirmed = None
            return published

    def follow(self, leaves: Sequence[bytes], checkpoint: PublishedCheckpoint) -> None:
        """Primary mode (a standby following the bucket, or a writer rebuilding its cache):
        append ``leaves`` verbatim after the tree and adopt ``checkpoint`` (its signature
        verified by the caller) once they rebuild its root; DataLossError when they do not."""
        with self._lock, self._marking:
            self._raise_if_failed()
            if not leaves and checkpoint.size <= self.size:  # entries past it: never acked
                if self.root_at(checkpoint.size) != checkpoint.root_hash:
                    raise DataLossError(
                        f"follow: this data dir's root at size {checkpoint.size} is not the "
                        "bucket's: it holds another history; move it away to rebuild it"
                    )
                latest = self._publisher.latest
                if latest is None or latest.size < checkpoint.size:
                    if self._mark is not None:
                        self._mark.write(MarkState(checkpoint=checkpoint))
                    self._publisher.adopt(checkpoint)
                return
            if checkpoint.size != self.size + len(leaves):
                raise InvalidArgumentError(
                    f"follow: {len(leaves)} leaves after size {self.size} do not reach "
                    f"{checkpoint.size}"
                )
            trial = self._integrator.compact.copy()
            trial.extend([merkle.leaf_hash(leaf) for leaf in leaves], with_leaves=False)
            if trial.root() != checkpoint.root_hash:
                raise DataLossError(
                    f"follow: the bucket's leaves rebuild root {trial.root().hex()} at size "
                    f"{checkpoint.size}, its checkpoint says {checkpoint.root_hash.hex()}"
                )
            if leaves:
                self.commit_leaves(self.size, leaves)
            if self._mark is not None:
                self._mark.write(MarkState(checkpoint=checkpoint))
            self._publisher.adopt(checkpoint)

    def commit_leaves(self, start: int, leaves: Sequence[bytes]) -> None:
        """Commit leaves at ``start`` exactly as given (catch-up, under the lock)."""
        sequenced = self._sequencer.sequence_leaves(start, leaves)
        nodes, compact = self._integrator.integrate(sequenced.leaf_hashes)
        state = TreeState(compact=compact, last_timestamp_ms=sequenced.last_timestamp_ms)
        self._store.commit(sequenced.batch(nodes, state))
        if self._acked is not None:
            self._acked.write(sequenced.next_index)
        self._sequencer.adopt(sequenced)
        self._integrator.adopt(compact)

    def append_digests(self, digests: bytes) -> PackedSequenced:
        """``append`` for N x 32 bytes of digests without metadata, over buffers on the
        selected core (``ledger.core.accel``): one multi-get, one durable commit, no object per
        entry but the dedup keys and values the store takes. The same indexes, times and leaf
        hashes as ``append`` of the same items."""
        check_packed(digests, self._max_batch)
        with self._lock:
            self._raise_if_failed()
            if self.read_only is not None:
                raise ReadOnlyError(self.read_only)
            sequenced = self._sequencer.sequence_packed(digests)
            if not sequenced.new_entries:
                return sequenced
            rows, compact = self._integrator.integrate_packed(sequenced.leaf_hashes)
            state = TreeState(compact=compact, last_timestamp_ms=sequenced.last_timestamp_ms)
            self._commit_group(
                lambda: self._store.commit_packed(sequenced.batch(rows, state)),
                sequenced.next_index,
            )
            self._sequencer.adopt(sequenced)
            self._integrator.adopt(compact)
            return sequenced

    @property
    def failure(self) -> Exception | None:
        """The fault that stopped the writer, if any."""
        return self._failure

    def _set_failure(self, exc: Exception) -> None:
        """Stop appending for good (until a restart) and tell the listeners, once."""
        if self._failure is not None:
            return
        self._failure = exc
        for listener in self.failure_listeners:
            listener(exc)

    def add_cosignatures(
        self, size: int, signatures: Sequence[NoteSignature]
    ) -> PublishedCheckpoint:
        """Add witness cosignature lines to the stored checkpoint of ``size`` (same note text;
        a witness that already has a line keeps its first one). Durable when it returns.

        It takes its own lock, not the writer's: it rewrites only an existing size, which
        ``publish`` never touches, so it never waits behind a group commit."""
        with self._cosign_lock:
            self._raise_if_failed()
            stored = self._store.get_checkpoint(size)
            if stored is None:
                raise NotFoundError(f"size: no checkpoint was published for size {size}")
            present = {(s.name, s.key_id) for s in SignedNote.from_text(stored.note).signatures}
            new = [s for s in signatures if (s.name, s.key_id) not in present]
            if not new:
                return stored
            updated = replace(stored, note=add_signatures(stored.note, new))
            self._store.put_checkpoint(updated)
            self._publisher.refresh(updated)
            return updated

    def put_anchor(self, anchor: Anchor) -> None:
        """Store a verified anchor for a published checkpoint."""
        if self._store.get_checkpoint(anchor.size) is None:
            raise NotFoundError(f"no checkpoint published for size {anchor.size}")
        try:
            self._store.put_anchor(anchor)
        except Exception as exc:
            self._set_failure(exc)
            raise LogFailedError(
                f"storing an anchor failed ({type(exc).__name__}: {exc}); the log stops "
                "appending. Fix the cause (for example free disk space) and restart the server"
            ) from exc

    # --- reads -----------------------------------------------------------------------------

    def latest_checkpoint(self) -> PublishedCheckpoint | None:
        """The newest published checkpoint (None before the first publish)."""
        return self._publisher.latest

    def checkpoint(self, size: int) -> PublishedCheckpoint:
        """The checkpoint published for exactly ``size``; 0 means the latest."""
        if size == 0:
            return self._require_latest()
        found = self._store.get_checkpoint(size)
        if found is None:
            raise NotFoundError(f"size: no checkpoint was published for size {size}")
        return found

    def anchors(self, size: int) -> list[Anchor]:
        """Anchors stored for the checkpoint of ``size``."""
        return self._store.get_anchors(size)

    def anchored_sizes(self, limit: int) -> list[int]:
        """Checkpoint sizes with anchors, newest first."""
        return self._store.anchored_sizes(limit)

    def entries(self, start: int, count: int) -> list[Entry]:
        """Published entries from ``start``: at most ``MAX_PAGE``, cut at the published size."""
        if count <= 0:
            raise InvalidArgumentError(f"count: {count}, want 1..{MAX_PAGE}")
        published = self._require_latest().size
        if start >= published:
            raise OutOfRangeError(f"start: {start} >= published tree size {published}")
        indexes = range(start, min(start + min(count, MAX_PAGE), published))
        leaves = self._store.get_leaves(indexes)
        self._check_leaves(indexes, leaves)
        return [decode_leaf(i, leaf) for i, leaf in zip(indexes, leaves, strict=True)]

    def index_of(self, record_digest: bytes) -> int:
        """The index of a logged record digest."""
        if len(record_digest) != HASH_SIZE:
            raise InvalidArgumentError(
                f"record_digest: {len(record_digest)} bytes, want {HASH_SIZE}"
            )
        return self._entry_of(record_digest)[0]

    def _entry_of(self, record_digest: bytes) -> tuple[int, bytes]:
        """Index and leaf of a digest; the leaf must hold the digest (the index is checked)."""
        (index,) = self._store.find_digests([record_digest])
        if index is None or index >= self.size:
            raise NotFoundError(f"record_digest {record_digest.hex()} is not in the log")
        leaf = self._store.get_leaves([index])[0]
        if decode_leaf(index, leaf).record_digest != record_digest:
            raise DataLossError(
                f"the digest index maps {record_digest.hex()} to entry {index}, which holds "
                "another digest: the index is damaged"
            )
        return index, leaf

    def entry_by_digest(self, record_digest: bytes) -> Entry:
        """The entry of a logged record digest (sequenced entries included)."""
        index, leaf = self._entry_of(record_digest)
        self._check_leaves([index], [leaf])
        return decode_leaf(index, leaf)

    def inclusion_proofs(self, indexes: Sequence[int], tree_size: int) -> list[InclusionProof]:
        """Inclusion proofs of ``indexes`` at ``tree_size`` (0: latest) with one node read.

        An index at or beyond an explicit ``tree_size`` can never be proven there
        (``InvalidArgumentError``); beyond the latest checkpoint it may be later
        (``NotYetPublishedError`` when sequenced, else ``OutOfRangeError``).
        """
        size = self._proof_size(tree_size, "tree_size")
        for i in indexes:
            self._check_included(i, size, explicit=tree_size != 0)
        plans = [merkle.inclusion_proof_nodes(i, size) for i in indexes]
        # Proofs at one size share their upper nodes: read and fold each distinct node once.
        distinct = list({node for plan in plans for node in plan})
        hashes = merkle.fold_proof_nodes(distinct, self._read_nodes)
        hash_of = dict(zip(distinct, hashes, strict=True))
        leaves = self._store.get_leaves(indexes)
        proofs = [
            InclusionProof(
                entry=decode_leaf(i, leaf),
                tree_size=size,
                hashes=tuple(hash_of[node] for node in plan),
            )
            for i, plan, leaf in zip(indexes, plans, leaves, strict=True)
        ]
        if proofs:
            latest = self._require_latest()
            selfcheck.check_inclusion(proofs, selfcheck.proven_root(proofs[0], latest, self._roots))
        return proofs

    def _read_nodes(self, ids: Sequence[merkle.NodeID]) -> list[bytes]:
        """One batched read of distinct node ids, answered in the order asked."""
        unique = list(dict.fromkeys(ids))
        found = dict(zip(unique, self._store.get_nodes(unique), strict=True))
        return [found[i] for i in ids]

    def inclusion_proof(self, index: int, tree_size: int) -> InclusionProof:
        """One inclusion proof (see ``inclusion_proofs``)."""
        return self.inclusion_proofs([index], tree_size)[0]

    def consistency_proof(self, size1: int, size2: int) -> ConsistencyProof:
        """RFC 9162 consistency proof, ``size1 <= size2 <= latest published`` (0: latest)."""
        latest = size2 == 0
        size2 = self._proof_size(size2, "size2")
        if size1 > size2 and latest:
            raise OutOfRangeError(f"size1: {size1} > latest published tree size {size2}")
        if size1 > size2:
            raise InvalidArgumentError(f"size1: {size1} > size2 {size2}")
        if size1 == 0 or size1 == size2:
            return ConsistencyProof(size1=size1, size2=size2, hashes=())
        hashes = selfcheck.prove_consistency(self._store.get_nodes, size1, size2)
        proof = ConsistencyProof(size1=size1, size2=size2, hashes=hashes)
        selfcheck.check_consistency(proof, self.root_at(size1), self._signed_root(size2))
        return proof

    def receipt_bundle(
        self, record_digests: Sequence[bytes], tree_size: int = 0, *, prefer_anchored: bool = True
    ) -> ReceiptBundle:
        """Everything the receipts of ``record_digests`` need, at one checkpoint.

        The checkpoint is ``tree_size``'s when given; else, with ``prefer_anchored``, the
        earliest anchored checkpoint covering every entry (the tightest "existed by" time the
        log can prove), else the latest.
        """
        indexes = [self.index_of(d) for d in record_digests]
        if not indexes:
            raise InvalidArgumentError("record_digests: empty, want 1 or more")
        size = tree_size or self._receipt_size(max(indexes) + 1, prefer_anchored)
        proofs = self.inclusion_proofs(indexes, size)
        return ReceiptBundle(
            checkpoint=self.checkpoint(size),
            anchors=tuple(self.anchors(size)),
            proofs=tuple(proofs),
        )

    def _receipt_size(self, needed: int, prefer_anchored: bool) -> int:
        if prefer_anchored:
            covering = [s for s in self.anchored_sizes(MAX_ANCHORED_SIZES) if s >= needed]
            if covering:
                return min(covering)
        latest = self._require_latest().size
        if latest < needed:
            raise NotYetPublishedError(
                f"entry {needed - 1} is sequenced but the latest checkpoint has size {latest}; "
                "retry after the next checkpoint"
            )
        return latest

    def root_at(self, size: int) -> bytes:
        """Root hash of the durable tree at ``size`` (from stored nodes)."""
        return selfcheck.root_at(self._store.get_nodes, size)

    # --- self-checks -----------------------------------------------------------------------

    def _signed_root(self, size: int) -> bytes:
        return self._roots.root(size, self._require_latest())

    def _check_extends(self, old: PublishedCheckpoint, size: int, root_hash: bytes) -> None:
        selfcheck.check_extends(self._store.get_nodes, old, size, root_hash)

    def _check_leaves(self, indexes: Sequence[int], leaves: Sequence[bytes]) -> None:
        selfcheck.check_leaves(
            self._integrator.compact,
            indexes,
            leaves,
            get_nodes=self._store.get_nodes,
            get_leaves=self._store.get_leaves,
        )

    # --- internals -------------------------------------------------------------------------

    def _require_latest(self) -> PublishedCheckpoint:
        latest = self._publisher.latest
        if latest is None:
            raise NotYetPublishedError("no checkpoint has been published yet; retry shortly")
        return latest

    def _proof_size(self, size: int, field: str) -> int:
        published = self._require_latest().size
        if size == 0:
            return published
        if size > published:
            raise OutOfRangeError(f"{field}: {size} > latest published tree size {published}")
        return size

    def _check_included(self, index: int, size: int, *, explicit: bool) -> None:
        if index < size:
            return
        if explicit:
            raise InvalidArgumentError(f"index: {index} >= tree_size {size}")
        if index < self.size:
            raise NotYetPublishedError(
                f"index {index} is sequenced but not covered by a checkpoint of size {size}; "
                "retry after the next checkpoint"
            )
        raise OutOfRangeError(f"index: {index} >= latest published tree size {size}")

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise LogFailedError(
                f"the log stopped after a fault ({type(self._failure).__name__}: "
                f"{self._failure}); restart it once the cause is fixed"
            ) from self._failure

    def _check_recovered(self, state: TreeState) -> None:
        latest = self._publisher.latest
        if latest is None:
            return
        if latest.size > state.size:
            raise DataLossError(
                f"checkpoint of size {latest.size} is ahead of the durable tree ({state.size}): "
                "the tree state was rolled back or damaged"
            )
        root = self.root_at(latest.size)
        if root != latest.root_hash:
            raise DataLossError(
                f"durable tree root {root.hex()} at size {latest.size} differs from the "
                f"published checkpoint's {latest.root_hash.hex()}"
            )
