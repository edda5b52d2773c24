"""Implicit run context: ``ledger_run`` and the frames that give records their step and parents.

docs/design.md "Decision record (v1)": a run's records carry a run id, a step and ``parent_digests``
(links by digest: a tamper-evident DAG), and the run ends with a ``run_closed`` record listing
every (step, digest) (``ledger.records.runs``). This module supplies all three without the agent
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
* Lineage (``ledger_client.sdk.links``): with ``links="data"`` (the default) a decorated call's
  frame starts from the call's *inputs* (``parents=`` and the records whose returned values it was
  given), not from its caller's frontier, and its record does not join the run's root frontier:
  parents follow data flow. ``links="sequence"`` keeps the step-order chain described above
  (framework bridges always use it: callbacks carry no data flow). ``emit(..., parents=[...])``
  names a record's parents exactly, in either mode; they may be records of other runs.
* Disclosures stay private: ``write_receipts`` puts into the shared receipts only the field
  paths asked for (``disclose=``); ``write_disclosures`` writes all of them to a separate file
  (mode 0600; format in ``ledger_client.receipts.disclose``).
* Propagation: asyncio tasks (and ``asyncio.to_thread``) copy the context, so they see their
  creator's frame. While a run is open, a ``threading.Thread`` started where a frame is current
  runs in a copy of its starter's context too (``propagate_threads``, installed by
  ``ledger_run``); ``ContextThreadPoolExecutor`` does it for pools and ``in_context(fn)`` for
  any callable. A thread with no frame joins the run at its root if exactly one run is open in
  the process. Child processes: ``ledger_client.sdk.propagate``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from ledger.core.jcs import canonical_bytes
from ledger.core.timefmt import from_epoch_seconds, rfc3339_millis
from ledger.fileio.private import write_private
from ledger.records.commitments import Kept, select_disclosures
from ledger.records.decision import DecisionRecord, Outcome, Payload, new_record_id
from ledger.records.runs import run_closed_record
from ledger_client.sdk.classify import Clear, classify
from ledger_client.sdk.errors import AnchorTimeoutError, RunStateError
from ledger_client.sdk.links import ValueLinks, parent_digests
from ledger_client.sdk.run_file import RunLine, write_run_file

if TYPE_CHECKING:
    from ledger_client.receipts.receipt import Receipt

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
    "in_context",
    "ledger_run",
    "private_path",
    "propagate_threads",
    "rfc3339",
]

_P = ParamSpec("_P")
_T = TypeVar("_T")
_FRAME: contextvars.ContextVar[Frame | None] = contextvars.ContextVar("ledger_frame", default=None)
_OPEN: list[Run] = []
_OPEN_LOCK = threading.Lock()


class RecordSink(Protocol):
    """What a run needs from a client (``LedgerClient`` provides it)."""

    def submit(self, record: DecisionRecord, *, disclosures: Sequence[Kept] = ()) -> bytes: ...

    def flush(self, timeout: float | None = None, *, checkpoint: bool = False) -> bool: ...

    def receipts(self, digests: Sequence[bytes], *, timeout: float = 30.0) -> list[Receipt]: ...


class _WrapsSink(Protocol):
    @property
    def sync(self) -> RecordSink: ...


def rfc3339(epoch_seconds: float) -> str:
    """``2025-06-01T12:00:00.250Z``: UTC, millisecond precision (RFC 3339 §5.6)."""
    return rfc3339_millis(from_epoch_seconds(epoch_seconds))


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
    disclosures: tuple[Kept, ...] = ()


class Frame:
    """A place in a run's DAG: the run, the enclosing frame, and the frontier (hex digests)."""

    __slots__ = ("data", "heads", "parent", "run", "start")

    def __init__(
        self, run: Run, parent: Frame | None, heads: tuple[str, ...], *, data: bool = False
    ) -> None:
        self.run = run
        self.parent = parent
        self.start = heads
        self.heads = heads
        self.data = data  # started from data-flow inputs (module docstring, "Lineage")


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
        links: str = "data",
    ) -> None:
        if links not in ("data", "sequence"):
            raise ValueError(f"links={links!r}: want 'data' or 'sequence'")
        self.sink = sink
        self.links = links
        self.values = ValueLinks()
        self.agent = agent
        self.model = model
        self.run_id = run_id or new_record_id()
        self.root = Frame(self, None, ())
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: list[RunEntry] = []
        self._closers: list[Callable[[], object]] = []
        self.closed: RunEntry | None = None

    def on_close(self, fn: Callable[[], object]) -> None:
        """Call ``fn`` once the run is closed (e.g. to stop serving it to child processes)."""
        self._closers.append(fn)

    def now(self) -> str:
        """The run clock's time as RFC 3339 (``started_at``/``ended_at`` of a step)."""
        return rfc3339(self._clock())

    @property
    def entries(self) -> list[RunEntry]:
        """The records emitted so far, in step order (the ``run_closed`` one last)."""
        with self._lock:
            return [*self._entries, *([self.closed] if self.closed else [])]

    def child(self, parent: Frame | None = None, *, inputs: tuple[str, ...] | None = None) -> Frame:
        """A new frame inside ``parent`` (default: the root), starting at its frontier, or, in
        a ``links="data"`` run when ``inputs`` (hex digests) are given, at those inputs."""
        parent = parent or self.root
        with self._lock:
            if inputs is None or self.links != "data":
                extra = tuple(h for h in inputs or () if h not in parent.heads)
                return Frame(self, parent, (*parent.heads, *extra))
            return Frame(self, parent, inputs, data=True)

    def emit(
        self,
        payload: Payload,
        *,
        frame: Frame | None = None,
        disclosures: Sequence[Kept] = (),
        parents: Sequence[object] | None = None,
        clear: Clear = (),
        **fields: Any,
    ) -> RunEntry:
        """Emit a record in ``frame`` (default: the root): parents are ``parents`` when given
        (records, receipts, digests, tracked values; ``ledger_client.sdk.links``), else its
        frontier. Committed-class values not named in ``clear`` are committed
        (``ledger_client.sdk.classify``)."""
        named = None if parents is None else parent_digests(parents, self.values)
        with self._lock:
            return self._emit(
                frame or self.root, payload, tuple(disclosures), fields, named, clear=clear
            )

    def finish(
        self,
        frame: Frame,
        payload: Payload,
        *,
        disclosures: Sequence[Kept] = (),
        clear: Clear = (),
        **fields: Any,
    ) -> RunEntry:
        """Emit the record that ends ``frame`` and fold it into the enclosing frame."""
        with self._lock:
            entry = self._emit(frame, payload, tuple(disclosures), fields, clear=clear)
            outer = frame.parent or self.root
            if frame.data and outer is self.root:
                return entry  # data flow: a call at the root does not become everyone's parent
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
        self,
        frame: Frame,
        payload: Payload,
        disclosures: tuple[Kept, ...],
        fields: Any,
        parents: tuple[str, ...] | None = None,
        *,
        clear: Clear = (),
    ) -> RunEntry:
        if self.closed is not None:
            raise RunStateError(f"run {self.run_id} is closed; no more records")
        fields.setdefault("agent", self.agent)
        fields.setdefault("model", self.model)
        payload, fields, committed = classify(payload, fields, clear)
        disclosures = (*disclosures, *committed)
        record = DecisionRecord(
            record_id=new_record_id(),
            run_id=self.run_id,
            step=len(self._entries),
            time=rfc3339(self._clock()),
            parent_digests=frame.heads if parents is None else parents,
            payload=payload,
            **fields,
        )
        record = _sealed(self.sink, record)
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
                outcome = {"error": error_name(error)}  # a status: the type name only, in clear
                fields = {"actual_outcome": outcome}
                self._emit(self.root, Outcome(), (), fields, clear=("actual_outcome",))
            steps = [(e.record.step, e.digest) for e in self._entries]
            parents = [bytes.fromhex(h) for h in self._closing_parents()] or None
            record = run_closed_record(
                self.run_id, steps, agent=self.agent, time=rfc3339(self._clock()),
                parent_digests=parents, model=self.model,
            )  # fmt: skip
            record = _sealed(self.sink, record)
            self.closed = RunEntry(record, self.sink.submit(record))
        _forget(self)
        self.values.clear()
        for closer in self._closers:
            closer()
        if wait and not self.sink.flush(timeout, checkpoint=True):
            raise TimeoutError(f"run {self.run_id}: the log did not acknowledge it in {timeout} s")
        return self.closed

    def _closing_parents(self) -> tuple[str, ...]:
        """``run_closed``'s parents: the root frontier, or with data links every record that
        no other record names as a parent (the sinks of the graph)."""
        if self.links != "data":
            return self.root.heads
        named = {p for e in self._entries for p in e.record.parent_digests}
        return tuple(h for e in self._entries if (h := e.digest.hex()) not in named)

    def receipts(
        self, *, disclose: Sequence[str] = (), timeout: float = 30.0, anchored: bool = False
    ) -> list[tuple[DecisionRecord, Receipt]]:
        """Every record of the closed run with its receipt (close with ``wait=True`` first).

        ``disclose``: field paths (e.g. ``parameters.url``) whose kept disclosures go into the
        receipts; every other clear value and salt stays out. ``anchored``: only receipts on an
        anchored checkpoint, waiting up to ``timeout`` for the log's schedule (the sink's
        ``anchored_receipts``, which ``LedgerClient`` has)."""
        if self.closed is None:
            raise RunStateError(f"run {self.run_id} is still open")
        entries = self.entries
        digests = [e.digest for e in entries]
        if anchored:
            wait = getattr(self.sink, "anchored_receipts", None)
            if wait is None:
                raise RunStateError(f"{type(self.sink).__name__} cannot wait for anchors")
            found: list[Receipt] = wait(digests, timeout=timeout)
        else:
            found = self.sink.receipts(digests, timeout=timeout)
        return [
            (
                entry.record,
                replace(
                    receipt,
                    record=entry.record,
                    disclosures=tuple(select_disclosures(disclose, entry.disclosures)[0]),
                ),
            )
            for entry, receipt in zip(entries, found, strict=True)
        ]

    def write_pending(self, path: str | Path) -> Path:
        """Write the closed run as JSON lines ``{"record", "receipt": null}``: the log has not
        covered it yet. ``ledger_client.sdk.run_file`` (``ledger receipt run``) completes it."""
        return write_run_file(path, [RunLine(record=entry.record) for entry in self.entries])

    def write_receipts(
        self,
        path: str | Path,
        *,
        disclose: Sequence[str] = (),
        timeout: float = 30.0,
        wait_anchor: float | None = None,
    ) -> Path:
        """Write the run as JSON lines ``{"record", "receipt"}`` (``ledger-verify run`` input),
        replacing ``path`` atomically; ``disclose``: as for ``receipts``.

        ``wait_anchor``: first wait up to that many seconds for receipts on an anchored
        checkpoint; when none comes, the file gets the receipts there are (they verify, and
        ``ledger-verify run --tsa-root`` reports them "anchors pending") and ``TimeoutError``
        names ``ledger receipt upgrade``, which adds the anchors later."""
        if wait_anchor is not None:
            try:
                anchored = self.receipts(disclose=disclose, timeout=wait_anchor, anchored=True)
                return write_run_file(path, [RunLine(record=r, receipt=rc) for r, rc in anchored])
            except TimeoutError:
                self.write_receipts(path, disclose=disclose, timeout=timeout)
                raise AnchorTimeoutError(
                    f"run {self.run_id}: no anchor covered it within {wait_anchor} s; {path} has "
                    f"its receipts without anchors: `ledger receipt upgrade {path}` adds them"
                ) from None
        receipts = self.receipts(disclose=disclose, timeout=timeout)
        return write_run_file(path, [RunLine(record=r, receipt=rc) for r, rc in receipts])

    def write_disclosures(self, path: str | Path) -> Path | None:
        """Write every kept disclosure to the private file ``path`` (mode 0600), one line per
        record ``{"record_digest", "disclosures"}``; None (no file) when there are none."""
        lines = [
            canonical_bytes(
                {
                    "record_digest": e.digest.hex(),
                    "disclosures": [d.to_json_obj() for d in e.disclosures],
                }
            )
            for e in self.entries
            if e.disclosures
        ]
        return _write_private(Path(path), lines) if lines else None


