"""Mirror mode: a running server publishes to its bucket from a process of its own.

The local store stays primary: a checkpoint reaches the bucket only after it was committed and
published locally, so a bucket that is slow or unreachable delays publishing and never an
append. As with the folder mirror (``ledger.http.mirror_process``), the server starts
``python -m ledger.objstore.mirror``, which opens the store as a RocksDB secondary and runs
``BucketPublisher`` there (uploads and their TLS stay off the server's GIL).

Protocol (one JSON object a line). The child answers first, once: ``{"ready": true,
"checkpoint": NOTE|null, "reachable": BOOL, "error": TEXT}`` (the bucket's checkpoint at start,
which the server weighs as evidence, ``ledger.log.evidence``), or ``{"error": TEXT}`` and exit 1
(a store that never passed ``ledger objstore check``, another log's bucket). The server writes
``{"size": N, "t": UNIX_TIME}`` per published checkpoint; the child answers after each update
``{"published": N, "lags": [seconds from each checkpoint's publication to its upload]}``, or
``{"unreachable": TEXT}`` (it retries with backoff, keeping what it was given), or
``{"stopped": TEXT}`` (a conflict: nothing more is published until an operator looks). Every few
seconds it also re-publishes cosignatures added to the newest checkpoint and new anchors.

``BucketMirror`` is the server's side: ``submit`` (non-blocking, on the event loop), the state
for health and ``/metrics`` (``collect``), ``stop``.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import select
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

from ledger.core.backoff import Backoff
from ledger.core.errors import (
    LedgerError,
    NonConformingStoreError,
    ObjectConflictError,
)
from ledger.core.types import PublishedCheckpoint
from ledger.http.mirror_process import ChildPipe, stop_child

__all__ = ["LAG_BUCKETS", "BucketMirror", "MirrorState", "main"]

_log = logging.getLogger("ledger.objstore")
START_TIMEOUT_S = 60.0
REFRESH_S = 2.0
UPLOAD_THREADS = 48  # PUTs in flight: their latency is mostly the bucket's and the run queue's
IN_FLIGHT = 2  # updates started and not yet done (more pending sizes coalesce)
LAG_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(slots=True)
class MirrorState:
    """What the server knows of its bucket (read by health and ``/metrics``)."""

    url: str
    published_size: int = 0
    reachable: bool = True
    stopped: str | None = None
    last_error: str = ""
    lag_counts: list[int] = field(default_factory=lambda: [0] * (len(LAG_BUCKETS) + 1))
    lag_sum: float = 0.0
    lags: list[float] = field(default_factory=list)  # the most recent (for benchmarks)

    def observe_lag(self, seconds: float) -> None:
        """One checkpoint's time from publication to the bucket."""
        at = next((i for i, b in enumerate(LAG_BUCKETS) if seconds <= b), len(LAG_BUCKETS))
        self.lag_counts[at] += 1
        self.lag_sum += seconds
        self.lags.append(seconds)
        if len(self.lags) > 100_000:
            del self.lags[:50_000]

    @property
    def healthy(self) -> bool:
        """Reachable and not stopped on a conflict."""
        return self.reachable and self.stopped is None


