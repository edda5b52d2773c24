"""The log asks its witnesses to cosign (c2sp.org/tlog-witness client side, tlog-cosignature).

After each published checkpoint, every configured witness gets ``POST <url>/add-checkpoint``
with the RFC 9162 §2.1.4 consistency proof from the size it last cosigned (remembered in
``witnesses.json``; a new witness starts from 0). A ``409`` with ``text/x.tlog.size`` tells the
witness's real size: the log re-proves from it and asks again. A valid cosignature line (type
0x04, checked against the configured key) is stored on the checkpoint (``Log.add_cosignatures``:
same body, more lines), so GetCheckpoint, receipts and ``/checkpoint`` carry it.

Witnessing runs on an event loop of its own thread (``ledger-witnessing``), so the gRPC loop's
load never delays it; it notices a new checkpoint by reading the log's latest every
``POLL_S``. Each witness has its own task and always gets the newest checkpoint (checkpoints
that came and went while it was busy are skipped: the newer one covers them). Failures are
retried with exponential backoff (``BACKOFF_S`` doubling to ``MAX_BACKOFF_S``, the schedule of
``ledger.core.backoff``). Nothing here
runs on the writer thread or holds the log lock while waiting on the network: proofs are read
on reader threads, and the cosignatures that arrived are stored together, one durable write per
checkpoint size, on a thread of their own; so a slow or dead witness never slows appends or
publishing. Requests go through the server's one outbound HTTP client (``ledger.net.client``,
aiohttp): one connection pool, a per-request timeout (the witness's ``timeout_s``), answers
capped at ``MAX_ANSWER_BYTES``, cancellation without a thread per witness.

The witnesses come as ``WitnessEndpoint`` values (plain, frozen): the app builds them from its
settings (``ledger.app.settings.WitnessTarget``); this layer does not import the app.

Evidence (``ledger.log.evidence``): every answer also goes to the log's ``EvidenceSink``. A 409
naming a size beyond the local tree, a 409 at the submitted size (the witness holds another
root there) and a 422 (the proof the log built from its own tree fails) are evidence; a 409
naming a size the tree covers is C2SP catch-up (re-prove from it); a cosignature is agreement.
``probe`` asks every witness about the newest stored checkpoint once at start, before anything
new is signed or served.

Operator view: ``witnesses.json`` in the data folder (rewritten at most once per second) with
each witness's last cosigned size, its size as last reported, the last error and when, and the
time from publication (as seen by the poll) to a quorum of cosignatures (p50/p99);
``ledger witnesses --data-dir DIR`` prints it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from ledger.core.backoff import Backoff, retry_async
from ledger.core.checkpoint import Checkpoint, CosignatureVerifier, NoteSignature, SignedNote
from ledger.core.errors import FormatError, LedgerError
from ledger.core.redact import redact_text, redact_url
from ledger.core.types import ConsistencyProof, PublishedCheckpoint
from ledger.fileio.durable import write_file
from ledger.log.evidence import EvidenceSink
from ledger.net.client import HttpClient
from ledger.witness.core import SIZE_CONTENT_TYPE, build_request

__all__ = [
    "BACKOFF_S",
    "MAX_BACKOFF_S",
    "Cosigning",
    "WitnessEndpoint",
    "WitnessStatus",
    "load_status",
]

_log = logging.getLogger("ledger.witnessing")
BACKOFF_S = 0.2
MAX_BACKOFF_S = 30.0
_BACKOFF = Backoff.doubling(BACKOFF_S, MAX_BACKOFF_S)
STATUS_FILE = "witnesses.json"
_MAX_409_PER_ROUND = 3
MAX_ANSWER_BYTES = 64 * 1024  # cosignature lines are ~100 bytes each
POLL_S = 0.005  # how often the cosigning thread looks for a new checkpoint
_SAMPLES = 10_000


class CosigningLog(Protocol):
    """What witnessing needs from the log."""

    def latest_checkpoint(self) -> PublishedCheckpoint | None: ...
    def consistency_proof(self, size1: int, size2: int) -> ConsistencyProof: ...
    def add_cosignatures(
        self, size: int, signatures: Sequence[NoteSignature]
    ) -> PublishedCheckpoint: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessEndpoint:
    """One witness the log asks to cosign: its name, base URL (``POST <url>/add-checkpoint``),
    tlog-cosignature verifier key (type 0x04) and HTTP timeout in seconds."""

    name: str
    url: str
    key: str
    timeout_s: float = 10.0


@dataclass(slots=True, kw_only=True)
class WitnessStatus:
    """What the log knows about one witness (shown to the operator)."""

    name: str
    url: str
    key: str
    cosigned_size: int | None = None  # the last size it cosigned for this log
    witness_size: int = 0  # its size as it last told us (200 or 409): the next old size
    last_error: str | None = None
    last_error_at: float | None = None
    last_cosigned_at: float | None = None
    failures: int = 0  # consecutive


class _Refused(Exception):
    """A witness answer that is not a cosignature (shown as the witness's last error); internal
    to witnessing, it never reaches a caller of the log."""


class _Conflict(_Refused):
    """A 422, or a 409 at the submitted size: evidence of another history (internal)."""


class _Stale(Exception):
    """A 409 from the witness: it is at another size (internal, like ``_Refused``)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"witness is at size {size}")
        self.size = size