def _sealed(sink: RecordSink, record: DecisionRecord) -> DecisionRecord:
    """The record as the sink will log it: signed, when the client holds an agent key
    (``LedgerClient.seal``), so the run keeps the record whose digest is logged."""
    seal: Callable[[DecisionRecord], DecisionRecord] | None = getattr(sink, "seal", None)
    return record if seal is None else seal(record)


def _write_private(target: Path, lines: list[bytes]) -> Path:
    """Write ``lines`` to ``target``, readable by its owner only (created 0600), durably."""
    write_private(target, b"".join(line + b"\n" for line in lines))
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


def emit(
    payload: Payload,
    *,
    disclosures: Sequence[Kept] = (),
    parents: Sequence[object] | None = None,
    clear: Clear = (),
    **fields: Any,
) -> RunEntry:
    """Emit a record in the current frame (e.g. a ``ToolSelection`` inside a decorated call);
    ``parents``: its parents exactly (``Run.emit``), else the frame's frontier. Reasons, plan
    steps, candidate actions, parameters, outcomes and memory values are committed unless named
    in ``clear`` (``ledger_client.sdk.classify``; ``"*"`` keeps all in clear)."""
    frame = current_frame()
    if frame is None:
        raise RunStateError("no ledger run is open here; use `with ledger_run(...)`")
    return frame.run.emit(
        payload, frame=frame, disclosures=disclosures, parents=parents, clear=clear, **fields
    )


