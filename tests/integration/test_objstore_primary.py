"""Primary mode against a real SeaweedFS: staging object, lock swap, copy, fencing, a writer that
applies the locked staging object, acknowledgement only once the bucket holds the checkpoint, and
a stopped bucket (appends UNAVAILABLE, nothing acknowledged, resumes)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator

import pytest

from ledger.core import tiles
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import (
    LogFailedError,
    NotFoundError,
    StoreUnreachableError,
    UnavailableError,
    WriterActiveError,
    WriterFencedError,
)
from ledger.core.types import AppendItem, PublishedCheckpoint
from ledger.log.facade import Log
from ledger.log.service import LogService
from ledger.objstore.bucket import Bucket, BucketAddress
from ledger.objstore.conformance import check_store
from ledger.objstore.primary import (
    LOCK_KEY,
    LockState,
    LockWatcher,
    PrimaryBucket,
    StagedTree,
    decode_staging,
    encode_staging,
    staging_name,
)
from ledger.store.contract import MemoryStore
from ledger.store.tile_reader import TileReader
from ledger_client.remote.tiles import TileClient
from tests.objstore_world import Seaweed

pytestmark = pytest.mark.integration
ORIGIN = "ledger.test/primary"


_WRITERS: list[PrimaryBucket] = []


@pytest.fixture(autouse=True)
def _close_writers() -> Iterator[None]:
    yield
    while _WRITERS:
        _WRITERS.pop().close(drain_s=0)  # the public copier stops with its bucket


class _Writer:
    """One writer: its own local store (the cache), a log whose publisher swaps into the bucket."""

    def __init__(
        self, address: BucketAddress, name: str, signer: Ed25519Signer, **bucket: float
    ) -> None:
        self.store = MemoryStore()
        self.reader = TileReader(store=self.store, published=lambda: None)
        self.primary = PrimaryBucket(
            bucket=Bucket(address, **bucket),  # type: ignore[arg-type]
            tile_source=self.reader.read,
            origin=ORIGIN,
            writer=name,
        )
        self.log = Log(store=self.store, signer=signer, origin=ORIGIN, gate=self.primary)
        _WRITERS.append(self.primary)

    def grow(self, count: int) -> PublishedCheckpoint:
        self.log.append([AppendItem(os.urandom(32)) for _ in range(count)])
        return self.log.publish()


def _ready(seaweed: Seaweed, prefix: str) -> BucketAddress:
    address = seaweed.address(prefix)
    check_store(address, rounds=1, writers=4)
    return address


def test_a_commit_stages_swaps_then_copies(seaweed: Seaweed) -> None:
    address = _ready(seaweed, "p/commit")
    signer = Ed25519Signer.generate(ORIGIN)
    writer = _Writer(address, "a", signer)
    writer.primary.acquire()
    previous = 0
    for count in (3, 300):
        cp = writer.grow(count)
        lock = writer.primary.read_lock()
        assert lock is not None and lock.note == cp.note and lock.writer == "a"
        assert lock.staging == staging_name(cp.size, cp.root_hash, previous)
        previous = cp.size
    bucket = writer.primary.bucket
    assert lock is not None
    staged = bucket.get(lock.staging)
    assert staged is not None
    paths = [path for path, _ in decode_staging(staged.body)]
    assert paths == [t.path for t in tiles.new_tiles(3, cp.size)] + [f"checkpoints/{cp.size}"]
    assert writer.primary.wait_published(cp.size)  # the public copy follows the swap
    writer.primary.close()
    assert bucket.get(staging_name(3, writer.log.root_at(3), 0)) is None  # the older one is gone
    client = TileClient(seaweed.bucket_url("p/commit"))
    verified = client.checkpoint([signer.verifier()], origin=ORIGIN)
    public = bucket.get("checkpoint")
    assert public is not None and public.body.decode() == cp.note
    assert client.root(cp.size) == cp.root_hash and client.root(3) == writer.log.root_at(3)
    assert client.leaves(0, cp.size, cp.size) == writer.store.get_leaves(range(cp.size))
    assert verified.checkpoint.size == cp.size


def test_a_stale_writer_is_fenced_and_its_checkpoint_never_leaves(seaweed: Seaweed) -> None:
    address = _ready(seaweed, "p/fence")
    signer = Ed25519Signer.generate(ORIGIN)
    old = _Writer(address, "old", signer)
    old.primary.acquire()
    first = old.grow(10)
    assert old.primary.wait_published(first.size)
    new = _Writer(address, "new", signer)
    with pytest.raises(WriterActiveError):
        new.primary.open()  # the lock names another writer: a start does not take it
    new.primary.acquire()  # the standby's takeover once the lease lapsed
    old.log.append([AppendItem(os.urandom(32)) for _ in range(5)])
    with pytest.raises(WriterFencedError, match="held by 'new'"):
        old.log.publish()  # the stale writer wakes: its swap fails, it stops
    assert old.log.latest_checkpoint() == first  # the signed size-15 note never left
    assert old.store.get_checkpoint(15) is None
    assert old.primary.bucket.get(staging_name(15, old.log.root_at(15), 10)) is not None
    public = old.primary.bucket.get("checkpoint")
    assert public is not None and public.body.decode() == first.note
    with pytest.raises(LogFailedError):
        old.log.append([AppendItem(os.urandom(32))])
    lock = new.primary.read_lock()
    assert lock is not None and lock.writer == "new" and lock.size == 10


def test_a_writer_that_takes_over_applies_the_locked_staging_object(seaweed: Seaweed) -> None:
    address = _ready(seaweed, "p/apply")
    signer = Ed25519Signer.generate(ORIGIN)
    crashed = _Writer(address, "crashed", signer)
    crashed.primary.acquire()
    crashed.grow(4)
    assert crashed.primary.wait_published(4)
    # What a writer killed between its swap and its copy leaves: a staging object and the lock.
    crashed.log.append([AppendItem(os.urandom(32)) for _ in range(300)])
    size, root = crashed.log.size, crashed.log.root_at(crashed.log.size)
    jobs = tiles.new_tiles(4, size)
    bucket = crashed.primary.bucket
    name = staging_name(size, root, 4)
    assert bucket.create(name, encode_staging([(t.path, crashed.reader.read(t, size))
                                               for t in jobs]), {})  # fmt: skip
    from ledger.core.checkpoint import Checkpoint, sign_checkpoint

    note = sign_checkpoint(Checkpoint(origin=ORIGIN, size=size, root_hash=root), signer)
    stored = bucket.get(LOCK_KEY)
    assert stored is not None
    locked = LockState(writer="crashed", note=note, size=size, root_hash=root, staging=name, term=9)
    assert bucket.swap(LOCK_KEY, locked.encode(), stored.etag, {}) is not None
    public = bucket.get("checkpoint")
    assert public is not None and public.body.decode() != note
    taker = _Writer(address, "taker", signer)
    state = taker.primary.acquire()
    assert state is not None and state.size == size and state.writer == "taker"
    public = bucket.get("checkpoint")
    assert public is not None and public.body.decode() == note
    client = TileClient(seaweed.bucket_url("p/apply"))
    assert client.root(size) == root
    assert client.leaves(0, size, size) == crashed.store.get_leaves(range(size))


def test_the_watcher_sees_a_lapse_only_after_the_lock_stops_changing(seaweed: Seaweed) -> None:
    address = _ready(seaweed, "p/lease")
    writer = _Writer(address, "a", Ed25519Signer.generate(ORIGIN))
    writer.primary.acquire()
    now = [1000.0]
    watcher = LockWatcher(Bucket(address), lease_s=5.0, clock=lambda: now[0])
    assert watcher.poll() is False
    now[0] += 4.0
    writer.primary.renew()
    assert watcher.poll() is False  # renewed: the lease starts again from this poll
    now[0] += 4.9
    assert watcher.poll() is False
    now[0] += 0.2
    assert watcher.poll() is True
    # A skewed wall clock is not consulted: only the standby's own monotonic clock moves this.


def test_appends_are_acknowledged_only_once_the_bucket_holds_them(private_seaweed: Seaweed) -> None:
    seaweed = private_seaweed  # it SIGSTOPs the store: a SeaweedFS of its own
    address = _ready(seaweed, "p/ack")
    # Short timeouts, one attempt: a stopped bucket shows within about a second.
    writer = _Writer(address, "a", Ed25519Signer.generate(ORIGIN), timeout_s=1.0, attempts=1)
    writer.primary.acquire()
    service = LogService(writer.log, checkpoint_interval=0.01, ack_on_publish=True)
    watch = Bucket(address)

    async def run() -> None:
        await service.start()
        try:
            for _ in range(5):
                results = await asyncio.gather(
                    *[service.append([AppendItem(os.urandom(32))]) for _ in range(20)]
                )
                lock = watch.get(LOCK_KEY)
                assert lock is not None
                held = LockState.decode(lock.body).size
                assert max(r[0].index for r in results) < held  # every ack is in the bucket
            os.kill(seaweed.proc.pid, signal.SIGSTOP)  # the bucket stops mid-load
            try:
                before = writer.log.latest_checkpoint()
                digest = os.urandom(32)
                with pytest.raises(UnavailableError):
                    await service.append([AppendItem(digest)])
                assert writer.log.failure is None  # waits for the bucket; not failed
                assert writer.log.latest_checkpoint() == before  # nothing signed left
            finally:
                os.kill(seaweed.proc.pid, signal.SIGCONT)
            (again,) = await service.append([AppendItem(digest)])  # the client's retry
            lock = watch.get(LOCK_KEY)
            assert lock is not None and again.index < LockState.decode(lock.body).size
            assert writer.store.get_leaves(range(again.index, again.index + 1))
        finally:
            await service.stop()

    asyncio.run(run())


def test_a_store_error_does_not_fail_the_log(private_seaweed: Seaweed) -> None:
    """StoreUnreachableError from the gate leaves the log able to publish again."""
    seaweed = private_seaweed  # it SIGSTOPs the store: a SeaweedFS of its own
    address = _ready(seaweed, "p/unreachable")
    writer = _Writer(address, "a", Ed25519Signer.generate(ORIGIN), timeout_s=1.0, attempts=1)
    writer.primary.acquire()
    writer.grow(2)
    os.kill(seaweed.proc.pid, signal.SIGSTOP)
    try:
        writer.log.append([AppendItem(os.urandom(32))])
        with pytest.raises(StoreUnreachableError):
            writer.log.publish()
    finally:
        os.kill(seaweed.proc.pid, signal.SIGCONT)
    assert writer.log.publish().size == 3


def test_a_takeover_publishes_every_tree_swapped_in_before_a_crash(seaweed: Seaweed) -> None:
    """Acknowledged at the swap; a writer killed before its public copies leaves several swapped
    trees unpublished: the next writer publishes them all, in order, from the staging objects."""
    address = _ready(seaweed, "p/crash")
    signer = Ed25519Signer.generate(ORIGIN)
    crashed = _Writer(address, "crashed", signer)
    crashed.primary.acquire()
    first = crashed.grow(4)
    assert crashed.primary.wait_published(first.size)
    # What kill -9 between swap and copy leaves: the copier stops, the commits go on.
    crashed.primary._copier.stop(0)
    middle = crashed.grow(300)
    last = crashed.grow(5)
    bucket = crashed.primary.bucket
    lock = bucket.get(LOCK_KEY)
    assert lock is not None
    state = LockState.decode(lock.body)
    assert state.size == last.size and state.pending == (
        staging_name(middle.size, middle.root_hash, first.size),
        staging_name(last.size, last.root_hash, middle.size),
    )
    public = bucket.get("checkpoint")
    assert public is not None and public.body.decode() == first.note  # acked, not yet copied
    assert bucket.get(f"checkpoints/{middle.size}") is None
    taker = _Writer(address, "taker", signer)
    taken = taker.primary.acquire()
    assert taken is not None and taken.size == last.size
    public = bucket.get("checkpoint")
    assert public is not None and public.body.decode() == last.note
    client = TileClient(seaweed.bucket_url("p/crash"))
    for cp in (middle, last):  # the earlier swapped tree is complete too, note and tiles
        stored = bucket.get(f"checkpoints/{cp.size}")
        assert stored is not None and stored.body.decode() == cp.note
        assert client.root(cp.size) == cp.root_hash
    assert client.leaves(0, last.size, last.size) == crashed.store.get_leaves(range(last.size))


def test_the_public_checkpoint_is_never_ahead_of_its_tiles(seaweed: Seaweed) -> None:
    """Under append load (acknowledged at the swap, copied behind), every public checkpoint a
    reader sees has its tiles: the root computed from the public tiles matches it."""
    address = _ready(seaweed, "p/order")
    signer = Ed25519Signer.generate(ORIGIN)
    writer = _Writer(address, "a", signer)
    writer.primary.acquire()
    service = LogService(writer.log, checkpoint_interval=0.005, ack_on_publish=True)
    client = TileClient(seaweed.bucket_url("p/order"))
    seen: list[int] = []

    async def load() -> None:
        await service.start()
        try:
            for _ in range(30):
                await asyncio.gather(
                    *[service.append([AppendItem(os.urandom(32))]) for _ in range(40)]
                )
        finally:
            await service.stop()

    def read() -> None:
        while writer.log.size < 1200 or not seen or seen[-1] < writer.log.size:
            try:
                verified = client.checkpoint([signer.verifier()], origin=ORIGIN).checkpoint
            except NotFoundError:
                continue  # nothing public yet
            if verified.size and (not seen or seen[-1] != verified.size):
                assert client.root(verified.size) == verified.root_hash
                seen.append(verified.size)
            if len(seen) > 200:
                return

    async def both() -> None:
        reader = asyncio.get_running_loop().run_in_executor(None, read)
        await load()
        await asyncio.wait_for(reader, 60)

    asyncio.run(both())
    assert len(seen) >= 2 and seen == sorted(seen)


class _Watched:
    """The real ``PrimaryBucket`` as the log's gate, watched: at each swap it records whether
    the checkpoint being swapped was already served (the log's latest) or any append it covers
    already acknowledged, and whether a stage ran while a swap was in flight."""

    def __init__(self, primary: PrimaryBucket) -> None:
        self.primary = primary
        self.log: Log | None = None
        self.acked = -1  # the largest index acknowledged so far (set by the test)
        self.early: list[str] = []
        self.swapping = False
        self.overlapped = 0
        self.swaps = 0

    def stage(self, previous: int, published: PublishedCheckpoint) -> object:
        self.overlapped += self.swapping
        return self.primary.stage(previous, published)

    def swap(self, staged: object) -> None:
        assert self.log is not None and isinstance(staged, StagedTree)
        size = staged.published.size
        latest = self.log.latest_checkpoint()
        if latest is not None and latest.size >= size:
            self.early.append(f"checkpoint {size} served before its swap")
        if self.acked >= size:
            self.early.append(f"index {self.acked} acknowledged before the swap of {size}")
        self.swapping = True
        try:
            time.sleep(0.01)  # a slower bucket: the next checkpoint is staged meanwhile
            self.primary.swap(staged)
        finally:
            self.swapping = False
        self.swaps += 1


def test_pipelined_checkpoints_leave_the_process_only_after_their_swap(seaweed: Seaweed) -> None:
    """Primary mode signs and stages the next checkpoint while the previous one's swap is in
    flight; still no checkpoint is served, and no append acknowledged, before its own swap,
    and every served checkpoint is the bucket's lock or older."""
    address = _ready(seaweed, "p/pipeline")
    signer = Ed25519Signer.generate(ORIGIN)
    store = MemoryStore()
    primary = PrimaryBucket(
        bucket=Bucket(address),
        tile_source=TileReader(store=store, published=lambda: None).read,
        origin=ORIGIN,
        writer="a",
    )
    _WRITERS.append(primary)
    watched = _Watched(primary)
    log = Log(store=store, signer=signer, origin=ORIGIN, gate=watched)
    watched.log = log
    primary.acquire()
    watch = Bucket(address)
    behind: list[str] = []

    def served(published: PublishedCheckpoint) -> None:
        lock = watch.get(LOCK_KEY)
        locked = -1 if lock is None else LockState.decode(lock.body).size
        if locked < published.size:
            behind.append(f"served {published.size} with the lock at {locked}")

    service = LogService(log, checkpoint_interval=0.002, ack_on_publish=True, on_publish=served)

    async def one() -> None:
        (result,) = await service.append([AppendItem(os.urandom(32))])
        watched.acked = max(watched.acked, result.index)

    async def run() -> None:
        await service.start()
        try:
            sent: list[asyncio.Future[None]] = []
            for _ in range(40):  # appends keep coming while checkpoints are on their way
                sent += [asyncio.ensure_future(one()) for _ in range(12)]
                await asyncio.sleep(0.004)
            await asyncio.gather(*sent)
        finally:
            await service.stop()

    asyncio.run(run())
    assert watched.early == [] and behind == []
    assert watched.swaps >= 5 and watched.overlapped >= 1  # the pipeline did overlap
    latest = log.latest_checkpoint()
    assert latest is not None and latest.size == 480 and watched.acked == 479
    lock = primary.read_lock()
    assert lock is not None and lock.size == 480 and lock.note == latest.note


def test_a_failed_swap_drops_the_checkpoints_signed_after_it(private_seaweed: Seaweed) -> None:
    """Two checkpoints signed and staged; the first one's swap fails (the bucket stops): the
    second never leaves either, and the next publish stages again over the locked tree (its
    staging object is named by the tree it extends, so the second one's is never reused)."""
    seaweed = private_seaweed  # it SIGSTOPs the store: a SeaweedFS of its own
    address = _ready(seaweed, "p/dropped")
    signer = Ed25519Signer.generate(ORIGIN)
    writer = _Writer(address, "a", signer, timeout_s=1.0, attempts=1)
    writer.primary.acquire()
    first = writer.grow(4)
    writer.log.append([AppendItem(os.urandom(32)) for _ in range(300)])
    one = writer.log.prepare_publish()
    writer.log.append([AppendItem(os.urandom(32)) for _ in range(5)])
    two = writer.log.prepare_publish()
    assert one is not None and two is not None and (one.previous, two.previous) == (4, 304)
    one, two = writer.log.stage_publish(one), writer.log.stage_publish(two)
    os.kill(seaweed.proc.pid, signal.SIGSTOP)
    try:
        with pytest.raises(StoreUnreachableError):
            writer.log.complete_publish(one)
    finally:
        os.kill(seaweed.proc.pid, signal.SIGCONT)
    with pytest.raises(StoreUnreachableError):
        writer.log.complete_publish(two)  # signed over a checkpoint that never left
    assert writer.log.latest_checkpoint() == first and writer.log.failure is None
    again = writer.log.publish()
    assert again.size == 309 and again.note == two.checkpoint.note  # same tree, same note
    lock = writer.primary.read_lock()
    assert lock is not None and lock.size == 309
    assert lock.staging == staging_name(309, again.root_hash, 4)
    staged = writer.primary.bucket.get(lock.staging)
    assert staged is not None
    paths = [path for path, _ in decode_staging(staged.body)]
    assert paths == [t.path for t in tiles.new_tiles(4, 309)] + ["checkpoints/309"]
    writer.primary.close()
    taker = _Writer(address, "taker", signer)
    assert taker.primary.acquire() is not None
    client = TileClient(seaweed.bucket_url("p/dropped"))
    assert client.root(309) == again.root_hash
    assert client.leaves(0, 309, 309) == writer.store.get_leaves(range(309))
