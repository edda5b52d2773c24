"""Implicit run context: ``ledger_run`` and the frames that give records their step and parents.

DESIGN.md "Decision record (v1)": a run's records carry a run id, a step and ``parent_digests``
(links by digest: a tamper-evident DAG), and the run ends with a ``run_closed`` record listing
every (step, digest) (``ledger.runs``). This module supplies all three without the agent
passing anything by hand, through a ``contextvars.ContextVar`` that holds the current *frame*:

* ``with ledger_run(client, agent=...) as run`` (or ``async with``) opens a run and makes its
  root frame current; leaving it emits the ``run_closed`` record (and, if the body raised, an
  ``outcome`` record naming the error type first).
* Steps are 0, 1, 2, ... in emission order across every thread and task of the run. A record
  gets its step and is handed to the client under the run's lock, so the client sends, and the
  log sequences, a run's records in step order (``ledger-verify run`` checks that order).
* Parents: each frame keeps a *frontier* (``heads``), the digests of its newest records not yet
  followed by another. A record emitted in a frame has the frontier as parents and becomes
  the frontier. A decorated call opens a child frame that starts with its caller's frontier;
  when the call's own record is emitted, it replaces, in the caller's frontier, what the child
  started from. So sequential calls chain, nested calls are the parents of their caller's
  record, and calls run in parallel (threads, ``asyncio.gather``) are all parents of the next
  record (fan-in). A parent always has a lower step than its child.
* Propagation: asyncio tasks copy the context, so they see their creator's frame. Threads do
  not: use ``ContextThreadPoolExecutor`` (or ``contextvars.copy_context().run``). A thread
  with no frame joins the run at its root if exactly one run is open in the process.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from ledger.commitments import Disclosure
from ledger.jcs import canonical_bytes
from ledger.records import DecisionRecord, Outcome, Payload, new_record_id
from ledger.runs import run_closed_record
from ledger_client.sdk_errors import RunStateError

if TYPE_CHECKING:
    from ledger_client.receipt import Receipt

__all__ = [
    "ContextThreadPoolExecutor",
    "Frame",
    "Run",
    "RunContext",
    "RunEntry",
    "current_frame",
    "current_run",
    "emit",
    "error_name",
    "ledger_run",
    "rfc3339",
]

_P = ParamSpec("_P")
_T = TypeVar("_T")
_FRAME: contextvars.ContextVar[Frame | None] = contextvars.ContextVar("ledger_frame", default=None)
_OPEN: list[Run] = []
_OPEN_LOCK = threading.Lock()


class RecordSink(Protocol):
    """What a run needs from a client (``LedgerClient`` provides it)."""

    def submit(
        self, record: DecisionRecord, *, disclosures: Sequence[Disclosure] = ()
    ) -> bytes: ...

    def flush(self, timeout: float | None = None, *, checkpoint: bool = False) -> bool: ...

    def receipts(self, digests: Sequence[bytes], *, timeout: float = 30.0) -> list[Receipt]: ...


class _WrapsSink(Protocol):
    @property
    def sync(self) -> RecordSink: ...


def rfc3339(epoch_seconds: float) -> str:
    """``2025-06-01T12:00:00.250Z``: UTC, millisecond precision (RFC 3339 §5.6)."""
    moment = datetime.fromtimestamp(epoch_seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def error_name(exc: BaseException) -> str:
    """``module.QualName`` of an exception's type (builtins without the module)."""
    kind = type(exc)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One emitted record, its digest, and the disclosures the SDK keeps for it."""

    record: DecisionRecord
    digest: bytes
    disclosures: tuple[Disclosure, ...] = ()


class Frame:
    """A place in a run's DAG: the run, the enclosing frame, and the frontier (hex digests)."""

    __slots__ = ("heads", "parent", "run", "start")

    def __init__(self, run: Run, parent: Frame | None, heads: tuple[str, ...]) -> None:
        self.run = run
        self.parent = parent
        self.start = heads
        self.heads = heads