# --- ledger_run --------------------------------------------------------------------------------


class RunContext:
    """``with``/``async with`` wrapper of a ``Run``: current on entry, closed on exit."""

    def __init__(
        self,
        run: Run,
        *,
        receipts: str | Path | None = None,
        disclose: Sequence[str] = (),
        disclosures: str | Path | None = None,
        receipts_timeout: float = 30.0,
        wait_anchor: float | None = None,
    ) -> None:
        self.run = run
        self.wait_anchor = wait_anchor
        self.receipts_path = None if receipts is None else Path(receipts)
        self._disclose = tuple(disclose)
        self._timeout = receipts_timeout
        if disclosures is None and self.receipts_path is not None:
            disclosures = private_path(self.receipts_path)
        self.disclosures_path = None if disclosures is None else Path(disclosures)
        self._tokens: list[contextvars.Token[Frame | None]] = []

    def __enter__(self) -> Run:
        propagate_threads()
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
            self.run.close(error=exc, wait=self.receipts_path is not None, timeout=self._timeout)
            self._write_disclosures()
            if self.receipts_path is not None:
                self.run.write_receipts(
                    self.receipts_path,
                    disclose=self._disclose,
                    timeout=self._timeout,
                    wait_anchor=self.wait_anchor,
                )
        except AnchorTimeoutError:
            raise  # the receipts file is written, without anchors
        except TimeoutError:
            if self.run.closed is not None:
                self._write_disclosures()
                if self.receipts_path is not None:
                    self.run.write_pending(self.receipts_path)
            raise
        finally:
            _forget(self.run)

    def _write_disclosures(self) -> None:
        if self.disclosures_path is not None:
            self.run.write_disclosures(self.disclosures_path)