def _parse_size(body: str) -> int:
    text = body.removesuffix("\n")
    if not text.isdigit() or (len(text) > 1 and text[0] == "0") or "\n" in text:
        raise _Refused(f"409 with a malformed {SIZE_CONTENT_TYPE} body {body[:40]!r}")
    return int(text)


def _cosignature(body: str, verifier: CosignatureVerifier, checkpoint: Checkpoint) -> NoteSignature:
    """The witness's valid line among the lines it answered."""
    for line in body.splitlines():
        try:
            sig = NoteSignature.from_line(line)
        except FormatError:
            continue
        if (sig.name, sig.key_id) != (verifier.name, verifier.key_id):
            continue
        if verifier.verify(checkpoint.body_bytes(), sig.signature):
            return sig
        raise _Refused("its cosignature line does not verify with its configured key")
    raise _Refused("no cosignature line by its configured key in the answer")


class Cosigning:
    """Per-witness submission tasks around a log (see the module docstring)."""

    def __init__(
        self,
        *,
        log: CosigningLog,
        witnesses: Sequence[WitnessEndpoint],
        quorum: int,
        status_dir: Path,
        clock: Callable[[], float] = time.time,
        sink: EvidenceSink | None = None,
    ) -> None:
        if witnesses and not 1 <= quorum <= len(witnesses):
            raise FormatError(f"witness quorum {quorum} needs 1..{len(witnesses)}")
        self._log = log
        self._targets = list(witnesses)
        self._verifiers = [CosignatureVerifier.from_key_string(w.key) for w in witnesses]
        self.quorum = quorum
        self._status_path = status_dir / STATUS_FILE
        self._clock = clock
        self._sink = sink
        known = _known_sizes(self._status_path)
        self.status = [
            WitnessStatus(
                name=w.name, url=redact_url(w.url), key=w.key, witness_size=known.get(w.key, 0)
            )
            for w in witnesses
        ]
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-witness")
        self._reader = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ledger-witness-read")
        self._wake = [asyncio.Event() for _ in witnesses]
        self._tasks: list[asyncio.Task[None]] = []
        self._http: HttpClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._pending: list[tuple[int, NoteSignature, asyncio.Future[None]]] = []
        self._attach_wake = asyncio.Event()
        # (size, monotonic) awaiting a quorum; bounded: a dead witness must not grow memory
        self._published: deque[tuple[int, float]] = deque(maxlen=_SAMPLES)
        self._cosigners: dict[int, set[int]] = {}  # size -> indexes of witnesses that cosigned
        self.latencies: deque[float] = deque(maxlen=_SAMPLES)  # seconds, publish -> quorum
        self._dirty = True
        self.quorum_size = 0  # the largest checkpoint size cosigned by ``quorum`` witnesses

    async def start(self) -> None:
        """Start the cosigning thread and its event loop (nothing when no witness is set)."""
        if not self._targets:
            return
        ready = threading.Event()
        self._loop_thread = threading.Thread(
            target=lambda: asyncio.run(self._main(ready)), name="ledger-witnessing", daemon=True
        )
        self._loop_thread.start()
        await asyncio.to_thread(ready.wait)

    async def stop(self) -> None:
        """Stop the cosigning loop (tasks cancelled, status written), then the worker threads."""
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self._loop_thread is not None:
            await asyncio.to_thread(self._loop_thread.join)
        self._thread.shutdown(wait=True)
        self._reader.shutdown(wait=True)

    async def _main(self, ready: threading.Event) -> None:
        """The cosigning loop, on its own thread: the gRPC loop's load never delays it."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._http = HttpClient()
        self._tasks = [
            asyncio.create_task(self._watch(), name="witness-watch"),
            asyncio.create_task(self._attacher(), name="witness-attach"),
        ]
        self._tasks += [
            asyncio.create_task(self._serve_witness(i), name=f"witness-{w.name}")
            for i, w in enumerate(self._targets)
        ]
        self._tasks.append(asyncio.create_task(self._write_status_loop(), name="witness-status"))
        ready.set()
        await self._stopping.wait()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._http.close()
        self._write_status()

    # --- watching publications ---------------------------------------------------------------

    async def _watch(self) -> None:
        """Notice new checkpoints (a read of the log's latest every ``POLL_S``)."""
        seen = -1
        while True:
            checkpoint = self._log.latest_checkpoint()
            if checkpoint is not None and checkpoint.size > seen:
                seen = checkpoint.size
                if checkpoint.size > 0:
                    self._published.append((checkpoint.size, time.monotonic()))
                    for event in self._wake:
                        event.set()
            await asyncio.sleep(POLL_S)

    # --- one witness -------------------------------------------------------------------------

    async def _serve_witness(self, i: int) -> None:
        status = self.status[i]
        while True:
            await self._wake[i].wait()
            self._wake[i].clear()
            await retry_async(  # refused, unreachable, timed out, storage: retried, backing off
                lambda: self._cosign_latest(i),
                backoff=_BACKOFF,
                retry_on=lambda exc: self._failed(i, exc),
                hint=lambda exc: _BACKOFF.delay(status.failures - 1),  # across rounds
                on_retry=lambda attempt, exc, delay: self._warn(i, delay),
            )

    async def _cosign_latest(self, i: int) -> None:
        """Have witness ``i`` cosign the newest checkpoint, unless it already has."""
        status = self.status[i]
        checkpoint = self._log.latest_checkpoint()
        if checkpoint is None or checkpoint.size == 0:
            return
        if status.cosigned_size is not None and status.cosigned_size >= checkpoint.size:
            return
        await self._submit(i, checkpoint)

    async def _submit(self, i: int, checkpoint: PublishedCheckpoint) -> None:
        status = self.status[i]
        for _ in range(_MAX_409_PER_ROUND):
            try:
                line = await self._ask(i, checkpoint, status.witness_size)
            except _Stale as stale:
                status.witness_size = stale.size
                self._dirty = True
                if self._sink is not None:
                    await self._observe(self._sink.observe_size, status.name, stale.size)
                if stale.size > checkpoint.size:
                    raise _Refused(
                        f"the witness cosigned size {stale.size}, larger than this log's "
                        f"checkpoint {checkpoint.size}: was the log rolled back?"
                    ) from None
                _log.info("witness %s is at size %d; re-proving", status.name, stale.size)
                continue
            except _Conflict as conflict:
                if self._sink is not None:
                    await self._observe(
                        self._sink.observe_refusal, status.name, checkpoint.size, str(conflict)
                    )
                raise
            await self._attach(i, checkpoint, line)
            if self._sink is not None:
                await self._observe(self._sink.observe_agreement, status.name, checkpoint.size)
            return
        raise _Refused(f"still 409 after {_MAX_409_PER_ROUND} re-proofs")

    async def _ask(self, i: int, checkpoint: PublishedCheckpoint, old: int) -> NoteSignature:
        if old > checkpoint.size:
            raise _Refused(
                f"the witness cosigned size {old}, larger than this log's checkpoint "
                f"{checkpoint.size}: was the log rolled back?"
            )
        proof: tuple[bytes, ...] = ()
        if 0 < old < checkpoint.size:
            loop = asyncio.get_running_loop()
            found = await loop.run_in_executor(  # a read: never waits for the log lock
                self._reader, self._log.consistency_proof, old, checkpoint.size
            )
            proof = found.hashes
        target = self._targets[i]
        assert self._http is not None
        reply = await self._http.post(  # a witness is not trusted: its answer is capped
            target.url.rstrip("/") + "/add-checkpoint",
            build_request(old, proof, checkpoint.note),
            timeout_s=target.timeout_s,
            max_bytes=MAX_ANSWER_BYTES,
        )
        body = reply.body.decode("utf-8", "replace")
        if reply.status == 409 and reply.content_type == SIZE_CONTENT_TYPE:
            raise _Stale(_parse_size(body))
        if reply.status in (409, 422):
            raise _Conflict(
                f"HTTP {reply.status} on checkpoint {checkpoint.size} (old size {old}): "
                f"{body.strip()[:300]}"
            )
        if reply.status != 200:
            raise _Refused(f"HTTP {reply.status}: {body.strip()[:300]}")
        body_text = SignedNote.from_text(checkpoint.note).text
        return _cosignature(body, self._verifiers[i], Checkpoint.from_text(body_text))

    async def _observe(self, fn: Callable[..., None], *args: Any) -> None:
        """Report to the sink off this loop (a halt takes the log's writer lock)."""
        await asyncio.get_running_loop().run_in_executor(self._reader, fn, *args)

    async def probe(self, checkpoint: PublishedCheckpoint, timeout: float) -> int:
        """Ask every witness about ``checkpoint`` (old size = its size, so no proof: a 200 if
        the witness holds it, a 409 with its size otherwise, a plain 409 for another root),
        reporting each answer to the sink; return how many answered within ``timeout``."""
        if not self._targets or self._sink is None:
            return 0
        sink = self._sink
        answered = 0

        async def ask(http: HttpClient, i: int) -> None:
            nonlocal answered
            target = self._targets[i]
            reply = await http.post(  # a witness is not trusted: its answer is capped
                target.url.rstrip("/") + "/add-checkpoint",
                build_request(checkpoint.size, (), checkpoint.note),
                timeout_s=min(target.timeout_s, timeout),
                max_bytes=MAX_ANSWER_BYTES,
            )
            body = reply.body.decode("utf-8", "replace")
            if reply.status == 200:
                answered += 1
                await self._observe(sink.observe_agreement, target.name, checkpoint.size)
            elif reply.status == 409 and reply.content_type == SIZE_CONTENT_TYPE:
                answered += 1
                size = _parse_size(body)
                self.status[i].witness_size = size
                await self._observe(sink.observe_size, target.name, size)
            elif reply.status in (409, 422):
                answered += 1
                detail = f"HTTP {reply.status} at start, size {checkpoint.size}: {body[:300]}"
                await self._observe(sink.observe_refusal, target.name, checkpoint.size, detail)
            else:
                raise _Refused(f"HTTP {reply.status}: {body.strip()[:300]}")

        async def one(http: HttpClient, i: int) -> None:
            try:
                await ask(http, i)
            except Exception as exc:  # unreachable, timed out, refused: not an answer
                what = redact_text(
                    str(exc)
                    if isinstance(exc, (_Refused, LedgerError))
                    else (f"{type(exc).__name__}: {exc}")
                )
                _log.warning("start check: witness %s: %s", self._targets[i].name, what)

        async with HttpClient() as http:
            tasks = [asyncio.create_task(one(http, i)) for i in range(len(self._targets))]
            _, late = await asyncio.wait(tasks, timeout=timeout)
            for task in late:
                task.cancel()
            for task in late:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        return answered

    async def _attach(self, i: int, checkpoint: PublishedCheckpoint, line: NoteSignature) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((checkpoint.size, line, done))
        self._attach_wake.set()
        await done
        status = self.status[i]
        status.cosigned_size = status.witness_size = checkpoint.size
        status.last_cosigned_at = self._clock()
        status.failures = 0
        self._dirty = True
        self._count(i, checkpoint.size)

    async def _attacher(self) -> None:
        """Store the cosignatures that arrived, one durable write per checkpoint size: lines
        that come in while a write runs share the next one (fewer synced writes under load)."""
        loop = asyncio.get_running_loop()
        while True:
            await self._attach_wake.wait()
            self._attach_wake.clear()
            pending, self._pending = self._pending, []
            by_size: dict[int, list[tuple[NoteSignature, asyncio.Future[None]]]] = {}
            for size, line, done in pending:
                by_size.setdefault(size, []).append((line, done))
            for size, items in sorted(by_size.items()):
                lines = [line for line, _ in items]
                try:
                    await loop.run_in_executor(
                        self._thread, self._log.add_cosignatures, size, lines
                    )
                except Exception as exc:  # a storage failure: reported to each witness task
                    for _, done in items:
                        if not done.done():
                            done.set_exception(exc)
                    continue
                for _, done in items:
                    if not done.done():
                        done.set_result(None)

    def _count(self, i: int, size: int) -> None:
        """Record who cosigned ``size``; on reaching the quorum, time every covered checkpoint."""
        signers = self._cosigners.setdefault(size, set())
        signers.add(i)
        if len(self._cosigners) > _SAMPLES:  # sizes that never reached the quorum
            del self._cosigners[min(self._cosigners)]
        if len(signers) != self.quorum:
            return
        self.quorum_size = max(self.quorum_size, size)
        now = time.monotonic()
        while self._published and self._published[0][0] <= size:
            self.latencies.append(now - self._published.popleft()[1])
        for old in [s for s in self._cosigners if s <= size]:
            del self._cosigners[old]

    def _failed(self, i: int, exc: BaseException) -> bool:
        """Record a failure of witness ``i`` (every failure is retried)."""
        status = self.status[i]
        status.failures += 1
        named = isinstance(exc, _Refused | LedgerError)
        status.last_error = redact_text(str(exc) if named else f"{type(exc).__name__}: {exc}")
        status.last_error_at = self._clock()
        self._dirty = True
        return True

    def _warn(self, i: int, delay: float) -> None:
        status = self.status[i]
        _log.warning(
            "witness %s: %s (attempt %d; retrying in %.1f s)",
            status.name, status.last_error, status.failures, delay,
        )  # fmt: skip

    # --- operator view -------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The operator view: every witness's status and the quorum latency percentiles."""
        samples = sorted(self.latencies)

        def pct(p: float) -> float | None:
            if not samples:
                return None
            return round(samples[min(len(samples) - 1, int(p * len(samples)))] * 1000, 2)

        return {
            "quorum": self.quorum,
            "quorum_size": self.quorum_size,
            "witnesses": [asdict(s) for s in self.status],
            "quorum_latency_ms": {"count": len(samples), "p50": pct(0.5), "p99": pct(0.99)},
        }

    def _write_status(self) -> None:
        self._dirty = False
        write_file(self._status_path, json.dumps(self.snapshot(), indent=2) + "\n")

    async def _write_status_loop(self) -> None:
        while True:  # periodic, not a retry: a failed write waits for the next second
            await asyncio.sleep(1.0)
            if self._dirty:
                await self._write_status_logged()

    async def _write_status_logged(self) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._write_status)
        except OSError as exc:
            _log.error("cannot write %s: %s", self._status_path, exc)


def load_status(folder: Path) -> dict[str, Any]:
    """The last status the log wrote (FormatError when absent or unreadable)."""
    path = folder / STATUS_FILE
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FormatError(f"cannot read {path}: {exc}") from None
    if not isinstance(doc, dict):
        raise FormatError(f"{path}: not a witness status file")
    return doc


def _known_sizes(path: Path) -> dict[str, int]:
    """Each witness key's last reported size from a previous run (empty when unknown)."""
    try:
        doc = json.loads(path.read_text())
        return {w["key"]: int(w["witness_size"]) for w in doc["witnesses"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}