class Run:
    """One agent run: id, step counter, frames, and every record emitted (in step order)."""

    def __init__(
        self,
        sink: RecordSink,
        *,
        agent: str,
        run_id: str | None = None,
        model: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sink = sink
        self.agent = agent
        self.model = model
        self.run_id = run_id or new_record_id()
        self.root = Frame(self, None, ())
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: list[RunEntry] = []
        self.closed: RunEntry | None = None

    @property
    def entries(self) -> list[RunEntry]:
        """The records emitted so far, in step order (the ``run_closed`` one last)."""
        with self._lock:
            return [*self._entries, *([self.closed] if self.closed else [])]

    def child(self, parent: Frame | None = None) -> Frame:
        """A new frame inside ``parent`` (default: the root), starting at its frontier."""
        parent = parent or self.root
        with self._lock:
            return Frame(self, parent, parent.heads)

    def emit(
        self,
        payload: Payload,
        *,
        frame: Frame | None = None,
        disclosures: Sequence[Disclosure] = (),
        **fields: Any,
    ) -> RunEntry:
        """Emit a record in ``frame`` (default: the root): parents are its frontier."""
        with self._lock:
            return self._emit(frame or self.root, payload, tuple(disclosures), fields)

    def finish(
        self,
        frame: Frame,
        payload: Payload,
        *,
        disclosures: Sequence[Disclosure] = (),
        **fields: Any,
    ) -> RunEntry:
        """Emit the record that ends ``frame`` and fold it into the enclosing frame."""
        with self._lock:
            entry = self._emit(frame, payload, tuple(disclosures), fields)
            outer = frame.parent or self.root
            digest = entry.digest.hex()
            outer.heads = (*(h for h in outer.heads if h not in frame.start), digest)
            return entry

    def fold(self, frame: Frame) -> None:
        """End ``frame`` without a record of its own: its frontier joins the enclosing one."""
        with self._lock:
            outer = frame.parent or self.root
            if frame.heads != frame.start:
                kept = tuple(h for h in outer.heads if h not in frame.start)
                outer.heads = (*kept, *(h for h in frame.heads if h not in kept))

    def _emit(
        self, frame: Frame, payload: Payload, disclosures: tuple[Disclosure, ...], fields: Any
    ) -> RunEntry:
        if self.closed is not None:
            raise RunStateError(f"run {self.run_id} is closed; no more records")
        fields.setdefault("agent", self.agent)
        fields.setdefault("model", self.model)
        record = DecisionRecord(
            record_id=new_record_id(),
            run_id=self.run_id,
            step=len(self._entries),
            time=rfc3339(self._clock()),
            parent_digests=frame.heads,
            payload=payload,
            **fields,
        )
        digest = self.sink.submit(record, disclosures=disclosures)
        entry = RunEntry(record, digest, disclosures)
        self._entries.append(entry)
        frame.heads = (digest.hex(),)
        return entry

    def close(
        self, *, error: BaseException | None = None, wait: bool = False, timeout: float = 30.0
    ) -> RunEntry:
        """Emit the ``run_closed`` record (after an error ``outcome`` if ``error``).

        ``wait``: return once the log has the whole run and a checkpoint covering it (needed
        before ``receipts``); ``TimeoutError`` after ``timeout`` seconds (records stay spooled).
        """
        with self._lock:
            if self.closed is not None:
                raise RunStateError(f"run {self.run_id} is already closed")
            if error is not None:
                outcome = {"error": error_name(error)}
                self._emit(self.root, Outcome(), (), {"actual_outcome": outcome})
            steps = [(e.record.step, e.digest) for e in self._entries]
            parents = [bytes.fromhex(h) for h in self.root.heads] if self.root.heads else None
            record = run_closed_record(
                self.run_id, steps, agent=self.agent, time=rfc3339(self._clock()),
                parent_digests=parents, model=self.model,
            )  # fmt: skip
            self.closed = RunEntry(record, self.sink.submit(record))
        _forget(self)
        if wait and not self.sink.flush(timeout, checkpoint=True):
            raise TimeoutError(f"run {self.run_id}: the log did not acknowledge it in {timeout} s")
        return self.closed

    def receipts(
        self, *, with_disclosures: bool = False, timeout: float = 30.0
    ) -> list[tuple[DecisionRecord, Receipt]]:
        """Every record of the closed run with its receipt (close with ``wait=True`` first)."""
        if self.closed is None:
            raise RunStateError(f"run {self.run_id} is still open")
        entries = self.entries
        found = self.sink.receipts([e.digest for e in entries], timeout=timeout)
        return [
            (
                entry.record,
                replace(
                    receipt,
                    record=entry.record,
                    disclosures=entry.disclosures if with_disclosures else (),
                ),
            )
            for entry, receipt in zip(entries, found, strict=True)
        ]

    def write_receipts(self, path: str | Path, *, with_disclosures: bool = False) -> Path:
        """Write the run as JSON lines ``{"record", "receipt"}`` (``ledger-verify run`` input)."""
        target = Path(path)
        lines = [
            canonical_bytes({"record": record.to_json_obj(), "receipt": receipt.to_json_obj()})
            for record, receipt in self.receipts(with_disclosures=with_disclosures)
        ]
        with open(target, "wb") as out:
            out.write(b"".join(line + b"\n" for line in lines))
            out.flush()
            os.fsync(out.fileno())
        return target


# --- the current frame ------------------------------------------------------------------------


def _remember(run: Run) -> None:
    with _OPEN_LOCK:
        _OPEN.append(run)


def _forget(run: Run) -> None:
    with _OPEN_LOCK:
        if run in _OPEN:
            _OPEN.remove(run)


def current_frame() -> Frame | None:
    """This context's frame; in a thread without one, the root of the only open run."""
    frame = _FRAME.get()
    if frame is not None and frame.run.closed is None:
        return frame
    with _OPEN_LOCK:
        return _OPEN[0].root if len(_OPEN) == 1 else None


def current_run() -> Run | None:
    """The run of ``current_frame()``."""
    frame = current_frame()
    return None if frame is None else frame.run


def enter_frame(frame: Frame) -> contextvars.Token[Frame | None]:
    """Make ``frame`` current (``leave_frame`` with the token undoes it)."""
    return _FRAME.set(frame)


def leave_frame(token: contextvars.Token[Frame | None]) -> None:
    """Restore the frame that was current before ``enter_frame``."""
    _FRAME.reset(token)


def emit(payload: Payload, *, disclosures: Sequence[Disclosure] = (), **fields: Any) -> RunEntry:
    """Emit a record in the current frame (e.g. a ``ToolSelection`` inside a decorated call)."""
    frame = current_frame()
    if frame is None:
        raise RunStateError("no ledger run is open here; use `with ledger_run(...)`")
    return frame.run.emit(payload, frame=frame, disclosures=disclosures, **fields)


# --- ledger_run --------------------------------------------------------------------------------


class RunContext:
    """``with``/``async with`` wrapper of a ``Run``: current on entry, closed on exit."""

    def __init__(
        self, run: Run, *, receipts: str | Path | None = None, with_disclosures: bool = False
    ) -> None:
        self.run = run
        self.receipts_path = None if receipts is None else Path(receipts)
        self._with_disclosures = with_disclosures
        self._tokens: list[contextvars.Token[Frame | None]] = []

    def __enter__(self) -> Run:
        _remember(self.run)
        self._tokens.append(enter_frame(self.run.root))
        return self.run

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        leave_frame(self._tokens.pop())
        self._close(exc)

    async def __aenter__(self) -> Run:
        return self.__enter__()

    async def __aexit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        leave_frame(self._tokens.pop())
        await asyncio.to_thread(self._close, exc)

    def _close(self, exc: BaseException | None) -> None:
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            exc = None  # a normal exit, not a failure
        try:
            self.run.close(error=exc, wait=self.receipts_path is not None)
            if self.receipts_path is not None:
                self.run.write_receipts(self.receipts_path, with_disclosures=self._with_disclosures)
        finally:
            _forget(self.run)


def ledger_run(
    client: RecordSink | _WrapsSink,
    *,
    agent: str,
    run_id: str | None = None,
    model: str | None = None,
    receipts: str | Path | None = None,
    with_disclosures: bool = False,
    clock: Callable[[], float] = time.time,
) -> RunContext:
    """Open a run of ``agent`` on ``client`` (a ``LedgerClient`` or ``AsyncLedgerClient``).

    ``receipts``: on exit, wait for the log to cover the run and write every record with its
    receipt to this JSON-lines file (``ledger-verify run`` reads it); ``with_disclosures`` puts
    the kept disclosures (clear values and salts) into those receipts.
    """
    sink: RecordSink = client.sync if hasattr(client, "sync") else client
    run = Run(sink, agent=agent, run_id=run_id, model=model, clock=clock)
    return RunContext(run, receipts=receipts, with_disclosures=with_disclosures)


# --- threads -----------------------------------------------------------------------------------


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` whose tasks run in a copy of the submitter's context."""

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        context = contextvars.copy_context()
        return super().submit(context.run, fn, *args, **kwargs)  # type: ignore[arg-type]