class BucketMirror:
    """The bucket mirror child of a server (module docstring)."""

    def __init__(
        self,
        *,
        db_dir: Path,
        secondary_dir: Path,
        origin: str,
        url: str,
        endpoint: str,
        region: str,
        on_change: Callable[[MirrorState], None] | None = None,
    ) -> None:
        cmd = [sys.executable, "-m", "ledger.objstore.mirror", str(db_dir), str(secondary_dir),
               origin, url, endpoint, region]  # fmt: skip
        self.state = MirrorState(url=url)
        self.on_change = on_change  # called on the reader thread when ``healthy`` changes
        child = ChildPipe(cmd, "the bucket mirror", f"object store {url}")
        self._proc, self._stdin, answer = child.proc, child.stdin, child.answer
        checkpoint = answer.get("checkpoint")
        self.start_checkpoint: str | None = checkpoint if isinstance(checkpoint, str) else None
        self.state.reachable = bool(answer.get("reachable", True))
        self.state.last_error = str(answer.get("error") or "")
        self._reader = threading.Thread(
            target=self._follow, name="ledger-bucket-mirror", daemon=True
        )
        self._reader.start()

    def submit(self, checkpoint: PublishedCheckpoint) -> None:
        """Queue a published checkpoint (one non-blocking pipe write, with its publication
        time for the lag)."""
        data = (json.dumps({"size": checkpoint.size, "t": time.time()}) + "\n").encode()
        try:
            os.write(self._stdin, data)
        except BlockingIOError:
            _log.warning("bucket mirror is behind: checkpoint %d left to the next", checkpoint.size)
        except OSError as exc:
            _log.error("bucket mirror process is gone (exit %s): %s", self._proc.poll(), exc)

    def _follow(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                report = json.loads(line)
            except json.JSONDecodeError:
                continue
            state = self.state
            was = state.healthy
            if "published" in report:
                state.published_size = int(report["published"])
                for lag in report.get("lags", []):
                    state.observe_lag(float(lag))
                if not state.reachable:
                    _log.warning("object store %s reachable again", state.url)
                state.reachable, state.last_error = True, ""
            elif "unreachable" in report:
                if state.reachable:
                    _log.error("object store %s unreachable: %s", state.url, report["unreachable"])
                state.reachable, state.last_error = False, str(report["unreachable"])
            elif "stopped" in report:
                state.stopped = str(report["stopped"])
                _log.error("PUBLISHING TO %s STOPPED: %s", state.url, state.stopped)
            if self.on_change is not None and state.healthy != was:
                self.on_change(state)  # not per update: the server's loop has appends to do

    def collect(self) -> Iterable[Any]:
        """``/metrics``: ``ledger_bucket_*``."""
        state = self.state
        size = GaugeMetricFamily("ledger_bucket_published_size", "size of the bucket checkpoint")
        size.add_metric([], float(state.published_size))
        up = GaugeMetricFamily("ledger_bucket_reachable", "1 while the object store answers")
        up.add_metric([], 1.0 if state.reachable else 0.0)
        stopped = GaugeMetricFamily(
            "ledger_bucket_stopped", "1 once publishing stopped on a conflict"
        )
        stopped.add_metric([], 0.0 if state.stopped is None else 1.0)
        lag = HistogramMetricFamily(
            "ledger_bucket_lag_seconds", "from a checkpoint's publication to its upload"
        )
        running = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip((*LAG_BUCKETS, float("inf")), state.lag_counts, strict=True):
            running += count
            buckets.append(("+Inf" if bound == float("inf") else str(bound), float(running)))
        lag.add_metric([], buckets, sum_value=state.lag_sum)
        return [size, up, stopped, lag]

    def stop(self, timeout: float = 120.0) -> None:
        """Let the child publish what it was given, then wait for it to exit."""
        stop_child(self._proc, timeout)


# --- the child -----------------------------------------------------------------------------------


def _say(obj: dict[str, object]) -> None:
    print(json.dumps(obj), flush=True)


def _read_lines(
    fd: int, pending: bytearray, timeout: float, wake: int | None = None
) -> tuple[list[dict[str, Any]], bool]:
    """Wait up to ``timeout`` for input (or a byte on ``wake``: a sweep finished), then take
    everything queued: (lines, end of input)."""
    ready = select.select([fd] if wake is None else [fd, wake], [], [], timeout)[0]
    if wake is not None and wake in ready:
        os.read(wake, 4096)
    if fd not in ready:
        return [], False
    end = False
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            end = True
            break
        pending += chunk
        if not select.select([fd], [], [], 0)[0]:
            break
    *complete, rest = bytes(pending).split(b"\n")
    pending[:] = rest
    return [json.loads(line) for line in complete if line.strip()], end


def main(argv: list[str]) -> int:
    """Run the bucket mirror child: ``DB_DIR SECONDARY_DIR ORIGIN URL ENDPOINT REGION``."""
    from ledger.objstore.bucket import Bucket, BucketAddress
    from ledger.objstore.publisher import BucketPublisher
    from ledger.store.rocks import RocksStore
    from ledger.store.tile_reader import TileReader

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    db_dir, secondary_dir, origin, url, endpoint, region = argv
    try:
        store = RocksStore(
            db_dir, secondary=secondary_dir, memtable_mb=4, cache_mb=16, tiles_only=True
        )
        publisher = BucketPublisher(
            bucket=Bucket(
                BucketAddress.parse(url, endpoint=endpoint, region=region),
                connections=UPLOAD_THREADS,  # one warm connection per upload thread
            ),
            reader=TileReader(store=store, published=lambda: None, cache_bytes=0),
            origin=origin,
            notes=store.get_checkpoint,
            anchors=store.get_anchors,
            threads=UPLOAD_THREADS,
        )
    except LedgerError as exc:
        _say({"error": str(exc)})
        return 1
    try:
        publisher.require_conforming()
        note = publisher.bucket_checkpoint()  # whose tree it is: the first update checks
        _say({"ready": True, "checkpoint": note, "reachable": True})
    except LedgerError as exc:
        if exc.retryable:  # unreachable: start anyway, publishing waits
            _say({"ready": True, "checkpoint": None, "reachable": False, "error": str(exc)})
        else:
            _say({"error": str(exc)})
            store.close()
            return 1
    gc.freeze()  # boto and botocore's many long-lived objects: out of every collection
    _run(store, publisher)
    publisher.close()
    store.close()
    return 0


def _refresh(store: Any, publisher: Any) -> None:
    """New cosignatures of the newest checkpoint, and new anchors (on the finishing thread)."""
    latest = store.latest_checkpoint()
    if latest is not None and latest.size == publisher.published_size():
        publisher.refresh_latest(latest)
    publisher.publish_anchors(store.anchored_sizes(16))


def _run(store: Any, publisher: Any) -> None:
    """Publish what the server sends until its end of input (module docstring).

    Sweeps overlap: as soon as the store has caught up to a size the server sent, an update of
    the sizes not yet handed on starts (``BucketPublisher.start``): its tiles and notes queue
    behind those of the updates in flight, and the publisher writes each ``checkpoint`` in order,
    after every tile of its tree. The RocksDB catch-up (which holds the GIL) thus runs while
    SeaweedFS answers uploads, and a checkpoint that arrives during a sweep does not wait for
    that sweep's end before its own tiles go up. At most ``IN_FLIGHT`` updates at once (more
    pending sizes coalesce into the next, and the store catches up only when one can start: each
    catch-up holds the GIL, and the upload threads with it). After a failure, the updates still
    in flight fail with it, and the backoff is waited out (taking input meanwhile) before the
    next try."""
    backoff = Backoff.doubling(0.25, 30.0)
    failures = 0
    retry_at = 0.0  # monotonic time before which no upload is tried (after a failure)
    waiting: dict[int, float] = {}  # size -> publication time, not yet in the bucket
    planned = 0  # the newest size handed to an update in flight or done
    bucket_size = 0  # the size of the last update done
    caught_up = 0  # the newest size sent that the store had at its last catch-up
    done = False
    pending = bytearray()
    last_refresh = 0.0
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    flight: deque[tuple[Future[Any], int]] = deque()  # (update, newest size handed), in order
    refresh: Future[None] | None = None
    finished: dict[Future[Any], float] = {}  # when each update wrote its checkpoint
    last_error: BaseException | None = None

    def woken(future: Future[Any]) -> None:
        finished[future] = time.time()  # on the finishing thread, right after the checkpoint
        with suppress(BlockingIOError):
            os.write(wake_w, b".")

    def failed(exc: LedgerError) -> None:
        nonlocal failures, retry_at, last_error, planned
        planned = 0  # re-plan what is waiting once the updates in flight are done
        if exc is last_error:
            return  # an update chained on the one that failed
        last_error = exc
        if isinstance(exc, NonConformingStoreError | ObjectConflictError):
            publisher.stopped = publisher.stopped or ObjectConflictError(str(exc))
            _say({"stopped": str(exc)})
            return
        if not exc.retryable:
            _log.error("bucket publishing failed: %s", exc)
        retry_at = time.monotonic() + backoff.delay(failures)
        failures += 1
        _say({"unreachable": str(exc)})

    def settle() -> None:
        nonlocal failures, refresh, bucket_size
        while flight and (flight[0][0].done() or done):
            update, handed = flight.popleft()
            try:
                result = update.result()
            except LedgerError as exc:
                failed(exc)
            else:
                at = finished.pop(update, time.time())
                lags = [at - t for s, t in waiting.items() if s <= result.size]
                for s in [s for s in waiting if s <= handed]:  # a size above: none stored
                    del waiting[s]
                bucket_size = result.size
                if lags or failures:
                    _say({"published": result.size, "lags": lags})
                failures = 0
            finished.pop(update, None)
        if refresh is not None and (refresh.done() or done):
            try:
                refresh.result()
            except LedgerError as exc:
                failed(exc)
            else:
                if failures and not flight:
                    _say({"published": bucket_size, "lags": []})
                    failures = 0
            refresh = None

    try:
        while True:
            settle()
            if not done:
                wait = REFRESH_S
                if failures and not flight and time.monotonic() < retry_at:
                    wait = retry_at - time.monotonic()
                lines, done = _read_lines(sys.stdin.fileno(), pending, wait, wake_r)
                for line in lines:
                    waiting.setdefault(int(line["size"]), float(line.get("t", time.time())))
                settle()
            if publisher.stopped is not None:
                if done and not flight:
                    return
                continue
            if failures and (flight or time.monotonic() < retry_at):
                if done and not flight:
                    return  # shutting down: the next start publishes the rest
                continue  # input taken; the bucket is tried again once the backoff is over
            newest = max(waiting, default=0)
            due = time.monotonic() - last_refresh >= REFRESH_S and refresh is None
            try:
                if (newest > caught_up and len(flight) < IN_FLIGHT) or (due and not flight):
                    store.catch_up()  # beside the update in flight, if any; when one can start
                    caught_up = max(caught_up, newest)
                sizes = sorted(s for s in waiting if planned < s <= caught_up)
                if sizes and len(flight) < IN_FLIGHT:
                    found = [store.get_checkpoint(s) for s in sizes]
                    update = publisher.start([c for c in found if c is not None], coalesce=True)
                    update.add_done_callback(woken)
                    flight.append((update, sizes[-1]))
                    planned = sizes[-1]
                if due:
                    last_refresh = time.monotonic()
                    refresh = publisher.after_updates(lambda: _refresh(store, publisher))
            except LedgerError as exc:
                failed(exc)
                continue
            if done and not flight and not any(s > planned for s in waiting):
                return
    finally:
        settle()
        os.close(wake_r)
        os.close(wake_w)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