def ledger_run(
    client: RecordSink | _WrapsSink,
    *,
    agent: str,
    run_id: str | None = None,
    model: str | None = None,
    receipts: str | Path | None = None,
    disclose: Sequence[str] = (),
    disclosures: str | Path | None = None,
    links: str = "data",
    clock: Callable[[], float] = time.time,
    receipts_timeout: float = 30.0,
    wait_anchor: float | None = None,
) -> RunContext:
    """Open a run of ``agent`` on ``client`` (a ``LedgerClient`` or ``AsyncLedgerClient``).

    ``receipts``: on exit, wait for the log to cover the run and write every record with its
    receipt to this JSON-lines file (``ledger-verify run`` reads it). The kept disclosures
    (clear values and salts of commitments) go to the private file ``disclosures`` (default:
    beside the receipts, ``<name>.disclosures.jsonl``, mode 0600), and into the shared receipts
    only for the field paths in ``disclose``. ``links``: ``"data"`` (parents follow data flow)
    or ``"sequence"`` (step order), see the module docstring. When the log does not cover the
    run within ``receipts_timeout`` seconds, the receipts file gets the records with
    ``"receipt": null`` and ``TimeoutError`` is raised; ``ledger receipt run`` completes it.
    ``wait_anchor``: seconds to wait, on exit, for receipts on an anchored checkpoint (the log's
    anchoring schedule; the SDK never asks it to anchor) so that ``ledger-verify run
    --tsa-root`` passes on the file as written; when none comes in time, the file gets the
    unanchored receipts and ``TimeoutError`` names ``ledger receipt upgrade``. Without it, the
    receipts are fetched at once and ``--tsa-root`` reports the run "anchors pending".
    """
    sink: RecordSink = client.sync if hasattr(client, "sync") else client
    run = Run(sink, agent=agent, run_id=run_id, model=model, clock=clock, links=links)
    return RunContext(
        run,
        receipts=receipts,
        disclose=disclose,
        disclosures=disclosures,
        receipts_timeout=receipts_timeout,
        wait_anchor=wait_anchor,
    )


def private_path(receipts: Path) -> Path:
    """Where a run's private disclosures go by default (``run.jsonl``: beside it, in
    ``run.disclosures.jsonl``)."""
    return receipts.with_name(f"{receipts.stem}.disclosures.jsonl")


# --- threads -----------------------------------------------------------------------------------


_ORIGINAL_START = threading.Thread.start
_INSTALL_LOCK = threading.Lock()


def in_context(fn: Callable[_P, _T]) -> Callable[_P, _T]:
    """``fn`` bound to a copy of the current context: called in any thread, its records go to
    the run current here."""
    context = contextvars.copy_context()

    @functools.wraps(fn)
    def bound(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        return context.run(fn, *args, **kwargs)

    return bound


def _start(self: threading.Thread) -> None:
    if _FRAME.get() is not None and "run" not in vars(self):
        self.run = in_context(self.run)  # type: ignore[method-assign]
    _ORIGINAL_START(self)


def propagate_threads(enabled: bool = True) -> None:
    """Make every ``threading.Thread`` started where a ledger frame is current run in a copy of
    its starter's context (``ledger_run`` calls it); ``False`` removes that."""
    with _INSTALL_LOCK:
        threading.Thread.start = _start if enabled else _ORIGINAL_START  # type: ignore[method-assign]


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` whose tasks run in a copy of the submitter's context."""

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        context = contextvars.copy_context()
        return super().submit(context.run, fn, *args, **kwargs)  # type: ignore[arg-type]
